//! Software prefetch of the elements a loop gathers at stored coordinates,
//! where those coordinates are scattered.
//!
//! SpMV's loop over stored positions reads `x` at the coordinate stored at
//! each position:
//!
//! ```text
//! for p in .. { let j = crd[p]; .. vals[p] * x[j] .. }
//! ```
//!
//! Where the coordinates are scattered over an `x` larger than a core's L2
//! cache (a power-law graph), nearly every `x[j]` misses, and the loop
//! stands waiting: the hardware prefetchers follow addresses in strides,
//! not coordinates. Here the loop asks, right after reading `crd[p]`, for
//! the element of `x` the position `DISTANCE` ahead will read, when that
//! position is below `crd`'s length: `prefetch x[crd[p + DISTANCE]]`.
//!
//! In-process alternation of the shared objects (cc tier, one thread, 20
//! rounds), asking copy against the same kernel without it: on the 1M-row
//! power-law matrix of `bench/run.py` (3.1 entries a row, `x` of 8 MB)
//! CSR SpMV 0.78x the time, COO 0.66-0.81x.
//!
//! Where the coordinates follow each other (stencils, banded and FEM
//! matrices: a row's columns are near the previous row's), the hardware
//! already fetches `x` in time, and the asks are only extra work: the
//! 3-D stencil's CSR SpMV 5.6 -> 7.7 ms with them, the tridiagonal
//! matrix's 2.3 -> 3.1. Where `x` fits the L2 cache (100K columns, 20 a
//! row at random) they cost 15%. So the C keeps the loop nest twice
//! (`ir::print`) and runs the asking copy only when, at run time, `x`
//! passes `TENSOR_PREFETCH_MIN_BYTES` and the coordinates are scattered
//! (`tensor_scattered`, `ir::c`: sampled windows of them fall on cache
//! lines of their own; 99% of the samples on power-law and uniform random
//! matrices, 5-40% on stencils, banded and FEM matrices and on the real
//! matrices of `../shared/data` other than graphs). The plain copy ran
//! within 2% of the kernel without asks on the stencil and the banded
//! matrix. Arrays the data the kernel is made for shows to be small get
//! no asks and no copy (`Function::lengths`).
//!
//! The Cranelift tier asks only where the data it is made for shows the
//! coordinates scattered (`ir::hints_for_data`), with prefetch
//! instructions on x86-64 (`jit::prefetch`). Elsewhere Cranelift has no
//! prefetch instruction, and a call per position costs more than a miss:
//! its kernels ask by calls once per strip of positions
//! (`ask_gathers_by_calls`).

use super::streams::counted_positions;
use super::{nested_blocks_mut, walk_block, ArrayRef, Block, ElemTy, Expr, Function};
use super::{Coordinates, Stmt, VarId};
use std::collections::BTreeSet;

/// Of coordinates `crd` sampled as the C's `tensor_scattered` samples
/// them at run time (`ir::c`: `WINDOWS` windows of `WINDOW` spread over
/// them), the share that fall on cache lines of `f64` elements no other
/// coordinate of their window falls on; the C calls more than 3 in 4
/// scattered. 0.98-1.0 on the bench's uniform random and power-law
/// matrices, 0.05-0.15 on its stencils, banded and FEM matrices; the
/// sorted middle coordinates of its order-3 tensors 0.3-0.56. `None` for
/// fewer than `SAMPLED_FROM` coordinates: not sampled. A Cranelift kernel
/// is made for its data, so the sample is taken once, on the packed
/// operands (`Function::lines_of_their_own`).
pub fn lines_of_their_own(crd: &[i32]) -> Option<f64> {
    field_lines_of_their_own(crd, 1, 0)
}

/// `lines_of_their_own` of the coordinates in field `field` of records of
/// `stride` coordinates (an interleaved AoS array): those at `p * stride +
/// field`, sampled by position `p` (the C's `tensor_scattered(crd, len,
/// stride, field)`).
pub fn field_lines_of_their_own(crd: &[i32], stride: usize, field: usize) -> Option<f64> {
    const WINDOW: usize = 64;
    const WINDOWS: usize = 8;
    const SAMPLED_FROM: usize = 65536;
    let n = crd.len() / stride.max(1);
    if n < SAMPLED_FROM || field >= stride {
        return None;
    }
    let mut lines = 0;
    for k in 0..WINDOWS {
        let at = (n - WINDOW) / (WINDOWS - 1) * k;
        let mut window: Vec<i32> = (at..at + WINDOW)
            .map(|p| crd[p * stride + field] >> 3)
            .collect();
        window.sort_unstable();
        window.dedup();
        lines += window.len();
    }
    Some(lines as f64 / (WINDOW * WINDOWS) as f64)
}

/// The largest share of sampled coordinates on lines of their own
/// (`lines_of_their_own`) at which they count as following each other
/// (`ir::prefetch`: no row they choose is asked for; the C's
/// `tensor_coordinates_follow`). The bench's stencils, banded and FEM
/// matrices sample 0.05-0.15; the sorted middle coordinates of its
/// Facebook-shaped tensor 0.56, where MTTKRP from COO ran 1.24x as long
/// without the asks for their rows.
pub const FOLLOWING_LINES: f64 = 0.25;

/// The share of sampled coordinates on lines of their own above which
/// they count as scattered (the C's `tensor_scattered`): the Cranelift
/// tier asks for the elements gathered at them (`ask_gathers_by_calls`).
pub const SCATTERED_LINES: f64 = 0.75;

/// The coordinate arrays sampled in the data `f` is made for whose share
/// of samples on lines of their own passes `test`.
pub(super) fn sampled_where(f: &Function, test: impl Fn(f64) -> bool) -> BTreeSet<Coordinates> {
    f.lines_of_their_own
        .iter()
        .filter(|(_, share)| test(*share))
        .map(|(c, _)| c.clone())
        .collect()
}

/// The arrays of `sampled` that hold one level's coordinates alone
/// (stride 1): what a test of an array's coordinates may take them for.
pub(super) fn whole_arrays(sampled: BTreeSet<Coordinates>) -> BTreeSet<ArrayRef> {
    sampled
        .into_iter()
        .filter(|c| c.stride == 1)
        .map(|c| c.array)
        .collect()
}

/// How many positions ahead to ask: about a miss to memory at a few
/// cycles a position (the rows of the power-law matrix hold 3 entries, so
/// the asks run many rows ahead). In-process alternation on that matrix,
/// cc tier, against 32 ahead: CSR SpMV 0.89x the time at 64 and at 128,
/// COO 0.88x at both. The Cranelift tier's asks, once per strip of 8
/// positions, on COO SpMV there: 12-13 ms asking 16 ahead, 10.4-11.4 at
/// 32, 9.4-9.7 at 64, 9.4-9.5 at 128 (12-14 without asks).
const DISTANCE: i64 = 64;

pub fn prefetch_gathers(f: &mut Function) {
    // Once: a kernel printed again (`ir::c::function` runs the passes)
    // keeps the asks it has.
    let mut asked = false;
    walk_block(&f.body, &mut |s| {
        asked |= matches!(s, Stmt::PrefetchGather { .. })
    });
    if asked {
        return;
    }
    // Arrays the data the kernel is made for shows to be small are left
    // alone: a copied loop nest that never runs still costs (the plain
    // copy of COO SpMV over 100K columns ran 6% slower beside it, its
    // code laid out anew); arrays of unknown length keep the test.
    let mut skip = f.written_arrays();
    skip.extend(super::prefetch::small_arrays(f));
    in_block(&mut f.body, &skip);
}

fn in_block(block: &mut Block, skip: &BTreeSet<ArrayRef>) {
    for s in block.iter_mut() {
        if let Some((_, first)) = counted_positions(s) {
            let positions: BTreeSet<VarId> = first.into_keys().collect();
            if let Stmt::For { body, .. } | Stmt::While { body, .. } = s {
                ask_in(body, &positions, skip);
            }
            continue;
        }
        for inner in nested_blocks_mut(s) {
            in_block(inner, skip);
        }
    }
}

/// The Cranelift tier's form of the asks where it has no prefetch
/// instruction (not x86-64), where the data the kernel is
/// made for shows the coordinates scattered (`Function::lines_of_their_own`
/// more than 3 in 4, the C's run-time test) and the gathered array large:
/// an innermost `for` over positions that reads `let c = crd[p]` and an
/// `f64` input at `c` starts with `Prefetch { x, crd, p + DISTANCE, 1 }`
/// for one element, which `prefetch::strip_for_calls` asks once per strip
/// of positions through a call that keeps every register. Cranelift has
/// no prefetch instruction, and a call per position costs more than a
/// miss. Only `for` loops: the unrolled `while` of CSR's rows steps two
/// positions at once.
pub fn ask_gathers_by_calls(f: &mut Function) {
    let scattered = whole_arrays(sampled_where(f, |share| share > SCATTERED_LINES));
    if scattered.is_empty() {
        return;
    }
    let large = super::prefetch::large_arrays(f);
    let written = f.written_arrays();
    gathers_by_calls_in(&mut f.body, &scattered, &large, &written);
}

fn gathers_by_calls_in(
    block: &mut Block,
    scattered: &BTreeSet<ArrayRef>,
    large: &BTreeSet<ArrayRef>,
    written: &BTreeSet<ArrayRef>,
) {
    for s in block.iter_mut() {
        if let Stmt::For { var, body, .. } = s {
            if !super::has_loops(body) {
                let p = *var;
                let mut asks = Vec::new();
                for t in body.iter() {
                    let Stmt::Let(c, Expr::Load(crd, i)) = t else {
                        continue;
                    };
                    if **i != Expr::Var(p) || !scattered.contains(crd) {
                        continue;
                    }
                    for array in gathered_at(*c, body, written) {
                        if large.contains(&array) {
                            asks.push(Stmt::Prefetch {
                                array,
                                coords: crd.clone(),
                                at: Expr::add(Expr::Var(p), Expr::Int(DISTANCE)),
                                positions: 1,
                                stride: Expr::Int(1),
                                len: Expr::Int(1),
                            });
                        }
                    }
                }
                body.splice(0..0, asks);
                continue;
            }
        }
        for inner in nested_blocks_mut(s) {
            gathers_by_calls_in(inner, scattered, large, written);
        }
    }
}

/// Add to the body of an innermost loop over `positions` an ask after each
/// `let c = crd[p]` (an index array the kernel only reads, `p` a position
/// or a position plus a constant; or `crd[p * k + f]`, a field of
/// interleaved records) for every `f64` input the body reads at `c`.
/// Whatever level the indices come from, the ask is the same.
fn ask_in(body: &mut Block, positions: &BTreeSet<VarId>, skip: &BTreeSet<ArrayRef>) {
    // `let pn = p + 1`: the unrolled loop's second position.
    let mut at_positions: BTreeSet<VarId> = positions.clone();
    let mut k = 0;
    while k < body.len() {
        let mut asks = Vec::new();
        match &body[k] {
            Stmt::Let(v, Expr::Bin(super::BinOp::Add, a, b))
                if matches!(**a, Expr::Var(p) if at_positions.contains(&p))
                    && matches!(**b, Expr::Int(_)) =>
            {
                at_positions.insert(*v);
            }
            Stmt::Let(c, Expr::Load(crd, i))
                if crd.elem() == ElemTy::I32 && !skip.contains(crd) =>
            {
                if let Some((p, coords)) =
                    Coordinates::of_load(crd, i, |p| at_positions.contains(&p))
                {
                    let at = coords.index(Expr::add(Expr::Var(p), Expr::Int(DISTANCE)));
                    asks = gathered_at(*c, body, skip)
                        .into_iter()
                        .map(|array| Stmt::PrefetchGather {
                            array,
                            coords: coords.clone(),
                            at: at.clone(),
                        })
                        .collect();
                }
            }
            _ => {}
        }
        let n = asks.len();
        body.splice(k + 1..k + 1, asks);
        k += n + 1;
    }
}

/// The `f64` arrays outside `skip` (the kernel's results, arrays known to
/// be small) that `body` loads at exactly the coordinate `c`.
fn gathered_at(c: VarId, body: &Block, skip: &BTreeSet<ArrayRef>) -> Vec<ArrayRef> {
    let mut found: BTreeSet<ArrayRef> = BTreeSet::new();
    walk_block(body, &mut |s| {
        for e in super::stmt_exprs(s) {
            e.walk(&mut |x| {
                if let Expr::Load(a, i) = x {
                    if **i == Expr::Var(c) && a.elem() == ElemTy::F64 && !skip.contains(a) {
                        found.insert(a.clone());
                    }
                }
            });
        }
    });
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use crate::ir::passes::{for_codegen, Backend};
    use crate::ir::{walk_block, ArrayRef, Function, Stmt};

    /// The kernel of `expr` for `backend`, made for data in which each
    /// tensor's values number `length` (None: lengths unknown).
    fn kernel(
        expr: &str,
        formats: &[(&str, &str, usize)],
        backend: Backend,
        length: Option<usize>,
    ) -> Function {
        let mut f = crate::ir::passes::lowered(expr, formats);
        if let Some(n) = length {
            f.lengths = formats
                .iter()
                .map(|(t, ..)| (ArrayRef::vals(t), n))
                .collect();
        }
        for_codegen(&f, backend)
    }

    /// Each ask as (gathered array, coordinates), by their C names.
    fn asks(f: &Function) -> Vec<(String, String)> {
        let mut out = Vec::new();
        walk_block(&f.body, &mut |s| {
            if let Stmt::PrefetchGather { array, coords, .. } = s {
                out.push((array.c_name(), coords.array.c_name()));
            }
        });
        out
    }

    const SPMV: &str = "y(i) = A(i,j) * x(j)";

    fn spmv(format: &str, backend: Backend, length: Option<usize>) -> Function {
        kernel(
            SPMV,
            &[("A", format, 2), ("x", "dense", 1), ("y", "dense", 1)],
            backend,
            length,
        )
    }

    #[test]
    fn row_loops_ask_for_the_x_their_positions_ahead_will_read() {
        let x_at_a2 = ("x_vals".to_string(), "A2_crd".to_string());
        // CSR's loop over a row, unrolled by two: an ask for each position.
        let csr = spmv("CSR", Backend::C, Some(1 << 20));
        assert_eq!(asks(&csr), vec![x_at_a2.clone(), x_at_a2.clone()]);
        let text = crate::ir::c::function(&csr);
        assert!(
            text.contains("const int A2_crd_scattered = (x_vals_large) && tensor_scattered(A2_crd, A2_crd_count, 1, 0);"),
            "{text}"
        );
        for ask in [
            "if (A2_crd_scattered && pA2 + 64 < A2_crd_count) tensor_prefetch(&x_vals[A2_crd[pA2 + 64]], sizeof *x_vals);",
            "if (A2_crd_scattered && pA2n + 64 < A2_crd_count) tensor_prefetch(&x_vals[A2_crd[pA2n + 64]], sizeof *x_vals);",
        ] {
            assert_eq!(text.matches(ask).count(), 1, "{ask}: {text}");
        }
        // One test, around the whole nest of rows: the plain copy first.
        assert_eq!(
            text.matches("if (!A2_crd_scattered) {").count(),
            1,
            "{text}"
        );
        // The loops take the flag (`ir::c_copies`), and the kernel calls
        // a copy with it 0 or 1 by the sample.
        assert_eq!(text.matches("_scattered) {").count(), 2, "{text}");
        for line in [
            "TENSOR_INLINE int64_t k_loops(tensor_args_t *args, const int A2_crd_scattered) {",
            "  return k_loops(args, 0);",
            "  return k_loops(args, 1);",
            "  if (A2_crd_scattered) return k_asking(args);\n  return k_plain(args);",
        ] {
            assert_eq!(text.matches(line).count(), 1, "{line}: {text}");
        }
        // Printed again, the kernel keeps the asks it has.
        assert_eq!(crate::ir::c::function(&csr), text);
        // COO and DCSR alike; lengths unknown keep the asks (and the test).
        assert_eq!(asks(&spmv("COO", Backend::C, None)).len(), 1);
        assert_eq!(asks(&spmv("DCSR", Backend::C, None)).len(), 2);
    }

    /// COO-AoS keeps each entry's (row, column) in one record of its
    /// interleaved array: `x` is gathered at the columns, field 1 of
    /// records of 2, asked for and sampled there alone (mixed with the
    /// sorted rows the whole array would never sample as scattered).
    #[test]
    fn interleaved_records_ask_at_their_field() {
        let aos = spmv("COO-AoS", Backend::C, Some(1 << 20));
        assert_eq!(
            asks(&aos),
            vec![("x_vals".to_string(), "A1_crd".to_string())]
        );
        let text = crate::ir::c::function(&aos);
        for line in [
            "const int A1_crd_1of2_scattered = (x_vals_large) && tensor_scattered(A1_crd, A1_crd_count, 2, 1);",
            "if (!A1_crd_1of2_scattered) {",
            "if (A1_crd_1of2_scattered && (pA1 + 64) * 2 + 1 < A1_crd_count) tensor_prefetch(&x_vals[A1_crd[(pA1 + 64) * 2 + 1]], sizeof *x_vals);",
        ] {
            assert_eq!(text.matches(line).count(), 1, "{line}: {text}");
        }
        // The Cranelift tier asks where the data shows that field scattered.
        let mut f = crate::ir::passes::lowered(
            SPMV,
            &[("A", "COO-AoS", 2), ("x", "dense", 1), ("y", "dense", 1)],
        );
        f.lengths = vec![
            (ArrayRef::vals("x"), 1 << 20),
            (ArrayRef::vals("A"), 1 << 20),
        ];
        let columns = super::Coordinates {
            array: ArrayRef::level("A", 0, "crd"),
            stride: 2,
            field: 1,
        };
        for (share, asked) in [(0.99, true), (0.5, false)] {
            f.lines_of_their_own = vec![(columns.clone(), share)];
            let g = for_codegen(&f, Backend::Cranelift);
            assert_eq!(
                asks(&g).len(),
                usize::from(asked && cfg!(target_arch = "x86_64")),
                "{share}"
            );
        }
        // As if large, the field is sampled scattered.
        f.make_as_if_large();
        assert!(f.lines_of_their_own.contains(&(columns, 1.0)));
    }

    #[test]
    fn no_asks_where_nothing_is_gathered_or_it_is_small() {
        // x known to fit the L2 cache.
        assert!(asks(&spmv("CSR", Backend::C, Some(1000))).is_empty());
        // Cranelift: nothing known of the data, no ask.
        assert!(asks(&spmv("CSR", Backend::Cranelift, None)).is_empty());
        // CSC writes `y` at the coordinates; it reads `x` by column.
        assert!(asks(&spmv("CSC", Backend::C, None)).is_empty());
        // DIA and ELL read `x` at computed positions, not stored coordinates
        // at a loop's position.
        for format in ["DIA", "ELL"] {
            assert!(asks(&spmv(format, Backend::C, None)).is_empty(), "{format}");
        }
        // A merge steps its positions apart.
        let add = kernel(
            "C(i,j) = A(i,j) + B(i,j)",
            &[("A", "CSR", 2), ("B", "CSR", 2), ("C", "CSR", 2)],
            Backend::C,
            None,
        );
        assert!(asks(&add).is_empty());
    }
}

#[cfg(test)]
mod sample_tests {
    use super::lines_of_their_own;

    #[test]
    fn coordinates_near_each_other_share_lines() {
        // A 7-point stencil's columns, row after row: near each other.
        let n = 20_000i32;
        let stencil: Vec<i32> = (0..n)
            .flat_map(|i| [i - 400, i - 20, i - 1, i, i + 1, i + 20, i + 400])
            .map(|c| c.clamp(0, n - 1))
            .collect();
        let near = lines_of_their_own(&stencil).unwrap(); // ok: test code
        assert!((0.05..0.25).contains(&near), "{near}");
        // Columns drawn at random from 1M: nearly each on a line of its own.
        let mut x = 12345u64;
        let random: Vec<i32> = (0..100_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) % 1_000_000) as i32
            })
            .collect();
        let share = lines_of_their_own(&random).unwrap(); // ok: test code
        assert!(share > 0.95);
        // Too few to sample.
        assert_eq!(lines_of_their_own(&random[..65535]), None);
        assert!(lines_of_their_own(&random[..65536]).is_some());
    }
}
