//! Where a kernel's machine code starts, modulo 32 bytes.
//!
//! Why: on Intel cores from Skylake on, the microcode fix for the JCC
//! erratum keeps a jump that crosses or ends on a 32-byte boundary (with
//! the compare fused to it) out of the decoded-instruction cache, so a loop
//! with such a jump runs from the legacy decoders. Cranelift aligns neither
//! functions nor loops, so where a kernel landed decided its speed. Measured
//! on bcsstk13, copying the same code to each offset in 0..32:
//! - DCSR SpMV ran in 0.071-0.074 ms at offsets 2-24 and 0.099-0.100 at
//!   0, 1 and 26-31: exactly where its inner loop's `cmp; jl` sits on a
//!   boundary;
//! - COO SpMV ran in 0.096-0.099 ms at 9-11 and 21-28, and 0.116-0.14
//!   elsewhere: exactly the offsets where none of the three jumps on the
//!   path of an entry that continues its row is on one.
//!
//! The JIT copies each kernel to the offset this module picks
//! (`call::Code::placed`): the least weighted count of such jumps, a jump
//! weighing more the deeper the loops around it, then the fewest 32-byte
//! windows its loops span. Rare paths inside loops (`ir::Stmt::Unlikely`)
//! are laid out after the function's return by Cranelift, so they neither
//! count nor hide the hot jumps. A merge stays where Cranelift put it
//! (`PREDICTABLE_TARGETS`).
//!
//! The code is read from the block starts Cranelift reports
//! (`machine_code_cfg_info`); its edge list is not used, as it pairs
//! blocks with the wrong successors once cold blocks move. A block's jumps
//! are read off its last bytes: `jmp rel32` and `jcc rel32` are the only
//! forms Cranelift's x64 backend emits for branches between blocks, and
//! each is confirmed by its target being a block start.

/// Bytes before a conditional jump counted as the compare fused to it
/// (`cmp r64, imm8` is 4 bytes, `cmp r64, r64` 3).
const FUSED_COMPARE: u32 = 4;
/// A loop nested one deeper runs about this many times as often.
const DEPTH_WEIGHT: u64 = 16;
/// A jump on a boundary costs as much as this many extra windows of its loop.
const JUMP_ON_BOUNDARY: u64 = 8;
/// An innermost loop whose jumps go to more places than this (a merge of
/// two operands: which way each goes depends on the data) is left where it
/// is: its speed at each offset followed no rule found. CSR add on bcsstk13
/// ran in 0.19 ms at offsets 0-8 and 16, and 0.23-0.43 at most others,
/// where the erratum allows only 7 and 8. A loop's own start, its exit and
/// one more are three: a rare path, or the one place that the clipped rows
/// of an unrolled block (`BCSR(4)`) all skip to.
const PREDICTABLE_TARGETS: usize = 3;
/// Deeper nests weigh no more than this depth (keeps the weights in u64).
const MAX_DEPTH: u32 = 8;

/// The offset in `0..32` to place `code` at (see the module comment); the
/// least offset among equals, so code without loops stays at 0. `starts`
/// are the offsets of its blocks.
pub fn best_offset(code: &[u8], starts: &[u32]) -> usize {
    let layout = Layout::new(code, starts);
    if layout.branchy {
        return 0;
    }
    (0..32u32)
        .min_by_key(|&at| (layout.cost(at), at))
        .unwrap_or(0) as usize
}

/// Bytes `[start, end)` of code and a weight.
#[derive(Debug, PartialEq)]
struct Span {
    start: u32,
    end: u32,
    weight: u64,
}

struct Layout {
    jumps: Vec<Span>,
    loops: Vec<Span>,
    /// One of the hottest innermost loops jumps to more than
    /// `PREDICTABLE_TARGETS` places (a merge).
    branchy: bool,
}

/// A block's end as read from its bytes.
#[derive(Debug, PartialEq)]
struct BlockEnd {
    /// Its jumps: the byte range of each (with a conditional one's fused
    /// compare) and its target.
    jumps: Vec<((u32, u32), u32)>,
    /// It returns from the function.
    returns: bool,
}

impl Layout {
    fn new(code: &[u8], starts: &[u32]) -> Layout {
        let mut starts = starts.to_vec();
        starts.sort_unstable();
        starts.dedup();
        let ends: Vec<u32> = starts
            .iter()
            .skip(1)
            .copied()
            .chain(std::iter::once(code.len() as u32))
            .collect();
        let blocks: Vec<(u32, u32, BlockEnd)> = starts
            .iter()
            .zip(&ends)
            .map(|(&s, &e)| (s, e, block_end(code, s, e, &starts)))
            .collect();
        // A loop: a jump back to a block start, with no return between
        // (a rare path laid out after the return jumps back into its loop).
        let loops: Vec<(u32, u32)> = blocks
            .iter()
            .flat_map(|(_, end, tail)| tail.jumps.iter().map(move |&(_, to)| (to, *end)))
            .filter(|&(to, end)| to < end)
            .filter(|&(to, end)| {
                !blocks
                    .iter()
                    .any(|(s, e, tail)| tail.returns && to <= *s && *e <= end)
            })
            .collect();
        let depth = |at: u32| loops.iter().filter(|(s, e)| *s <= at && at < *e).count() as u32;
        let deepest = loops.iter().map(|&(s, _)| depth(s)).max().unwrap_or(0);
        // The deepest nesting within the outermost loop around `at`.
        let nest_depth = |at: u32| {
            let outer = loops
                .iter()
                .filter(|(s, e)| *s <= at && at < *e)
                .max_by_key(|(s, e)| e - s);
            outer.map_or(0, |&(os, oe)| {
                loops
                    .iter()
                    .filter(|(s, e)| os <= *s && *e <= oe)
                    .map(|&(s, _)| depth(s))
                    .max()
                    .unwrap_or(0)
            })
        };
        // A loop nest's innermost loop weighs as much as the deepest
        // nest's: which of two nests runs (a tiled and an untiled variant,
        // `ir::tile`) depends on the data, and they do the same work. Single
        // loops (setting a result to zero, a prefix sum) stay light.
        let weight = |at: u32| {
            let (d, nest) = (depth(at), nest_depth(at));
            let lift = if nest >= 2 { deepest - nest } else { 0 };
            DEPTH_WEIGHT.pow((d + lift).min(MAX_DEPTH))
        };
        let jumps: Vec<Span> = blocks
            .iter()
            .flat_map(|(start, _, tail)| {
                tail.jumps.iter().map(|&((s, e), _)| Span {
                    start: s,
                    end: e,
                    weight: weight(*start),
                })
            })
            .filter(|j| j.weight > 1)
            .collect();
        let loops: Vec<Span> = loops
            .iter()
            .map(|&(start, end)| Span {
                start,
                end,
                weight: weight(start),
            })
            .collect();
        let hottest = loops.iter().map(|l| l.weight).max().unwrap_or(0);
        let targets = |l: &Span| {
            let mut to: Vec<u32> = blocks
                .iter()
                .filter(|(s, e, _)| l.start <= *s && *e <= l.end)
                .flat_map(|(_, _, tail)| tail.jumps.iter().map(|&(_, to)| to))
                .collect();
            to.sort_unstable();
            to.dedup();
            to.len()
        };
        let branchy = loops.iter().any(|l| {
            let inside = |m: &Span| l.start <= m.start && m.end <= l.end;
            let innermost = !loops.iter().any(|m| m != l && inside(m));
            innermost && l.weight == hottest && targets(l) > PREDICTABLE_TARGETS
        });
        Layout {
            jumps,
            loops,
            branchy,
        }
    }

    /// The cost of placing the code at `at` bytes past a 32-byte boundary.
    fn cost(&self, at: u32) -> u64 {
        // `end` is exclusive: a range that ends on a boundary counts too.
        let on_boundary = self
            .jumps
            .iter()
            .filter(|j| (j.start + at) / 32 != (j.end + at) / 32)
            .map(|j| JUMP_ON_BOUNDARY * j.weight);
        let windows = self
            .loops
            .iter()
            .map(|l| l.weight * u64::from((l.end - 1 + at) / 32 - (l.start + at) / 32 + 1));
        on_boundary.chain(windows).sum()
    }
}

/// How the block `[start, end)` of `code` ends: a `jmp rel32` last, a
/// `jcc rel32` before it or last, each only where its target is one of
/// `starts`; or `pop %rbp; ret`, Cranelift's epilogue.
fn block_end(code: &[u8], start: u32, end: u32, starts: &[u32]) -> BlockEnd {
    let byte = |at: u32| code.get(at as usize).copied();
    let target = |rel_end: u32| -> Option<u32> {
        let bytes: [u8; 4] = code
            .get(rel_end as usize - 4..rel_end as usize)?
            .try_into()
            .ok()?;
        let t = i64::from(rel_end) + i64::from(i32::from_le_bytes(bytes));
        u32::try_from(t)
            .ok()
            .filter(|t| starts.binary_search(t).is_ok())
    };
    let mut jumps = Vec::new();
    let mut e = end;
    if e >= start + 5 && byte(e - 5) == Some(0xE9) {
        if let Some(to) = target(e) {
            jumps.push(((e - 5, e), to));
            e -= 5;
        }
    }
    if e >= start + 6 && byte(e - 6) == Some(0x0F) && byte(e - 5).is_some_and(|b| b & 0xF0 == 0x80)
    {
        if let Some(to) = target(e) {
            jumps.push((((e - 6).saturating_sub(FUSED_COMPARE).max(start), e), to));
        }
    }
    let returns = jumps.is_empty()
        && end >= start + 2
        && byte(end - 2) == Some(0x5D)
        && byte(end - 1) == Some(0xC3);
    BlockEnd { jumps, returns }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` one-byte `nop`s.
    fn nops(n: usize) -> Vec<u8> {
        vec![0x90; n]
    }

    /// A jump instruction ending at `end` to `to`: `0F 8C` (jl) or `E9`.
    fn jump(conditional: bool, end: u32, to: u32) -> Vec<u8> {
        let rel = (i64::from(to) - i64::from(end)) as i32;
        let mut v = if conditional {
            vec![0x0F, 0x8C]
        } else {
            vec![0xE9]
        };
        v.extend(rel.to_le_bytes());
        v
    }

    /// Blocks [0, 10) and [10, 30), a loop ending `jl 10`, then [30, 32): `pop %rbp; ret`.
    fn one_loop() -> (Vec<u8>, Vec<u32>) {
        let mut code = nops(24);
        code.extend(jump(true, 30, 10));
        code.extend([0x5D, 0xC3]);
        (code, vec![0, 10, 30])
    }

    #[test]
    fn a_jump_is_read_off_its_block_end_and_confirmed_by_its_target() {
        let (code, starts) = one_loop();
        assert_eq!(
            block_end(&code, 10, 30, &starts),
            BlockEnd {
                jumps: vec![((20, 30), 10)],
                returns: false
            }
        );
        // The same bytes aiming elsewhere than a block start are no jump.
        assert!(block_end(&code, 10, 30, &[0, 30]).jumps.is_empty());
        assert!(block_end(&code, 30, 32, &starts).returns);
        let layout = Layout::new(&code, &starts);
        assert_eq!(
            layout.jumps,
            vec![Span {
                start: 20,
                end: 30,
                weight: DEPTH_WEIGHT
            }]
        );
        assert_eq!(
            layout.loops,
            vec![Span {
                start: 10,
                end: 30,
                weight: DEPTH_WEIGHT
            }]
        );
    }

    #[test]
    fn the_offset_keeps_the_loop_jump_inside_one_window() {
        // The jump [20, 30) fits the window [0, 32) at offset 0 and 1; from
        // 2 it reaches 32 until 12 moves it past ([32, 42)).
        let (code, starts) = one_loop();
        let layout = Layout::new(&code, &starts);
        assert!(layout.cost(0) < layout.cost(2));
        assert!(layout.cost(12) < layout.cost(8));
        assert_eq!(best_offset(&code, &starts), 0);
    }

    #[test]
    fn the_inner_loop_outweighs_the_outer_one() {
        // Outer loop [0, 70) ends `jl 0` at [64, 70); the inner loop
        // [10, 40) ends `jl 10; jmp 40` at [29, 35) and [35, 40).
        let mut code = nops(29);
        code.extend(jump(true, 35, 10));
        code.extend(jump(false, 40, 40));
        code.extend(nops(24));
        code.extend(jump(true, 70, 0));
        code.extend([0x5D, 0xC3]);
        let starts = [0, 10, 40, 70];
        let layout = Layout::new(&code, &starts);
        assert_eq!(layout.jumps.len(), 3);
        let inner = layout.jumps.iter().find(|j| j.end == 35).unwrap(); // ok: test code
        let outer = layout.jumps.iter().find(|j| j.end == 70).unwrap(); // ok: test code
        assert_eq!(
            (inner.weight, outer.weight),
            (DEPTH_WEIGHT.pow(2), DEPTH_WEIGHT)
        );
        let best = best_offset(&code, &starts) as u32;
        for j in layout.jumps.iter().filter(|j| j.weight == inner.weight) {
            assert_eq!((j.start + best) / 32, (j.end + best) / 32);
        }
    }

    #[test]
    fn a_jump_back_from_past_the_return_makes_no_loop() {
        // [0, 10); [10, 30) ends `jl 10` (a loop); [30, 32) returns;
        // [32, 42) a rare path that jumps back to 20 in the loop.
        let (mut code, mut starts) = one_loop();
        code.extend(nops(5));
        code.extend(jump(false, 42, 20));
        starts.extend([20, 32]);
        let layout = Layout::new(&code, &starts);
        assert_eq!(layout.loops.len(), 1);
        assert_eq!((layout.loops[0].start, layout.loops[0].end), (10, 30));
    }

    /// A loop [10, 64) whose blocks at 10, 16 and 22 jump forward to
    /// `exits` (block starts 64, 66 or 68, each a return) and whose last
    /// block [58, 64) jumps back to 10, on the boundary at offset 0.
    fn loop_with_exits(exits: [u32; 3]) -> (Vec<u8>, Vec<u32>) {
        let mut code = nops(10);
        for (k, to) in exits.into_iter().enumerate() {
            code.extend(jump(true, 16 + 6 * k as u32, to));
        }
        code.extend(nops(30));
        code.extend(jump(true, 64, 10));
        for _ in 0..3 {
            code.extend([0x5D, 0xC3]);
        }
        (code, vec![0, 10, 16, 22, 28, 58, 64, 66, 68])
    }

    #[test]
    fn a_loop_that_leaves_to_one_place_moves_and_a_merge_stays() {
        let (code, starts) = loop_with_exits([64, 64, 64]);
        assert_ne!(best_offset(&code, &starts), 0);
        // Four places to go (three exits and its start): a merge's shape.
        let (code, starts) = loop_with_exits([64, 66, 68]);
        assert!(Layout::new(&code, &starts).branchy);
        assert_eq!(best_offset(&code, &starts), 0);
    }

    #[test]
    fn code_without_loops_stays_where_it_is() {
        let mut code = nops(38);
        code.extend(jump(false, 43, 43));
        code.extend([0x5D, 0xC3]);
        assert_eq!(best_offset(&code, &[0, 20, 43]), 0);
    }
}
