//! `Fused<I>`: a branchless level iterated by position alone in its loop,
//! which has exactly one position under its parent: no loop of its own,
//! the cursor is that position (iterator fusion). Only for an operand
//! present at its parent and not under a deduplicated run, whose bounds
//! are then the parent's expressions.

use super::{Cursor, Cx, Head, Kind, LoopIterator, PositionIter, Shape, Step};
use crate::ir::Expr;
use crate::lower::LowerError;

pub(crate) struct Fused<I>(pub I);

impl<'p> LoopIterator<'p> for Fused<PositionIter<'p>> {
    fn head(&self) -> &Head {
        self.0.head()
    }
    fn kind(&self) -> Kind<'p> {
        self.0.kind()
    }
    fn shape(&self) -> Shape {
        Shape::Once
    }
    fn cursor_name(&self, cx: &Cx) -> String {
        self.0.cursor_name(cx)
    }
    /// The one position, as the level's expressions (nothing bound).
    fn begin(&self, cx: &mut Cx) -> Cursor {
        let (at, end) = self.0.raw_bounds(cx);
        Cursor { at, end }
    }
    fn coordinate(&self, cx: &mut Cx, cur: &Cursor) -> Step {
        self.0.coordinate(cx, cur)
    }
    fn coordinate_guarded(&self, cx: &mut Cx, cur: &Cursor, exhausted: i64) -> Step {
        self.0.coordinate_guarded(cx, cur, exhausted)
    }
    fn locate(&self, cx: &mut Cx, coord: Expr) -> Option<Result<(Expr, Expr), LowerError>> {
        self.0.locate(cx, coord)
    }
}
