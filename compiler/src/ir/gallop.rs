//! Long runs of equal coordinates skipped by galloping instead of one
//! position at a time.
//!
//! A COO level's loops find where a run of equal coordinates ends (the
//! deduplicating iterator's scan, `ir::row_runs`'s): `while end < hi &&
//! crd[end] == c { end += 1 }`. On an ascending coordinate array (an
//! ordered tensor's first level, `Repeats::ascending`) whose runs are long,
//! that scan is a loop of its own over every entry: on the bench's
//! Facebook-shaped tensor (1,591 rows of 464 entries) a fifth of TTV's
//! samples sat in its compare and branch. There, after the first
//! `LINEAR` positions, the scan gallops: it tests `end + 7`, then `end + 15`,
//! `end + 31`, .. while they still hold `c`, and finds the run's end
//! between the last two tests by bisection:
//!
//! ```text
//! let lin = min(end + LINEAR, hi)
//! while end < lin && crd[end] == c { end += 1 }
//! if end == lin && end < hi {
//!   let step = LINEAR
//!   while end + step <= hi && crd[end + step - 1] == c { end += step; step *= 2 }
//!   let top = min(end + step - 1, hi)
//!   while end < top {
//!     let mid = end + (top - end) / 2
//!     if crd[mid] == c { end = mid + 1 } else { top = mid }
//!   }
//! }
//! ```
//!
//! Exact on ascending coordinates: the positions holding `c` from `end` on
//! are one range, so a position past `end` that holds `c` has only `c`
//! before it, and the first that does not is the run's end. Runs of up to
//! `LINEAR` entries (a matrix's short rows) take the loop as before and one
//! test more.

use super::*;

/// Positions a scan tests one at a time before galloping.
const LINEAR: i64 = 8;

/// Average run length (`Repeats::per_coordinate`, a lower bound) from which
/// the scans of an array gallop. Bisection costs mispredicted branches
/// that a scan of a few dozen entries does not: TTV from COO on the
/// Facebook-shaped tensor (464 a run) took 0.90x the time in the cc tier.
const GALLOP_FROM_RUN: usize = 64;

/// Make the scans over long runs of `f`'s ascending coordinate arrays
/// gallop (module comment).
pub fn gallop_long_runs(f: &mut Function) {
    let long: Vec<ArrayRef> = f
        .runs
        .iter()
        .filter(|r| r.ascending && r.per_coordinate >= GALLOP_FROM_RUN)
        .map(|r| r.array.clone())
        .collect();
    if long.is_empty() {
        return;
    }
    let mut body = std::mem::take(&mut f.body);
    in_block(&mut body, &mut f.vars, &long);
    f.body = body;
}

fn in_block(b: &mut Block, vars: &mut Vec<VarInfo>, long: &[ArrayRef]) {
    let mut out = Vec::with_capacity(b.len());
    for mut s in std::mem::take(b) {
        for inner in nested_blocks_mut(&mut s) {
            in_block(inner, vars, long);
        }
        match Scan::of(&s, long) {
            Some(scan) => out.extend(scan.galloping(vars)),
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

    /// The scan, galloping past its first `LINEAR` positions.
    fn galloping(self, vars: &mut Vec<VarInfo>) -> Vec<Stmt> {
        let name = vars[self.end as usize].name.clone();
        let lin = fresh_var(vars, &format!("{name}_lin"), Ty::I64);
        let step = fresh_var(vars, &format!("{name}_step"), Ty::I64);
        let top = fresh_var(vars, &format!("{name}_top"), Ty::I64);
        let mid = fresh_var(vars, &format!("{name}_mid"), Ty::I64);
        let end = || Expr::Var(self.end);
        let holds = |at: Expr| {
            Expr::eq(
                Expr::Load(self.crd.clone(), Box::new(at)),
                self.value.clone(),
            )
        };
        let one_at_a_time = |below: Expr| Stmt::While {
            cond: Expr::and(Expr::lt(end(), below), holds(end())),
            body: vec![Stmt::Set(self.end, Expr::add(end(), Expr::Int(1)))],
        };
        let past_step = || Expr::add(end(), Expr::Var(step));
        let gallop = Stmt::While {
            cond: Expr::and(
                Expr::cmp(CmpOp::Le, past_step(), self.hi.clone()),
                holds(Expr::sub(past_step(), Expr::Int(1))),
            ),
            body: vec![
                Stmt::Set(self.end, past_step()),
                Stmt::Set(step, Expr::mul(Expr::Var(step), Expr::Int(2))),
            ],
        };
        let bisect = Stmt::While {
            cond: Expr::lt(end(), Expr::Var(top)),
            body: vec![
                Stmt::Let(
                    mid,
                    Expr::add(
                        end(),
                        Expr::div(Expr::sub(Expr::Var(top), end()), Expr::Int(2)),
                    ),
                ),
                Stmt::If {
                    cond: holds(Expr::Var(mid)),
                    then: vec![Stmt::Set(self.end, Expr::add(Expr::Var(mid), Expr::Int(1)))],
                    els: vec![Stmt::Set(top, Expr::Var(mid))],
                },
            ],
        };
        vec![
            Stmt::Let(
                lin,
                Expr::min(Expr::add(end(), Expr::Int(LINEAR)), self.hi.clone()),
            ),
            one_at_a_time(Expr::Var(lin)),
            Stmt::If {
                cond: Expr::and(
                    Expr::eq(end(), Expr::Var(lin)),
                    Expr::lt(end(), self.hi.clone()),
                ),
                then: vec![
                    Stmt::Let(step, Expr::Int(LINEAR)),
                    gallop,
                    Stmt::Let(
                        top,
                        Expr::min(Expr::sub(past_step(), Expr::Int(1)), self.hi.clone()),
                    ),
                    bisect,
                ],
                els: vec![],
            },
        ]
    }
}
