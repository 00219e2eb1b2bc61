//! The workspace row (taco's precompute, MLIR's expand/compress) for a
//! result whose last level is appended but cannot be written in the order
//! the loops produce its coordinates (SpGEMM's `j` below the reduction over
//! `k`): a dense row of values with a touched flag per coordinate and a list
//! of the coordinates touched, flushed into the result after each row,
//! in order when the level is ordered (`ir/sort.rs`).

use super::Lowerer;
use crate::format::level::{Assembly, LevelCtx};
use crate::ir::{ArrayRef, Expr};

impl<'p> Lowerer<'p> {
    /// Allocate and clear the row, and start the touched count.
    pub(super) fn workspace_init(&mut self) {
        let o = self.p.output();
        let extent = self.extent(o.level_vars[o.level_vars.len() - 1]);
        let w = Workspace::of(&o.tensor);
        self.e.comment(format!("workspace row of {} (values, touched flags, touched list)", o.tensor));
        for a in [&w.vals, &w.seen, &w.list] {
            self.e.reserve(a.clone(), extent.clone());
        }
        self.e.for_("pw", Expr::Int(0), extent, |e, q| {
            e.store(w.vals.clone(), q.clone(), Expr::Float(0.0));
            e.store(w.seen.clone(), q, Expr::Int(0));
        });
        self.touched = Some(self.e.let_var("w_count", Expr::Int(0)));
    }

    /// Record coordinate `j` of the last level in the workspace's touched
    /// list (once).
    pub(super) fn touch(&mut self, j: Expr) {
        let w = Workspace::of(&self.p.output().tensor);
        let Some(count) = self.touched.clone() else { return };
        self.e.if_(Expr::eq(Expr::load(w.seen.clone(), j.clone()), Expr::Int(0)), |e| {
            e.store(w.seen.clone(), j.clone(), Expr::Int(1));
            e.store(w.list.clone(), count.clone(), j.clone());
            e.set(&count, Expr::add(count.clone(), Expr::Int(1)));
        });
    }

    /// Append the touched coordinates of the workspace row to the result's
    /// last level (sorted when the level is ordered), and clear the row.
    pub(super) fn flush_workspace(&mut self) {
        let o = self.p.output();
        let last = o.level_vars.len() - 1;
        let Some(count) = self.touched.clone() else { return };
        let Assembly::Append(app) = o.format.levels[last].assembly() else { return };
        let at = self.out_sizes[&self.chain_head(last)].clone();
        let w = Workspace::of(&o.tensor);
        // Either the list comes out in order, or (a short row in an ordered
        // level) each coordinate goes to its rank among the row's.
        let ranked = match o.format.levels[last].properties().ordered {
            true => self.e.sort_flagged_keys(&w.list, count.clone(), &w.seen),
            false => Expr::Bool(false),
        };
        let vals = ArrayRef::vals(&o.tensor);
        let c = LevelCtx::new(&o.tensor, last);
        let var = o.level_vars[last];
        let (name, coords) = (self.p.name(var), &mut self.coords);
        self.e.for_("pw", Expr::Int(0), count.clone(), |e, t| {
            let j = e.let_var(name, Expr::load(w.list.clone(), t.clone()));
            super::iterate::note_coord(coords, &j, var);
            let place = e.let_var("wplace", t);
            e.if_(ranked.clone(), |e| {
                let rank = e.rank_of(&w.list, count.clone(), j.clone());
                e.set(&place, rank);
            });
            let dst = e.let_var("wdst", Expr::add(at.clone(), place));
            app.append_coord(&c, e, dst.clone(), j.clone());
            e.reserve(vals.clone(), Expr::add(dst.clone(), Expr::Int(1)));
            e.store(vals.clone(), dst, Expr::load(w.vals.clone(), j.clone()));
            e.store(w.vals.clone(), j.clone(), Expr::Float(0.0));
            e.store(w.seen.clone(), j, Expr::Int(0));
        });
        self.e.set(&at, Expr::add(at.clone(), count.clone()));
        self.e.set(&count, Expr::Int(0));
    }
}

/// The scratch arrays of a result's workspace row.
pub(super) struct Workspace {
    pub(super) vals: ArrayRef,
    pub(super) seen: ArrayRef,
    pub(super) list: ArrayRef,
}

impl Workspace {
    pub(super) fn of(tensor: &str) -> Self {
        let scratch = |name: &str, ty| ArrayRef { tensor: tensor.to_string(), slot: crate::ir::Slot::Scratch(name.to_string(), ty) };
        Workspace { vals: scratch("w_vals", crate::ir::ElemTy::F64), seen: scratch("w_seen", crate::ir::ElemTy::I32), list: scratch("w_list", crate::ir::ElemTy::I32) }
    }
}
