//! A dense row summed in registers across the loop that adds into it. In
//! `for p in row's entries { let j = crd[p]; for k in 0..K { C[i*K + k] +=
//! A[p] * D[j*K + k] } }` (SpDM from CSR, MTTKRP's innermost level) the row
//! `C[i*K..]` stays put while `p` moves, yet every iteration loads it and
//! stores it back: twice the memory operations of the arithmetic, each
//! store waiting for the previous iteration's to reach its load. Here the
//! `k` loop goes outside, in strips of `WIDTH` elements, each summed in
//! `WIDTH` scalar variables across the whole `p` loop and stored once:
//!
//! ```text
//! let kb = 0
//! while kb + WIDTH <= K {
//!   let s0 = C[i*K + kb], .., s15 = C[i*K + kb + 15]
//!   for p in .. { let j = crd[p]; s0 += A[p] * D[j*K + kb]; ..; s15 += .. }
//!   C[i*K + kb] = s0; ..; kb += WIDTH
//! }
//! for p in .. { let j = crd[p]; for k in kb..K { C[i*K + k] += .. } }
//! ```
//!
//! The C compiler keeps the sums in vector registers (gcc pairs the scalar
//! sums of consecutive elements itself): SpDM into 32 columns on the 3-D
//! stencil, standalone, 141-153 ms before and 109-117 after, MKL's time.
//! A row that stays put across several loops (MTTKRP from CSF: a slice's
//! fibers and their entries all add into the slice's row) is summed
//! across them all: 14.4 -> 11.4 ms on the bench's NELL-2-like tensor.
//!
//! A row of at most `c < WIDTH` elements (`for r in 0..min(c, ..)`: the
//! rows of a BCSR block, clipped at the last block by `ir::clip`) takes
//! one strip of `c`. Where the row loop computes what it adds in
//! statements of its own (BCSR's sum over a block's columns, a loop), each
//! lane runs a copy of them with variables of its own: BCSR(4) SpMV on the
//! 1M-row 2-D stencil, cc tier, 10.0 -> 9.0 ms (alternating processes),
//! 13.2 -> 11.9 in one process (`examples/ab_kernels.rs`); SciPy's BSR
//! ran 10.2 in bench report q.
//!
//! The Cranelift tier holds two sums in one `f64x2` (`jit::pairs`), and
//! takes the strips where they pay for their compile (`Strips::for_backend`).
//!
//! Exact, to the bit: each element of the row receives the same additions
//! in the same order, starting from the value it held. Sound because the
//! loop touches the row's array nowhere else, declares values only, and the
//! row's position does not change with `p`. (COO's loop over entries, each
//! naming its own row, first goes a run of equal rows at a time:
//! `ir::row_runs`.)

use super::runs::add_into;
use super::*;
use std::collections::BTreeSet;

/// Elements of a row summed at once: 16 `f64`s, four AVX2 registers. 8 and
/// 32 measured the same within noise on SpDM (32 columns); 16 serves rank
/// 16 (MTTKRP's usual) whole. In the C one strip of 8 follows the strips
/// of 16 where 8 elements or more remain (rows of 8, 24, 40).
const WIDTH: i64 = 16;

/// Where a backend takes the strips.
pub(super) struct Strips {
    /// One strip of `WIDTH / 2` after the whole ones, where it fits.
    half_strip: bool,
    /// Only where the loop reads, at its position, one of these value
    /// arrays (`None`: anywhere).
    reading: Option<BTreeSet<ArrayRef>>,
    /// The nest's prefetch hints stay in the strips' loop instead of a
    /// loop of their own before the strips.
    hints_in_strips: bool,
    /// The row loop of the elements past the last strip says how short it
    /// is: `for j in kb..min(kb + c, n)`, `c` one less than the strip's
    /// width (the strips stopped where fewer than that remained). The
    /// Cranelift translator compiles no vector loop for a loop that short
    /// (`jit::vector::too_short`), which would run once at most: MTTKRP
    /// from CSF as if for large data compiled in 2.9 ms with it, 1.9 ms
    /// with no rest at all.
    rest_says_short: bool,
}

/// Stored entries a sparse operand must hold, in the data a kernel is made
/// for, for the Cranelift tier to sum its rows in strips.
///
/// The strips' nests cost Cranelift 0.4-0.9 ms of compile, a first run
/// waits for that: SpDM from CSR (the `compile_time` example, no data)
/// 0.82 -> 1.24 ms, from COO on the bench's 3-D stencil 1.3 -> 2.2 ms
/// with its runs, MTTKRP from COO on the NELL-2-like tensor 1.25 -> 2.0.
/// What they save grows with the entries, measured in alternating
/// processes: MTTKRP from COO on the NELL-2-shaped tensor (10M entries)
/// 105 -> 85 ms, SpDM from COO into 32 columns on the uniform random
/// matrix (2M) 59 -> 36 ms, on the power-law one 167 -> 159, on the 3-D
/// stencil 111 -> 108. From 1M entries with rows of 16 a run takes 5 ms
/// and more, and saves its first run the compile.
pub(super) const CRANELIFT_MIN_ENTRIES: usize = 1 << 20;

impl Strips {
    /// The C: everywhere, with the half strip, the hints apart (in the
    /// strips' loop they cost gcc's code its registers). Cranelift:
    /// whole strips only (a half strip cost 0.2 ms of compile more), where
    /// `f`'s data is large (`CRANELIFT_MIN_ENTRIES`), the hints in the
    /// strips' loop. Across the loops of a CSF level (MTTKRP: a slice's
    /// fibers, 1.2 entries each, and their entries) they cost 1.0 ms of
    /// compile more than no strips (1.5 -> 2.5 ms) and save more in
    /// every run: on the NELL-2-like tensor (1.45M entries) 11.1 -> 8.9
    /// ms, on the NELL-2-shaped one (10M) 70.6 -> 61.5 ms (medians of
    /// 8-10 alternating rounds). Its hints are calls that keep
    /// every register (`prefetch::strip_for_calls`); apart, one loop of
    /// them before each run's strips, they asked too late for rows at
    /// scattered coordinates: SpDM from COO into 32 columns on the
    /// uniform random matrix ran 43 ms without strips, 56 with them and
    /// the hints apart, 36 with the hints inside (alternating processes).
    pub(super) fn for_backend(f: &Function, backend: super::passes::Backend) -> Strips {
        match backend {
            super::passes::Backend::C => Strips {
                half_strip: true,
                reading: None,
                hints_in_strips: false,
                rest_says_short: false,
            },
            super::passes::Backend::Cranelift => Strips {
                half_strip: false,
                reading: Some(
                    f.lengths
                        .iter()
                        .filter(|(_, n)| *n >= CRANELIFT_MIN_ENTRIES)
                        .map(|(a, _)| a.clone())
                        .collect(),
                ),
                hints_in_strips: true,
                rest_says_short: true,
            },
        }
    }

    /// Whether the nest `n` gets strips: where its innermost loop reads,
    /// at its position, one of the `reading` value arrays.
    fn take(&self, n: &Nest) -> bool {
        let Some(large) = &self.reading else {
            return true;
        };
        let p = n.levels.last().map(|l| l.var);
        let mut reads = false;
        let mut look = |e: &Expr| {
            e.walk(&mut |x| {
                reads |= matches!(x, Expr::Load(a, i)
                    if Some(&**i) == p.map(Expr::Var).as_ref() && large.contains(a));
            })
        };
        look(&n.term);
        walk_block(&n.prelude, &mut |s| {
            stmt_exprs(s).into_iter().for_each(&mut look)
        });
        reads
    }
}

pub fn sum_rows_in_strips(f: &mut Function, backend: super::passes::Backend) {
    let strips = Strips::for_backend(f, backend);
    // Runs of at least two entries: a run here saves a strip of a dense
    // row's loads and stores, not one store (`runs::shortest_run`).
    let repeating: Vec<ArrayRef> = f
        .runs
        .iter()
        .filter(|r| r.per_coordinate >= 2)
        .map(|r| r.array.clone())
        .collect();
    let mut body = std::mem::take(&mut f.body);
    in_block(&mut body, &mut f.vars, &repeating, &strips);
    f.body = body;
}

fn in_block(block: &mut Block, vars: &mut Vec<VarInfo>, repeating: &[ArrayRef], strips: &Strips) {
    for mut s in std::mem::take(block) {
        if let Some(stripped) = in_strips(&s, vars, strips) {
            block.extend(stripped);
            continue;
        }
        if let Some(runs) = super::row_runs::over_runs(&s, vars, repeating, strips) {
            block.extend(runs);
            continue;
        }
        for inner in nested_blocks_mut(&mut s) {
            in_block(inner, vars, repeating, strips);
        }
        block.push(s);
    }
}

/// One loop of an eligible nest above the row loop: its variable,
/// bounds, and the statements before the next loop (values and prefetch
/// hints only).
struct Level<'a> {
    var: VarId,
    lo: &'a Expr,
    hi: &'a Expr,
    prefix: &'a [Stmt],
}

/// The parts of an eligible nest (see the module).
struct Nest<'a> {
    /// The loops the row stays put across, outermost first: one for SpDM
    /// from CSR, two for MTTKRP from CSF (a slice's fibers and their
    /// entries, all adding into the slice's row).
    levels: Vec<Level<'a>>,
    row: VarId,
    row_lo: &'a Expr,
    row_hi: &'a Expr,
    row_body: &'a Block,
    array: &'a ArrayRef,
    /// The stored element's position less `row`, the same across the nest.
    base: Expr,
    /// What each iteration adds, with the row loop's own `let`s inlined;
    /// or, where `prelude` is not empty, as the row loop's store reads it.
    term: Expr,
    /// The row loop's statements before its store where they are more than
    /// `let`s (BCSR's sum over a block's columns, a loop): each lane of a
    /// strip runs a copy of its own, its variables renamed.
    prelude: Block,
}

fn nest(s: &Stmt) -> Option<Nest<'_>> {
    let mut levels = Vec::new();
    let mut at = s;
    loop {
        let Stmt::For { var, lo, hi, body } = at else {
            return None;
        };
        let (last, prefix) = body.split_last()?;
        let values = |s: &Stmt| {
            matches!(
                s,
                Stmt::Let(..) | Stmt::Prefetch { .. } | Stmt::Comment(_) | Stmt::Unlikely
            )
        };
        if !prefix.iter().all(values) {
            return None;
        }
        levels.push(Level {
            var: *var,
            lo,
            hi,
            prefix,
        });
        if let Some(n) = row_loop(s, last, &levels) {
            return Some(Nest { levels, ..n });
        }
        at = last;
    }
}

/// The nest of `outer` with `levels` above `last`, if `last` is a loop
/// adding into a row that stays put across them all.
fn row_loop<'a>(outer: &'a Stmt, last: &'a Stmt, levels: &[Level]) -> Option<Nest<'a>> {
    let Stmt::For {
        var: row,
        lo: row_lo,
        hi: row_hi,
        body: row_body,
    } = last
    else {
        return None;
    };
    // What changes across the levels: their variables and `let`s.
    let mut varying = BTreeSet::new();
    for level in levels {
        varying.insert(level.var);
        for s in level.prefix {
            if let Stmt::Let(v, _) = s {
                varying.insert(*v);
            }
        }
    }
    let reads_varying = |e: &Expr| e.vars().iter().any(|v| varying.contains(v));
    if reads_varying(row_lo) || reads_varying(row_hi) {
        return None;
    }
    let (last, lets) = row_body.split_last()?;
    let straight = lets.iter().all(|s| matches!(s, Stmt::Let(..)));
    if !straight && !computes_values_only(lets) {
        return None;
    }
    let (array, index, term) = add_into(last)?;
    let top_lets: Block = lets
        .iter()
        .filter(|s| matches!(s, Stmt::Let(..)))
        .cloned()
        .collect();
    let index = inlined(index, &top_lets);
    if !straight {
        let own = declared(lets);
        if index.vars().iter().any(|v| own.contains(v)) {
            return None;
        }
    }
    let base = match &index {
        Expr::Bin(BinOp::Add, b, k) if **k == Expr::Var(*row) => (**b).clone(),
        Expr::Bin(BinOp::Add, k, b) if **k == Expr::Var(*row) => (**b).clone(),
        _ => return None,
    };
    if base.vars().contains(row) || reads_varying(&base) {
        return None;
    }
    // The store and its own load, nothing else in the nest.
    let mut touches = 0;
    walk_block(std::slice::from_ref(outer), &mut |s| {
        if matches!(s, Stmt::Store(a, ..) if a == array) {
            touches += 1;
        }
        for e in stmt_exprs(s) {
            e.walk(&mut |x| touches += usize::from(matches!(x, Expr::Load(a, _) if a == array)));
        }
    });
    (touches == 2).then(|| Nest {
        levels: Vec::new(),
        row: *row,
        row_lo,
        row_hi,
        row_body,
        array,
        base,
        term: match straight {
            true => inlined(term, lets),
            false => term.clone(),
        },
        prelude: match straight {
            true => Vec::new(),
            false => without_unread_lets(lets, term),
        },
    })
}

/// `b` without the `let`s at its top level that nothing after them, nor
/// `term`, reads (the stored element's position, once the store is the
/// strip's).
fn without_unread_lets(b: &[Stmt], term: &Expr) -> Block {
    let mut read: BTreeSet<VarId> = term.vars().into_iter().collect();
    let mut kept = Vec::new();
    for s in b.iter().rev() {
        if matches!(s, Stmt::Let(v, _) if !read.contains(v)) {
            continue;
        }
        walk_block(std::slice::from_ref(s), &mut |s| {
            for e in stmt_exprs(s) {
                read.extend(e.vars());
            }
        });
        kept.push(s.clone());
    }
    kept.reverse();
    kept
}

/// Whether `b` only computes values of its own: no store, reserve or
/// hint anywhere, and every variable it sets declared in it. A copy of it
/// then changes nothing another copy, or anything after it, sees.
fn computes_values_only(b: &[Stmt]) -> bool {
    let own = declared(b);
    let mut only = true;
    walk_block(b, &mut |s| {
        only &= match s {
            Stmt::Set(v, _) => own.contains(v),
            Stmt::Let(..) | Stmt::For { .. } | Stmt::While { .. } | Stmt::If { .. } => true,
            Stmt::Comment(_) => true,
            _ => false,
        };
    });
    only
}

/// A copy of `b` for element `kb + w` of a strip: `row` read as `kb + w`,
/// each variable `b` declares renamed to one of its own (`map` gets the
/// renaming).
fn lane_copy(
    b: &[Stmt],
    row: VarId,
    (kb, w): (VarId, i64),
    vars: &mut Vec<VarInfo>,
    map: &mut Vec<(VarId, VarId)>,
) -> Block {
    for v in declared(b) {
        let info = vars[v as usize].clone();
        map.push((v, fresh_var(vars, &format!("{}_{w}", info.name), info.ty)));
    }
    let renamed = |v: VarId| map.iter().find(|(a, _)| *a == v).map_or(v, |(_, b)| *b);
    let mut copy = b.to_vec();
    rename_targets(&mut copy, &renamed);
    let at = Expr::add(Expr::Var(kb), Expr::Int(w));
    rewrite_block(&mut copy, &mut |x| {
        if let Expr::Var(v) = x {
            *x = match *v == row {
                true => at.clone(),
                false => Expr::Var(renamed(*v)),
            };
        }
    });
    copy
}

/// The variables statements of `b` declare or set, renamed by `renamed`.
fn rename_targets(b: &mut Block, renamed: &dyn Fn(VarId) -> VarId) {
    for s in b.iter_mut() {
        match s {
            Stmt::Let(v, _) | Stmt::Set(v, _) | Stmt::For { var: v, .. } => *v = renamed(*v),
            _ => {}
        }
        for inner in nested_blocks_mut(s) {
            rename_targets(inner, renamed);
        }
    }
}

/// `inner` inside the nest's levels, each level's prefix filtered by
/// `keep`.
fn within_levels(levels: &[Level], inner: Block, keep: &dyn Fn(&Stmt) -> bool) -> Stmt {
    let mut block = inner;
    for level in levels.iter().rev() {
        let mut body: Block = level.prefix.iter().filter(|s| keep(s)).cloned().collect();
        body.extend(block);
        block = vec![Stmt::For {
            var: level.var,
            lo: level.lo.clone(),
            hi: level.hi.clone(),
            body,
        }];
    }
    // `nest` returns a nest only after pushing its first level.
    block.pop().expect("a nest has a level") // ok: levels are never empty
}

/// `e` with the variables `lets` declare replaced by their values.
pub(super) fn inlined(e: &Expr, lets: &[Stmt]) -> Expr {
    let mut e = e.clone();
    for s in lets.iter().rev() {
        let Stmt::Let(v, init) = s else { continue };
        substitute(&mut e, *v, init);
    }
    e
}

/// Replace each read of `v` in `e` by `by`.
fn substitute(e: &mut Expr, v: VarId, by: &Expr) {
    e.rewrite(&mut |x| {
        if matches!(x, Expr::Var(w) if *w == v) {
            *x = by.clone();
        }
    });
}

/// `term` at element `kb + w` of the strip, each `x + row` as `(x + kb)
/// + w`: the lanes then read one address plus constant offsets, which
/// the C compiler pairs into vectors (`x + (kb + w)` it splits unevenly).
fn lane(term: &Expr, row: VarId, kb: VarId, w: i64) -> Expr {
    let mut e = term.clone();
    let at = || Expr::add(Expr::Var(kb), Expr::Int(w));
    e.rewrite(&mut |x| {
        let Expr::Bin(BinOp::Add, a, b) = x else {
            return;
        };
        let offset = if **b == Expr::Var(row) {
            std::mem::replace(&mut **a, Expr::Int(0))
        } else if **a == Expr::Var(row) {
            std::mem::replace(&mut **b, Expr::Int(0))
        } else {
            return;
        };
        *x = Expr::add(Expr::add(offset, Expr::Var(kb)), Expr::Int(w));
    });
    substitute(&mut e, row, &at());
    e
}

/// The nest's prefetch hints alone, with the `let`s and loops they need,
/// or `None` where it has none.
fn hints_alone(levels: &[Level]) -> Option<Stmt> {
    let mut inner: Option<Stmt> = None;
    for level in levels.iter().rev() {
        let mut read = BTreeSet::new();
        if let Some(s) = &inner {
            walk_block(std::slice::from_ref(s), &mut |s| {
                for e in stmt_exprs(s) {
                    read.extend(e.vars());
                }
            });
        }
        let mut kept: Block = inner.take().into_iter().collect();
        for s in level.prefix.iter().rev() {
            let keep = match s {
                Stmt::Prefetch { .. } => true,
                Stmt::Let(v, _) => read.contains(v),
                _ => false,
            };
            if keep {
                for e in stmt_exprs(s) {
                    read.extend(e.vars());
                }
                kept.push(s.clone());
            }
        }
        kept.reverse();
        let asks = kept
            .iter()
            .any(|s| matches!(s, Stmt::Prefetch { .. } | Stmt::For { .. }));
        inner = asks.then(|| Stmt::For {
            var: level.var,
            lo: level.lo.clone(),
            hi: level.hi.clone(),
            body: kept,
        });
    }
    inner
}

pub(super) fn in_strips(s: &Stmt, vars: &mut Vec<VarInfo>, strips: &Strips) -> Option<Vec<Stmt>> {
    let n = nest(s)?;
    if !strips.take(&n) {
        return None;
    }
    let kb = fresh_var(vars, "strip", Ty::I64);
    let width = strip_width(&n);
    let sums: Vec<VarId> = (0..width)
        .map(|w| fresh_var(vars, &format!("strip_sum{w}"), Ty::F64))
        .collect();
    // The prefetch hints go to a loop of their own before the strips: in
    // the strips' loop they cost gcc's code its registers (SpDM into 32
    // columns on the 3-D stencil, 118-120 ms without them there, 145-164
    // with them in the first strip), and out of it they still ask ahead
    // (power-law rows, 198-204 ms; 243-247 with no hints at all). The C
    // runs that loop only where its hints ask (`ir::print`'s asking nest).
    let fits = |w: i64| {
        Expr::Cmp(
            CmpOp::Le,
            Box::new(Expr::add(Expr::Var(kb), Expr::Int(w))),
            Box::new(n.row_hi.clone()),
        )
    };
    let inside = strips.hints_in_strips;
    let mut out: Vec<Stmt> = match inside {
        true => Vec::new(),
        false => hints_alone(&n.levels).into_iter().collect(),
    };
    out.push(Stmt::Let(kb, n.row_lo.clone()));
    // A row of a known length of one strip (rank-16 factor rows on the
    // Cranelift tier: `ir::fixed_params`) is that strip, with no loop
    // around it: a loop would carry every sum through its header, and
    // Cranelift allocates their registers at each (MTTKRP from COO of
    // rank 16 on the bench's NELL-2-like tensor: 2.87 -> 2.63 ms a compile
    // in tensorc on AMD Zen 1).
    let body = strip(&n, kb, &sums, inside, vars);
    match (&n.row_lo, &n.row_hi) {
        (Expr::Int(0), Expr::Int(c)) if *c == width => out.extend(body),
        _ => out.push(Stmt::While {
            cond: fits(width),
            body,
        }),
    }
    if strips.half_strip && width == WIDTH {
        // After the whole strips, at most one of half their width.
        out.push(Stmt::If {
            cond: fits(WIDTH / 2),
            then: strip(&n, kb, &sums[..WIDTH as usize / 2], false, vars),
            els: Vec::new(),
        });
    }
    // A row of a known length the strips cover whole has no rest (rank-16
    // factor rows on the Cranelift tier: `ir::fixed_params`).
    let whole = matches!((&n.row_lo, &n.row_hi), (Expr::Int(0), Expr::Int(c)) if c % width == 0);
    if !whole {
        // The elements past the last whole strip, as before.
        let rest_hi = match strips.rest_says_short {
            true => Expr::min(
                Expr::add(Expr::Var(kb), Expr::Int(width - 1)),
                n.row_hi.clone(),
            ),
            false => n.row_hi.clone(),
        };
        let rest = within_levels(
            &n.levels,
            vec![Stmt::For {
                var: n.row,
                lo: Expr::Var(kb),
                hi: rest_hi,
                body: n.row_body.clone(),
            }],
            &|_| true,
        );
        out.push(Stmt::If {
            cond: Expr::lt(Expr::Var(kb), n.row_hi.clone()),
            then: vec![rest],
            els: Vec::new(),
        });
    }
    Some(out)
}

/// Elements of a strip of `n`: `WIDTH`, or where the row loop runs from
/// 0 to at most `c < WIDTH` elements (`min(c, ..)`: a BCSR block's rows,
/// clipped at the last block by `ir::clip`), `c`: one strip then sums the
/// whole row where it has `c` elements.
fn strip_width(n: &Nest) -> i64 {
    let at_most = match n.row_hi {
        Expr::Int(c) => Some(*c),
        Expr::Bin(BinOp::Min, a, b) => a.as_int().or(b.as_int()),
        _ => None,
    };
    match (n.row_lo, at_most) {
        (Expr::Int(0), Some(c)) if (2..WIDTH).contains(&c) => c,
        _ => WIDTH,
    }
}

/// One strip of `sums.len()` elements from `kb`: the sums loaded from the
/// row, added into over the outer loop (with its prefetch hints where
/// `hints`), stored back, and `kb` past them.
fn strip(n: &Nest, kb: VarId, sums: &[VarId], hints: bool, vars: &mut Vec<VarInfo>) -> Block {
    let element = |w: i64| Expr::add(Expr::add(n.base.clone(), Expr::Var(kb)), Expr::Int(w));
    let mut block: Block = sums
        .iter()
        .zip(0..)
        .map(|(&s, w)| Stmt::Let(s, Expr::Load(n.array.clone(), Box::new(element(w)))))
        .collect();
    let mut adds = Vec::new();
    for (&s, w) in sums.iter().zip(0..) {
        let term = match n.prelude.is_empty() {
            true => lane(&n.term, n.row, kb, w),
            false => {
                let mut map = Vec::new();
                adds.extend(lane_copy(&n.prelude, n.row, (kb, w), vars, &mut map));
                lane(&super::unroll::rename(&n.term, &map), n.row, kb, w)
            }
        };
        adds.push(Stmt::Set(s, Expr::add(Expr::Var(s), term)));
    }
    let not_hint = |s: &Stmt| hints || !matches!(s, Stmt::Prefetch { .. });
    block.push(within_levels(&n.levels, adds, &not_hint));
    block.extend(
        sums.iter()
            .zip(0..)
            .map(|(&s, w)| Stmt::Store(n.array.clone(), element(w), Expr::Var(s))),
    );
    let width = sums.len() as i64;
    block.push(Stmt::Set(kb, Expr::add(Expr::Var(kb), Expr::Int(width))));
    block
}

/// `for k in 0..D2 { let at = base + k; C[at] += a * D[j*D2 + k] }`, the
/// row update of the test nests here and in `ir::row_runs`.
#[cfg(test)]
pub(super) fn add_into_row(e: &mut Emitter, base: Expr, a: Expr, j: Expr) {
    let width = Expr::param(ParamRef::dim("D", 1));
    let (c, d) = (ArrayRef::vals("C"), ArrayRef::vals("D"));
    e.for_("k", Expr::Int(0), width.clone(), |e, k| {
        let at = e.let_var("at", Expr::add(base, k.clone()));
        let term = Expr::mul(a, Expr::load(d, Expr::add(Expr::mul(j, width), k)));
        e.store(c.clone(), at.clone(), Expr::add(Expr::load(c, at), term));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::passes::Backend;

    /// `for p in 0..P { let j = crd[p]; for k in 0..K { C[row(p)*K + k]
    /// += A[p] * D[j*K + k] } }`, the row given by `row` (of `p` and of
    /// the variable `i` declared before the loop), and with `also_read`
    /// a second read of `C` in the loop.
    fn nest(row: fn(Expr, Expr) -> Expr, also_read: bool) -> Function {
        let (crd, a, c) = (
            ArrayRef::level("A", 1, "crd"),
            ArrayRef::vals("A"),
            ArrayRef::vals("C"),
        );
        let width = Expr::param(ParamRef::dim("D", 1));
        let mut e = Emitter::new();
        let i = e.let_var("i", Expr::Int(3));
        e.for_("p", Expr::Int(0), Expr::Int(10), |e, p| {
            let j = e.let_var("j", Expr::load(crd.clone(), p.clone()));
            let base = Expr::mul(row(p.clone(), i.clone()), width.clone());
            if also_read {
                e.let_var("seen", Expr::load(c.clone(), Expr::Int(0)));
            }
            add_into_row(e, base, Expr::load(a.clone(), p.clone()), j);
        });
        e.finish("k")
    }

    fn stripped(mut f: Function) -> bool {
        sum_rows_in_strips(&mut f, Backend::C);
        f.vars.iter().any(|v| v.name.starts_with("strip_sum"))
    }

    #[test]
    fn a_row_that_stays_put_is_summed_in_strips() {
        let mut f = nest(|_, i| i, false);
        sum_rows_in_strips(&mut f, Backend::C);
        let text = f.to_string();
        // Lanes read one address plus constant offsets.
        assert!(
            text.contains("let strip_sum15: f64 = C_vals[i * D2_dimension + strip + 15]"),
            "{text}"
        );
        assert!(
            text.contains("strip_sum1 += A_vals[p] * D_vals[j * D2_dimension + strip + 1]"),
            "{text}"
        );
        assert!(text.contains("for k in strip..D2_dimension"), "{text}");
    }

    /// A row whose length is fixed at a multiple of the strip's width
    /// (`Function::fixed_params`: rank 16 or 32 on the Cranelift tier)
    /// needs no loop for the elements past the strips; any other length
    /// keeps it. A row of one strip needs no loop over strips either.
    #[test]
    fn a_row_of_whole_strips_has_no_rest() {
        for (k, rest) in [(16, false), (32, false), (20, true), (40, true)] {
            let mut f = nest(|_, i| i, false);
            f.fixed_params = vec![(ParamRef::dim("D", 1), k)];
            super::super::fixed_params::compile_in(&mut f);
            sum_rows_in_strips(&mut f, Backend::C);
            let text = f.to_string();
            assert!(text.contains("let strip_sum15"), "{text}");
            assert_eq!(text.contains(&format!("if strip < {k} {{")), rest, "{text}");
            assert_eq!(text.contains("for k in strip.."), rest, "{text}");
            assert_eq!(text.contains("while strip + 16 <="), k != 16, "{text}");
        }
    }

    /// for q { let k = crd1[q]; for p in pos[q]..pos[q+1] { let j =
    /// crd2[p]; for k' { C[i*K + k'] += A[p] * D[j*K + k'] } } }: the row
    /// stays put across both loops (MTTKRP from CSF).
    fn fibers() -> Function {
        let (crd, pos, a) = (
            ArrayRef::level("A", 2, "crd"),
            ArrayRef::level("A", 2, "pos"),
            ArrayRef::vals("A"),
        );
        let width = Expr::param(ParamRef::dim("D", 1));
        let mut e = Emitter::new();
        let i = e.let_var("i", Expr::Int(3));
        e.for_("q", Expr::Int(0), Expr::Int(4), |e, q| {
            let lo = e.let_var("lo", Expr::load(pos.clone(), q.clone()));
            let hi = e.let_var(
                "hi",
                Expr::load(pos.clone(), Expr::add(q.clone(), Expr::Int(1))),
            );
            e.for_("p", lo, hi, |e, p| {
                let j = e.let_var("j", Expr::load(crd.clone(), p.clone()));
                let base = Expr::mul(i.clone(), width.clone());
                add_into_row(e, base, Expr::load(a.clone(), p), j);
            });
        });
        e.finish("k")
    }

    #[test]
    fn a_row_summed_over_fibers_and_their_entries_is_one_strip() {
        let mut f = fibers();
        sum_rows_in_strips(&mut f, Backend::C);
        let text = f.to_string();
        let (sum, fibers) = (
            text.find("let strip_sum0").expect("stripped"), // ok: test code
            text.find("for q in").expect("fibers"),         // ok: test code
        );
        assert!(
            sum < fibers,
            "the sums outlive the loop over fibers:\n{text}"
        );
        assert!(
            text.contains("for q in 0..4 {\n      let lo: i64 = A3_pos[q]"),
            "{text}"
        );
    }

    /// BCSR(2) SpMV: `for p { let jb = crd[p]; for r in 0..min(2, n - 2i)
    /// { let t = 0.0; for c in 0..min(2, m - 2jb) { t += A[(2p + r)*2 + c]
    /// * x[2jb + c] }; y[2i + r] += t } }`. The row of `y` holds across
    /// `p` and has at most 2 elements: one strip of 2, each lane a copy of
    /// the loop over `c` with variables of its own.
    #[test]
    fn a_blocks_rows_are_one_narrow_strip_with_a_loop_in_each_lane() {
        let (crd, a, x, y) = (
            ArrayRef::level("A", 1, "crd"),
            ArrayRef::vals("A"),
            ArrayRef::vals("x"),
            ArrayRef::vals("y"),
        );
        let (n, m) = (
            Expr::param(ParamRef::dim("y", 0)),
            Expr::param(ParamRef::dim("x", 0)),
        );
        let two = || Expr::Int(2);
        let mut e = Emitter::new();
        let i = e.let_var("i", Expr::Int(3));
        e.for_("p", Expr::Int(0), Expr::Int(10), |e, p| {
            let jb = e.let_var("jb", Expr::load(crd.clone(), p.clone()));
            let rows = Expr::min(two(), Expr::sub(n, Expr::mul(i.clone(), two())));
            e.for_("r", Expr::Int(0), rows, |e, r| {
                let t = e.let_var("t", Expr::Float(0.0));
                let cols = Expr::min(two(), Expr::sub(m, Expr::mul(jb.clone(), two())));
                e.for_("c", Expr::Int(0), cols, |e, c| {
                    let at = Expr::add(
                        Expr::mul(Expr::add(Expr::mul(p, two()), r.clone()), two()),
                        c.clone(),
                    );
                    let xj = Expr::load(x, Expr::add(Expr::mul(jb, two()), c));
                    e.set(&t, Expr::add(t.clone(), Expr::mul(Expr::load(a, at), xj)));
                });
                let at = e.let_var("at", Expr::add(Expr::mul(i.clone(), two()), r));
                e.store(y.clone(), at.clone(), Expr::add(Expr::load(y, at), t));
            });
        });
        let mut f = e.finish("k");
        sum_rows_in_strips(&mut f, Backend::C);
        let text = f.to_string();
        assert!(text.contains("while strip + 2 <= min(2, "), "{text}");
        assert!(!text.contains("strip_sum2"), "{text}");
        for lane in ["t_0", "t_1", "c_0", "c_1"] {
            assert!(text.contains(lane), "{lane}: {text}");
        }
        assert!(text.contains("strip_sum1 += t_1"), "{text}");
        // The store's position, read by nothing in the lanes, is dropped.
        assert!(!text.contains("at_0"), "{text}");
    }

    #[test]
    fn a_row_that_moves_or_is_read_elsewhere_stays() {
        assert!(!stripped(nest(|p, _| p, false)), "the row moves with p");
        assert!(
            !stripped(nest(|_, i| i, true)),
            "the loop reads C elsewhere"
        );
    }

    /// Cranelift: strips of 16 alone, where the values read at the
    /// innermost loop's position are known to be many.
    #[test]
    fn cranelift_takes_strips_where_the_data_is_large() {
        let made_for = |mut f: Function, array: &str, n: usize| {
            f.lengths = vec![(ArrayRef::vals(array), n)];
            sum_rows_in_strips(&mut f, Backend::Cranelift);
            f.to_string()
        };
        let large = made_for(nest(|_, i| i, false), "A", CRANELIFT_MIN_ENTRIES);
        assert!(large.contains("while strip + 16 <="), "{large}");
        assert!(!large.contains("if strip + 8 <="), "no half strip: {large}");
        // The rest says it runs fewer iterations than a strip's.
        assert!(large.contains("..min(strip + 15, "), "{large}");
        for (array, n) in [("A", CRANELIFT_MIN_ENTRIES - 1), ("D", 1 << 24)] {
            // Few entries, or only the dense operand large.
            let text = made_for(nest(|_, i| i, false), array, n);
            assert!(!text.contains("strip"), "{array} {n}: {text}");
        }
        // The hints stay in the strips' loop (calls keep no register).
        let mut hinted = nest(|_, i| i, false);
        super::super::prefetch::prefetch_rows(&mut hinted);
        let text = made_for(hinted, "A", CRANELIFT_MIN_ENTRIES);
        let (strips, ask) = (
            text.find("while strip + 16 <=").unwrap(), // ok: test code
            text.find("prefetch D_vals"),
        );
        assert!(ask.is_some_and(|a| a > strips), "{text}");
        // Across a level's fibers and their entries, as in the C.
        let text = made_for(fibers(), "A", CRANELIFT_MIN_ENTRIES - 1);
        assert!(!text.contains("strip"), "{text}");
        let text = made_for(fibers(), "A", CRANELIFT_MIN_ENTRIES);
        let (sum, across) = (text.find("let strip_sum0"), text.find("for q in"));
        assert!(sum.is_some_and(|s| across.is_some_and(|q| s < q)), "{text}");
        let mut c = fibers();
        sum_rows_in_strips(&mut c, Backend::C);
        assert!(c.to_string().contains("if strip + 8 <="), "{c}");
        assert!(!c.to_string().contains("min(strip"), "{c}");
    }
}
