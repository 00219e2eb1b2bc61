//! Pairs of `f64` variables held as one `f64x2`. Cranelift keeps every
//! scalar in a register of its own, so the sums of a row strip
//! (`ir::strips`: `let s0 = C[x]; let s1 = C[x + 1]; for p { s0 += a *
//! D[y]; s1 += a * D[y + 1] }; C[x] = s0; C[x + 1] = s1`) would take a
//! register and an instruction per element, where the C compiler pairs
//! them into vectors itself. Here two variables become the lanes of one
//! vector when every statement that names either is one of two adjacent
//! statements alike but for the lane: the same operations, the first
//! naming the first variable where the second names the second, and
//! loading element `i` where the second loads element `i + 1`.
//!
//! Each lane computes exactly what its scalar statement did, so results
//! are bitwise those of the scalar code. Running two statements as one is
//! sound because neither reads what the other writes: the second never
//! reads the first's variable (a lane reads only its own), and a pair of
//! stores reads the stored array only at the elements it stores.

use super::translate::Translator;
use super::vector::{float_op, vector_flags};
use crate::ir::{ArrayRef, BinOp, Block, ElemTy, Expr, Stmt, VarId};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The variables held in vectors: each first lane with its second.
#[derive(Clone, Default, Debug)]
pub(super) struct Pairs {
    second_of: BTreeMap<VarId, VarId>,
    paired: BTreeSet<VarId>,
}

/// Two expressions matched lane by lane.
pub(super) enum Lanes<'e> {
    /// The same in both lanes (reads no paired variable): one scalar.
    Same(&'e Expr),
    /// A pair of variables.
    Var(VarId),
    /// Elements `index` and `index + 1` of an `f64` array.
    Load(&'e ArrayRef, &'e Expr),
    Bin(BinOp, Box<Lanes<'e>>, Box<Lanes<'e>>),
    Neg(Box<Lanes<'e>>),
}

/// Two adjacent statements run as one.
pub(super) enum PairedStmt<'s> {
    /// `let`/set of a pair of variables (the first named).
    Def(VarId, Lanes<'s>),
    /// Elements `index` and `index + 1` of an `f64` array.
    Store(&'s ArrayRef, &'s Expr, Lanes<'s>),
}

impl Pairs {
    pub(super) fn is_first(&self, v: VarId) -> bool {
        self.second_of.contains_key(&v)
    }

    /// Whether `s` names a paired variable (defines it or reads it).
    pub(super) fn names_any(&self, s: &Stmt) -> bool {
        let mut any = false;
        self.each_named(s, &mut |_| any = true);
        any
    }

    fn named(&self, s: &Stmt) -> BTreeSet<VarId> {
        let mut vars = BTreeSet::new();
        self.each_named(s, &mut |v| {
            vars.insert(v);
        });
        vars
    }

    /// `f` on each paired variable `s` defines or reads (repeats
    /// included), allocating nothing: the translator asks of every
    /// statement, and most kernels pair nothing.
    fn each_named(&self, s: &Stmt, f: &mut dyn FnMut(VarId)) {
        if self.paired.is_empty() {
            return;
        }
        if let Stmt::Let(v, _) | Stmt::Set(v, _) = s {
            if self.paired.contains(v) {
                f(*v);
            }
        }
        for e in crate::ir::stmt_exprs(s) {
            e.walk(&mut |x| {
                if let Expr::Var(v) = x {
                    if self.paired.contains(v) {
                        f(*v);
                    }
                }
            });
        }
    }

    fn insert(&mut self, first: VarId, second: VarId) {
        self.second_of.insert(first, second);
        self.paired.extend([first, second]);
    }

    /// Drop the pairs `vars` belong to.
    fn remove(&mut self, vars: &BTreeSet<VarId>) {
        self.second_of
            .retain(|f, s| !vars.contains(f) && !vars.contains(s));
        self.paired = self.second_of.iter().flat_map(|(f, s)| [*f, *s]).collect();
    }
}

/// The pairs of `body`: candidates from adjacent `let`s of consecutive
/// elements, then those every statement naming them runs in pairs, to a
/// fixed point (dropping a pair can leave another's statements unpaired).
pub(super) fn find(body: &Block) -> Pairs {
    let mut pairs = Pairs::default();
    candidates(body, &mut pairs);
    while !pairs.paired.is_empty() {
        let mut unpaired = BTreeSet::new();
        check(body, &pairs, &mut unpaired);
        if unpaired.is_empty() {
            return pairs;
        }
        pairs.remove(&unpaired);
    }
    pairs
}

fn candidates(b: &[Stmt], pairs: &mut Pairs) {
    let mut k = 0;
    while k < b.len() {
        if let (Stmt::Let(u, Expr::Load(a, i)), Some(Stmt::Let(w, Expr::Load(c, j)))) =
            (&b[k], b.get(k + 1))
        {
            let fresh = |v| !pairs.paired.contains(v);
            if a == c && a.elem() == ElemTy::F64 && next(i, j) && u != w && fresh(u) && fresh(w) {
                pairs.insert(*u, *w);
                k += 2;
                continue;
            }
        }
        for inner in nested(&b[k]) {
            candidates(inner, pairs);
        }
        k += 1;
    }
}

/// Collects into `unpaired` the paired variables named by a statement that
/// does not run in a pair, the way the translator walks `b`.
fn check(b: &[Stmt], pairs: &Pairs, unpaired: &mut BTreeSet<VarId>) {
    let mut k = 0;
    while k < b.len() {
        let named = pairs.named(&b[k]);
        if !named.is_empty() {
            if b.get(k + 1)
                .is_some_and(|t| paired_stmt(&b[k], t, pairs).is_some())
            {
                k += 2;
                continue;
            }
            unpaired.extend(named);
        }
        for inner in nested(&b[k]) {
            check(inner, pairs, unpaired);
        }
        k += 1;
    }
}

fn nested(s: &Stmt) -> Vec<&Block> {
    match s {
        Stmt::For { body, .. } | Stmt::While { body, .. } => vec![body],
        Stmt::If { then, els, .. } => vec![then, els],
        _ => vec![],
    }
}

/// Whether `j` is written as the element after `i`: `x + (c + 1)` after
/// `x + c`, or `i + 1`.
fn next(i: &Expr, j: &Expr) -> bool {
    match (i, j) {
        (Expr::Bin(BinOp::Add, x, c), Expr::Bin(BinOp::Add, y, d)) if x == y => {
            matches!((&**c, &**d), (Expr::Int(c), Expr::Int(d)) if c.checked_add(1) == Some(*d))
                || (**y == *i && **d == Expr::Int(1))
        }
        (_, Expr::Bin(BinOp::Add, y, d)) => **y == *i && **d == Expr::Int(1),
        _ => false,
    }
}

/// `s` and `t` as one statement on pairs, if they are alike but for the
/// lane (see the module).
pub(super) fn paired_stmt<'s>(s: &'s Stmt, t: &'s Stmt, pairs: &Pairs) -> Option<PairedStmt<'s>> {
    match (s, t) {
        (Stmt::Let(u, e), Stmt::Let(w, f)) | (Stmt::Set(u, e), Stmt::Set(w, f))
            if pairs.second_of.get(u) == Some(w) =>
        {
            Some(PairedStmt::Def(*u, lanes(e, f, pairs)?))
        }
        (Stmt::Store(a, i, e), Stmt::Store(c, j, f))
            if a == c && a.elem() == ElemTy::F64 && next(i, j) =>
        {
            // The stored array read only at the stored elements: lane 2
            // must not read what lane 1 stores.
            let only_at = |e: &Expr, at: &Expr| {
                let mut ok = true;
                e.walk(&mut |x| ok &= !matches!(x, Expr::Load(b, k) if b == a && **k != *at));
                ok
            };
            if !only_at(e, i) || !only_at(f, j) {
                return None;
            }
            Some(PairedStmt::Store(a, i, lanes(e, f, pairs)?))
        }
        _ => None,
    }
}

/// `e` and `f` matched lane by lane, or `None` where they differ by more
/// than the lane.
pub(super) fn lanes<'e>(e: &'e Expr, f: &'e Expr, pairs: &Pairs) -> Option<Lanes<'e>> {
    if e == f {
        // A paired variable read the same in both lanes: a lane would read
        // the other's.
        let reads_pair = e.vars().iter().any(|v| pairs.paired.contains(v));
        return (!reads_pair).then_some(Lanes::Same(e));
    }
    Some(match (e, f) {
        (Expr::Var(u), Expr::Var(w)) if pairs.second_of.get(u) == Some(w) => Lanes::Var(*u),
        (Expr::Load(a, i), Expr::Load(c, j)) if a == c && a.elem() == ElemTy::F64 && next(i, j) => {
            Lanes::Load(a, i)
        }
        (Expr::Bin(op, x, y), Expr::Bin(op2, z, w)) if op == op2 && float_op(*op) => Lanes::Bin(
            *op,
            Box::new(lanes(x, z, pairs)?),
            Box::new(lanes(y, w, pairs)?),
        ),
        (Expr::Neg(x), Expr::Neg(y)) => Lanes::Neg(Box::new(lanes(x, y, pairs)?)),
        _ => return None,
    })
}

impl Translator<'_, '_> {
    /// `s` and `t`, adjacent statements naming paired variables, as one.
    pub(super) fn paired(&mut self, s: &Stmt, t: Option<&Stmt>) -> Result<(), String> {
        let both = t
            .and_then(|t| paired_stmt(s, t, &self.pairs))
            .ok_or("vector pair: a statement without its other lane")?;
        match both {
            PairedStmt::Def(v, e) => {
                let x = self.lanes(&e)?;
                let var = self.var(v)?;
                self.b.def_var(var, x);
            }
            PairedStmt::Store(a, i, e) => {
                let (addr, offset) = self.address_at(a, i)?;
                let x = self.lanes(&e)?;
                let f = self.elems_with(vector_flags());
                self.b.ins().store(f, x, addr, offset);
            }
        }
        Ok(())
    }

    fn lanes(&mut self, e: &Lanes) -> Result<Value, String> {
        Ok(match e {
            Lanes::Same(e) => {
                let x = self.expr(e)?;
                self.b.ins().splat(types::F64X2, x)
            }
            Lanes::Var(v) => {
                let var = self.var(*v)?;
                self.b.use_var(var)
            }
            Lanes::Load(a, i) => {
                let (addr, offset) = self.address_at(a, i)?;
                let f = if self.writes(a)? {
                    self.elems_with(vector_flags())
                } else {
                    vector_flags().with_readonly().with_can_move()
                };
                self.b.ins().load(types::F64X2, f, addr, offset)
            }
            Lanes::Bin(op, x, y) => {
                let (x, y) = (self.lanes(x)?, self.lanes(y)?);
                self.vector_float_op(*op, x, y)?
            }
            Lanes::Neg(x) => {
                let x = self.lanes(x)?;
                self.b.ins().fneg(x)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Emitter, Function, ParamRef};

    /// A strip of `width` sums as `ir::strips` writes it: loaded from
    /// `C`, added into over a loop, stored back; `tweak` edits the body.
    fn strip(width: i64, tweak: impl Fn(&mut Emitter, &[Expr])) -> Function {
        let (c, d, a) = (
            ArrayRef::vals("C"),
            ArrayRef::vals("D"),
            ArrayRef::vals("A"),
        );
        let x = Expr::param(ParamRef::dim("C", 0));
        let mut e = Emitter::new();
        let at = |w: i64| Expr::add(x.clone(), Expr::Int(w));
        let sums: Vec<Expr> = (0..width)
            .map(|w| e.let_var(&format!("s{w}"), Expr::load(c.clone(), at(w))))
            .collect();
        e.for_("p", Expr::Int(0), Expr::Int(9), |e, p| {
            for (w, s) in sums.iter().enumerate() {
                let y = Expr::add(Expr::mul(p.clone(), Expr::Int(16)), Expr::Int(w as i64));
                let term = Expr::mul(Expr::load(a.clone(), p.clone()), Expr::load(d.clone(), y));
                e.set(s, Expr::add(s.clone(), term));
            }
        });
        for (w, s) in sums.iter().enumerate() {
            e.store(c.clone(), at(w as i64), s.clone());
        }
        tweak(&mut e, &sums);
        e.finish("k")
    }

    fn paired(f: &Function) -> usize {
        find(&f.body).second_of.len()
    }

    #[test]
    fn a_strips_sums_pair_up() {
        assert_eq!(paired(&strip(4, |_, _| {})), 2);
        // An odd sum out stays scalar; the others pair.
        assert_eq!(paired(&strip(5, |_, _| {})), 2);
    }

    #[test]
    fn a_sum_read_alone_unpairs_its_pair_only() {
        let f = strip(4, |e, s| {
            e.store(ArrayRef::vals("E"), Expr::Int(0), s[2].clone());
        });
        let pairs = find(&f.body);
        assert!(pairs.is_first(0) && !pairs.is_first(2), "{pairs:?}");
    }

    #[test]
    fn a_lane_reading_the_other_lanes_variable_stays_scalar() {
        let (u, w) = (Expr::Var(0), Expr::Var(1));
        let pairs = Pairs {
            second_of: BTreeMap::from([(0, 1)]),
            paired: BTreeSet::from([0, 1]),
        };
        let s = Stmt::Set(0, Expr::add(u.clone(), Expr::Float(1.0)));
        let t = Stmt::Set(1, Expr::add(u.clone(), Expr::Float(1.0)));
        assert!(paired_stmt(&s, &t, &pairs).is_none());
        let t = Stmt::Set(1, Expr::add(w, Expr::Float(1.0)));
        assert!(paired_stmt(&s, &t, &pairs).is_some());
    }

    #[test]
    fn stores_reading_what_the_other_lane_stores_stay_scalar() {
        let c = ArrayRef::vals("C");
        let at = |w: i64| Expr::add(Expr::Var(5), Expr::Int(w));
        let pairs = Pairs::default();
        // C[x+1] = C[x] * 2 after C[x] = C[x-1] * 2 reads the new C[x].
        let s = Stmt::Store(c.clone(), at(1), Expr::load(c.clone(), at(0)));
        let t = Stmt::Store(c.clone(), at(2), Expr::load(c.clone(), at(1)));
        assert!(paired_stmt(&s, &t, &pairs).is_none());
        let s = Stmt::Store(c.clone(), at(1), Expr::load(c.clone(), at(1)));
        let t = Stmt::Store(c.clone(), at(2), Expr::load(c.clone(), at(2)));
        assert!(paired_stmt(&s, &t, &pairs).is_some());
    }

    #[test]
    fn consecutive_elements_are_recognised() {
        let x = Expr::Var(3);
        assert!(next(&x, &Expr::add(x.clone(), Expr::Int(1))));
        let at = |w| Expr::add(x.clone(), Expr::Int(w));
        assert!(next(&at(4), &at(5)));
        assert!(!next(&at(4), &at(6)));
        assert!(!next(&at(5), &at(4)));
        assert!(!next(&x, &Expr::add(Expr::Var(4), Expr::Int(1))));
    }
}
