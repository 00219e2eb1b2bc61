//! The scans for the end of a long run of equal coordinates, in strides.
//!
//! A COO level's loops find where a run of equal coordinates ends (the
//! deduplicating iterator's scan, `ir::row_runs`'s): `while end < hi &&
//! crd[end] == c { end += 1 }`. On an ascending coordinate array (an
//! ordered tensor's first level, `Repeats::ascending`) whose runs are long,
//! that scan is a loop of its own over every entry: on the bench's
//! Facebook-shaped tensor (1,591 rows of 464 entries) a fifth of TTV's
//! samples sat in its compare and branch. There the scan first steps
//! `STRIDE` positions at a time while a stride's last position holds `c`,
//! then one at a time:
//!
//! ```text
//! while end + 7 < hi && crd[end] == c && crd[end + 7] == c { end += 8 }
//! while end < hi && crd[end] == c { end += 1 }
//! ```
//!
//! Exact on any ascending coordinates: two positions holding `c` have only
//! `c` between them. (The scans it finds start next to a position holding
//! `c`, which would make the first test redundant, but the pass does not
//! see where a scan starts, so it tests both ends.) A short row costs one
//! test more. Galloping (strides doubling, then
//! bisection) took fewer tests on long rows but two loops more, whose
//! compile cost the Cranelift tier 0.4 ms on a COO sum (1.6-2.2 -> 2.0-2.8
//! ms); the strides cost nothing measurable there.

use super::*;

/// Positions a scan passes with one test.
const STRIDE: i64 = 8;

/// Average run length (`Repeats::per_coordinate`, a lower bound) from which
/// the scans of an array take strides: below it, most runs end within the
/// first stride, and its test is one more branch to mispredict.
const STRIDES_FROM_RUN: usize = 64;

/// Make the scans over long runs of `f`'s ascending coordinate arrays
/// take strides (module comment).
pub fn stride_long_runs(f: &mut Function) {
    let long: Vec<ArrayRef> = f
        .runs
        .iter()
        .filter(|r| r.ascending && r.per_coordinate >= STRIDES_FROM_RUN)
        .map(|r| r.array.clone())
        .collect();
    if long.is_empty() {
        return;
    }
    let mut body = std::mem::take(&mut f.body);
    in_block(&mut body, &long);
    f.body = body;
}

fn in_block(b: &mut Block, long: &[ArrayRef]) {
    let mut out = Vec::with_capacity(b.len());
    for mut s in std::mem::take(b) {
        for inner in nested_blocks_mut(&mut s) {
            in_block(inner, long);
        }
        match Scan::of(&s, long) {
            Some(scan) => out.extend(scan.striding()),
            None => out.push(s),
        }
    }
    *b = out;
}

/// `while end < hi && crd[end] == value { end += 1 }`.
struct Scan {
    end: VarId,
    hi: Expr,
    crd: ArrayRef,
    value: Expr,
}

impl Scan {
    fn of(s: &Stmt, long: &[ArrayRef]) -> Option<Scan> {
        let Stmt::While { cond, body } = s else {
            return None;
        };
        let [Stmt::Set(end, step)] = body.as_slice() else {
            return None;
        };
        if *step != Expr::add(Expr::Var(*end), Expr::Int(1)) {
            return None;
        }
        let Expr::Bin(BinOp::And, bound, equal) = cond else {
            return None;
        };
        let Expr::Cmp(CmpOp::Lt, at, hi) = &**bound else {
            return None;
        };
        let Expr::Cmp(CmpOp::Eq, x, y) = &**equal else {
            return None;
        };
        let read = |e: &Expr| match e {
            Expr::Load(a, i) if **i == Expr::Var(*end) && long.contains(a) => Some(a.clone()),
            _ => None,
        };
        let (crd, value) = match (read(x), read(y)) {
            (Some(a), None) => (a, (**y).clone()),
            (None, Some(a)) => (a, (**x).clone()),
            _ => return None,
        };
        let fixed = |e: &Expr| !e.uses(*end);
        (**at == Expr::Var(*end) && fixed(hi) && fixed(&value)).then(|| Scan {
            end: *end,
            hi: (**hi).clone(),
            crd,
            value,
        })
    }

    /// The scan, in strides of `STRIDE` positions while a stride's first
    /// and last hold the value, then one at a time.
    fn striding(self) -> Vec<Stmt> {
        let end = || Expr::Var(self.end);
        let holds = |at: Expr| {
            Expr::eq(
                Expr::Load(self.crd.clone(), Box::new(at)),
                self.value.clone(),
            )
        };
        let last = Expr::add(end(), Expr::Int(STRIDE - 1));
        let step = |by: i64| vec![Stmt::Set(self.end, Expr::add(end(), Expr::Int(by)))];
        vec![
            Stmt::While {
                cond: Expr::and(
                    Expr::lt(last.clone(), self.hi.clone()),
                    Expr::and(holds(end()), holds(last)),
                ),
                body: step(STRIDE),
            },
            Stmt::While {
                cond: Expr::and(Expr::lt(end(), self.hi.clone()), holds(end())),
                body: step(1),
            },
        ]
    }
}
