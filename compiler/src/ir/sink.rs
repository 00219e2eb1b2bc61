//! Declarations moved down past loops that do not read them.
//!
//! A value computed before a loop and read only after it is live through
//! the loop: it holds a register there, or Cranelift's allocator spills
//! something else. TTV from CSF into DCSR loads a fiber's coordinate `jB`
//! before the loop over the fiber's entries and appends it after (and a
//! row's `iB` around the loop over its fibers); with them live through
//! those loops, the allocator kept the base of the fibers' `pos` array in
//! a stack slot and reloaded it twice per fiber, and copied the `crd`
//! base between registers at every fiber. Computing such a value after
//! the loop, where it is first read, costs the same work once and frees
//! the register: that TTV ran in 0.89x the time (`bench/ab_builds.sh`, 6
//! of 6 rounds; the result's count still lives in a stack slot).
//!
//! Run on the Cranelift tier's kernels only (gcc's allocator needs no
//! help, and the C a user reads keeps the lowering's order), after the
//! share search is taken out (`jit::shares`): the search reads the
//! declarations before it where the kernel makes them.
//!
//! Only declarations whose value is the same anywhere between: built of
//! constants, parameters, loads of arrays the kernel never writes, and
//! variables nothing between assigns. Loads of inputs may run later or
//! not at all (an allocation that fails first ends the kernel), never
//! elsewhere: the same positions, in the same block.
//!
//! And only where the move frees a register: every variable the value is
//! computed from must be live through the loop anyway (an enclosing
//! loop's variable, or read after it). Moving a merge's next position
//! (`jB <= jC ? pB2_seg : pB2`) past the loop over the matched fibers
//! kept four values live through it instead of one: a three-level COO
//! add ran 1.16x as long.

use super::{stmt_exprs, walk_block, Block, Expr, Function, Stmt, VarId};
use std::collections::BTreeSet;

/// Move each declaration of `f` that a loop separates from its first
/// read down to just before the statement that reads it first.
pub fn sink_past_loops(f: &mut Function) {
    let written: BTreeSet<_> = f.written_arrays();
    let mut body = std::mem::take(&mut f.body);
    in_block(&mut body, &written, &BTreeSet::new());
    f.body = body;
}

/// `live`: variables live through all of `b`, read by the header of a
/// loop around it (its variable, a `while`'s condition).
fn in_block(b: &mut Block, written: &BTreeSet<super::ArrayRef>, live: &BTreeSet<VarId>) {
    for s in b.iter_mut() {
        let mut inner_live = live.clone();
        match s {
            Stmt::For { var, .. } => {
                inner_live.insert(*var);
            }
            Stmt::While { cond, .. } => inner_live.extend(cond.vars()),
            _ => {}
        }
        for inner in super::nested_blocks_mut(s) {
            in_block(inner, written, &inner_live);
        }
    }
    // From the last declaration up: a moved one may read an earlier one,
    // whose first read then comes later.
    for i in (0..b.len()).rev() {
        let Stmt::Let(v, e) = &b[i] else { continue };
        if !recomputable(e, written) {
            continue;
        }
        // The first statement to read or assign it: a `set` before the
        // first read keeps the declaration above it.
        let touches = |s: &Stmt| reads(s, *v) || assigns_any(s, &BTreeSet::from([*v]));
        let Some(first) = (i + 1..b.len()).find(|&j| touches(&b[j])) else {
            continue;
        };
        let between = &b[i + 1..first];
        let inputs = e.vars();
        let live_anyway = |w: &VarId| live.contains(w) || b[first..].iter().any(|s| reads(s, *w));
        if between.iter().any(has_loop)
            && !between.iter().any(|s| assigns_any(s, &inputs))
            && inputs.iter().all(live_anyway)
        {
            let s = b.remove(i);
            b.insert(first - 1, s);
        }
    }
}

/// Whether `e` is made only of constants, parameters, variables and
/// loads of arrays the kernel does not write.
fn recomputable(e: &Expr, written: &BTreeSet<super::ArrayRef>) -> bool {
    let mut ok = true;
    e.walk(&mut |x| {
        ok &= match x {
            Expr::Load(a, _) => !written.contains(a),
            _ => true,
        }
    });
    ok
}

fn reads(s: &Stmt, v: VarId) -> bool {
    let mut found = false;
    walk_block(std::slice::from_ref(s), &mut |x| {
        found |= stmt_exprs(x).iter().any(|e| e.uses(v));
    });
    found
}

fn has_loop(s: &Stmt) -> bool {
    let mut found = false;
    walk_block(std::slice::from_ref(s), &mut |x| {
        found |= matches!(x, Stmt::For { .. } | Stmt::While { .. });
    });
    found
}

/// Whether `s` assigns one of `vars` (a `set`, or a loop's variable).
fn assigns_any(s: &Stmt, vars: &BTreeSet<VarId>) -> bool {
    let mut found = false;
    walk_block(std::slice::from_ref(s), &mut |x| {
        found |= match x {
            Stmt::Set(w, _) | Stmt::Let(w, _) | Stmt::For { var: w, .. } => vars.contains(w),
            _ => false,
        };
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ArrayRef, BinOp, Emitter, ParamRef};

    /// `for r in 0..n { <before the loop>; for p in 0..n { y[p] = 1 };
    /// <after it> }`, sunk; the outer loop's body as printed lines.
    fn sunk(
        before: impl FnOnce(&mut Emitter, &Expr) -> Expr,
        inner: impl Fn(&mut Emitter, &Expr),
        after: impl FnOnce(&mut Emitter, &Expr),
    ) -> Vec<String> {
        let y = ArrayRef::vals("y");
        let n = Expr::Param(ParamRef::dim("y", 0));
        let mut e = Emitter::new();
        e.for_("r", Expr::Int(0), n.clone(), |e, r| {
            let c = before(e, &r);
            e.for_("p", Expr::Int(0), n.clone(), |e, p| {
                e.store(y.clone(), p, Expr::Float(1.0));
                inner(e, &c);
            });
            after(e, &c);
        });
        let mut f = e.finish("k");
        sink_past_loops(&mut f);
        let text = crate::ir::print::function(&f);
        text.lines().map(|l| l.trim().to_string()).collect()
    }

    fn position(lines: &[String], start: &str) -> usize {
        lines
            .iter()
            .position(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start}: {lines:#?}")) // ok: test code
    }

    fn crd() -> ArrayRef {
        ArrayRef::level("X", 0, "crd")
    }

    #[test]
    fn a_coordinate_read_after_the_loop_is_loaded_there() {
        let lines = sunk(
            |e, r| e.let_var("c", Expr::load(crd(), r.clone())),
            |_, _| {},
            |e, c| e.store(ArrayRef::vals("z"), c.clone(), Expr::Float(2.0)),
        );
        assert!(
            position(&lines, "let c") > position(&lines, "for p"),
            "{lines:#?}"
        );
    }

    #[test]
    fn a_flag_the_loop_sets_stays_declared_before_it() {
        let lines = sunk(
            |e, _| e.let_var("touched", Expr::Int(0)),
            |e, t| e.set(t, Expr::Int(1)),
            |e, t| {
                e.if_(Expr::ne(t.clone(), Expr::Int(0)), |e| {
                    e.store(ArrayRef::vals("z"), Expr::Int(0), Expr::Float(2.0))
                })
            },
        );
        assert!(
            position(&lines, "let touched") < position(&lines, "for p"),
            "{lines:#?}"
        );
    }

    /// `a <= b ? a : b` read after the loop would keep `a` and `b` live
    /// through it, where only the choice was.
    #[test]
    fn a_value_whose_inputs_die_before_the_loop_stays() {
        let lines = sunk(
            |e, r| {
                let a = e.let_var("a", Expr::load(crd(), r.clone()));
                let b = e.let_var("b", Expr::add(r.clone(), Expr::Int(1)));
                let le = Expr::cmp(crate::ir::CmpOp::Le, a.clone(), b.clone());
                e.let_var("next", Expr::select(le, a, b))
            },
            |_, _| {},
            |e, next| e.store(ArrayRef::vals("z"), next.clone(), Expr::Float(2.0)),
        );
        assert!(
            position(&lines, "let next") < position(&lines, "for p"),
            "{lines:#?}"
        );
    }

    #[test]
    fn a_load_of_an_array_the_kernel_writes_stays() {
        let lines = sunk(
            |e, r| e.let_var("c", Expr::load(ArrayRef::vals("y"), r.clone())),
            |_, _| {},
            |e, c| e.store(ArrayRef::vals("z"), Expr::Int(0), c.clone()),
        );
        assert!(
            position(&lines, "let c") < position(&lines, "for p"),
            "{lines:#?}"
        );
    }

    #[test]
    fn a_value_whose_input_the_loop_assigns_stays() {
        let lines = sunk(
            |e, r| {
                let q = e.let_var("q", r.clone());
                let c = e.let_var("c", Expr::load(crd(), q.clone()));
                Expr::bin(BinOp::Add, c, q)
            },
            |e, cq| {
                if let Expr::Bin(_, _, q) = cq {
                    e.set(q, Expr::add((**q).clone(), Expr::Int(1)));
                }
            },
            |e, cq| e.store(ArrayRef::vals("z"), cq.clone(), Expr::Float(2.0)),
        );
        assert!(
            position(&lines, "let c") < position(&lines, "for p"),
            "{lines:#?}"
        );
    }
}
