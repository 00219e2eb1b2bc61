//! Level iterators: coordinate-position iteration (`pos_bounds`,
//! `pos_access`) and coordinate-value iteration (`coord_bounds`,
//! `coord_access`) over one level of one operand, through the level's
//! capability functions.

use super::{coord_name, pos_name, Cursor, Cx, Head, Kind, LoopIterator, Props, Step};
use crate::format::level::{CoordPositionIteration, CoordValueIteration, Iteration, LevelCtx};
use crate::ir::{Emitter, Expr, Stmt};
use crate::lower::ids::{IterId, OperandId};
use crate::lower::operands::{Operand, Problem};
use crate::lower::{LowerError, State};

/// What every level iterator knows of its level.
#[derive(Clone)]
struct Level {
    op: OperandId,
    k: usize,
    head: Head,
}

impl Level {
    fn new(o: &Operand, k: usize) -> Level {
        let l = &o.format.levels[k];
        let props = Props {
            level: l.properties(),
            locatable: l.locate().is_some(),
        };
        let head = Head {
            id: IterId::Operand(o.id),
            props,
            level: Some((o.id, k)),
            name: format!("{}{}:{}", o.tensor, k + 1, l.spec()),
        };
        Level { op: o.id, k, head }
    }
    fn operand<'p>(&self, cx: &Cx<'_, 'p>) -> &'p Operand {
        &cx.p.operands[self.op]
    }
    fn ctx<'o>(&self, o: &'o Operand) -> LevelCtx<'o> {
        LevelCtx::new(&o.tensor, self.k)
    }
}

/// The iterator over operand `o`'s level `k`, by the capability it offers.
pub(crate) fn level_iterator<'p>(o: &'p Operand, k: usize) -> Box<dyn LoopIterator<'p> + 'p> {
    let level = Level::new(o, k);
    match o.format.levels[k].iteration() {
        Iteration::CoordPosition(f) => Box::new(PositionIter { level, f }),
        Iteration::CoordValue(f) => Box::new(ValueIter { level, f }),
    }
}

/// Coordinate position iteration: the cursor is a position.
#[derive(Clone)]
pub(crate) struct PositionIter<'p> {
    level: Level,
    f: &'p dyn CoordPositionIteration,
}

impl<'p> PositionIter<'p> {
    /// The position iterator over operand `o`'s level `k`, if the level
    /// iterates by position.
    pub fn new(o: &'p Operand, k: usize) -> Option<Self> {
        match o.format.levels[k].iteration() {
            Iteration::CoordPosition(f) => Some(PositionIter {
                level: Level::new(o, k),
                f,
            }),
            Iteration::CoordValue(_) => None,
        }
    }

    /// The coordinate stored at `pos` (and whether it holds one).
    pub fn access(&self, cx: &mut Cx, pos: Expr, anc: &[Expr]) -> (Expr, Expr) {
        let o = self.level.operand(cx);
        self.f.pos_access(&self.level.ctx(o), cx.e, pos, anc)
    }

    /// `pA2`, the base of the cursor's names.
    pub fn pos_name(&self, cx: &Cx) -> String {
        pos_name(self.level.operand(cx), self.level.k)
    }

    /// Position bounds under the parent as expressions (nothing bound):
    /// under a deduplicated run of parent positions, those of the run.
    pub fn raw_bounds(&self, cx: &mut Cx) -> (Expr, Expr) {
        let o = self.level.operand(cx);
        let c = self.level.ctx(o);
        let parent = cx.parent(o.id);
        let found = cx.st.found[o.id].clone();
        let run_end = cx.st.run_end[o.id].clone();
        if found == Expr::Bool(true) {
            return child_bounds(self.f, &c, cx.e, parent, run_end);
        }
        // An operand absent at its parent (a linear union's missing
        // term, a locate that failed) has no children; its parent
        // position is not one to read through.
        let name = pos_name(o, self.level.k);
        cx.e.open();
        let (l, h) = child_bounds(self.f, &c, cx.e, parent, run_end);
        let work = cx.e.close();
        if work.is_empty() && !l.reads_memory() && !h.reads_memory() {
            // Bounds that read nothing (a singleton child's run) are
            // selected rather than branched on: one branch and its join
            // fewer per operand and level, where the merges of a COO add
            // spend most of their compile time allocating registers.
            let lo = cx.e.let_var(
                &format!("{name}_lo"),
                Expr::select(found.clone(), l, Expr::Int(0)),
            );
            let hi =
                cx.e.let_var(&format!("{name}_hi"), Expr::select(found, h, Expr::Int(0)));
            return (lo, hi);
        }
        let lo = cx.e.let_var(&format!("{name}_lo"), Expr::Int(0));
        let hi = cx.e.let_var(&format!("{name}_hi"), Expr::Int(0));
        cx.e.open();
        for s in work {
            cx.e.push(s);
        }
        cx.e.set(&lo, l);
        cx.e.set(&hi, h);
        let then = cx.e.close();
        cx.e.push(Stmt::If {
            cond: found,
            then,
            els: Vec::new(),
        });
        (lo, hi)
    }

    /// The guarded read of the coordinate under the cursor: declared as
    /// `exhausted`, read while the cursor is in bounds. `before` runs ahead
    /// of the guard and `inside` after the read, within it (a dedup scan).
    /// Also returns whether the position holds a coordinate (an ELL row's
    /// padding does not), false past the end.
    pub fn read_guarded<R>(
        &self,
        cx: &mut Cx,
        cur: &Cursor,
        exhausted: i64,
        before: impl FnOnce(&mut Cx) -> R,
        inside: impl FnOnce(&mut Cx, &Expr, &R),
    ) -> (Expr, Expr, R) {
        let o = self.level.operand(cx);
        let anc = cx.ancestors(o);
        let coord = cx.let_coord(&coord_name(cx.p, cx.var, o), Expr::Int(exhausted));
        let held = cx.e.fresh("held", crate::ir::Ty::Bool);
        let r = before(cx);
        cx.e.open();
        let (x, found) = self.access(cx, cur.at.clone(), &anc);
        cx.e.set(&coord, x);
        let always = found == Expr::Bool(true);
        cx.e.set(&Expr::Var(held), found);
        inside(cx, &coord, &r);
        let mut then = cx.e.close();
        if always {
            then.retain(|s| !matches!(s, Stmt::Set(v, _) if *v == held));
        } else {
            cx.e.push(Stmt::Let(held, Expr::Bool(false)));
        }
        cx.e.push(Stmt::If {
            cond: Expr::lt(cur.at.clone(), cur.end.clone()),
            then,
            els: Vec::new(),
        });
        // Where every position holds one, an exhausted cursor's coordinate
        // matches nothing: no flag to keep.
        let held = if always {
            Expr::Bool(true)
        } else {
            Expr::Var(held)
        };
        (coord, held, r)
    }
}

impl<'p> LoopIterator<'p> for PositionIter<'p> {
    fn head(&self) -> &Head {
        &self.level.head
    }
    fn kind(&self) -> Kind<'p> {
        Kind::Position(self.f)
    }
    fn cursor_name(&self, cx: &Cx) -> String {
        self.pos_name(cx)
    }
    fn begin(&self, cx: &mut Cx) -> Cursor {
        let (lo, hi) = self.raw_bounds(cx);
        let name = self.pos_name(cx);
        let lo = cx.e.bind(&format!("{name}_begin"), lo);
        let hi = cx.e.bind(&format!("{name}_end"), hi);
        Cursor { at: lo, end: hi }
    }
    fn coordinate(&self, cx: &mut Cx, cur: &Cursor) -> Step {
        let o = self.level.operand(cx);
        let anc = cx.ancestors(o);
        let (coord, found) = self.access(cx, cur.at.clone(), &anc);
        let coord = cx.bind_coord(&coord_name(cx.p, cx.var, o), coord);
        Step {
            coord,
            pos: cur.at.clone(),
            found,
            run_end: None,
        }
    }
    fn coordinate_guarded(&self, cx: &mut Cx, cur: &Cursor, exhausted: i64) -> Step {
        let (coord, found, ()) = self.read_guarded(cx, cur, exhausted, |_| (), |_, _, _| ());
        Step {
            coord,
            pos: cur.at.clone(),
            found,
            run_end: None,
        }
    }
    fn locate(&self, cx: &mut Cx, coord: Expr) -> Option<Result<(Expr, Expr), LowerError>> {
        Some(locate(cx.p, cx.e, cx.st, self.level.op, coord))
    }
}

/// Coordinate value iteration: the cursor is a coordinate.
#[derive(Clone)]
pub(crate) struct ValueIter<'p> {
    level: Level,
    f: &'p dyn CoordValueIteration,
}

impl<'p> LoopIterator<'p> for ValueIter<'p> {
    fn head(&self) -> &Head {
        &self.level.head
    }
    fn kind(&self) -> Kind<'p> {
        Kind::Value(self.f)
    }
    fn cursor_name(&self, cx: &Cx) -> String {
        coord_name(cx.p, cx.var, self.level.operand(cx))
    }
    fn begin(&self, cx: &mut Cx) -> Cursor {
        let o = self.level.operand(cx);
        let anc = cx.ancestors(o);
        let (lo, hi) = self.f.coord_bounds(&self.level.ctx(o), cx.e, &anc);
        Cursor { at: lo, end: hi }
    }
    fn coordinate(&self, cx: &mut Cx, cur: &Cursor) -> Step {
        let o = self.level.operand(cx);
        let mut coords = cx.ancestors(o);
        coords.push(cur.at.clone());
        let parent = cx.parent(o.id);
        let (pos, found) = self
            .f
            .coord_access(&self.level.ctx(o), cx.e, parent, &coords);
        let pos = cx.e.bind(&pos_name(o, self.level.k), pos);
        Step {
            coord: cur.at.clone(),
            pos,
            found,
            run_end: None,
        }
    }
    fn coordinate_guarded(&self, cx: &mut Cx, cur: &Cursor, exhausted: i64) -> Step {
        super::select_guarded(self, cx, cur, exhausted)
    }
    fn locate(&self, cx: &mut Cx, coord: Expr) -> Option<Result<(Expr, Expr), LowerError>> {
        Some(locate(cx.p, cx.e, cx.st, self.level.op, coord))
    }
}

/// Position bounds of a level under a parent position, or under a
/// deduplicated run of parent positions `[lo, hi)` by chaining the children
/// of the run's first and last positions (section 5.3: no scratch array).
fn child_bounds(
    it: &dyn CoordPositionIteration,
    c: &LevelCtx,
    e: &mut Emitter,
    parent: Expr,
    run_end: Option<Expr>,
) -> (Expr, Expr) {
    match run_end {
        None => it.pos_bounds(c, e, parent),
        Some(end) => {
            let (lo, _) = it.pos_bounds(c, e, parent);
            let (_, hi) = it.pos_bounds(c, e, Expr::sub(end, Expr::Int(1)));
            (lo, hi)
        }
    }
}

/// Locate `op`'s next level at coordinate `coord`: (position, found).
pub(crate) fn locate(
    p: &Problem,
    e: &mut Emitter,
    st: &State,
    op: OperandId,
    coord: Expr,
) -> Result<(Expr, Expr), LowerError> {
    let o = &p.operands[op];
    let k = st.pos[op].len();
    let level = &o.format.levels[k];
    let Some(loc) = level.locate() else {
        return Err(LowerError::Capability {
            reason: format!(
                "{} must be accessed at a given coordinate of `{}` but {} has no locate capability",
                o.access,
                p.name(o.level_vars[k]),
                o.level_name(k)
            ),
            span: o.access.span,
        });
    };
    let c = LevelCtx::new(&o.tensor, k);
    let mut coords = super::ancestors(st, o);
    coords.push(coord);
    let parent = st.pos[op].last().cloned().unwrap_or(Expr::Int(0));
    let present = st.found[op].clone();
    if present == Expr::Bool(true) {
        let (pos, found) = loc.locate(&c, e, parent, &coords);
        let pos = e.bind(&pos_name(o, k), pos);
        return Ok((pos, found));
    }
    // Under an absent parent there is nothing to locate (and the
    // parent position is not one to read through).
    let pos = e.let_var(&pos_name(o, k), Expr::Int(0));
    let found_var = e.let_var(&format!("{}_found", pos_name(o, k)), Expr::Bool(false));
    e.open();
    let (p_at, f_at) = loc.locate(&c, e, parent, &coords);
    e.set(&pos, p_at);
    e.set(&found_var, f_at);
    let then = e.close();
    e.push(Stmt::If {
        cond: present,
        then,
        els: Vec::new(),
    });
    Ok((pos, found_var))
}
