//! The code generation recursion (section 5.5 of the paper): one index
//! variable per level of recursion, in iteration-graph order. For each
//! variable it builds the merge lattice, chooses per lattice point which
//! iterators to co-iterate and which levels to locate (the Coiter rule of
//! section 5.4 plus the full-level optimisation of 5.2), and wraps
//! iterators in adapters (`Dedup`, `Fused`); `emit.rs` then emits the
//! loops through the iterator protocol (`lower::iterate`).

use super::ids::{IterId, OperandId};
use super::iterate::{
    level_iterator, Dedup, DimensionIter, Fused, Kind, LoopIterator, PositionIter, Reorder,
};
use super::lattice::{LExpr, Lattice, Point};
use super::plan::{LoopPlan, VarPlan};
use super::vars::IndexVar;
use super::{LowerError, Lowerer, Sink, State};
use crate::ir::Expr;
use crate::notation::BinOp;
use std::collections::{BTreeMap, BTreeSet};

/// The iterators of one loop's variable, by what they iterate for.
pub(super) type Its<'p> = BTreeMap<IterId, Box<dyn LoopIterator<'p> + 'p>>;

/// The Coiter rule: operands that must be co-iterated to enumerate the
/// nonzeros of `e` (restricted to the point's operands).
/// `ordered(i)` tells whether operand `i` enumerates coordinates in order;
/// when both factors of a product could be located, the ordered one is
/// iterated (an appended result needs order).
fn coiter(
    e: &LExpr,
    point: &BTreeSet<OperandId>,
    locatable: &dyn Fn(OperandId) -> bool,
    ordered: &dyn Fn(OperandId) -> bool,
) -> BTreeSet<OperandId> {
    match e {
        LExpr::Access(i) if point.contains(i) => [*i].into(),
        LExpr::Access(_) | LExpr::Const(_) => BTreeSet::new(),
        LExpr::Neg(x) => coiter(x, point, locatable, ordered),
        LExpr::Bin(BinOp::Mul, a, b) => {
            let (ca, cb) = (
                coiter(a, point, locatable, ordered),
                coiter(b, point, locatable, ordered),
            );
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
                (false, false) => ca
                    .union(&cb.iter().copied().filter(|&i| !locatable(i)).collect())
                    .copied()
                    .collect(),
            }
        }
        LExpr::Bin(_, a, b) => coiter(a, point, locatable, ordered)
            .union(&coiter(b, point, locatable, ordered))
            .copied()
            .collect(),
    }
}

/// How one lattice point is merged.
#[derive(Clone, Debug)]
pub(super) struct Strategy {
    pub coiter: Vec<IterId>,
    pub located: Vec<IterId>,
    /// A full iterator whose coordinate is every coordinate in order.
    pub driver: Option<IterId>,
}

impl<'p> Lowerer<'p> {
    pub(super) fn lower(&mut self, d: usize, st: State, expr: LExpr) -> Result<(), LowerError> {
        if d == self.order.len() {
            self.leaf(&st, &expr);
            return Ok(());
        }
        let v = self.order[d];
        let p = self.p;
        let ops = expr.operands();
        let mut its: Vec<Box<dyn LoopIterator<'p> + 'p>> = Vec::new();
        for &op in &ops {
            let o = &p.operands[op];
            let k = st.pos[op].len();
            if k < o.level_vars.len() && o.level_vars[k] == v {
                its.push(level_iterator(o, k));
            } else if o.level_vars[k.min(o.level_vars.len())..].contains(&v) {
                if !o.fully_locatable() {
                    return Err(LowerError::Internal(format!(
                        "{} reaches {} out of order",
                        o.describe(),
                        p.name(v)
                    )));
                }
                its.push(Box::new(DimensionIter::new(
                    IterId::Operand(op),
                    p.name(v),
                    Some(&o.tensor),
                )));
            }
        }
        let out_needs = self.output_needs(&st, v);
        if its.is_empty() && !out_needs && p.vars.is_hidden(v) {
            // The hidden variable of an operand absent from this case.
            return self.lower(d + 1, st, expr);
        }
        // The Coiter rule over the whole expression (section 5.4): a
        // locatable factor of a product is located at the coordinates its
        // co-factors enumerate. Only the rest enter the merge lattice, so
        // the lattice's full-level simplification can never drop a point
        // whose coordinates a located operand was meant to cover.
        let ids: BTreeSet<OperandId> = its.iter().filter_map(|i| i.id().operand()).collect();
        let locatable = |i: OperandId| {
            its.iter()
                .any(|it| it.id() == IterId::Operand(i) && it.props().locatable)
        };
        let ordered = |i: OperandId| {
            its.iter()
                .any(|it| it.id() == IterId::Operand(i) && it.props().level.ordered)
        };
        let merged = coiter(&expr, &ids, &locatable, &ordered);
        let located_everywhere: Vec<IterId> = ids
            .difference(&merged)
            .map(|&o| IterId::Operand(o))
            .collect();
        let full: BTreeSet<OperandId> = its
            .iter()
            .filter_map(|i| {
                i.id()
                    .operand()
                    .filter(|o| i.props().level.full && merged.contains(o))
            })
            .collect();
        let levels_left = u32::try_from(self.order.len() - d).unwrap_or(u32::MAX);
        let mut lattice = Lattice::new(&expr, &merged, &full, levels_left);
        if its.is_empty()
            || lattice
                .points
                .iter()
                .any(|pt| pt.iters.contains(&IterId::Dimension))
        {
            if lattice.points.is_empty() || !lattice.points[0].iters.contains(&IterId::Dimension) {
                lattice.add_dimension();
            }
            its.push(Box::new(DimensionIter::new(
                IterId::Dimension,
                p.name(v),
                None,
            )));
        }
        let by_op: Its<'p> = its.into_iter().map(|i| (i.id(), i)).collect();
        let mut st = st;
        let strategies: Vec<Strategy> = lattice
            .points
            .iter()
            .map(|pt| self.strategy(pt, &by_op, &located_everywhere))
            .collect();
        let by_op = self.adapt(v, &lattice, &strategies, by_op, &st)?;
        self.record_plan(v, &lattice, &strategies, &by_op);
        let single = lattice.points.len() == 1 && strategies[0].coiter.len() == 1;
        if st.pos[0].len() < p.output().level_vars.len() {
            let next_out = p.output().level_vars[st.pos[0].len()];
            // The loop's only iterator (`single`: one point, one co-iterated).
            let it = single
                .then(|| by_op.get(&strategies[0].coiter[0]))
                .flatten();
            // A plain loop over a full level by coordinate visits each
            // coordinate once (iterators by position may repeat or skip).
            let plain = it.is_some_and(|it| {
                it.props().level.full && matches!(it.kind(), Kind::Value(_) | Kind::Dimension)
            });
            // One loop over a unique level visits each coordinate at most
            // once, but not within a deduplicated run, whose positions span
            // several parents (COO's columns of one row may repeat). A
            // deduplicated ordered level visits each coordinate once, in a
            // run too: the run holds its entries in order.
            let distinct = it.is_some_and(|it| {
                let in_run = it.id().operand().is_some_and(|o| st.run_end[o].is_some());
                let props = it.props().level;
                ((props.unique && !in_run) || (it.dedups() && props.ordered))
                    && !matches!(it.kind(), Kind::Scratch)
            });
            st.exact &= next_out == v && plain;
            st.once &= next_out == v && distinct;
        }
        if single {
            self.single_loop(d, v, &st, &lattice, &strategies[0], &by_op)
        } else {
            self.merge_loops(d, v, &st, &lattice, &strategies, &by_op)
        }
    }

    /// Whether the result still needs a loop over `v` (a result variable not
    /// yet bound).
    fn output_needs(&self, st: &State, v: IndexVar) -> bool {
        let o = self.p.output();
        o.level_vars[st.pos[0].len().min(o.level_vars.len())..].contains(&v)
            && !st.bound.contains_key(&v)
    }

    /// The point's operands are merged (the Coiter rule already left the
    /// factors to locate out of the lattice: `located_everywhere`), except
    /// that a full driver lets the other locatable operands be located.
    /// Later points' loops resume the iterators of earlier ones, so an
    /// operand of the lattice may only be located when a full driver
    /// enumerates every coordinate (otherwise a later loop would visit it
    /// again).
    fn strategy(&self, pt: &Point, its: &Its<'p>, located_everywhere: &[IterId]) -> Strategy {
        let locatable = |i: IterId| its.get(&i).is_some_and(|it| it.props().locatable);
        let mut co = pt.iters.clone();
        for (op, it) in its {
            // Out-of-order operands stand in for their dimension only in
            // unions, where they keep every coordinate alive.
            if matches!(it.kind(), Kind::Dimension)
                && *op != IterId::Dimension
                && pt.iters.contains(op)
                && !co.contains(op)
                && !locatable(*op)
            {
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
        let fulls: Vec<IterId> = co
            .iter()
            .copied()
            .filter(|i| its.get(i).is_some_and(|it| it.props().level.full))
            .collect();
        let driver = fulls
            .iter()
            .copied()
            .find(|i| {
                its.get(i)
                    .is_some_and(|it| matches!(it.kind(), Kind::Value(_) | Kind::Dimension))
            })
            .or_else(|| fulls.first().copied());
        if let Some(dr) = driver {
            // The driver enumerates every coordinate: whatever can be
            // located need not be co-iterated.
            co.retain(|&i| i == dr || !locatable(i));
        }
        let located = pt
            .iters
            .iter()
            .copied()
            .filter(|i| !co.contains(i))
            .chain(located_everywhere.iter().copied())
            .collect();
        Strategy {
            coiter: co.into_iter().collect(),
            located,
            driver,
        }
    }

    /// Iterator conversions (adapters): deduplicate non-unique levels that
    /// are merged with others, assembled into a result, or cannot be fused
    /// (`Dedup`); visit an unordered level that must be enumerated in order
    /// through a sorted copy (`Reorder`); visit a branchless level alone in
    /// its loop without a loop (`Fused`).
    fn adapt(
        &mut self,
        v: IndexVar,
        lattice: &Lattice,
        strategies: &[Strategy],
        mut its: Its<'p>,
        st: &State,
    ) -> Result<Its<'p>, LowerError> {
        let appended = self.result_needs_order(st, v);
        let mut dedup: BTreeSet<OperandId> = BTreeSet::new();
        let mut reorder: BTreeSet<OperandId> = BTreeSet::new();
        for (pt, s) in lattice.points.iter().zip(strategies) {
            let merging = s.coiter.len() > 1;
            for op in &s.coiter {
                let Some(it) = its.get(op) else { continue };
                let props = it.props().level;
                let needs_order = merging || appended;
                if needs_order && !props.ordered {
                    match (op.operand(), self.unreorderable(op.operand(), it.as_ref(), v)) {
                        (Some(o), None) => {
                            reorder.insert(o);
                            continue;
                        }
                        (_, why) => {
                            return Err(LowerError::NeedsOrder {
                                reason: format!(
                                    "{} stores coordinates unordered, so it cannot be {} over `{}` ({}); store it ordered, or use a dense or hash result",
                                    it.name(),
                                    if merging { "co-iterated with other operands" } else { "appended in order to the result" },
                                    self.p.name(v),
                                    why.unwrap_or_default(),
                                ),
                                span: self.p.assignment.span,
                            })
                        }
                    }
                }
                let Some(o) = op.operand() else { continue };
                if !props.unique
                    && matches!(it.kind(), Kind::Position(_))
                    && (needs_order || !self.fusable(o, st) || self.runs_save_loops(o, st, v))
                {
                    self.check_chainable(o, it.as_ref(), pt)?;
                    dedup.insert(o);
                }
            }
        }
        let p = self.p;
        let position = |id: IterId, its: &Its<'p>| {
            its.get(&id)
                .and_then(|it| it.level())
                .and_then(|(o, k)| PositionIter::new(&p.operands[o], k))
        };
        for o in dedup {
            if let Some(inner) = position(IterId::Operand(o), &its) {
                its.insert(IterId::Operand(o), Box::new(Dedup(inner)));
            }
        }
        for o in reorder {
            let operand = &p.operands[o];
            let k = st.pos[o].len();
            // Scratch arrays apart from those of other accesses of the tensor.
            let earlier = p.operands[..o.0]
                .iter()
                .filter(|x| x.tensor == operand.tensor)
                .count();
            let copy = if earlier == 0 {
                format!("sorted{}", k + 1)
            } else {
                format!("sorted{}_{earlier}", k + 1)
            };
            if let Some(inner) = position(IterId::Operand(o), &its) {
                its.insert(
                    IterId::Operand(o),
                    Box::new(Reorder::new(inner, operand, k, &copy)),
                );
            }
        }
        // A branchless level alone in its loop has one position under its
        // parent: no loop, when the parent is present and not a run.
        if let ([_], [s]) = (lattice.points.as_slice(), strategies) {
            if let [id] = s.coiter.as_slice() {
                let fuses = |it: &dyn LoopIterator<'p>| {
                    let present = id
                        .operand()
                        .is_none_or(|o| st.found[o] == Expr::Bool(true) && st.run_end[o].is_none());
                    present && it.props().level.branchless && !it.dedups()
                };
                if its.get(id).is_some_and(|it| fuses(it.as_ref())) {
                    if let Some(inner) = position(*id, &its) {
                        its.insert(*id, Box::new(Fused(inner)));
                    }
                }
            }
        }
        Ok(its)
    }

    /// Why an unordered level cannot be read through a sorted copy
    /// (`Reorder`), or `None` when it can: a unique level iterated by
    /// position, under loops over the operand's own variables only (so each
    /// segment is copied once; below a loop over a variable it lacks, it
    /// would be sorted again for every coordinate of that loop, and a copy
    /// converted once before the kernel costs less).
    fn unreorderable(
        &self,
        op: Option<OperandId>,
        it: &dyn LoopIterator<'p>,
        v: IndexVar,
    ) -> Option<String> {
        let Some(o) = op.map(|o| &self.p.operands[o]) else {
            return Some("a dimension has no order to restore".into());
        };
        if !it.props().level.unique {
            return Some(
                "reordering a non-unique level into a sorted copy is not implemented".into(),
            );
        }
        if !matches!(it.kind(), Kind::Position(_)) {
            return Some("only a level iterated by position can be reordered".into());
        }
        let d = self.order.iter().position(|&u| u == v).unwrap_or(0);
        match self.order[..d].iter().find(|u| !o.level_vars.contains(u)) {
            Some(&u) => Some(format!(
                "its sorted copy would be made again for every `{}`",
                self.p.name(u)
            )),
            None => None,
        }
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
        let only_workspace_left =
            p.assembly.is_workspace() && st.pos[0].len() + 1 >= out.level_vars.len();
        let out_scatters = p.assembly == ResultAssembly::Buffer
            || only_workspace_left
            || out.format.levels[st.pos[0].len().min(out.format.levels.len())..]
                .iter()
                .all(|l| {
                    l.locate().is_some()
                        && matches!(l.assembly(), crate::format::level::Assembly::Insert(_))
                });
        let later = &o.level_vars[k + 1..];
        let inputs_locatable = p.inputs().iter().filter(|x| x.id != op).all(|x| {
            let uses = x.level_vars.iter().any(|v| later.contains(v));
            !uses || x.fully_locatable()
        });
        out_scatters && inputs_locatable
    }

    /// Whether a fusable non-unique level (of operand `op`, iterated for
    /// `v`) is better deduplicated: when a loop over a variable `op` lacks
    /// comes between `v` and `op`'s last variable (TTM from COO,
    /// `A(i,j,k) = B(i,j,l) * M(k,l)`: the loop over `k` between `j` and
    /// `l`). Fused, that loop runs once per stored entry, and adds into
    /// the result's positions once per entry; over runs of equal
    /// coordinates it runs once per run, and the reduction inside it sums
    /// a run's entries into a scalar stored once. An ordered level only:
    /// its runs are whole, so each coordinate is visited once.
    fn runs_save_loops(&self, op: OperandId, st: &State, v: IndexVar) -> bool {
        let o = &self.p.operands[op];
        let k = st.pos[op].len();
        let ordered = o.format.levels[k..].iter().all(|l| l.properties().ordered);
        let Some(&last) = o.level_vars.last() else {
            return false;
        };
        let (Some(at), Some(end)) = (
            self.order.iter().position(|&u| u == v),
            self.order.iter().position(|&u| u == last),
        ) else {
            return false;
        };
        ordered
            && at < end
            && self.order[at + 1..end]
                .iter()
                .any(|u| !o.level_vars.contains(u))
    }

    fn check_chainable(
        &self,
        op: OperandId,
        it: &dyn LoopIterator<'p>,
        _pt: &Point,
    ) -> Result<(), LowerError> {
        let o = &self.p.operands[op];
        let Some((_, k)) = it.level() else {
            return Ok(());
        };
        let props = it.props().level;
        if k + 1 == o.format.levels.len() {
            return Ok(()); // bottom level: duplicates' values are summed
        }
        let child = &o.format.levels[k + 1];
        let cp = child.properties();
        let chain_ok = matches!(
            child.iteration(),
            crate::format::level::Iteration::CoordPosition(_)
        ) && cp.ordered
            && cp.compact
            && props.ordered
            && props.compact;
        if !chain_ok {
            return Err(LowerError::Capability {
                reason: format!(
                    "deduplicating {} needs its child level {} to be ordered, compact and position-iterable (iterator chaining); a scratch-array deduplication is not implemented",
                    it.name(),
                    o.level_name(k + 1)
                ),
                span: o.access.span,
            });
        }
        Ok(())
    }

    fn record_plan(
        &mut self,
        v: IndexVar,
        lattice: &Lattice,
        strategies: &[Strategy],
        its: &Its<'p>,
    ) {
        let name = |i: &IterId| its.get(i).map_or("?".to_string(), |it| it.name());
        let p = self.p;
        let opname = |i: IterId| {
            i.operand().map_or_else(
                || format!("dim({})", p.name(v)),
                |o| p.operands[o].access.to_string(),
            )
        };
        let loops = lattice
            .points
            .iter()
            .zip(strategies)
            .map(|(pt, s)| LoopPlan {
                operands: pt.iters.iter().map(|&i| opname(i)).collect(),
                expr: pt.expr.display(&|i| p.operands[i].access.to_string()),
                coiterated: s.coiter.iter().map(name).collect(),
                located: s.located.iter().map(name).collect(),
                fused: s.coiter.len() == 1
                    && its
                        .get(&s.coiter[0])
                        .is_some_and(|it| it.props().level.branchless && !it.dedups()),
            })
            .collect();
        self.plans.push(VarPlan { var: v, loops });
    }

    pub(super) fn extent(&self, v: IndexVar) -> Expr {
        self.p.vars.extent(v).clone()
    }

    /// Locate `op`'s next level at coordinate `coord`: (position, found).
    pub(super) fn locate(
        &mut self,
        op: OperandId,
        coord: Expr,
        st: &State,
    ) -> Result<(Expr, Expr), LowerError> {
        super::iterate::locate(self.p, &mut self.e, st, op, coord)
    }

    /// Everything that follows binding a variable: derived variables,
    /// late locates, the result's levels, then variable `next`.
    pub(super) fn after_bind(
        &mut self,
        next: usize,
        mut st: State,
        expr: LExpr,
    ) -> Result<(), LowerError> {
        let d = next;
        // Derived variables (blocked formats): var = outer * b + inner, only
        // inside the tensor (blocks past the edge hold padding), tested
        // where the inner coordinate was enumerated; one an operand stores
        // came with an entry, inside the tensor.
        let p = self.p;
        for dv in p.vars.derived() {
            let Some((outer, inner, b)) = p.vars.derivation(dv) else {
                continue;
            };
            if st.bound.contains_key(&dv) {
                continue;
            }
            if let (Some(o), Some(i)) =
                (st.bound.get(&outer).cloned(), st.bound.get(&inner).cloned())
            {
                let val = self.bind_coord(dv, Expr::add(Expr::mul(o, Expr::Int(b)), i));
                st.bound.insert(dv, val.clone());
                if st.stored.contains(&inner) {
                    // As after a test: blocks of entries revisit rows.
                    st.exact = false;
                    st.once = false;
                    st.stored.insert(dv);
                    continue;
                }
                let cond = Expr::lt(val, self.extent(dv));
                st.exact = false;
                st.once = false;
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
                let Some(c) = st.bound.get(&o.level_vars[k]).cloned() else {
                    continue;
                };
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
    pub(super) fn next_var(
        &mut self,
        next: usize,
        mut st: State,
        expr: LExpr,
    ) -> Result<(), LowerError> {
        let out_done = st.pos[0].len() == self.p.output().level_vars.len();
        let scatters = self.p.output_inserts() || self.p.assembly.is_workspace();
        if out_done && matches!(st.sink, Sink::Direct) && next < self.order.len() && scatters {
            let t = self.e.let_var("tsum", Expr::Float(0.0));
            st.sink = Sink::Temp {
                sum: t.clone(),
                touched: None,
            };
            let pos = st.pos[0].last().cloned().unwrap_or(Expr::Int(0));
            let (exact, once) = (st.exact, st.once);
            self.lower(next, st, expr)?;
            let vals = self.result_values();
            if exact || once {
                match exact {
                    true => self.exact_stores += 1,
                    false => self.assigning_stores += 1,
                }
                self.e.store(vals, pos, t);
            } else {
                self.accumulating_stores += 1;
                self.e.store(
                    vals.clone(),
                    pos.clone(),
                    Expr::add(Expr::load(vals, pos), t),
                );
            }
            return Ok(());
        }
        self.lower(next, st, expr)
    }
}
