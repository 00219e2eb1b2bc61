//! The workspace row (taco's precompute, MLIR's expand/compress) for a
//! result whose last level is appended but cannot be written in the order
//! the loops produce its coordinates (SpGEMM's `j` below the reduction over
//! `k`). The loops accumulate into the row; after each row the touched
//! coordinates are appended to the result, in order when the level is
//! ordered (`ir/sort.rs`), and the row is cleared.
//!
//! Two rows (`Row`):
//! - dense: values and a touched flag per coordinate of the level's extent
//!   and a list of the coordinates touched; a coordinate is its own index;
//! - hashed, for a level too wide for a dense row: an open-addressing
//!   table (linear probing) from coordinate to the order it was first
//!   touched in, with the coordinates and values kept in that order, so
//!   memory follows the row's entries. The table doubles when half full
//!   and is rebuilt from the list of coordinates; the values stay where
//!   they are.

use super::iterate::{Cursor, LoopIterator, WorkspaceIter};
use super::operands::Row;
use super::{Lowerer, State};
use crate::format::level::Assembly;
use crate::ir::{ArrayRef, CmpOp, ElemTy, Expr, Slot, Stmt, Ty};

/// Slots a hashed row starts with (doubled as the row fills).
const HASHED_SLOTS: i64 = 1024;

/// What the loops keep of the row: the number of coordinates touched, and
/// a hashed row's table size.
#[derive(Clone)]
pub(crate) struct RowState {
    count: Expr,
    slots: Option<Expr>,
}

impl<'p> Lowerer<'p> {
    /// Allocate and clear the row, and start the touched count.
    pub(super) fn workspace_init(&mut self, row: Row) {
        let o = self.p.output();
        let w = Workspace::of(&o.tensor);
        self.e.comment(format!(
            "workspace row of {} ({})",
            o.tensor,
            row.describe()
        ));
        let slots = match row {
            Row::Dense => {
                let extent = self.extent(o.level_vars[o.level_vars.len() - 1]);
                for a in [&w.vals, &w.seen, &w.list] {
                    self.e.reserve(a.clone(), extent.clone());
                }
                self.e.for_("pw", Expr::Int(0), extent, |e, q| {
                    e.store(w.vals.clone(), q.clone(), Expr::Float(0.0));
                    e.store(w.seen.clone(), q, Expr::Int(0));
                });
                None
            }
            Row::Hashed => {
                let size = self.e.let_var("w_slots_size", Expr::Int(HASHED_SLOTS));
                self.e.reserve(w.slots.clone(), size.clone());
                self.e.for_("pw", Expr::Int(0), size.clone(), |e, q| {
                    e.store(w.slots.clone(), q, Expr::Int(0))
                });
                Some(size)
            }
        };
        let count = self.e.let_var("w_count", Expr::Int(0));
        self.row = Some(RowState { count, slots });
    }

    /// Record coordinate `j` of the last level as touched (once); returns
    /// where its value accumulates in `Workspace::vals`.
    pub(super) fn touch(&mut self, j: Expr) -> Expr {
        let w = Workspace::of(&self.p.output().tensor);
        let Some(RowState { count, slots }) = self.row.clone() else {
            return j;
        };
        let Some(size) = slots else {
            self.e.if_(
                Expr::eq(Expr::load(w.seen.clone(), j.clone()), Expr::Int(0)),
                |e| {
                    e.store(w.seen.clone(), j.clone(), Expr::Int(1));
                    e.store(w.list.clone(), count.clone(), j.clone());
                    e.set(&count, Expr::add(count.clone(), Expr::Int(1)));
                },
            );
            return j;
        };
        let j = self.e.bind("wkey", j);
        let at = self.e.let_var("wat", Expr::Int(-1));
        let slot = self.e.let_var("wslot", home_slot(&j, &size));
        self.e.while_(Expr::lt(at.clone(), Expr::Int(0)), |e| {
            let held = e.let_var("wheld", Expr::load(w.slots.clone(), slot.clone()));
            let insert = e.block(|e| {
                e.reserve(w.list.clone(), Expr::add(count.clone(), Expr::Int(1)));
                e.reserve(w.vals.clone(), Expr::add(count.clone(), Expr::Int(1)));
                e.reserve(w.at.clone(), Expr::add(count.clone(), Expr::Int(1)));
                e.store(w.list.clone(), count.clone(), j.clone());
                e.store(w.vals.clone(), count.clone(), Expr::Float(0.0));
                e.store(w.at.clone(), count.clone(), slot.clone());
                e.store(
                    w.slots.clone(),
                    slot.clone(),
                    Expr::add(count.clone(), Expr::Int(1)),
                );
                e.set(&at, count.clone());
                e.set(&count, Expr::add(count.clone(), Expr::Int(1)));
            });
            let probe = e.block(|e| {
                let mine = Expr::sub(held.clone(), Expr::Int(1));
                let found = e.block(|e| e.set(&at, mine.clone()));
                let next = e.block(|e| e.set(&slot, next_slot(&slot, &size)));
                e.push(crate::ir::Stmt::If {
                    cond: Expr::eq(Expr::load(w.list.clone(), mine.clone()), j.clone()),
                    then: found,
                    els: next,
                });
            });
            e.push(crate::ir::Stmt::If {
                cond: Expr::eq(held, Expr::Int(0)),
                then: insert,
                els: probe,
            });
        });
        // Half full: double the table and place every coordinate again.
        self.e.if_(
            Expr::cmp(
                CmpOp::Gt,
                Expr::mul(count.clone(), Expr::Int(2)),
                size.clone(),
            ),
            |e| {
                e.set(&size, Expr::mul(size.clone(), Expr::Int(2)));
                e.reserve(w.slots.clone(), size.clone());
                e.for_("pw", Expr::Int(0), size.clone(), |e, q| {
                    e.store(w.slots.clone(), q, Expr::Int(0))
                });
                e.for_("pr", Expr::Int(0), count.clone(), |e, u| {
                    let s = e.let_var(
                        "wslot",
                        home_slot(&Expr::load(w.list.clone(), u.clone()), &size),
                    );
                    e.while_(
                        Expr::cmp(
                            CmpOp::Ne,
                            Expr::load(w.slots.clone(), s.clone()),
                            Expr::Int(0),
                        ),
                        |e| e.set(&s, next_slot(&s, &size)),
                    );
                    e.store(
                        w.slots.clone(),
                        s.clone(),
                        Expr::add(u.clone(), Expr::Int(1)),
                    );
                    e.store(w.at.clone(), u, s);
                });
            },
        );
        at
    }

    /// Append the touched coordinates of the workspace row to the result's
    /// last level (in order when the level is ordered), and clear the row:
    /// a loop driven by the row's iterator (`iterate::WorkspaceIter`).
    /// `above`: the coordinates of the levels appended together with the
    /// last one (COO's row of each entry), written with every coordinate;
    /// `st`: what the loops around the row resolved.
    pub(super) fn flush_workspace(&mut self, st: &State, above: &[Expr]) {
        let o = self.p.output();
        let last = o.level_vars.len() - 1;
        let Some(RowState { count, slots }) = self.row.clone() else {
            return;
        };
        if !matches!(o.format.levels[last].assembly(), Assembly::Append(_)) {
            return;
        }
        let head = self.chain_head(last);
        let at = self.out_sizes[&head].clone();
        let row = match slots {
            Some(_) => Row::Hashed,
            None => Row::Dense,
        };
        let ordered = o.format.levels[last].properties().ordered;
        let it = WorkspaceIter::new(&mut self.e, &o.tensor, row, count.clone(), ordered);
        self.e.comment(format!(
            "compress: append the row's coordinates, walked by {}",
            it.name()
        ));
        let var = o.level_vars[last];
        let mut cx = self.cx(st, var);
        let cur = it.begin(&mut cx);
        let t = cx.e.fresh(&it.cursor_name(&cx), Ty::I64);
        let walk = Cursor {
            at: Expr::Var(t),
            end: cur.end.clone(),
        };
        cx.e.open();
        let step = it.coordinate(&mut cx, &walk);
        let place = it.place(&mut cx, &walk, &step);
        let dst = cx.e.let_var("wdst", Expr::add(at.clone(), place));
        let entry: Vec<Expr> = above.iter().cloned().chain([step.coord.clone()]).collect();
        super::assemble::append_chain_coords(o, cx.e, head, &dst, &entry);
        let vals = ArrayRef::vals(&o.tensor);
        cx.e.reserve(vals.clone(), Expr::add(dst.clone(), Expr::Int(1)));
        let held = Expr::load(Workspace::of(&o.tensor).vals, step.pos.clone());
        cx.e.store(vals, dst.clone(), held);
        it.clear(&mut cx, &step);
        let body = cx.e.close();
        let flush = vec![Stmt::For {
            var: t,
            lo: cur.at,
            hi: cur.end,
            body,
        }];
        // The row appends exactly its `count` entries: room for them once.
        let (each, all) = (
            Expr::add(dst, Expr::Int(1)),
            Expr::add(at.clone(), count.clone()),
        );
        self.emit_with_room(flush, &each, all.clone(), all);
        self.e.set(&at, Expr::add(at.clone(), count.clone()));
        self.e.set(&count, Expr::Int(0));
    }
}

/// Where coordinate `j` (below 2^31) starts probing a table of `size`
/// slots (a power of two): Fibonacci hashing, the top bits of the product's
/// low 32 bits (every step a multiplication, or a division or remainder by
/// a power of two, which both backends turn into shifts and masks).
fn home_slot(j: &Expr, size: &Expr) -> Expr {
    let bits = Expr::bin(
        crate::ir::BinOp::Rem,
        Expr::mul(j.clone(), Expr::Int(2_654_435_761)),
        Expr::Int(1 << 32),
    );
    Expr::div(Expr::mul(bits, size.clone()), Expr::Int(1 << 32))
}

/// The slot after `slot`, wrapping at the table's end.
fn next_slot(slot: &Expr, size: &Expr) -> Expr {
    let next = Expr::add(slot.clone(), Expr::Int(1));
    Expr::select(Expr::eq(next.clone(), size.clone()), Expr::Int(0), next)
}

impl Row {
    fn describe(self) -> &'static str {
        match self {
            Row::Dense => "values, touched flags, touched list",
            Row::Hashed => "hash table of the coordinates touched, their values in touch order",
        }
    }
}

/// The scratch arrays of a result's workspace row: values (indexed by
/// coordinate in a dense row, by touch order in a hashed one), the list of
/// coordinates touched, a dense row's flags, and a hashed row's table and
/// the table slot of each coordinate touched.
pub(crate) struct Workspace {
    pub vals: ArrayRef,
    pub list: ArrayRef,
    pub seen: ArrayRef,
    pub slots: ArrayRef,
    pub at: ArrayRef,
}

impl Workspace {
    pub(crate) fn of(tensor: &str) -> Self {
        let scratch = |name: &str, ty| ArrayRef {
            tensor: tensor.into(),
            slot: Slot::Scratch(name.to_string(), ty),
        };
        Workspace {
            vals: scratch("w_vals", ElemTy::F64),
            list: scratch("w_list", ElemTy::I32),
            seen: scratch("w_seen", ElemTy::I32),
            slots: scratch("w_slots", ElemTy::I32),
            at: scratch("w_at", ElemTy::I32),
        }
    }
}
