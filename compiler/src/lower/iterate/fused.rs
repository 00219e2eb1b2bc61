//! `Fused<I>`: a branchless level iterated by position alone in its loop,
//! which has exactly one position under its parent: no loop of its own,
//! the cursor is that position (iterator fusion). Only for an operand
//! present at its parent and not under a deduplicated run, whose bounds
//! are then the parent's expressions.

use super::{Cursor, Cx, Kind, LoopIterator, PositionIter, Props, Shape, Step};
use crate::ir::Expr;
use crate::lower::ids::{IterId, OperandId};
use crate::lower::LowerError;

pub(crate) struct Fused<I>(pub I);

impl<'p> LoopIterator<'p> for Fused<PositionIter<'p>> {
    fn id(&self) -> IterId {
        self.0.id()
    }
    fn props(&self) -> Props {
        self.0.props()
    }
    fn kind(&self) -> Kind<'p> {
        self.0.kind()
    }
    fn level(&self) -> Option<(OperandId, usize)> {
        self.0.level()
    }
    fn name(&self) -> String {
        self.0.name()
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
