//! Running one case in process through the public API (formats parsed as
//! `tensorc -f` parses them, `execute::prepare`, the JIT) and judging it
//! against the dense oracle.

use super::case::{tns_lines, Case};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use tensor_compiler::coo::CooTensor;
use tensor_compiler::execute::prepare;
use tensor_compiler::format::{parse_format, Registry};
use tensor_compiler::notation::parse_assignment;
use tensor_compiler::threads::Threads;
use tensor_compiler::{oracle, storage};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    Pass,
    /// A clean error: the compiler says it cannot do this.
    Refused,
    /// Exit 0 with a wrong answer (or a result that breaks its own format).
    Wrong,
    /// A panic, an internal error, a dead or frozen process.
    Crash,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Pass => "pass",
            Class::Refused => "refused",
            Class::Wrong => "wrong",
            Class::Crash => "crash",
        }
    }
    pub fn parse(s: &str) -> Option<Class> {
        [Class::Pass, Class::Refused, Class::Wrong, Class::Crash]
            .into_iter()
            .find(|c| c.name() == s)
    }
}

#[derive(Clone, Debug)]
pub struct Outcome {
    pub class: Class,
    /// The error text (refused, crash) or what differs (wrong).
    pub message: String,
    /// For wrong answers and crashes: how to reproduce.
    pub detail: String,
}

impl Outcome {
    fn new(class: Class, message: impl Into<String>) -> Self {
        Outcome {
            class,
            message: message.into(),
            detail: String::new(),
        }
    }
}

/// Relative tolerance of the comparison with the oracle. Values are
/// multiples of 1/4, so most results are exact; this allows for the
/// reassociation of sums.
pub const TOLERANCE: f64 = 1e-9;

/// `DIFFERENTIAL_TIER=cc` runs each case's kernel on the cc tier (its C,
/// compiled by the system C compiler) instead of Cranelift: the same cases
/// against the same oracle, for the code most runs end up on.
pub fn on_cc_tier() -> bool {
    std::env::var("DIFFERENTIAL_TIER").is_ok_and(|t| t == "cc")
}

/// `DIFFERENTIAL_AS_IF_LARGE=1` compiles each case's kernel as if made for
/// data of 16M entries in every operand, with scattered coordinates and
/// long rows: what the Cranelift tier does only on large data (rows summed
/// in strips, `ir::strips`; asks for rows ahead by calls, `ir::prefetch`;
/// asks for gathered elements, `ir::gathers`; scans for a long row's end
/// in strides, `ir::run_strides`) then runs on every case's small data.
pub fn as_if_large() -> bool {
    std::env::var_os("DIFFERENTIAL_AS_IF_LARGE").is_some_and(|v| v == "1")
}

/// `DIFFERENTIAL_NON_FINITE=1` stores infinities and NaNs among the
/// operands' values (`data::random`) and judges each case by the oracle
/// that reads an absent entry as no entry (`oracle::evaluate_stored`):
/// `inf` times an entry an operand does not store adds nothing, whatever
/// the format stores there.
pub fn non_finite() -> bool {
    std::env::var_os("DIFFERENTIAL_NON_FINITE").is_some_and(|v| v == "1")
}

/// Run `case` and judge it. Panics are caught and reported as crashes.
pub fn judge(case: &Case) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| attempt(case))) {
        Ok(o) => o,
        Err(p) => Outcome::new(Class::Crash, format!("panic: {}", panic_text(&*p))),
    }
}

pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

fn attempt(case: &Case) -> Outcome {
    let a = match parse_assignment(&case.expr) {
        Ok(a) => a,
        Err(e) => {
            return Outcome::new(
                Class::Crash,
                format!("the generator wrote an expression that does not parse: {e}"),
            )
        }
    };
    let registry = Registry::builtin();
    let mut formats = BTreeMap::new();
    for o in case.inputs.iter().chain(std::iter::once(&case.result)) {
        match parse_format(&o.format, o.dims.len(), &registry) {
            Ok(f) => {
                formats.insert(o.name.clone(), f);
            }
            Err(e) => return Outcome::new(Class::Refused, format!("-f {}: {e}", o.format)),
        }
    }
    let data = case.data();
    let initial = if a.accumulate {
        case.result.data.as_ref()
    } else {
        None
    };
    let out_dims = &case.result.dims;
    let want = match expected(case) {
        Ok(w) => w,
        Err(e) => return Outcome::new(Class::Crash, e),
    };
    let mut prepared = match prepare("kernel", &a, &formats, &data, out_dims, initial) {
        Ok(p) => p,
        Err(e) => return error_outcome(e.to_string()),
    };
    if as_if_large() {
        let f = &mut prepared.kernel.function;
        f.make_as_if_large();
        // Rows of an ordered first level as if long, so that the scans for
        // their ends take strides (`ir::run_strides`) and runs are kept in registers
        // (`ir::runs`) on every case's short rows too.
        for r in f.runs.iter_mut().filter(|r| r.ascending) {
            r.per_coordinate = r.per_coordinate.max(1 << 10);
            r.stored = r.stored.max(1 << 24);
        }
        match tensor_compiler::jit::compile(f) {
            Ok(k) => prepared.compiled = k,
            Err(e) => return Outcome::new(Class::Crash, format!("as if large: {e}")),
        }
    }
    if on_cc_tier() {
        // The emitted C must compile: a compiler error is a defect.
        match tensor_compiler::backend::cc::compile(&prepared.kernel.function) {
            Ok(k) => prepared.compiled = k,
            Err(e) => return Outcome::new(Class::Crash, format!("cc tier: {e}")),
        }
    }
    let fresh = prepared.output.clone();
    // A kernel whose result is neither updated (`+=`) nor read on its own
    // right-hand side gives the same result when run again over its last
    // one, as a timing loop runs it: every old value must be replaced.
    let reruns = !a.accumulate && a.rhs.accesses().iter().all(|x| x.tensor != a.lhs.tensor);
    // Once as a user runs it, then, where the outermost loop can be shared,
    // on 3 threads however small the case (uneven shares, some empty), or
    // else once more on one.
    let mut runs = vec![None];
    if prepared.compiled.parallel.is_some() {
        runs.push(Some(3));
    } else if reruns {
        runs.push(Some(1));
    }
    for threads in runs {
        if let Some(n) = threads {
            if !reruns {
                prepared.output = fresh.clone();
            }
            prepared.threads = Threads::exactly(n);
        }
        let on = match threads {
            None => String::new(),
            Some(n) if reruns => format!("on {n} thread(s), over the first run's result: "),
            Some(n) => format!("on {n} threads: "),
        };
        if let Err(e) = prepared.run() {
            return Outcome::new(Class::Crash, format!("{on}run: {e}"));
        }
        if let Err(e) = storage::validate(&prepared.output) {
            return Outcome::new(
                Class::Wrong,
                format!("{on}the result breaks its own format: {e}"),
            );
        }
        let got = match prepared.result() {
            Ok(g) => g,
            Err(e) => {
                return Outcome::new(
                    Class::Wrong,
                    format!("{on}the result cannot be read back: {e}"),
                )
            }
        };
        let extra = || {
            super::pattern::outside_pattern(
                &a,
                &formats[&case.result.name],
                &data,
                &prepared.inputs,
                initial,
                &got,
            )
        };
        if let Some(diff) = compare(&got, &want).or_else(extra) {
            let mut o = Outcome::new(Class::Wrong, format!("{on}{diff}"));
            o.detail = format!(
                "want:\n{}got:\n{}",
                indent(&tns_lines(&want.canonical())),
                indent(&tns_lines(&got.canonical()))
            );
            return o;
        }
    }
    // The IR the tier translates, run by the bounds-checked interpreter:
    // an access past an array's end is a defect even where the machine
    // code's answer came out right (a padded zero read past a vector, a
    // store past a result's length into its spare capacity).
    let backend = if on_cc_tier() {
        tensor_compiler::ir::passes::Backend::C
    } else {
        tensor_compiler::ir::passes::Backend::Cranelift
    };
    let interpreted = prepare("kernel", &a, &formats, &data, out_dims, initial)
        .map_err(|e| e.to_string())
        .and_then(|mut p| {
            p.run_interpreted_as(backend)?;
            p.result().map_err(|e| e.to_string())
        });
    match interpreted {
        Err(e) => Outcome::new(Class::Crash, format!("in the IR interpreter: {e}")),
        Ok(by_ir) => match compare(&by_ir, &want) {
            Some(diff) => Outcome::new(Class::Wrong, format!("in the IR interpreter: {diff}")),
            None => Outcome::new(Class::Pass, ""),
        },
    }
}

/// The oracle's answer for `case`.
pub fn expected(case: &Case) -> Result<CooTensor, String> {
    let a = parse_assignment(&case.expr).map_err(|e| e.to_string())?;
    let initial = if a.accumulate {
        case.result.data.as_ref()
    } else {
        None
    };
    let answer = if non_finite() {
        // Operands in all-dense formats store every coordinate.
        let registry = Registry::builtin();
        let all_stored = case
            .inputs
            .iter()
            .chain(std::iter::once(&case.result))
            .filter(|o| {
                parse_format(&o.format, o.dims.len(), &registry).is_ok_and(|f| f.is_all_dense())
            })
            .map(|o| o.name.clone())
            .collect();
        oracle::evaluate_stored(&a, &case.data(), &all_stored, &case.result.dims, initial)
    } else {
        oracle::evaluate(&a, &case.data(), &case.result.dims, initial)
    };
    answer.map_err(|e| format!("the oracle cannot evaluate the case: {e}"))
}

/// A clean refusal, unless the message owns up to being internal.
fn error_outcome(message: String) -> Outcome {
    let lower = message.to_ascii_lowercase();
    if lower.contains("internal") || lower.contains("panic") {
        Outcome::new(Class::Crash, message)
    } else {
        Outcome::new(Class::Refused, message)
    }
}

/// `None` when equal within tolerance; else the first differing entry.
pub fn compare(got: &CooTensor, want: &CooTensor) -> Option<String> {
    if got.dims != want.dims {
        return Some(format!(
            "result dimensions {:?}, expected {:?}",
            got.dims, want.dims
        ));
    }
    let (g, w) = (got.to_dense(), want.to_dense());
    // Infinities equal when of one sign, NaNs when both are. With
    // non-finite operands, any two non-finite values: which one a sum of
    // infinities comes to depends on how its terms are grouped (the
    // oracle sums `k` before multiplying by `D(l,j)` in `B(i,k,l) *
    // C(k,j) * D(l,j)`, the loops multiply each term through, and
    // `inf * 1` is not `inf * 1 + inf * 0`), and neither grouping is the
    // one answer. A finite value against a non-finite one still differs.
    let same = |x: f64, y: f64| {
        x == y
            || (x.is_nan() && y.is_nan())
            || (non_finite() && !x.is_finite() && !y.is_finite())
            || (x - y).abs() <= TOLERANCE * (1.0 + x.abs().max(y.abs()))
    };
    let bad: Vec<usize> = (0..w.len()).filter(|&n| !same(g[n], w[n])).collect();
    let &first = bad.first()?;
    let mut coord = vec![0usize; want.dims.len()];
    let mut rest = first;
    for d in (0..coord.len()).rev() {
        coord[d] = rest % want.dims[d];
        rest /= want.dims[d];
    }
    Some(format!(
        "{} of {} entries differ; at {:?} got {}, want {}",
        bad.len(),
        w.len(),
        coord,
        g[first],
        w[first]
    ))
}

fn indent(s: &str) -> String {
    if s.is_empty() {
        return "    (no entries)\n".into();
    }
    s.lines().map(|l| format!("    {l}\n")).collect()
}

/// Shrink a wrong case: drop input entries and simplify values while the
/// answer stays wrong, so the reproducer is small. Bounded in attempts and
/// in time (slow compiles must not make the case look frozen).
pub fn minimize(case: &Case) -> Case {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let still_wrong = |c: &Case| judge(c).class == Class::Wrong;
    let mut best = case.clone();
    let names: Vec<String> = best
        .inputs
        .iter()
        .chain(std::iter::once(&best.result))
        .filter(|o| o.data.is_some())
        .map(|o| o.name.clone())
        .collect();
    let mut budget = 400usize;
    for name in &names {
        let mut e = 0;
        loop {
            let nnz = best.operand_mut(name).data.as_ref().map_or(0, |d| d.nnz());
            if e >= nnz || budget == 0 || std::time::Instant::now() > deadline {
                break;
            }
            budget -= 1;
            let mut trial = best.clone();
            remove_entry(trial.operand_mut(name).data.as_mut().unwrap(), e);
            if still_wrong(&trial) {
                best = trial;
            } else {
                e += 1;
            }
        }
    }
    for name in &names {
        let nnz = best.operand_mut(name).data.as_ref().map_or(0, |d| d.nnz());
        for e in 0..nnz {
            if budget == 0 || std::time::Instant::now() > deadline {
                break;
            }
            if best.operand_mut(name).data.as_ref().unwrap().vals[e] == 1.0 {
                continue;
            }
            budget -= 1;
            let mut trial = best.clone();
            trial.operand_mut(name).data.as_mut().unwrap().vals[e] = 1.0;
            if still_wrong(&trial) {
                best = trial;
            }
        }
    }
    best
}

fn remove_entry(t: &mut CooTensor, e: usize) {
    let n = t.order();
    t.vals.remove(e);
    t.coords.drain(e * n..(e + 1) * n);
}
