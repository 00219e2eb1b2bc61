//! Runs of equal positions added in a register. A loop whose only use of an
//! array is `a[i] += e`, with `i` read inside the loop (COO's row of each
//! entry: `y[crd1[p]] += A[p] * x[crd2[p]]`), makes every iteration wait
//! for the previous one's store to `a[i]` to reach the load: a chain of
//! store-to-load forwarding plus the addition, about twice the cost of
//! CSR's register sum. Adding a run of iterations with the same `i` into a
//! register and storing it when `i` changes (and after the loop) leaves
//! only the addition on the chain; where `i` changes at every iteration
//! (CSC's column), the branch is always taken and predicted. Works on any
//! loop of that shape, whatever the formats that produced it.
//!
//! Sound because nothing else in the loop reads or writes `a`: the sum of
//! a run reaches `a[i]` before any other position's, and `a` holds every
//! sum once the loop is done (the additions regroup: `a[i] + (e1 + e2)`
//! instead of `(a[i] + e1) + e2`). A dense result's rows filled as the
//! loop reaches them (`is_row_fill`) are the one other touch allowed: the
//! fill zeroes only rows no iteration has written yet, and a run's
//! position lies in the row its first iteration filled, before it.

use super::*;

/// Entries per coordinate, on average, from which adding the runs of a
/// tensor of `stored` entries in a register pays: 2 while the tensor is
/// small, 4 past `SMALL_ENTRIES`. The cost of runs is a mispredicted
/// branch where a run ends at an unforeseen place (irregular rows). On
/// data in the caches that costs about what a short run saves; on data
/// past them it also throws away the gathers in flight, and a kernel
/// bound by them loses its overlap. Both tiers alike; COO SpMV, least of
/// 2-4 processes, runs against stores per entry (`TENSOR_NO_RUNS=1`),
/// cc / Cranelift tier, AMD EPYC:
/// - small: west0479 (1.9K entries, 3 a row) 2.0 / 1.6 us against 2.5 /
///   2.5; ca-GrQc (29K entries, 5.5 a row in power-law rows) 0.026 /
///   0.034 ms against 0.055 / 0.054;
/// - large, under 4 a row: the power-law matrix (3.6M entries, 3.6 a row,
///   irregular) 15.0 / 11.5 ms against 10.0 / 10.2, a loss of 1.5x;
///   luxembourg_osm (240K entries, 2 a row) 0.27 against 0.21 on the cc
///   tier; tridiagonal of 1M and 6M rows (3 a row, regular): even;
/// - large, 4 and more a row: the 2-D stencil (5 a row) 0.110 / 0.132
///   against 0.192 / 0.196, the 3-D stencil (7 a row) 10.4 / 10.5 against
///   13.9 / 14.3, Zipf-distributed rows (9.7 a row, most rows one entry)
///   22.8 / 24.5 against 33.7 / 31.9.
pub fn shortest_run(stored: usize) -> usize {
    if stored <= SMALL_ENTRIES {
        2
    } else {
        4
    }
}

/// Stored entries of a tensor small enough that a mispredicted run end
/// costs only the branch (a megabyte of COO: coordinates and values).
const SMALL_ENTRIES: usize = 1 << 16;

/// Rewrite every eligible loop of `f` whose position is read from one of
/// `f.runs` (the coordinates of a non-unique level; a unique level's
/// would make every run one long) with runs long enough to pay
/// (`shortest_run`).
pub fn accumulate_runs(f: &mut Function) {
    let long: Vec<ArrayRef> = f
        .runs
        .iter()
        .filter(|r| r.per_coordinate >= shortest_run(r.stored))
        .map(|r| r.array.clone())
        .collect();
    if long.is_empty() {
        return;
    }
    let ascending: Vec<ArrayRef> = f
        .runs
        .iter()
        .filter(|r| r.ascending)
        .map(|r| r.array.clone())
        .collect();
    let arrays = Arrays {
        repeat: &|a| long.contains(a),
        ascend: &|a| ascending.contains(a),
    };
    let mut body = std::mem::take(&mut f.body);
    rewrite(&mut body, &mut f.vars, &arrays);
    f.body = body;
}

/// Which coordinate arrays the rewrite takes runs from, and which of them
/// never decrease from one position to the next (`Repeats::ascending`).
struct Arrays<'a> {
    repeat: &'a dyn Fn(&ArrayRef) -> bool,
    ascend: &'a dyn Fn(&ArrayRef) -> bool,
}

fn rewrite(b: &mut Block, vars: &mut Vec<VarInfo>, arrays: &Arrays) {
    let mut out = Vec::with_capacity(b.len());
    for mut s in b.drain(..) {
        for inner in nested_blocks_mut(&mut s) {
            rewrite(inner, vars, arrays);
        }
        match s {
            Stmt::For { var, lo, hi, body } => match run_store(&body, var, arrays.repeat) {
                Some(k) => {
                    let ascends = ascends(&body, k, var, arrays.ascend);
                    out.extend(with_runs(var, lo, hi, body, k, ascends, vars))
                }
                None => out.push(Stmt::For { var, lo, hi, body }),
            },
            other => out.push(other),
        }
    }
    *b = out;
}

/// The position in `body` of the statement `a[i] = a[i] + e` (a float
/// array, `i` computed from a load of an array that `repeats`, directly or
/// through variables the loop declares) when no other statement or
/// expression of the loop touches `a`.
fn run_store(body: &Block, var: VarId, repeats: &dyn Fn(&ArrayRef) -> bool) -> Option<usize> {
    let k = body.iter().position(|s| add_into(s).is_some())?;
    let (array, index, _) = add_into(&body[k])?;
    if !may_repeat(index, body, var, repeats, 4) {
        return None;
    }
    let mut touches = 0;
    let mut count = |s: &Stmt| {
        if matches!(s, Stmt::Store(a, ..) | Stmt::Reserve { array: a, .. } if a == array) {
            touches += 1;
        }
        for e in stmt_exprs(s) {
            e.walk(&mut |x| touches += usize::from(matches!(x, Expr::Load(a, _) if a == array)));
        }
    };
    // A row fill zeroes only rows past those of the iterations before it
    // (`is_row_fill`): never the position of a run in progress.
    for s in body.iter().filter(|s| !is_row_fill(s, array)) {
        walk_block(std::slice::from_ref(s), &mut count);
    }
    // The store and its own load, nothing else.
    (touches == 2).then_some(k)
}

/// Whether `e` may repeat from one iteration to the next: it reads arrays
/// that `repeats` and no others, itself or through the variables `body`
/// declares (at most `depth` deep), and not the loop's variable `var`. A
/// position that also reads a unique level's coordinate (COO's column in
/// `A[i*N + j]`) changes at every entry.
fn may_repeat(
    e: &Expr,
    body: &Block,
    var: VarId,
    repeats: &dyn Fn(&ArrayRef) -> bool,
    depth: usize,
) -> bool {
    let (mut repeating, mut other) = (false, false);
    reads(e, body, var, repeats, depth, &mut repeating, &mut other);
    repeating && !other
}

fn reads(
    e: &Expr,
    body: &Block,
    var: VarId,
    repeats: &dyn Fn(&ArrayRef) -> bool,
    depth: usize,
    repeating: &mut bool,
    other: &mut bool,
) {
    let mut go = |x: &Expr| reads(x, body, var, repeats, depth, repeating, other);
    match e {
        // What a load reads, not where: `crd[p]` repeats though `p` does not.
        Expr::Load(a, _) if repeats(a) => *repeating = true,
        Expr::Load(..) => *other = true,
        // The loop's own variable changes at every iteration.
        Expr::Var(v) if *v == var => *other = true,
        Expr::Var(v) => {
            let declared = body.iter().find_map(|s| match s {
                Stmt::Let(x, init) if x == v => Some(init),
                _ => None,
            });
            match declared {
                Some(init) if depth > 0 => {
                    reads(init, body, var, repeats, depth - 1, repeating, other)
                }
                Some(_) => *other = true,
                None => {}
            }
        }
        Expr::Bin(_, x, y) | Expr::Cmp(_, x, y) => {
            go(x);
            go(y);
        }
        Expr::Not(x) | Expr::Neg(x) => go(x),
        Expr::Select(c, x, y) => {
            go(c);
            go(x);
            go(y);
        }
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Param(_) => {}
    }
}

/// Whether the position the statement at `k` adds at never decreases from
/// one iteration to the next: it is an ascending coordinate array read at
/// the loop's own variable (`crd[p]`), directly or through one `let`.
fn ascends(body: &Block, k: usize, var: VarId, ascend: &dyn Fn(&ArrayRef) -> bool) -> bool {
    let Some((_, index, _)) = add_into(&body[k]) else {
        return false;
    };
    let read_at_var =
        |e: &Expr| matches!(e, Expr::Load(a, at) if ascend(a) && **at == Expr::Var(var));
    match index {
        Expr::Var(v) => body[..k]
            .iter()
            .any(|s| matches!(s, Stmt::Let(x, init) if x == v && read_at_var(init))),
        e => read_at_var(e),
    }
}

/// `(a, i, e)` of a statement `a[i] = a[i] + e` over a float array.
pub(super) fn add_into(s: &Stmt) -> Option<(&ArrayRef, &Expr, &Expr)> {
    let Stmt::Store(a, i, Expr::Bin(BinOp::Add, x, e)) = s else {
        return None;
    };
    let Expr::Load(b, j) = x.as_ref() else {
        return None;
    };
    (a == b && **j == *i && a.elem() == ElemTy::F64).then_some((a, i, e.as_ref()))
}

/// The loop with the statement at `k` adding into a register run: `run_at`
/// the run's position (-1 before the first), `run_sum` its sum. A loop
/// whose other statements only declare values runs two entries at a time
/// (`paired_runs`).
fn with_runs(
    var: VarId,
    lo: Expr,
    hi: Expr,
    mut body: Block,
    k: usize,
    ascends: bool,
    vars: &mut Vec<VarInfo>,
) -> Vec<Stmt> {
    let Stmt::Store(array, index, Expr::Bin(_, _, e)) = body[k].clone() else {
        return vec![Stmt::For { var, lo, hi, body }];
    };
    // Values computed, then the addition last: an entry is a straight line
    // (with at most the fill of the row it reaches).
    let fills = body[..k].iter().filter(|s| is_row_fill(s, &array)).count();
    let straight = k + 1 == body.len()
        && fills <= 1
        && body[..k]
            .iter()
            .all(|s| matches!(s, Stmt::Let(..) | Stmt::Set(..)) || is_row_fill(s, &array));
    if straight {
        return paired_runs(var, lo, hi, body, k, ascends, vars);
    }
    let at = fresh_var(vars, "run_at", Ty::I64);
    let sum = fresh_var(vars, "run_sum", Ty::F64);
    let new_run = Stmt::If {
        cond: Expr::Cmp(CmpOp::Ne, Box::new(index.clone()), Box::new(Expr::Var(at))),
        // Runs are long where this pass applies (`shortest_run`).
        then: vec![
            Stmt::Unlikely,
            flush(&array, at, Expr::Var(sum)),
            Stmt::Set(at, index),
            Stmt::Set(sum, Expr::Float(0.0)),
        ],
        els: Vec::new(),
    };
    let add = Stmt::Set(sum, Expr::Bin(BinOp::Add, Box::new(Expr::Var(sum)), e));
    body.splice(k..=k, [new_run, add]);
    vec![
        Stmt::Let(at, Expr::Int(-1)),
        Stmt::Let(sum, Expr::Float(0.0)),
        Stmt::For { var, lo, hi, body },
        flush(&array, at, Expr::Var(sum)),
    ]
}

/// `if (run_at >= 0) a[run_at] += v`: a finished run reaches the array.
fn flush(array: &ArrayRef, at: VarId, v: Expr) -> Stmt {
    Stmt::If {
        cond: Expr::Cmp(CmpOp::Ge, Box::new(Expr::Var(at)), Box::new(Expr::Int(0))),
        then: vec![Stmt::Store(
            array.clone(),
            Expr::Var(at),
            Expr::add(Expr::Load(array.clone(), Box::new(Expr::Var(at))), v),
        )],
        els: Vec::new(),
    }
}

/// Runs two entries at a time, each into a sum of its own: one sum's
/// additions wait on each other (four cycles each), which bounded COO's
/// SpMV on rows of fifteen at 1.75x CSR's time; two halve the chain. Where
/// both entries continue the current run (most pairs of a row longer than
/// a few) they add into the two sums; otherwise they are taken one by one,
/// a run's end flushing both sums.
///
/// Where the positions ascend (`ascends`: COO's rows), the second entry's
/// alone tells: `i <= i2`, and `i` is at least the run's, so `i2 ==
/// run_at` puts both in the run. One test a pair fewer: COO SpMV on the
/// 2-D stencil's 5 entries a row (in the caches) 0.101 ms against 0.113,
/// as fast as CSR's loop there.
///
/// ```text
/// let run_at = -1, s = 0, s2 = 0, p = lo
/// while p + 1 < hi { entry(p): i, e; entry(p + 1): i2, e2
///   if i == run_at && i2 == run_at { s += e; s2 += e2 }  // or i2 == run_at
///   else { step(i, e); step(i2, e2) } ; p += 2 }
/// if p < hi { entry(p); step(i, e) }
/// flush(s + s2)
/// step(i, e): if i != run_at { flush(s + s2); run_at = i; s = s2 = 0 }; s += e
/// ```
fn paired_runs(
    var: VarId,
    lo: Expr,
    hi: Expr,
    body: Block,
    k: usize,
    ascends: bool,
    vars: &mut Vec<VarInfo>,
) -> Vec<Stmt> {
    let Stmt::Store(array, index, Expr::Bin(_, _, e)) = body[k].clone() else {
        return vec![Stmt::For { var, lo, hi, body }];
    };
    let at = fresh_var(vars, "run_at", Ty::I64);
    let sum = fresh_var(vars, "run_sum", Ty::F64);
    let sum2 = fresh_var(vars, "run_sum2", Ty::F64);
    let end = fresh_var(vars, "run_hi", Ty::I64);
    let next = fresh_var(vars, "run_next", Ty::I64);
    // One entry: the body's declarations, then its position and value.
    let (i1, e1) = (
        fresh_var(vars, "run_i", Ty::I64),
        fresh_var(vars, "run_e", Ty::F64),
    );
    let fill = body[..k].iter().find(|s| is_row_fill(s, &array)).cloned();
    let mut first: Block = body
        .iter()
        .enumerate()
        .filter(|(n, s)| *n != k && !is_row_fill(s, &array))
        .map(|(_, s)| s.clone())
        .collect();
    first.push(Stmt::Let(i1, index.clone()));
    first.push(Stmt::Let(e1, (*e).clone()));
    let (i2, e2) = (
        fresh_var(vars, "run_i2", Ty::I64),
        fresh_var(vars, "run_e2", Ty::F64),
    );
    let mut map = vec![(var, next), (i1, i2), (e1, e2)];
    let second = super::unroll::second_copy(&first, &mut map, vars);
    // One fill for both entries, of the rows up to the later one's, where
    // a pair leaves the run: entries that continue it are in its row,
    // which was filled when the run began.
    let pair_fill = fill.as_ref().map(|f| {
        fill_through(f, |row| {
            Expr::Bin(
                BinOp::Max,
                Box::new(row.clone()),
                Box::new(super::unroll::rename(row, &map)),
            )
        })
    });
    let both = Expr::add(Expr::Var(sum), Expr::Var(sum2));
    let step = |i: VarId, x: VarId| {
        vec![
            Stmt::If {
                cond: Expr::Cmp(CmpOp::Ne, Box::new(Expr::Var(i)), Box::new(Expr::Var(at))),
                then: vec![
                    flush(&array, at, both.clone()),
                    Stmt::Set(at, Expr::Var(i)),
                    Stmt::Set(sum, Expr::Float(0.0)),
                    Stmt::Set(sum2, Expr::Float(0.0)),
                ],
                els: Vec::new(),
            },
            Stmt::Set(sum, Expr::add(Expr::Var(sum), Expr::Var(x))),
        ]
    };
    let in_run = |i: VarId| Expr::Cmp(CmpOp::Eq, Box::new(Expr::Var(i)), Box::new(Expr::Var(at)));
    let mut pair = first.clone();
    pair.extend(second);
    pair.push(Stmt::If {
        cond: match ascends {
            true => in_run(i2),
            false => Expr::and(in_run(i1), in_run(i2)),
        },
        then: vec![
            Stmt::Set(sum, Expr::add(Expr::Var(sum), Expr::Var(e1))),
            Stmt::Set(sum2, Expr::add(Expr::Var(sum2), Expr::Var(e2))),
        ],
        els: [
            vec![Stmt::Unlikely],
            pair_fill.into_iter().collect(),
            step(i1, e1),
            step(i2, e2),
        ]
        .concat(),
    });
    let mut last = first;
    last.extend(fill);
    last.extend(step(i1, e1));
    let mut out = vec![
        Stmt::Let(at, Expr::Int(-1)),
        Stmt::Let(sum, Expr::Float(0.0)),
        Stmt::Let(sum2, Expr::Float(0.0)),
    ];
    out.extend(super::unroll::by_pairs(
        (var, next, end),
        (lo, hi),
        Vec::new(),
        pair,
        last,
    ));
    out.push(flush(&array, at, both));
    out
}

/// The row fill `fill` (`is_row_fill`) with its row, the left side of its
/// test, replaced by `to(row)` wherever it appears.
fn fill_through(fill: &Stmt, to: impl Fn(&Expr) -> Expr) -> Stmt {
    let Stmt::If {
        cond: Expr::Cmp(_, row, _),
        ..
    } = fill
    else {
        return fill.clone();
    };
    let new = to(row);
    let mut out = vec![fill.clone()];
    rewrite_block(&mut out, &mut |x| {
        if *x == **row {
            *x = new.clone();
        }
    });
    out.pop().unwrap_or_else(|| fill.clone())
}

#[cfg(test)]
mod tests {
    use super::super::passes::{for_codegen, Backend};
    use super::*;

    /// `for p in 0..nnz { let i = A1_crd[p]; y[i] += A_vals[p] }`, the
    /// coordinates holding runs of `entries` on average, a million
    /// entries in all.
    fn coo_sum(entries: usize) -> Function {
        coo_sum_of(entries, 1 << 20)
    }

    fn coo_sum_of(entries: usize, stored: usize) -> Function {
        let (p, i) = (0, 1);
        let (crd, y) = (ArrayRef::level("A", 0, "crd"), ArrayRef::vals("y"));
        let at = |a: &ArrayRef, v: VarId| Expr::Load(a.clone(), Box::new(Expr::Var(v)));
        Function {
            name: "k".into(),
            vars: vec![
                VarInfo {
                    name: "p".into(),
                    ty: Ty::I64,
                },
                VarInfo {
                    name: "i".into(),
                    ty: Ty::I64,
                },
            ],
            body: vec![Stmt::For {
                var: p,
                lo: Expr::Int(0),
                hi: Expr::Param(ParamRef::dim("A", 0)),
                body: vec![
                    Stmt::Let(i, at(&crd, p)),
                    Stmt::Store(
                        y.clone(),
                        Expr::Var(i),
                        Expr::add(at(&y, i), at(&ArrayRef::vals("A"), p)),
                    ),
                ],
            }],
            parallel: None,
            shares: None,
            runs: vec![Repeats {
                array: crd,
                per_coordinate: entries,
                stored,
                ascending: false,
            }],
            lengths: Vec::new(),
            lines_of_their_own: Vec::new(),
            fixed_params: Vec::new(),
            index_limits: Vec::new(),
        }
    }

    fn adds_runs(f: &Function) -> bool {
        f.vars.iter().any(|v| v.name.starts_with("run_"))
    }

    #[test]
    fn runs_pay_from_two_entries_on_small_data_and_four_on_large() {
        for (entries, stored, adds) in [
            (1, 1000, false),
            (2, 1000, true),
            (3, SMALL_ENTRIES, true),
            (2, SMALL_ENTRIES + 1, false),
            (3, 1 << 20, false),
            (4, 1 << 20, true),
            (8, 1 << 20, true),
        ] {
            let f = coo_sum_of(entries, stored);
            for backend in [Backend::C, Backend::Cranelift] {
                assert_eq!(
                    adds_runs(&for_codegen(&f, backend)),
                    adds,
                    "{entries} a run of {stored} entries, {backend:?}"
                );
            }
        }
    }

    /// For each arm of an `if` in `b` (nested too) that holds
    /// `Stmt::Unlikely`, whether it also ends a run (flushes into `y`).
    fn rare_arms(b: &Block) -> Vec<bool> {
        let mut out = Vec::new();
        walk_block(b, &mut |s| {
            let Stmt::If { then, els, .. } = s else {
                return;
            };
            for arm in [then, els]
                .into_iter()
                .filter(|a| a.contains(&Stmt::Unlikely))
            {
                let mut flushes = false;
                walk_block(arm, &mut |t| {
                    flushes |= matches!(t, Stmt::Store(a, ..) if *a == ArrayRef::vals("y"))
                });
                out.push(flushes);
            }
        });
        out
    }

    #[test]
    fn a_run_s_end_is_marked_rare_and_nothing_else_is() {
        // Straight bodies run in pairs (one rare block: a pair that leaves
        // the run); others test each entry (one: the entry that starts a run).
        let mut f = coo_sum(8);
        assert_eq!(
            rare_arms(&for_codegen(&f, Backend::Cranelift).body),
            vec![true]
        );
        if let Stmt::For { body, .. } = &mut f.body[0] {
            body.push(Stmt::If {
                cond: Expr::Bool(true),
                then: vec![Stmt::Comment("not straight".into())],
                els: Vec::new(),
            });
        }
        assert_eq!(
            rare_arms(&for_codegen(&f, Backend::Cranelift).body),
            vec![true]
        );
    }

    #[test]
    fn arrays_without_recorded_runs_keep_their_stores() {
        let mut f = coo_sum(100);
        f.runs.clear();
        // The C's hints aside (`ir::streams`, `ir::gathers`).
        fn without_hints(b: &mut Block) {
            b.retain(|s| !matches!(s, Stmt::PrefetchStream { .. } | Stmt::PrefetchGather { .. }));
            for inner in b.iter_mut().flat_map(crate::ir::nested_blocks_mut) {
                without_hints(inner);
            }
        }
        let mut c = for_codegen(&f, Backend::C);
        without_hints(&mut c.body);
        assert_eq!(c, for_codegen(&f, Backend::Cranelift));
        assert!(!adds_runs(&for_codegen(&f, Backend::C)));
    }
}
