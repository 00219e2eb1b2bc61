//! Result assembly through the insert and append capabilities (section 4.3):
//! initialisation before the loops, per-level work as result coordinates
//! become known, the values at the leaves, and finalisation after.

use super::ids::OperandId;
use super::lattice::LExpr;
use super::operands::ResultAssembly;
use super::vars::IndexVar;
use super::{LowerError, Lowerer, Sink, State};
use crate::format::level::{Append, Assembly, LevelCtx, Parents};
use crate::ir::{ArrayRef, Expr, Stmt};
use crate::notation::BinOp;
use std::collections::BTreeMap;

impl<'p> Lowerer<'p> {
    /// First level of the append chain that `k` belongs to (an append level
    /// followed by branchless append levels appends them together).
    pub(super) fn chain_head(&self, k: usize) -> usize {
        self.p.output().format.append_chain_head(k)
    }

    fn chain_tail(&self, h: usize) -> usize {
        let levels = &self.p.output().format.levels;
        let mut t = h;
        while t + 1 < levels.len()
            && levels[t + 1].properties().branchless
            && matches!(levels[t + 1].assembly(), Assembly::Append(_))
        {
            t += 1;
        }
        t
    }

    /// Whether the loop over variable `v` must visit its coordinates in
    /// order for the result: `v` is a coordinate of a level assembled by
    /// append, or of a level above one (a CSR result's rows): an appended
    /// level takes its parents' segments in the order of their positions,
    /// which are in coordinate order.
    pub(super) fn result_needs_order(&self, st: &State, v: IndexVar) -> bool {
        let o = self.p.output();
        let n = o.level_vars.len();
        match self.p.assembly {
            // A buffer takes coordinates in any order.
            ResultAssembly::Buffer => return false,
            // The workspace takes its level's coordinates in any order; the
            // rows above are appended once each, in order.
            ResultAssembly::Workspace(_) => {
                let rows = n.saturating_sub(1);
                return o.level_vars[st.pos[0].len().min(rows)..rows].contains(&v);
            }
            ResultAssembly::Direct => {}
        }
        let appends = |k: usize| matches!(o.format.levels[k].assembly(), Assembly::Append(_));
        o.level_vars
            .iter()
            .enumerate()
            .skip(st.pos[0].len())
            .any(|(k, &x)| x == v && (k..n).any(appends))
    }

    /// Initialise the result's levels and values.
    pub(super) fn prologue(&mut self) -> Result<(), LowerError> {
        let p = self.p;
        let o = p.output();
        let accumulate = p.assignment.accumulate;
        let mut parent_size = Expr::Int(1);
        let mut seen_append = false;
        for (k, level) in o.format.levels.iter().enumerate() {
            let c = LevelCtx::new(&o.tensor, k);
            match level.assembly() {
                Assembly::Insert(ins) => {
                    if seen_append {
                        return Err(LowerError::Capability {
                            reason: format!("result level {} inserts below a level assembled by append; use a format whose levels below an append level also append", o.level_name(k)),
                            span: o.access.span,
                        });
                    }
                    let size = ins.size(&c, &mut self.e, parent_size.clone());
                    let size = self.e.bind(&format!("{}{}_size", o.tensor, k + 1), size);
                    if !accumulate {
                        ins.insert_init(&c, &mut self.e, parent_size.clone(), size.clone());
                    }
                    parent_size = size;
                }
                Assembly::Append(app) => {
                    if accumulate {
                        return Err(LowerError::Capability {
                            reason: format!("`+=` updates {} in place, but its level {} assembles by append only; use a dense or hash result", o.tensor, o.level_name(k)),
                            span: o.access.span,
                        });
                    }
                    seen_append = true;
                    if self.parents_close_in_order(k) {
                        let name = format!("{}{}_last_parent", o.tensor, k + 1);
                        let last = self.e.let_var(&name, Expr::Int(-1));
                        self.last_parents.insert(k, last);
                    }
                    let parents = self.parents(k);
                    app.append_init(&c, &mut self.e, parent_size.clone(), &parents);
                    if self.chain_head(k) == k {
                        let counter = self.e.let_var(&format!("{}{}_count", o.tensor, k + 1), Expr::Int(0));
                        self.out_sizes.insert(k, counter.clone());
                        parent_size = counter;
                    }
                }
                Assembly::None => {
                    return Err(LowerError::Capability {
                        reason: format!(
                            "{} cannot hold a result: its level {} has neither the insert nor the append capability",
                            o.tensor,
                            o.level_name(k)
                        ),
                        span: o.access.span,
                    })
                }
            }
        }
        if !seen_append {
            let vals = ArrayRef::vals(&o.tensor);
            self.e.reserve(vals.clone(), parent_size.clone());
            if !accumulate {
                self.e.for_("pz", Expr::Int(0), parent_size, |e, q| {
                    e.store(vals.clone(), q, Expr::Float(0.0))
                });
            }
        }
        if let ResultAssembly::Workspace(row) = self.p.assembly {
            self.workspace_init(row);
        }
        Ok(())
    }

    /// The array the result's values accumulate into: the workspace row
    /// when the last level goes through one.
    pub(super) fn result_values(&self) -> ArrayRef {
        match self.p.assembly {
            ResultAssembly::Workspace(_) => {
                super::workspace::Workspace::of(&self.p.output().tensor).vals
            }
            _ => ArrayRef::vals(&self.p.output().tensor),
        }
    }

    /// Whether the parents of the result's appending level `k` are closed
    /// in increasing position order, each at most once: below dense
    /// levels (positions in the order of their coordinates, which the
    /// loops visit in order), in a result each nest writes in turn (not a
    /// buffer that nests append to one after another). The root's one
    /// parent gains nothing from it.
    fn parents_close_in_order(&self, k: usize) -> bool {
        let levels = &self.p.output().format.levels;
        k > 0
            && self.p.assembly != ResultAssembly::Buffer
            && levels[..k].iter().all(|l| {
                matches!(l.assembly(), Assembly::Insert(_))
                    && l.properties().full
                    && l.properties().ordered
            })
    }

    /// How the parents of the result's appending level `k` come.
    pub(super) fn parents(&self, k: usize) -> Parents {
        if let Some(last) = self.last_parents.get(&k) {
            return Parents::InOrder { last: last.clone() };
        }
        let above = k
            .checked_sub(1)
            .map(|j| self.p.output().format.levels[j].assembly());
        match above {
            Some(Assembly::Append(_)) => Parents::Appended,
            _ => Parents::Fixed,
        }
    }

    /// Close parent `parent_pos` of the result's appending level `k`, whose
    /// children are the positions `children`.
    pub(super) fn close_parent(
        &mut self,
        k: usize,
        app: &dyn Append,
        parent_pos: Expr,
        children: (Expr, Expr),
    ) {
        let c = LevelCtx::new(&self.p.output().tensor, k);
        let parents = self.parents(k);
        app.append_edges(&c, &mut self.e, parent_pos.clone(), children, &parents);
        if let Parents::InOrder { last } = parents {
            self.e.set(&last, parent_pos);
        }
    }

    /// Finalise appended levels once every coordinate is in.
    pub(super) fn epilogue(&mut self) {
        for (array, length) in std::mem::take(&mut self.lengths_at_end) {
            self.e.reserve(array, length);
        }
        let p = self.p;
        let o = p.output();
        let mut parent_size = Expr::Int(1);
        for (k, level) in o.format.levels.iter().enumerate() {
            let c = LevelCtx::new(&o.tensor, k);
            match level.assembly() {
                Assembly::Insert(ins) => {
                    let size = ins.size(&c, &mut self.e, parent_size.clone());
                    ins.insert_finalize(&c, &mut self.e, parent_size.clone(), size.clone());
                    parent_size = size;
                }
                Assembly::Append(app) => {
                    let size = self.out_sizes[&self.chain_head(k)].clone();
                    if k == 0 {
                        // The root: one parent.
                        self.close_parent(k, app, Expr::Int(0), (Expr::Int(0), size.clone()));
                    }
                    let parents = self.parents(k);
                    app.append_finalize(
                        &c,
                        &mut self.e,
                        parent_size.clone(),
                        size.clone(),
                        &parents,
                    );
                    parent_size = size;
                }
                Assembly::None => {}
            }
        }
    }

    /// Resolve the result's levels whose variables are now bound: locate and
    /// insert, or append (after the nested loops tell what they produced).
    pub(super) fn output_levels(
        &mut self,
        next: usize,
        mut st: State,
        expr: LExpr,
    ) -> Result<(), LowerError> {
        let p = self.p;
        let o = p.output();
        let k = st.pos[0].len();
        if k == o.level_vars.len() {
            return self.next_var(next, st, expr);
        }
        let Some(coord) = st.bound.get(&o.level_vars[k]).cloned() else {
            return self.next_var(next, st, expr);
        };
        if self.p.assembly.is_workspace() && k + 1 == o.level_vars.len() {
            if self.entry_may_miss(next, &st, &expr) {
                return self
                    .place_if_present(next, st, expr, coord.clone(), |me| Ok(me.touch(coord)));
            }
            // The value's place in the workspace row: the coordinate
            // itself in a dense row.
            let at = self.touch(coord);
            st.pos[0].push(at);
            return self.next_var(next, st, expr);
        }
        let c = LevelCtx::new(&o.tensor, k);
        match o.format.levels[k].assembly() {
            // A last level that holds only the coordinates inserted (a
            // hashed one) gets the coordinate once the value is known to
            // be an entry.
            Assembly::Insert(ins)
                if k + 1 == o.level_vars.len()
                    && !o.format.levels[k].properties().full
                    && self.entry_may_miss(next, &st, &expr) =>
            {
                let at = st.clone();
                self.place_if_present(next, st, expr, coord.clone(), |me| {
                    let (pos, found) = me.locate(OperandId::OUTPUT, coord.clone(), &at)?;
                    let insert = me.e.block(|e| ins.insert_coord(&c, e, pos.clone(), coord));
                    me.guard_entry(Expr::not(found), insert);
                    Ok(pos)
                })
            }
            Assembly::Insert(ins) => {
                let (pos, found) = self.locate(OperandId::OUTPUT, coord.clone(), &st)?;
                self.e.open();
                ins.insert_coord(&c, &mut self.e, pos.clone(), coord);
                let insert = self.e.close();
                if !insert.is_empty() {
                    self.e.push(Stmt::If {
                        cond: Expr::not(found),
                        then: insert,
                        els: Vec::new(),
                    });
                }
                st.pos[0].push(pos.clone());
                let child_appends = o
                    .format
                    .levels
                    .get(k + 1)
                    .is_some_and(|l| matches!(l.assembly(), Assembly::Append(_)));
                if child_appends {
                    let counter = self.out_sizes[&(k + 1)].clone();
                    let begin = self
                        .e
                        .let_var(&format!("{}{}_begin", o.tensor, k + 2), counter.clone());
                    self.output_levels(next, st.clone(), expr)?;
                    if self.p.assembly.is_workspace() && k + 2 == o.level_vars.len() {
                        self.flush_workspace(&st, &[]);
                    }
                    if let Assembly::Append(app) = o.format.levels[k + 1].assembly() {
                        self.close_parent(k + 1, app, pos, (begin, counter));
                    }
                    Ok(())
                } else {
                    self.output_levels(next, st, expr)
                }
            }
            Assembly::Append(_) => {
                let h = self.chain_head(k);
                let t = self.chain_tail(h);
                let at = self.out_sizes[&h].clone();
                st.pos[0].push(at.clone());
                // The level above a workspace row that is appended with it
                // (COO's rows): the row is flushed once this level's
                // coordinate is done, each entry with the chain's
                // coordinates.
                if self.p.assembly.is_workspace() && k + 1 == t && t + 1 == o.level_vars.len() {
                    let above: Vec<Expr> = (h..=k)
                        .map(|l| st.bound[&o.level_vars[l]].clone())
                        .collect();
                    self.output_levels(next, st.clone(), expr)?;
                    self.flush_workspace(&st, &above);
                    return Ok(());
                }
                if k < t {
                    return self.output_levels(next, st, expr);
                }
                let last = t + 1 == o.level_vars.len();
                if last {
                    let sum = self.e.let_var("tsum", Expr::Float(0.0));
                    let (touched, present) = self.entry_flag(next, &st, &expr);
                    st.sink = Sink::Temp {
                        sum: sum.clone(),
                        touched,
                    };
                    let coords: Vec<Expr> = (h..=t)
                        .map(|l| st.bound[&o.level_vars[l]].clone())
                        .collect();
                    self.next_var(next, st, expr)?;
                    self.e.open();
                    self.append_chain(h, &at, &coords);
                    let vals = ArrayRef::vals(&o.tensor);
                    self.e
                        .reserve(vals.clone(), Expr::add(at.clone(), Expr::Int(1)));
                    self.e.store(vals, at.clone(), sum);
                    self.e.set(&at, Expr::add(at.clone(), Expr::Int(1)));
                    let append = self.e.close();
                    self.guard_entry(present, append);
                    Ok(())
                } else {
                    let Some(child) = self.out_sizes.get(&(t + 1)).cloned() else {
                        return Err(LowerError::Internal(
                            "append chain without a child counter".into(),
                        ));
                    };
                    let begin = self
                        .e
                        .let_var(&format!("{}{}_begin", o.tensor, t + 2), child.clone());
                    let coords: Vec<Expr> = (h..=t)
                        .map(|l| st.bound[&o.level_vars[l]].clone())
                        .collect();
                    self.output_levels(next, st.clone(), expr)?;
                    if self.p.assembly.is_workspace() && t + 2 == o.level_vars.len() {
                        self.flush_workspace(&st, &[]);
                    }
                    self.e.open();
                    self.append_chain(h, &at, &coords);
                    if let Assembly::Append(app) = o.format.levels[t + 1].assembly() {
                        let children = (begin.clone(), child.clone());
                        self.close_parent(t + 1, app, at.clone(), children);
                    }
                    self.e.set(&at, Expr::add(at.clone(), Expr::Int(1)));
                    let then = self.e.close();
                    self.e.push(Stmt::If {
                        cond: Expr::cmp(crate::ir::CmpOp::Gt, child, begin),
                        then,
                        els: Vec::new(),
                    });
                    Ok(())
                }
            }
            Assembly::None => Err(LowerError::Internal("result level without assembly".into())),
        }
    }

    /// Whether the result's entry at the current coordinates may not exist
    /// (`entry_flag`): reductions still to run, an operand located here
    /// that may not hold it, or an operand that may hold fill.
    fn entry_may_miss(&self, next: usize, st: &State, expr: &LExpr) -> bool {
        matches!(st.sink, Sink::Direct)
            && (next < self.order.len()
                || self.holds_fill(expr)
                || st.presence(expr) != Expr::Bool(true))
    }

    /// The result's last coordinate `coord` where the entry may be missing
    /// (`entry_may_miss`): the value is added into a scalar, and only if it
    /// is an entry does `place` give the coordinate its position (touch a
    /// workspace row, insert into a hashed level), to which it is added.
    fn place_if_present(
        &mut self,
        next: usize,
        mut st: State,
        expr: LExpr,
        coord: Expr,
        place: impl FnOnce(&mut Self) -> Result<Expr, LowerError>,
    ) -> Result<(), LowerError> {
        let sum = self.e.let_var("tsum", Expr::Float(0.0));
        let (touched, present) = self.entry_flag(next, &st, &expr);
        st.sink = Sink::Temp {
            sum: sum.clone(),
            touched,
        };
        // The result's levels are all resolved (the sink holds the value).
        st.pos[0].push(coord);
        self.lower(next, st, expr)?;
        self.e.open();
        let at = place(self)?;
        let vals = self.result_values();
        self.accumulating_stores += 1;
        self.e.store(
            vals.clone(),
            at.clone(),
            Expr::add(Expr::load(vals, at), sum),
        );
        let add = self.e.close();
        self.guard_entry(present, add);
        Ok(())
    }

    /// Whether the result's entry at the current coordinates exists, for
    /// a sparse result that must not store explicit zeros: with
    /// reductions still to run, or an operand that may hold fill (a dense
    /// copy of a sparse one, which must not make the result dense), a flag (returned first) that the leaves
    /// set where they meet an entry; else whether the operands located
    /// here were found. The second is the condition that guards the entry.
    fn entry_flag(&mut self, next: usize, st: &State, expr: &LExpr) -> (Option<Expr>, Expr) {
        if next < self.order.len() || self.holds_fill(expr) {
            let touched = self.e.let_var("ttouched", Expr::Int(0));
            return (Some(touched.clone()), Expr::ne(touched, Expr::Int(0)));
        }
        (None, st.presence(expr))
    }

    /// `body` where `present` holds (unguarded where it always does).
    fn guard_entry(&mut self, present: Expr, body: Vec<Stmt>) {
        match present {
            Expr::Bool(true) => body.into_iter().for_each(|s| self.e.push(s)),
            cond => self.e.push(Stmt::If {
                cond,
                then: body,
                els: Vec::new(),
            }),
        }
    }

    fn append_chain(&mut self, h: usize, at: &Expr, coords: &[Expr]) {
        append_chain_coords(self.p.output(), &mut self.e, h, at, coords);
    }

    /// The innermost body: compute the value and add it to the sink.
    pub(super) fn leaf(&mut self, st: &State, expr: &LExpr) {
        let value = self.value(st, expr);
        match &st.sink {
            Sink::Temp {
                sum,
                touched: Some(t),
            } => {
                let mut present = st.presence(expr);
                let mut value = value;
                if self.holds_fill(expr) {
                    // Where fill takes part, an entry is a nonzero value.
                    value = self.e.bind("tvalue", value);
                    present = Expr::and(present, Expr::ne(value.clone(), Expr::Float(0.0)));
                }
                self.e.set(sum, Expr::add(sum.clone(), value));
                let mark = self.e.block(|e| e.set(t, Expr::Int(1)));
                self.guard_entry(present, mark);
            }
            Sink::Temp { sum, touched: None } => self.e.set(sum, Expr::add(sum.clone(), value)),
            Sink::Direct => {
                self.accumulating_stores += 1;
                let vals = self.result_values();
                let pos = st.pos[0].last().cloned().unwrap_or(Expr::Int(0));
                self.e.store(
                    vals.clone(),
                    pos.clone(),
                    Expr::add(Expr::load(vals, pos), value),
                );
            }
        }
    }

    fn value(&mut self, st: &State, e: &LExpr) -> Expr {
        let mut known = BTreeMap::new();
        self.value_with(st, e, &mut known, true)
    }

    /// The value of `e`; `known` holds operand values already loaded (read
    /// once, used by a guard and the product). At the top of a product
    /// whose factors may have no entry here, the product is 0 unless every
    /// factor has one (`factor_presence`): fill is no entry, and `0 * inf`
    /// must not become a NaN the tensors do not hold.
    fn value_with(
        &mut self,
        st: &State,
        e: &LExpr,
        known: &mut BTreeMap<OperandId, Expr>,
        top: bool,
    ) -> Expr {
        if let (LExpr::Bin(BinOp::Mul, ..), true) = (e, top) {
            let present = self.factor_presence(st, e, known);
            if present != Expr::Bool(true) {
                let product = self.value_with(st, e, known, false);
                return Expr::select(present, product, Expr::Float(0.0));
            }
        }
        let top_of = |x: &LExpr| {
            !matches!(
                (e, x),
                (LExpr::Bin(BinOp::Mul, ..), LExpr::Bin(BinOp::Mul, ..))
            )
        };
        match e {
            LExpr::Const(v) => Expr::Float(*v),
            LExpr::Neg(x) => {
                let v = self.value_with(st, x, known, top);
                Expr::neg(v)
            }
            LExpr::Bin(op, a, b) => {
                let x = self.value_with(st, a, known, top_of(a));
                let y = self.value_with(st, b, known, top_of(b));
                let op = match op {
                    BinOp::Add => crate::ir::BinOp::Add,
                    BinOp::Sub => crate::ir::BinOp::Sub,
                    BinOp::Mul => crate::ir::BinOp::Mul,
                };
                Expr::Bin(op, Box::new(x), Box::new(y))
            }
            LExpr::Access(op) if known.contains_key(op) => known[op].clone(),
            LExpr::Access(op) => match st.found[*op].clone() {
                Expr::Bool(true) => self.stored_value(st, *op),
                // Read only where the operand was found: elsewhere its
                // position need not be one the values array holds.
                found => {
                    let x = self.e.let_var("val", Expr::Float(0.0));
                    self.e.open();
                    let v = self.stored_value(st, *op);
                    self.e.set(&x, v);
                    let then = self.e.close();
                    self.e.push(Stmt::If {
                        cond: found,
                        then,
                        els: Vec::new(),
                    });
                    x
                }
            },
        }
    }

    /// Whether an operand of `e` may hold fill among its values.
    fn holds_fill(&self, e: &LExpr) -> bool {
        e.operands()
            .iter()
            .any(|op| self.p.operands[*op].format.values_may_hold_fill())
    }

    /// Where `e`, a product or one of its factors, has an entry here,
    /// whatever its values: a product where every factor has one, a sum
    /// where any term does, a constant everywhere. An operand whose values
    /// may hold fill, or one located where it may have no entry (whose
    /// value there reads 0: a hashed `x` probed in a BCSR block's
    /// padding, `D(k,j)` of `(B(k,j,i) + D(k,j)) - D(k,j)` at an `i` of no
    /// `B`), where its value, bound in `known`, is nonzero; any other has
    /// one (the case that computes `e` visits it).
    fn factor_presence(
        &mut self,
        st: &State,
        e: &LExpr,
        known: &mut BTreeMap<OperandId, Expr>,
    ) -> Expr {
        for op in e.operands() {
            let may_miss = self.p.operands[op].format.values_may_hold_fill()
                || st.found[op] != Expr::Bool(true);
            if may_miss && !known.contains_key(&op) {
                let v = self.value_with(st, &LExpr::Access(op), known, false);
                let v = self.e.bind("fill", v);
                known.insert(op, v);
            }
        }
        // Bound above exactly where the operand may miss; every constant
        // has an entry (`0 * inf` of a written 0 is NaN, as in NumPy).
        e.presence_where(
            &|op| match known.get(&op) {
                Some(v) => Expr::ne(v.clone(), Expr::Float(0.0)),
                None => Expr::Bool(true),
            },
            &|_| true,
        )
    }

    /// The value operand `op` stores at its resolved position.
    fn stored_value(&mut self, st: &State, op: OperandId) -> Expr {
        let o = &self.p.operands[op];
        let vals = ArrayRef::vals(&o.tensor);
        let pos = st.pos[op].last().cloned().unwrap_or(Expr::Int(0));
        match &st.run_end[op] {
            // Duplicates at the bottom level: sum their values.
            Some(end) if st.pos[op].len() == o.level_vars.len() => {
                let s = self.e.let_var("dupsum", Expr::Float(0.0));
                self.e.for_("pdup", pos, end.clone(), |e, q| {
                    e.set(&s, Expr::add(s.clone(), Expr::load(vals.clone(), q)))
                });
                s
            }
            _ => Expr::load(vals, pos),
        }
    }
}

/// Append `coords` to the result's levels from `h` on (an append chain:
/// one position `at` for all of them).
pub(super) fn append_chain_coords(
    o: &super::operands::Operand,
    e: &mut crate::ir::Emitter,
    h: usize,
    at: &Expr,
    coords: &[Expr],
) {
    for (l, coord) in (h..).zip(coords) {
        if let Assembly::Append(app) = o.format.levels[l].assembly() {
            app.append_coord(&LevelCtx::new(&o.tensor, l), e, at.clone(), coord.clone());
        }
    }
}
