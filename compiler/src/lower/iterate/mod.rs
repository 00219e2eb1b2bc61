//! Traversal as an iterator protocol (section 5 of the paper). Everything
//! a loop over one index variable carries for one operand (cursor, end,
//! coordinate, dedup run) lives in an iterator; level formats stay
//! stateless and are only asked for their capability functions.
//!
//! An iterator emits, under the positions its parents resolved (`Cx`):
//! `begin` (the cursor's bounds), `valid` (the loop condition),
//! `coordinate` (the coordinate, position and presence at the cursor),
//! `advance` (the cursor's next value) and, where the level offers it,
//! `locate`. Implementations: `level` (coordinate-position and
//! coordinate-value iteration over a level), `dimension` (every coordinate
//! of a variable) and the adapters `Dedup` (runs of equal coordinates of a
//! non-unique ordered level, section 5.3), `Reorder` (an unordered level
//! through a sorted scratch copy, section 5.3) and `Fused` (a branchless
//! level visited without a loop of its own), and the workspace iterator
//! (the touched coordinates of a result's workspace row, which the row's
//! flush appends to the result). Each has the name the editor shows.

mod dedup;
mod dimension;
mod fused;
mod level;
mod reorder;
mod workspace;

pub(crate) use dedup::Dedup;
pub(crate) use dimension::DimensionIter;
pub(crate) use fused::Fused;
pub(crate) use level::{level_iterator, locate, PositionIter};
pub(crate) use reorder::Reorder;
pub(crate) use workspace::WorkspaceIter;

use super::ids::{IterId, OperandId};
use super::operands::{Operand, Problem};
use super::vars::IndexVar;
use super::{LowerError, State};
use crate::format::level::{CoordPositionIteration, CoordValueIteration, Properties};
use crate::ir::{Emitter, Expr, VarId};

/// Where an iterator emits: the kernel's operands, the code being built,
/// what the enclosing loops resolved, and the variable of this loop.
pub(crate) struct Cx<'a, 'p> {
    pub p: &'p Problem,
    pub e: &'a mut Emitter,
    pub st: &'a State,
    pub var: IndexVar,
    /// Where the IR variables holding coordinates of `var` are noted.
    pub coords: &'a mut Vec<(VarId, IndexVar)>,
}

impl<'p> Cx<'_, 'p> {
    /// Coordinates of an operand's resolved levels (its ancestors).
    pub fn ancestors(&self, o: &Operand) -> Vec<Expr> {
        ancestors(self.st, o)
    }
    /// The position of operand `o`'s last resolved level (0 at the root).
    pub fn parent(&self, o: OperandId) -> Expr {
        self.st.pos[o].last().cloned().unwrap_or(Expr::Int(0))
    }
    pub fn extent(&self) -> Expr {
        self.p.vars.extent(self.var).clone()
    }
    /// The loop variable's name, which its IR variables are named after.
    pub fn var_name(&self) -> &'p str {
        self.p.name(self.var)
    }
    /// `Emitter::bind` for a coordinate of the loop's variable.
    pub fn bind_coord(&mut self, name: &str, e: Expr) -> Expr {
        if e.is_trivial() {
            return e;
        }
        self.let_coord(name, e)
    }
    /// `Emitter::let_var` for a coordinate of the loop's variable.
    pub fn let_coord(&mut self, name: &str, e: Expr) -> Expr {
        let x = self.e.let_var(name, e);
        note_coord(self.coords, &x, self.var);
        x
    }
}

/// Note `x`, when it is an IR variable, as holding coordinates of `v`.
pub(crate) fn note_coord(coords: &mut Vec<(VarId, IndexVar)>, x: &Expr, v: IndexVar) {
    if let Expr::Var(id) = x {
        if !coords.contains(&(*id, v)) {
            coords.push((*id, v));
        }
    }
}

pub(crate) fn ancestors(st: &State, o: &Operand) -> Vec<Expr> {
    o.level_vars[..st.pos[o.id].len()]
        .iter()
        .map(|v| st.bound.get(v).cloned().unwrap_or(Expr::Int(0)))
        .collect()
}

/// Runtime variables of an iterator inside one lattice's loops.
#[derive(Clone)]
pub(crate) struct Cursor {
    /// Position (position iteration) or coordinate counter (value iteration).
    pub at: Expr,
    pub end: Expr,
}

/// What an iterator yields at its cursor.
#[derive(Clone)]
pub(crate) struct Step {
    pub coord: Expr,
    /// The position of the operand's level there (0 for a dimension).
    pub pos: Expr,
    /// Whether the position holds a coordinate.
    pub found: Expr,
    /// The end of the run of equal coordinates starting at the cursor.
    pub run_end: Option<Expr>,
}

/// How a loop driven by one iterator alone is shaped.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `for (at = begin; at < end; at++)`.
    For,
    /// `while (valid) { ...; at = advance }`: the step decides the stride.
    While,
    /// No loop: exactly one position (a fused branchless level).
    Once,
}

/// Which capability the iterator traverses with.
#[derive(Clone, Copy)]
pub(crate) enum Kind<'f> {
    Position(&'f dyn CoordPositionIteration),
    Value(&'f dyn CoordValueIteration),
    Dimension,
    /// Over a scratch copy of a level (`Reorder`): the cursor indexes the
    /// copy, neither a position nor a coordinate.
    Scratch,
}

/// The properties the lowerer plans with: the level's (section 3.3), or
/// those of a whole dimension, plus whether it can be located instead.
#[derive(Clone, Copy)]
pub(crate) struct Props {
    pub level: Properties,
    pub locatable: bool,
}

/// What an iterator is over, fixed when it is made.
#[derive(Clone)]
pub(crate) struct Head {
    /// The iterator's key among a loop's iterators.
    pub id: IterId,
    pub props: Props,
    /// The operand's level iterated (not set for a dimension iterator).
    pub level: Option<(OperandId, usize)>,
    /// `A1:compressed(nonunique)`, `dimension(j)`.
    pub name: String,
}

/// One iterator over the variable of a loop, for one operand or for the
/// dimension itself.
pub(crate) trait LoopIterator<'p> {
    fn head(&self) -> &Head;
    fn kind(&self) -> Kind<'p>;
    fn id(&self) -> IterId {
        self.head().id
    }
    fn props(&self) -> Props {
        self.head().props
    }
    fn level(&self) -> Option<(OperandId, usize)> {
        self.head().level
    }
    /// The name the editor shows, adapters included:
    /// `dedup<A1:compressed(nonunique)>`, `dimension(j)`.
    fn name(&self) -> String {
        self.head().name.clone()
    }
    /// Whether it visits runs of equal coordinates as one (plans show it).
    fn dedups(&self) -> bool {
        false
    }
    fn shape(&self) -> Shape {
        Shape::For
    }
    /// The cursor's variable name, in taco's style (`pA2`, `jA`, `j`).
    fn cursor_name(&self, cx: &Cx) -> String;
    /// Emit the cursor's bounds `[begin, end)` under the parent positions.
    fn begin(&self, cx: &mut Cx) -> Cursor;
    /// The loop condition: the cursor has coordinates left.
    fn valid(&self, cur: &Cursor) -> Expr {
        Expr::lt(cur.at.clone(), cur.end.clone())
    }
    /// Emit the read of the coordinate under the cursor.
    fn coordinate(&self, cx: &mut Cx, cur: &Cursor) -> Step;
    /// `coordinate` for a cursor that may be past its end: the coordinate
    /// then reads as `exhausted` (matching nothing).
    fn coordinate_guarded(&self, cx: &mut Cx, cur: &Cursor, exhausted: i64) -> Step;
    /// The cursor's next value once `step` is done.
    fn advance(&self, cur: &Cursor, step: &Step) -> Expr {
        step.run_end
            .clone()
            .unwrap_or_else(|| Expr::add(cur.at.clone(), Expr::Int(1)))
    }
    /// Emit a locate of `coord` in the level instead of iterating it
    /// (position, found); `None` for an iterator over no level, an error
    /// for a level without the capability.
    fn locate(&self, cx: &mut Cx, coord: Expr) -> Option<Result<(Expr, Expr), LowerError>> {
        let _ = (cx, coord);
        None
    }
}

/// `coordinate_guarded` for iterators whose cursor is the coordinate: past
/// the end it reads as `exhausted`.
fn select_guarded<'p>(
    it: &dyn LoopIterator<'p>,
    cx: &mut Cx,
    cur: &Cursor,
    exhausted: i64,
) -> Step {
    let c = Expr::select(
        Expr::lt(cur.at.clone(), cur.end.clone()),
        cur.at.clone(),
        Expr::Int(exhausted),
    );
    let step = it.coordinate(cx, cur);
    let coord = cx.bind_coord(cx.var_name(), c);
    Step {
        coord,
        pos: step.pos,
        found: step.found,
        run_end: None,
    }
}

/// Names in taco's style: positions `pA2`, coordinates `jA`.
pub(crate) fn pos_name(o: &Operand, k: usize) -> String {
    format!("p{}{}", o.tensor, k + 1)
}

pub(crate) fn coord_name(p: &Problem, var: IndexVar, o: &Operand) -> String {
    match p.vars.hidden_level(var) {
        // Hidden variables' names already carry their tensor's name.
        Some((operand, _)) if operand == o.id => p.name(var).to_string(),
        _ => format!("{}{}", p.name(var), o.tensor),
    }
}
