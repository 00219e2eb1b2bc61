//! `Dedup<I>`: a non-unique, ordered level iterated by position, visiting
//! each run of equal coordinates once (section 5.3). The step scans ahead
//! to the run's end; the cursor advances past the run; the children of the
//! run are chained from its first and last positions (`raw_bounds` under a
//! parent `run_end`), so no scratch array is needed.

use super::{Cursor, Cx, Head, Kind, LoopIterator, PositionIter, Shape, Step};
use crate::ir::Expr;
use crate::lower::ids::OperandId;
use crate::lower::LowerError;

pub(crate) struct Dedup<I>(pub I);

impl<'p> Dedup<PositionIter<'p>> {
    /// Declare the run's end, one past the cursor.
    fn declare_run(&self, cx: &mut Cx, cur: &Cursor) -> Expr {
        let name = format!("{}_seg", self.0.pos_name(cx));
        cx.e.let_var(&name, Expr::add(cur.at.clone(), Expr::Int(1)))
    }

    /// Move `seg` past the positions holding `coord`.
    fn scan(&self, cx: &mut Cx, seg: &Expr, end: &Expr, coord: &Expr) {
        let (op, _) = self.0.level().unwrap_or((OperandId::OUTPUT, 0));
        let anc = cx.ancestors(&cx.p.operands[op]);
        cx.e.open();
        let (next, _) = self.0.access(cx, seg.clone(), &anc);
        let pre = cx.e.close();
        debug_assert!(
            pre.is_empty(),
            "deduplicated levels have expression-only pos_access"
        );
        let cond = Expr::and(
            Expr::lt(seg.clone(), end.clone()),
            Expr::eq(next, coord.clone()),
        );
        cx.e.while_(cond, |e| e.set(seg, Expr::add(seg.clone(), Expr::Int(1))));
    }
}

impl<'p> LoopIterator<'p> for Dedup<PositionIter<'p>> {
    fn head(&self) -> &Head {
        self.0.head()
    }
    fn kind(&self) -> Kind<'p> {
        self.0.kind()
    }
    fn name(&self) -> String {
        format!("dedup<{}>", self.0.name())
    }
    fn dedups(&self) -> bool {
        true
    }
    fn shape(&self) -> Shape {
        Shape::While
    }
    fn cursor_name(&self, cx: &Cx) -> String {
        self.0.cursor_name(cx)
    }
    fn begin(&self, cx: &mut Cx) -> Cursor {
        self.0.begin(cx)
    }
    fn coordinate(&self, cx: &mut Cx, cur: &Cursor) -> Step {
        let step = self.0.coordinate(cx, cur);
        let seg = self.declare_run(cx, cur);
        self.scan(cx, &seg, &cur.end, &step.coord);
        Step {
            run_end: Some(seg),
            ..step
        }
    }
    fn coordinate_guarded(&self, cx: &mut Cx, cur: &Cursor, exhausted: i64) -> Step {
        let (coord, found, seg) = self.0.read_guarded(
            cx,
            cur,
            exhausted,
            |cx| self.declare_run(cx, cur),
            |cx, coord, seg| self.scan(cx, seg, &cur.end, coord),
        );
        Step {
            coord,
            pos: cur.at.clone(),
            found,
            run_end: Some(seg),
        }
    }
    fn locate(&self, cx: &mut Cx, coord: Expr) -> Option<Result<(Expr, Expr), LowerError>> {
        self.0.locate(cx, coord)
    }
}
