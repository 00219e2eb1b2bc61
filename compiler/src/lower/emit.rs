//! Emitting the loops of one index variable through the iterator protocol
//! (`lower::iterate`): a single iterator's loop shaped as the iterator
//! says (`for`, a run-striding `while`, or no loop), or a merge loop per
//! lattice point co-iterating its iterators, with a case per dominated
//! point. Which iterators, adapters and locates were chosen is decided in
//! `loops.rs`; nothing here asks what kind of level it iterates.

use super::ahead::counts_entries;
use super::ids::IterId;
use super::iterate::{note_coord, Cursor, Cx, Kind, LoopIterator, Shape, Step};
use super::lattice::{LExpr, Lattice, Point};
use super::loops::{Its, Strategy};
use super::vars::IndexVar;
use super::{LowerError, Lowerer, State};
use crate::ir::{Expr, Stmt};
use std::collections::BTreeMap;

/// Positions resolved by one case: (iterator, position, run end, found).
/// An operand resolved at this level: its iterator, position, run end,
/// whether it is present, and whether its position comes from a range
/// under its parent (a position iterator: empty where the parent is absent,
/// so being there implies the presence above it).
type Resolved = (IterId, Expr, Option<Expr>, Expr, bool);

/// Whether `e` can be nonzero, given the found flags of its located
/// operands (the others are present by the case that computes `e`).
fn present(e: &LExpr, found: &BTreeMap<IterId, Expr>) -> Expr {
    e.presence(&|op| {
        found
            .get(&IterId::Operand(op))
            .cloned()
            .unwrap_or(Expr::Bool(true))
    })
}

/// Whether a linear case's guard (`present(e, found)`) holds in every
/// iteration, as in a union of all the co-iterated operands (`B + C`: the
/// merged coordinate is the least of theirs, so one of them is always at
/// it). That needs one co-iterated operand at the coordinate in every
/// iteration: the driver, or, without one, the least of their
/// coordinates, where every position holds one. The guard, made of `&&`
/// and `||` of the flags, is monotone: true with any one such operand
/// found and every other flag false, it is true in every iteration.
fn guard_always_holds(
    e: &LExpr,
    s: &Strategy,
    steps: &BTreeMap<IterId, Step>,
    found: &BTreeMap<IterId, Expr>,
) -> bool {
    let stored = |op: &IterId| steps.get(op).is_some_and(|st| st.found == Expr::Bool(true));
    let candidates: Vec<IterId> = match s.driver {
        Some(dr) => vec![dr],
        None => s.coiter.clone(),
    };
    !candidates.is_empty()
        && candidates.iter().all(stored)
        && candidates.iter().all(|one| {
            let only: BTreeMap<IterId, Expr> = found
                .keys()
                .map(|op| (*op, Expr::Bool(op == one)))
                .collect();
            present(e, &only) == Expr::Bool(true)
        })
}

impl<'p> Lowerer<'p> {
    /// Where iterators emit, for the loop over `v`.
    pub(super) fn cx<'a>(&'a mut self, st: &'a State, v: IndexVar) -> Cx<'a, 'p> {
        Cx {
            p: self.p,
            e: &mut self.e,
            st,
            var: v,
            coords: &mut self.coords,
        }
    }

    /// `Emitter::bind` for a coordinate of `v`: a new variable is noted
    /// as holding `v`'s coordinates (a trivial `e` is returned as it is).
    pub(super) fn bind_coord(&mut self, v: IndexVar, e: Expr) -> Expr {
        if e.is_trivial() {
            return e;
        }
        let x = self.e.let_var(self.p.name(v), e);
        note_coord(&mut self.coords, &x, v);
        x
    }

    /// Note an iterator's cursor as holding coordinates of `v` when it is
    /// one (value iteration, a whole dimension), not a position.
    fn note_cursor(&mut self, v: IndexVar, it: &dyn LoopIterator<'p>, cursor: &Expr) {
        if matches!(it.kind(), Kind::Value(_) | Kind::Dimension) {
            note_coord(&mut self.coords, cursor, v);
        }
    }

    pub(super) fn guard(&mut self, cond: Expr, body: Vec<Stmt>) {
        match cond {
            Expr::Bool(true) => {
                for s in body {
                    self.e.push(s);
                }
            }
            Expr::Bool(false) => {}
            cond => self.e.push(Stmt::If {
                cond,
                then: body,
                els: Vec::new(),
            }),
        }
    }

    /// One iterator, one point: a loop of the iterator's shape.
    pub(super) fn single_loop(
        &mut self,
        d: usize,
        v: IndexVar,
        st: &State,
        lattice: &Lattice,
        s: &Strategy,
        its: &Its<'p>,
    ) -> Result<(), LowerError> {
        let pt = &lattice.points[0];
        let it = &its[&s.coiter[0]];
        let bounds = it.begin(&mut self.cx(st, v));
        let name = it.cursor_name(&self.cx(st, v));
        let ahead = self
            .ahead_counter(st, v)
            .filter(|_| counts_entries(it.kind()))
            .map(|count| (count, Expr::sub(bounds.end.clone(), bounds.at.clone())));
        if ahead.is_some() {
            self.e.open();
        }
        match it.shape() {
            Shape::Once => {
                // Exactly one position: the cursor is bound, not looped.
                let at = self.e.bind(&name, bounds.at);
                self.note_cursor(v, it.as_ref(), &at);
                let cur = Cursor {
                    at: at.clone(),
                    end: Expr::add(at, Expr::Int(1)),
                };
                let step = it.coordinate(&mut self.cx(st, v), &cur);
                self.e.open();
                self.single_cases(d, v, st, lattice, pt, s, (it.id(), step.clone()), its)?;
                let body = self.e.close();
                self.guard(step.found, body);
            }
            Shape::While => {
                let at = self.e.let_var(&name, bounds.at);
                self.note_cursor(v, it.as_ref(), &at);
                // A deduplicated level's loop runs a run an iteration,
                // which shares can split (`parallel::OuterLoop::over_runs`).
                if let (0, true, Expr::Var(var)) = (d, it.dedups(), &at) {
                    self.record_outer(*var, v, it.as_ref());
                }
                let cur = Cursor {
                    at: at.clone(),
                    end: bounds.end,
                };
                self.e.open();
                let step = it.coordinate(&mut self.cx(st, v), &cur);
                let next = it.advance(&cur, &step);
                self.e.open();
                self.single_cases(d, v, st, lattice, pt, s, (it.id(), step.clone()), its)?;
                let body = self.e.close();
                self.guard(step.found, body);
                self.e.set(&at, next);
                let body = self.e.close();
                self.e.push(Stmt::While {
                    cond: it.valid(&cur),
                    body,
                });
            }
            Shape::For => {
                let var = self.e.fresh(&name, crate::ir::Ty::I64);
                self.note_cursor(v, it.as_ref(), &Expr::Var(var));
                let cur = Cursor {
                    at: Expr::Var(var),
                    end: bounds.end.clone(),
                };
                self.e.open();
                let step = it.coordinate(&mut self.cx(st, v), &cur);
                self.e.open();
                self.single_cases(d, v, st, lattice, pt, s, (it.id(), step.clone()), its)?;
                let body = self.e.close();
                self.guard(step.found, body);
                let body = self.e.close();
                if d == 0 {
                    self.record_outer(var, v, it.as_ref());
                }
                self.e.push(Stmt::For {
                    var,
                    lo: bounds.at,
                    hi: bounds.end,
                    body,
                });
            }
        }
        if let Some((count, bound)) = ahead {
            let loops = self.e.close();
            self.emit_with_room_ahead(loops, &count, bound);
        }
        Ok(())
    }

    /// Cases of a single-iterator loop: located operands decide which
    /// dominated point applies.
    #[allow(clippy::too_many_arguments)]
    fn single_cases(
        &mut self,
        d: usize,
        v: IndexVar,
        st: &State,
        lattice: &Lattice,
        pt: &Point,
        s: &Strategy,
        it: (IterId, Step),
        its: &Its<'p>,
    ) -> Result<(), LowerError> {
        let (id, step) = it;
        let coord = self.bind_coord(v, step.coord);
        let located = self.locate_all(s, v, &coord, st, its)?;
        let mut st = st.clone();
        if located.values().any(|(_, f)| *f != Expr::Bool(true)) {
            st.exact = false;
        }
        let st = &st;
        let mut steps = BTreeMap::new();
        steps.insert(
            id,
            Step {
                coord: coord.clone(),
                pos: step.pos,
                found: Expr::Bool(true),
                run_end: step.run_end,
            },
        );
        if lattice.linear {
            return self.linear_case(d, v, &coord, st, pt, s, &steps, &located, its);
        }
        // A full driver visits every coordinate, so every dominated case can
        // apply; otherwise only cases holding the iterated operand can.
        let cases: Vec<&Point> = lattice
            .cases(pt)
            .into_iter()
            .filter(|q| s.driver == Some(id) || q.iters.contains(&id))
            .collect();
        self.emit_cases(d, v, &coord, st, &cases, s, &steps, &located, its, 0)
    }

    /// A loop per lattice point, co-iterating its operands two-way-merge
    /// style, with a case per dominated point.
    pub(super) fn merge_loops(
        &mut self,
        d: usize,
        v: IndexVar,
        st: &State,
        lattice: &Lattice,
        strategies: &[Strategy],
        its: &Its<'p>,
    ) -> Result<(), LowerError> {
        let mut cursors: BTreeMap<IterId, Cursor> = BTreeMap::new();
        for s in strategies {
            for op in &s.coiter {
                if !cursors.contains_key(op) {
                    let it = &its[op];
                    let bounds = it.begin(&mut self.cx(st, v));
                    let name = it.cursor_name(&self.cx(st, v));
                    let at = self.e.let_var(&name, bounds.at);
                    self.note_cursor(v, it.as_ref(), &at);
                    cursors.insert(
                        *op,
                        Cursor {
                            at,
                            end: bounds.end,
                        },
                    );
                }
            }
        }
        // Every iteration of the loops below advances some cursor.
        let spans: Option<Vec<Expr>> = cursors
            .iter()
            .map(|(op, c)| {
                counts_entries(its[op].kind()).then(|| Expr::sub(c.end.clone(), c.at.clone()))
            })
            .collect();
        let ahead = self
            .ahead_counter(st, v)
            .zip(spans.and_then(|s| s.into_iter().reduce(Expr::add)));
        if ahead.is_some() {
            self.e.open();
        }
        for (pt, s) in lattice.points.iter().zip(strategies) {
            // With a full driver the loop runs over every coordinate (so the
            // lattice points dropped for lacking it are covered); the other
            // iterators are read only while in bounds.
            let bounded: Vec<IterId> = match s.driver {
                Some(dr) => vec![dr],
                None => s.coiter.clone(),
            };
            let valid = |op: &IterId| its[op].valid(&cursors[op]);
            // A linear union without a driver runs while any iterator has
            // coordinates left; exhausted ones read past every coordinate.
            let any = lattice.linear && s.driver.is_none();
            let cond = if any {
                bounded
                    .iter()
                    .fold(Expr::Bool(false), |acc, op| Expr::or(acc, valid(op)))
            } else {
                bounded
                    .iter()
                    .fold(Expr::Bool(true), |acc, op| Expr::and(acc, valid(op)))
            };
            let exhausted = if any { i64::MAX } else { -1 };
            self.e.open();
            let mut steps: BTreeMap<IterId, Step> = BTreeMap::new();
            for op in &s.coiter {
                let guarded = any || !bounded.contains(op);
                let (it, cur) = (&its[op], &cursors[op]);
                let step = if guarded {
                    it.coordinate_guarded(&mut self.cx(st, v), cur, exhausted)
                } else {
                    it.coordinate(&mut self.cx(st, v), cur)
                };
                steps.insert(*op, step);
            }
            // The merged coordinate: the driver's, or the smallest.
            let coord = match s.driver {
                Some(dr) => steps[&dr].coord.clone(),
                None => s
                    .coiter
                    .iter()
                    .map(|op| steps[op].coord.clone())
                    .reduce(Expr::min)
                    .unwrap_or(Expr::Int(0)),
            };
            let coord = self.bind_coord(v, coord);
            let located = self.locate_all(s, v, &coord, st, its)?;
            if lattice.linear {
                self.linear_case(d, v, &coord, st, pt, s, &steps, &located, its)?;
            } else {
                let cases = lattice.cases(pt);
                self.emit_cases(d, v, &coord, st, &cases, s, &steps, &located, its, 0)?;
            }
            // Advance every iterator that produced this coordinate; the
            // driver last, since the coordinate may be its cursor.
            let mut order: Vec<IterId> = s
                .coiter
                .iter()
                .copied()
                .filter(|op| Some(*op) != s.driver)
                .collect();
            order.extend(s.driver);
            for op in &order {
                let cur = &cursors[op];
                let step = &steps[op];
                let next = its[op].advance(cur, step);
                let always = Some(*op) == s.driver || s.coiter.len() == 1;
                let advance = if always {
                    next
                } else {
                    Expr::select(
                        Expr::eq(step.coord.clone(), coord.clone()),
                        next,
                        cur.at.clone(),
                    )
                };
                self.e.set(&cur.at, advance);
            }
            let body = self.e.close();
            self.e.push(Stmt::While { cond, body });
        }
        if let Some((count, bound)) = ahead {
            let loops = self.e.close();
            self.emit_with_room_ahead(loops, &count, bound);
        }
        Ok(())
    }

    /// The body of a linear lattice's loop: one case for the whole
    /// expression, every operand present where its coordinate is the merged
    /// one (or where it was located), absent operands reading as zero and
    /// contributing no children.
    #[allow(clippy::too_many_arguments)]
    fn linear_case(
        &mut self,
        d: usize,
        v: IndexVar,
        coord: &Expr,
        st: &State,
        pt: &Point,
        s: &Strategy,
        steps: &BTreeMap<IterId, Step>,
        located: &BTreeMap<IterId, (Expr, Expr)>,
        its: &Its<'p>,
    ) -> Result<(), LowerError> {
        let mut found_of: BTreeMap<IterId, Expr> = BTreeMap::new();
        let mut resolved: Vec<Resolved> = Vec::new();
        for op in &s.coiter {
            let step = &steps[op];
            let mut f = step.found.clone();
            if Some(*op) != s.driver && s.coiter.len() > 1 {
                f = Expr::and(Expr::eq(step.coord.clone(), coord.clone()), f);
            }
            let f = if f.is_trivial() {
                f
            } else {
                self.e.let_var("present", f)
            };
            found_of.insert(*op, f.clone());
            resolved.push((
                *op,
                step.pos.clone(),
                step.run_end.clone(),
                f,
                ranged(its, op),
            ));
        }
        for (op, (pos, found)) in located {
            found_of.insert(*op, found.clone());
            resolved.push((*op, pos.clone(), None, found.clone(), false));
        }
        let cond = match guard_always_holds(&pt.expr, s, steps, &found_of) {
            true => Expr::Bool(true),
            false => present(&pt.expr, &found_of),
        };
        // The merged coordinate is one of the co-iterated operands'.
        let stored = !s.coiter.is_empty() && s.coiter.iter().all(|op| self.stores(its, op));
        self.e.open();
        self.case(d, v, coord.clone(), st, pt, &resolved, its, stored)?;
        let body = self.e.close();
        self.guard(cond, body);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_cases(
        &mut self,
        d: usize,
        v: IndexVar,
        coord: &Expr,
        st: &State,
        cases: &[&Point],
        s: &Strategy,
        steps: &BTreeMap<IterId, Step>,
        located: &BTreeMap<IterId, (Expr, Expr)>,
        its: &Its<'p>,
        n: usize,
    ) -> Result<(), LowerError> {
        let Some(q) = cases.get(n) else { return Ok(()) };
        let mut cond = Expr::Bool(true);
        let mut resolved: Vec<Resolved> = Vec::new();
        // Every operand co-iterated in this case is at the coordinate.
        let stored = q
            .iters
            .iter()
            .any(|op| s.coiter.contains(op) && self.stores(its, op));
        for op in q.iters.iter().filter(|op| s.coiter.contains(op)) {
            let step = &steps[op];
            if Some(*op) != s.driver && s.coiter.len() > 1 {
                cond = Expr::and(cond, Expr::eq(step.coord.clone(), coord.clone()));
            }
            cond = Expr::and(cond, step.found.clone());
            resolved.push((
                *op,
                step.pos.clone(),
                step.run_end.clone(),
                Expr::Bool(true),
                ranged(its, op),
            ));
        }
        for op in q.iters.iter() {
            if let Some((pos, found)) = located.get(op) {
                cond = Expr::and(cond, found.clone());
                resolved.push((*op, pos.clone(), None, Expr::Bool(true), false));
            }
        }
        // Factors located outside the lattice: the case applies where its
        // expression can be nonzero, and each value reads as 0 where its
        // operand was not found.
        let mut found_of: BTreeMap<IterId, Expr> = BTreeMap::new();
        for op in q.expr.operands().into_iter().map(IterId::Operand) {
            if let (false, Some((pos, found))) = (q.iters.contains(&op), located.get(&op)) {
                found_of.insert(op, found.clone());
                resolved.push((op, pos.clone(), None, found.clone(), false));
            }
        }
        cond = Expr::and(cond, present(&q.expr, &found_of));
        self.e.open();
        self.case(d, v, coord.clone(), st, q, &resolved, its, stored)?;
        let then = self.e.close();
        self.e.open();
        self.emit_cases(d, v, coord, st, cases, s, steps, located, its, n + 1)?;
        let els = self.e.close();
        match cond {
            Expr::Bool(true) => {
                for s in then {
                    self.e.push(s);
                }
            }
            cond => self.e.push(Stmt::If { cond, then, els }),
        }
        Ok(())
    }

    /// Whether the iterator `op` yields coordinates its operand stores
    /// (`LevelFormat::stores_coordinates`); a dimension's does not.
    fn stores(&self, its: &Its<'p>, op: &IterId) -> bool {
        its.get(op)
            .and_then(|it| it.level())
            .is_some_and(|(o, k)| self.p.operands[o].format.levels[k].stores_coordinates())
    }

    /// The body of one case: bind the coordinate and the positions of the
    /// operands present, then assemble the result and recurse. `stored`:
    /// the coordinate is one an operand stores (`State::stored`).
    #[allow(clippy::too_many_arguments)]
    fn case(
        &mut self,
        d: usize,
        v: IndexVar,
        coord: Expr,
        st: &State,
        q: &Point,
        resolved: &[Resolved],
        its: &Its<'p>,
        stored: bool,
    ) -> Result<(), LowerError> {
        let mut st = st.clone();
        st.bound.insert(v, coord.clone());
        if stored {
            st.stored.insert(v);
        }
        for (op, pos, run_end, found, ranged) in resolved {
            // Iterators over a level resolve it; a dimension resolves none.
            let Some((o, _)) = its.get(op).and_then(|it| it.level()) else {
                continue;
            };
            st.pos[o].push(pos.clone());
            st.run_end[o] = run_end.clone();
            // A position in a range under the parent implies the parent was
            // present: reads below need not test it again (the guards a
            // linear union's outer level would leave in every inner case).
            st.found[o] = if *ranged {
                found.clone()
            } else {
                Expr::and(st.found[o].clone(), found.clone())
            };
        }
        self.after_bind(d + 1, st, q.expr.clone())
    }

    /// Locate, at the merged coordinate, every operand the strategy locates.
    fn locate_all(
        &mut self,
        s: &Strategy,
        v: IndexVar,
        coord: &Expr,
        st: &State,
        its: &Its<'p>,
    ) -> Result<BTreeMap<IterId, (Expr, Expr)>, LowerError> {
        let mut out = BTreeMap::new();
        for op in &s.located {
            let Some(it) = its.get(op) else { continue };
            if let Some(found) = it.locate(&mut self.cx(st, v), coord.clone()) {
                out.insert(*op, found?);
            }
        }
        Ok(out)
    }
}

/// Whether `op` is co-iterated by position, through a range under its
/// parent (`iterate::level`'s `raw_bounds`, empty where the parent is
/// absent), or over a sorted copy of such a range.
fn ranged(its: &Its<'_>, op: &IterId) -> bool {
    its.get(op).is_some_and(|it| {
        matches!(
            it.kind(),
            super::iterate::Kind::Position(_) | super::iterate::Kind::Scratch
        )
    })
}
