//! What the editor shows about a compiled kernel, read from the code
//! generator's public outputs: the loop order and the per-variable plans of
//! each nest (`lower::Nest`), the hidden and derived variables of blocked
//! and diagonal formats (`lower::operands::Problem`), and the loops of the
//! loop IR (`ir::Function`). This is the one place in `ide` that knows those
//! types; hovers and inlay hints read the plain structs below.

use crate::ir::print::{Dialect, Printer};
use crate::ir::{Block, Function, Stmt, VarId};
use crate::lower::operands::Problem;
use crate::lower::plan::NamedPlan;
use crate::lower::vars::IndexVar;
use crate::lower::Kernel;
use std::collections::BTreeMap;

/// A variable whose loops do the work of a variable the user wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Related {
    pub name: String,
    /// Why it belongs to the user's variable, e.g. `i = iblkA * 4 + iinA`.
    pub why: String,
}

/// A loop of the loop IR that iterates one of the variables.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopFact {
    /// The variable (user's or hidden) whose coordinates the loop visits.
    pub var: String,
    /// The loop's header in C, e.g. `for (int64_t jA = A2_pos[i]; ...)`.
    pub header: String,
    /// Nesting depth in the kernel, 0 for the outermost loops.
    pub depth: usize,
}

/// Everything shown for one index variable the user wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct VarFacts {
    /// Loop order of each nest, outermost first.
    pub orders: Vec<Vec<String>>,
    pub related: Vec<Related>,
    /// Plans of the variable and of its related variables, in loop order,
    /// as text.
    pub plans: Vec<String>,
    pub loops: Vec<LoopFact>,
    /// How threads share the loop over the variable, when it is the
    /// outermost loop and runs on several threads.
    pub shared: Option<String>,
}

/// In one nest, the variables whose loops do the work of the user's
/// variable `var`: itself, the block variables it is computed from (BCSR,
/// CSB), and the hidden variables of the operands it indexes that no user
/// variable is computed from (DIA's diagonals, ELL's slots); each but
/// itself with why it belongs to `var`.
fn related_in(p: &Problem, var: &str) -> (Option<IndexVar>, Vec<(IndexVar, String)>) {
    let vars = &p.vars;
    let own = vars.user(var);
    let mut out: Vec<(IndexVar, String)> = Vec::new();
    let mut add = |v: IndexVar, why: String| {
        if !out.iter().any(|(w, _)| *w == v) {
            out.push((v, why));
        }
    };
    if let Some((outer, inner, b)) = own.and_then(|v| vars.derivation(v)) {
        let formula = format!(
            "`{var} = {} * {b} + {}`",
            vars.name(outer),
            vars.name(inner)
        );
        add(outer, format!("{formula}: block of `{var}`"));
        add(
            inner,
            format!("{formula}: position of `{var}` inside its block"),
        );
    }
    for o in &p.operands {
        if own.is_none_or(|v| !o.dim_vars.contains(&v)) {
            continue;
        }
        for &lv in &o.level_vars {
            if vars.is_hidden(lv) && !vars.derives_another(lv) {
                add(
                    lv,
                    format!(
                        "hidden level variable of `{}` ({})",
                        o.access,
                        o.format.display_name()
                    ),
                );
            }
        }
    }
    (own, out)
}

pub fn var_facts(k: &Kernel, var: &str) -> VarFacts {
    let mut related: Vec<Related> = Vec::new();
    let mut plans = Vec::new();
    // Per nest, the ids of `var` and of its related variables.
    let mut ids_per_nest: Vec<Vec<IndexVar>> = Vec::new();
    for nest in &k.nests {
        let vars = &nest.problem.vars;
        let (own, rel) = related_in(&nest.problem, var);
        for (v, why) in &rel {
            if !related.iter().any(|r| r.name == vars.name(*v)) {
                related.push(Related {
                    name: vars.name(*v).to_string(),
                    why: why.clone(),
                });
            }
        }
        let ids: Vec<IndexVar> = own
            .into_iter()
            .chain(rel.into_iter().map(|(v, _)| v))
            .collect();
        for v in nest.graph.order.iter().filter(|v| ids.contains(v)) {
            plans.extend(
                nest.plans
                    .iter()
                    .filter(|p| p.var == *v)
                    .map(|plan| NamedPlan { plan, vars }.to_string()),
            );
        }
        ids_per_nest.push(ids);
    }
    // The IR variables holding coordinates of those variables, by name.
    let coords: BTreeMap<VarId, &str> = k
        .nests
        .iter()
        .zip(&ids_per_nest)
        .flat_map(|(n, ids)| {
            n.coords
                .iter()
                .filter(|(_, v)| ids.contains(v))
                .map(|&(id, v)| (id, n.problem.vars.name(v)))
        })
        .collect();
    let mut loops = Vec::new();
    Walk {
        f: &k.function,
        coords: &coords,
    }
    .block(&k.function.body, 0, &mut loops);
    let outermost = k.nests.first().and_then(|n| {
        let v = *n.graph.order.first()?;
        ids_per_nest[0].contains(&v).then(|| n.problem.vars.name(v))
    });
    let out = k.output();
    let shared = match (k.function.parallel, outermost) {
        (Some(crate::ir::Parallel::Rows), Some(v)) => Some(format!("the loop over `{v}` runs on several threads, each over its own share of the iterations, writing its own part of `{out}`")),
        (Some(crate::ir::Parallel::Stitch), Some(v)) => Some(format!("the loop over `{v}` runs on several threads, each over its own rows into a `{out}` of its own; they are stitched together after")),
        (Some(crate::ir::Parallel::Partials), Some(v)) => Some(format!("the loop over `{v}` runs on several threads, each over its own share of the iterations into a `{out}` of its own; they are added up after")),
        _ => None,
    };
    let orders = k
        .nests
        .iter()
        .map(|n| n.problem.vars.names(&n.graph.order))
        .collect();
    VarFacts {
        orders,
        related,
        plans,
        loops,
        shared,
    }
}

/// Walks the loop IR for the loops that visit some variables.
struct Walk<'a> {
    f: &'a Function,
    /// The IR variables holding coordinates of those variables, with the
    /// variable's name.
    coords: &'a BTreeMap<VarId, &'a str>,
}

impl Walk<'_> {
    fn var(&self, id: VarId) -> Option<&str> {
        self.coords.get(&id).copied()
    }

    /// The variable a loop visits: its own counter, or a coordinate it
    /// binds before its first other statement.
    fn visited(&self, counter: Option<VarId>, body: &Block) -> Option<&str> {
        counter.and_then(|c| self.var(c)).or_else(|| {
            body.iter()
                .take_while(|s| matches!(s, Stmt::Let(..) | Stmt::Comment(_)))
                .find_map(|s| match s {
                    Stmt::Let(id, _) => self.var(*id),
                    _ => None,
                })
        })
    }

    fn block(&self, b: &Block, depth: usize, out: &mut Vec<LoopFact>) {
        let p = Printer::new(&self.f.vars, Dialect::C);
        for s in b {
            match s {
                Stmt::For { var, lo, hi, body } => {
                    if let Some(v) = self.visited(Some(*var), body) {
                        let n = p.var_name(*var);
                        out.push(LoopFact {
                            var: v.to_string(),
                            header: format!(
                                "for (int64_t {n} = {}; {n} < {}; {n}++)",
                                p.expr(lo),
                                p.expr(hi)
                            ),
                            depth,
                        });
                    }
                    self.block(body, depth + 1, out);
                }
                Stmt::While { cond, body } => {
                    if let Some(v) = self.visited(None, body) {
                        out.push(LoopFact {
                            var: v.to_string(),
                            header: format!("while ({})", p.expr(cond)),
                            depth,
                        });
                    }
                    self.block(body, depth + 1, out);
                }
                Stmt::If { then, els, .. } => {
                    self.block(then, depth, out);
                    self.block(els, depth, out);
                }
                _ => {}
            }
        }
    }
}

/// Inlay hint of one statement: a short label (VS Code cuts labels at
/// about 43 characters) and the full text for the tooltip.
pub fn statement_hint(k: &Kernel) -> (String, String) {
    let order: Vec<String> = k
        .nests
        .iter()
        .map(|n| n.problem.vars.join(&n.graph.order, "→"))
        .collect();
    let full_plans: Vec<String> = k.plans().map(|p| p.summary()).collect();
    let mut full = format!("∀ {} | {}", order.join(" ; "), full_plans.join(" | "));
    // Operands converted before the kernel come first: they cost a pass.
    let converts: Vec<String> = k
        .conversions
        .iter()
        .map(|c| format!("{}→{}", c.source, c.format_text))
        .collect();
    if !converts.is_empty() {
        full = format!("converts {} first | {full}", converts.join(", "));
    }
    // Short form: only the variables whose loops do more than walk one
    // level, named by level (`A2`, not `A2:compressed`).
    let mut parts: Vec<String> = converts;
    for p in k.plans() {
        if let Some(s) = short_strategy(&p) {
            if !parts.contains(&s) {
                parts.push(s);
            }
        }
    }
    if parts.is_empty() {
        if let Some(p) = k.plans().last() {
            parts.push(format!(
                "{}: {}",
                p.var(),
                level_list(&p.loops()[0].coiterated, "∧")
            ));
        }
    }
    let short_order: Vec<String> = k
        .nests
        .iter()
        .map(|n| n.problem.vars.join(&n.graph.order, "→"))
        .collect();
    let mut short = format!("∀{}", short_order.join(";"));
    for part in parts {
        let candidate = format!("{short} · {part}");
        if candidate.chars().count() > HINT_LIMIT {
            if !short.ends_with('…') {
                short.push_str(" …");
            }
            break;
        }
        short = candidate;
    }
    (short, full)
}

/// VS Code shows at most this many characters of an inlay hint.
pub const HINT_LIMIT: usize = 43;

/// `A2:compressed` → `A2`, `dedup<B1:compressed(nonunique)>` → `dedup<B1>`.
fn level_list(levels: &[String], sep: &str) -> String {
    let short = |l: &String| {
        let name = l.split(':').next().unwrap_or(l).trim();
        format!("{name}{}", ">".repeat(name.matches('<').count()))
    };
    levels.iter().map(short).collect::<Vec<_>>().join(sep)
}

/// The strategy of a variable in a few characters, or None when its loop
/// only walks one level with nothing located (the common dense row loop).
fn short_strategy(p: &NamedPlan) -> Option<String> {
    let first = &p.loops()[0];
    let mut s = String::new();
    if first.fused {
        s.push_str(&format!("fused {}", level_list(&first.coiterated, ",")));
    } else if first.coiterated.len() > 1 {
        s.push_str(&level_list(&first.coiterated, "∧"));
    } else if !first.located.is_empty() {
        s.push_str(&level_list(&first.coiterated, ""));
    }
    if !first.located.is_empty() {
        s.push_str(&format!("→loc {}", level_list(&first.located, ",")));
    }
    if p.loops().len() > 1 {
        s.push_str(&format!(" ({} pts)", p.loops().len()));
    }
    (!s.is_empty()).then(|| format!("{}: {s}", p.var()))
}
