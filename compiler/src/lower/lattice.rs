//! Merge lattices (Kjolstad et al. 2017, section 5.1 of the format paper's
//! background): per index variable, the sets of operands whose nonzeros must
//! be merged, with the sub-expression each set computes. Intersection for
//! `*`, union for `+` and `-`; simplified by the full property.

use super::ids::{IterId, OperandId};
use crate::notation::{BinOp, Expr};
use std::collections::BTreeSet;
use std::fmt;

/// The right-hand side over operand numbers (the output is operand 0).
#[derive(Clone, Debug, PartialEq)]
pub enum LExpr {
    Access(OperandId),
    Const(f64),
    Neg(Box<LExpr>),
    Bin(BinOp, Box<LExpr>, Box<LExpr>),
}

impl LExpr {
    /// Whether `self` can have an entry here, given the found flags of its
    /// located operands (the others are present by the case that computes
    /// it): a product needs every factor, a sum any term. A constant is
    /// an entry everywhere but zero, the fill: a sum over a dimension of
    /// extent 0 becomes the constant 0, and a sparse result of it stored
    /// a zero at every coordinate it visited.
    pub fn presence(&self, found: &dyn Fn(OperandId) -> crate::ir::Expr) -> crate::ir::Expr {
        self.presence_where(found, &|c| c != 0.0)
    }

    /// `presence` with each constant's own: `constant(c)` says whether
    /// constant `c` has an entry.
    pub fn presence_where(
        &self,
        found: &dyn Fn(OperandId) -> crate::ir::Expr,
        constant: &dyn Fn(f64) -> bool,
    ) -> crate::ir::Expr {
        use crate::ir::Expr;
        let go = |x: &LExpr| x.presence_where(found, constant);
        match self {
            LExpr::Access(i) => found(*i),
            LExpr::Const(c) => Expr::Bool(constant(*c)),
            LExpr::Neg(x) => go(x),
            LExpr::Bin(BinOp::Mul, a, b) => Expr::and(go(a), go(b)),
            LExpr::Bin(_, a, b) => Expr::or(go(a), go(b)),
        }
    }

    /// Number the accesses of `e` from 1, left to right (as `resolve` does
    /// for `operands`). An access identical to an earlier one (the same
    /// tensor over the same variables at every level) is read through that
    /// earlier operand: `B(i,j) * B(i,j)` walks `B` once instead of
    /// intersecting it with itself, and the lattice of an expression that
    /// repeats an access has the points of its distinct accesses. Accesses
    /// with hidden levels never coincide (their hidden variables are their
    /// own).
    pub fn from_notation(e: &Expr, operands: &[super::operands::Operand]) -> LExpr {
        let same = |a: &super::operands::Operand, b: &super::operands::Operand| {
            !a.output && !b.output && a.tensor == b.tensor && a.level_vars == b.level_vars
        };
        let rep = |o: usize| {
            let me = operands.get(o);
            (1..o)
                .find(|&k| me.zip(operands.get(k)).is_some_and(|(m, x)| same(m, x)))
                .unwrap_or(o)
        };
        fn go(e: &Expr, next: &mut usize, rep: &dyn Fn(usize) -> usize) -> LExpr {
            match e {
                Expr::Access(_) => {
                    *next += 1;
                    LExpr::Access(OperandId(rep(*next)))
                }
                Expr::Const(v, _) => LExpr::Const(*v),
                Expr::Neg(x, _) => LExpr::Neg(Box::new(go(x, next, rep))),
                Expr::Bin(op, a, b, _) => {
                    let a = go(a, next, rep);
                    LExpr::Bin(*op, Box::new(a), Box::new(go(b, next, rep)))
                }
            }
        }
        go(e, &mut 0, &rep)
    }

    /// Number of accesses (an operand read twice counts twice).
    fn accesses(&self) -> usize {
        match self {
            LExpr::Access(_) => 1,
            LExpr::Const(_) => 0,
            LExpr::Neg(x) => x.accesses(),
            LExpr::Bin(_, a, b) => a.accesses() + b.accesses(),
        }
    }

    /// `self` where only the operands of `merged` that are in `present`
    /// have values (the others read as zero), simplified; `None` when that
    /// is zero.
    fn restrict(&self, merged: &BTreeSet<OperandId>, present: &BTreeSet<IterId>) -> Option<LExpr> {
        match self {
            LExpr::Access(o) => (!merged.contains(o) || present.contains(&IterId::Operand(*o)))
                .then(|| self.clone()),
            LExpr::Const(_) => Some(self.clone()),
            LExpr::Neg(x) => x.restrict(merged, present).map(neg),
            LExpr::Bin(op, a, b) => {
                let (x, y) = (a.restrict(merged, present), b.restrict(merged, present));
                match (op, x, y) {
                    (_, Some(x), Some(y)) => Some(LExpr::Bin(*op, Box::new(x), Box::new(y))),
                    (BinOp::Mul, _, _) | (_, None, None) => None,
                    (_, Some(x), None) => Some(x),
                    (BinOp::Sub, None, Some(y)) => Some(neg(y)),
                    (_, None, Some(y)) => Some(y),
                }
            }
        }
    }

    pub fn operands(&self) -> BTreeSet<OperandId> {
        let mut out = BTreeSet::new();
        fn go(e: &LExpr, out: &mut BTreeSet<OperandId>) {
            match e {
                LExpr::Access(i) => {
                    out.insert(*i);
                }
                LExpr::Const(_) => {}
                LExpr::Neg(x) => go(x, out),
                LExpr::Bin(_, a, b) => {
                    go(a, out);
                    go(b, out);
                }
            }
        }
        go(self, &mut out);
        out
    }

    pub fn display(&self, names: &dyn Fn(OperandId) -> String) -> String {
        match self {
            LExpr::Access(i) => names(*i),
            LExpr::Const(v) => format!("{v}"),
            LExpr::Neg(x) => format!("-({})", x.display(names)),
            LExpr::Bin(op, a, b) => {
                let sym = match op {
                    BinOp::Add => "+",
                    BinOp::Sub => "-",
                    BinOp::Mul => "*",
                };
                format!("({} {sym} {})", a.display(names), b.display(names))
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Operands iterating the variable that must have a nonzero here
    /// (`IterId::Dimension`: every coordinate).
    pub iters: BTreeSet<IterId>,
    pub expr: LExpr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Lattice {
    /// The points that need a loop of their own, after simplification.
    pub points: Vec<Point>,
    /// Every point, before simplification: the cases inside the loops.
    pub all: Vec<Point>,
    /// One merge loop over every operand, each guarded by its own
    /// presence, instead of a loop per point and a case per subset: for
    /// unions (a missing term adds nothing), and for lattices too large to
    /// enumerate. Code linear in the operands.
    pub linear: bool,
}

/// Past this much code a lattice is merged in one guarded loop instead: a
/// loop per point with a case per dominated point costs about points²
/// bodies at each level, and the levels below repeat it inside every body.
const MAX_BODIES: u128 = 1024;

/// Whether a lattice of `points` points at this level, with `levels_left`
/// levels below and including it, would emit too much code.
fn too_many_bodies(points: usize, levels_left: u32) -> bool {
    let per_level = (points as u128).saturating_mul(points as u128);
    per_level
        .checked_pow(levels_left.max(1))
        .is_none_or(|n| n > MAX_BODIES)
}

/// Lattice points `build` would produce, saturating.
fn count_points(e: &LExpr) -> usize {
    match e {
        LExpr::Access(_) | LExpr::Const(_) => 1,
        LExpr::Neg(x) => count_points(x),
        LExpr::Bin(op, a, b) => {
            let (ca, cb) = (count_points(a), count_points(b));
            let both = ca.saturating_mul(cb);
            if *op == BinOp::Mul {
                both
            } else {
                both.saturating_add(ca).saturating_add(cb)
            }
        }
    }
}

/// Whether `e` can be nonzero where none of the operands `merged` has a
/// value (constants and operands outside `merged` count as present).
fn nonzero_without(e: &LExpr, merged: &BTreeSet<OperandId>) -> bool {
    match e {
        LExpr::Access(i) => !merged.contains(i),
        LExpr::Const(_) => true,
        LExpr::Neg(x) => nonzero_without(x, merged),
        LExpr::Bin(BinOp::Mul, a, b) => nonzero_without(a, merged) && nonzero_without(b, merged),
        LExpr::Bin(_, a, b) => nonzero_without(a, merged) || nonzero_without(b, merged),
    }
}

/// The additive terms of `e` (through `+`, `-` and negation).
fn terms(e: &LExpr) -> Vec<&LExpr> {
    match e {
        LExpr::Bin(BinOp::Add | BinOp::Sub, a, b) => {
            let mut out = terms(a);
            out.extend(terms(b));
            out
        }
        LExpr::Neg(x) => terms(x),
        _ => vec![e],
    }
}

fn neg(e: LExpr) -> LExpr {
    LExpr::Neg(Box::new(e))
}

fn build(e: &LExpr, its: &BTreeSet<OperandId>) -> Vec<Point> {
    match e {
        LExpr::Access(i) => {
            let iters = if its.contains(i) {
                [IterId::Operand(*i)].into()
            } else {
                BTreeSet::new()
            };
            vec![Point {
                iters,
                expr: e.clone(),
            }]
        }
        LExpr::Const(_) => vec![Point {
            iters: BTreeSet::new(),
            expr: e.clone(),
        }],
        LExpr::Neg(x) => build(x, its)
            .into_iter()
            .map(|p| Point {
                iters: p.iters,
                expr: neg(p.expr),
            })
            .collect(),
        LExpr::Bin(op, a, b) => {
            let (la, lb) = (build(a, its), build(b, its));
            let mut out = Vec::new();
            for pa in &la {
                for pb in &lb {
                    out.push(Point {
                        iters: pa.iters.union(&pb.iters).copied().collect(),
                        expr: LExpr::Bin(*op, Box::new(pa.expr.clone()), Box::new(pb.expr.clone())),
                    });
                }
            }
            if *op != BinOp::Mul {
                out.extend(la.iter().cloned());
                for pb in lb {
                    let expr = if *op == BinOp::Sub {
                        neg(pb.expr)
                    } else {
                        pb.expr
                    };
                    out.push(Point {
                        iters: pb.iters,
                        expr,
                    });
                }
            }
            out
        }
    }
}

impl Lattice {
    /// The lattice of `e` for a variable iterated by the operands `its`;
    /// `full` are those whose level holds every coordinate.
    pub fn new(
        e: &LExpr,
        its: &BTreeSet<OperandId>,
        full: &BTreeSet<OperandId>,
        levels_left: u32,
    ) -> Lattice {
        let ts = terms(e);
        let merged = e.operands().intersection(its).count();
        let pure_union = merged > 2
            && ts
                .iter()
                .all(|t| t.operands().intersection(its).count() <= 1);
        if pure_union || too_many_bodies(count_points(e), levels_left) {
            return Lattice::linear(e, its);
        }
        let mut points: Vec<Point> = Vec::new();
        for p in build(e, its) {
            if !points.iter().any(|q| q.iters == p.iters) {
                points.push(p);
            }
        }
        // An operand read more than once (`from_notation`): where it is
        // present every read of it is, so each point computes the whole
        // expression restricted to its operands (combinations that had one
        // read present and another absent are no cases of their own).
        if e.accesses() > e.operands().len() {
            points = points
                .into_iter()
                .filter_map(|p| {
                    let expr = e.restrict(its, &p.iters)?;
                    Some(Point { expr, ..p })
                })
                .collect();
        }
        // A term present at every coordinate makes the loop cover the whole
        // dimension.
        if points.iter().any(|p| p.iters.is_empty()) {
            for p in &mut points {
                p.iters.insert(IterId::Dimension);
            }
        }
        points.sort_by_key(|p| std::cmp::Reverse(p.iters.len()));
        // A union of sparse operands above other loops would repeat those
        // loops in every case and every tail: code, and Cranelift's compile
        // time, grow as cases^levels (a 3-D COO sum: 7.7 ms, 4.2 ms merged
        // linearly at its two outer levels, run time unchanged). Only the
        // innermost level, where the time goes, gets a loop per point.
        let sparse_union =
            points.len() > 1 && e.operands().intersection(its).all(|o| !full.contains(o));
        if sparse_union && levels_left >= 2 {
            return Lattice::linear(e, its);
        }
        let all = points.clone();
        // Property-based simplification: a loop that would start once a
        // full operand is exhausted never runs, since by then every
        // coordinate has been visited.
        let full_here: BTreeSet<IterId> = points
            .iter()
            .flat_map(|p| p.iters.iter().copied())
            .filter(|i| i.operand().is_none_or(|o| full.contains(&o)))
            .collect();
        if !full_here.is_empty() {
            points.retain(|p| full_here.is_subset(&p.iters));
        }
        Lattice {
            points,
            all,
            linear: false,
        }
    }

    /// One guarded merge loop over the operands of `e` in `its`.
    fn linear(e: &LExpr, its: &BTreeSet<OperandId>) -> Lattice {
        let mut iters: BTreeSet<IterId> = e
            .operands()
            .intersection(its)
            .map(|&o| IterId::Operand(o))
            .collect();
        // Where no merged operand is present, a constant or located
        // factors may still make the expression nonzero: then the loop
        // covers the whole dimension.
        if iters.is_empty() || nonzero_without(e, its) {
            iters.insert(IterId::Dimension);
        }
        let point = Point {
            iters,
            expr: e.clone(),
        };
        Lattice {
            points: vec![point.clone()],
            all: vec![point],
            linear: true,
        }
    }

    /// Points dominated by `p` (subsets of its operands), in lattice order:
    /// the cases of `p`'s loop.
    pub fn cases(&self, p: &Point) -> Vec<&Point> {
        self.all
            .iter()
            .filter(|q| q.iters.is_subset(&p.iters))
            .collect()
    }

    /// Add the dimension pseudo-operand to every point.
    pub fn add_dimension(&mut self) {
        for p in self.points.iter_mut().chain(self.all.iter_mut()) {
            p.iters.insert(IterId::Dimension);
        }
    }
}

impl fmt::Display for Lattice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.points {
            let its: Vec<String> = p
                .iters
                .iter()
                .map(|i| i.operand().map_or("dim".into(), |o| o.to_string()))
                .collect();
            writeln!(
                f,
                "[{}] {}",
                its.join(", "),
                p.expr.display(&|o| o.to_string())
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(i: usize) -> LExpr {
        LExpr::Access(OperandId(i))
    }

    fn bin(op: BinOp, a: LExpr, b: LExpr) -> LExpr {
        LExpr::Bin(op, Box::new(a), Box::new(b))
    }

    /// `((B - B) * -B) - ((B - B) + (B + B))` over seven sparse accesses
    /// (a random expression of the differential sweep): a loop per point
    /// made 40 points, 33,000 lines of C and a 9 s compile; merged in one
    /// guarded loop it compiles in milliseconds.
    #[test]
    fn a_lattice_of_many_points_over_many_operands_is_merged_in_one_loop() {
        use BinOp::{Add, Sub};
        let e = bin(
            Sub,
            bin(
                BinOp::Mul,
                bin(Sub, access(1), access(2)),
                LExpr::Neg(Box::new(access(3))),
            ),
            bin(
                Add,
                bin(Sub, access(4), access(5)),
                bin(Add, access(6), access(7)),
            ),
        );
        let its: BTreeSet<OperandId> = (1..=7).map(OperandId).collect();
        let l = Lattice::new(&e, &its, &BTreeSet::new(), 1);
        assert!(l.linear, "{l}");
        // Three operands still get a loop per point.
        let small = bin(Add, bin(BinOp::Mul, access(1), access(2)), access(3));
        let its: BTreeSet<OperandId> = (1..=3).map(OperandId).collect();
        let l = Lattice::new(&small, &its, &BTreeSet::new(), 1);
        assert!(!l.linear);
        assert_eq!(l.points.len(), 3, "{l}");
    }

    /// `(B + C) * (B - D)` with both reads of `B` one operand: each point
    /// computes the expression with exactly its operands present; a
    /// combination with one read of `B` present and the other absent is
    /// no case.
    #[test]
    fn points_of_a_repeated_operand_restrict_the_whole_expression() {
        use BinOp::{Add, Mul, Sub};
        let e = bin(
            Mul,
            bin(Add, access(1), access(2)),
            bin(Sub, access(1), access(3)),
        );
        let its: BTreeSet<OperandId> = (1..=3).map(OperandId).collect();
        let l = Lattice::new(&e, &its, &BTreeSet::new(), 1);
        let show = |o: OperandId| ["", "B", "C", "D"][o.0].to_string();
        let mut got: Vec<String> = l
            .all
            .iter()
            .map(|p| {
                let ops: Vec<String> = p
                    .iters
                    .iter()
                    .filter_map(|i| i.operand())
                    .map(show)
                    .collect();
                format!("{}: {}", ops.join(""), p.expr.display(&show))
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "B: (B * B)",
                "BC: ((B + C) * B)",
                "BCD: ((B + C) * (B - D))",
                "BD: (B * (B - D))",
                "CD: (C * -(D))",
            ]
        );
    }
}
