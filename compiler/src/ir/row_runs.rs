//! COO's loop over entries, each naming its own row (`for p { let i =
//! crd[p]; ..; for k { C[i*K + k] += .. } }`), taken a run of equal rows at
//! a time, so that within a run the row stays put and its sums go in
//! strips:
//!
//! ```text
//! let run_at = lo, run_hi = hi
//! while run_at < run_hi {
//!   let run_row = crd[run_at], run_end = run_at + 1
//!   while run_end < run_hi && crd[run_end] == run_row { run_end += 1 }
//!   <the body's parts that hold for the whole run>
//!   <for p in run_at..run_end { body, crd[p] read as run_row }, in strips>
//!   run_at = run_end
//! }
//! ```
//!
//! Exact: the same iterations in the same order, and `crd[p]` is `run_row`
//! at every `p` of the run. What holds for the whole run, run once before
//! its loop: `let`s of values known from `run_row` alone, and a dense
//! result's row fill (`if row >= next { ..; next = row + 1 }`), which after
//! its first iteration never runs again in the run. Only where the strips
//! then apply; otherwise the loop stays as it was.

use super::runs::add_into;
use super::strips::{in_strips, inlined, Strips};
use super::*;
use std::collections::BTreeSet;

/// The loop `s` a run at a time, with its strips; None where it does not
/// apply.
pub(super) fn over_runs(
    s: &Stmt,
    vars: &mut Vec<VarInfo>,
    repeating: &[ArrayRef],
    strips: &Strips,
) -> Option<Vec<Stmt>> {
    // Variables made for a rewrite that then does not apply go again.
    let mark = vars.len();
    let runs = runs_of(s, vars, repeating, strips);
    if runs.is_none() {
        vars.truncate(mark);
    }
    runs
}

fn runs_of(
    s: &Stmt,
    vars: &mut Vec<VarInfo>,
    repeating: &[ArrayRef],
    strips: &Strips,
) -> Option<Vec<Stmt>> {
    let Stmt::For {
        var: p,
        lo,
        hi,
        body,
    } = s
    else {
        return None;
    };
    let (Stmt::For { body: row_body, .. }, prefix) = body.split_last()? else {
        return None;
    };
    let (last, lets) = row_body.split_last()?;
    let (_, index, _) = add_into(last)?;
    let index = inlined(&inlined(index, lets), prefix);
    let crd = read_only_through(&index, *p, repeating)?;
    let at = fresh_var(vars, "run_at", Ty::I64);
    let run_hi = fresh_var(vars, "run_hi", Ty::I64);
    let row = fresh_var(vars, "run_row", Ty::I64);
    let end = fresh_var(vars, "run_end", Ty::I64);
    let mut entry = body.clone();
    rewrite_block(&mut entry, &mut |x| {
        if matches!(x, Expr::Load(a, i) if *a == crd && **i == Expr::Var(*p)) {
            *x = Expr::Var(row);
        }
    });
    let (whole_run, entry) = hoisted(entry, *p, row)?;
    let strips = in_strips(
        &Stmt::For {
            var: *p,
            lo: Expr::Var(at),
            hi: Expr::Var(end),
            body: entry,
        },
        vars,
        strips,
    )?;
    let load = |v: VarId| Expr::Load(crd.clone(), Box::new(Expr::Var(v)));
    let mut run = vec![
        Stmt::Let(row, load(at)),
        Stmt::Let(end, Expr::add(Expr::Var(at), Expr::Int(1))),
        Stmt::While {
            cond: Expr::and(
                Expr::lt(Expr::Var(end), Expr::Var(run_hi)),
                Expr::eq(load(end), Expr::Var(row)),
            ),
            body: vec![Stmt::Set(end, Expr::add(Expr::Var(end), Expr::Int(1)))],
        },
    ];
    run.extend(whole_run);
    run.extend(strips);
    run.push(Stmt::Set(at, Expr::Var(end)));
    Some(vec![
        Stmt::Let(at, lo.clone()),
        Stmt::Let(run_hi, hi.clone()),
        Stmt::While {
            cond: Expr::lt(Expr::Var(at), Expr::Var(run_hi)),
            body: run,
        },
    ])
}

/// The one array of `repeating` that `e` reads at `p`, when that is the
/// only way `e` reads `p`.
fn read_only_through(e: &Expr, p: VarId, repeating: &[ArrayRef]) -> Option<ArrayRef> {
    let mut found: Option<ArrayRef> = None;
    let mut alone = true;
    let mut rest = e.clone();
    rest.rewrite(&mut |x| {
        if let Expr::Load(a, i) = x {
            if **i == Expr::Var(p) && repeating.contains(a) {
                alone &= found.as_ref().is_none_or(|f| f == a);
                found = Some(a.clone());
                *x = Expr::Int(0);
            }
        }
    });
    (alone && !rest.vars().contains(&p)).then_some(found?)
}

/// `body` (of the loop over a run's entries, `p`) split into what holds
/// for the whole run and the rest: `let`s without loads of values
/// computed from `row`, earlier such `let`s and variables the loop leaves
/// alone; and guards `if x >= y { ..; y = x + 1 }` on such values (a row
/// fill) whose arms read nothing else of the loop but `y`, which nothing
/// else in the loop assigns, and which write no array a `let` before them
/// reads. None when a guard of that form fails the rest.
fn hoisted(body: Block, p: VarId, row: VarId) -> Option<(Block, Block)> {
    let mut declared = BTreeSet::from([p]);
    let mut assigned = BTreeSet::new();
    walk_block(&body, &mut |s| match s {
        Stmt::Let(v, _) => {
            declared.insert(*v);
        }
        Stmt::Set(v, _) => {
            assigned.insert(*v);
        }
        _ => {}
    });
    // Values the same at every entry of the run.
    let mut known = BTreeSet::from([row]);
    let (mut whole, mut rest): (Block, Block) = (Vec::new(), Vec::new());
    for s in &body {
        let stable = |e: &Expr, known: &BTreeSet<VarId>| {
            e.vars()
                .iter()
                .all(|v| known.contains(v) || !(declared.contains(v) || assigned.contains(v)))
        };
        match s {
            Stmt::Let(v, init) if !init.reads_memory() && stable(init, &known) => {
                known.insert(*v);
                whole.push(s.clone());
            }
            Stmt::If { cond, then, els } if els.is_empty() && settles(cond, then) => {
                let Expr::Cmp(_, x, y) = cond else {
                    return None;
                };
                let Expr::Var(y) = **y else { return None };
                // The arms read the run's values, `y` and their own loops'.
                let mut with_y = known.clone();
                with_y.insert(y);
                let mut arms_stable = !x.reads_memory() && stable(x, &known);
                let (mut writes, mut sets) = (BTreeSet::new(), BTreeSet::new());
                walk_block(then, &mut |t| {
                    arms_stable &= stmt_exprs(t).into_iter().all(|e| stable(e, &with_y));
                    match t {
                        Stmt::Store(a, ..) => {
                            writes.insert(a.clone());
                        }
                        Stmt::Set(v, _) => {
                            sets.insert(*v);
                        }
                        _ => {}
                    }
                });
                let sets_y = body.iter().filter(|t| assigns(t, y)).count();
                // The `let`s it would move above read none of its arrays
                // and none of the variables it assigns.
                let passes_reads = rest.iter().all(|r| match r {
                    Stmt::Let(_, e) => {
                        let mut reads = false;
                        e.walk(&mut |x| {
                            reads |= match x {
                                Expr::Load(a, _) => writes.contains(a),
                                Expr::Var(v) => sets.contains(v),
                                _ => false,
                            }
                        });
                        !reads
                    }
                    // A hint changes nothing.
                    Stmt::Prefetch { .. } | Stmt::Comment(_) | Stmt::Unlikely => true,
                    _ => false,
                });
                if !(arms_stable && sets_y == 1 && passes_reads) {
                    return None;
                }
                whole.push(s.clone());
            }
            _ => rest.push(s.clone()),
        }
    }
    // A `let` left in the loop that a hoisted statement reads would be
    // read before it is declared.
    let left: BTreeSet<VarId> = rest
        .iter()
        .filter_map(|s| match s {
            Stmt::Let(v, _) => Some(*v),
            _ => None,
        })
        .collect();
    let mut reads_left = false;
    walk_block(&whole, &mut |s| {
        for e in stmt_exprs(s) {
            reads_left |= e.vars().iter().any(|v| left.contains(v));
        }
    });
    (!reads_left).then_some((whole, rest))
}

/// `if x >= y { ..; y = x + 1 }`: once run, false while `x` and `y` stay.
fn settles(cond: &Expr, then: &Block) -> bool {
    let Expr::Cmp(CmpOp::Ge, x, y) = cond else {
        return false;
    };
    let Expr::Var(y) = **y else { return false };
    matches!(then.last(), Some(Stmt::Set(v, e)) if *v == y && *e == Expr::add((**x).clone(), Expr::Int(1)))
}

#[cfg(test)]
mod tests {
    use super::super::strips::{add_into_row, sum_rows_in_strips};
    use super::*;
    use crate::ir::passes::Backend;

    fn stripped(mut f: Function) -> bool {
        sum_rows_in_strips(&mut f, Backend::C);
        f.vars.iter().any(|v| v.name.starts_with("strip_sum"))
    }

    /// COO's loop: `for p { let r = crd0[p]; if r >= next { zero rows;
    /// next = r + 1 }; let i = crd0[p]; let j = crd1[p]; for k { C[i*K + k]
    /// += A[p + e] * D[j*K + k] } }`, `e` a `let` before the guard: 0, or
    /// `next` itself when `reads_next`.
    fn coo(reads_next: bool) -> Function {
        let (rows, cols, a, c) = (
            ArrayRef::level("A", 0, "crd"),
            ArrayRef::level("A", 1, "crd"),
            ArrayRef::vals("A"),
            ArrayRef::vals("C"),
        );
        let width = Expr::param(ParamRef::dim("D", 1));
        let mut e = Emitter::new();
        let next = e.let_var("next", Expr::Int(0));
        e.for_("p", Expr::Int(0), Expr::Int(10), |e, p| {
            let shift = e.let_var(
                "shift",
                if reads_next {
                    next.clone()
                } else {
                    Expr::Int(0)
                },
            );
            let r = e.let_var("r", Expr::load(rows.clone(), p.clone()));
            let (c2, w2, n2) = (c.clone(), width.clone(), next.clone());
            e.if_(Expr::cmp(CmpOp::Ge, r.clone(), next.clone()), move |e| {
                let hi = Expr::mul(Expr::add(r.clone(), Expr::Int(1)), w2.clone());
                e.for_("q", Expr::mul(n2.clone(), w2), hi, |e, q| {
                    e.store(c2, q, Expr::Float(0.0))
                });
                e.set(&n2, Expr::add(r, Expr::Int(1)));
            });
            let i = e.let_var("i", Expr::load(rows.clone(), p.clone()));
            let j = e.let_var("j", Expr::load(cols.clone(), p.clone()));
            let base = Expr::mul(i, width.clone());
            add_into_row(
                e,
                base,
                Expr::load(a.clone(), Expr::add(p.clone(), shift)),
                j,
            );
        });
        let mut f = e.finish("k");
        f.runs = vec![Repeats {
            array: ArrayRef::level("A", 0, "crd"),
            per_coordinate: 5,
            stored: 40,
            ascending: true,
        }];
        f
    }

    #[test]
    fn coo_entries_go_a_run_at_a_time_with_the_fill_before_the_run() {
        let mut f = coo(false);
        sum_rows_in_strips(&mut f, Backend::C);
        let text = f.to_string();
        let (fill, strips) = (
            text.find("if r >= next").unwrap(),     // ok: test code
            text.find("while strip + 16").unwrap(), // ok: test code
        );
        assert!(
            text.contains("let r: i64 = run_row") && fill < strips,
            "{text}"
        );
        assert!(
            text.contains("let strip_sum0: f64 = C_vals[run_row * D2_dimension + strip]")
                || text.contains("let strip_sum0: f64 = C_vals[i * D2_dimension + strip]"),
            "{text}"
        );
    }

    #[test]
    fn a_fill_whose_variable_is_read_before_it_stays_in_the_loop() {
        assert!(!stripped(coo(true)));
        let mut f = coo(true);
        sum_rows_in_strips(&mut f, Backend::C);
        assert!(!f.vars.iter().any(|v| v.name == "run_at"), "{f}");
    }
}
