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
    e.accesses()
        .iter()
        .any(|a| a.indices.iter().any(|i| i.name == v))
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
            wrap(
                here,
                RExpr::Bin(*op, Box::new(place(a, &left)), Box::new(place(b, &right))),
            )
        }
    }
}

/// True when every reduction can be hoisted to the root: no sum sits under
/// an addition or subtraction. Then `lhs = sum(all reduction vars, rhs)` and
/// a single loop nest computes the assignment.
pub fn sums_hoist_to_root(e: &RExpr) -> bool {
    hoists(e, &|_| false)
}

/// `sums_hoist_to_root` for the statement `a` when some accesses also sum
/// over variables of their own (`private_sums`: a format's hidden levels,
/// DIA's diagonals, which no other access shares). Such a sum is placed at
/// its access, so an access with one may not sit under an addition either.
pub fn sums_hoist_with_private(a: &Assignment, private_sums: &dyn Fn(&Access) -> bool) -> bool {
    hoists(&place_reductions(a), private_sums)
}

fn hoists(e: &RExpr, private_sums: &dyn Fn(&Access) -> bool) -> bool {
    fn ok(e: &RExpr, under_add: bool, private_sums: &dyn Fn(&Access) -> bool) -> bool {
        match e {
            RExpr::Access(a) => !(under_add && private_sums(a)),
            RExpr::Const(_) => true,
            RExpr::Neg(x) => ok(x, under_add, private_sums),
            RExpr::Sum(_, x) => !under_add && ok(x, under_add, private_sums),
            RExpr::Bin(BinOp::Mul, a, b) => {
                ok(a, under_add, private_sums) && ok(b, under_add, private_sums)
            }
            RExpr::Bin(_, a, b) => ok(a, true, private_sums) && ok(b, true, private_sums),
        }
    }
    ok(e, false, private_sums)
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

/// The right-hand side as signed additive terms that can each be computed
/// on its own (one loop nest per term). A sum spanning an addition
/// distributes over its terms (`sum_j (B(i,j)*x(j) - C(i,j)*w(j))` is
/// `sum_j B*x - sum_j C*w`), and a term inside such a sum that does not use
/// its variable is added once per coordinate, so it is scaled by the
/// variable's extent (`sum_j (B(j) + 2)` is `sum_j B(j) + |j|*2`).
///
/// `None` when a term alone would mean something else: a variable summed
/// around the term is used inside an addition within it (`sum_j ((B(j) +
/// 1) * c + D(j))`: alone, `(B(j) + 1) * c` would sum only `B`), or the
/// extent of a variable is not known.
pub fn distributed_terms(
    a: &Assignment,
    extent: impl Fn(&str) -> Option<usize>,
) -> Option<Vec<(bool, Expr)>> {
    let reductions = a.reduction_vars();
    let mut out = Vec::new();
    if !distribute(&a.rhs, true, &[], &reductions, &extent, &mut out) {
        return None;
    }
    // Every term summed over an empty range: the sum has no terms.
    if out.is_empty() {
        out.push((true, Expr::Const(0.0, a.rhs.span())));
    }
    Some(out)
}

fn distribute(
    e: &Expr,
    positive: bool,
    around: &[String],
    reductions: &[String],
    extent: &dyn Fn(&str) -> Option<usize>,
    out: &mut Vec<(bool, Expr)>,
) -> bool {
    match e {
        Expr::Bin(op @ (BinOp::Add | BinOp::Sub), x, y, _) => {
            // Variables used on both sides are summed over this addition.
            let mut inner = around.to_vec();
            inner.extend(
                reductions
                    .iter()
                    .filter(|v| !around.contains(v) && uses(x, v) && uses(y, v))
                    .cloned(),
            );
            distribute(x, positive, &inner, reductions, extent, out)
                && distribute(
                    y,
                    positive == (*op == BinOp::Add),
                    &inner,
                    reductions,
                    extent,
                    out,
                )
        }
        Expr::Neg(x, _) => distribute(x, !positive, around, reductions, extent, out),
        term => {
            let mut scale: f64 = 1.0;
            for v in around {
                if uses(term, v) {
                    if !summed_at_top(term, v) {
                        return false;
                    }
                } else {
                    match extent(v) {
                        Some(n) => scale *= n as f64,
                        None => return false,
                    }
                }
            }
            // Summed over an empty range, the term has no terms at all.
            if scale == 0.0 {
                return true;
            }
            let span = term.span();
            let term = if scale == 1.0 {
                term.clone()
            } else {
                Expr::Bin(
                    BinOp::Mul,
                    Box::new(Expr::Const(scale, span)),
                    Box::new(term.clone()),
                    span,
                )
            };
            out.push((positive, term));
            true
        }
    }
}

/// Whether summing `v` over the whole of `e` means the same as summing it
/// where its uses meet: only products lie between (factors without `v`
/// come out of the sum), not an addition with a side that lacks `v`.
fn summed_at_top(e: &Expr, v: &str) -> bool {
    match e {
        Expr::Neg(x, _) => summed_at_top(x, v),
        Expr::Bin(op, x, y, _) => match (uses(x, v), uses(y, v)) {
            (true, false) => *op == BinOp::Mul && summed_at_top(x, v),
            (false, true) => *op == BinOp::Mul && summed_at_top(y, v),
            _ => true,
        },
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse_assignment;

    #[test]
    fn reduction_placed_at_lowest_common_node() {
        let a = parse_assignment("y(i) = A(i,j) * x(j) + z(i)").unwrap(); // ok: test code, a panic is a failed test
        let r = place_reductions(&a);
        assert!(matches!(&r, RExpr::Bin(BinOp::Add, l, _) if matches!(**l, RExpr::Sum(..))));
        assert!(!sums_hoist_to_root(&r));
        let b = parse_assignment("y(i) = A(i,j) * (x(j) + w(j))").unwrap(); // ok: test code, a panic is a failed test
        assert!(sums_hoist_to_root(&place_reductions(&b)));
    }

    #[test]
    fn an_access_summing_private_variables_may_not_sit_under_an_addition() {
        let private = |acc: &Access| acc.tensor == "D";
        let under_add = parse_assignment("y(i) = D(i,j) * x(j) + z(i)").unwrap(); // ok: test code, a panic is a failed test
        assert!(!sums_hoist_with_private(
            &parse_assignment("y(i) = D(i) + z(i)").unwrap(), // ok: test code
            &private
        )); // ok: test code, a panic is a failed test
        assert!(!sums_hoist_with_private(&under_add, &private));
        // In a product the private sum hoists with the others.
        assert!(sums_hoist_with_private(
            &parse_assignment("y(i) = D(i,j) * (x(j) * z(i))").unwrap(), // ok: test code
            &private
        )); // ok: test code, a panic is a failed test
        assert!(sums_hoist_with_private(
            &parse_assignment("y(i) = A(i) + z(i)").unwrap(), // ok: test code
            &private
        )); // ok: test code, a panic is a failed test
        assert!(!sums_hoist_with_private(
            &parse_assignment("y(i) = -(z(i) - D(i))").unwrap(), // ok: test code
            &private
        )); // ok: test code, a panic is a failed test
    }

    fn terms(text: &str) -> Option<Vec<String>> {
        let a = parse_assignment(text).unwrap(); // ok: test code, a panic is a failed test
        distributed_terms(&a, |_| Some(5)).map(|t| {
            t.into_iter()
                .map(|(p, e)| format!("{}{e}", if p { "+" } else { "-" }))
                .collect()
        })
    }

    #[test]
    fn sums_distribute_over_their_terms() {
        assert_eq!(
            terms("y(i) = B(i,j) * x(j) - 2 * C(i,j) * w(j) + z(i)").unwrap(), // ok: test code
            ["+B(i,j) * x(j)", "-2 * C(i,j) * w(j)", "+z(i)"]
        ); // ok: test code, a panic is a failed test
           // `3` sits inside the sum over j: added once per j.
        assert_eq!(
            terms("a = B(j) + 3 - C(j)").unwrap(), // ok: test code
            ["+B(j)", "+5 * 3", "-C(j)"]
        ); // ok: test code, a panic is a failed test
           // Inside a product, a factor without j comes out of the sum.
        assert_eq!(terms("a = (B(j) + C(j)) * d + D(j)").unwrap().len(), 2); // ok: test code, a panic is a failed test
                                                                             // Alone, `(B(j) + 1) * d` would sum B only: not distributable.
        assert_eq!(terms("a = (B(j) + 1) * d + D(j)"), None);
    }
}
