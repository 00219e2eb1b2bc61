//! A merge's coordinate is the least of its operands' (`let j = min(jB,
//! jC)`), and each operand's presence a test against it (`jB == j`). Here
//! the tests compare the operands with each other (`jB <= jC`, and
//! `jB == jC` for both), and where a test has shown which operand is at the
//! coordinate, `j` reads as that operand's own (`A2_crd[n] = jB`). A merge
//! of two operands then no longer reads `j` at all: one value fewer live
//! through the merge loop, where the Cranelift tier's registers run out and
//! values go to the stack (CSR add: the output's count and both `crd`
//! pointers, reloaded every iteration).
//!
//! Exact for integers of any value, the exhausted operand's sentinel
//! (`i64::MAX`) included: `x == min(x, y)` holds exactly when `x <= y`.
//! The cursors' steps then move into the cases (`case_steps`).

use super::{assigns, nested_blocks_mut, BinOp, Block, CmpOp, Expr, Stmt, Ty};
use super::{Function, VarId};

pub fn compare_operands(f: &mut Function) {
    let ints: Vec<bool> = f.vars.iter().map(|v| v.ty == Ty::I64).collect();
    rewrite_block(&mut f.body, &ints);
}

/// The three variables of `let j = min(a, b)`.
#[derive(Clone, Copy)]
struct Merge {
    j: VarId,
    a: VarId,
    b: VarId,
}

fn rewrite_block(block: &mut Block, ints: &[bool]) {
    for k in 0..block.len() {
        let Some(Stmt::Let(j, Expr::Bin(BinOp::Min, x, y))) = block.get(k) else {
            continue;
        };
        let (Expr::Var(a), Expr::Var(b)) = (&**x, &**y) else {
            continue;
        };
        let m = Merge {
            j: *j,
            a: *a,
            b: *b,
        };
        let int = |v: VarId| ints.get(v as usize).copied().unwrap_or(false);
        if m.a == m.b || !(int(m.j) && int(m.a) && int(m.b)) {
            continue;
        }
        // The rest of the block must see one value of each.
        if block[k + 1..]
            .iter()
            .any(|s| assigns(s, m.j) || assigns(s, m.a) || assigns(s, m.b))
        {
            continue;
        }
        for s in &mut block[k + 1..] {
            rewrite_stmt(s, m, None);
        }
        super::case_steps::thread(block, k + 1, m.a, m.b);
    }
    for inner in block.iter_mut().flat_map(nested_blocks_mut) {
        rewrite_block(inner, ints);
    }
}

/// Rewrite the tests of `m` in `s`; `known`: the operand `m.j` equals
/// wherever `s` runs, if a test above has shown it.
fn rewrite_stmt(s: &mut Stmt, m: Merge, known: Option<VarId>) {
    if let Stmt::If { cond, then, els } = s {
        rewrite_expr(cond, m, known);
        let (yes, no) = implied(cond, m);
        for t in then.iter_mut() {
            rewrite_stmt(t, m, known.or(yes));
        }
        for t in els.iter_mut() {
            rewrite_stmt(t, m, known.or(no));
        }
        return;
    }
    match s {
        Stmt::Let(_, e) | Stmt::Set(_, e) => rewrite_expr(e, m, known),
        Stmt::Store(_, i, v) => {
            rewrite_expr(i, m, known);
            rewrite_expr(v, m, known);
        }
        Stmt::Reserve { len, .. } => rewrite_expr(len, m, known),
        Stmt::Prefetch {
            at, stride, len, ..
        } => {
            rewrite_expr(at, m, known);
            rewrite_expr(stride, m, known);
            rewrite_expr(len, m, known);
        }
        Stmt::PrefetchStream { at, .. } | Stmt::PrefetchGather { at, .. } => {
            rewrite_expr(at, m, known)
        }
        Stmt::For { lo, hi, body, .. } => {
            rewrite_expr(lo, m, known);
            rewrite_expr(hi, m, known);
            for t in body.iter_mut() {
                rewrite_stmt(t, m, known);
            }
        }
        Stmt::While { cond, body } => {
            rewrite_expr(cond, m, known);
            for t in body.iter_mut() {
                rewrite_stmt(t, m, known);
            }
        }
        Stmt::If { .. } | Stmt::Comment(_) | Stmt::Unlikely => {}
    }
}

fn rewrite_expr(e: &mut Expr, m: Merge, known: Option<VarId>) {
    let var = Expr::Var;
    let le = |l: VarId, r: VarId| Expr::Cmp(CmpOp::Le, Box::new(var(l)), Box::new(var(r)));
    e.rewrite(&mut |x| {
        let at = |x: &Expr, v: VarId| {
            matches!(x, Expr::Cmp(CmpOp::Eq, l, r)
                if (**l == var(v) && **r == var(m.j)) || (**l == var(m.j) && **r == var(v)))
        };
        if at(x, m.a) {
            *x = le(m.a, m.b);
        } else if at(x, m.b) {
            *x = le(m.b, m.a);
        } else if matches!(x, Expr::Bin(BinOp::And, l, r)
            if (**l == le(m.a, m.b) && **r == le(m.b, m.a))
                || (**l == le(m.b, m.a) && **r == le(m.a, m.b)))
        {
            // both at the coordinate
            *x = Expr::Cmp(CmpOp::Eq, Box::new(var(m.a)), Box::new(var(m.b)));
        }
    });
    if let Some(k) = known {
        e.rewrite(&mut |x| {
            if *x == var(m.j) {
                *x = var(k);
            }
        });
    }
}

/// The operand `m.j` equals where `cond` holds, and where it does not.
fn implied(cond: &Expr, m: Merge) -> (Option<VarId>, Option<VarId>) {
    let is = |op: CmpOp, l: VarId, r: VarId| matches!(cond, Expr::Cmp(o, x, y) if *o == op && **x == Expr::Var(l) && **y == Expr::Var(r));
    if is(CmpOp::Le, m.a, m.b) || is(CmpOp::Eq, m.a, m.b) || is(CmpOp::Eq, m.b, m.a) {
        let no = is(CmpOp::Le, m.a, m.b).then_some(m.b);
        return (Some(m.a), no);
    }
    if is(CmpOp::Le, m.b, m.a) {
        return (Some(m.b), Some(m.a));
    }
    if let Expr::Bin(BinOp::And, l, r) = cond {
        return (implied(l, m).0.or(implied(r, m).0), None);
    }
    (None, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::interp::test_memory::{self, scratch as array};
    use crate::ir::walk_block;
    use crate::ir::Emitter;

    /// A two-operand merge step as lowering writes it: the cases, the
    /// coordinate stored in each, the cursors' steps.
    fn merge_step() -> Function {
        let (input, out) = (array("in"), array("out"));
        let mut e = Emitter::new();
        let a = e.let_var("a", Expr::load(input.clone(), Expr::Int(0)));
        let b = e.let_var("b", Expr::load(input, Expr::Int(1)));
        let pa = e.let_var("pa", Expr::Int(10));
        let pb = e.let_var("pb", Expr::Int(20));
        let j = e.let_var("j", Expr::min(a.clone(), b.clone()));
        let at = |v: &Expr| Expr::eq(v.clone(), j.clone());
        let store = |e: &mut Emitter, k: i64| e.store(out.clone(), Expr::Int(k), j.clone());
        let only_b = e.block(|e| e.if_(at(&b), |e| store(e, 2)));
        let only_a = e.block(|e| store(e, 1));
        let one = Stmt::If {
            cond: at(&a),
            then: only_a,
            els: only_b,
        };
        let both = e.block(|e| store(e, 0));
        e.push(Stmt::If {
            cond: Expr::and(at(&a), at(&b)),
            then: both,
            els: vec![one],
        });
        // the cursors' steps, which move into the cases
        for (p, v) in [(&pa, &a), (&pb, &b)] {
            e.set(
                p,
                Expr::select(at(v), Expr::add(p.clone(), Expr::Int(1)), p.clone()),
            );
        }
        // a test the first one decides either way, then a step
        let first = e.block(|e| e.store(out.clone(), Expr::Int(5), Expr::Int(1)));
        let second = e.block(|e| e.store(out.clone(), Expr::Int(5), Expr::Int(2)));
        let again = Stmt::If {
            cond: at(&a),
            then: first,
            els: second,
        };
        let other = e.block(|e| e.if_(at(&b), |e| store(e, 6)));
        e.push(Stmt::If {
            cond: at(&a),
            then: other,
            els: vec![again],
        });
        e.set(
            &pa,
            Expr::select(at(&a), Expr::add(pa.clone(), Expr::Int(1)), pa.clone()),
        );
        // an intersection's case, then both steps (a branch between them
        // where the coordinates differ)
        e.if_(Expr::and(at(&a), at(&b)), |e| store(e, 7));
        for (p, v) in [(&pa, &a), (&pb, &b)] {
            e.set(
                p,
                Expr::select(at(v), Expr::add(p.clone(), Expr::Int(3)), p.clone()),
            );
        }
        e.store(out.clone(), Expr::Int(3), pa);
        e.store(out.clone(), Expr::Int(4), pb);
        e.finish("merge")
    }

    fn run(f: &Function, a: i64, b: i64) -> Vec<i64> {
        test_memory::run(f, vec![("in", vec![a, b]), ("out", vec![-7; 8])], "out")
    }

    /// Every order of two coordinates, equal ones and the exhausted
    /// operand's `i64::MAX` included, takes the same case, stores the same
    /// coordinate and steps the same cursors after the rewrite, which
    /// leaves `j` unread.
    #[test]
    fn operands_compared_with_each_other_decide_as_the_least_did() {
        let f = merge_step();
        let mut g = f.clone();
        compare_operands(&mut g);
        crate::ir::passes::remove_dead_vars(&mut g);
        let mut reads_min = false;
        walk_block(&g.body, &mut |s| {
            reads_min |= matches!(s, Stmt::Let(_, Expr::Bin(BinOp::Min, ..)))
        });
        assert!(
            !reads_min,
            "j is still computed:\n{}",
            crate::ir::print::function(&g)
        );
        let values = [-3, 0, 5, i64::MAX];
        for a in values {
            for b in values {
                assert_eq!(run(&f, a, b), run(&g, a, b), "a = {a}, b = {b}");
            }
        }
    }

    /// A coordinate assigned after the minimum is taken keeps its tests.
    #[test]
    fn an_operand_assigned_later_is_left_alone() {
        let mut f = merge_step();
        let a = match &f.body[0] {
            Stmt::Let(a, _) => *a,
            _ => unreachable!("the first statement is a's let"),
        };
        f.body.push(Stmt::Set(a, Expr::Int(1)));
        let before = f.body.clone();
        compare_operands(&mut f);
        assert_eq!(f.body, before);
    }
}
