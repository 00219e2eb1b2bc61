//! The prefetch hints of `ir::streams`, `ir::block_streams` and
//! `ir::gathers`, decided for the data a kernel is compiled for.
//!
//! The C asks at run time, behind tests its prologue computes once per
//! call: a stream hint where its array passes `TENSOR_PREFETCH_MIN_BYTES`
//! (`{a}_large`), a gather's ask and the stream hints beside it where the
//! coordinates are scattered (`{c}_scattered`). One build of the C serves
//! every size. The Cranelift tier compiles each kernel for its data
//! (`Function::lengths`, `Function::lines_of_their_own`), so it takes the
//! tests' answers at compile time and keeps the hints that would run:
//! the loops then test nothing. On other data the kernel still computes
//! the same values; a hint changes none.

use super::{nested_blocks_mut, ArrayRef, Block, Coordinates, Function, Stmt};
use std::collections::BTreeSet;

/// Drop from `f` the hints its data would not run.
pub fn decide_for_data(f: &mut Function) {
    let large = large_arrays(f);
    let scattered = super::gathers::sampled_where(f, |s| s > super::gathers::SCATTERED_LINES);
    keep_in(&mut f.body, &large, &scattered);
}

/// The arrays whose bytes pass `prefetch::MIN_BYTES` in the data: each
/// tensor's arrays of one element a stored entry, at its number of
/// entries (a lower bound: its values' length in `Function::lengths`).
fn large_arrays(f: &Function) -> BTreeSet<ArrayRef> {
    let mut out = BTreeSet::new();
    for (a, _) in f.arrays() {
        let entries = f
            .lengths
            .iter()
            .find(|(v, _)| v.tensor == a.tensor)
            .map_or(0, |(_, n)| *n);
        if super::prefetch::passes_min_bytes(entries, a.elem().bytes()) {
            out.insert(a);
        }
    }
    out
}

fn keep_in(b: &mut Block, large: &BTreeSet<ArrayRef>, scattered: &BTreeSet<Coordinates>) {
    // The stream hints beside a loop's gathers run where its gathers do.
    let gathers_run = b
        .iter()
        .any(|s| matches!(s, Stmt::PrefetchGather { coords, .. } if scattered.contains(coords)));
    b.retain(|s| match s {
        Stmt::PrefetchGather { coords, .. } => scattered.contains(coords),
        Stmt::PrefetchStream {
            array,
            beside_gathers,
            ..
        } => large.contains(array) && (gathers_run || !beside_gathers),
        _ => true,
    });
    for s in b.iter_mut() {
        for inner in nested_blocks_mut(s) {
            keep_in(inner, large, scattered);
        }
    }
}
