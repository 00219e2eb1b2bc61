//! Two-lane vector loops. Cranelift does not vectorize, and the cc tier's
//! compiler does: an innermost `for` over consecutive `f64` elements (SpDM's
//! and MTTKRP's loops over a dense row, DIA's loop along a diagonal, zero
//! fills) runs `f64x2` operations here, four vectors per iteration, followed
//! by the scalar loop for the remaining iterations.
//!
//! A loop qualifies by the shape of its body, whatever the formats behind
//! it: only `let`s and `f64` stores; every array index either the same in
//! all iterations (`Uniform`) or the loop index plus something that is
//! (`Unit`: consecutive iterations, consecutive elements); every value a
//! lane computes on its own. Each lane does exactly the scalar loop's
//! operations in the same order, so results are bitwise those of the
//! scalar loop. An array the loop stores is read only at the index it is
//! stored at, so no lane reads what another lane writes.
//!
//! A short loop the translator unrolls (a block's row in `BCSR(4)`) may
//! also add into sums (`s += term`): its terms are computed in lanes and
//! then added to `s` one lane after the other, in the scalar loop's order,
//! so the sum is bitwise the scalar one. What lanes save there is the
//! work per term: a block row's four loads, products and stored-zero tests
//! are two vector operations each instead of four scalar ones.

use super::translate::Translator;
use crate::ir::{ArrayRef, BinOp, ElemTy, Expr, Stmt, Ty, VarId, VarInfo};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::Variable;
use std::collections::{BTreeMap, BTreeSet};

/// Elements per vector (`f64x2`: the widest vector Cranelift's x64 backend
/// lowers).
pub(super) const LANES: i64 = 2;
/// Vectors per iteration: independent operations to overlap, and the loop's
/// own test paid once per eight elements.
const UNROLL: i64 = 4;

/// Where the vector body being emitted stands: the loop index at the
/// iteration's first lane, which of its vectors, and the lanes of the
/// vector `let`s so far.
struct Lanes {
    k: Value,
    copy: i64,
    vars: BTreeMap<VarId, Value>,
}

/// How a value varies across the lanes of one vector iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    /// The same in every lane: computed once, as a scalar.
    Uniform,
    /// An integer equal to the loop index plus a `Uniform` value: the
    /// first lane's value, the others following it.
    Unit,
    /// An `f64` per lane.
    Floats,
    /// A comparison result per lane.
    Mask,
}

/// A loop found vectorizable: how each of its body's `let`s varies.
pub(super) struct Plan<'v> {
    index: VarId,
    lets: BTreeMap<VarId, Class>,
    /// The expressions of `Unit` lets, to find their uniform part.
    unit_lets: BTreeMap<VarId, Expr>,
    stored: BTreeMap<ArrayRef, Expr>,
    /// Every variable the body declares: one read before its `let` would
    /// be the previous iteration's value, which lanes cannot give.
    declared: BTreeSet<VarId>,
    /// The sums the body adds into (`s += term`), each at one place and
    /// read nowhere else.
    sums: BTreeSet<VarId>,
    vars: &'v [VarInfo],
}

/// Whether a loop may add into sums: only where the lanes' terms are then
/// added one at a time (`Translator::unrolled_vector_loop`). The long
/// loops' vector path does not: there the chain of adds, not the terms,
/// sets the pace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sums {
    Refused,
    InLaneOrder,
}

/// `term` of `s = s + term`.
fn sum_term(s: VarId, e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Bin(BinOp::Add, a, term) if **a == Expr::Var(s) => Some(term),
        _ => None,
    }
}

/// The plan for `for index in ..: body`, or `None` when the loop does not
/// have the shape described above.
pub(super) fn plan<'v>(
    index: VarId,
    body: &[Stmt],
    vars: &'v [VarInfo],
    sums: Sums,
) -> Option<Plan<'v>> {
    let declared = body
        .iter()
        .filter_map(|s| {
            if let Stmt::Let(v, _) = s {
                Some(*v)
            } else {
                None
            }
        })
        .collect();
    let mut p = Plan {
        index,
        lets: BTreeMap::new(),
        unit_lets: BTreeMap::new(),
        stored: BTreeMap::new(),
        declared,
        sums: BTreeSet::new(),
        vars,
    };
    // Every stored array, at the one index it is stored at; every sum.
    for s in body {
        match s {
            Stmt::Set(v, e) if sums == Sums::InLaneOrder && sum_term(*v, e).is_some() => {
                let float = vars.get(*v as usize).is_some_and(|i| i.ty == Ty::F64);
                if !float || *v == index || p.declared.contains(v) || !p.sums.insert(*v) {
                    return None;
                }
            }
            Stmt::Store(a, i, _) => {
                if a.elem() != ElemTy::F64 || p.stored.get(a).is_some_and(|j| j != i) {
                    return None;
                }
                p.stored.insert(a.clone(), i.clone());
            }
            Stmt::Let(..) | Stmt::Comment(_) | Stmt::Unlikely => {}
            _ => return None,
        }
    }
    for s in body {
        match s {
            Stmt::Let(v, e) => {
                if *v == index || p.lets.contains_key(v) {
                    return None;
                }
                let c = p.classify(e)?;
                if c == Class::Unit {
                    p.unit_lets.insert(*v, e.clone());
                }
                p.lets.insert(*v, c);
            }
            Stmt::Store(_, i, v) => {
                if p.classify(i)? != Class::Unit
                    || !matches!(p.classify(v)?, Class::Floats | Class::Uniform)
                {
                    return None;
                }
            }
            // A term never reads its sum: `classify` refuses sums.
            Stmt::Set(v, e) => {
                let term = sum_term(*v, e)?;
                if !matches!(p.classify(term)?, Class::Floats | Class::Uniform) {
                    return None;
                }
            }
            _ => {}
        }
    }
    // Loads of stored arrays only at the stored index.
    let mut ok = true;
    for s in body {
        for e in crate::ir::stmt_exprs(s) {
            e.walk(&mut |x| {
                if let Expr::Load(a, i) = x {
                    ok &= p.stored.get(a).is_none_or(|j| **i == *j);
                }
            });
        }
    }
    ok.then_some(p)
}

impl Plan<'_> {
    fn is_float(&self, e: &Expr) -> bool {
        e.ty(self.vars) == Ty::F64
    }

    /// `u` with `e = u + index`, for `e` of class `Unit`.
    fn uniform_part(&self, e: &Expr) -> Option<Expr> {
        match e {
            Expr::Var(v) if *v == self.index => Some(Expr::Int(0)),
            Expr::Var(v) => self.uniform_part(self.unit_lets.get(v)?),
            Expr::Bin(op @ (BinOp::Add | BinOp::Sub), a, b) if self.classify(a)? == Class::Unit => {
                Some(Expr::bin(*op, self.uniform_part(a)?, (**b).clone()))
            }
            Expr::Bin(BinOp::Add, a, b) if self.classify(b)? == Class::Unit => {
                Some(Expr::add((**a).clone(), self.uniform_part(b)?))
            }
            _ => None,
        }
    }

    /// How `e` varies across lanes, or `None` when lanes cannot compute it
    /// (a gather, a stride other than one, integer arithmetic per lane).
    pub(super) fn classify(&self, e: &Expr) -> Option<Class> {
        use Class::*;
        Some(match e {
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Param(_) => Uniform,
            Expr::Var(v) if *v == self.index => Unit,
            // A sum is read only by its own add, one lane at a time.
            Expr::Var(v) if self.sums.contains(v) => return None,
            // Variables the body does not assign are the same in every lane.
            Expr::Var(v) => match self.lets.get(v) {
                Some(c) => *c,
                None if self.declared.contains(v) => return None,
                None => Uniform,
            },
            Expr::Load(a, i) => match (self.classify(i)?, a.elem()) {
                (Uniform, _) if !self.stored.contains_key(a) => Uniform,
                (Unit, ElemTy::F64) => Floats,
                _ => return None,
            },
            Expr::Bin(op, a, b) => match (self.classify(a)?, self.classify(b)?) {
                (Uniform, Uniform) => Uniform,
                (Unit, Uniform) if matches!(op, BinOp::Add | BinOp::Sub) => Unit,
                (Uniform, Unit) if *op == BinOp::Add => Unit,
                (Floats | Uniform, Floats | Uniform) if float_op(*op) && self.is_float(a) => Floats,
                _ => return None,
            },
            Expr::Cmp(_, a, b) => match (self.classify(a)?, self.classify(b)?) {
                (Uniform, Uniform) => Uniform,
                (Floats | Uniform, Floats | Uniform) if self.is_float(a) => Mask,
                _ => return None,
            },
            Expr::Not(a) => match self.classify(a)? {
                Uniform => Uniform,
                _ => return None,
            },
            Expr::Neg(a) => match self.classify(a)? {
                Uniform => Uniform,
                Floats => Floats,
                _ => return None,
            },
            Expr::Select(c, a, b) => {
                match (self.classify(c)?, self.classify(a)?, self.classify(b)?) {
                    (Uniform, Uniform, Uniform) => Uniform,
                    (Uniform | Mask, Floats | Uniform, Floats | Uniform) if self.is_float(a) => {
                        Floats
                    }
                    _ => return None,
                }
            }
        })
    }
}

/// Whether `for _ in lo..hi` says it runs too few iterations for a vector
/// loop to pay: `hi` is `min(lo + c, ..)` (either way round) with `c`
/// under two vector iterations' elements, so the vector loop would run
/// once at most and only cost its compile (the rest after a row's strips,
/// `ir::strips`).
pub(super) fn too_short(lo: &Expr, hi: &Expr) -> bool {
    let Expr::Bin(BinOp::Min, a, b) = hi else {
        return false;
    };
    let most = |e: &Expr| match e {
        Expr::Bin(BinOp::Add, x, c) if **x == *lo => c.as_int(),
        _ => None,
    };
    most(a)
        .or_else(|| most(b))
        .is_some_and(|c| c < 2 * LANES * UNROLL)
}

/// Whether a loop from `lo` to `hi` runs a whole number of vector
/// iterations (`LANES * UNROLL` elements each) whenever it runs: both
/// bounds multiples of it, as the zero fills of dense rows of 8, 16 or 32
/// columns are (`fill_next * 32..(row + 1) * 32`). The vector loop then
/// leaves no iterations to a scalar loop, which is not made.
pub(super) fn whole_steps(lo: &Expr, hi: &Expr) -> bool {
    let step = LANES * UNROLL;
    gcd(multiple_of(lo), multiple_of(hi)) % step == 0
}

/// A number `e` is always a multiple of (0 for 0, 1 where unknown).
fn multiple_of(e: &Expr) -> i64 {
    match e {
        Expr::Int(c) => c.checked_abs().unwrap_or(1),
        Expr::Bin(BinOp::Mul, a, b) => multiple_of(a).checked_mul(multiple_of(b)).unwrap_or(1),
        Expr::Bin(BinOp::Add | BinOp::Sub, a, b) => gcd(multiple_of(a), multiple_of(b)),
        _ => 1,
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    match b {
        0 => a,
        _ => gcd(b, a % b),
    }
}

pub(super) fn float_op(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max
    )
}

/// Vector accesses: never trapping (validated positions), but only
/// element-aligned, so not `aligned`.
pub(super) fn vector_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

impl Translator<'_, '_> {
    /// The vector part of `for var in lo..hi { body }`: runs while eight
    /// elements remain and leaves `var` at the first iteration it did not
    /// run, for the scalar loop to finish.
    /// `x op y` on vectors of `f64`, for the operations `float_op` admits.
    pub(super) fn vector_float_op(
        &mut self,
        op: BinOp,
        x: Value,
        y: Value,
    ) -> Result<Value, String> {
        let ins = self.b.ins();
        Ok(match op {
            BinOp::Add => ins.fadd(x, y),
            BinOp::Sub => ins.fsub(x, y),
            BinOp::Mul => ins.fmul(x, y),
            BinOp::Div => ins.fdiv(x, y),
            BinOp::Min => ins.fmin(x, y),
            BinOp::Max => ins.fmax(x, y),
            _ => return Err(format!("vector lanes: {op:?} is not a float operation")),
        })
    }

    pub(super) fn vector_loop(
        &mut self,
        plan: &Plan,
        var: Variable,
        lo: Value,
        hi: Value,
        body: &[Stmt],
    ) -> Result<(), String> {
        let step = LANES * UNROLL;
        self.b.def_var(var, lo);
        let limit = self.b.ins().iadd_imm_s(hi, -(step - 1));
        let enter = self.b.ins().icmp(IntCC::SignedLessThan, lo, limit);
        let (pre, vbody, rest) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(enter, pre, &[], rest, &[]);
        self.b.seal_block(pre);
        self.b.switch_to_block(pre);
        let outer = self.enter_loop(self.invariant_loads(plan.index, body), body)?;
        self.b.ins().jump(vbody, &[]);
        self.b.switch_to_block(vbody);
        let k = self.b.use_var(var);
        let mut lanes = Lanes {
            k,
            copy: 0,
            vars: BTreeMap::new(),
        };
        let scope = self.scope();
        for copy in 0..UNROLL {
            lanes.copy = copy;
            self.vector_body(plan, &mut lanes, body)?;
        }
        self.close_scope(scope);
        self.leave_loop(outer);
        self.loop_back(var, k, step, limit, vbody, rest);
        Ok(())
    }

    /// One vector of an iteration: lanes `k + copy * LANES` onwards.
    fn vector_body(&mut self, plan: &Plan, lanes: &mut Lanes, body: &[Stmt]) -> Result<(), String> {
        lanes.vars.clear();
        for s in body {
            match s {
                Stmt::Let(v, e) => match plan.lets.get(v) {
                    Some(Class::Floats | Class::Mask) => {
                        let x = self.vexpr(plan, lanes, e)?;
                        lanes.vars.insert(*v, x);
                    }
                    // Needed only inside addresses, which take their
                    // uniform part instead (`vector_address`).
                    Some(Class::Unit) => {}
                    _ if lanes.copy == 0 => self.stmt(s)?,
                    _ => {}
                },
                Stmt::Store(a, i, v) => {
                    let (addr, offset) = self.vector_address(plan, lanes, a, i)?;
                    let x = self.vexpr(plan, lanes, v)?;
                    let f = self.elems_with(vector_flags());
                    self.b.ins().store(f, x, addr, offset);
                }
                Stmt::Set(v, e) => {
                    let term = sum_term(*v, e).ok_or("vector loop: a set that is no sum")?;
                    let x = self.vexpr(plan, lanes, term)?;
                    let var = self.var(*v)?;
                    let mut sum = self.b.use_var(var);
                    for lane in 0..LANES as u8 {
                        let t = self.b.ins().extractlane(x, lane);
                        sum = self.b.ins().fadd(sum, t);
                    }
                    self.b.def_var(var, sum);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `for var in lo..hi { body }` of a constant trip count, which the
    /// translator unrolls, with pairs of iterations as vectors and an odd
    /// last one scalar. A loop clipped to a bound (`hi` is `min(h, clip)`,
    /// `translate::unrolled`; `bound` is the clip's value) runs so when the
    /// bound leaves it whole, and as the scalar unrolled loop otherwise
    /// (the last block of a dimension no multiple of the block size).
    pub(super) fn unrolled_vector_loop(
        &mut self,
        plan: &Plan,
        var: Variable,
        (lo, hi, bound): (i64, i64, Option<Value>),
        body: &[Stmt],
    ) -> Result<(), String> {
        let (whole, done) = (self.b.create_block(), self.b.create_block());
        match bound {
            Some(bound) => {
                let inside = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, bound, hi);
                let part = self.b.create_block();
                self.b.ins().brif(inside, whole, &[], part, &[]);
                self.b.seal_block(part);
                self.b.switch_to_block(part);
                let first_new = self.b.func.dfg.num_blocks();
                self.unrolled_loop(var, (lo, hi, Some(bound)), body)?;
                self.b.ins().jump(done, &[]);
                // Only a dimension's last block is cut short.
                self.set_cold(part, first_new);
            }
            None => {
                self.b.ins().jump(whole, &[]);
            }
        }
        self.b.seal_block(whole);
        self.b.switch_to_block(whole);
        let mut lanes = Lanes {
            k: self.b.ins().iconst(types::I64, lo),
            copy: 0,
            vars: BTreeMap::new(),
        };
        let scope = self.scope();
        for copy in 0..(hi - lo) / LANES {
            lanes.copy = copy;
            self.vector_body(plan, &mut lanes, body)?;
        }
        self.close_scope(scope);
        if (hi - lo) % LANES != 0 {
            let last = self.b.ins().iconst(types::I64, hi - 1);
            self.b.def_var(var, last);
            self.block(body)?;
        }
        self.b.ins().jump(done, &[]);
        self.b.seal_block(done);
        self.b.switch_to_block(done);
        Ok(())
    }

    /// The address of the vector at `index` (class `Unit`) as a pointer and
    /// a constant offset: `a + u` is the same in every iteration (Cranelift
    /// computes it once, before the loop), so each access is one x64
    /// addressing mode, `(a + u) + k * 8 + copy * 16`.
    fn vector_address(
        &mut self,
        plan: &Plan,
        lanes: &Lanes,
        a: &crate::ir::ArrayRef,
        index: &Expr,
    ) -> Result<(Value, i32), String> {
        let u = plan
            .uniform_part(index)
            .ok_or("vector loop: index without a uniform part")?;
        let u = self.expr(&u)?;
        let base = self.base(a)?;
        let row = self.element(base, a, u);
        let addr = self.element(row, a, lanes.k);
        Ok((addr, (lanes.copy * LANES * 8) as i32))
    }

    /// `e` as a vector: `f64x2`, or `i64x2` for a comparison's mask.
    fn vexpr(&mut self, plan: &Plan, lanes: &Lanes, e: &Expr) -> Result<Value, String> {
        let class = plan
            .classify(e)
            .ok_or("vector loop: expression the plan refused")?;
        if class == Class::Uniform {
            let x = self.expr(e)?;
            return Ok(self.b.ins().splat(types::F64X2, x));
        }
        Ok(match e {
            Expr::Var(v) => *lanes
                .vars
                .get(v)
                .ok_or("vector loop: lanes of an undefined variable")?,
            Expr::Load(a, i) => {
                let (addr, offset) = self.vector_address(plan, lanes, a, i)?;
                let f = if self.writes(a)? {
                    self.elems_with(vector_flags())
                } else {
                    vector_flags().with_readonly()
                };
                self.b.ins().load(types::F64X2, f, addr, offset)
            }
            Expr::Bin(op, a, b) => {
                let (x, y) = (self.vexpr(plan, lanes, a)?, self.vexpr(plan, lanes, b)?);
                self.vector_float_op(*op, x, y)?
            }
            Expr::Cmp(op, a, b) => {
                let (x, y) = (self.vexpr(plan, lanes, a)?, self.vexpr(plan, lanes, b)?);
                self.b.ins().fcmp(super::translate::float_cc(*op), x, y)
            }
            Expr::Neg(a) => {
                let x = self.vexpr(plan, lanes, a)?;
                self.b.ins().fneg(x)
            }
            Expr::Select(c, a, b) => {
                let (x, y) = (self.vexpr(plan, lanes, a)?, self.vexpr(plan, lanes, b)?);
                if plan.classify(c) == Some(Class::Uniform) {
                    let c = self.expr(c)?;
                    self.b.ins().select(c, x, y)
                } else {
                    let mask = self.vexpr(plan, lanes, c)?;
                    self.mask_select(mask, x, y, b)
                }
            }
            _ => return Err("vector loop: expression without lanes".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Emitter, Function};

    /// Bounds that are multiples of a vector iteration's elements leave
    /// no iterations after the vector loop; others may.
    #[test]
    fn bounds_that_are_multiples_of_the_step_leave_no_rest() {
        let v = |id| Expr::Var(id);
        let times = |e: Expr, k| Expr::mul(e, Expr::Int(k));
        let row = |k| (times(v(0), k), times(Expr::add(v(1), Expr::Int(1)), k));
        let (lo, hi) = row(32);
        assert!(whole_steps(&lo, &hi));
        let (lo, hi) = row(8);
        assert!(whole_steps(&lo, &hi));
        assert!(whole_steps(&Expr::Int(0), &times(v(1), 16)));
        let (lo, hi) = row(12);
        assert!(!whole_steps(&lo, &hi), "12 is no multiple of 8");
        assert!(!whole_steps(&Expr::Int(0), &v(1)));
        assert!(!whole_steps(&Expr::Int(4), &times(v(1), 16)));
        let plus_four = Expr::add(times(v(1), 16), Expr::Int(4));
        assert!(!whole_steps(&Expr::Int(0), &plus_four));
    }

    /// A loop bounded by `min(lo + c, ..)` says it runs at most `c`
    /// iterations: too short for a vector loop under 16.
    #[test]
    fn a_loop_that_says_it_runs_under_two_vector_iterations_is_too_short() {
        let (lo, n) = (Expr::Var(0), Expr::Var(1));
        let at_most = |c: i64| Expr::add(lo.clone(), Expr::Int(c));
        let min = |a: Expr, b: Expr| Expr::Bin(BinOp::Min, Box::new(a), Box::new(b));
        assert!(too_short(&lo, &min(at_most(15), n.clone())));
        assert!(too_short(&lo, &min(n.clone(), at_most(7))));
        assert!(!too_short(&lo, &min(at_most(16), n.clone())));
        assert!(!too_short(&lo, &n));
        // Bounded from another start: says nothing of this loop.
        let other = Expr::add(Expr::Var(2), Expr::Int(3));
        assert!(!too_short(&lo, &min(other, n)));
    }

    fn planned(f: &Function) -> Option<Vec<Class>> {
        match f.body.last()? {
            Stmt::For { var, body, .. } => {
                plan(*var, body, &f.vars, Sums::Refused).map(|p| p.lets.values().copied().collect())
            }
            _ => None,
        }
    }

    /// `for k in 0..n { let p = base + k; y[p] = y[p] + a * x[at(k)]; extra }`.
    fn row_update(at: impl Fn(Expr) -> Expr, extra: impl Fn(&mut Emitter, Expr)) -> Function {
        let mut e = Emitter::new();
        let base = e.let_var("base", Expr::Int(8));
        let a = e.let_var("a", Expr::Float(2.0));
        let y = ArrayRef::vals("y");
        e.for_("k", Expr::Int(0), Expr::Int(10), |e, k| {
            let p = e.let_var("p", Expr::add(base.clone(), k.clone()));
            let term = Expr::mul(a.clone(), Expr::load(ArrayRef::vals("x"), at(k.clone())));
            e.store(
                y.clone(),
                p.clone(),
                Expr::add(Expr::load(y.clone(), p), term),
            );
            extra(e, k);
        });
        e.finish("k")
    }

    #[test]
    fn a_row_update_over_consecutive_elements_runs_in_lanes() {
        assert_eq!(
            planned(&row_update(|k| k, |_, _| {})),
            Some(vec![Class::Unit])
        );
    }

    #[test]
    fn a_guarded_product_runs_in_lanes() {
        // DIA's loop body: a select on a per-lane comparison.
        let f = row_update(
            |k| k,
            |e, k| {
                let v = e.let_var("v", Expr::load(ArrayRef::vals("A"), k.clone()));
                let t = e.let_var(
                    "t",
                    Expr::select(Expr::ne(v.clone(), Expr::Float(0.0)), v, Expr::Float(0.0)),
                );
                e.store(ArrayRef::vals("z"), k, t);
            },
        );
        assert_eq!(
            planned(&f),
            Some(vec![Class::Unit, Class::Floats, Class::Floats])
        );
    }

    /// `for j in 0..4 { let p = base + j; let v = A[p]; s += v != 0 ? v * x[p] : 0 }`
    /// (a block row of `BCSR`), with `extra` after it.
    fn block_row(extra: impl Fn(&mut Emitter, Expr, Expr)) -> Function {
        let mut e = Emitter::new();
        let base = e.let_var("base", Expr::Int(8));
        let sum = e.let_var("s", Expr::Float(0.0));
        e.for_("j", Expr::Int(0), Expr::Int(4), |e, j| {
            let p = e.let_var("p", Expr::add(base.clone(), j.clone()));
            let v = e.let_var("v", Expr::load(ArrayRef::vals("A"), p.clone()));
            let term = Expr::select(
                Expr::ne(v.clone(), Expr::Float(0.0)),
                Expr::mul(v, Expr::load(ArrayRef::vals("x"), p)),
                Expr::Float(0.0),
            );
            e.set(&sum, Expr::add(sum.clone(), term));
            extra(e, j, sum.clone());
        });
        e.finish("j")
    }

    fn planned_sums(f: &Function) -> Option<Vec<VarId>> {
        match f.body.last()? {
            Stmt::For { var, body, .. } => {
                plan(*var, body, &f.vars, Sums::InLaneOrder).map(|p| p.sums.into_iter().collect())
            }
            _ => None,
        }
    }

    #[test]
    fn a_sum_of_terms_in_lanes_is_planned_only_where_sums_are_added_in_lane_order() {
        let f = block_row(|_, _, _| {});
        assert_eq!(planned_sums(&f).map(|s| s.len()), Some(1));
        let Some(Stmt::For { var, body, .. }) = f.body.last() else {
            panic!("no loop")
        };
        assert!(plan(*var, body, &f.vars, Sums::Refused).is_none());
    }

    #[test]
    fn a_sum_read_elsewhere_or_added_twice_stays_scalar() {
        // `z[j] = s`: the running sum, which lanes do not have.
        let f = block_row(|e, j, s| e.store(ArrayRef::vals("z"), j, s));
        assert_eq!(planned_sums(&f), None);
        // `s += 1` after `s += term`: lane order would interleave the two.
        let f = block_row(|e, _, s| e.set(&s, Expr::add(s.clone(), Expr::Float(1.0))));
        assert_eq!(planned_sums(&f), None);
        // `s = term + s` is not the form whose order is kept.
        let f = block_row(|e, j, _| {
            let t = e.let_var("t", Expr::Float(0.0));
            e.set(&t, Expr::add(Expr::load(ArrayRef::vals("y"), j), t.clone()));
        });
        assert_eq!(planned_sums(&f), None);
    }

    #[test]
    fn gathers_and_strides_stay_scalar() {
        assert_eq!(
            planned(&row_update(
                |k| Expr::load(ArrayRef::level("A", 1, "crd"), k),
                |_, _| {}
            )),
            None
        );
        assert_eq!(
            planned(&row_update(|k| Expr::mul(k, Expr::Int(2)), |_, _| {})),
            None
        );
    }

    #[test]
    fn a_stored_array_read_at_another_index_stays_scalar() {
        // z[k] = y[k + 1] beside y[base + k] += ...: a lane would read what another writes.
        let f = row_update(
            |k| k,
            |e, k| {
                e.store(
                    ArrayRef::vals("z"),
                    k.clone(),
                    Expr::load(ArrayRef::vals("y"), Expr::add(k, Expr::Int(1))),
                )
            },
        );
        assert_eq!(planned(&f), None);
    }

    #[test]
    fn a_variable_read_before_its_let_stays_scalar() {
        // `z[k] = v; let v = x[k]`: each iteration reads the last one's `v`.
        let mut e = Emitter::new();
        e.for_("k", Expr::Int(0), Expr::Int(10), |e, k| {
            let v = e.let_var("v", Expr::load(ArrayRef::vals("x"), k.clone()));
            e.store(ArrayRef::vals("z"), k, v);
        });
        let mut f = e.finish("k");
        assert!(planned(&f).is_some());
        if let Some(Stmt::For { body, .. }) = f.body.last_mut() {
            body.reverse();
        }
        assert_eq!(planned(&f), None);
    }

    #[test]
    fn loops_with_control_flow_or_integer_stores_stay_scalar() {
        let f = row_update(
            |k| k,
            |e, k| e.store(ArrayRef::level("A", 1, "pos"), k, Expr::Int(0)),
        );
        assert_eq!(planned(&f), None);
        let f = row_update(
            |k| k,
            |e, k| {
                e.if_(Expr::lt(k.clone(), Expr::Int(3)), |e| {
                    e.store(ArrayRef::vals("z"), k, Expr::Float(1.0))
                })
            },
        );
        assert_eq!(planned(&f), None);
    }
}
