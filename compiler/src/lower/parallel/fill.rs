//! A dense result's zero fill done row by row inside the shared loop: each
//! row of the result is zeroed just before the first iteration that writes
//! it, instead of every row before the loop starts.
//!
//! Why: a separate fill pass writes the whole result once, and the loop
//! then reads every row back from memory, long after the fill pushed it
//! out of cache. Filled at first use, a row comes into cache once, and the
//! loop's additions into it hit L1 (SpDM from COO into 32 dense columns:
//! a fifth less time under gcc). Threads fill their own rows in parallel,
//! where the fill before the loop ran on one.
//!
//! Sound when the loop visits the coordinates of the result's first
//! variable in nondecreasing order (a dense dimension, an ordered level),
//! every iteration writing only the row of its own coordinate. A call
//! zeroes the rows from its share's first coordinate up to the next
//! share's first coordinate (row 0 for the first share, the last row for
//! the last): the shares' ranges partition the rows, the rows no
//! iteration visits included, and a row is zeroed before any iteration
//! writes it, since rows are zeroed in order up to the current one.

use super::{Coordinate, OuterLoop};
use crate::format::level::{Assembly, LevelCtx};
use crate::ir::{ArrayRef, CmpOp, Emitter, Expr, ParamRef, Stmt, CALL_THREAD};
use crate::lower::operands::Problem;

/// How the shared loop's variable gives the coordinate of its iteration.
#[derive(Clone, Debug)]
pub(super) enum RowOf {
    /// The loop runs over the coordinates themselves, in order.
    Cursor,
    /// The loop runs over positions of an ordered level.
    Position(Coordinate),
}

impl RowOf {
    fn at(&self, cursor: Expr) -> Expr {
        match self {
            RowOf::Cursor => cursor,
            RowOf::Position(c) => {
                let mut coord = c.coord.clone();
                coord.rewrite(&mut |x| {
                    if *x == Expr::Var(c.at) {
                        *x = cursor.clone();
                    }
                });
                coord
            }
        }
    }
}

/// The fill to do inside the loop, once `take` has removed the fill
/// before it.
pub(super) struct RowFill {
    vals: ArrayRef,
    row_of: RowOf,
}

impl RowFill {
    /// Take the fill of `p`'s result out of `before` (the statements before
    /// the loop) when the loop can fill the rows itself.
    pub(super) fn take(p: &Problem, outer: &OuterLoop, before: &mut Vec<Stmt>) -> Option<RowFill> {
        let o = p.output();
        let row_of = outer.row_of.clone()?;
        // A vector's row is one value: testing each iteration for a new
        // row costs more than the pass it saves (DCSR SpMV ran slower
        // under gcc, which calls memset for each row's fill).
        if o.level_vars.len() < 2 || o.level_vars.first() != Some(&outer.index) {
            return None;
        }
        let vals = ArrayRef::vals(&o.tensor);
        // A loop over a non-unique level that adds straight into the
        // result may still sum runs of equal coordinates in a register
        // (`ir::runs`, where the data has long runs), which lets this
        // fill be (`ir::is_row_fill`).
        let k = before
            .iter()
            .position(|s| crate::ir::is_zero_fill(s, &vals))?;
        before.remove(k);
        Some(RowFill { vals, row_of })
    }

    /// The shared loop `for cursor in begin..end { inner }` (a share of
    /// the iterations before `hi`) with its rows filled, and the fill of
    /// the rows after the last one it visits.
    pub(super) fn emit(
        &self,
        e: &mut Emitter,
        p: &Problem,
        hi: Expr,
        (begin, end): (Expr, Expr),
        shared: super::SharedLoop,
        inner: Vec<Stmt>,
    ) {
        let cursor = shared.cursor;
        let rows = self.rows(e, p);
        // The first row of this share: 0 for the first share, else the
        // coordinate at its first iteration (no row when it starts past
        // the last iteration). Not 0 for a later share that starts at the
        // first iteration: the shares before it are empty, and the first
        // zeroes the rows before that iteration's.
        let next = e.let_var("fill_next", Expr::Int(0));
        let first = self.row_of.at(begin.clone());
        let in_loop = e.block(|e| e.set(&next, first));
        let past_loop = e.block(|e| e.set(&next, rows.clone()));
        let thread = Expr::Param(ParamRef::call(CALL_THREAD));
        e.if_(Expr::ne(thread, Expr::Int(0)), |e| {
            e.push(Stmt::If {
                cond: Expr::lt(begin.clone(), hi.clone()),
                then: in_loop,
                els: past_loop,
            })
        });
        let body = e.block(|e| {
            let row = e.let_var("fill_row", self.row_of.at(Expr::Var(cursor)));
            e.if_(Expr::cmp(CmpOp::Ge, row.clone(), next.clone()), |e| {
                let after = Expr::add(row, Expr::Int(1));
                self.zero_rows(e, p, next.clone(), after.clone());
                e.set(&next, after);
            });
            inner.into_iter().for_each(|s| e.push(s));
        });
        shared.emit(e, begin, end.clone(), body);
        // The rows up to the next share's first (to the last row after
        // the last share).
        let last = e.let_var("fill_end", rows);
        let next_share = self.row_of.at(end.clone());
        e.if_(Expr::ne(end, hi), |e| e.set(&last, next_share));
        self.zero_rows(e, p, next, last);
    }

    /// Zero the values of rows `[from, to)`: the positions of the result's
    /// last level under those of its first.
    fn zero_rows(&self, e: &mut Emitter, p: &Problem, from: Expr, to: Expr) {
        let lo = self.first_position(e, p, from);
        let hi = self.first_position(e, p, to);
        let vals = self.vals.clone();
        e.for_("fill_q", lo, hi, |e, q| e.store(vals, q, Expr::Float(0.0)));
    }

    /// How many rows the result has: the size of its first level.
    fn rows(&self, e: &mut Emitter, p: &Problem) -> Expr {
        let o = p.output();
        match o.format.levels[0].assembly() {
            Assembly::Insert(ins) => ins.size(&LevelCtx::new(&o.tensor, 0), e, Expr::Int(1)),
            _ => Expr::Int(0),
        }
    }

    /// The first position of the last level under row `row` of the first.
    /// Each level is full and inserts, so a parent's children follow those
    /// of the parent before it: the first child of position `x` is the
    /// size of the level under `x` parents.
    fn first_position(&self, e: &mut Emitter, p: &Problem, row: Expr) -> Expr {
        let o = p.output();
        let levels = &o.format.levels;
        let mut at = match levels[0].locate() {
            Some(loc) => {
                loc.locate(&LevelCtx::new(&o.tensor, 0), e, Expr::Int(0), &[row])
                    .0
            }
            None => row,
        };
        for (k, level) in levels.iter().enumerate().skip(1) {
            if let Assembly::Insert(ins) = level.assembly() {
                at = ins.size(&LevelCtx::new(&o.tensor, k), e, at);
            }
        }
        at
    }
}
