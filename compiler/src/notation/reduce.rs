//! Placing implicit reductions. As in taco, an index variable that appears
//! only on the right is summed over the smallest sub-expression holding all
//! its uses: `y(i) = A(i,j)*x(j) + z(i)` means `sum_j(A(i,j)*x(j)) + z(i)`.

use super::ast::*;

#[derive(Clone, Debug, PartialEq)]
pub enum RExpr {
    Access(Access),
    Const(f64),
    Neg(Box<RExpr>),
    Bin(BinOp, Box<RExpr>, Box<RExpr>),
    Sum(Vec<String>, Box<RExpr>),
}

fn uses(e: &Expr, v: &str) -> bool {
    e.accesses().iter().any(|a| a.indices.iter().any(|i| i.name == v))
}

/// The right-hand side with every reduction placed at the lowest node that
/// contains all uses of its variable.
pub fn place_reductions(a: &Assignment) -> RExpr {
    place(&a.rhs, &a.reduction_vars())
}

fn wrap(vars: Vec<String>, e: RExpr) -> RExpr {
    if vars.is_empty() {
        e
    } else {
        RExpr::Sum(vars, Box::new(e))
    }
}

fn place(e: &Expr, vars: &[String]) -> RExpr {
    match e {
        Expr::Access(a) => wrap(vars.to_vec(), RExpr::Access(a.clone())),
        Expr::Const(v, _) => RExpr::Const(*v),
        Expr::Neg(x, _) => RExpr::Neg(Box::new(place(x, vars))),
        Expr::Bin(op, a, b, _) => {
            let (mut here, mut left, mut right) = (Vec::new(), Vec::new(), Vec::new());
            for v in vars {
                match (uses(a, v), uses(b, v)) {
                    (true, true) => here.push(v.clone()),
                    (true, false) => left.push(v.clone()),
                    _ => right.push(v.clone()),
                }
            }
            wrap(here, RExpr::Bin(*op, Box::new(place(a, &left)), Box::new(place(b, &right))))
        }
    }
}

/// True when every reduction can be hoisted to the root: no sum sits under
/// an addition or subtraction. Then `lhs = sum(all reduction vars, rhs)` and
/// a single loop nest computes the assignment.
pub fn sums_hoist_to_root(e: &RExpr) -> bool {
    fn ok(e: &RExpr, under_add: bool) -> bool {
        match e {
            RExpr::Access(_) | RExpr::Const(_) => true,
            RExpr::Neg(x) => ok(x, under_add),
            RExpr::Sum(_, x) => !under_add && ok(x, under_add),
            RExpr::Bin(BinOp::Mul, a, b) => ok(a, under_add) && ok(b, under_add),
            RExpr::Bin(_, a, b) => ok(a, true) && ok(b, true),
        }
    }
    ok(e, false)
}

/// Split a right-hand side into its top-level additive terms with their
/// signs: `a - (b + c)` gives `[(+, a), (-, b), (-, c)]`.
pub fn additive_terms(e: &Expr) -> Vec<(bool, Expr)> {
    fn go(e: &Expr, positive: bool, out: &mut Vec<(bool, Expr)>) {
        match e {
            Expr::Bin(BinOp::Add, a, b, _) => {
                go(a, positive, out);
                go(b, positive, out);
            }
            Expr::Bin(BinOp::Sub, a, b, _) => {
                go(a, positive, out);
                go(b, !positive, out);
            }
            Expr::Neg(x, _) => go(x, !positive, out),
            other => out.push((positive, other.clone())),
        }
    }
    let mut out = Vec::new();
    go(e, true, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse_assignment;

    #[test]
    fn reduction_placed_at_lowest_common_node() {
        let a = parse_assignment("y(i) = A(i,j) * x(j) + z(i)").unwrap();
        let r = place_reductions(&a);
        assert!(matches!(&r, RExpr::Bin(BinOp::Add, l, _) if matches!(**l, RExpr::Sum(..))));
        assert!(!sums_hoist_to_root(&r));
        let b = parse_assignment("y(i) = A(i,j) * (x(j) + w(j))").unwrap();
        assert!(sums_hoist_to_root(&place_reductions(&b)));
    }
}
