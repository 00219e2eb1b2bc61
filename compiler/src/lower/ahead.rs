//! Room made ahead for a row's appends. The loops over the variable of a
//! result's appended last level append at most one entry per iteration,
//! and they run at most once per stored entry of the operands they walk
//! (each iteration of a merge advances a cursor). So before those loops
//! the result's arrays are grown once to hold the counter plus the sum of
//! the walked segments, and the appends inside check no capacity (a compare,
//! a length update and a cold call each, which also kept the JIT's loop
//! from holding the arrays' base pointers in registers).
//!
//! The length the appends made is reserved once at the end of the nest,
//! not after each row's loops: the counter only grows and the room made
//! ahead already holds it, so the reserve after the loops would never grow
//! an array, and its checks and cold call were code for every row (a
//! tenth of the Cranelift compile of a three-level COO add).
//!
//! Only where every walked iterator counts stored entries (positions of a
//! level, a sorted copy, a workspace row): a loop over a whole dimension
//! could make room for far more entries than it appends.

use super::iterate::Kind;
use super::operands::ResultAssembly;
use super::vars::IndexVar;
use super::{Lowerer, State};
use crate::format::level::Assembly;
use crate::ir::{ArrayRef, Block, Expr, Stmt};

/// Whether an iterator of this kind runs at most once per stored entry.
pub(super) fn counts_entries(kind: Kind) -> bool {
    matches!(kind, Kind::Position(_) | Kind::Scratch)
}

impl Lowerer<'_> {
    /// The counter of the result's entries when the loops over `v` append
    /// the result's last level directly, every level above resolved.
    pub(super) fn ahead_counter(&self, st: &State, v: IndexVar) -> Option<Expr> {
        if !matches!(self.p.assembly, ResultAssembly::Direct) {
            return None;
        }
        let o = self.p.output();
        let last = o.level_vars.len().checked_sub(1)?;
        if o.level_vars[last] != v || st.pos[0].len() != last {
            return None;
        }
        if !matches!(o.format.levels[last].assembly(), Assembly::Append(_)) {
            return None;
        }
        self.out_sizes.get(&self.chain_head(last)).cloned()
    }

    /// Emit `loops`, which append at `count` at most `bound` times, with
    /// room made ahead: their reserves of `count + 1` go, one reserve
    /// ahead of `count + bound` per array comes before them, and one of
    /// `count` (the length) after.
    pub(super) fn emit_with_room_ahead(&mut self, loops: Block, count: &Expr, bound: Expr) {
        let one_more = Expr::add(count.clone(), Expr::Int(1));
        let room = Expr::add(count.clone(), bound);
        self.emit_with_room(loops, &one_more, room, count.clone());
    }

    /// Emit `loops` without their reserves of `each` (one per append),
    /// after a reserve ahead of `room`, for each array those reserves
    /// named; their length becomes `length` at the end of the nest
    /// (`epilogue`), so `length` must be a counter of the whole nest that
    /// only grows. Where the room is the length (a workspace row appends
    /// exactly its entries), one reserve before.
    pub(super) fn emit_with_room(&mut self, loops: Block, each: &Expr, room: Expr, length: Expr) {
        let mut arrays = Vec::new();
        let loops = without_reserves(loops, each, &mut arrays);
        let exact = room == length;
        for a in &arrays {
            self.e.push(Stmt::Reserve {
                array: a.clone(),
                len: room.clone(),
                ahead: !exact,
            });
        }
        for s in loops {
            self.e.push(s);
        }
        if !exact {
            for a in arrays {
                let at_end = (a, length.clone());
                if !self.lengths_at_end.contains(&at_end) {
                    self.lengths_at_end.push(at_end);
                }
            }
        }
    }
}

/// `block` without its reserves of `len` (at any depth), whose arrays are
/// noted in `arrays`.
fn without_reserves(block: Block, len: &Expr, arrays: &mut Vec<ArrayRef>) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for s in block {
        match s {
            Stmt::Reserve {
                array,
                len: l,
                ahead: false,
            } if l == *len => {
                if !arrays.contains(&array) {
                    arrays.push(array);
                }
            }
            Stmt::For { var, lo, hi, body } => out.push(Stmt::For {
                var,
                lo,
                hi,
                body: without_reserves(body, len, arrays),
            }),
            Stmt::While { cond, body } => out.push(Stmt::While {
                cond,
                body: without_reserves(body, len, arrays),
            }),
            Stmt::If { cond, then, els } => out.push(Stmt::If {
                cond,
                then: without_reserves(then, len, arrays),
                els: without_reserves(els, len, arrays),
            }),
            s => out.push(s),
        }
    }
    out
}
