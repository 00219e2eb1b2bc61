//! Sorting an index array inside a kernel, written in the loop IR itself so
//! that both backends (and the C a user reads) run the same code with no
//! call into a runtime: a shell sort with Gonnet's gaps (n/2, then x5/11),
//! in place, on the first `len` elements.

use super::{ArrayRef, CmpOp, Emitter, Expr};

impl Emitter {
    /// Sort `keys[0..len)` ascending.
    pub fn sort_keys(&mut self, keys: &ArrayRef, len: Expr) {
        let gap = self.let_var("gap", Expr::div(len.clone(), Expr::Int(2)));
        let keys = keys.clone();
        self.while_(Expr::cmp(CmpOp::Gt, gap.clone(), Expr::Int(0)), |e| {
            e.for_("si", gap.clone(), len.clone(), |e, i| {
                let key = e.let_var("skey", Expr::load(keys.clone(), i.clone()));
                let j = e.let_var("sj", i);
                let more = e.let_var("smore", Expr::Bool(true));
                // Shift larger keys up by `gap`; the load below `gap` is
                // never made (no short-circuit `&&` in the IR).
                e.while_(more.clone(), |e| {
                    let then = e.block(|e| {
                        let prev = Expr::load(keys.clone(), Expr::sub(j.clone(), gap.clone()));
                        let prev = e.let_var("sprev", prev);
                        let shift = e.block(|e| {
                            e.store(keys.clone(), j.clone(), prev.clone());
                            e.set(&j, Expr::sub(j.clone(), gap.clone()));
                        });
                        let stop = e.block(|e| e.set(&more, Expr::Bool(false)));
                        e.push(super::Stmt::If { cond: Expr::cmp(CmpOp::Gt, prev.clone(), key.clone()), then: shift, els: stop });
                    });
                    let stop = e.block(|e| e.set(&more, Expr::Bool(false)));
                    e.push(super::Stmt::If { cond: Expr::cmp(CmpOp::Ge, j.clone(), gap.clone()), then, els: stop });
                });
                e.store(keys.clone(), j, key);
            });
            let next = Expr::select(Expr::eq(gap.clone(), Expr::Int(2)), Expr::Int(1), Expr::div(Expr::mul(gap.clone(), Expr::Int(5)), Expr::Int(11)));
            e.set(&gap, next);
        });
    }
}
