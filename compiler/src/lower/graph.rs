//! The iteration graph: index variables ordered so that every operand's
//! levels are visited outermost first. Fully locatable operands (dense,
//! hashed) are accessed by locate and only constrain the order when that is
//! possible; results assembled by append also need their coordinates in
//! order, before any reduction.

use super::ids::OperandId;
use super::operands::{Operand, Problem};
use super::vars::{IndexVar, IndexVars};
use super::LowerError;
use crate::format::level::Assembly;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

#[derive(Clone, Debug)]
pub struct IterationGraph {
    /// Loop order, outermost first.
    pub order: Vec<IndexVar>,
    /// Operands whose paths were not used to order loops (accessed by locate).
    pub soft: Vec<OperandId>,
    pub paths: Vec<(String, Vec<IndexVar>)>,
}

impl IterationGraph {
    /// The graph with its variables named by `vars` (its nest's table).
    pub fn display<'a>(&'a self, vars: &'a IndexVars) -> impl fmt::Display + 'a {
        Shown { graph: self, vars }
    }
}

struct Shown<'a> {
    graph: &'a IterationGraph,
    vars: &'a IndexVars,
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "loop order: {}",
            self.vars.join(&self.graph.order, " -> ")
        )?;
        writeln!(f, "tensor paths:")?;
        for (name, path) in &self.graph.paths {
            writeln!(
                f,
                "  {name}: {}",
                if path.is_empty() {
                    "(scalar)".into()
                } else {
                    self.vars.join(path, " -> ")
                }
            )?;
        }
        Ok(())
    }
}

type Edge = (IndexVar, IndexVar, OperandId);

/// The variables whose loops give `v`'s coordinates: its block variables
/// when it is computed from them, else itself.
fn deps(p: &Problem, v: IndexVar) -> Vec<IndexVar> {
    match p.vars.derivation(v) {
        Some((outer, inner, _)) => vec![outer, inner],
        None => vec![v],
    }
}

fn output_appends(o: &Operand) -> bool {
    o.format
        .levels
        .iter()
        .any(|l| matches!(l.assembly(), Assembly::Append(_)))
}

fn path_edges(p: &Problem, o: &Operand, out: &mut Vec<Edge>) {
    for w in o.level_vars.windows(2) {
        for a in deps(p, w[0]) {
            for b in deps(p, w[1]) {
                if a != b {
                    out.push((a, b, o.id));
                }
            }
        }
    }
}

fn edges(p: &Problem, soft: &BTreeSet<OperandId>) -> Vec<Edge> {
    let mut out = Vec::new();
    for o in &p.operands {
        if soft.contains(&o.id) {
            continue;
        }
        if o.output && (!output_appends(o) || p.assembly.any_order()) {
            continue;
        }
        path_edges(p, o, &mut out);
        if o.output {
            // Appended coordinates are final: reductions run inside them.
            let mut reductions: Vec<IndexVar> = p.reduction_vars();
            reductions.extend(p.vars.hidden());
            for &v in &o.level_vars {
                for &r in &reductions {
                    for a in deps(p, v) {
                        for b in deps(p, r) {
                            out.push((a, b, o.id));
                        }
                    }
                }
            }
        }
    }
    out
}

fn nodes(p: &Problem) -> Vec<IndexVar> {
    let mut out: Vec<IndexVar> = Vec::new();
    for o in &p.operands {
        for &v in &o.level_vars {
            for d in deps(p, v) {
                if !out.contains(&d) {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// Kahn's algorithm, preferring result variables in result order, then
/// variables in order of first appearance. Err holds the unordered rest.
fn topo(p: &Problem, edges: &[Edge]) -> Result<Vec<IndexVar>, Vec<IndexVar>> {
    let all = nodes(p);
    let out_vars = &p.output().level_vars;
    let rank = |v: &IndexVar| -> usize {
        out_vars
            .iter()
            .position(|x| x == v)
            .unwrap_or(usize::MAX / 2 + all.iter().position(|x| x == v).unwrap_or(0))
    };
    let mut indeg: BTreeMap<&IndexVar, usize> = all.iter().map(|v| (v, 0)).collect();
    for (_, b, _) in edges {
        if let Some(d) = indeg.get_mut(b) {
            *d += 1;
        }
    }
    let mut order = Vec::new();
    let mut done: BTreeSet<IndexVar> = BTreeSet::new();
    while order.len() < all.len() {
        let next = all
            .iter()
            .filter(|v| !done.contains(*v) && indeg[v] == 0)
            .min_by_key(|v| rank(v));
        let Some(v) = next else {
            return Err(all.iter().filter(|v| !done.contains(*v)).cloned().collect());
        };
        done.insert(*v);
        order.push(*v);
        for (a, b, _) in edges {
            if a == v {
                if let Some(d) = indeg.get_mut(b) {
                    *d -= 1;
                }
            }
        }
    }
    Ok(order)
}

pub fn build(p: &Problem) -> Result<IterationGraph, LowerError> {
    let paths = p
        .operands
        .iter()
        .map(|o| (o.describe(), o.level_vars.clone()))
        .collect();
    let hard = BTreeSet::new();
    let first = edges(p, &hard);
    let stuck = match topo(p, &first) {
        Ok(order) => {
            return Ok(IterationGraph {
                order,
                soft: Vec::new(),
                paths,
            })
        }
        Err(stuck) => stuck,
    };
    // Let operands reachable by locate alone give up their order.
    let soft: BTreeSet<OperandId> = p
        .inputs()
        .iter()
        .filter(|o| o.fully_locatable())
        .map(|o| o.id)
        .collect();
    if !soft.is_empty() {
        if let Ok(order) = topo(p, &edges(p, &soft)) {
            return Ok(IterationGraph {
                order,
                soft: soft.into_iter().collect(),
                paths,
            });
        }
    }
    Err(cycle_error(p, &first, &stuck))
}

fn cycle_error(p: &Problem, edges: &[Edge], stuck: &[IndexVar]) -> LowerError {
    let mut involved: Vec<OperandId> = edges
        .iter()
        .filter(|(a, b, _)| stuck.contains(a) && stuck.contains(b))
        .map(|e| e.2)
        .collect();
    involved.sort_unstable();
    involved.dedup();
    let mut names: Vec<String> = Vec::new();
    for &i in &involved {
        let o = &p.operands[i];
        let why = if o.output { ", assembled in order" } else { "" };
        let name = format!(
            "{} visits {}{why}",
            o.describe(),
            p.vars.join(&o.level_vars, " before ")
        );
        // A tensor read twice the same way is named once.
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let mut suggestion = String::new();
    for &i in involved.iter().rev() {
        let o = &p.operands[i];
        if o.output || !matches!(o.format.map, crate::format::CoordMap::Modes(_)) {
            continue;
        }
        let without: Vec<Edge> = edges.iter().filter(|e| e.2 != i).cloned().collect();
        if let Ok(order) = topo(p, &without) {
            let mut dims: Vec<usize> = (0..o.access.indices.len()).collect();
            dims.sort_by_key(|&d| {
                order
                    .iter()
                    .position(|v| *v == o.dim_vars[d])
                    .unwrap_or(usize::MAX)
            });
            let mode = dims
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",");
            suggestion = format!(
                "; store {} with mode order {mode} (-f {}:{}:{mode})",
                o.tensor,
                o.tensor,
                o.format.level_list()
            );
            break;
        }
    }
    if suggestion.is_empty() && involved.iter().any(|&i| p.operands[i].output) {
        suggestion = "; use a dense or hash result, which can be written in any order".into();
    }
    LowerError::NoLoopOrder {
        detail: format!("{}{suggestion}", names.join(" but ")),
        span: p.assignment.span,
    }
}
