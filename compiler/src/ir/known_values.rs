//! Variables read where their value is a known constant, replaced by it,
//! for the Cranelift tier. A sparse result's counts start at 0, and the
//! loops that ready its `pos` arrays before the first append read them:
//! `let A1_count = 0; reserve A2_pos[A1_count + 1]; for p in
//! 0..A1_count + 1 { A2_pos[p] = 0 }`. With the count written in, the
//! loop has a constant trip count of one, which the translator unrolls
//! into a store: fewer blocks, fewer values live, less for register
//! allocation (most of a merge's compile at `opt_level=none`).
//!
//! A variable's value is known from a `let` or `set` of a constant to the
//! next statement that may assign it: a loop's body forgets, for the whole
//! loop, whatever it assigns (a later iteration reads the last one's
//! value), and an `if` forgets after it whatever either arm assigns.

use std::collections::BTreeMap;

use super::{
    fold_constant_operands, is_constant, stmt_exprs_mut, walk_block, Block, Expr, Function, Stmt,
    VarId,
};

type Known = BTreeMap<VarId, Expr>;

pub(super) fn write_in(f: &mut Function) {
    block(&mut f.body, &mut Known::new());
}

fn block(b: &mut Block, known: &mut Known) {
    for s in b.iter_mut() {
        stmt(s, known);
    }
}

fn stmt(s: &mut Stmt, known: &mut Known) {
    match s {
        Stmt::Let(v, e) | Stmt::Set(v, e) => {
            write(e, known);
            if is_constant(e) {
                known.insert(*v, e.clone());
            } else {
                known.remove(v);
            }
        }
        Stmt::For { var, lo, hi, body } => {
            // The bounds are read once, before the body runs.
            write(lo, known);
            write(hi, known);
            known.remove(var);
            forget_assigned(body, known);
            block(body, &mut known.clone());
        }
        Stmt::While { cond, body } => {
            // The condition is read before every iteration.
            forget_assigned(body, known);
            write(cond, known);
            block(body, &mut known.clone());
        }
        Stmt::If { cond, then, els } => {
            write(cond, known);
            block(then, &mut known.clone());
            block(els, &mut known.clone());
            forget_assigned(then, known);
            forget_assigned(els, known);
        }
        other => {
            for e in stmt_exprs_mut(other) {
                write(e, known);
            }
        }
    }
}

/// `e` with the known variables written in, folded.
fn write(e: &mut Expr, known: &Known) {
    if known.is_empty() {
        return;
    }
    e.rewrite(&mut |x| {
        if let Expr::Var(v) = x {
            if let Some(c) = known.get(v) {
                *x = c.clone();
            }
        }
        fold_constant_operands(x);
    });
}

/// Forget every variable `b` assigns, at any depth.
fn forget_assigned(b: &[Stmt], known: &mut Known) {
    if known.is_empty() {
        return;
    }
    walk_block(b, &mut |s| {
        if let Stmt::Let(v, _) | Stmt::Set(v, _) | Stmt::For { var: v, .. } = s {
            known.remove(v);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::interp::test_memory::{run, scratch};
    use crate::ir::Emitter;

    /// `let n = 0; for p in 0..n + 1 { y[p] = 7 }; while n < 3 { y[n + 1]
    /// = n; n += 1 }; y[4] = n`.
    fn kernel() -> Function {
        let mut e = Emitter::new();
        let n = e.let_var("n", Expr::Int(0));
        let hi = Expr::add(n.clone(), Expr::Int(1));
        e.for_("p", Expr::Int(0), hi, |e, p| {
            e.store(scratch("y"), p, Expr::Int(7))
        });
        e.while_(Expr::lt(n.clone(), Expr::Int(3)), |e| {
            e.store(scratch("y"), Expr::add(n.clone(), Expr::Int(1)), n.clone());
            e.set(&n, Expr::add(n.clone(), Expr::Int(1)));
        });
        e.store(scratch("y"), Expr::Int(4), n);
        e.finish("k")
    }

    #[test]
    fn a_known_value_is_written_in_until_something_assigns_it() {
        let mut f = kernel();
        let before = run(&f, vec![("y", vec![9; 5])], "y");
        write_in(&mut f);
        let text = f.to_string();
        // Before the loop that assigns it: known.
        assert!(text.contains("for p in 0..1 {"), "{text}");
        // In and after that loop: read.
        assert!(text.contains("while n < 3 {"), "{text}");
        assert!(text.contains("y_y[n + 1] = n"), "{text}");
        assert!(text.contains("y_y[4] = n"), "{text}");
        assert_eq!(run(&f, vec![("y", vec![9; 5])], "y"), before);
        assert_eq!(before, [7, 0, 1, 2, 3]);
    }

    #[test]
    fn an_arm_that_assigns_a_value_makes_it_unknown_after_the_if() {
        let mut e = Emitter::new();
        let n = e.let_var("n", Expr::Int(2));
        let c = e.let_var("c", Expr::load(scratch("x"), Expr::Int(0)));
        e.if_(Expr::lt(c, Expr::Int(5)), |e| {
            e.store(scratch("y"), Expr::Int(0), n.clone());
            e.set(&n, Expr::Int(3));
        });
        e.store(scratch("y"), Expr::Int(1), n);
        let mut f = e.finish("k");
        write_in(&mut f);
        let text = f.to_string();
        assert!(text.contains("y_y[0] = 2"), "{text}");
        assert!(text.contains("y_y[1] = n"), "{text}");
        for (x, want) in [(1, [2, 3]), (7, [9, 2])] {
            let out = run(&f, vec![("x", vec![x]), ("y", vec![9; 2])], "y");
            assert_eq!(out, want, "x = {x}");
        }
    }
}
