//! A sum's fill guards checked once, after the sum, instead of at every
//! term.
//!
//! A product with a factor that may be fill (a value stored where the
//! tensor has no entry: a dense copy of a sparse `x`, a block's padding)
//! is guarded, `t += fill != 0.0 ? A[p] * fill : 0.0`, so that `inf * 0`
//! never adds a NaN the tensor does not hold (`lower::assemble`). On a
//! row of three entries the guards cost as much as the products: CSR SpMV
//! with a sparse `x` read from its dense copy took 0.057 ms on the 20K-row
//! banded matrix of `bench/run.py`, against 0.041 without them.
//!
//! Here the statements that add into such sums (the region) run first
//! without the guards; where a sum comes out infinite or NaN, they run
//! again from the values they started from, guarded. Exact, bit for bit:
//! - A term whose fill factor is nonzero is the guarded term.
//! - A term whose fill factor is 0 is `±0` when the other factors are
//!   finite, and NaN when one is infinite or NaN (or their product
//!   overflows). A NaN or an infinity in a sum stays one to its end, so
//!   the check sees it and the guarded run replaces the sum.
//! - Otherwise the sums differ only by adding `-0` where the guarded sum
//!   adds `+0`. That changes a sum only when it is `-0`, and a sum that
//!   starts at `+0` never becomes `-0` (in round-to-nearest, `x + y` is
//!   `-0` only when both are).
//!
//! Sound because the region has no effect but on variables: it stores to
//! no array and grows none, and every variable it sets that lives before
//! it is restored before the guarded run.

use super::*;
use std::collections::BTreeSet;

/// Check the fill guards of every sum of `f` once per sum (module comment).
pub fn check_fill_once(f: &mut Function) {
    let mut body = std::mem::take(&mut f.body);
    in_block(&mut body, &mut f.vars);
    f.body = body;
}

fn in_block(b: &mut Block, vars: &mut Vec<VarInfo>) {
    for s in b.iter_mut() {
        for inner in nested_blocks_mut(s) {
            in_block(inner, vars);
        }
    }
    // Sums this block declares from +0.
    let sums: BTreeSet<VarId> = b
        .iter()
        .filter_map(|s| match s {
            Stmt::Let(t, Expr::Float(z))
                if *z == 0.0 && z.is_sign_positive() && vars[*t as usize].ty == Ty::F64 =>
            {
                Some(*t)
            }
            _ => None,
        })
        .collect();
    if sums.is_empty() {
        return;
    }
    let Some(region) = Region::find(b, &sums) else {
        return;
    };
    let checked: Vec<VarId> = region
        .guarded
        .iter()
        .copied()
        .filter(|&t| b[region.end..].iter().any(|s| reads(s, t)))
        .collect();
    if checked.is_empty() || !region.is_sound(b) || !region.pays(b) {
        return;
    }
    let guarded: Vec<Stmt> = b[region.start..region.end].to_vec();
    let restored = set_before(&guarded);
    let mut saved = Vec::new();
    let mut restore = vec![Stmt::Unlikely];
    for &v in &restored {
        let name = format!("{}_before", vars[v as usize].name);
        let ty = vars[v as usize].ty;
        let s = fresh_var(vars, &name, ty);
        saved.push(Stmt::Let(s, Expr::Var(v)));
        restore.push(Stmt::Set(v, Expr::Var(s)));
    }
    let mut unguarded = guarded.clone();
    for s in &mut unguarded {
        drop_guards(s, &region.guarded);
    }
    let not_finite = checked
        .iter()
        .map(|&t| {
            let x = Expr::Var(t);
            Expr::ne(Expr::sub(x.clone(), x), Expr::Float(0.0))
        })
        .reduce(Expr::or)
        .unwrap_or(Expr::Bool(false));
    restore.extend(guarded);
    let mut replacement = saved;
    replacement.extend(unguarded);
    replacement.push(Stmt::If {
        cond: not_finite,
        then: restore,
        els: Vec::new(),
    });
    b.splice(region.start..region.end, replacement);
}

/// The statements of a block from the first that adds a guarded term into
/// one of its sums to the last, and the combining of those sums after
/// them (`t += t2`, the unrolled loop's second sum).
struct Region {
    start: usize,
    end: usize,
    /// The sums given guarded terms.
    guarded: BTreeSet<VarId>,
}

impl Region {
    fn find(b: &Block, sums: &BTreeSet<VarId>) -> Option<Region> {
        let mut guarded = BTreeSet::new();
        let mut span: Option<(usize, usize)> = None;
        for (k, s) in b.iter().enumerate() {
            let mut found = false;
            walk_block(std::slice::from_ref(s), &mut |s| {
                if let Some(t) = guarded_add(s) {
                    if sums.contains(&t) {
                        guarded.insert(t);
                        found = true;
                    }
                }
            });
            if found {
                span = Some((span.map_or(k, |(lo, _)| lo), k + 1));
            }
        }
        let (start, mut end) = span?;
        while let Some(Stmt::Set(t, Expr::Bin(BinOp::Add, l, r))) = b.get(end) {
            match (&**l, &**r) {
                (Expr::Var(a), Expr::Var(u))
                    if a == t && guarded.contains(t) && guarded.contains(u) =>
                {
                    end += 1
                }
                _ => break,
            }
        }
        Some(Region {
            start,
            end,
            guarded,
        })
    }

    /// Whether a loop of the region may run long enough for its guards to
    /// cost more than the check: not where every loop is over a block's
    /// few coordinates (`for jin in 0..min(4, ..)`, BCSR(4)'s row of a
    /// block: on the uniform matrix of `bench/run.py`, whose blocks hold
    /// one entry or two, gcc's code of the checked sums of four ran 1.11x
    /// as long).
    fn pays(&self, b: &Block) -> bool {
        let mut long = false;
        walk_block(&b[self.start..self.end], &mut |s| {
            long |= match s {
                Stmt::While { .. } => true,
                Stmt::For { lo, hi, .. } => !(*lo == Expr::Int(0) && at_most(hi, SHORT_LOOP)),
                _ => false,
            }
        });
        long
    }

    /// No effect but on variables, no variable declared at its top (it
    /// would be declared twice), the sums read only by their own additions
    /// and the combining, and each sum `+0` where the region starts and
    /// whenever it is set but by an addition (a sum that is `-0` would
    /// tell an added `-0` from the guard's `+0`).
    fn is_sound(&self, b: &Block) -> bool {
        let statements = &b[self.start..self.end];
        let mut sound = statements.iter().all(|s| !matches!(s, Stmt::Let(..)));
        for &t in &self.guarded {
            sound &= b[..self.start]
                .iter()
                .all(|s| matches!(s, Stmt::Let(v, _) if *v == t) || !assigns(s, t));
        }
        walk_block(statements, &mut |s| {
            sound &= !matches!(s, Stmt::Store(..) | Stmt::Reserve { .. });
            if let Stmt::Set(t, e) = s {
                let plus_zero = matches!(e, Expr::Float(z) if *z == 0.0 && z.is_sign_positive());
                let addition = matches!(e, Expr::Bin(BinOp::Add, l, _) if **l == Expr::Var(*t));
                sound &= !self.guarded.contains(t) || plus_zero || addition;
            }
            let own = match s {
                Stmt::Set(t, Expr::Bin(BinOp::Add, l, r)) if **l == Expr::Var(*t) => {
                    let combining = self.guarded.contains(t)
                        && matches!(&**r, Expr::Var(u) if self.guarded.contains(u));
                    Some((*t, if combining { None } else { Some(&**r) }))
                }
                _ => None,
            };
            for &t in &self.guarded {
                sound &= match own {
                    // A sum's own addition: its term must not read a sum.
                    Some((u, Some(term))) if u == t => !term.uses(t),
                    Some((_, None)) => true,
                    _ => !stmt_exprs(s).into_iter().any(|e| e.uses(t)),
                };
            }
        });
        sound
    }
}

/// Trips of a loop over a block's coordinates, at most, for which the
/// guards stay (`Region::pays`).
const SHORT_LOOP: i64 = 16;

/// Whether `e` is at most `k` whatever its variables: a constant, or the
/// least of one and anything.
fn at_most(e: &Expr, k: i64) -> bool {
    match e {
        Expr::Int(v) => *v <= k,
        Expr::Bin(BinOp::Min, a, b) => at_most(a, k) || at_most(b, k),
        _ => false,
    }
}

/// `t += c ? p : 0.0` with `c` a test that fill values are nonzero: `t`.
fn guarded_add(s: &Stmt) -> Option<VarId> {
    let Stmt::Set(t, Expr::Bin(BinOp::Add, l, r)) = s else {
        return None;
    };
    let Expr::Select(c, _, zero) = &**r else {
        return None;
    };
    (**l == Expr::Var(*t) && **zero == Expr::Float(0.0) && tests_fill(c)).then_some(*t)
}

/// `v != 0.0`, or conjunctions and disjunctions of such tests (a factor
/// that is a sum has an entry where any of its terms does).
fn tests_fill(c: &Expr) -> bool {
    match c {
        Expr::Cmp(CmpOp::Ne, v, z) => matches!(**v, Expr::Var(_)) && **z == Expr::Float(0.0),
        Expr::Bin(BinOp::And | BinOp::Or, a, b) => tests_fill(a) && tests_fill(b),
        _ => false,
    }
}

/// `s` with the guards of its additions into `sums` dropped.
fn drop_guards(s: &mut Stmt, sums: &BTreeSet<VarId>) {
    if let Some(t) = guarded_add(s) {
        if sums.contains(&t) {
            if let Stmt::Set(_, Expr::Bin(_, _, r)) = s {
                if let Expr::Select(_, p, _) = &mut **r {
                    let product = std::mem::replace(&mut **p, Expr::Float(0.0));
                    **r = product;
                }
            }
        }
    }
    for inner in nested_blocks_mut(s) {
        for s in inner.iter_mut() {
            drop_guards(s, sums);
        }
    }
}

/// The variables `statements` set that live before them (not declared in
/// them), in a fixed order.
fn set_before(statements: &[Stmt]) -> Vec<VarId> {
    let set: BTreeSet<VarId> = sets_outside(statements)
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `let t = 0.0; [before]; for p in 0..hi { let f = x[p];
    /// t += f != 0.0 ? a[p] * f : 0.0; [inside] }; y[0] = t`, and its
    /// variables.
    fn sum_over(hi: Expr, before: Vec<Stmt>, inside: Vec<Stmt>) -> (Block, Vec<VarInfo>) {
        let mut vars = Vec::new();
        let t = fresh_var(&mut vars, "t", Ty::F64);
        let p = fresh_var(&mut vars, "p", Ty::I64);
        let f = fresh_var(&mut vars, "f", Ty::F64);
        let (a, x, y) = (
            ArrayRef::vals("a"),
            ArrayRef::vals("x"),
            ArrayRef::vals("y"),
        );
        let term = Expr::mul(Expr::load(a, Expr::Var(p)), Expr::Var(f));
        let guarded = Expr::select(
            Expr::ne(Expr::Var(f), Expr::Float(0.0)),
            term,
            Expr::Float(0.0),
        );
        let mut body = vec![
            Stmt::Let(f, Expr::load(x, Expr::Var(p))),
            Stmt::Set(t, Expr::add(Expr::Var(t), guarded)),
        ];
        body.extend(inside);
        let mut b = vec![Stmt::Let(t, Expr::Float(0.0))];
        b.extend(before);
        b.push(Stmt::For {
            var: p,
            lo: Expr::Int(0),
            hi,
            body,
        });
        b.push(Stmt::Store(y, Expr::Int(0), Expr::Var(t)));
        (b, vars)
    }

    fn checked(mut b: Block, mut vars: Vec<VarInfo>) -> bool {
        in_block(&mut b, &mut vars);
        let mut found = false;
        walk_block(&b, &mut |s| found |= matches!(s, Stmt::Unlikely));
        found
    }

    #[test]
    fn a_long_sum_without_effects_is_checked_once() {
        let n = Expr::Param(ParamRef::level("a", 0, "N"));
        let (b, vars) = sum_over(n.clone(), vec![], vec![]);
        assert!(checked(b, vars));
        // A store in the loop: the guarded run would store again.
        let store = Stmt::Store(ArrayRef::vals("z"), Expr::Int(0), Expr::Float(1.0));
        let (b, vars) = sum_over(n.clone(), vec![], vec![store]);
        assert!(!checked(b, vars));
        // A sum set to -0 before the loop tells an added -0 from +0.
        let negative_zero = Stmt::Set(0, Expr::Float(-0.0));
        let (b, vars) = sum_over(n, vec![negative_zero], vec![]);
        assert!(!checked(b, vars));
        // Over a block's four coordinates the guards stay.
        let (b, vars) = sum_over(Expr::min(Expr::Int(4), Expr::Var(1)), vec![], vec![]);
        assert!(!checked(b, vars));
    }
}
