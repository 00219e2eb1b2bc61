//! The workspace iterator: the compress side of a workspace row (MLIR's
//! `compress`, the consumer of taco's workspace), over the coordinates the
//! row's loops touched. `begin` puts them in order when the result level
//! is ordered (a hashed row clears its table first: only the list and the
//! values are read from then on); the cursor walks the list of touched
//! coordinates, and the position it yields is where the row holds the
//! coordinate's value: the coordinate itself in a dense row, the order it
//! was first touched in a hashed one. A dense row can also be located.
//!
//! A short row of an ordered level may be left unsorted: `begin` then sets
//! the flag the iterator was made with, and `place` ranks each coordinate
//! among the row's instead of taking the cursor (see `ir/sort.rs`).

use super::{Cursor, Cx, Head, Kind, LoopIterator, Props, Step};
use crate::format::level::Properties;
use crate::ir::{Emitter, Expr};
use crate::lower::ids::IterId;
use crate::lower::operands::Row;
use crate::lower::workspace::Workspace;
use crate::lower::LowerError;

pub(crate) struct WorkspaceIter {
    head: Head,
    arrays: Workspace,
    row: Row,
    /// The number of coordinates touched (an IR variable of the row).
    count: Expr,
    /// Set by `begin` when the list stays unsorted and each coordinate is
    /// placed by its rank (an IR variable, false otherwise).
    ranked: Expr,
}

impl WorkspaceIter {
    /// The iterator over the row of `tensor`'s last level, whose
    /// coordinates come out in order when `ordered`.
    pub fn new(e: &mut Emitter, tensor: &str, row: Row, count: Expr, ordered: bool) -> Self {
        let level = Properties {
            full: false,
            ordered,
            unique: true,
            branchless: false,
            compact: true,
        };
        let props = Props {
            level,
            locatable: row == Row::Dense,
        };
        let kind = match row {
            Row::Dense => "dense",
            Row::Hashed => "hashed",
        };
        WorkspaceIter {
            head: Head {
                id: IterId::Workspace,
                props,
                level: None,
                name: format!("workspace<{tensor}:{kind} row>"),
            },
            arrays: Workspace::of(tensor),
            row,
            count,
            ranked: match ordered {
                true => e.let_var("wranked", Expr::Bool(false)),
                false => Expr::Bool(false),
            },
        }
    }

    /// Where the coordinate under the cursor goes among the row's, in the
    /// level's order: the cursor, or its rank when `begin` left the list
    /// unsorted.
    pub fn place(&self, cx: &mut Cx, cur: &Cursor, step: &Step) -> Expr {
        if self.ranked == Expr::Bool(false) {
            return cur.at.clone();
        }
        let place = cx.e.let_var("wplace", cur.at.clone());
        let (list, count) = (&self.arrays.list, self.count.clone());
        let coord = step.coord.clone();
        cx.e.if_(self.ranked.clone(), |e| {
            let rank = e.rank_of(list, count, coord);
            e.set(&place, rank);
        });
        place
    }

    /// The step at `coord`: its value is held at the coordinate in a dense
    /// row, at the cursor (the order it was touched in) in a hashed one.
    fn step(&self, coord: Expr, cur: &Cursor, found: Expr) -> Step {
        let pos = match self.row {
            Row::Dense => coord.clone(),
            Row::Hashed => cur.at.clone(),
        };
        Step {
            coord,
            pos,
            found,
            run_end: None,
        }
    }

    /// Clear what the row holds for the coordinate under the cursor (a
    /// dense row is reused by the next row; a hashed row's values are
    /// overwritten when touched again).
    pub fn clear(&self, cx: &mut Cx, step: &Step) {
        if self.row == Row::Dense {
            cx.e.store(self.arrays.vals.clone(), step.pos.clone(), Expr::Float(0.0));
            cx.e.store(self.arrays.seen.clone(), step.coord.clone(), Expr::Int(0));
        }
    }
}

impl<'p> LoopIterator<'p> for WorkspaceIter {
    fn head(&self) -> &Head {
        &self.head
    }
    fn kind(&self) -> Kind<'p> {
        Kind::Scratch
    }
    fn cursor_name(&self, _cx: &Cx) -> String {
        "pw".into()
    }
    fn begin(&self, cx: &mut Cx) -> Cursor {
        let w = &self.arrays;
        let count = self.count.clone();
        if self.row == Row::Hashed {
            cx.e.for_("pw", Expr::Int(0), count.clone(), |e, u| {
                e.store(w.slots.clone(), Expr::load(w.at.clone(), u), Expr::Int(0))
            });
        }
        if self.head.props.level.ordered {
            // A dense row's list is sorted through its flags; a hashed
            // row's list is sorted with its values.
            let ranked = match self.row {
                Row::Dense => cx.e.sort_flagged_keys(&w.list, count.clone(), &w.seen),
                Row::Hashed => {
                    cx.e.sort_pairs_unless_ranked(&w.list, &w.vals, count.clone())
                }
            };
            cx.e.set(&self.ranked, ranked);
        }
        Cursor {
            at: Expr::Int(0),
            end: count,
        }
    }
    fn coordinate(&self, cx: &mut Cx, cur: &Cursor) -> Step {
        let name = cx.var_name();
        let coord = cx.let_coord(name, Expr::load(self.arrays.list.clone(), cur.at.clone()));
        self.step(coord, cur, Expr::Bool(true))
    }
    /// Past its end the coordinate reads as `exhausted`, matching nothing.
    fn coordinate_guarded(&self, cx: &mut Cx, cur: &Cursor, exhausted: i64) -> Step {
        let name = cx.var_name();
        let coord = cx.let_coord(name, Expr::Int(exhausted));
        let list = self.arrays.list.clone();
        cx.e.if_(Expr::lt(cur.at.clone(), cur.end.clone()), |e| {
            e.set(&coord, Expr::load(list, cur.at.clone()))
        });
        self.step(coord, cur, Expr::lt(cur.at.clone(), cur.end.clone()))
    }
    /// A dense row holds every coordinate's value at the coordinate; its
    /// flag says whether the loops touched it.
    fn locate(&self, _cx: &mut Cx, coord: Expr) -> Option<Result<(Expr, Expr), LowerError>> {
        match self.row {
            Row::Dense => {
                let seen = Expr::load(self.arrays.seen.clone(), coord.clone());
                Some(Ok((
                    coord,
                    Expr::cmp(crate::ir::CmpOp::Ne, seen, Expr::Int(0)),
                )))
            }
            Row::Hashed => None,
        }
    }
}
