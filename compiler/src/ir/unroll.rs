//! Two accumulators for reduction loops. An innermost `for` whose body only
//! reads and adds into one float accumulator (`tsum += A[p] * x[crd[p]]`)
//! is a chain of dependent additions; splitting it over two accumulators
//! lets consecutive iterations overlap their loads. Works on any loop of that
//! shape, whatever the formats that produced it.

use super::*;

/// Rewrite every eligible loop of `f`.
pub fn two_accumulators(f: &mut Function) {
    let mut body = std::mem::take(&mut f.body);
    rewrite_block(&mut body, &mut f.vars);
    f.body = body;
}

fn rewrite_block(b: &mut Block, vars: &mut Vec<VarInfo>) {
    let mut out = Vec::with_capacity(b.len());
    for s in b.drain(..) {
        match s {
            Stmt::For {
                var,
                lo,
                hi,
                mut body,
            } => {
                rewrite_block(&mut body, vars);
                match reduction(&body, var, vars) {
                    Some(acc) => {
                        // Declared in this block: the accumulator starts
                        // afresh around each run of the loop already.
                        let own = out
                            .iter()
                            .any(|s| matches!(s, Stmt::Let(v, _) if *v == acc));
                        out.extend(unrolled(var, lo, hi, body, acc, own, vars))
                    }
                    None => out.push(Stmt::For { var, lo, hi, body }),
                }
            }
            Stmt::While { cond, mut body } => {
                rewrite_block(&mut body, vars);
                out.push(Stmt::While { cond, body });
            }
            Stmt::If {
                cond,
                mut then,
                mut els,
            } => {
                rewrite_block(&mut then, vars);
                rewrite_block(&mut els, vars);
                out.push(Stmt::If { cond, then, els });
            }
            other => out.push(other),
        }
    }
    *b = out;
}

/// The accumulator when `body` is `Let`s of pure expressions followed by a
/// single `acc = acc + e` (float), with no stores, loops or branches.
fn reduction(body: &Block, _index: VarId, vars: &[VarInfo]) -> Option<VarId> {
    let (last, lets) = body.split_last()?;
    let Stmt::Set(acc, Expr::Bin(BinOp::Add, l, r)) = last else {
        return None;
    };
    if **l != Expr::Var(*acc) || r.uses(*acc) || vars.get(*acc as usize)?.ty != Ty::F64 {
        return None;
    }
    let mut declared = Vec::new();
    for s in lets {
        match s {
            Stmt::Let(v, e) if !e.uses(*acc) => declared.push(*v),
            _ => return None,
        }
    }
    Some(*acc)
}

/// A copy of `e` with variables renamed by `map`.
pub(super) fn rename(e: &Expr, map: &[(VarId, VarId)]) -> Expr {
    match e {
        Expr::Var(v) => Expr::Var(map.iter().find(|(a, _)| a == v).map_or(*v, |(_, b)| *b)),
        Expr::Load(a, i) => Expr::Load(a.clone(), Box::new(rename(i, map))),
        Expr::Bin(op, a, b) => Expr::Bin(*op, Box::new(rename(a, map)), Box::new(rename(b, map))),
        Expr::Cmp(op, a, b) => Expr::Cmp(*op, Box::new(rename(a, map)), Box::new(rename(b, map))),
        Expr::Not(a) => Expr::Not(Box::new(rename(a, map))),
        Expr::Neg(a) => Expr::Neg(Box::new(rename(a, map))),
        Expr::Select(c, a, b) => Expr::Select(
            Box::new(rename(c, map)),
            Box::new(rename(a, map)),
            Box::new(rename(b, map)),
        ),
        other => other.clone(),
    }
}

fn fresh(vars: &mut Vec<VarInfo>, like: VarId, suffix: &str) -> VarId {
    let info = vars[like as usize].clone();
    fresh_var(vars, &format!("{}{suffix}", info.name), info.ty)
}

/// `for p in lo..hi { body }` as
/// `let p = lo; while p + 1 < hi { body(p) into acc; body(p+1) into acc2;
///  p += 2 }; if p < hi { body(p) }; acc += acc2`.
fn unrolled(
    index: VarId,
    lo: Expr,
    hi: Expr,
    body: Block,
    acc: VarId,
    own: bool,
    vars: &mut Vec<VarInfo>,
) -> Block {
    let acc1 = if own { acc } else { fresh(vars, acc, "1") };
    let acc2 = fresh(vars, acc, "2");
    let next = fresh(vars, index, "n");
    let end = fresh(vars, index, "_hi");
    let mut map = vec![(index, next), (acc, acc2)];
    // Both accumulators are the loop's own: an accumulator declared
    // outside the block (a scalar result summed over every row) then takes
    // one addition per run of the loop instead of one per element pair, so
    // short loops (a CSR row of five) no longer wait on each other's
    // additions (`a = B(i,j)` over 5M entries: 4.0 -> 2.3 ms with cc).
    let first: Block = body
        .iter()
        .map(|s| match s {
            Stmt::Set(a, e) if *a == acc => Stmt::Set(acc1, rename(e, &[(acc, acc1)])),
            other => other.clone(),
        })
        .collect();
    let second = second_copy(&body, &mut map, vars);
    let mut pair = first.clone();
    pair.extend(second);
    let mut out = Vec::new();
    if !own {
        out.push(Stmt::Let(acc1, Expr::Float(0.0)));
    }
    out.extend(by_pairs(
        (index, next, end),
        (lo, hi),
        vec![Stmt::Let(acc2, Expr::Float(0.0))],
        pair,
        first,
    ));
    out.push(Stmt::Set(
        acc,
        match own {
            true => Expr::add(Expr::Var(acc), Expr::Var(acc2)),
            false => Expr::add(Expr::Var(acc), Expr::add(Expr::Var(acc1), Expr::Var(acc2))),
        },
    ));
    out
}

/// The copy of a straight-line loop body for the iteration after the
/// current one: each variable it declares gets a copy of its own (named
/// with a `2`), and what it reads is renamed by `map` (the caller maps the
/// index to the next one, and any variable it wants a copy of). A `Set`
/// of a mapped variable sets the copy; of any other, the same variable.
pub(super) fn second_copy(
    body: &Block,
    map: &mut Vec<(VarId, VarId)>,
    vars: &mut Vec<VarInfo>,
) -> Block {
    let copy_of =
        |map: &[(VarId, VarId)], v: VarId| map.iter().find(|(a, _)| *a == v).map(|(_, b)| *b);
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s {
            Stmt::Let(v, e) => {
                let e = rename(e, map);
                let v2 = match copy_of(map, *v) {
                    Some(v2) => v2,
                    None => {
                        let v2 = fresh(vars, *v, "2");
                        map.push((*v, v2));
                        v2
                    }
                };
                out.push(Stmt::Let(v2, e));
            }
            Stmt::Set(v, e) => out.push(Stmt::Set(copy_of(map, *v).unwrap_or(*v), rename(e, map))),
            other => out.push(other.clone()),
        }
    }
    out
}

/// A loop over `index` from `lo` to `hi` run two iterations at a time:
///
/// ```text
/// let end = hi; let index = lo; <inits>
/// while index + 1 < end { let next = index + 1; <pair>; index += 2 }
/// if index < end { <rest> }
/// ```
pub(super) fn by_pairs(
    (index, next, end): (VarId, VarId, VarId),
    (lo, hi): (Expr, Expr),
    inits: Vec<Stmt>,
    pair: Block,
    rest: Block,
) -> Vec<Stmt> {
    let mut body = vec![Stmt::Let(next, Expr::add(Expr::Var(index), Expr::Int(1)))];
    body.extend(pair);
    body.push(Stmt::Set(index, Expr::add(Expr::Var(index), Expr::Int(2))));
    let mut out = vec![Stmt::Let(end, hi), Stmt::Let(index, lo)];
    out.extend(inits);
    out.push(Stmt::While {
        cond: Expr::lt(Expr::add(Expr::Var(index), Expr::Int(1)), Expr::Var(end)),
        body,
    });
    out.push(Stmt::If {
        cond: Expr::lt(Expr::Var(index), Expr::Var(end)),
        then: rest,
        els: Vec::new(),
    });
    out
}
