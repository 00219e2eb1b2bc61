//! Multiplying out a product over an addition that holds a sum, so that the
//! sum no longer sits inside the addition and can be hoisted:
//! `y(i) = (A(i,j)*x(j) + b(i)) * a` means `sum_j(A(i,j)*x(j))*a + b(i)*a`,
//! which is `sum_j(A(i,j)*x(j)*a) + b(i)*a` (the factor has no `j`, so it
//! moves inside the sum), two terms that each run as a loop nest.
//!
//! Only where it costs no extra work: the factor may use only variables the
//! summed term keeps (its free variables), so the sum is not recomputed for
//! each of the factor's own coordinates. `A(i,j) * (x(j) + B(j,k)*w(k))`
//! stays as it is: multiplied out, the sum over `k` would run once per
//! `(i, j)` instead of once per `j` (that needs a temporary).

use super::ast::*;

/// The statement with such products multiplied out, or `None` when there
/// are none. `summed_access` tells whether an access carries a sum of its
/// own (a format with hidden levels sums over them per access).
pub fn expand_summed_products(
    a: &Assignment,
    summed_access: &dyn Fn(&Access) -> bool,
) -> Option<Assignment> {
    let whole = Uses::of(&a.rhs);
    let cx = Context {
        reductions: a.reduction_vars(),
        whole,
        summed_access,
    };
    let mut changed = false;
    let rhs = cx.rewrite(&a.rhs, &mut changed);
    changed.then(|| Assignment { rhs, ..a.clone() })
}

/// How often each variable is used (one count per index of an access).
#[derive(Default)]
struct Uses(std::collections::BTreeMap<String, usize>);

impl Uses {
    fn of(e: &Expr) -> Uses {
        let mut u = Uses::default();
        for acc in e.accesses() {
            for i in &acc.indices {
                *u.0.entry(i.name.clone()).or_default() += 1;
            }
        }
        u
    }
    fn count(&self, v: &str) -> usize {
        self.0.get(v).copied().unwrap_or(0)
    }
}

struct Context<'a> {
    reductions: Vec<String>,
    whole: Uses,
    summed_access: &'a dyn Fn(&Access) -> bool,
}

impl Context<'_> {
    fn rewrite(&self, e: &Expr, changed: &mut bool) -> Expr {
        match e {
            Expr::Access(_) | Expr::Const(..) => e.clone(),
            Expr::Neg(x, s) => Expr::Neg(Box::new(self.rewrite(x, changed)), *s),
            Expr::Bin(op, x, y, s) => {
                let (x, y) = (self.rewrite(x, changed), self.rewrite(y, changed));
                if *op == BinOp::Mul {
                    for (sum, factor, factor_first) in [(&x, &y, false), (&y, &x, true)] {
                        if self.worth_multiplying_out(sum, factor) {
                            *changed = true;
                            return multiply_out(sum, factor, factor_first, *s);
                        }
                    }
                }
                Expr::Bin(*op, Box::new(x), Box::new(y), *s)
            }
        }
    }

    /// Whether `addition * factor` should become a sum of products: the
    /// addition has a term holding a sum, and the factor uses only
    /// variables every such term keeps.
    fn worth_multiplying_out(&self, addition: &Expr, factor: &Expr) -> bool {
        let terms = super::reduce::additive_terms(addition);
        if terms.len() < 2 {
            return false;
        }
        let factor_vars = Uses::of(factor);
        let mut any = false;
        for (_, term) in &terms {
            let here = Uses::of(term);
            // Reductions whose every use lies in this term are summed in it.
            let inner: Vec<&String> = self
                .reductions
                .iter()
                .filter(|v| here.count(v) > 0 && here.count(v) == self.whole.count(v))
                .collect();
            let own_sum = term.accesses().iter().any(|acc| (self.summed_access)(acc));
            if inner.is_empty() && !own_sum {
                continue;
            }
            any = true;
            let keeps = |v: &str| here.count(v) > 0 && !inner.iter().any(|r| *r == v);
            if !factor_vars.0.keys().all(|v| keeps(v)) {
                return false;
            }
        }
        any
    }
}

/// `(t1 ± t2 ± ...) * factor` as `t1*factor ± t2*factor ± ...`, the factor
/// kept on the side it was written. The addition keeps its shape: which
/// terms a variable is summed around depends on it (`(D(k) + c) + (D(k) +
/// c)` sums `k` around both `c`s; a flat `D(k)*f + c*f + D(k)*f + c*f`,
/// read left to right, would leave the last `c` outside the sum over `k`).
fn multiply_out(addition: &Expr, factor: &Expr, factor_first: bool, span: Span) -> Expr {
    match addition {
        Expr::Bin(op @ (BinOp::Add | BinOp::Sub), x, y, s) => Expr::Bin(
            *op,
            Box::new(multiply_out(x, factor, factor_first, span)),
            Box::new(multiply_out(y, factor, factor_first, span)),
            *s,
        ),
        Expr::Neg(x, s) => Expr::Neg(Box::new(multiply_out(x, factor, factor_first, span)), *s),
        t => {
            let (l, r) = if factor_first {
                (factor, t)
            } else {
                (t, factor)
            };
            Expr::Bin(BinOp::Mul, Box::new(l.clone()), Box::new(r.clone()), span)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse_assignment;

    fn expanded(text: &str) -> Option<String> {
        expand_summed_products(&parse_assignment(text).unwrap(), &|_| false) // ok: test code
            .map(|a| a.rhs.to_string()) // ok: test code, a panic is a failed test
    }

    #[test]
    fn scaled_sums_are_multiplied_out() {
        assert_eq!(
            expanded("y(i) = (A(i,j)*x(j) + b(i)) * a").unwrap(), // ok: test code
            "A(i,j) * x(j) * a + b(i) * a"
        ); // ok: test code, a panic is a failed test
        assert_eq!(
            expanded("y(i) = z(i) * (A(i,j)*x(j) - b(i))").unwrap(), // ok: test code
            "z(i) * A(i,j) * x(j) - z(i) * b(i)"
        ); // ok: test code, a panic is a failed test
           // Nested: the inner product first, then the outer one.
        assert_eq!(
            expanded("y(i) = ((A(i,j)*x(j) + b(i)) * a + c(i)) * d").unwrap(), // ok: test code
            "A(i,j) * x(j) * a * d + b(i) * a * d + c(i) * d"
        ); // ok: test code, a panic is a failed test
    }

    #[test]
    fn products_that_would_recompute_a_sum_stay() {
        // The factor brings `i` into the sum over k: once per (i, j).
        assert_eq!(expanded("y(i) = A(i,j) * (x(j) + B(j,k)*w(k))"), None);
        // Both sides hold sums: multiplied out, they would nest.
        assert_eq!(
            expanded("y(i) = (A(i,j)*x(j) + b(i)) * (B(i,k)*w(k) + c(i))"),
            None
        );
        // No sum inside the addition: nothing to do.
        assert_eq!(expanded("y(i) = A(i,j) * (x(j) + w(j))"), None);
        assert_eq!(expanded("y(i) = (b(i) + c(i)) * a"), None);
    }

    #[test]
    fn an_access_with_its_own_sum_counts_as_one() {
        let a = parse_assignment("y(i) = (A(i) + b(i)) * a").unwrap(); // ok: test code, a panic is a failed test
        assert_eq!(expanded("y(i) = (A(i) + b(i)) * a"), None);
        let e = expand_summed_products(&a, &|acc| acc.tensor == "A").unwrap(); // ok: test code, a panic is a failed test
        assert_eq!(e.rhs.to_string(), "A(i) * a + b(i) * a");
    }
}
