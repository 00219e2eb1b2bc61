//! Clean-up passes run on a kernel's loop IR before either backend sees it,
//! so the C a user reads and the code the JIT runs stay the same program.

use super::*;
use std::collections::BTreeSet;

/// The function both backends translate: `f` without dead variables.
pub fn for_codegen(f: &Function) -> Function {
    let mut g = f.clone();
    remove_dead_vars(&mut g);
    g
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
