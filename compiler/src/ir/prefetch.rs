//! Software prefetch of the dense rows a loop over stored positions is
//! about to read.
//!
//! A loop over positions `p` whose body runs an inner loop along a row of
//! a dense operand chosen by the coordinate stored at `p`:
//!
//! ```text
//! for p in lo..hi {
//!   let c = X_crd[p]
//!   for k in 0..n { .. D[c * s + k] .. }
//! }
//! ```
//!
//! (SpDM's `C(i,k) = A(i,j) * D(j,k)`, MTTKRP's factor rows, TTM) jumps
//! around `D` as the stored coordinates do. The hardware prefetchers follow
//! addresses in strides, not coordinates, so on a scattered matrix every
//! row is a cache miss the loop stands waiting for. Here each iteration
//! first asks for the row the position `DISTANCE` ahead will read:
//! `prefetch D[X_crd[p + DISTANCE] * s ..+ n]`, when that position is
//! below the length of `X_crd`. The bound is the array's, not the loop's:
//! the loop over one CSR row asks for the rows of the next rows' nonzeros
//! (most rows have fewer than `DISTANCE`), and a share of a parallel loop
//! for the first rows of the next share.
//!
//! Measured with the cc tier on SpDM with 32 dense columns: 180 -> 145 ms
//! on a power-law matrix of 1M rows, 3.6M nonzeros stored as COO (a row of
//! `D` per nonzero at random), 105 -> 95 ms on the 3-D 7-point stencil
//! (rows near each other). The C backend asks only when the array is
//! larger than a core's L2 cache (`TENSOR_PREFETCH_MIN_BYTES`, from the
//! array's length at run time): MTTKRP's factor matrices of 1 MB gain
//! nothing from a prefetch and lost 15% to its instructions.
//!
//! A prefetch changes no value and never faults, whatever address it
//! names; the coordinate it reads is at a position below the array's
//! length.
//!
//! Cranelift has no prefetch instruction (the tier's rewritten loads,
//! `jit::prefetch`, carry the stream and gather hints, not these rows of
//! several lines yet), and a plain load ahead stalls
//! the loop on the miss it was meant to hide (measured in C: 140 -> 170
//! ms). Its kernels call a routine that prefetches and keeps every
//! register (`jit::call::prefetch_rows_preserving`), once per strip of
//! positions (`strip_for_calls`): a call and its test at every position
//! cost 9-17% on the stencil and on MTTKRP with small factors, where they
//! pushed the loop's values out of registers.

use super::{
    fresh_var, nested_blocks_mut, ArrayRef, BinOp, Block, CmpOp, ElemTy, Expr, Function, Stmt, Ty,
    VarId, VarInfo,
};
use std::collections::{BTreeMap, BTreeSet};

/// How many positions ahead to ask for: far enough to cover a miss to
/// memory (a few hundred cycles) at a few dozen cycles per position of a
/// 32-column row, near enough that the rows are still in the L1/L2 cache
/// when they are reached (16-32 measured best; 4 too close).
pub(super) const DISTANCE: i64 = 16;

pub fn prefetch_rows(f: &mut Function) {
    let written = f.written_arrays();
    in_block(&mut f.body, &written);
}

fn in_block(block: &mut Block, written: &BTreeSet<ArrayRef>) {
    for s in block.iter_mut() {
        if let Stmt::For { var, body, .. } = s {
            let asks = prefetches(*var, body, written);
            body.splice(0..0, asks);
        }
        for inner in nested_blocks_mut(s) {
            in_block(inner, written);
        }
    }
}

/// Arrays no larger than this are not prefetched: a core's L2 cache holds
/// them (the emitted C's `TENSOR_PREFETCH_MIN_BYTES`, checked at run
/// time; MTTKRP with factor matrices of 1 MB lost 15% to the hints'
/// instructions).
pub const MIN_BYTES: i64 = 4 << 20;

/// Positions a strip holds (`strip_for_calls`): one call asks for the
/// rows of the positions `DISTANCE` ahead of the strip's. Measured under
/// Cranelift on SpDM from COO into 32 columns, against no prefetch (160
/// ms on the 3-D stencil, whose rows the hardware already follows; 400-470
/// on the power-law matrix): strips of 4 ran 186 and 230 ms, of 8 168-174
/// and 240-249, of 16 and 32 (asking for the next strip's rows in one
/// burst) 182-190 and 245-277.
const STRIP: i64 = DISTANCE / 2;

/// For a backend that prefetches through a call: every loop that asks for
/// the rows of the position `DISTANCE` ahead at each iteration (or any
/// fixed number ahead: `gathers::ask_gathers_by_calls` asks further) runs
/// in strips that end at multiples of `STRIP` positions instead, each
/// strip that starts at one asking once for the rows `DISTANCE` ahead of
/// its own:
///
/// ```text
/// let strip_hi = hi; let strip = lo
/// while strip < strip_hi {
///   let strip_end = min(strip - strip % STRIP + STRIP, strip_hi)
///   if strip % STRIP == 0 { prefetch the rows of positions strip + DISTANCE ..+ STRIP }
///   for p in strip..strip_end { body }
///   strip = strip_end
/// }
/// ```
///
/// Aligned, so that the loops over one level's positions taken one after
/// another (a CSF level's fibres, each a loop) ask once per `STRIP`
/// positions between them, as one long loop does: a call at the start of
/// every fibre ran MTTKRP from CSF on the bench's Facebook-shaped tensor
/// (fibres of 1.2 entries, factors of 8 MB) in 21-25 ms, against 11-15
/// aligned and 11-12 from COO (one loop); MTTKRP and SpDM over long loops
/// are unchanged (within 4%, noise).
///
/// The same iterations in the same order; only where the hints are asked
/// changes. Asks are kept only for arrays `f.lengths` knows to pass
/// `MIN_BYTES`, at coordinates not known to follow each other
/// (`f.lines_of_their_own`, `Asked`): the strips cost where nothing is
/// fetched (MTTKRP with factors of 1 MB, fibres of 2 entries: 23 -> 33
/// ms). A loop whose body changes its bounds keeps no asks either: a call
/// per position costs more than it hides.
pub fn strip_for_calls(f: &mut Function) {
    let asked = Asked {
        large: large_arrays(f),
        clustered: super::gathers::whole_arrays(super::gathers::sampled_where(f, |share| {
            share <= super::gathers::FOLLOWING_LINES
        })),
    };
    let mut body = std::mem::take(&mut f.body);
    strip_block(&mut body, &mut f.vars, &asked);
    f.body = body;
}

/// The asks `strip_for_calls` keeps: for rows of an array `large` holds,
/// chosen by coordinates not known to follow each other (`clustered`: at
/// most `FOLLOWING_LINES` of their samples on lines of their own). Where
/// they follow each other (stencils, banded and FEM matrices) the
/// hardware fetches the rows in time and the calls only cost: SpDM from
/// COO into 32 columns, Cranelift tier, alternating builds, 3-D stencil
/// 98 -> 72 ms, banded 37 -> 20, FEM blocks 37 -> 20, 2-D stencil 57 ->
/// 37; on the uniform random matrix the asks hold it at 39 ms against
/// 85 without, on the power-law one 160 against 215.
struct Asked {
    large: BTreeSet<ArrayRef>,
    clustered: BTreeSet<ArrayRef>,
}

impl Asked {
    fn keeps(&self, ask: &Stmt) -> bool {
        matches!(ask, Stmt::Prefetch { array, coords, .. }
            if self.large.contains(array) && !self.clustered.contains(coords))
    }
}

/// The value arrays the data `f` was made for shows to pass `MIN_BYTES`
/// (`Function::lengths`): the only ones asked for through calls.
pub(super) fn large_arrays(f: &Function) -> BTreeSet<ArrayRef> {
    known_arrays(f, true)
}

/// The value arrays the data `f` was made for shows not to pass
/// `MIN_BYTES`: a core's L2 cache holds them.
pub(super) fn small_arrays(f: &Function) -> BTreeSet<ArrayRef> {
    known_arrays(f, false)
}

/// The arrays of `f.lengths` that pass `MIN_BYTES` (or not: `large`).
fn known_arrays(f: &Function, large: bool) -> BTreeSet<ArrayRef> {
    f.lengths
        .iter()
        .filter(|(a, n)| passes_min_bytes(*n, a.elem().bytes()) == large)
        .map(|(a, _)| a.clone())
        .collect()
}

/// Whether `elements` elements of `bytes` bytes pass `MIN_BYTES`: the
/// C's `{a}_large`, answered from the data a kernel is made for.
pub(super) fn passes_min_bytes(elements: usize, bytes: usize) -> bool {
    (elements as i64).saturating_mul(bytes as i64) > MIN_BYTES
}

fn strip_block(b: &mut Block, vars: &mut Vec<VarInfo>, asked: &Asked) {
    let mut out = Vec::with_capacity(b.len());
    for mut s in b.drain(..) {
        for inner in nested_blocks_mut(&mut s) {
            strip_block(inner, vars, asked);
        }
        let Stmt::For {
            var,
            lo,
            hi,
            mut body,
        } = s
        else {
            out.push(s);
            continue;
        };
        let n = body
            .iter()
            .take_while(|s| matches!(s, Stmt::Prefetch { at, positions: 1, .. } if ahead_of(var, at).is_some()))
            .count();
        let asks: Vec<Stmt> = body.drain(..n).filter(|s| asked.keeps(s)).collect();
        // A loop that only asked ahead, for arrays not worth asking for
        // (`ir::strips` gives the hints a loop of their own), is dropped.
        if n > 0 && asks.is_empty() && values_only(&body) {
            continue;
        }
        match !asks.is_empty() && bounds_fixed(&lo, &hi, &body) {
            true => out.extend(strips(var, lo, hi, asks, body, vars)),
            false => out.push(Stmt::For { var, lo, hi, body }),
        }
    }
    *b = out;
}

/// How many positions past `p` the ask at `at` (`p + k`) asks for.
fn ahead_of(p: VarId, at: &Expr) -> Option<i64> {
    match at {
        Expr::Bin(BinOp::Add, a, b) if **a == Expr::Var(p) => match **b {
            Expr::Int(k) => Some(k),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `body` only declares values (and comments): a loop of it, its
/// asks taken out, does nothing.
fn values_only(body: &Block) -> bool {
    body.iter()
        .all(|s| matches!(s, Stmt::Let(..) | Stmt::Comment(_)))
}

/// Whether `body` assigns no variable of the loop's bounds.
fn bounds_fixed(lo: &Expr, hi: &Expr, body: &Block) -> bool {
    let mut bound_vars = lo.vars();
    bound_vars.extend(hi.vars());
    !body
        .iter()
        .any(|s| bound_vars.iter().any(|v| super::assigns(s, *v)))
}

fn strips(
    p: VarId,
    lo: Expr,
    hi: Expr,
    asks: Vec<Stmt>,
    body: Block,
    vars: &mut Vec<VarInfo>,
) -> Vec<Stmt> {
    let strip_hi = fresh_var(vars, "strip_hi", Ty::I64);
    let strip = fresh_var(vars, "strip", Ty::I64);
    let strip_end = fresh_var(vars, "strip_end", Ty::I64);
    // Strips end at multiples of `STRIP`, and only a strip starting at one
    // asks: consecutive loops over one array's positions (a CSF level's
    // fibres, most of one or two entries) ask once per `STRIP` positions
    // between them all, as one long loop does, not once per loop.
    let offset = Expr::Bin(
        BinOp::Rem,
        Box::new(Expr::Var(strip)),
        Box::new(Expr::Int(STRIP)),
    );
    let mut each = vec![Stmt::Let(
        strip_end,
        Expr::Bin(
            BinOp::Min,
            Box::new(Expr::add(
                Expr::Bin(
                    BinOp::Sub,
                    Box::new(Expr::Var(strip)),
                    Box::new(offset.clone()),
                ),
                Expr::Int(STRIP),
            )),
            Box::new(Expr::Var(strip_hi)),
        ),
    )];
    let mut calls = vec![];
    for ask in asks {
        if let Stmt::Prefetch {
            array,
            coords,
            at,
            stride,
            len,
            ..
        } = ask
        {
            let ahead = ahead_of(p, &at).unwrap_or(DISTANCE);
            calls.push(Stmt::Prefetch {
                array,
                coords,
                at: Expr::add(Expr::Var(strip), Expr::Int(ahead)),
                positions: STRIP,
                stride,
                len,
            });
        }
    }
    each.push(Stmt::If {
        cond: Expr::cmp(CmpOp::Eq, offset, Expr::Int(0)),
        then: calls,
        els: vec![],
    });
    // A loop that only asked ahead (`ir::strips` gives a nest's hints a
    // loop of their own) has nothing left to run but its calls.
    if !values_only(&body) {
        each.push(Stmt::For {
            var: p,
            lo: Expr::Var(strip),
            hi: Expr::Var(strip_end),
            body,
        });
    }
    each.push(Stmt::Set(strip, Expr::Var(strip_end)));
    vec![
        Stmt::Let(strip_hi, hi),
        Stmt::Let(strip, lo),
        Stmt::While {
            cond: Expr::cmp(CmpOp::Lt, Expr::Var(strip), Expr::Var(strip_hi)),
            body: each,
        },
    ]
}

/// The prefetches for a loop `for p in .. { body }` (see the module).
/// The position ahead is bounded by the coordinate array's length, not by
/// the loop's end: a CSR row's loop asks for the rows of the next rows'
/// nonzeros (a row has fewer than `DISTANCE` nonzeros on most matrices).
fn prefetches(p: VarId, body: &Block, written: &BTreeSet<ArrayRef>) -> Vec<Stmt> {
    // `n` is read again inside the loop: a value the loop does not change.
    let fixed = |e: &Expr| match e {
        Expr::Int(_) | Expr::Param(_) => true,
        Expr::Var(v) => !body.iter().any(|s| super::assigns(s, *v)),
        _ => false,
    };
    // Coordinates loaded at `p` from an array the kernel only reads:
    // `let c = X_crd[p]`.
    let mut coords: BTreeMap<VarId, ArrayRef> = BTreeMap::new();
    let mut asks: Vec<Stmt> = vec![];
    for s in body {
        match s {
            Stmt::Let(c, Expr::Load(a, i))
                if a.elem() == ElemTy::I32 && **i == Expr::Var(p) && !written.contains(a) =>
            {
                coords.insert(*c, a.clone());
            }
            Stmt::For {
                var: k,
                lo: Expr::Int(0),
                hi: n,
                body: row,
            } if fixed(n) && !super::has_loops(row) => {
                for (array, c, stride) in row_reads(*k, row, &coords) {
                    let ask = Stmt::Prefetch {
                        array,
                        coords: coords[&c].clone(),
                        at: Expr::add(Expr::Var(p), Expr::Int(DISTANCE)),
                        positions: 1,
                        stride,
                        len: n.clone(),
                    };
                    if !asks.contains(&ask) {
                        asks.push(ask);
                    }
                }
            }
            _ => {}
        }
        // A coordinate reassigned later is no longer the one at `p`.
        coords.retain(|c, _| !matches!(s, Stmt::Set(v, _) if v == c));
    }
    asks
}

/// The `f64` arrays `row` (the body of `for k in 0..n`) reads at
/// `c * stride + k`, `c` a coordinate loaded at the position, `stride`
/// a parameter or a constant: (array, c, stride).
fn row_reads(
    k: VarId,
    row: &Block,
    coords: &BTreeMap<VarId, ArrayRef>,
) -> Vec<(ArrayRef, VarId, Expr)> {
    // The row's own `let`s naming such an index (`let pD2 = jA * D2_N + kD`).
    let mut named: BTreeMap<VarId, (VarId, Expr)> = BTreeMap::new();
    let along = |e: &Expr| -> Option<(VarId, Expr)> {
        let Expr::Bin(BinOp::Add, base, at) = e else {
            return None;
        };
        let Expr::Bin(BinOp::Mul, c, stride) = &**base else {
            return None;
        };
        match (&**c, &**stride, &**at) {
            (Expr::Var(c), s @ (Expr::Param(_) | Expr::Int(_)), Expr::Var(at))
                if *at == k && coords.contains_key(c) =>
            {
                Some((*c, s.clone()))
            }
            _ => None,
        }
    };
    // The result's own rows are written in order, which the hardware
    // follows; only rows the loop merely reads are asked for.
    let mut stored = BTreeSet::new();
    super::walk_block(row, &mut |s| {
        if let Stmt::Store(a, ..) = s {
            stored.insert(a.clone());
        }
    });
    let mut found = vec![];
    for s in row {
        if let Stmt::Let(v, e) = s {
            if let Some(x) = along(e) {
                named.insert(*v, x);
            }
        }
        for e in super::stmt_exprs(s) {
            e.walk(&mut |x| {
                let Expr::Load(a, i) = x else { return };
                if a.elem() != ElemTy::F64 || stored.contains(a) {
                    return;
                }
                let at = match &**i {
                    Expr::Var(v) => named.get(v).cloned(),
                    other => along(other),
                };
                if let Some((c, stride)) = at {
                    found.push((a.clone(), c, stride));
                }
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Emitter, ParamRef};

    /// `for p in 0..nnz { let j = A2_crd[p]; for k in 0..n { y[k] += D[j * n + k] } }`
    fn spdm_like(stride: Expr) -> Function {
        let mut e = Emitter::new();
        let nnz = Expr::param(ParamRef::level("A", 1, "nnz"));
        let n = Expr::param(ParamRef::level("D", 1, "N"));
        e.for_("p", Expr::Int(0), nnz, |e, p| {
            let j = e.let_var("j", Expr::load(ArrayRef::level("A", 1, "crd"), p));
            e.for_("k", Expr::Int(0), n.clone(), |e, k| {
                let at = Expr::add(Expr::mul(j.clone(), stride.clone()), k.clone());
                let at = e.let_var("pD", at);
                e.store(ArrayRef::vals("y"), k, Expr::load(ArrayRef::vals("D"), at));
            });
        });
        e.finish("k")
    }

    #[test]
    fn a_row_chosen_by_a_stored_coordinate_is_asked_for_ahead() {
        let mut f = spdm_like(Expr::param(ParamRef::level("D", 1, "N")));
        prefetch_rows(&mut f);
        let text = f.to_string();
        assert!(
            text.contains("prefetch D_vals[A2_crd[p + 16] * D2_N]; D2_N"),
            "{text}"
        );
    }

    /// The coordinates of the result, which the kernel writes, name no
    /// row worth asking for: the kernel may not have written them yet.
    #[test]
    fn coordinates_the_kernel_writes_are_left_alone() {
        let mut f = spdm_like(Expr::Int(7));
        f.body.push(Stmt::Store(
            ArrayRef::level("A", 1, "crd"),
            Expr::Int(0),
            Expr::Int(0),
        ));
        prefetch_rows(&mut f);
        assert!(!f.to_string().contains("prefetch"), "{f}");
    }

    #[test]
    fn a_row_at_a_stride_read_from_memory_is_left_alone() {
        let mut f = spdm_like(Expr::Int(7));
        prefetch_rows(&mut f);
        assert!(
            f.to_string().contains("prefetch"),
            "a constant stride counts"
        );
        let stride = Expr::load(ArrayRef::level("A", 0, "pos"), Expr::Int(0));
        let mut f = spdm_like(stride);
        prefetch_rows(&mut f);
        assert!(!f.to_string().contains("prefetch"), "{f}");
    }

    #[test]
    fn a_backend_that_prefetches_by_calls_asks_once_per_strip() {
        let mut f = spdm_like(Expr::param(ParamRef::level("D", 1, "N")));
        f.lengths = vec![(ArrayRef::vals("D"), 1 << 20)];
        prefetch_rows(&mut f);
        strip_for_calls(&mut f);
        let text = f.to_string();
        assert!(
            text.contains("if strip % 8 == 0 {")
                && text.contains("prefetch D_vals[A2_crd[strip + 16 ..+ 8] * D2_N]; D2_N"),
            "{text}"
        );
        assert!(!text.contains("A2_crd[p + 16]"), "{text}");
    }

    /// A loop left with nothing but its asks (`ir::strips` puts a
    /// nest's hints in a loop of their own) keeps its calls, not an empty
    /// loop over the positions.
    #[test]
    fn a_loop_of_asks_alone_keeps_only_its_calls() {
        let mut f = spdm_like(Expr::param(ParamRef::level("D", 1, "N")));
        f.lengths = vec![(ArrayRef::vals("D"), 1 << 20)];
        prefetch_rows(&mut f);
        let Some(Stmt::For { body, .. }) = f.body.last_mut() else {
            panic!("{f}")
        };
        body.retain(|s| !matches!(s, Stmt::For { .. }));
        strip_for_calls(&mut f);
        let text = f.to_string();
        assert!(
            text.contains("prefetch D_vals[A2_crd[strip + 16 ..+ 8]"),
            "{text}"
        );
        assert!(!text.contains("for p in"), "{text}");
    }

    /// An array not known to pass `MIN_BYTES` is not asked for: the
    /// strips would cost for nothing.
    #[test]
    fn a_backend_that_prefetches_by_calls_asks_only_for_large_arrays() {
        for length in [None, Some(1000)] {
            let mut f = spdm_like(Expr::param(ParamRef::level("D", 1, "N")));
            f.lengths = length
                .map(|n| (ArrayRef::vals("D"), n))
                .into_iter()
                .collect();
            prefetch_rows(&mut f);
            let mut plain = f.clone();
            plain.body = spdm_like(Expr::param(ParamRef::level("D", 1, "N"))).body;
            strip_for_calls(&mut f);
            assert_eq!(f.to_string(), plain.to_string());
        }
    }

    /// A loop whose body changes its bound runs to a bound a strip would
    /// have read once: its asks are dropped, not made at every position.
    #[test]
    fn a_loop_that_moves_its_bound_is_not_stripped() {
        let mut f = spdm_like(Expr::param(ParamRef::level("D", 1, "N")));
        f.lengths = vec![(ArrayRef::vals("D"), 1 << 20)];
        let n = fresh_var(&mut f.vars, "n", Ty::I64);
        let Some(Stmt::For { hi, body, .. }) = f.body.last_mut() else {
            panic!("{f}")
        };
        *hi = Expr::Var(n);
        body.push(Stmt::Set(n, Expr::Int(3)));
        f.body.insert(0, Stmt::Let(n, Expr::Int(5)));
        prefetch_rows(&mut f);
        assert!(f.to_string().contains("prefetch"), "{f}");
        strip_for_calls(&mut f);
        let text = f.to_string();
        assert!(
            !text.contains("prefetch") && !text.contains("strip"),
            "{text}"
        );
    }

    /// The emitted C checks the same size at run time.
    #[test]
    fn both_tiers_prefetch_from_the_same_array_size() {
        let mut f = spdm_like(Expr::param(ParamRef::level("D", 1, "N")));
        prefetch_rows(&mut f);
        let define = format!(
            "#define TENSOR_PREFETCH_MIN_BYTES ((int64_t){} << 20)",
            MIN_BYTES >> 20
        );
        assert!(crate::ir::c::function(&f).contains(&define), "{define}");
    }
}
