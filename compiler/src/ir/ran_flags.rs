//! A flag that a counted loop sets in every iteration says only whether
//! the loop ran. A sparse result's sum over the entries of a fiber
//! (`let ttouched = 0; for p in lo..hi { tsum += ..; ttouched = 1 }; if
//! ttouched != 0 { append }`: TTV from CSF into DCSR) keeps the flag in a
//! register through the loop and sets it in each iteration, where the
//! loop's bounds give the same answer:
//!
//! ```text
//! if lo < hi { for p in lo..hi { tsum += .. }; append }
//! ```
//!
//! or, where the flag is read elsewhere than by the `if` right after the
//! loop, `let ttouched = select(lo < hi, 1, 0)` after it. On the Cranelift
//! tier the fiber loop's registers run out where fibers hold an entry or
//! two, and the flag was one of the values it kept in them.
//!
//! Exact: a `for` loop runs at least once exactly where `lo < hi` on
//! entry, and `lo` and `hi` read no memory and no variable the loop
//! assigns, so after it they have the values they had on entry. The flag is
//! read nowhere between its declaration and the loop's end, and the loop
//! gives it no value but 1.

use super::{
    assigns, nested_blocks_mut, reads, walk_block, Block, CmpOp, Expr, Function, Stmt, VarId,
};

pub fn flags_from_bounds(f: &mut Function) {
    in_block(&mut f.body);
}

fn in_block(b: &mut Block) {
    let mut k = 0;
    while k < b.len() {
        if let Stmt::Let(t, Expr::Int(0)) = b[k] {
            if let Some(m) = loop_setting(b, k, t) {
                let Stmt::For { lo, hi, body, .. } = &mut b[m] else {
                    unreachable!("loop_setting returns a `for`");
                };
                drop_sets(body, t);
                let ran = Expr::Cmp(CmpOp::Lt, Box::new(lo.clone()), Box::new(hi.clone()));
                if only_tested_next(b, m, t) {
                    // `if ran { loop; then } else { els }`
                    let Stmt::If { then, els, .. } = b.remove(m + 1) else {
                        unreachable!("only_tested_next saw an `if`");
                    };
                    let looped = b.remove(m);
                    let then = std::iter::once(looped).chain(then).collect();
                    b.insert(
                        m,
                        Stmt::If {
                            cond: ran,
                            then,
                            els,
                        },
                    );
                } else {
                    let flag = Expr::Select(
                        Box::new(ran),
                        Box::new(Expr::Int(1)),
                        Box::new(Expr::Int(0)),
                    );
                    b.insert(m + 1, Stmt::Let(t, flag));
                }
                b.remove(k);
                continue;
            }
        }
        for inner in nested_blocks_mut(&mut b[k]) {
            in_block(inner);
        }
        k += 1;
    }
}

/// Whether the statement after the loop `b[m]` is `if t != 0 { .. }`, the
/// flag's last mention.
fn only_tested_next(b: &Block, m: usize, t: VarId) -> bool {
    let Some(Stmt::If { cond, then, els }) = b.get(m + 1) else {
        return false;
    };
    let tests = matches!(cond, Expr::Cmp(CmpOp::Ne, x, z)
        if **x == Expr::Var(t) && **z == Expr::Int(0));
    tests
        && !then.iter().chain(els).any(|s| mentions(s, t))
        && !b[m + 2..].iter().any(|s| mentions(s, t))
}

/// The index of the `for` loop after `b[k]` (`let t = 0`) that sets `t`
/// to 1 in every iteration, where its bounds can stand in for `t` (see
/// the module).
fn loop_setting(b: &Block, k: usize, t: VarId) -> Option<usize> {
    let m = (k + 1..b.len()).find(|&m| mentions(&b[m], t))?;
    let Stmt::For { var, lo, hi, body } = &b[m] else {
        return None;
    };
    let every_iteration = body.iter().any(|s| is_set_to_one(s, t));
    let mut only_ones = true;
    walk_block(body, &mut |s| {
        let reads = crate::ir::stmt_exprs(s).iter().any(|e| e.uses(t));
        let other_value =
            matches!(s, Stmt::Let(w, _) | Stmt::Set(w, _) if *w == t) && !is_set_to_one(s, t);
        only_ones &= !reads && !other_value;
    });
    let steady = |e: &Expr| {
        !e.reads_memory()
            && !e.uses(t)
            && e.vars()
                .iter()
                .all(|&v| v != *var && !body.iter().any(|s| assigns(s, v)))
    };
    (every_iteration && only_ones && steady(lo) && steady(hi)).then_some(m)
}

fn is_set_to_one(s: &Stmt, t: VarId) -> bool {
    matches!(s, Stmt::Set(w, Expr::Int(1)) if *w == t)
}

/// Whether `s` (or a statement inside it) reads or assigns `t`.
fn mentions(s: &Stmt, t: VarId) -> bool {
    reads(s, t) || assigns(s, t)
}

/// Remove every `t = 1` from `b`, at any depth.
fn drop_sets(b: &mut Block, t: VarId) {
    b.retain(|s| !is_set_to_one(s, t));
    for s in b.iter_mut() {
        for inner in nested_blocks_mut(s) {
            drop_sets(inner, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::interp::test_memory::{run, scratch};
    use crate::ir::Emitter;

    /// `let n = x[0]; let t = 0; for p in 1..n { s += x[p]; t = 1 }`, with
    /// `tweak` run in the loop after the set; then, where `tested`, `if t
    /// != 0 { y[0] = s }`, else `y[0] = t`.
    fn flagged(tested: bool, tweak: impl Fn(&mut Emitter, &Expr, &Expr)) -> Function {
        let (x, y) = (scratch("x"), scratch("y"));
        let mut e = Emitter::new();
        let n = e.let_var("n", Expr::load(x.clone(), Expr::Int(0)));
        let t = e.let_var("t", Expr::Int(0));
        let s = e.let_var("s", Expr::Int(0));
        e.for_("p", Expr::Int(1), n.clone(), |e, p| {
            e.set(&s, Expr::add(s.clone(), Expr::load(x.clone(), p.clone())));
            e.set(&t, Expr::Int(1));
            tweak(e, &t, &n);
        });
        match tested {
            true => e.if_(Expr::ne(t, Expr::Int(0)), |e| e.store(y, Expr::Int(0), s)),
            false => e.store(y, Expr::Int(0), t),
        }
        e.finish("k")
    }

    fn rewritten(mut f: Function) -> bool {
        let before = f.clone();
        flags_from_bounds(&mut f);
        f != before
    }

    /// `f` and `g` store the same into `y` for every trip count.
    fn agree(f: &Function, g: &Function) {
        for n in [-1, 0, 1, 2, 4] {
            let y = |f: &Function| run(f, vec![("x", vec![n, 5, 6, 7]), ("y", vec![9])], "y");
            assert_eq!(y(f), y(g), "n = {n}");
        }
    }

    #[test]
    fn a_flag_set_in_every_iteration_becomes_the_loops_bounds() {
        let mut f = flagged(false, |_, _, _| {});
        flags_from_bounds(&mut f);
        let text = crate::ir::print::function(&f);
        assert!(!text.contains("t = 1"), "{text}");
        assert!(text.contains("let t: i64 = 1 < n ? 1 : 0"), "{text}");
        agree(&f, &flagged(false, |_, _, _| {}));
    }

    #[test]
    fn a_flag_tested_right_after_its_loop_becomes_a_guard_around_both() {
        let mut f = flagged(true, |_, _, _| {});
        flags_from_bounds(&mut f);
        let text = crate::ir::print::function(&f);
        assert!(!text.contains("let t"), "{text}");
        assert!(text.contains("if 1 < n {"), "{text}");
        let Some(Stmt::If { then, .. }) = f.body.last() else {
            panic!("no guard: {text}");
        };
        assert!(
            matches!(then[..], [Stmt::For { .. }, Stmt::Store(..)]),
            "{text}"
        );
        agree(&f, &flagged(true, |_, _, _| {}));
    }

    #[test]
    fn a_flag_the_loop_reads_or_gives_another_value_stays() {
        assert!(!rewritten(flagged(false, |e, t, _| {
            e.store(scratch("y"), Expr::Int(0), t.clone())
        })));
        assert!(!rewritten(flagged(true, |e, t, _| e.set(t, Expr::Int(2)))));
    }

    #[test]
    fn bounds_the_loop_changes_keep_the_flag() {
        assert!(!rewritten(flagged(true, |e, _, n| e.set(n, Expr::Int(0)))));
    }

    #[test]
    fn a_flag_set_only_on_some_iterations_stays() {
        let (x, y) = (scratch("x"), scratch("y"));
        let mut e = Emitter::new();
        let t = e.let_var("t", Expr::Int(0));
        e.for_("p", Expr::Int(0), Expr::Int(4), |e, p| {
            let cond = Expr::lt(Expr::Int(0), Expr::load(x.clone(), p.clone()));
            let then = e.block(|e| e.set(&t, Expr::Int(1)));
            e.push(Stmt::If {
                cond,
                then,
                els: Vec::new(),
            });
        });
        e.store(y, Expr::Int(0), t);
        assert!(!rewritten(e.finish("k")));
    }

    /// The kernel the module is for: no flag left on the Cranelift tier,
    /// its appends guarded by the fibers' bounds; the C keeps the flag.
    #[test]
    fn ttv_from_csf_into_dcsr_appends_where_the_fiber_is_not_empty() {
        use crate::ir::passes::{lowered_for, Backend};
        let ttv = |backend| {
            let formats = [("A", "DCSR", 2), ("B", "CSF", 3), ("c", "dense", 1)];
            lowered_for("A(i,j) = B(i,j,k) * c(k)", &formats, backend).to_string()
        };
        let text = ttv(Backend::Cranelift);
        assert!(!text.contains("ttouched"), "{text}");
        assert!(text.contains("if pB3_begin < pB3_end {"), "{text}");
        assert!(ttv(Backend::C).contains("ttouched"));
    }
}
