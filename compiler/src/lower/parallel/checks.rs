//! Whether a loop may run in shares: the checks on a nest's loop IR that
//! make sharing race-free (what a loop carries from one iteration to the
//! next, what it reads of the result, what runs around it). The lowerer
//! decides the mode (`parallel::mode`); these confirm it on the code.

use crate::ir::{ArrayRef, BinOp, Expr, Slot, Stmt, Ty, VarId};

/// Whether what the loop of a `Stitch` kernel carries from one row to the
/// next is only integer counters (positions appended so far, the
/// workspace's touched count): a share starting them at 0 computes its
/// rows as they would be computed after the rows before, positions
/// counted from 0, which stitching shifts.
pub(super) fn carried_counters_fit(the_loop: &Stmt, vars: &[crate::ir::VarInfo]) -> bool {
    sets_outside(the_loop)
        .iter()
        .all(|(t, _)| vars.get(*t as usize).is_some_and(|v| v.ty == Ty::I64))
}

fn loads(e: &Expr, f: &mut dyn FnMut(&ArrayRef, &Expr)) {
    e.walk(&mut |x| {
        if let Expr::Load(a, i) = x {
            f(a, i);
        }
    });
}

/// Whether `block` reads the result's arrays (those of tensor `out`, and
/// with `scratch` the kernel's scratch arrays too) only to add to what it
/// stores there: `a[p] = a[p] + e` with `e` not reading them. Then a
/// result's final values are its first values plus every addition, in
/// whatever thread each one happens.
pub(super) fn reads_result_only_to_add(block: &[Stmt], out: &str, scratch: bool) -> bool {
    let result =
        |a: &ArrayRef| *a.tensor == *out || (scratch && matches!(a.slot, Slot::Scratch(..)));
    let free = |e: &Expr| {
        let mut ok = true;
        loads(e, &mut |a, _| ok &= !result(a));
        ok
    };
    let mut ok = true;
    crate::ir::walk_block(&block.to_vec(), &mut |s| match s {
        Stmt::Store(a, i, v) => {
            let added = match v {
                Expr::Bin(BinOp::Add, x, e) => {
                    matches!(&**x, Expr::Load(b, j) if b == a && **j == *i) && free(e)
                }
                _ => false,
            };
            ok &= free(i) && (added || free(v));
        }
        s => ok &= crate::ir::stmt_exprs(s).into_iter().all(free),
    });
    ok
}

/// Whether a loop body sharing the result with other threads writes only
/// the result's values, reading them only to add to them, and never grows
/// an array.
pub(super) fn rows_body_fits(body: &[Stmt], out: &str) -> bool {
    let vals = ArrayRef::vals(out);
    let mut ok = reads_result_only_to_add(body, out, true);
    crate::ir::walk_block(&body.to_vec(), &mut |s| match s {
        Stmt::Store(a, ..) => ok &= *a == vals,
        Stmt::Reserve { .. } => ok = false,
        _ => {}
    });
    ok
}

/// The assignments in `s` to variables it does not declare itself.
fn sets_outside(s: &Stmt) -> Vec<(VarId, Expr)> {
    crate::ir::sets_outside(std::slice::from_ref(s))
}

pub(super) fn assigns_outside(s: &Stmt) -> bool {
    !sets_outside(s).is_empty()
}

/// Whether what the loop of a `Partials` kernel carries from one iteration
/// to the next is only sums: float variables set to 0 before the loop,
/// only added to in it (`t = t + e`), and after it only stored into or
/// added to the result. A thread's sums then cover its share, and the
/// threads' results add up to the whole.
pub(super) fn carried_sums_fit(
    before: &[Stmt],
    the_loop: &Stmt,
    after: &[Stmt],
    vars: &[crate::ir::VarInfo],
) -> bool {
    sets_outside(the_loop).iter().all(|(t, e)| {
        let t = *t;
        let sum = matches!(e, Expr::Bin(BinOp::Add, x, r) if **x == Expr::Var(t) && !r.uses(t));
        let float = vars.get(t as usize).is_some_and(|v| v.ty == Ty::F64);
        let starts_at_zero = before.iter().any(|s| matches!(s, Stmt::Let(v, Expr::Float(z)) if *v == t && *z == 0.0));
        let mut stored_only = true;
        crate::ir::walk_block(&after.to_vec(), &mut |s| match s {
            Stmt::Store(a, i, v) => {
                let value = match v {
                    Expr::Bin(BinOp::Add, x, y) if matches!(&**x, Expr::Load(b, j) if b == a && **j == *i) => &**y,
                    v => v,
                };
                stored_only &= !i.uses(t) && (*value == Expr::Var(t) || !value.uses(t));
            }
            s => stored_only &= crate::ir::stmt_exprs(s).into_iter().all(|e| !e.uses(t)),
        });
        sum && float && starts_at_zero && stored_only
    })
}

/// Whether the statements around a loop whose rows threads share can be
/// split into a set-up call and the loop's calls: the set-up's effects
/// (everything but `let`s) may be skipped by the loop's calls, since the
/// `let`s they keep read no array the kernel writes and no variable the
/// set-up assigns; nothing with an effect follows the loop.
pub(super) fn rows_frame_fits(
    before: &[Stmt],
    bounds: [&Expr; 2],
    after: &[Stmt],
    out: &str,
) -> bool {
    let pure = |e: &Expr| {
        let mut ok = true;
        loads(e, &mut |a, _| {
            ok &= *a.tensor != *out && !matches!(a.slot, Slot::Scratch(..))
        });
        ok
    };
    let set_up_fits = before.iter().all(|s| match s {
        Stmt::Let(_, e) => pure(e),
        Stmt::Comment(_) | Stmt::Unlikely => true,
        Stmt::Set(..) => false,
        s => !assigns_outside(s),
    });
    set_up_fits
        && bounds.into_iter().all(pure)
        && after
            .iter()
            .all(|s| matches!(s, Stmt::Let(..) | Stmt::Comment(_) | Stmt::Unlikely))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(t: &str) -> ArrayRef {
        ArrayRef::vals(t)
    }

    #[test]
    fn only_additions_to_the_result_may_read_it() {
        let i = Expr::Int(3);
        let add = Stmt::Store(
            vals("y"),
            i.clone(),
            Expr::add(
                Expr::load(vals("y"), i.clone()),
                Expr::load(vals("A"), i.clone()),
            ),
        );
        let store = Stmt::Store(vals("y"), i.clone(), Expr::load(vals("A"), i.clone()));
        assert!(reads_result_only_to_add(&[add.clone(), store], "y", true));
        // Scaling, reading another position, reading it in a `let`: no.
        let scale = Stmt::Store(
            vals("y"),
            i.clone(),
            Expr::mul(Expr::load(vals("y"), i.clone()), Expr::Float(2.0)),
        );
        let other = Stmt::Store(
            vals("y"),
            i.clone(),
            Expr::add(Expr::load(vals("y"), Expr::Int(4)), Expr::Float(1.0)),
        );
        let read = Stmt::Let(0, Expr::load(vals("y"), Expr::Int(0)));
        for bad in [scale, other, read] {
            assert!(
                !reads_result_only_to_add(&[add.clone(), bad.clone()], "y", true),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn shared_rows_write_only_the_result_values_and_never_grow() {
        let i = Expr::Int(3);
        let add = Stmt::Store(
            vals("y"),
            i.clone(),
            Expr::add(Expr::load(vals("y"), i.clone()), Expr::Float(1.0)),
        );
        assert!(rows_body_fits(&[add.clone()], "y"));
        let scratch = ArrayRef {
            tensor: "y".into(),
            slot: Slot::Scratch("w".into(), crate::ir::ElemTy::F64),
        };
        for bad in [
            Stmt::Reserve {
                array: vals("y"),
                len: Expr::Int(9),
                ahead: false,
            },
            Stmt::Store(scratch, i.clone(), Expr::Float(1.0)),
        ] {
            assert!(!rows_body_fits(&[add.clone(), bad.clone()], "y"), "{bad:?}");
        }
    }

    #[test]
    fn partial_kernels_carry_only_sums_across_iterations() {
        let vars: Vec<crate::ir::VarInfo> = [("t", Ty::F64), ("i", Ty::I64), ("c", Ty::I64)]
            .iter()
            .map(|(n, ty)| crate::ir::VarInfo {
                name: n.to_string(),
                ty: *ty,
            })
            .collect();
        let (t, i) = (Expr::Var(0), Expr::Var(1));
        let add = |v: VarId, e: Expr| Stmt::Set(v, Expr::add(Expr::Var(v), e));
        let the_loop = |body: Vec<Stmt>| Stmt::For {
            var: 1,
            lo: Expr::Int(0),
            hi: Expr::Int(9),
            body,
        };
        let sum = the_loop(vec![add(0, Expr::load(vals("x"), i.clone()))]);
        let zero = [Stmt::Let(0, Expr::Float(0.0))];
        let store = [Stmt::Store(vals("a"), Expr::Int(0), t.clone())];
        assert!(carried_sums_fit(&zero, &sum, &store, &vars));
        // A sum that starts elsewhere, is scaled after, or an integer carried.
        assert!(!carried_sums_fit(
            &[Stmt::Let(0, Expr::Float(1.0))],
            &sum,
            &store,
            &vars
        ));
        let scaled = [Stmt::Store(
            vals("a"),
            Expr::Int(0),
            Expr::mul(t.clone(), Expr::Float(2.0)),
        )];
        assert!(!carried_sums_fit(&zero, &sum, &scaled, &vars));
        let counter = the_loop(vec![add(2, Expr::Int(1))]);
        assert!(!carried_sums_fit(
            &[Stmt::Let(2, Expr::Int(0))],
            &counter,
            &[],
            &vars
        ));
    }

    #[test]
    fn the_set_up_is_separable_from_the_loop() {
        let n = Expr::Int(9);
        let zero_fill = Stmt::For {
            var: 1,
            lo: Expr::Int(0),
            hi: n.clone(),
            body: vec![Stmt::Store(vals("y"), Expr::Var(1), Expr::Float(0.0))],
        };
        let size = Stmt::Let(0, n.clone());
        assert!(rows_frame_fits(
            &[size.clone(), zero_fill.clone()],
            [&Expr::Int(0), &n],
            &[],
            "y"
        ));
        // A set-up that assigns a variable the loop may read; a `let` that
        // reads the result; an effect after the loop.
        let counter = Stmt::For {
            var: 1,
            lo: Expr::Int(0),
            hi: n.clone(),
            body: vec![Stmt::Set(0, Expr::Var(1))],
        };
        assert!(!rows_frame_fits(
            &[size.clone(), counter],
            [&Expr::Int(0), &n],
            &[],
            "y"
        ));
        let reads = Stmt::Let(2, Expr::load(vals("y"), Expr::Int(0)));
        assert!(!rows_frame_fits(&[reads], [&Expr::Int(0), &n], &[], "y"));
        assert!(!rows_frame_fits(
            &[size],
            [&Expr::Int(0), &n],
            &[zero_fill],
            "y"
        ));
    }
}
