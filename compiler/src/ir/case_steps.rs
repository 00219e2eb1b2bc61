//! Each case of a two-operand merge steps its own cursors. Lowering steps
//! them after the cases, each on a test of its own (`pB = jB <= jC ? pB + 1
//! : pB`), which repeats what the case tests already decided. Moved into
//! every case, where the order of `jB` and `jC` is known, each step is
//! either a plain increment or nothing: per iteration, one compare and
//! branch to find the case and no more (as a C compiler threads them; the
//! Cranelift tier does not).
//!
//! Runs after `min_compare` has made the tests compare the operands with
//! each other (`jB == jC`, `jB <= jC`, `jC <= jB`).

use super::{Block, CmpOp, Expr, Stmt, VarId};

/// What is known of the order of `a` and `b` where a statement runs.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct Order {
    /// `a == b`
    eq: Option<bool>,
    /// `a <= b`
    ab: Option<bool>,
    /// `b <= a`
    ba: Option<bool>,
}

impl Order {
    /// Which of the three tests `e` is, if any.
    fn test(&self, e: &Expr, a: VarId, b: VarId) -> Option<Test> {
        let Expr::Cmp(op, l, r) = e else { return None };
        let (Expr::Var(l), Expr::Var(r)) = (&**l, &**r) else {
            return None;
        };
        match (op, (*l, *r)) {
            (CmpOp::Eq, p) if p == (a, b) || p == (b, a) => Some(Test::Eq),
            (CmpOp::Le, p) if p == (a, b) => Some(Test::Ab),
            (CmpOp::Le, p) if p == (b, a) => Some(Test::Ba),
            _ => None,
        }
    }

    fn value(&self, e: &Expr, a: VarId, b: VarId) -> Option<bool> {
        match self.test(e, a, b)? {
            Test::Eq => self.eq,
            Test::Ab => self.ab,
            Test::Ba => self.ba,
        }
    }

    /// The order where `cond` is `holds`, with all that follows from it.
    fn with(mut self, cond: &Expr, holds: bool, a: VarId, b: VarId) -> Order {
        match (self.test(cond, a, b), cond) {
            (Some(Test::Eq), _) => self.eq = Some(holds),
            (Some(Test::Ab), _) => self.ab = Some(holds),
            (Some(Test::Ba), _) => self.ba = Some(holds),
            (None, Expr::Bin(super::BinOp::And, l, r)) if holds => {
                self = self.with(l, true, a, b).with(r, true, a, b)
            }
            (None, Expr::Bin(super::BinOp::Or, l, r)) if !holds => {
                self = self.with(l, false, a, b).with(r, false, a, b)
            }
            _ => {}
        }
        self.closed()
    }

    fn closed(mut self) -> Order {
        loop {
            let before = self;
            if self.eq == Some(true) {
                (self.ab, self.ba) = (Some(true), Some(true));
            }
            if self.ab == Some(false) {
                (self.ba, self.eq) = (Some(true), Some(false));
            }
            if self.ba == Some(false) {
                (self.ab, self.eq) = (Some(true), Some(false));
            }
            if self.ab == Some(true) && self.ba == Some(true) {
                self.eq = Some(true);
            }
            if self.eq == Some(false) && self.ab == Some(true) {
                self.ba = Some(false);
            }
            if self.eq == Some(false) && self.ba == Some(true) {
                self.ab = Some(false);
            }
            if self == before {
                return self;
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Test {
    Eq,
    Ab,
    Ba,
}

/// In `block` from `from` on, where `a` and `b` keep their values: move
/// the steps that follow an `if` on their order into its cases, and fold
/// the tests each case decides.
pub(super) fn thread(block: &mut Block, from: usize, a: VarId, b: VarId) {
    let mut q = from;
    while q < block.len() {
        let steps = block[q + 1..]
            .iter()
            .take_while(|s| is_step(s, a, b))
            .count();
        let decides = matches!(&block[q], Stmt::If { cond, .. }
            if Order::default().with(cond, true, a, b) != Order::default());
        if steps > 0 && decides {
            let moved: Vec<Stmt> = block.drain(q + 1..q + 1 + steps).collect();
            if let Stmt::If { then, els, .. } = &mut block[q] {
                append_at_ends(then, &moved);
                append_at_ends(els, &moved);
            }
            let case = block.remove(q);
            let folded = fold(vec![case], Order::default(), a, b);
            let n = folded.len();
            block.splice(q..q, folded);
            q += n;
            continue;
        }
        q += 1;
    }
}

/// `p = <test of a and b> ? e : p`: a cursor's step on the merge's order.
fn is_step(s: &Stmt, a: VarId, b: VarId) -> bool {
    matches!(s, Stmt::Set(p, Expr::Select(c, _, keep))
        if **keep == Expr::Var(*p) && Order::default().test(c, a, b).is_some())
}

/// Append `steps` where `block` ends, inside the `if` that ends it (so the
/// steps land in the cases that decide them).
fn append_at_ends(block: &mut Block, steps: &[Stmt]) {
    match block.last_mut() {
        Some(Stmt::If { then, els, .. }) => {
            append_at_ends(then, steps);
            append_at_ends(els, steps);
        }
        _ => block.extend(steps.iter().cloned()),
    }
}

/// `block` with the tests `order` decides folded: an `if` on a decided
/// test becomes the branch it takes, a select its arm, and a step that
/// keeps its cursor disappears.
fn fold(block: Block, order: Order, a: VarId, b: VarId) -> Block {
    let mut out = Vec::with_capacity(block.len());
    let mut block = block.into_iter();
    while let Some(s) = block.next() {
        // Steps on a test the order leaves open, ending the block: one
        // branch on that test, each side with the steps it decides
        // (`pB += 1` or `pC += 1` where the coordinates differ).
        if let Stmt::Set(_, Expr::Select(c, ..)) = &s {
            let rest = block.as_slice();
            if order.value(c, a, b).is_none() && rest.iter().all(|r| is_step(r, a, b)) {
                let c = (**c).clone();
                let steps: Block = std::iter::once(s).chain(block).collect();
                let then = fold(steps.clone(), order.with(&c, true, a, b), a, b);
                let els = fold(steps, order.with(&c, false, a, b), a, b);
                out.push(Stmt::If { cond: c, then, els });
                break;
            }
        }
        match s {
            Stmt::If { cond, then, els } => match order.value(&cond, a, b) {
                Some(true) => out.extend(fold(then, order, a, b)),
                Some(false) => out.extend(fold(els, order, a, b)),
                None => out.push(Stmt::If {
                    then: fold(then, order.with(&cond, true, a, b), a, b),
                    els: fold(els, order.with(&cond, false, a, b), a, b),
                    cond,
                }),
            },
            Stmt::Set(p, Expr::Select(c, x, y)) => match order.value(&c, a, b) {
                Some(true) => out.push(Stmt::Set(p, *x)),
                Some(false) if *y == Expr::Var(p) => {}
                Some(false) => out.push(Stmt::Set(p, *y)),
                None => out.push(Stmt::Set(p, Expr::Select(c, x, y))),
            },
            other => out.push(other),
        }
    }
    out
}
