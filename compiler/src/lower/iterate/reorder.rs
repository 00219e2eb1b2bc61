//! `Reorder<I>`: an unordered, unique level iterated by position, visited
//! in coordinate order through a sorted scratch copy (the paper's
//! reordering iterator conversion, section 5.3). `begin` copies the
//! coordinates under the parent with their positions into two scratch
//! arrays of the operand, keeps only positions that hold a coordinate (a
//! hash table's buckets), and sorts the pairs by coordinate; the cursor
//! then walks the copy, and the position it yields is the level's own, so
//! children and values are read as stored.
//!
//! The copy is made each time the loop starts, once per parent position:
//! the lowerer uses it only where no enclosing loop runs over a variable
//! the operand lacks (which would sort the same segment again for each of
//! its coordinates); elsewhere the operand is converted before the kernel.

use super::{coord_name, pos_name, Cursor, Cx, Head, Kind, LoopIterator, PositionIter, Step};
use crate::ir::{ArrayRef, ElemTy, Expr, Slot, Stmt, Ty};
use crate::lower::operands::Operand;
use crate::lower::LowerError;

pub(crate) struct Reorder<'p> {
    inner: PositionIter<'p>,
    head: Head,
    /// The operand and its level.
    operand: &'p Operand,
    k: usize,
    /// The copy's coordinates and their positions in the level, and the
    /// slots a narrow copy is sorted through (`sort_distinct_pairs`).
    coords: ArrayRef,
    positions: ArrayRef,
    slots: ArrayRef,
}

impl<'p> Reorder<'p> {
    /// `inner`, over level `k` of `operand`, reordered; `copy` names its
    /// scratch arrays apart from those of other accesses of the same
    /// tensor (`sorted2` for level 2).
    pub fn new(inner: PositionIter<'p>, operand: &'p Operand, k: usize, copy: &str) -> Self {
        let tensor = &operand.tensor;
        let mut head = inner.head().clone();
        head.props.level.ordered = true;
        head.name = format!("reorder<{}>", inner.head().name);
        let scratch = |what: &str| ArrayRef {
            tensor: tensor.as_str().into(),
            slot: Slot::Scratch(format!("{copy}_{what}"), ElemTy::I32),
        };
        Reorder {
            inner,
            head,
            operand,
            k,
            coords: scratch("crd"),
            positions: scratch("pos"),
            slots: scratch("slots"),
        }
    }
}

impl<'p> LoopIterator<'p> for Reorder<'p> {
    fn head(&self) -> &Head {
        &self.head
    }
    fn kind(&self) -> Kind<'p> {
        Kind::Scratch
    }
    fn cursor_name(&self, cx: &Cx) -> String {
        format!("{}_sorted", self.inner.pos_name(cx))
    }
    /// Copy and sort the level's coordinates under the parent; the cursor
    /// runs over the copy.
    fn begin(&self, cx: &mut Cx) -> Cursor {
        let (lo, hi) = self.inner.raw_bounds(cx);
        let name = self.inner.pos_name(cx);
        let lo = cx.e.bind(&format!("{name}_begin"), lo);
        let hi = cx.e.bind(&format!("{name}_end"), hi);
        let span = Expr::sub(hi.clone(), lo.clone());
        cx.e.reserve(self.coords.clone(), span.clone());
        cx.e.reserve(self.positions.clone(), span);
        let count = cx.e.let_var(&format!("{name}_count"), Expr::Int(0));
        let anc = cx.ancestors(self.operand);
        let at = cx.e.fresh(&name, Ty::I64);
        cx.e.open();
        let (coord, found) = self.inner.access(cx, Expr::Var(at), &anc);
        cx.e.open();
        cx.e.store(self.coords.clone(), count.clone(), coord);
        cx.e.store(self.positions.clone(), count.clone(), Expr::Var(at));
        cx.e.set(&count, Expr::add(count.clone(), Expr::Int(1)));
        let keep = cx.e.close();
        match found {
            Expr::Bool(true) => keep.into_iter().for_each(|s| cx.e.push(s)),
            found => cx.e.push(Stmt::If {
                cond: found,
                then: keep,
                els: Vec::new(),
            }),
        }
        let body = cx.e.close();
        cx.e.push(Stmt::For {
            var: at,
            lo,
            hi,
            body,
        });
        cx.e.sort_distinct_pairs(&self.coords, &self.positions, count.clone(), &self.slots);
        Cursor {
            at: Expr::Int(0),
            end: count,
        }
    }
    fn coordinate(&self, cx: &mut Cx, cur: &Cursor) -> Step {
        let (cname, pname) = (
            coord_name(cx.p, cx.var, self.operand),
            pos_name(self.operand, self.k),
        );
        let coord = cx.let_coord(&cname, Expr::load(self.coords.clone(), cur.at.clone()));
        let pos =
            cx.e.let_var(&pname, Expr::load(self.positions.clone(), cur.at.clone()));
        Step {
            coord,
            pos,
            found: Expr::Bool(true),
            run_end: None,
        }
    }
    /// Past its end the coordinate reads as `exhausted` and the position
    /// as 0, which nothing reads (the coordinate matches no other).
    fn coordinate_guarded(&self, cx: &mut Cx, cur: &Cursor, exhausted: i64) -> Step {
        let (cname, pname) = (
            coord_name(cx.p, cx.var, self.operand),
            pos_name(self.operand, self.k),
        );
        let coord = cx.let_coord(&cname, Expr::Int(exhausted));
        let pos = cx.e.let_var(&pname, Expr::Int(0));
        let (coords, positions) = (self.coords.clone(), self.positions.clone());
        cx.e.if_(Expr::lt(cur.at.clone(), cur.end.clone()), |e| {
            e.set(&coord, Expr::load(coords, cur.at.clone()));
            e.set(&pos, Expr::load(positions, cur.at.clone()));
        });
        Step {
            coord,
            pos,
            found: Expr::Bool(true),
            run_end: None,
        }
    }
    fn locate(&self, cx: &mut Cx, coord: Expr) -> Option<Result<(Expr, Expr), LowerError>> {
        self.inner.locate(cx, coord)
    }
}
