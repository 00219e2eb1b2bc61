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

use super::operands::Row;
use super::Lowerer;
use crate::format::level::Assembly;
use crate::ir::{ArrayRef, CmpOp, ElemTy, Expr, Slot};

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
    /// last level (sorted when the level is ordered), and clear the row.
    /// `above`: the coordinates of the levels appended together with the
    /// last one (COO's row of each entry), written with every coordinate.
    pub(super) fn flush_workspace(&mut self, above: &[Expr]) {
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
        let w = Workspace::of(&o.tensor);
        let ordered = o.format.levels[last].properties().ordered;
        // The table of a hashed row is cleared first: flushing reads the
        // list and the values only.
        if slots.is_some() {
            self.e.for_("pw", Expr::Int(0), count.clone(), |e, u| {
                e.store(w.slots.clone(), Expr::load(w.at.clone(), u), Expr::Int(0))
            });
        }
        // Either the list comes out in order, or (a short row in an ordered
        // level) each coordinate goes to its rank among the row's. A dense
        // row's list is sorted through its flags; a hashed row's long list
        // is sorted with its values.
        let ranked = match (&slots, ordered) {
            (None, true) => self.e.sort_flagged_keys(&w.list, count.clone(), &w.seen),
            (Some(_), true) => self
                .e
                .sort_pairs_unless_ranked(&w.list, &w.vals, count.clone()),
            (_, false) => Expr::Bool(false),
        };
        let vals = ArrayRef::vals(&o.tensor);
        let var = o.level_vars[last];
        let (name, coords) = (self.p.name(var), &mut self.coords);
        let hashed = slots.is_some();
        self.e.for_("pw", Expr::Int(0), count.clone(), |e, t| {
            let j = e.let_var(name, Expr::load(w.list.clone(), t.clone()));
            super::iterate::note_coord(coords, &j, var);
            let place = e.let_var("wplace", t.clone());
            e.if_(ranked.clone(), |e| {
                let rank = e.rank_of(&w.list, count.clone(), j.clone());
                e.set(&place, rank);
            });
            let dst = e.let_var("wdst", Expr::add(at.clone(), place));
            let entry: Vec<Expr> = above.iter().cloned().chain([j.clone()]).collect();
            super::assemble::append_chain_coords(o, e, head, &dst, &entry);
            e.reserve(vals.clone(), Expr::add(dst.clone(), Expr::Int(1)));
            let held = if hashed { t } else { j.clone() };
            e.store(vals.clone(), dst, Expr::load(w.vals.clone(), held.clone()));
            if !hashed {
                e.store(w.vals.clone(), j.clone(), Expr::Float(0.0));
                e.store(w.seen.clone(), j, Expr::Int(0));
            }
        });
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
pub(super) struct Workspace {
    pub(super) vals: ArrayRef,
    list: ArrayRef,
    seen: ArrayRef,
    slots: ArrayRef,
    at: ArrayRef,
}

impl Workspace {
    pub(super) fn of(tensor: &str) -> Self {
        let scratch = |name: &str, ty| ArrayRef {
            tensor: tensor.to_string(),
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
