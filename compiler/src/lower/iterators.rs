//! Level iterators: the traversal state over one level of one operand, and
//! the adapters the code generator puts around them. Levels are stateless;
//! everything a loop carries (cursor, end, coordinate, dedup run) lives here.
//! Each iterator has a readable name, shown to the user by the editor.

use super::ids::{IterId, OperandId};
use super::operands::{Operand, Problem};
use crate::format::level::{CoordPositionIteration, CoordValueIteration, Iteration, LevelCtx};
use crate::ir::{Emitter, Expr};

#[derive(Clone, Copy)]
pub enum Kind<'f> {
    /// Coordinate position iteration over a level.
    Position(&'f dyn CoordPositionIteration),
    /// Coordinate value iteration over a level.
    Value(&'f dyn CoordValueIteration),
    /// Every coordinate of the variable's dimension: operands accessed by
    /// locate later, constants, or result-only variables.
    Dimension,
}

/// An iterator over the variable of one loop, for one operand (or the
/// dimension itself).
#[derive(Clone)]
pub struct LevelIter<'f> {
    pub op: IterId,
    pub level: Option<usize>,
    pub kind: Kind<'f>,
    pub full: bool,
    pub ordered: bool,
    pub unique: bool,
    pub branchless: bool,
    pub compact: bool,
    pub locatable: bool,
    /// Deduplicate runs of equal coordinates (non-unique, ordered levels).
    pub dedup: bool,
    pub name: String,
}

impl<'f> LevelIter<'f> {
    /// The iterator over operand `o`'s level `k`.
    pub fn level(o: &'f Operand, k: usize) -> Self {
        let l = &o.format.levels[k];
        let props = l.properties();
        let kind = match l.iteration() {
            Iteration::CoordPosition(it) => Kind::Position(it),
            Iteration::CoordValue(it) => Kind::Value(it),
        };
        LevelIter {
            op: IterId::Operand(o.id),
            level: Some(k),
            kind,
            full: props.full,
            ordered: props.ordered,
            unique: props.unique,
            branchless: props.branchless,
            compact: props.compact,
            locatable: l.locate().is_some(),
            dedup: false,
            name: format!("{}{}:{}", o.tensor, k + 1, l.spec()),
        }
    }

    /// An iterator over the whole dimension of `var`, standing for operand
    /// `op` (or for none: `IterId::Dimension`).
    pub fn dimension(op: IterId, var: &str, p: &Problem) -> Self {
        let who = op.operand().map_or(String::new(), |o| format!(" for {}", p.operands[o].tensor));
        LevelIter {
            op,
            level: None,
            kind: Kind::Dimension,
            full: true,
            ordered: true,
            unique: true,
            branchless: false,
            compact: true,
            locatable: true,
            dedup: false,
            name: format!("dimension({var}){who}"),
        }
    }

    /// The operand whose level this iterates; only asked of level
    /// iterators (`level` is set), which always belong to one.
    pub fn owner(&self) -> OperandId {
        self.op.operand().unwrap_or(OperandId::OUTPUT)
    }

    pub fn is_position(&self) -> bool {
        matches!(self.kind, Kind::Position(_))
    }

    /// The name the editor shows, with adapters: `dedup<A1:compressed(nonunique)>`.
    pub fn display(&self) -> String {
        if self.dedup {
            format!("dedup<{}>", self.name)
        } else {
            self.name.clone()
        }
    }
}

/// Runtime variables of an iterator inside one lattice's loops.
#[derive(Clone)]
pub struct Cursor {
    /// Position (position iteration) or coordinate counter (value iteration).
    pub at: Expr,
    pub end: Expr,
}

/// Names in taco's style: positions `pA2`, coordinates `jA`.
pub fn pos_name(o: &Operand, k: usize) -> String {
    format!("p{}{}", o.tensor, k + 1)
}

pub fn coord_name(p: &Problem, var: &str, o: &Operand) -> String {
    match p.hidden_var(var) {
        // Hidden variables already carry their tensor's name.
        Some(h) if h.operand == o.id => var.to_string(),
        _ => format!("{var}{}", o.tensor),
    }
}

/// Position bounds of a level under a parent position, or under a
/// deduplicated run of parent positions `[lo, hi)` by chaining the children
/// of the run's first and last positions (section 5.3: no scratch array).
pub fn child_bounds(it: &dyn CoordPositionIteration, c: &LevelCtx, e: &mut Emitter, parent: Expr, run_end: Option<Expr>) -> (Expr, Expr) {
    match run_end {
        None => it.pos_bounds(c, e, parent),
        Some(end) => {
            let (lo, _) = it.pos_bounds(c, e, parent);
            let (_, hi) = it.pos_bounds(c, e, Expr::sub(end, Expr::Int(1)));
            (lo, hi)
        }
    }
}
