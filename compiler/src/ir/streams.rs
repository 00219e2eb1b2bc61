//! Software prefetch of the arrays a short inner loop reads in order.
//!
//! CSR SpMV's loop over one row's positions reads `crd[p]` and `vals[p]`
//! in order, a few positions a row, and the loop over rows starts it again
//! and again:
//!
//! ```text
//! for i in 0..n {
//!   for p in pos[i]..pos[i + 1] { .. vals[p] * x[crd[p]] .. }
//! }
//! ```
//!
//! Together the rows are one stream through each array, but the hardware
//! prefetchers run too little ahead of it: on this host the cc tier's CSR
//! SpMV on the 3-D 7-point stencil of `bench/run.py` (1.33M rows, 7 a row)
//! ran 9.0-9.3 ms, and asking before each row for the positions
//! `DISTANCE` ahead of its first brought it to 5.4-5.6 ms; 2.3-2.4 -> 2.0
//! ms on the fem_blocks matrix (15 a row), 2.4-2.5 -> 2.1-2.3 on the
//! tridiagonal one (3 a row). Nearer (32 positions) gained less, farther
//! (1,024) lost some of it again. Asking for a row's worth
//! (`POSITIONS`: 2 lines of `vals`, 1 of `crd`) and no more matters for
//! short rows: a fourth line a row on the tridiagonal matrix took back
//! its whole gain.
//!
//! COO's one loop over all its entries is a single long stream through
//! each array, and the prefetchers fall behind there too: inside that
//! loop, each iteration asks for its widest streams (COO's values,
//! COO-AoS's values and coordinate pairs) `DISTANCE` positions ahead
//! (`hint_within`), and for every stream where the loop also asks for the
//! elements it gathers at scattered coordinates (`hint_beside_gathers`).
//!
//! Only arrays larger than a core's L2 cache are asked for, tested at run
//! time (`TENSOR_PREFETCH_MIN_BYTES`): on the 2-D stencil of 40K rows
//! (2.4 MB) the hints cost 13% and gained nothing.
//!
//! Both tiers take these hints. The Cranelift tier, compiled for its data,
//! keeps those the data would run (`ir::hints_for_data`) and carries them
//! as prefetch instructions (`jit::prefetch`), on x86-64. Elsewhere
//! Cranelift has no prefetch instruction, and a call at every row would
//! cost more than it saves: its kernels ask instead, for rows of 4 or more
//! positions on average, for the rows' values once per strip of 8 rows
//! through the routine `ir::prefetch` calls (`ask_rows_by_calls`).

use super::{fresh_var, nested_blocks_mut, ArrayRef, Block, CmpOp, Expr};
use super::{ElemTy, Function, Stmt, Ty, VarId, VarInfo};
use std::collections::{BTreeMap, BTreeSet};

/// How many positions ahead of a loop's first position to ask for: 2 KB
/// of `f64` values, 1 KB of `i32` coordinates.
const DISTANCE: i64 = 256;

/// How many positions to ask for, from `DISTANCE` ahead: about one short
/// row's (2 lines of `f64`, 1 of `i32`).
const POSITIONS: i64 = 16;

/// Add the hints before every innermost loop nested in exactly one other
/// loop that reads, at its position, arrays the kernel never writes: a
/// matrix's rows. The fibers of a third-order tensor, a loop deeper, are
/// too short for a hint each: 1.8 entries on average in `bench/run.py`'s
/// tensor, where hints before each made TTV from CSF 12% slower, MTTKRP
/// 5% and TTM 3%, against 3-15 entries a row in its matrices.
pub fn prefetch_streams(f: &mut Function) {
    // Once: a kernel printed again (`ir::c::function` runs the passes)
    // keeps the hints it has.
    let mut hinted = false;
    super::walk_block(&f.body, &mut |s| {
        hinted |= matches!(s, Stmt::PrefetchStream { .. })
    });
    if hinted {
        return;
    }
    let written = f.written_arrays();
    in_block(&mut f.body, None, &written);
}

/// The Cranelift tier's form of the hints before each row where it has
/// no prefetch instruction (not x86-64): a loop over rows whose inner
/// loop starts at `pos[i]` asks, through the routine `ir::prefetch`
/// calls once per strip of 8 rows (`prefetch::strip_for_calls`), for the
/// first `ROW_VALUES`
/// values of each row `prefetch::DISTANCE` rows ahead: `Prefetch { vals,
/// coords: pos, at: i + DISTANCE }`. The values only: the routine reads
/// `f64` rows, and they are the widest stream (COO's loop gained from
/// them alone in C).
///
/// The call costs about what a few short rows do, so the loop is kept
/// twice, behind a test of its rows' average length (`ROW_POSITIONS`):
/// CSR SpMV, Cranelift tier, median ms: 3-D stencil (7 a row) 9.96 ->
/// 8.15, 2-D stencil (5) 5.21 -> 4.28, fem_blocks (15) 2.66 -> 2.43, but
/// the tridiagonal matrix (3) 2.93 -> 3.28 and the power-law one (3.1,
/// scattered) 18.3 -> 27.9 asked at every strip.
///
/// Only loops over rows inside at most one other loop (`MAX_ENCLOSING`):
/// a matrix's rows, a third-order tensor's fibers. Deeper lie the fibers
/// of a slice summed in strips (`ir::strips`: MTTKRP from CSF on large
/// data, inside the slices' loop and the strips' own), 1.2 entries each
/// in the bench's tensors: the copy made them 0.9 ms longer to compile
/// (2.1-2.2 ms without it, 3.1 with) and slower to run, 7.8 -> 6.1 ms
/// without it on the NELL-2-like tensor, 67.3 -> 56.0 on the
/// NELL-2-shaped one (10M entries; alternating processes, 8 and 6
/// rounds), and 7.45 -> 6.08 ms on fibers of 20 entries (2M entries),
/// where the asks ran.
pub fn ask_rows_by_calls(f: &mut Function) {
    // Only arrays known to pass the size get asks from `strip_for_calls`
    // (inputs: the lengths are of input values), so only their loops are
    // copied.
    let large = super::prefetch::large_arrays(f);
    let mut body = std::mem::take(&mut f.body);
    rows_in_block(&mut body, &mut f.vars, &large, 0);
    f.body = body;
}

/// The most loops a loop over rows may sit in for `ask_rows_by_calls`.
const MAX_ENCLOSING: usize = 1;

/// Values asked for a row: one cache line (two lines made the tridiagonal
/// matrix 20% slower, asking each line of its 24-byte rows five times).
const ROW_VALUES: i64 = 8;

/// Fewest positions a row on average for the asks to run.
const ROW_POSITIONS: i64 = 4;

/// `block` sits in `enclosing` loops.
fn rows_in_block(
    block: &mut Block,
    vars: &mut Vec<VarInfo>,
    large: &BTreeSet<ArrayRef>,
    enclosing: usize,
) {
    for k in 0..block.len() {
        let inside = match &block[k] {
            Stmt::For { .. } | Stmt::While { .. } => enclosing + 1,
            _ => enclosing,
        };
        for inner in nested_blocks_mut(&mut block[k]) {
            rows_in_block(inner, vars, large, inside);
        }
        if enclosing > MAX_ENCLOSING {
            continue;
        }
        let Stmt::For { var, lo, hi, body } = &block[k] else {
            continue;
        };
        let Some((pos, asks)) = row_asks(*var, body, large) else {
            continue;
        };
        // `pos[hi]` is the end of the last row the loop reads, and
        // `pos[lo]` the start of its first: both in range when it runs.
        let (lo, hi) = (lo.clone(), hi.clone());
        let positions = Expr::sub(
            Expr::load(pos.clone(), hi.clone()),
            Expr::load(pos, lo.clone()),
        );
        let rows = Expr::sub(hi.clone(), lo.clone());
        let long = fresh_var(vars, "long_rows", Ty::Bool);
        let plain = block[k].clone();
        let mut hinted = plain.clone();
        if let Stmt::For { body, .. } = &mut hinted {
            body.splice(0..0, asks);
        }
        block[k] = Stmt::If {
            cond: Expr::cmp(CmpOp::Lt, lo, hi),
            then: vec![
                Stmt::Let(
                    long,
                    Expr::cmp(
                        CmpOp::Ge,
                        positions,
                        Expr::mul(rows, Expr::Int(ROW_POSITIONS)),
                    ),
                ),
                Stmt::If {
                    cond: Expr::Var(long),
                    then: vec![hinted],
                    els: vec![plain],
                },
            ],
            els: Vec::new(),
        };
    }
}

/// The `pos` array of loop `for row in .. { body }` and its asks: one for
/// each array of values in `large` that an innermost loop of `body` reads
/// at positions counted from `pos[row]` to `pos[row + 1]`, skipping loops
/// that go on with what an earlier loop read (the rest of a row after a
/// merge).
fn row_asks(row: VarId, body: &Block, large: &BTreeSet<ArrayRef>) -> Option<(ArrayRef, Vec<Stmt>)> {
    // The `let`s of the row that nothing changes at its top level, to
    // follow a loop's first position back to the `pos` it came from.
    let lets: BTreeMap<VarId, &Expr> = body
        .iter()
        .filter_map(|s| match s {
            Stmt::Let(v, e) if !body.iter().any(|t| matches!(t, Stmt::Set(w, _) if w == v)) => {
                Some((*v, e))
            }
            _ => None,
        })
        .collect();
    let pos_at = |e: &Expr, at: &Expr| {
        let mut e = e;
        while let Expr::Var(v) = e {
            e = lets.get(v)?;
        }
        match e {
            Expr::Load(pos, i) if **i == *at => Some(pos.clone()),
            _ => None,
        }
    };
    // The `pos` whose next entry ends the row: its `pos[hi]` is in range.
    let next_row = Expr::add(Expr::Var(row), Expr::Int(1));
    let ends: BTreeSet<ArrayRef> = lets.values().filter_map(|e| pos_at(e, &next_row)).collect();
    let mut asked: BTreeSet<ArrayRef> = BTreeSet::new();
    let mut found: Option<(ArrayRef, Vec<Stmt>)> = None;
    for s in body {
        let loaded = super::loaded_arrays(std::slice::from_ref(s));
        if let Some((inner, first)) = counted_positions(s) {
            for (array, v) in read_at(inner, &first, &BTreeSet::new()) {
                let pos = match pos_at(&first[&v], &Expr::Var(row)) {
                    Some(pos) if ends.contains(&pos) => pos,
                    _ => continue,
                };
                let same = found.as_ref().is_none_or(|(p, _)| *p == pos);
                if !large.contains(&array) || asked.contains(&array) || !same {
                    continue;
                }
                let ask = Stmt::Prefetch {
                    array,
                    coords: pos.clone(),
                    at: Expr::add(Expr::Var(row), Expr::Int(super::prefetch::DISTANCE)),
                    positions: 1,
                    stride: Expr::Int(1),
                    len: Expr::Int(ROW_VALUES),
                };
                found.get_or_insert_with(|| (pos, Vec::new())).1.push(ask);
            }
        }
        asked.extend(loaded);
    }
    found
}

/// `outer`: the variables the innermost loop around `block` binds or
/// changes, and how many loops enclose `block` (None outside every loop).
fn in_block(
    block: &mut Block,
    outer: Option<(&BTreeSet<VarId>, usize)>,
    written: &BTreeSet<ArrayRef>,
) {
    // Arrays a loop earlier in this block read: a loop after it (the rest
    // of a row after a merge) continues the same stream, and a hint there
    // comes late (CSR add on the 3-D stencil: 25.9 -> 27.6 ms with hints
    // before the loops that finish a row's merge).
    let mut asked: BTreeSet<ArrayRef> = BTreeSet::new();
    let mut k = 0;
    while k < block.len() {
        let own = loop_vars(&block[k]);
        let depth = outer.map_or(0, |(_, d)| d);
        let inside = match &own {
            Some(vars) => Some((vars, depth + 1)),
            None => outer,
        };
        for inner in nested_blocks_mut(&mut block[k]) {
            in_block(inner, inside, written);
        }
        // Hints go only before loops nested in exactly one other.
        let mut hints = Vec::new();
        if let (None, Some(_)) = (outer, &own) {
            hint_within(&mut block[k], written);
        }
        if let (Some(_), Some(_)) = (outer, &own) {
            hint_slot_rows(&mut block[k], written);
        }
        if let (Some((vars, 1)), Some(_)) = (outer, &own) {
            hints = hints_before(&block[k], vars, written, &asked);
            asked.extend(super::loaded_arrays(std::slice::from_ref(&block[k])));
        }
        let n = hints.len();
        block.splice(k..k, hints);
        k += n + 1;
    }
}

/// The variables loop `s` binds or changes: its own, and those its body
/// declares or assigns. None when `s` is no loop.
fn loop_vars(s: &Stmt) -> Option<BTreeSet<VarId>> {
    let (own, body) = match s {
        Stmt::For { var, body, .. } => (Some(*var), body),
        Stmt::While { body, .. } => (None, body),
        _ => return None,
    };
    let mut vars: BTreeSet<VarId> = own.into_iter().collect();
    super::walk_block(body, &mut |s| {
        if let Stmt::Let(v, _) | Stmt::Set(v, _) = s {
            vars.insert(*v);
        }
    });
    Some(vars)
}

/// The hints for loop `s`, if it is innermost and counts its position
/// (`counted_positions`): for each array it reads at that position, the
/// positions `DISTANCE` ahead of the first. Only where the first position
/// changes with the loop around (`outer`): a loop run again over the same
/// positions (a row of SpDM in strips of columns) finds them in the cache.
fn hints_before(
    s: &Stmt,
    outer: &BTreeSet<VarId>,
    written: &BTreeSet<ArrayRef>,
    asked: &BTreeSet<ArrayRef>,
) -> Vec<Stmt> {
    let Some((body, first)) = counted_positions(s) else {
        return Vec::new();
    };
    let moving: BTreeMap<VarId, Expr> = first
        .into_iter()
        .filter(|(_, start)| reads_any(start, outer))
        .collect();
    read_at(body, &moving, written)
        .into_iter()
        .filter(|(array, _)| !asked.contains(array))
        .map(|(array, v)| Stmt::PrefetchStream {
            array,
            at: Expr::add(moving[&v].clone(), Expr::Int(DISTANCE)),
            positions: POSITIONS,
            beside_gathers: false,
        })
        .collect()
}

/// The hints inside loop `s`, which no loop encloses, if it is innermost,
/// counts its position and reads a level's `crd` there: COO's single loop
/// over all its entries, one long stream through each array. At each
/// iteration it asks for its widest streams, those of the most bytes a
/// position, `DISTANCE` positions ahead: COO's values (8 bytes a position,
/// against 4 for each coordinate array), or COO-AoS's values and its
/// pairs of coordinates (8 and 8).
///
/// Measured on an AMD EPYC, cc tier, COO SpMV: the values' hint took the
/// 3-D stencil of `bench/run.py` 10.6 -> 7.9 ms, the 2-D one 5.6 -> 4.2
/// and fem_blocks 2.70 -> 2.46; a hint for every array at each iteration
/// took fem_blocks to 3.0 instead (the prefetches crowd the loop's loads),
/// and so did hints for all of them once in 16 positions (the test alone,
/// a branch a few iterations apart beside the run's end, cost as much).
/// There, COO-AoS's values alone cost fem_blocks 2.3 -> 2.9. On an Intel
/// Xeon (`examples/ab_kernels`, 10 rounds), COO-AoS with both its hints
/// against none: fem_blocks 0.44x the time, 2-D stencil 0.56, 3-D 0.79,
/// tridiagonal 0.86, uniform random 0.92, power-law 0.67; its values
/// alone or its pairs alone gained about half as much (0.83-0.94), and
/// lost on the power-law matrix (1.06-1.19). COO's coordinate arrays
/// beside its values, there: 3-D stencil 0.95, fem_blocks 1.00, uniform
/// 1.07, so they get hints only beside gathers (`hint_beside_gathers`).
fn hint_within(s: &mut Stmt, written: &BTreeSet<ArrayRef>) {
    let Some((body, first)) = counted_positions(s) else {
        return;
    };
    let streams = read_in_order(body, &first.into_keys().collect(), written);
    // Stored coordinates read at the position, a stream of their own (not
    // a loop over dense positions, which reads no index array).
    if !streams.keys().any(|a| a.elem() == ElemTy::I32) {
        return;
    }
    let width = |a: &ArrayRef, per_position: i64| a.elem().bytes() as i64 * per_position;
    let Some(widest) = streams.iter().map(|(a, (_, k))| width(a, *k)).max() else {
        return;
    };
    let hints: Vec<Stmt> = streams
        .into_iter()
        .filter(|(a, (_, k))| width(a, *k) == widest)
        .map(|(array, (v, k))| stream_hint(array, v, k, false))
        .collect();
    if let Stmt::For { body, .. } | Stmt::While { body, .. } = s {
        body.splice(0..0, hints);
    }
}

/// The hint inside an innermost loop over rows that reads stored
/// coordinates at `let p = base + row`, `base` fixed in the loop and moved
/// by a loop around it: ELL's rows, slot by slot, in tiles of rows
/// (`ir::tile`). Each pass over a tile's rows of one slot is a stream of
/// its own, a few KB long, that the hardware prefetchers take up anew; at
/// each row the loop asks for its widest array (the values) `DISTANCE`
/// rows ahead, into the next tile's part of the slot at the tile's end.
/// ELL SpMV on this Intel Xeon, cc tier (`examples/ab_kernels`, 10
/// rounds): 3-D stencil 0.77x the time, 2-D 0.84, fem_blocks 0.89,
/// tridiagonal 0.94, uniform random 1.04 (45 slots a row, most of them
/// padding); the coordinates' hint beside the values' gained nothing
/// more (0.80-1.05). DIA's diagonals, which read no coordinates there,
/// gained nothing from hints for the next tile (0.96-1.16), and a hint at
/// each row would keep gcc from vectorizing their loop.
fn hint_slot_rows(s: &mut Stmt, written: &BTreeSet<ArrayRef>) {
    let Stmt::For { var, body, .. } = s else {
        return;
    };
    if super::has_loops(body) {
        return;
    }
    let row = *var;
    let mut changed = BTreeSet::from([row]);
    super::walk_block(body, &mut |t| {
        if let Stmt::Let(v, _) | Stmt::Set(v, _) = t {
            changed.insert(*v);
        }
    });
    let fixed = |e: &Expr| !reads_any(e, &changed);
    // `p` and its value at the row, which the hint at the body's top
    // reads before `p` is declared.
    let offsets: BTreeMap<VarId, Expr> = body
        .iter()
        .filter_map(|t| match t {
            Stmt::Let(p, e @ Expr::Bin(super::BinOp::Add, a, b))
                if (**b == Expr::Var(row) && fixed(a)) || (**a == Expr::Var(row) && fixed(b)) =>
            {
                Some((*p, e.clone()))
            }
            _ => None,
        })
        .collect();
    let here: BTreeMap<VarId, Expr> = offsets.keys().map(|&p| (p, Expr::Var(p))).collect();
    let streams = read_at(body, &here, written);
    if !streams.keys().any(|a| a.elem() == ElemTy::I32) {
        return;
    }
    let Some((array, p)) = streams.into_iter().max_by_key(|(a, _)| a.elem().bytes()) else {
        return;
    };
    let hint = Stmt::PrefetchStream {
        array,
        at: Expr::add(offsets[&p].clone(), Expr::Int(DISTANCE)),
        positions: 1,
        beside_gathers: false,
    };
    body.insert(0, hint);
}

/// The hint for `array`, read `per_position` elements a position at
/// position `p`: from `DISTANCE` positions ahead.
fn stream_hint(array: ArrayRef, p: VarId, per_position: i64, beside_gathers: bool) -> Stmt {
    let at = match per_position {
        1 => Expr::add(Expr::Var(p), Expr::Int(DISTANCE)),
        k => Expr::add(
            Expr::mul(Expr::Var(p), Expr::Int(k)),
            Expr::Int(k * DISTANCE),
        ),
    };
    Stmt::PrefetchStream {
        array,
        at,
        positions: 1,
        beside_gathers,
    }
}

/// The arrays `body` loads in order of one of `positions`, the kernel
/// never writes, each with that position and how many elements a position
/// it spans: `k` for a load at `p * k` or `p * k + c` (COO-AoS's pairs at
/// `2 * p` and `2 * p + 1`), 1 at `p`.
fn read_in_order(
    body: &Block,
    positions: &BTreeSet<VarId>,
    written: &BTreeSet<ArrayRef>,
) -> BTreeMap<ArrayRef, (VarId, i64)> {
    let at_position = |i: &Expr| -> Option<(VarId, i64)> {
        let (p, k, _) = i.scaled_position(|p| positions.contains(&p))?;
        (k > 0).then_some((p, k))
    };
    let mut streams = BTreeMap::new();
    super::walk_block(body, &mut |st| {
        for e in super::stmt_exprs(st) {
            e.walk(&mut |x| {
                let Expr::Load(a, i) = x else { return };
                if written.contains(a) {
                    return;
                }
                if let Some(at) = at_position(i) {
                    streams.entry(a.clone()).or_insert(at);
                }
            });
        }
    });
    streams
}

/// Hints for every other array COO's loop reads at its position, beside
/// its gathers (`ir::gathers`: run after it), in the copy of the loop that
/// asks for them. Where the gathers miss, the loop runs at their pace, and
/// the hardware prefetchers, among the misses, no longer keep ahead of
/// the streams either: on this Intel host, COO SpMV on the power-law
/// matrix of `bench/run.py` (3.6 entries a row, scattered over an `x` of
/// 8 MB), cc tier, ran 0.66x the time with hints for both coordinate
/// arrays beside the values' (0.83x for the column coordinates alone,
/// which the gathers' asks read ahead, 0.89x for the rows' alone). Where
/// the coordinates follow each other, the loop streams at the memory's
/// pace and the widest array's hint is enough (`hint_within`).
pub fn hint_beside_gathers(f: &mut Function) {
    let written = f.written_arrays();
    beside_gathers_in(&mut f.body, &written);
}

/// The loops of `block` that no loop encloses.
fn beside_gathers_in(block: &mut Block, written: &BTreeSet<ArrayRef>) {
    for s in block.iter_mut() {
        if !matches!(s, Stmt::For { .. } | Stmt::While { .. }) {
            for inner in nested_blocks_mut(s) {
                beside_gathers_in(inner, written);
            }
            continue;
        }
        let Some((body, first)) = counted_positions(s) else {
            continue;
        };
        if !matches!(body.first(), Some(Stmt::PrefetchStream { .. })) {
            continue;
        }
        if !body
            .iter()
            .any(|t| matches!(t, Stmt::PrefetchGather { .. }))
        {
            continue;
        }
        // The widest streams' hints lead the body (`hint_within`).
        let hinted: BTreeSet<&ArrayRef> = body
            .iter()
            .map_while(|t| match t {
                Stmt::PrefetchStream { array, .. } => Some(array),
                _ => None,
            })
            .collect();
        let hints: Vec<Stmt> = read_in_order(body, &first.into_keys().collect(), written)
            .into_iter()
            .filter(|(array, _)| !hinted.contains(array))
            .map(|(array, (v, k))| stream_hint(array, v, k, true))
            .collect();
        let n = hinted.len();
        if let Stmt::For { body, .. } | Stmt::While { body, .. } = s {
            body.splice(n..n, hints);
        }
    }
}

/// The body of loop `s` and each of its position variables with its value
/// where the loop starts, if `s` is innermost and counts its position: a
/// `for`, or a `while` that steps a variable at every iteration, as
/// `ir::unroll` leaves a reduction (a dense result's row fill in it is no
/// inner loop: it runs once a row); not a merge, which steps its
/// positions apart.
pub(super) fn counted_positions(s: &Stmt) -> Option<(&Block, BTreeMap<VarId, Expr>)> {
    let (body, first): (&Block, BTreeMap<VarId, Expr>) = match s {
        Stmt::For { var, lo, body, .. } => (body, BTreeMap::from([(*var, lo.clone())])),
        Stmt::While { body, .. } => (
            body,
            stepped(body)
                .into_iter()
                .map(|v| (v, Expr::Var(v)))
                .collect(),
        ),
        _ => return None,
    };
    (!loops_besides_row_fills(body)).then_some((body, first))
}

/// Whether `b` holds a loop that is not part of a dense result's row fill
/// (`ir::row_fill`), which runs once a row.
fn loops_besides_row_fills(b: &[Stmt]) -> bool {
    b.iter().any(|s| match s {
        _ if super::row_fill(s).is_some() => false,
        Stmt::For { .. } | Stmt::While { .. } => true,
        Stmt::If { then, els, .. } => loops_besides_row_fills(then) || loops_besides_row_fills(els),
        _ => false,
    })
}

/// The arrays `body` loads at one of `positions`' variables and the
/// kernel never writes, each with the first such variable.
fn read_at(
    body: &Block,
    positions: &BTreeMap<VarId, Expr>,
    written: &BTreeSet<ArrayRef>,
) -> BTreeMap<ArrayRef, VarId> {
    let mut streams = BTreeMap::new();
    super::walk_block(body, &mut |st| {
        for e in super::stmt_exprs(st) {
            e.walk(&mut |x| {
                let Expr::Load(a, i) = x else { return };
                let Expr::Var(v) = **i else { return };
                if positions.contains_key(&v) && !written.contains(a) {
                    streams.entry(a.clone()).or_insert(v);
                }
            });
        }
    });
    streams
}

/// Whether `e` reads one of `vars`.
fn reads_any(e: &Expr, vars: &BTreeSet<VarId>) -> bool {
    let mut found = false;
    e.walk(&mut |x| found |= matches!(x, Expr::Var(v) if vars.contains(v)));
    found
}

/// The variables `body` assigns at its top level, at every iteration
/// (`p = p + 2`), and declares nowhere: declared before the loop, so the
/// hint in front of it reads their first values.
fn stepped(body: &Block) -> BTreeSet<VarId> {
    let mut declared = BTreeSet::new();
    super::walk_block(body, &mut |s| {
        if let Stmt::Let(v, _) = s {
            declared.insert(*v);
        }
    });
    body.iter()
        .filter_map(|s| match s {
            Stmt::Set(v, _) if !declared.contains(v) => Some(*v),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::ir::passes::{lowered_for as kernel, Backend};
    use crate::ir::{walk_block, Function, Stmt};

    /// The arrays asked for ahead, by their C names; not those asked
    /// beside gathers.
    fn hinted(f: &Function) -> Vec<String> {
        hinted_where(f, false)
    }

    /// The arrays asked for ahead where `beside_gathers` is as given.
    fn hinted_where(f: &Function, beside: bool) -> Vec<String> {
        let mut out = Vec::new();
        walk_block(&f.body, &mut |s| {
            if let Stmt::PrefetchStream {
                array,
                beside_gathers,
                ..
            } = s
            {
                if *beside_gathers == beside {
                    out.push(array.c_name());
                }
            }
        });
        out
    }

    const SPMV: &str = "y(i) = A(i,j) * x(j)";

    /// SpMV with `A` in `format`, for the C.
    fn spmv(format: &str) -> Function {
        kernel(
            SPMV,
            &[("A", format, 2), ("x", "dense", 1), ("y", "dense", 1)],
            Backend::C,
        )
    }

    /// That the C `text` holds `hint` `count` times, each the first line
    /// of a loop behind the test `if (X_large) {` of `array`, whose copy
    /// after the `} else {` starts without a hint.
    fn asked_in_copies(text: &str, array: &str, hint: &str, count: usize) {
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let at: Vec<usize> = (0..lines.len()).filter(|&k| lines[k] == hint).collect();
        assert_eq!(at.len(), count, "{hint}: {text}");
        for k in at {
            assert_eq!(lines[k - 2], format!("if ({array}_large) {{"), "{text}");
            let head = lines[k - 1];
            let plain = lines[k..]
                .iter()
                .position(|l| *l == "} else {")
                .map(|e| k + e + 1)
                .expect("the plain copy"); // ok: test code
            assert_eq!(lines[plain], head, "{text}");
            assert!(!lines[plain + 1].contains("prefetch"), "{text}");
        }
    }

    #[test]
    fn a_rows_values_and_coordinates_are_asked_for_before_it() {
        for a in ["CSR", "DCSR", "CSC"] {
            let f = kernel(
                SPMV,
                &[("A", a, 2), ("x", "dense", 1), ("y", "dense", 1)],
                Backend::C,
            );
            let mut got = hinted(&f);
            got.sort();
            // Not x, read at a stored coordinate; not y, written.
            // The second level's (CSC's columns are its first).
            let crd = "A2_crd";
            let mut want = vec![crd.to_string(), "A_vals".to_string()];
            want.sort();
            assert_eq!(got, want, "{a}");
            let text = crate::ir::c::function(&f);
            assert!(
                text.contains(&format!("if ({crd}_large) tensor_prefetch_from({crd}, ")),
                "{text}"
            );
        }
    }

    /// The hints each loop's body starts with, by array, and their reach.
    fn hinted_within(f: &Function) -> Vec<(String, i64)> {
        let mut out = Vec::new();
        walk_block(&f.body, &mut |s| {
            if let Stmt::For { body, .. } | Stmt::While { body, .. } = s {
                if let Some(Stmt::PrefetchStream {
                    array, positions, ..
                }) = body.first()
                {
                    out.push((array.c_name(), *positions));
                }
            }
        });
        out
    }

    #[test]
    fn coo_asks_for_its_values_ahead_at_every_iteration_of_its_one_loop() {
        let coo = spmv("COO");
        // The widest stream only: the coordinates are left to the
        // hardware, and nothing is asked before the loop.
        assert_eq!(hinted(&coo), vec!["A_vals".to_string()]);
        assert_eq!(hinted_within(&coo), vec![("A_vals".to_string(), 1)]);
        // The C tests the array's size once, around two copies of the loop
        // (with `x` known to be small: no copies for the gathers of
        // `ir::gathers`).
        let mut plain = crate::ir::passes::lowered(
            SPMV,
            &[("A", "COO", 2), ("x", "dense", 1), ("y", "dense", 1)],
        );
        plain.lengths = vec![(crate::ir::ArrayRef::vals("x"), 1000)];
        let text = crate::ir::c::function(&plain);
        let hint = "if (A_vals_large) tensor_prefetch_from(A_vals, pA1 + 256, 1 * sizeof *A_vals);";
        asked_in_copies(&text, "A_vals", hint, 1);
        // COO-AoS's pairs of coordinates span as many bytes a position as
        // its values: both are asked for, and the C's plain copy has
        // neither hint (`x` small again: no copies for its gathers).
        let aos = spmv("COO-AoS");
        assert_eq!(
            hinted(&aos),
            vec!["A1_crd".to_string(), "A_vals".to_string()]
        );
        let mut aos = crate::ir::passes::lowered(
            SPMV,
            &[("A", "COO-AoS", 2), ("x", "dense", 1), ("y", "dense", 1)],
        );
        aos.lengths = vec![(crate::ir::ArrayRef::vals("x"), 1000)];
        let text = crate::ir::c::function(&aos);
        let pairs =
            "if (A1_crd_large) tensor_prefetch_from(A1_crd, pA1 * 2 + 512, 1 * sizeof *A1_crd);";
        asked_in_copies(&text, "A1_crd", pairs, 1);
        // A loop over dense positions walks no sparse level.
        let dense = kernel(
            "y(i) = x(i) + z(i)",
            &[("x", "dense", 1), ("y", "dense", 1), ("z", "dense", 1)],
            Backend::C,
        );
        assert_eq!(hinted(&dense), Vec::<String>::new());
        // Nor does a merge of two COO matrices count its positions.
        let add = kernel(
            "C(i,j) = A(i,j) + B(i,j)",
            &[("A", "COO", 2), ("B", "COO", 2), ("C", "COO", 2)],
            Backend::C,
        );
        assert_eq!(hinted(&add), Vec::<String>::new());
    }

    /// ELL's rows, slot by slot, ask for the slot's values ahead at each
    /// row, in the C's copy for large values; DIA's diagonals, which read
    /// no coordinates at their position, do not.
    #[test]
    fn ell_rows_ask_for_their_slots_values_ahead() {
        let ell = spmv("ELL");
        let within = hinted_within(&ell);
        assert!(!within.is_empty(), "{ell}");
        assert!(
            within.iter().all(|(a, n)| a == "A_vals" && *n == 1),
            "{within:?}"
        );
        let text = crate::ir::c::function(&ell);
        // In the loops over a tile's rows and over all rows (`ir::tile`).
        let hint = "if (A_vals_large) tensor_prefetch_from(A_vals, slotA * A2_N + iA + 256, 1 * sizeof *A_vals);";
        asked_in_copies(&text, "A_vals", hint, 2);
        assert_eq!(hinted(&spmv("DIA")), Vec::<String>::new());
    }

    /// Beside the asks for `x`'s elements at scattered coordinates
    /// (`ir::gathers`), COO's loop asks for its coordinate arrays too, in
    /// the C's copy of the loop that asks for the gathers only.
    #[test]
    fn coo_asks_for_every_stream_beside_its_gathers() {
        let formats = [("A", "COO", 2), ("x", "dense", 1), ("y", "dense", 1)];
        let coo = kernel(SPMV, &formats, Backend::C);
        let mut beside = hinted_where(&coo, true);
        beside.sort();
        assert_eq!(beside, vec!["A1_crd".to_string(), "A2_crd".to_string()]);
        let text = crate::ir::c::function(&coo);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let hint = "if (A2_crd_large) tensor_prefetch_from(A2_crd, pA1 + 256, 1 * sizeof *A2_crd);";
        let at = lines.iter().position(|l| *l == hint).expect(&text); // ok: test code
        assert_eq!(text.matches(hint).count(), 1, "{text}");
        // In the loop that asks for the gathers.
        let loop_end = lines[at..].iter().position(|l| *l == "}").unwrap() + at; // ok: test code
        assert!(
            lines[at..loop_end]
                .iter()
                .any(|l| l.contains("A2_crd_scattered &&")),
            "{text}"
        );
        // Where `x` is known to be small, nothing is gathered or asked
        // beside it.
        let mut small = crate::ir::passes::lowered(SPMV, &formats);
        small.lengths = vec![(crate::ir::ArrayRef::vals("x"), 1000)];
        let small = crate::ir::passes::for_codegen(&small, Backend::C);
        assert_eq!(hinted_where(&small, true), Vec::<String>::new());
        // Nor in the Cranelift tier, which keeps only the hints its data
        // would run, where nothing is known of the data.
        let cl = kernel(SPMV, &formats, Backend::Cranelift);
        assert_eq!(hinted_where(&cl, true), Vec::<String>::new());
    }

    /// The Cranelift tier's asks (`ask_rows_by_calls`): each `Prefetch`
    /// by its array and coordinates. `large`: the data the kernel is made
    /// for has 16M values in each tensor (none known otherwise).
    fn asked_by_calls(
        expr: &str,
        formats: &[(&str, &str, usize)],
        large: bool,
    ) -> Vec<(String, String)> {
        let mut f = kernel(expr, formats, Backend::C);
        f.body.retain(|s| !matches!(s, Stmt::PrefetchStream { .. }));
        if large {
            f.lengths = formats
                .iter()
                .map(|(t, ..)| (crate::ir::ArrayRef::vals(t), 1 << 24))
                .collect();
        }
        super::ask_rows_by_calls(&mut f);
        let mut out = Vec::new();
        walk_block(&f.body, &mut |s| {
            if let Stmt::Prefetch { array, coords, .. } = s {
                out.push((array.c_name(), coords.c_name()));
            }
        });
        out
    }

    #[test]
    fn cranelift_asks_for_rows_values_through_their_pos() {
        for (a, pos) in [("CSR", "A2_pos"), ("DCSR", "A2_pos"), ("CSC", "A2_pos")] {
            let formats = [("A", a, 2), ("x", "dense", 1), ("y", "dense", 1)];
            let got = asked_by_calls(SPMV, &formats, true);
            assert_eq!(got, vec![("A_vals".to_string(), pos.to_string())], "{a}");
            // Values not known to be large are not asked for.
            assert_eq!(asked_by_calls(SPMV, &formats, false), Vec::new(), "{a}");
        }
        // A merge steps its positions apart, and the loops that finish a
        // row after it go on with its streams.
        let add = asked_by_calls(
            "C(i,j) = A(i,j) + B(i,j)",
            &[("A", "CSR", 2), ("B", "CSR", 2), ("C", "CSR", 2)],
            true,
        );
        assert_eq!(add, Vec::new());
    }

    /// A slice's fibers summed in strips (MTTKRP from CSF on large data)
    /// sit in the slices' loop and the strips' own: not asked for, and not
    /// copied behind a test of their length.
    #[test]
    fn cranelift_asks_nothing_for_fibers_summed_in_strips() {
        let formats = [
            ("A", "dense", 2),
            ("B", "CSF", 3),
            ("P", "dense", 2),
            ("Q", "dense", 2),
        ];
        let mut f = kernel(
            "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
            &formats,
            Backend::Cranelift,
        );
        f.lengths = vec![(crate::ir::ArrayRef::vals("B"), 1 << 24)];
        crate::ir::strips::sum_rows_in_strips(&mut f, Backend::Cranelift);
        super::ask_rows_by_calls(&mut f);
        let stripped = f.to_string();
        assert!(stripped.contains("strip_sum0"), "{stripped}");
        assert!(!stripped.contains("long_rows"), "{stripped}");
    }

    #[test]
    fn merges_fibers_and_the_cranelift_tier_are_left_alone() {
        // A merge steps its positions apart, and the loops after it go on
        // with the streams it read.
        let add = kernel(
            "C(i,j) = A(i,j) + B(i,j)",
            &[("A", "CSR", 2), ("B", "CSR", 2), ("C", "CSR", 2)],
            Backend::C,
        );
        assert_eq!(hinted(&add), Vec::<String>::new());
        // A third-order tensor's fibers are a loop deeper than rows.
        let ttv = kernel(
            "A(i,j) = B(i,j,k) * c(k)",
            &[("A", "dense", 2), ("B", "CSF", 3), ("c", "dense", 1)],
            Backend::C,
        );
        assert_eq!(hinted(&ttv), Vec::<String>::new());
        let jit = kernel(
            SPMV,
            &[("A", "CSR", 2), ("x", "dense", 1), ("y", "dense", 1)],
            Backend::Cranelift,
        );
        assert_eq!(hinted(&jit), Vec::<String>::new());
    }

    #[test]
    fn a_loop_run_again_over_the_same_positions_is_not_asked_for() {
        use crate::ir::{ArrayRef, Emitter, Expr, ParamRef};
        // for s in 0..2 { for p in lo..hi { y[s] += A_vals[p] } }: `lo`
        // does not change with `s`.
        let mut e = Emitter::new();
        let lo = e.let_var("lo", Expr::Int(3));
        let hi = Expr::param(ParamRef::level("A", 1, "nnz"));
        e.for_("s", Expr::Int(0), Expr::Int(2), |e, s| {
            e.for_("p", lo.clone(), hi.clone(), |e, p| {
                let v = Expr::load(ArrayRef::vals("A"), p);
                e.store(ArrayRef::vals("y"), s, v);
            });
        });
        let mut f = e.finish("k");
        super::prefetch_streams(&mut f);
        assert_eq!(hinted(&f), Vec::<String>::new());
        // The same loop whose first position moves with `s` is.
        let mut e = Emitter::new();
        e.for_("s", Expr::Int(0), Expr::Int(2), |e, s| {
            let lo = e.let_var("lo", Expr::mul(s.clone(), Expr::Int(8)));
            e.for_("p", lo, Expr::Int(100), |e, p| {
                let v = Expr::load(ArrayRef::vals("A"), p);
                e.store(ArrayRef::vals("y"), s, v);
            });
        });
        let mut f = e.finish("k");
        super::prefetch_streams(&mut f);
        assert_eq!(hinted(&f), vec!["A_vals".to_string()]);
    }
}
