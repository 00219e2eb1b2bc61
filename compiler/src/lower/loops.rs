//! The code generation recursion (section 5.5 of the paper): one index
//! variable per level of recursion, in iteration-graph order. For each
//! variable it builds the merge lattice, chooses per lattice point which
//! levels to co-iterate and which to locate (the Coiter rule of section 5.4
//! plus the full-level optimisation of 5.2), applies iterator conversions
//! (deduplication, fusion), and emits a loop per point with a case per
//! dominated point.

use super::ids::{IterId, OperandId};
use super::iterators::{child_bounds, coord_name, pos_name, Cursor, Kind, LevelIter};
use super::lattice::{LExpr, Lattice, Point};
use super::plan::{LoopPlan, VarPlan};
use super::{LowerError, Lowerer, Sink, State};
use crate::format::level::LevelCtx;
use crate::ir::{Expr, Stmt};
use crate::notation::BinOp;
use std::collections::{BTreeMap, BTreeSet};

/// The Coiter rule: operands that must be co-iterated to enumerate the
/// nonzeros of `e` (restricted to the point's operands).
/// `ordered(i)` tells whether operand `i` enumerates coordinates in order;
/// when both factors of a product could be located, the ordered one is
/// iterated (an appended result needs order).
fn coiter(e: &LExpr, point: &BTreeSet<OperandId>, locatable: &dyn Fn(OperandId) -> bool, ordered: &dyn Fn(OperandId) -> bool) -> BTreeSet<OperandId> {
    match e {
        LExpr::Access(i) if point.contains(i) => [*i].into(),
        LExpr::Access(_) | LExpr::Const(_) => BTreeSet::new(),
        LExpr::Neg(x) => coiter(x, point, locatable, ordered),
        LExpr::Bin(BinOp::Mul, a, b) => {
            let (ca, cb) = (coiter(a, point, locatable, ordered), coiter(b, point, locatable, ordered));
            if ca.is_empty() {
                return cb;
            }
            if cb.is_empty() {
                return ca;
            }
            let all_loc = |s: &BTreeSet<OperandId>| s.iter().all(|&i| locatable(i));
            let all_ord = |s: &BTreeSet<OperandId>| s.iter().all(|&i| ordered(i));
            match (all_loc(&ca), all_loc(&cb)) {
                (true, true) if !all_ord(&ca) && all_ord(&cb) => cb,
                (_, true) => ca,
                (true, false) => cb,
                (false, false) => ca.union(&cb.iter().copied().filter(|&i| !locatable(i)).collect()).copied().collect(),
            }
        }
        LExpr::Bin(_, a, b) => coiter(a, point, locatable, ordered).union(&coiter(b, point, locatable, ordered)).copied().collect(),
    }
}

/// Whether `e` can be nonzero, given the found flags of its located
/// operands (the others are present by the case that computes `e`).
fn present(e: &LExpr, found: &BTreeMap<IterId, Expr>) -> Expr {
    match e {
        LExpr::Access(i) => found.get(&IterId::Operand(*i)).cloned().unwrap_or(Expr::Bool(true)),
        LExpr::Const(_) => Expr::Bool(true),
        LExpr::Neg(x) => present(x, found),
        LExpr::Bin(BinOp::Mul, a, b) => Expr::and(present(a, found), present(b, found)),
        LExpr::Bin(_, a, b) => Expr::or(present(a, found), present(b, found)),
    }
}

/// How one lattice point is merged.
#[derive(Clone, Debug)]
struct Strategy {
    coiter: Vec<IterId>,
    located: Vec<IterId>,
    /// A full iterator whose coordinate is every coordinate in order.
    driver: Option<IterId>,
}

impl<'p> Lowerer<'p> {
    pub(super) fn lower(&mut self, d: usize, st: State, expr: LExpr) -> Result<(), LowerError> {
        if d == self.order.len() {
            self.leaf(&st, &expr);
            return Ok(());
        }
        let v = self.order[d].clone();
        let p = self.p;
        let ops = expr.operands();
        let mut its: Vec<LevelIter<'p>> = Vec::new();
        for &op in &ops {
            let o = &p.operands[op];
            let k = st.pos[op].len();
            if k < o.level_vars.len() && o.level_vars[k] == v {
                its.push(LevelIter::level(o, k));
            } else if o.level_vars[k.min(o.level_vars.len())..].contains(&v) {
                if !o.fully_locatable() {
                    return Err(LowerError::Internal(format!("{} reaches {v} out of order", o.describe())));
                }
                its.push(LevelIter::dimension(IterId::Operand(op), &v, p));
            }
        }
        let out_needs = self.output_needs(&st, &v);
        if its.is_empty() && !out_needs && p.is_hidden(&v) {
            // The hidden variable of an operand absent from this case.
            return self.lower(d + 1, st, expr);
        }
        // The Coiter rule over the whole expression (section 5.4): a
        // locatable factor of a product is located at the coordinates its
        // co-factors enumerate. Only the rest enter the merge lattice, so
        // the lattice's full-level simplification can never drop a point
        // whose coordinates a located operand was meant to cover.
        let ids: BTreeSet<OperandId> = its.iter().filter_map(|i| i.op.operand()).collect();
        let locatable = |i: OperandId| its.iter().any(|it| it.op == IterId::Operand(i) && it.locatable);
        let ordered = |i: OperandId| its.iter().any(|it| it.op == IterId::Operand(i) && it.ordered);
        let merged = coiter(&expr, &ids, &locatable, &ordered);
        let located_everywhere: Vec<IterId> = ids.difference(&merged).map(|&o| IterId::Operand(o)).collect();
        let full: BTreeSet<OperandId> = its.iter().filter_map(|i| i.op.operand().filter(|o| i.full && merged.contains(o))).collect();
        let levels_left = u32::try_from(self.order.len() - d).unwrap_or(u32::MAX);
        let mut lattice = Lattice::new(&expr, &merged, &full, levels_left);
        if its.is_empty() || lattice.points.iter().any(|pt| pt.iters.contains(&IterId::Dimension)) {
            if lattice.points.is_empty() || !lattice.points[0].iters.contains(&IterId::Dimension) {
                lattice.add_dimension();
            }
            its.push(LevelIter::dimension(IterId::Dimension, &v, p));
        }
        let by_op: BTreeMap<IterId, LevelIter<'p>> = its.into_iter().map(|i| (i.op, i)).collect();
        let mut st = st;
        let strategies: Vec<Strategy> = lattice.points.iter().map(|pt| self.strategy(pt, &by_op, &located_everywhere)).collect();
        let by_op = self.convert(&v, &lattice, &strategies, by_op, &st)?;
        self.record_plan(&v, &lattice, &strategies, &by_op);
        let single = lattice.points.len() == 1 && strategies[0].coiter.len() == 1;
        if st.exact && st.pos[0].len() < p.output().level_vars.len() {
            let next_out = &p.output().level_vars[st.pos[0].len()];
            let plain = single && by_op.get(&strategies[0].coiter[0]).is_some_and(|it| it.full && !it.dedup && !it.is_position());
            if *next_out != v || !plain {
                st.exact = false;
            }
        }
        if single {
            self.single_loop(d, &v, &st, &lattice, &strategies[0], &by_op)
        } else {
            self.merge_loops(d, &v, &st, &lattice, &strategies, &by_op)
        }
    }

    /// Whether the result still needs a loop over `v` (a result variable not
    /// yet bound).
    fn output_needs(&self, st: &State, v: &str) -> bool {
        let o = self.p.output();
        o.level_vars[st.pos[0].len().min(o.level_vars.len())..].iter().any(|x| x == v) && !st.bound.contains_key(v)
    }

    /// The point's operands are merged (the Coiter rule already left the
    /// factors to locate out of the lattice: `located_everywhere`), except
    /// that a full driver lets the other locatable operands be located.
    /// Later points' loops resume the iterators of earlier ones, so an
    /// operand of the lattice may only be located when a full driver
    /// enumerates every coordinate (otherwise a later loop would visit it
    /// again).
    fn strategy(&self, pt: &Point, its: &BTreeMap<IterId, LevelIter<'p>>, located_everywhere: &[IterId]) -> Strategy {
        let locatable = |i: IterId| its.get(&i).is_some_and(|it| it.locatable);
        let mut co = pt.iters.clone();
        for (op, it) in its {
            // Out-of-order operands stand in for their dimension only in
            // unions, where they keep every coordinate alive.
            if matches!(it.kind, Kind::Dimension) && *op != IterId::Dimension && pt.iters.contains(op) && !co.contains(op) && !locatable(*op) {
                co.insert(*op);
            }
        }
        if co.is_empty() {
            if let Some(&first) = pt.iters.iter().next() {
                co.insert(first);
            }
        }
        // Full levels: co-iterate one (a driver enumerating every coordinate)
        // and locate the other locatable ones (section 5.2).
        let fulls: Vec<IterId> = co.iter().copied().filter(|i| its.get(i).is_some_and(|it| it.full)).collect();
        let driver = fulls
            .iter()
            .copied()
            .find(|i| its.get(i).is_some_and(|it| !it.is_position()))
            .or_else(|| fulls.first().copied());
        if let Some(dr) = driver {
            // The driver enumerates every coordinate: whatever can be
            // located need not be co-iterated.
            co.retain(|&i| i == dr || !locatable(i));
        }
        let located = pt.iters.iter().copied().filter(|i| !co.contains(i)).chain(located_everywhere.iter().copied()).collect();
        Strategy { coiter: co.into_iter().collect(), located, driver }
    }

    /// Iterator conversions: deduplicate non-unique levels that are merged
    /// with others, assembled into a result, or cannot be fused; reject what
    /// needs a reordering scratch array.
    fn convert(
        &mut self,
        v: &str,
        lattice: &Lattice,
        strategies: &[Strategy],
        mut its: BTreeMap<IterId, LevelIter<'p>>,
        st: &State,
    ) -> Result<BTreeMap<IterId, LevelIter<'p>>, LowerError> {
        let appended = self.appends_var(st, v);
        for (pt, s) in lattice.points.iter().zip(strategies) {
            let merging = s.coiter.len() > 1;
            for op in &s.coiter {
                let Some(it) = its.get_mut(op) else { continue };
                let needs_order = merging || appended;
                if needs_order && !it.ordered {
                    return Err(LowerError::NeedsOrder {
                        reason: format!(
                            "{} stores coordinates unordered, so it cannot be {} over `{v}` (reordering into a sorted scratch copy is not implemented); store it ordered, or use a dense or hash result",
                            it.name,
                            if merging { "co-iterated with other operands" } else { "appended in order to the result" }
                        ),
                        span: self.p.assignment.span,
                    });
                }
                let Some(o) = op.operand() else { continue };
                if !it.unique && it.is_position() && (needs_order || !self.fusable(o, st)) {
                    self.check_chainable(o, it, pt)?;
                    it.dedup = true;
                }
            }
        }
        Ok(its)
    }

    /// A non-unique level can stay un-deduplicated (each duplicate visited on
    /// its own, fused with its branchless children) when everything merged
    /// with its children can be located and the result can take scattered
    /// updates.
    fn fusable(&self, op: OperandId, st: &State) -> bool {
        let p = self.p;
        let o = &p.operands[op];
        let k = st.pos[op].len();
        let rest = &o.format.levels[k + 1..];
        if !rest.iter().all(|l| l.properties().branchless) {
            return false;
        }
        // Each duplicate revisits every result level still to be resolved:
        // they must all take scattered updates (locate and insert), or an
        // appended level below would be assembled once per duplicate.
        let out = p.output();
        use super::operands::ResultAssembly;
        let only_workspace_left = p.assembly == ResultAssembly::Workspace && st.pos[0].len() + 1 >= out.level_vars.len();
        let out_scatters = p.assembly == ResultAssembly::Buffer
            || only_workspace_left
            || out.format.levels[st.pos[0].len().min(out.format.levels.len())..]
            .iter()
            .all(|l| l.locate().is_some() && matches!(l.assembly(), crate::format::level::Assembly::Insert(_)));
        let later: Vec<&String> = o.level_vars[k + 1..].iter().collect();
        let inputs_locatable = p.inputs().iter().filter(|x| x.id != op).all(|x| {
            let uses = x.level_vars.iter().any(|v| later.contains(&v));
            !uses || x.fully_locatable()
        });
        out_scatters && inputs_locatable
    }

    fn check_chainable(&self, op: OperandId, it: &LevelIter<'p>, _pt: &Point) -> Result<(), LowerError> {
        let o = &self.p.operands[op];
        let Some(k) = it.level else { return Ok(()) };
        if k + 1 == o.format.levels.len() {
            return Ok(()); // bottom level: duplicates' values are summed
        }
        let child = &o.format.levels[k + 1];
        let cp = child.properties();
        let chain_ok = matches!(child.iteration(), crate::format::level::Iteration::CoordPosition(_)) && cp.ordered && cp.compact && it.ordered && it.compact;
        if !chain_ok {
            return Err(LowerError::Capability {
                reason: format!(
                    "deduplicating {} needs its child level {} to be ordered, compact and position-iterable (iterator chaining); a scratch-array deduplication is not implemented",
                    it.name,
                    o.level_name(k + 1)
                ),
                span: o.access.span,
            });
        }
        Ok(())
    }

    fn record_plan(&mut self, v: &str, lattice: &Lattice, strategies: &[Strategy], its: &BTreeMap<IterId, LevelIter<'p>>) {
        let name = |i: &IterId| its.get(i).map_or("?".to_string(), |it| it.display());
        let p = self.p;
        let opname = |i: IterId| i.operand().map_or_else(|| format!("dim({v})"), |o| p.operands[o].access.to_string());
        let loops = lattice
            .points
            .iter()
            .zip(strategies)
            .map(|(pt, s)| LoopPlan {
                operands: pt.iters.iter().map(|&i| opname(i)).collect(),
                expr: pt.expr.display(&|i| p.operands[i].access.to_string()),
                coiterated: s.coiter.iter().map(name).collect(),
                located: s.located.iter().map(name).collect(),
                fused: s.coiter.len() == 1 && its.get(&s.coiter[0]).is_some_and(|it| it.branchless && !it.dedup),
            })
            .collect();
        self.plans.push(VarPlan { var: v.to_string(), loops });
    }

    /// Declare the cursor of iterator `it` at its starting bound.
    fn start(&mut self, it: &LevelIter<'p>, v: &str, st: &State) -> Cursor {
        let bounds = self.start_bounds(it, v, st);
        let name = self.cursor_name(it, v);
        let at = self.e.let_var(&name, bounds.at);
        Cursor { at, end: bounds.end }
    }

    pub(super) fn extent(&self, v: &str) -> Expr {
        self.p.extents.get(v).cloned().unwrap_or(Expr::Int(0))
    }

    /// Coordinates of an operand's resolved levels (its ancestors).
    pub(super) fn ancestors(&self, o: &crate::lower::operands::Operand, st: &State) -> Vec<Expr> {
        o.level_vars[..st.pos[o.id].len()].iter().map(|v| st.bound.get(v).cloned().unwrap_or(Expr::Int(0))).collect()
    }

    /// Read the coordinate under a cursor: returns (coordinate, position,
    /// found), emitting the dedup scan when the iterator deduplicates.
    fn deref(&mut self, it: &LevelIter<'p>, cur: &Cursor, v: &str, st: &State) -> (Expr, Expr, Expr, Option<Expr>) {
        let p = self.p;
        match (it.kind, it.level) {
            (Kind::Position(f), Some(k)) => {
                let o = &p.operands[it.owner()];
                let c = LevelCtx::new(&o.tensor, k);
                let anc = self.ancestors(o, st);
                let (coord, found) = f.pos_access(&c, &mut self.e, cur.at.clone(), &anc);
                let coord = self.e.bind(&coord_name(p, v, o), coord);
                let run_end = if it.dedup {
                    let seg = self.e.let_var(&format!("{}_seg", pos_name(o, k)), Expr::add(cur.at.clone(), Expr::Int(1)));
                    // Scan ahead over duplicates of this coordinate.
                    self.e.open();
                    let (next, _) = f.pos_access(&c, &mut self.e, seg.clone(), &anc);
                    let pre = self.e.close();
                    debug_assert!(pre.is_empty(), "deduplicated levels have expression-only pos_access");
                    let cond = Expr::and(Expr::lt(seg.clone(), cur.end.clone()), Expr::eq(next, coord.clone()));
                    self.e.while_(cond, |e| e.set(&seg, Expr::add(seg.clone(), Expr::Int(1))));
                    Some(seg)
                } else {
                    None
                };
                (coord, cur.at.clone(), found, run_end)
            }
            (Kind::Value(f), Some(k)) => {
                let o = &p.operands[it.owner()];
                let c = LevelCtx::new(&o.tensor, k);
                let mut coords = self.ancestors(o, st);
                coords.push(cur.at.clone());
                let parent = st.pos[it.owner()].last().cloned().unwrap_or(Expr::Int(0));
                let (pos, found) = f.coord_access(&c, &mut self.e, parent, &coords);
                let pos = self.e.bind(&pos_name(o, k), pos);
                (cur.at.clone(), pos, found, None)
            }
            _ => (cur.at.clone(), Expr::Int(0), Expr::Bool(true), None),
        }
    }

    /// `deref` for an iterator that may be exhausted: its coordinate reads
    /// as `exhausted` (matching nothing) once past its end.
    fn deref_guarded(&mut self, it: &LevelIter<'p>, cur: &Cursor, v: &str, st: &State, exhausted: i64) -> (Expr, Expr, Expr, Option<Expr>) {
        let p = self.p;
        let (Kind::Position(f), Some(k)) = (it.kind, it.level) else {
            let c = Expr::select(Expr::lt(cur.at.clone(), cur.end.clone()), cur.at.clone(), Expr::Int(exhausted));
            let (_, pos, found, _) = self.deref(it, cur, v, st);
            return (self.e.bind(v, c), pos, found, None);
        };
        let o = &p.operands[it.owner()];
        let c = LevelCtx::new(&o.tensor, k);
        let anc = self.ancestors(o, st);
        let coord = self.e.let_var(&coord_name(p, v, o), Expr::Int(exhausted));
        let seg = it.dedup.then(|| self.e.let_var(&format!("{}_seg", pos_name(o, k)), Expr::add(cur.at.clone(), Expr::Int(1))));
        self.e.open();
        let (x, _) = f.pos_access(&c, &mut self.e, cur.at.clone(), &anc);
        self.e.set(&coord, x);
        if let Some(seg) = &seg {
            self.e.open();
            let (next, _) = f.pos_access(&c, &mut self.e, seg.clone(), &anc);
            let pre = self.e.close();
            debug_assert!(pre.is_empty(), "deduplicated levels have expression-only pos_access");
            let cond = Expr::and(Expr::lt(seg.clone(), cur.end.clone()), Expr::eq(next, coord.clone()));
            self.e.while_(cond, |e| e.set(seg, Expr::add(seg.clone(), Expr::Int(1))));
        }
        let then = self.e.close();
        self.e.push(Stmt::If { cond: Expr::lt(cur.at.clone(), cur.end.clone()), then, els: Vec::new() });
        (coord, cur.at.clone(), Expr::Bool(true), seg)
    }

    /// Locate `op`'s next level at coordinate `coord`: (position, found).
    pub(super) fn locate(&mut self, op: OperandId, coord: Expr, st: &State) -> Result<(Expr, Expr), LowerError> {
        let p = self.p;
        let o = &p.operands[op];
        let k = st.pos[op].len();
        let level = &o.format.levels[k];
        let Some(loc) = level.locate() else {
            return Err(LowerError::Capability {
                reason: format!("{} must be accessed at a given coordinate of `{}` but {} has no locate capability", o.access, o.level_vars[k], o.level_name(k)),
                span: o.access.span,
            });
        };
        let c = LevelCtx::new(&o.tensor, k);
        let mut coords = self.ancestors(o, st);
        coords.push(coord);
        let parent = st.pos[op].last().cloned().unwrap_or(Expr::Int(0));
        let present = st.found[op].clone();
        if present == Expr::Bool(true) {
            let (pos, found) = loc.locate(&c, &mut self.e, parent, &coords);
            let pos = self.e.bind(&pos_name(o, k), pos);
            return Ok((pos, found));
        }
        // Under an absent parent there is nothing to locate (and the
        // parent position is not one to read through).
        let pos = self.e.let_var(&pos_name(o, k), Expr::Int(0));
        let found_var = self.e.let_var(&format!("{}_found", pos_name(o, k)), Expr::Bool(false));
        self.e.open();
        let (p_at, f_at) = loc.locate(&c, &mut self.e, parent, &coords);
        self.e.set(&pos, p_at);
        self.e.set(&found_var, f_at);
        let then = self.e.close();
        self.e.push(Stmt::If { cond: present, then, els: Vec::new() });
        Ok((pos, found_var))
    }

    /// One iterator, one point: a plain `for` loop (or no loop at all for a
    /// fused branchless level).
    fn single_loop(&mut self, d: usize, v: &str, st: &State, lattice: &Lattice, s: &Strategy, its: &BTreeMap<IterId, LevelIter<'p>>) -> Result<(), LowerError> {
        let pt = &lattice.points[0];
        let it = its[&s.coiter[0]].clone();
        let present = it.op.operand().is_none_or(|o| st.found[o] == Expr::Bool(true));
        let fused = present && it.branchless && it.is_position() && !it.dedup && it.op.operand().is_none_or(|o| st.run_end[o].is_none());
        let (lo, hi) = if fused {
            self.raw_bounds(&it, st)
        } else {
            let cur = self.start_bounds(&it, v, st);
            (cur.at, cur.end)
        };
        if it.dedup {
            let at = self.e.let_var(&self.cursor_name(&it, v), lo);
            let cur = Cursor { at: at.clone(), end: hi };
            self.e.open();
            let (coord, pos, found, run_end) = self.deref(&it, &cur, v, st);
            let seg = run_end.clone().unwrap_or_else(|| Expr::add(at.clone(), Expr::Int(1)));
            self.e.open();
            self.single_cases(d, v, coord, st, lattice, pt, s, (it.op, pos, run_end), its)?;
            let body = self.e.close();
            self.guard(found, body);
            self.e.set(&at, seg);
            let body = self.e.close();
            self.e.push(Stmt::While { cond: Expr::lt(at, cur.end), body });
            return Ok(());
        }
        if fused {
            // Branchless level: exactly one child, no loop (iterator fusion).
            let at = self.e.bind(&self.cursor_name(&it, v), lo);
            let hi = Expr::add(at.clone(), Expr::Int(1));
            let cur = Cursor { at, end: hi };
            let (coord, pos, found, _) = self.deref(&it, &cur, v, st);
            self.e.open();
            self.single_cases(d, v, coord, st, lattice, pt, s, (it.op, pos, None), its)?;
            let body = self.e.close();
            self.guard(found, body);
            return Ok(());
        }
        let var = self.e.fresh(&self.cursor_name(&it, v), crate::ir::Ty::I64);
        let cur = Cursor { at: Expr::Var(var), end: hi.clone() };
        self.e.open();
        let (coord, pos, found, _) = self.deref(&it, &cur, v, st);
        self.e.open();
        self.single_cases(d, v, coord, st, lattice, pt, s, (it.op, pos, None), its)?;
        let body = self.e.close();
        self.guard(found, body);
        let body = self.e.close();
        if d == 0 {
            self.record_outer(var, v, &it);
        }
        self.e.push(Stmt::For { var, lo, hi, body });
        Ok(())
    }

    /// Cases of a single-iterator loop: located operands decide which
    /// dominated point applies.
    #[allow(clippy::too_many_arguments)]
    fn single_cases(
        &mut self,
        d: usize,
        v: &str,
        coord: Expr,
        st: &State,
        lattice: &Lattice,
        pt: &Point,
        s: &Strategy,
        it: (IterId, Expr, Option<Expr>),
        its: &BTreeMap<IterId, LevelIter<'p>>,
    ) -> Result<(), LowerError> {
        let coord = self.e.bind(v, coord);
        let located = self.locate_all(s, &coord, st, its)?;
        let mut st = st.clone();
        if located.values().any(|(_, f)| *f != Expr::Bool(true)) {
            st.exact = false;
        }
        let st = &st;
        let mut derefs = BTreeMap::new();
        derefs.insert(it.0, (coord.clone(), it.1, Expr::Bool(true), it.2));
        // A full driver visits every coordinate, so every dominated case can
        // apply; otherwise only cases holding the iterated operand can.
        if lattice.linear {
            return self.linear_case(d, v, &coord, st, pt, s, &derefs, &located, its);
        }
        let cases: Vec<&Point> = lattice.cases(pt).into_iter().filter(|q| s.driver == Some(it.0) || q.iters.contains(&it.0)).collect();
        self.emit_cases(d, v, &coord, st, &cases, s, &derefs, &located, its, 0)
    }

    fn cursor_name(&self, it: &LevelIter<'p>, v: &str) -> String {
        let p = self.p;
        match (it.kind, it.level) {
            (Kind::Position(_), Some(k)) => pos_name(&p.operands[it.owner()], k),
            (Kind::Value(_), Some(_)) => coord_name(p, v, &p.operands[it.owner()]),
            _ => v.to_string(),
        }
    }

    /// Position bounds of a branchless level as expressions (nothing bound).
    fn raw_bounds(&mut self, it: &LevelIter<'p>, st: &State) -> (Expr, Expr) {
        let p = self.p;
        match (it.kind, it.level) {
            (Kind::Position(f), Some(k)) => {
                let o = &p.operands[it.owner()];
                let c = LevelCtx::new(&o.tensor, k);
                let parent = st.pos[it.owner()].last().cloned().unwrap_or(Expr::Int(0));
                let found = st.found[it.owner()].clone();
                if found == Expr::Bool(true) {
                    return child_bounds(f, &c, &mut self.e, parent, st.run_end[it.owner()].clone());
                }
                // An operand absent at its parent (a linear union's missing
                // term, a locate that failed) has no children; its parent
                // position is not one to read through.
                let name = pos_name(o, k);
                let lo = self.e.let_var(&format!("{name}_lo"), Expr::Int(0));
                let hi = self.e.let_var(&format!("{name}_hi"), Expr::Int(0));
                self.e.open();
                let (l, h) = child_bounds(f, &c, &mut self.e, parent, st.run_end[it.owner()].clone());
                self.e.set(&lo, l);
                self.e.set(&hi, h);
                let then = self.e.close();
                self.e.push(Stmt::If { cond: found, then, els: Vec::new() });
                (lo, hi)
            }
            _ => (Expr::Int(0), Expr::Int(1)),
        }
    }

    /// Bounds of an iterator without declaring a cursor.
    fn start_bounds(&mut self, it: &LevelIter<'p>, v: &str, st: &State) -> Cursor {
        let p = self.p;
        match (it.kind, it.level) {
            (Kind::Position(_), Some(k)) => {
                let (lo, hi) = self.raw_bounds(it, st);
                let name = pos_name(&p.operands[it.owner()], k);
                let lo = self.e.bind(&format!("{name}_begin"), lo);
                let hi = self.e.bind(&format!("{name}_end"), hi);
                Cursor { at: lo, end: hi }
            }
            (Kind::Value(f), Some(k)) => {
                let o = &p.operands[it.owner()];
                let c = LevelCtx::new(&o.tensor, k);
                let anc = self.ancestors(o, st);
                let (lo, hi) = f.coord_bounds(&c, &mut self.e, &anc);
                Cursor { at: lo, end: hi }
            }
            _ => Cursor { at: Expr::Int(0), end: self.extent(v) },
        }
    }

    fn guard(&mut self, cond: Expr, body: Vec<Stmt>) {
        match cond {
            Expr::Bool(true) => {
                for s in body {
                    self.e.push(s);
                }
            }
            Expr::Bool(false) => {}
            cond => self.e.push(Stmt::If { cond, then: body, els: Vec::new() }),
        }
    }

    /// A loop per lattice point, co-iterating its operands two-way-merge
    /// style, with a case per dominated point.
    fn merge_loops(&mut self, d: usize, v: &str, st: &State, lattice: &Lattice, strategies: &[Strategy], its: &BTreeMap<IterId, LevelIter<'p>>) -> Result<(), LowerError> {
        let mut cursors: BTreeMap<IterId, Cursor> = BTreeMap::new();
        for s in strategies {
            for op in &s.coiter {
                if !cursors.contains_key(op) {
                    let c = self.start(&its[op], v, st);
                    cursors.insert(*op, c);
                }
            }
        }
        for (pt, s) in lattice.points.iter().zip(strategies) {
            // With a full driver the loop runs over every coordinate (so the
            // lattice points dropped for lacking it are covered); the other
            // iterators are read only while in bounds.
            let bounded: Vec<IterId> = match s.driver {
                Some(dr) => vec![dr],
                None => s.coiter.clone(),
            };
            let in_bounds = |op: &IterId| Expr::lt(cursors[op].at.clone(), cursors[op].end.clone());
            // A linear union without a driver runs while any iterator has
            // coordinates left; exhausted ones read past every coordinate.
            let any = lattice.linear && s.driver.is_none();
            let cond = if any {
                bounded.iter().fold(Expr::Bool(false), |acc, op| Expr::or(acc, in_bounds(op)))
            } else {
                bounded.iter().fold(Expr::Bool(true), |acc, op| Expr::and(acc, in_bounds(op)))
            };
            let exhausted = if any { i64::MAX } else { -1 };
            self.e.open();
            let mut derefs: BTreeMap<IterId, (Expr, Expr, Expr, Option<Expr>)> = BTreeMap::new();
            for op in &s.coiter {
                let guarded = any || !bounded.contains(op);
                let dr = if guarded { self.deref_guarded(&its[op], &cursors[op], v, st, exhausted) } else { self.deref(&its[op], &cursors[op], v, st) };
                derefs.insert(*op, dr);
            }
            // The merged coordinate: the driver's, or the smallest.
            let coord = match s.driver {
                Some(dr) => derefs[&dr].0.clone(),
                None => {
                    let mut m: Option<Expr> = None;
                    for op in &s.coiter {
                        let c = derefs[op].0.clone();
                        m = Some(match m {
                            None => c,
                            Some(prev) => Expr::min(prev, c),
                        });
                    }
                    m.unwrap_or(Expr::Int(0))
                }
            };
            let coord = self.e.bind(v, coord);
            let located = self.locate_all(s, &coord, st, its)?;
            if lattice.linear {
                self.linear_case(d, v, &coord, st, pt, s, &derefs, &located, its)?;
            } else {
                let cases = lattice.cases(pt);
                self.emit_cases(d, v, &coord, st, &cases, s, &derefs, &located, its, 0)?;
            }
            // Advance every iterator that produced this coordinate; the
            // driver last, since the coordinate may be its cursor.
            let mut order: Vec<IterId> = s.coiter.iter().copied().filter(|op| Some(*op) != s.driver).collect();
            order.extend(s.driver);
            for op in &order {
                let cur = &cursors[op];
                let (c, _, _, run_end) = &derefs[op];
                let next = run_end.clone().unwrap_or_else(|| Expr::add(cur.at.clone(), Expr::Int(1)));
                let always = Some(*op) == s.driver || s.coiter.len() == 1;
                let advance = if always { next } else { Expr::select(Expr::eq(c.clone(), coord.clone()), next, cur.at.clone()) };
                self.e.set(&cur.at, advance);
            }
            let body = self.e.close();
            self.e.push(Stmt::While { cond, body });
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
        v: &str,
        coord: &Expr,
        st: &State,
        pt: &Point,
        s: &Strategy,
        derefs: &BTreeMap<IterId, (Expr, Expr, Expr, Option<Expr>)>,
        located: &BTreeMap<IterId, (Expr, Expr)>,
        its: &BTreeMap<IterId, LevelIter<'p>>,
    ) -> Result<(), LowerError> {
        let mut found_of: BTreeMap<IterId, Expr> = BTreeMap::new();
        let mut resolved = Vec::new();
        for op in &s.coiter {
            let (c, pos, found, run_end) = &derefs[op];
            let mut f = found.clone();
            if Some(*op) != s.driver && s.coiter.len() > 1 {
                f = Expr::and(Expr::eq(c.clone(), coord.clone()), f);
            }
            let f = if f.is_trivial() { f } else { self.e.let_var("present", f) };
            found_of.insert(*op, f.clone());
            resolved.push((*op, pos.clone(), run_end.clone(), f));
        }
        for (op, (pos, found)) in located {
            found_of.insert(*op, found.clone());
            resolved.push((*op, pos.clone(), None, found.clone()));
        }
        let cond = present(&pt.expr, &found_of);
        self.e.open();
        self.case(d, v, coord.clone(), st, pt, &resolved, its)?;
        let body = self.e.close();
        self.guard(cond, body);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_cases(
        &mut self,
        d: usize,
        v: &str,
        coord: &Expr,
        st: &State,
        cases: &[&Point],
        s: &Strategy,
        derefs: &BTreeMap<IterId, (Expr, Expr, Expr, Option<Expr>)>,
        located: &BTreeMap<IterId, (Expr, Expr)>,
        its: &BTreeMap<IterId, LevelIter<'p>>,
        n: usize,
    ) -> Result<(), LowerError> {
        let Some(q) = cases.get(n) else { return Ok(()) };
        let mut cond = Expr::Bool(true);
        let mut resolved = Vec::new();
        for op in q.iters.iter().filter(|op| s.coiter.contains(op)) {
            let (c, pos, found, run_end) = &derefs[op];
            if Some(*op) != s.driver && s.coiter.len() > 1 {
                cond = Expr::and(cond, Expr::eq(c.clone(), coord.clone()));
            }
            cond = Expr::and(cond, found.clone());
            resolved.push((*op, pos.clone(), run_end.clone(), Expr::Bool(true)));
        }
        for op in q.iters.iter() {
            if let Some((pos, found)) = located.get(op) {
                cond = Expr::and(cond, found.clone());
                resolved.push((*op, pos.clone(), None, Expr::Bool(true)));
            }
        }
        // Factors located outside the lattice: the case applies where its
        // expression can be nonzero, and each value reads as 0 where its
        // operand was not found.
        let mut found_of: BTreeMap<IterId, Expr> = BTreeMap::new();
        for op in q.expr.operands().into_iter().map(IterId::Operand) {
            if let (false, Some((pos, found))) = (q.iters.contains(&op), located.get(&op)) {
                found_of.insert(op, found.clone());
                resolved.push((op, pos.clone(), None, found.clone()));
            }
        }
        cond = Expr::and(cond, present(&q.expr, &found_of));
        self.e.open();
        self.case(d, v, coord.clone(), st, q, &resolved, its)?;
        let then = self.e.close();
        self.e.open();
        self.emit_cases(d, v, coord, st, cases, s, derefs, located, its, n + 1)?;
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

    /// The body of one case: bind the coordinate and the positions of the
    /// operands present, then assemble the result and recurse.
    #[allow(clippy::too_many_arguments)]
    fn case(
        &mut self,
        d: usize,
        v: &str,
        coord: Expr,
        st: &State,
        q: &Point,
        resolved: &[(IterId, Expr, Option<Expr>, Expr)],
        its: &BTreeMap<IterId, LevelIter<'p>>,
    ) -> Result<(), LowerError> {
        let mut st = st.clone();
        st.bound.insert(v.to_string(), coord.clone());
        for (op, pos, run_end, found) in resolved {
            let Some(o) = op.operand() else { continue };
            if its.get(op).is_some_and(|it| it.level.is_some()) {
                st.pos[o].push(pos.clone());
                st.run_end[o] = run_end.clone();
                st.found[o] = Expr::and(st.found[o].clone(), found.clone());
            }
        }
        self.after_bind(d + 1, st, q.expr.clone())
    }

    /// Locate, at the merged coordinate, every operand the strategy locates.
    fn locate_all(&mut self, s: &Strategy, coord: &Expr, st: &State, its: &BTreeMap<IterId, LevelIter<'p>>) -> Result<BTreeMap<IterId, (Expr, Expr)>, LowerError> {
        let mut out = BTreeMap::new();
        for op in &s.located {
            let Some(o) = op.operand() else { continue };
            if its.get(op).is_none_or(|it| it.level.is_none()) {
                continue;
            }
            let found = self.locate(o, coord.clone(), st)?;
            out.insert(*op, found);
        }
        Ok(out)
    }

    /// Everything that follows binding a variable: derived variables,
    /// late locates, the result's levels, then variable `next`.
    pub(super) fn after_bind(&mut self, next: usize, mut st: State, expr: LExpr) -> Result<(), LowerError> {
        let d = next;
        // Derived variables (blocked formats): var = outer * b + inner, only
        // inside the tensor (blocks past the edge hold padding).
        for dv in self.p.derived.clone() {
            if st.bound.contains_key(&dv.var) {
                continue;
            }
            if let (Some(o), Some(i)) = (st.bound.get(&dv.outer).cloned(), st.bound.get(&dv.inner).cloned()) {
                let val = self.e.bind(&dv.var, Expr::add(Expr::mul(o, Expr::Int(dv.b)), i));
                st.bound.insert(dv.var.clone(), val.clone());
                let cond = Expr::lt(val, self.extent(&dv.var));
                st.exact = false;
                self.e.open();
                self.after_bind(d, st, expr)?;
                let body = self.e.close();
                self.guard(cond, body);
                return Ok(());
            }
        }
        self.late_locates(&mut st, &expr)?;
        self.output_levels(d, st, expr)
    }

    /// Locate input levels whose variable is bound but which no loop
    /// iterated (operands ordered by locate, derived variables).
    fn late_locates(&mut self, st: &mut State, expr: &LExpr) -> Result<(), LowerError> {
        loop {
            let mut progress = false;
            for op in expr.operands() {
                let o = &self.p.operands[op];
                let k = st.pos[op].len();
                if k >= o.level_vars.len() {
                    continue;
                }
                let Some(c) = st.bound.get(&o.level_vars[k]).cloned() else { continue };
                let (pos, f) = self.locate(op, c, st)?;
                st.pos[op].push(pos);
                st.run_end[op] = None;
                st.found[op] = Expr::and(st.found[op].clone(), f);
                progress = true;
            }
            if !progress {
                return Ok(());
            }
        }
    }

    /// Continue with the next variable, first turning the sink into a scalar
    /// accumulator once the result position is known and only reductions
    /// remain.
    pub(super) fn next_var(&mut self, next: usize, mut st: State, expr: LExpr) -> Result<(), LowerError> {
        let out_done = st.pos[0].len() == self.p.output().level_vars.len();
        let scatters = self.p.output_inserts() || self.p.assembly == super::operands::ResultAssembly::Workspace;
        if out_done && matches!(st.sink, Sink::Direct) && next < self.order.len() && scatters {
            let t = self.e.let_var("tsum", Expr::Float(0.0));
            st.sink = Sink::Temp(t.clone());
            let pos = st.pos[0].last().cloned().unwrap_or(Expr::Int(0));
            let exact = st.exact;
            self.lower(next, st, expr)?;
            let vals = self.result_values();
            if exact {
                self.exact_stores += 1;
                self.e.store(vals, pos, t);
            } else {
                self.accumulating_stores += 1;
                self.e.store(vals.clone(), pos.clone(), Expr::add(Expr::load(vals, pos), t));
            }
            return Ok(());
        }
        self.lower(next, st, expr)
    }
}
