//! Collecting judged cases: counts per class and per family, refusals
//! grouped by their normalised message, wrong answers and crashes with
//! their reproducers.

use super::run::Class;
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Clone, Debug)]
pub struct Record {
    pub seed: u64,
    pub family: String,
    pub class: Class,
    pub message: String,
    /// One-line description of the case (empty for passes).
    pub case: String,
    /// Reproducer and expected/actual result (wrong answers and crashes).
    pub detail: String,
    /// CPU time the case took in its worker (compile, run, oracle).
    pub cpu_ms: f64,
}

impl Record {
    pub fn to_json(&self) -> serde_json::Value {
        let case = if self.class == Class::Pass && self.cpu_ms < SLOW_MS {
            ""
        } else {
            self.case.as_str()
        };
        serde_json::json!({ "seed": self.seed, "family": self.family, "class": self.class.name(), "message": self.message, "case": case, "detail": self.detail, "cpu_ms": self.cpu_ms })
    }

    pub fn from_json(v: &serde_json::Value) -> Option<Record> {
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        Some(Record {
            seed: v.get("seed")?.as_u64()?,
            family: s("family")?,
            class: Class::parse(&s("class")?)?,
            message: s("message")?,
            case: s("case")?,
            detail: s("detail")?,
            cpu_ms: v.get("cpu_ms").and_then(|x| x.as_f64()).unwrap_or(0.0),
        })
    }
}

/// A message with its variable parts replaced, so that the same refusal
/// for different tensors, variables, formats and sizes counts as one.
pub fn normalize(message: &str) -> String {
    // A loop-order conflict lists every operand involved; what counts is
    // whether the result's assembly order is one side, and the advice.
    if let Some(rest) = message.strip_prefix("no loop order works:") {
        let who = if rest.contains("assembled in order") {
            "the result's assembly order conflicts with an operand's"
        } else {
            "operands visit their indices in conflicting orders"
        };
        let advice = rest.rsplit(';').next().unwrap_or("");
        let advice = advice.split(" (-f").next().unwrap_or(advice);
        return format!("no loop order works: {who};{}", tokens(advice));
    }
    tokens(message)
}

fn tokens(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        if c == '`' {
            // Quoted text names the user's tensors or expression.
            for d in chars.by_ref() {
                if d == '`' {
                    break;
                }
            }
            out.push_str("`_`");
        } else if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|d| d.is_ascii_digit() || *d == '.')
            {
                chars.next();
            }
            out.push('N');
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut word = String::from(c);
            while let Some(&d) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' {
                    word.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push_str(&if prev == '-' || chars.peek() == Some(&'=') {
                word
            } else {
                normalize_word(&word, chars.peek() == Some(&'('))
            });
        } else {
            out.push(c);
        }
        prev = c;
    }
    out
}

/// Tensor and level names (`B`, `B1`, `x1`: a letter and digits, or a
/// short word before `(`) become `T`; index variables (one lowercase
/// letter other than the article, or a hidden block variable such as
/// `iblkB`) become `v`: `B(i,j)` becomes `T(v,v)`.
fn normalize_word(w: &str, before_paren: bool) -> String {
    let mut cs = w.chars();
    let first = cs.next().unwrap();
    let rest: String = cs.collect();
    let numbered = !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit());
    let hidden = ["blk", "in"].iter().any(|m| {
        rest.starts_with(m)
            && rest.len() > m.len()
            && rest[m.len()..].starts_with(|c: char| c.is_ascii_uppercase())
    });
    if numbered || (first.is_ascii_uppercase() && rest.is_empty()) || (before_paren && w.len() <= 2)
    {
        "T".into()
    } else if hidden || (w.len() == 1 && first.is_ascii_lowercase() && w != "a") {
        "v".into()
    } else {
        w.to_string()
    }
}

/// A case this slow (tiny tensors) is reported: it points at a blow-up in
/// the compiler, such as a union whose lattice grows exponentially.
pub const SLOW_MS: f64 = 2000.0;

#[derive(Default)]
pub struct Summary {
    pub records: Vec<Record>,
}

impl Summary {
    pub fn new(records: Vec<Record>) -> Self {
        Summary { records }
    }

    pub fn count(&self, class: Class) -> usize {
        self.records.iter().filter(|r| r.class == class).count()
    }

    /// Normalised refusal messages with their counts and one example case,
    /// most frequent first.
    pub fn refusals(&self) -> Vec<(String, usize, &Record)> {
        let mut groups: BTreeMap<String, (usize, &Record)> = BTreeMap::new();
        for r in self.records.iter().filter(|r| r.class == Class::Refused) {
            groups.entry(normalize(&r.message)).or_insert((0, r)).0 += 1;
        }
        let mut v: Vec<(String, usize, &Record)> =
            groups.into_iter().map(|(m, (n, r))| (m, n, r)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// The whole report: counts, per-family table, refusals by message,
    /// then every wrong answer and crash with its reproducer (at most
    /// `max_listed` of each class; the rest are counted).
    fn pct(&self, n: usize) -> f64 {
        100.0 * n as f64 / self.records.len().max(1) as f64
    }

    fn counts(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "differential cases: {}", self.records.len());
        for c in [Class::Pass, Class::Refused, Class::Wrong, Class::Crash] {
            let _ = writeln!(
                s,
                "  {:<8} {:>6}  ({:.1}%)",
                c.name(),
                self.count(c),
                self.pct(self.count(c))
            );
        }
        s
    }

    /// The counts and the `top` most frequent refusal messages.
    pub fn headline(&self, top: usize) -> String {
        let mut s = self.counts();
        let refusals = self.refusals();
        let _ = writeln!(
            s,
            "most frequent refusals ({} distinct messages):",
            refusals.len()
        );
        for (m, n, _) in refusals.iter().take(top) {
            let _ = writeln!(s, "  {n:>6} ({:.1}%)  {m}", self.pct(*n));
        }
        s
    }

    pub fn render(&self, max_listed: usize) -> String {
        let pct = |n: usize| self.pct(n);
        let mut s = self.counts();
        let mut fam: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
        for r in &self.records {
            fam.entry(&r.family).or_default()[r.class as usize] += 1;
        }
        let _ = writeln!(s, "\nby family:            pass refused  wrong  crash");
        for (f, n) in &fam {
            let _ = writeln!(
                s,
                "  {f:<18} {:>6} {:>7} {:>6} {:>6}",
                n[0], n[1], n[2], n[3]
            );
        }
        let refusals = self.refusals();
        let _ = writeln!(
            s,
            "\nrefusals by message ({} cases, {:.1}%; {} distinct):",
            self.count(Class::Refused),
            pct(self.count(Class::Refused)),
            refusals.len()
        );
        for (m, n, r) in &refusals {
            let _ = writeln!(
                s,
                "  {n:>6} ({:.1}%)  {m}\n           e.g. seed {}: {}\n                {}",
                pct(*n),
                r.seed,
                r.case,
                r.message
            );
        }
        let mut slow: Vec<&Record> = self
            .records
            .iter()
            .filter(|r| r.cpu_ms >= SLOW_MS)
            .collect();
        slow.sort_by(|a, b| b.cpu_ms.total_cmp(&a.cpu_ms));
        let _ = writeln!(
            s,
            "\nslow cases (at least {} s of CPU; not failures): {}",
            SLOW_MS / 1000.0,
            slow.len()
        );
        for r in slow.iter().take(10) {
            let _ = writeln!(
                s,
                "  {:>8.1} s  seed {} [{}] {}: {}",
                r.cpu_ms / 1000.0,
                r.seed,
                r.family,
                r.class.name(),
                if r.case.is_empty() {
                    &r.message
                } else {
                    &r.case
                }
            );
        }
        for c in [Class::Wrong, Class::Crash] {
            let list: Vec<&Record> = self.records.iter().filter(|r| r.class == c).collect();
            if list.is_empty() {
                continue;
            }
            let _ = writeln!(s, "\n{} cases ({}):", c.name(), list.len());
            for r in list.iter().take(max_listed) {
                let _ = writeln!(
                    s,
                    "--- seed {} [{}] {}\n    {}\n{}",
                    r.seed,
                    r.family,
                    r.case,
                    r.message,
                    indent(&r.detail)
                );
            }
            if list.len() > max_listed {
                let _ = writeln!(s, "... and {} more", list.len() - max_listed);
            }
        }
        s
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}\n")).collect()
}
