//! Clean-up passes run on a kernel's loop IR before either backend sees it,
//! so the C a user reads and the code the JIT runs stay the same program.

use super::*;
use std::collections::BTreeSet;

/// The function both backends translate: `f` without dead variables.
pub fn for_codegen(f: &Function) -> Function {
    let mut g = f.clone();
    fold_zero_starts(&mut g.body);
    remove_dead_vars(&mut g);
    g
}

/// `let t = 0.0; t += e` becomes `let t = e`: a sum of one term is that
/// term. (Neither backend may drop the `0.0 +` itself: it turns -0.0 into
/// 0.0, a difference this fold accepts.)
pub fn fold_zero_starts(b: &mut Block) {
    let mut k = 0;
    while k < b.len() {
        if let Stmt::Let(t, Expr::Float(z)) = &b[k] {
            let (t, zero) = (*t, *z == 0.0);
            // Skip `let`s that do not mention `t` to find its first update.
            let mut j = k + 1;
            while j < b.len() && matches!(&b[j], Stmt::Let(v, e) if *v != t && !uses(e, t)) {
                j += 1;
            }
            let term = match b.get(j) {
                Some(Stmt::Set(t2, Expr::Bin(BinOp::Add, l, r))) if zero && *t2 == t && **l == Expr::Var(t) && !uses(r, t) => Some((**r).clone()),
                _ => None,
            };
            if let Some(r) = term {
                b[j] = Stmt::Let(t, r);
                b.remove(k);
                continue;
            }
        }
        k += 1;
    }
    for s in b.iter_mut() {
        match s {
            Stmt::For { body, .. } | Stmt::While { body, .. } => fold_zero_starts(body),
            Stmt::If { then, els, .. } => {
                fold_zero_starts(then);
                fold_zero_starts(els);
            }
            _ => {}
        }
    }
}

fn uses(e: &Expr, v: VarId) -> bool {
    let mut found = false;
    e.walk(&mut |x| found |= *x == Expr::Var(v));
    found
}

/// Drop `let`s and assignments of variables nothing reads. Expressions have
/// no side effects (loads read validated positions), so removing them is
/// always safe; a C compiler would otherwise warn about them.
pub fn remove_dead_vars(f: &mut Function) {
    loop {
        let read = read_vars(&f.body);
        let before = count(&f.body);
        prune(&mut f.body, &read);
        if count(&f.body) == before {
            break;
        }
    }
}

fn read_vars(b: &Block) -> BTreeSet<VarId> {
    let mut read = BTreeSet::new();
    walk_block(b, &mut |s| {
        for e in stmt_exprs(s) {
            e.walk(&mut |x| {
                if let Expr::Var(v) = x {
                    read.insert(*v);
                }
            });
        }
    });
    read
}

fn count(b: &Block) -> usize {
    let mut n = 0;
    walk_block(b, &mut |_| n += 1);
    n
}

fn prune(b: &mut Block, read: &BTreeSet<VarId>) {
    b.retain(|s| !matches!(s, Stmt::Let(v, _) | Stmt::Set(v, _) if !read.contains(v)));
    for s in b.iter_mut() {
        match s {
            Stmt::For { body, .. } | Stmt::While { body, .. } => prune(body, read),
            Stmt::If { then, els, .. } => {
                prune(then, read);
                prune(els, read);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sum_of_one_term_starts_at_the_term() {
        let mut e = Emitter::new();
        let t = e.let_var("t", Expr::Float(0.0));
        e.set(&t, Expr::add(t.clone(), Expr::load(ArrayRef::vals("B"), Expr::Int(0))));
        e.store(ArrayRef::vals("y"), Expr::Int(0), t);
        let mut f = e.finish("k");
        fold_zero_starts(&mut f.body);
        let text = f.to_string();
        assert!(text.contains("let t: f64 = B_vals[0]") && !text.contains("0.0"), "{text}");
    }

    #[test]
    fn dead_chains_go_and_live_ones_stay() {
        let mut e = Emitter::new();
        let a = e.let_var("a", Expr::Int(1));
        let _b = e.let_var("b", Expr::add(a.clone(), Expr::Int(2)));
        let c = e.let_var("c", Expr::Int(3));
        e.store(ArrayRef::vals("y"), Expr::Int(0), c);
        let mut f = e.finish("k");
        remove_dead_vars(&mut f);
        let text = f.to_string();
        assert!(!text.contains("let a") && !text.contains("let b"), "{text}");
        assert!(text.contains("let c"), "{text}");
    }
}
