//! A merge loop steps its cursors at the end of each iteration (`pB1 = iB
//! <= iC ? pB1_seg : pB1`), after the loops nested in it (the levels
//! below). Everything such a step reads (both coordinates, the run's end,
//! the cursor) then stays live through those loops, where the Cranelift
//! tier's registers run out: a three-level COO add keeps about thirty
//! values live in its innermost loop. Here the step is computed as soon
//! as what it reads is final (`let pB1_next = ...` before the nested
//! loops), and the end of the iteration only assigns it: one value live
//! through the nested loops instead of three or four.
//!
//! Exact: the step's expression reads no memory and no variable assigned
//! between its new place and its old one, so it has the same value there.

use super::{assigns, fresh_var, has_loops, nested_blocks_mut, Block, Expr, Function, Stmt, VarId};

pub fn compute_steps_early(f: &mut Function) {
    let mut body = std::mem::take(&mut f.body);
    in_block(&mut body, f);
    f.body = body;
}

fn in_block(block: &mut Block, f: &mut Function) {
    for s in block.iter_mut() {
        if let Stmt::While { body, .. } | Stmt::For { body, .. } = s {
            in_loop_body(body, f);
        }
        for inner in nested_blocks_mut(s) {
            in_block(inner, f);
        }
    }
}

/// Move the computation of the steps that end `body` ahead of its nested
/// loops, where that is exact and leaves fewer values live through them.
fn in_loop_body(body: &mut Block, f: &mut Function) {
    let steps = body
        .iter()
        .rev()
        .take_while(|s| matches!(s, Stmt::Set(..)))
        .count();
    let mut made: Vec<VarId> = Vec::new();
    for k in 0..steps {
        // Counted from the end, which the `let`s inserted above leave alone.
        let first_step = body.len() - steps;
        let s = first_step + k;
        let Stmt::Set(p, e) = &body[s] else { continue };
        let (p, e) = (*p, e.clone());
        if e.reads_memory() {
            continue;
        }
        let reads = e.vars();
        // Worth it only if the step reads at least two values besides its
        // own cursor: they give way to one.
        if reads.iter().filter(|&&v| v != p).count() < 2 {
            continue;
        }
        // The steps before this one must leave what it reads alone.
        if body[first_step..s]
            .iter()
            .any(|t| reads.iter().any(|&v| assigns(t, v)))
        {
            continue;
        }
        let mut at = body[..first_step]
            .iter()
            .rposition(|t| reads.iter().any(|&v| assigns(t, v)))
            .map_or(0, |k| k + 1);
        // after the steps computed there already, in the steps' order
        while matches!(&body[at], Stmt::Let(v, _) if made.contains(v)) {
            at += 1;
        }
        if !has_loops(&body[at..first_step]) {
            continue;
        }
        let name = format!("{}_next", f.vars[p as usize].name);
        let ty = f.vars[p as usize].ty;
        let next = fresh_var(&mut f.vars, &name, ty);
        body[s] = Stmt::Set(p, Expr::Var(next));
        body.insert(at, Stmt::Let(next, e));
        made.push(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::interp::test_memory::{self, scratch as array};
    use crate::ir::Emitter;

    /// A union of two sorted lists of three coordinates, `in[0..3]` and
    /// `in[3..6]`, with a loop nested in each iteration (the level below)
    /// and the cursors stepped at the end, as lowering writes it. With
    /// `spoil`, the nested loop also assigns `a`, which the step reads.
    fn merge(spoil: bool) -> Function {
        let (input, out) = (array("in"), array("out"));
        let mut e = Emitter::new();
        let n = e.let_var("n", Expr::Int(0));
        let pa = e.let_var("pa", Expr::Int(0));
        let pb = e.let_var("pb", Expr::Int(0));
        let valid = |p: &Expr| Expr::lt(p.clone(), Expr::Int(3));
        let cond = Expr::or(valid(&pa), valid(&pb));
        let body = e.block(|e| {
            let a = e.let_var("a", Expr::Int(i64::MAX));
            let read = Expr::load(input.clone(), pa.clone());
            e.if_(valid(&pa), |e| e.set(&a, read));
            let b = e.let_var("b", Expr::Int(i64::MAX));
            let read = Expr::load(input.clone(), Expr::add(pb.clone(), Expr::Int(3)));
            e.if_(valid(&pb), |e| e.set(&b, read));
            let j = e.let_var("j", Expr::min(a.clone(), b.clone()));
            e.for_("t", Expr::Int(0), Expr::Int(2), |e, t| {
                let v = Expr::add(Expr::mul(j.clone(), Expr::Int(10)), t);
                e.store(out.clone(), n.clone(), v);
                e.set(&n, Expr::add(n.clone(), Expr::Int(1)));
                if spoil {
                    e.set(&a, Expr::Int(-1));
                }
            });
            let le = |x: &Expr, y: &Expr| Expr::cmp(crate::ir::CmpOp::Le, x.clone(), y.clone());
            let step = |p: &Expr| Expr::add(p.clone(), Expr::Int(1));
            e.set(&pa, Expr::select(le(&a, &b), step(&pa), pa.clone()));
            e.set(&pb, Expr::select(le(&b, &a), step(&pb), pb.clone()));
        });
        e.push(Stmt::While { cond, body });
        e.finish("merge")
    }

    fn run(f: &Function, input: [i64; 6]) -> Vec<i64> {
        test_memory::run(
            f,
            vec![("in", input.to_vec()), ("out", vec![-7; 16])],
            "out",
        )
    }

    fn loop_body(f: &Function) -> &Block {
        match f.body.last() {
            Some(Stmt::While { body, .. }) => body,
            _ => unreachable!("the merge ends with its loop"),
        }
    }

    /// Both steps are computed before the nested loop and only assigned
    /// after it, and every pair of lists (disjoint, equal, interleaved)
    /// gives the same output.
    #[test]
    fn steps_computed_before_the_nested_loop_step_alike() {
        let f = merge(false);
        let mut g = f.clone();
        compute_steps_early(&mut g);
        let kinds: Vec<&str> = loop_body(&g)
            .iter()
            .map(|s| match s {
                Stmt::Let(v, _) if g.vars[*v as usize].name.ends_with("_next") => "next",
                Stmt::For { .. } => "loop",
                Stmt::Set(_, Expr::Var(v)) if g.vars[*v as usize].name.ends_with("_next") => "step",
                _ => "other",
            })
            .collect();
        let ours: Vec<&str> = kinds.into_iter().filter(|k| *k != "other").collect();
        assert_eq!(
            ours,
            ["next", "next", "loop", "step", "step"],
            "{}",
            crate::ir::print::function(&g)
        );
        for input in [
            [1, 2, 3, 4, 5, 6],
            [4, 5, 6, 1, 2, 3],
            [1, 3, 5, 1, 3, 5],
            [1, 4, 6, 2, 4, 5],
            [0, 1, 9, 2, 9, 10],
        ] {
            assert_eq!(run(&f, input), run(&g, input), "{input:?}");
        }
    }

    /// A step reading a variable the nested loop assigns stays where it is.
    #[test]
    fn a_step_reading_what_the_loop_assigns_stays() {
        let mut f = merge(true);
        let before = f.clone();
        compute_steps_early(&mut f);
        assert_eq!(f.body, before.body);
        assert_eq!(f.vars.len(), before.vars.len());
    }
}
