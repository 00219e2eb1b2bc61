//! Software prefetch of the blocks a loop over stored positions reads in
//! order, a block of values at each position.
//!
//! BCSR's loop over a block row's blocks reads, at each position `p`, the
//! block's coordinate and then its values in loops of their own:
//!
//! ```text
//! for p in pos[i]..pos[i + 1] {
//!   let jb = crd[p]
//!   for ii in 0..4 { for jj in 0..4 { .. vals[(p * 4 + ii) * 4 + jj] .. } }
//! }
//! ```
//!
//! The values are one stream, 16 of them (two cache lines) a position,
//! that the hardware prefetchers follow too closely, as they do CSR's
//! (`ir::streams`). Here each position first asks for the block
//! `DISTANCE` positions ahead: `prefetch vals[p * 16 + 16 * DISTANCE ..+
//! 16]`. On this Intel Xeon, cc tier (`examples/ab_kernels`, 10 rounds),
//! BCSR(4) SpMV on the 2-D stencil of `bench/run.py` (1M rows): 22.7 ->
//! 13.7 ms, 0.60x the time (at 32 positions ahead, 0.58x).
//!
//! The index's step with `p` is found by following the `let`s of the body
//! (`step`): an index that is `p` times a constant plus terms that do not
//! change with `p` (constants, values from outside the loop, loop
//! variables of inner loops from 0: the offsets within the block). Only
//! blocks of at least a cache line a position are asked for: a narrower
//! stream is an innermost loop's, which `ir::streams` asks for. The C asks
//! only where the array passes `TENSOR_PREFETCH_MIN_BYTES`; the Cranelift
//! tier where its data does (`ir::hints_for_data`).

use super::VarId;
use super::{nested_blocks_mut, walk_block, ArrayRef, BinOp, Block, Expr, Function, Stmt};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// How many positions ahead to ask: 2 KB of 4x4 blocks of `f64`.
const DISTANCE: i64 = 16;

/// The fewest bytes a position for a stream of blocks: a cache line.
const MIN_BLOCK_BYTES: i64 = 64;

/// The most elements a position asked for: a block of 64x64 values (a
/// larger step is no block read in order, and its hint would be long).
const MAX_BLOCK: i64 = 4096;

pub fn hint_blocks(f: &mut Function) {
    let written = f.written_arrays();
    in_block(&mut f.body, &written);
}

fn in_block(block: &mut Block, written: &BTreeSet<ArrayRef>) {
    for s in block.iter_mut() {
        for inner in nested_blocks_mut(s) {
            in_block(inner, written);
        }
        hint_loop(s, written);
    }
}

/// Ask at the top of `s`, a `for` over positions with loops inside, for
/// each input array it reads a block of at each position.
fn hint_loop(s: &mut Stmt, written: &BTreeSet<ArrayRef>) {
    let Stmt::For { var, body, .. } = s else {
        return;
    };
    // Innermost loops are `ir::streams`'; and once only (a kernel printed
    // again runs the passes again).
    if !super::has_loops(body) || matches!(body.first(), Some(Stmt::PrefetchStream { .. })) {
        return;
    }
    let steps = Steps::of(*var, body);
    let mut blocks: BTreeMap<ArrayRef, i64> = BTreeMap::new();
    walk_block(body, &mut |t| {
        for e in super::stmt_exprs(t) {
            e.walk(&mut |x| {
                let Expr::Load(a, i) = x else { return };
                if written.contains(a) {
                    return;
                }
                if let Some(k) = steps.step(i).filter(|k| (1..=MAX_BLOCK).contains(k)) {
                    if k * a.elem().bytes() as i64 >= MIN_BLOCK_BYTES {
                        blocks.entry(a.clone()).or_insert(k);
                    }
                }
            });
        }
    });
    let hints = blocks.into_iter().map(|(array, k)| Stmt::PrefetchStream {
        array,
        at: Expr::add(
            Expr::mul(Expr::Var(*var), Expr::Int(k)),
            Expr::Int(k * DISTANCE),
        ),
        positions: k,
        beside_gathers: false,
    });
    body.splice(0..0, hints);
}

/// What the body of a loop over position `p` declares, to follow an
/// index's step with `p` through it.
struct Steps<'a> {
    p: VarId,
    /// The body's `let`s, of variables declared once and never set.
    lets: BTreeMap<VarId, &'a Expr>,
    /// Variables of inner loops from 0: offsets within a block.
    offsets: BTreeSet<VarId>,
    /// Variables the body sets, declares twice, or loops over from
    /// elsewhere: no step is known for them.
    unknown: BTreeSet<VarId>,
    /// The steps of the `let`s found so far.
    known: RefCell<BTreeMap<VarId, Option<i64>>>,
}

impl<'a> Steps<'a> {
    fn of(p: VarId, body: &'a Block) -> Self {
        let mut steps = Steps {
            p,
            lets: BTreeMap::new(),
            offsets: BTreeSet::new(),
            unknown: BTreeSet::new(),
            known: RefCell::new(BTreeMap::new()),
        };
        walk_block(body, &mut |t| match t {
            Stmt::Let(v, e) => {
                // Declared twice: two values, no one step.
                let twice = steps.lets.insert(*v, e).is_some();
                if twice {
                    steps.unknown.insert(*v);
                }
            }
            Stmt::Set(v, _) => {
                steps.unknown.insert(*v);
            }
            Stmt::For {
                var,
                lo: Expr::Int(0),
                ..
            } => {
                steps.offsets.insert(*var);
            }
            Stmt::For { var, .. } => {
                steps.unknown.insert(*var);
            }
            _ => {}
        });
        steps
    }

    /// How much `e` grows with each step of `p`, where `e` is `p` times a
    /// constant plus terms that do not change with `p`; None otherwise.
    fn step(&self, e: &Expr) -> Option<i64> {
        match e {
            Expr::Var(v) if *v == self.p => Some(1),
            Expr::Var(v) if self.unknown.contains(v) => None,
            Expr::Var(v) => match self.lets.get(v) {
                // Once a variable: lets may read each other many times.
                Some(value) => {
                    if let Some(step) = self.known.borrow().get(v) {
                        return *step;
                    }
                    let step = self.step(value);
                    self.known.borrow_mut().insert(*v, step);
                    step
                }
                // An offset within the block, or a value from outside.
                None => Some(0),
            },
            Expr::Bin(BinOp::Add, a, b) => self.step(a)?.checked_add(self.step(b)?),
            Expr::Bin(BinOp::Sub, a, b) => self.step(a)?.checked_sub(self.step(b)?),
            Expr::Bin(BinOp::Mul, a, b) => match (&**a, &**b) {
                (x, Expr::Int(k)) | (Expr::Int(k), x) => self.step(x)?.checked_mul(*k),
                _ => self.fixed(e),
            },
            _ => self.fixed(e),
        }
    }

    /// `Some(0)` if nothing `e` reads changes with `p`.
    fn fixed(&self, e: &Expr) -> Option<i64> {
        let fixed = e
            .vars()
            .iter()
            .all(|v| self.step(&Expr::Var(*v)) == Some(0));
        fixed.then_some(0)
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::passes::{lowered_for, Backend};
    use crate::ir::{walk_block, BinOp, Expr, Function, Stmt};

    /// The hints of `hint_blocks` (at a position times the block's
    /// size, unlike `ir::streams`' at a position): each array's C name
    /// and its positions.
    fn block_hints(f: &Function) -> Vec<(String, i64)> {
        let mut out = Vec::new();
        walk_block(&f.body, &mut |s| {
            if let Stmt::PrefetchStream {
                array,
                positions,
                at: Expr::Bin(BinOp::Add, scaled, _),
                ..
            } = s
            {
                if matches!(**scaled, Expr::Bin(BinOp::Mul, ..)) {
                    out.push((array.c_name(), *positions));
                }
            }
        });
        out
    }

    fn spmv(format: &str, backend: Backend) -> Function {
        lowered_for(
            "y(i) = A(i,j) * x(j)",
            &[("A", format, 2), ("x", "dense", 1), ("y", "dense", 1)],
            backend,
        )
    }

    /// BCSR's loops over a block row's blocks ask for the block 16
    /// positions ahead, 16 values (or 4 for BCSR(2): 32 bytes, under a
    /// line, so none); CSR gets none of these, nor Cranelift where nothing
    /// is known of the data.
    #[test]
    fn bcsr_blocks_are_asked_for_ahead() {
        let bcsr = spmv("BCSR(4)", Backend::C);
        let hints = block_hints(&bcsr);
        assert!(!hints.is_empty(), "{bcsr}");
        assert!(hints.iter().all(|(_, n)| *n == 16), "{hints:?}");
        let text = crate::ir::c::function(&bcsr);
        assert!(
            text.contains("if (A_vals_large) tensor_prefetch_from(A_vals, pA2 * 16 + 256, 16 * sizeof *A_vals);"),
            "{text}"
        );
        assert_eq!(block_hints(&spmv("BCSR(2)", Backend::C)), Vec::new());
        assert_eq!(block_hints(&spmv("CSR", Backend::C)), Vec::new());
        assert_eq!(
            block_hints(&spmv("BCSR(4)", Backend::Cranelift)),
            Vec::new()
        );
    }

    /// The step of an index through `let`s, and none where a term changes
    /// with the position in a way not known.
    #[test]
    fn steps_follow_lets_and_stop_at_unknown_terms() {
        use crate::ir::ArrayRef;
        let (p, a, b, q) = (0, 1, 2, 3);
        let body = vec![
            Stmt::Let(
                a,
                Expr::add(Expr::mul(Expr::Var(p), Expr::Int(4)), Expr::Int(2)),
            ),
            Stmt::Let(b, Expr::load(ArrayRef::vals("c"), Expr::Var(p))),
            Stmt::For {
                var: q,
                lo: Expr::Int(0),
                hi: Expr::Int(4),
                body: vec![],
            },
        ];
        let steps = super::Steps::of(p, &body);
        let mul = |e, k| Expr::mul(e, Expr::Int(k));
        assert_eq!(
            steps.step(&Expr::add(mul(Expr::Var(a), 4), Expr::Var(q))),
            Some(16)
        );
        assert_eq!(steps.step(&Expr::Var(b)), None);
        assert_eq!(steps.step(&Expr::add(Expr::Var(p), Expr::Var(b))), None);
        assert_eq!(steps.step(&Expr::Var(9)), Some(0));
    }
}
