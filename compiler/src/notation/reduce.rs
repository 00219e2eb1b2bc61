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
/// A term in which a variable summed around it is used inside an addition
/// of its own is multiplied out first: alone, `(B(j) + 1) * c` would sum
/// only `B` over j, so `sum_j ((B(j) + 1) * c + D(j))` becomes `sum_j B(j)
/// * c + |j| * 1 * c + sum_j D(j)`.
///
/// Refused when multiplying a term out gives more than `MAX_MONOMIALS`
/// terms, or a variable's extent is not known.
pub fn distributed_terms(
    a: &Assignment,
    extent: impl Fn(&str) -> Option<usize>,
) -> Result<Vec<(bool, Expr)>, Undistributable> {
    let reductions = a.reduction_vars();
    let mut out = Vec::new();
    distribute(&a.rhs, true, &[], &reductions, &extent, &mut out)?;
    // Every term summed over an empty range: the sum has no terms.
    if out.is_empty() {
        out.push((true, Expr::Const(0.0, a.rhs.span())));
    }
    Ok(out)
}

/// Why a sum could not be distributed over its terms.
#[derive(Clone, Debug, PartialEq)]
pub enum Undistributable {
    /// Multiplied out, this term has more than `MAX_MONOMIALS` terms.
    TooManyTerms(Expr),
    /// The extent of this summed variable is not known.
    UnknownExtent(String),
}

fn distribute(
    e: &Expr,
    positive: bool,
    around: &[String],
    reductions: &[String],
    extent: &dyn Fn(&str) -> Option<usize>,
    out: &mut Vec<(bool, Expr)>,
) -> Result<(), Undistributable> {
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
            distribute(x, positive, &inner, reductions, extent, out)?;
            let y_positive = positive == (*op == BinOp::Add);
            distribute(y, y_positive, &inner, reductions, extent, out)
        }
        Expr::Neg(x, _) => distribute(x, !positive, around, reductions, extent, out),
        term if around
            .iter()
            .any(|v| uses(term, v) && !summed_at_top(term, v)) =>
        {
            // Only products lie between the summed variables and each
            // monomial's accesses, so each sums on its own. The term's own
            // sums (of variables no other term uses) are placed in it first,
            // so that a monomial leaving one is scaled by its extent.
            let own: Vec<String> = reductions
                .iter()
                .filter(|v| !around.contains(v) && uses(term, v))
                .cloned()
                .collect();
            let monomials = multiplied_out(&place(term, &own), term, extent)?;
            for (sign, m) in &monomials {
                distribute(m, positive == *sign, around, reductions, extent, out)?;
            }
            Ok(())
        }
        term => {
            let mut scale: f64 = 1.0;
            for v in around.iter().filter(|v| !uses(term, v)) {
                let n = extent(v).ok_or_else(|| Undistributable::UnknownExtent(v.clone()))?;
                scale *= n as f64;
            }
            // Summed over an empty range, the term has no terms at all.
            if scale == 0.0 {
                return Ok(());
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
            Ok(())
        }
    }
}

/// The most monomials a term is multiplied out into (`multiplied_out`):
/// each becomes a loop nest of its own, and a product of sums multiplies
/// their counts.
pub const MAX_MONOMIALS: usize = 64;

/// `e` (its own sums placed, `place`) as a signed sum of monomials,
/// products of accesses and constants (the language has no other
/// operations): `(B(j) - 2) * c` gives `[(+, B(j) * c), (-, 2 * c)]`. A
/// monomial out of a sum over `k` that does not use `k` is scaled by its
/// extent (`(B(j) + 1) * sum_k (C(k) + 1)` has `B(j) * |k| * 1`); one
/// that does is summed over `k` where it stands alone, since only products
/// lie between. `term` is `e` as written: its span goes to the products
/// and constants made, and it names the term when there are too many.
fn multiplied_out(
    e: &RExpr,
    term: &Expr,
    extent: &dyn Fn(&str) -> Option<usize>,
) -> Result<Vec<(bool, Expr)>, Undistributable> {
    let span = term.span();
    let flip = |terms: Vec<(bool, Expr)>| terms.into_iter().map(|(p, t)| (!p, t)).collect();
    let product = |x: Expr, y: Expr| Expr::Bin(BinOp::Mul, Box::new(x), Box::new(y), span);
    let out = |e: &RExpr| multiplied_out(e, term, extent);
    let too_many = || Undistributable::TooManyTerms(term.clone());
    let terms: Vec<(bool, Expr)> = match e {
        RExpr::Access(a) => vec![(true, Expr::Access(a.clone()))],
        RExpr::Const(c) => vec![(true, Expr::Const(*c, span))],
        RExpr::Neg(x) => flip(out(x)?),
        RExpr::Bin(BinOp::Add, x, y) => [out(x)?, out(y)?].concat(),
        RExpr::Bin(BinOp::Sub, x, y) => [out(x)?, flip(out(y)?)].concat(),
        RExpr::Bin(BinOp::Mul, x, y) => {
            let (xs, ys) = (out(x)?, out(y)?);
            if xs.len() * ys.len() > MAX_MONOMIALS {
                return Err(too_many());
            }
            xs.iter()
                .flat_map(|(px, tx)| {
                    ys.iter()
                        .map(move |(py, ty)| (px == py, product(tx.clone(), ty.clone())))
                })
                .collect()
        }
        RExpr::Sum(vars, x) => {
            let mut terms = out(x)?;
            for (_, t) in &mut terms {
                let missing: Vec<&String> = vars.iter().filter(|v| !uses(t, v)).collect();
                for v in missing {
                    let n = extent(v).ok_or_else(|| Undistributable::UnknownExtent(v.clone()))?;
                    *t = product(Expr::Const(n as f64, span), t.clone());
                }
            }
            terms
        }
    };
    match terms.len() > MAX_MONOMIALS {
        true => Err(too_many()),
        false => Ok(terms),
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
        distributed_terms(&a, |_| Some(5)).ok().map(|t| {
            t.into_iter()
                .map(|(p, e)| format!("{}{e}", if p { "+" } else { "-" }))
                .collect()
        })
    }

    #[test]
    fn sums_distribute_over_their_terms() {
        // (statement, its terms with extents of 5)
        let cases: &[(&str, &[&str])] = &[
            (
                "y(i) = B(i,j) * x(j) - 2 * C(i,j) * w(j) + z(i)",
                &["+B(i,j) * x(j)", "-2 * C(i,j) * w(j)", "+z(i)"],
            ),
            // `3` sits inside the sum over j: added once per j.
            ("a = B(j) + 3 - C(j)", &["+B(j)", "+5 * 3", "-C(j)"]),
            // Inside a product, a factor without j comes out of the sum.
            (
                "a = (B(j) + C(j)) * d + D(j)",
                &["+(B(j) + C(j)) * d", "+D(j)"],
            ),
            // Alone, `(B(j) + 1) * d` would sum B only: it is multiplied
            // out, and its `1 * d` added once per j.
            (
                "a = (B(j) + 1) * d + D(j)",
                &["+B(j) * d", "+5 * 1 * d", "+D(j)"],
            ),
            (
                "a = B(i,k,j) * B(i,k,j) - (D(i,k) - 2) * -(1)",
                &["+B(i,k,j) * B(i,k,j)", "+D(i,k) * 1", "-25 * 2 * 1"],
            ),
            // A sum of the term's own (over k, inside it) scales the
            // monomials that leave it, here `1` twice: once per k, then
            // once per j.
            (
                "a = (B(j) + 1) * (C(k) + (1 + D(k))) + E(j)",
                &[
                    "+B(j) * C(k)",
                    "+B(j) * 5 * 1",
                    "+B(j) * D(k)",
                    "+5 * 1 * C(k)",
                    "+5 * 1 * 5 * 1",
                    "+5 * 1 * D(k)",
                    "+E(j)",
                ],
            ),
        ];
        for (statement, expected) in cases {
            let got = terms(statement).unwrap_or_default();
            assert_eq!(got, *expected, "{statement}");
        }
        // A product of sums multiplies their counts: 2^6 is the bound.
        let six = "(B(j) + 1) * (C(k) + 1) * (D(l) + 1) * (E(m) + 1) * (F(n) + 1) * (G(o) + 1)";
        let h = "H(j,k,l,m,n,o)";
        assert_eq!(terms(&format!("a = {six} + {h}")).unwrap().len(), 65); // ok: test code
        assert_eq!(terms(&format!("a = {six} * (I(j) + 1) + {h}")), None);
    }
}
