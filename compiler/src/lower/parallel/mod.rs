//! Running the outermost loop of a kernel on several threads, where that
//! is race-free (taco's `parallelize` rules):
//!
//! - **Rows**: each share binds its own coordinates of one of the result's
//!   variables (every iteration a different one; or, over an ordered
//!   non-unique level, share bounds moved past runs of equal coordinates)
//!   and the result is dense, so shares write disjoint positions and
//!   threads share the result. The statements before the loop (allocation,
//!   zero fill) run once, in a call of their own; over coordinates in
//!   order, each share zeroes its own rows instead (`fill`).
//! - **Partials**: the result is dense (or a scalar) but iterations may add
//!   into the same positions (the loop is over a reduction variable, or over
//!   an unordered non-unique level): each thread runs the whole kernel into
//!   a result of its own, summed in thread order afterwards.
//!
//! Anything else runs on one thread: results assembled by append, through
//! a workspace or a coordinate buffer, hashed results, kernels of several
//! loop nests, and outermost loops that are not a plain `for` (but for the
//! loop over the runs of a deduplicated level, `OuterLoop::over_runs`,
//! shared as a `for` would be).
//!
//! Each call computes its own share of the loop from the call parameters
//! `thread` and `threads`: shares are contiguous ranges of the loop's
//! iterations, balanced by the positions under each iteration when the
//! iterated level has a compact, position-iterable child (CSR's rows by
//! their nonzeros) and by iteration count otherwise. The bounds are taken
//! as running maxima, so they never decrease whatever the storage holds:
//! the shares always partition the loop, each iteration in exactly one.

mod checks;
mod fill;

use super::iterate::{Kind, LoopIterator};
use super::operands::{Problem, ResultAssembly};
use super::vars::IndexVar;
use super::Lowerer;
use crate::format::level::{Assembly, Iteration, LevelCtx};
use crate::ir::{
    CmpOp, Emitter, Expr, Parallel, ParamRef, ShareBounds, Stmt, Ty, VarId, CALL_PHASE,
    CALL_THREAD, CALL_THREADS,
};
use checks::{
    assigns_outside, carried_counters_fit, carried_sums_fit, reads_result_only_to_add,
    rows_body_fits, rows_frame_fits,
};

/// The outermost loop of a nest, as the lowerer emitted it.
#[derive(Clone, Debug)]
pub(crate) struct OuterLoop {
    var: VarId,
    /// The index variable whose coordinates the loop visits.
    index: IndexVar,
    /// Whether every thread visits different coordinates of `index`.
    distinct: bool,
    weight: Option<Weight>,
    /// For a non-unique ordered level, its coordinate at a position: share
    /// bounds move past runs of equal coordinates, so a coordinate's
    /// iterations all fall in one share.
    runs: Option<Coordinate>,
    /// The coordinate of an iteration, when the loop visits coordinates in
    /// nondecreasing order (`fill`).
    row_of: Option<fill::RowOf>,
    /// The loop is `let var = lo; while var < hi { ..; var = next }`, a
    /// run of equal coordinates an iteration (a deduplicated level), not
    /// a `for`: each run starts an iteration, so shares whose bounds move
    /// past runs start and end on iterations.
    over_runs: bool,
}

impl OuterLoop {
    /// A plain loop `var` over every coordinate of `index`, each visited
    /// once (the rows loop of terms sharing a workspace row).
    pub(super) fn rows(var: VarId, index: IndexVar) -> OuterLoop {
        OuterLoop {
            var,
            index,
            distinct: true,
            weight: None,
            runs: None,
            row_of: Some(fill::RowOf::Cursor),
            over_runs: false,
        }
    }
}

/// A level's coordinate at position `at`.
#[derive(Clone, Debug)]
struct Coordinate {
    at: VarId,
    coord: Expr,
}

/// The positions under one iteration, `[lo, hi)` of the iterated level's
/// child, as expressions of the iteration (`lo_at`, `hi_at`).
#[derive(Clone, Debug)]
struct Weight {
    lo_at: VarId,
    lo: Expr,
    hi_at: VarId,
    hi: Expr,
}

impl<'p> Lowerer<'p> {
    /// Note the loop over `var` that iterates `v` with `it` as the
    /// outermost loop of the nest: a `for`, or the `while` of a
    /// deduplicated level (`OuterLoop::over_runs`).
    pub(super) fn record_outer(&mut self, var: VarId, v: IndexVar, it: &dyn LoopIterator<'p>) {
        // Value iteration and whole dimensions count coordinates; position
        // iteration repeats a coordinate only on a non-unique level, where
        // an ordered one keeps the repeats together (in one iteration when
        // deduplicated).
        let props = it.props().level;
        let runs = match it.kind() {
            Kind::Position(_) if !props.unique && props.ordered => self.coordinate(it),
            _ => None,
        };
        let distinct = match it.kind() {
            Kind::Position(_) => (props.unique && !it.dedups()) || runs.is_some(),
            Kind::Value(_) | Kind::Dimension | Kind::Scratch => true,
        };
        let weight = self.weight(it);
        // A dense dimension and value iteration count coordinates up.
        let row_of = match it.kind() {
            Kind::Position(_) if props.ordered => self.coordinate(it).map(fill::RowOf::Position),
            Kind::Value(_) | Kind::Dimension if props.ordered => Some(fill::RowOf::Cursor),
            _ => None,
        };
        self.outer = Some(OuterLoop {
            var,
            index: v,
            distinct,
            weight,
            runs,
            row_of,
            over_runs: it.dedups(),
        });
    }

    /// The coordinate of the outermost level `it` iterates by position, at
    /// a position, when expressions alone give it.
    fn coordinate(&mut self, it: &dyn LoopIterator<'p>) -> Option<Coordinate> {
        let (Kind::Position(f), Some((op, 0))) = (it.kind(), it.level()) else {
            return None;
        };
        let o = &self.p.operands[op];
        let at = self.e.fresh("share_at", Ty::I64);
        self.e.open();
        let (coord, found) = f.pos_access(
            &LevelCtx::new(&o.tensor, 0),
            &mut self.e,
            Expr::Var(at),
            &[],
        );
        let pre = self.e.close();
        (pre.is_empty() && found == Expr::Bool(true)).then_some(Coordinate { at, coord })
    }

    /// The positions of the level below the iterated one, when they say how
    /// much work an iteration holds: a compact child iterated by position
    /// (its bounds never decrease from one parent to the next), reached by
    /// expressions alone.
    fn weight(&mut self, it: &dyn LoopIterator<'p>) -> Option<Weight> {
        let (op, k) = it.level()?;
        let o = &self.p.operands[op];
        // The outermost loop iterates a first level: its parent position is 0.
        let child = o.format.levels.get(k + 1).filter(|_| k == 0)?;
        let Iteration::CoordPosition(f) = child.iteration() else {
            return None;
        };
        // A branchless child has one position per parent: no news.
        if !child.properties().compact || child.properties().branchless {
            return None;
        }
        let (c, c1) = (LevelCtx::new(&o.tensor, k), LevelCtx::new(&o.tensor, k + 1));
        let lo_at = self.e.fresh("share_at", Ty::I64);
        let hi_at = self.e.fresh("share_at", Ty::I64);
        self.e.open();
        let kind = it.kind();
        let pos = |e: &mut Emitter, at: VarId| match kind {
            Kind::Position(_) => Some(Expr::Var(at)),
            Kind::Value(g) => {
                let (p, found) = g.coord_access(&c, e, Expr::Int(0), &[Expr::Var(at)]);
                (found == Expr::Bool(true)).then_some(p)
            }
            Kind::Dimension | Kind::Scratch => None,
        };
        let bounds = match (pos(&mut self.e, lo_at), pos(&mut self.e, hi_at)) {
            (Some(lo_pos), Some(hi_pos)) => Some((
                f.pos_bounds(&c1, &mut self.e, lo_pos).0,
                f.pos_bounds(&c1, &mut self.e, hi_pos).1,
            )),
            _ => None,
        };
        let pre = self.e.close();
        let (lo, hi) = bounds.filter(|_| pre.is_empty())?;
        Some(Weight {
            lo_at,
            lo,
            hi_at,
            hi,
        })
    }
}

/// How the outermost loop of a nest computing `p` may be shared, judged
/// from how the result is assembled.
fn mode(p: &Problem, outer: &OuterLoop) -> Option<Parallel> {
    let o = p.output();
    if p.assembly != ResultAssembly::Buffer
        && stitches(o)
        && outer.distinct
        && o.level_vars.first() == Some(&outer.index)
    {
        return Some(Parallel::Stitch);
    }
    if p.assembly != ResultAssembly::Direct {
        return None;
    }
    // Dense levels give every coordinate its own position, computed
    // without writing anything shared: partial results line up too.
    let dense = o.format.levels.iter().all(|l| {
        l.properties().full && l.locate().is_some() && matches!(l.assembly(), Assembly::Insert(_))
    });
    if !dense {
        return None;
    }
    if outer.distinct && o.level_vars.contains(&outer.index) {
        Some(Parallel::Rows)
    } else {
        Some(Parallel::Partials)
    }
}

/// A result of a dense level over an appended level that stitches
/// (CSR, written directly or through a workspace row): threads may each
/// compute the rows of their share into a result of their own.
fn stitches(o: &super::operands::Operand) -> bool {
    match o.format.levels.as_slice() {
        [rows, below] => {
            rows.properties().full
                && rows.locate().is_some()
                && matches!(rows.assembly(), Assembly::Insert(_))
                && matches!(below.assembly(), Assembly::Append(a) if a.stitch_shares().is_some())
        }
        _ => false,
    }
}

/// Make the outermost loop of the nest in `e`'s top-level block run in
/// shares, if that is race-free; returns how results are kept apart, and
/// the variables holding a call's share.
pub(super) fn share_outer(
    e: &mut Emitter,
    p: &Problem,
    outer: &OuterLoop,
) -> Option<(Parallel, ShareBounds)> {
    let mode = mode(p, outer)?;
    let out = p.output().tensor.clone();
    let mut body = e.take();
    // The loop over runs, `let var = lo; while var < hi { .. }`, is judged
    // and cut into shares as `for var in lo..hi { .. }` would be, and
    // emitted as it was: rows of a dense result, of a CSR result each
    // share builds apart, or partial results (a reduction over the runs'
    // coordinates).
    let original = outer.over_runs.then(|| body.clone());
    if outer.over_runs && !as_counted_loop(&mut body, outer.var) {
        original.unwrap_or(body).into_iter().for_each(|s| e.push(s));
        return None;
    }
    let fits = match body
        .iter()
        .position(|s| matches!(s, Stmt::For { var, .. } if *var == outer.var))
    {
        Some(k) => match (&body[k], mode) {
            // Shares run apart: nothing may flow from one iteration to the next.
            (
                l @ Stmt::For {
                    body: inner,
                    lo,
                    hi,
                    ..
                },
                Parallel::Rows,
            ) => {
                rows_body_fits(inner, &out)
                    && !assigns_outside(l)
                    && rows_frame_fits(&body[..k], [lo, hi], &body[k + 1..], &out)
            }
            // Threads' results are added up: the kernel may only add to
            // its result (its scratch arrays are each call's own).
            (l, Parallel::Partials) => {
                reads_result_only_to_add(&body, &out, false)
                    && carried_sums_fit(&body[..k], l, &body[k + 1..], &e.vars)
            }
            (l, Parallel::Stitch) => carried_counters_fit(l, &e.vars),
            _ => false,
        }
        .then_some(k),
        None => None,
    };
    let after = match fits {
        Some(k) => body.split_off(k + 1),
        None => Vec::new(),
    };
    let (
        Some(Stmt::For {
            var,
            lo,
            hi,
            body: inner,
        }),
        true,
    ) = (body.last().cloned(), fits.is_some())
    else {
        original.unwrap_or(body).into_iter().for_each(|s| e.push(s));
        return None;
    };
    body.pop();
    let fill = match mode {
        Parallel::Rows => fill::RowFill::take(p, outer, &mut body),
        _ => None,
    };
    let phase = Expr::Param(ParamRef::call(CALL_PHASE));
    let mut set_up = Vec::new();
    for s in body {
        match (mode, s) {
            (Parallel::Rows, s @ (Stmt::Let(..) | Stmt::Comment(_))) => {
                gate(
                    e,
                    &mut set_up,
                    Expr::cmp(CmpOp::Ne, phase.clone(), Expr::Int(2)),
                );
                e.push(s);
            }
            (Parallel::Rows, s) => set_up.push(s),
            (Parallel::Partials | Parallel::Stitch, s) => e.push(s),
        }
    }
    gate(
        e,
        &mut set_up,
        Expr::cmp(CmpOp::Ne, phase.clone(), Expr::Int(2)),
    );
    e.comment(match mode {
        Parallel::Rows => {
            format!("each thread runs a share of the loop, writing its own rows of {out}")
        }
        Parallel::Partials => {
            format!("each thread runs a share of the loop into its own {out}, added up afterwards")
        }
        Parallel::Stitch => format!(
            "each thread runs a share of the rows into its own {out}, stitched together afterwards"
        ),
    });
    e.open();
    let hi = e.bind("share_hi", hi);
    let bounds = share_bounds(
        e,
        lo,
        hi.clone(),
        outer.weight.as_ref(),
        outer.runs.as_ref(),
    );
    let (begin, end) = (Expr::Var(bounds.begin), Expr::Var(bounds.end));
    let shared = SharedLoop {
        cursor: var,
        over_runs: outer.over_runs,
    };
    match fill {
        Some(fill) => fill.emit(e, p, hi, (begin, end), shared, inner),
        None => shared.emit(e, begin, end, inner),
    }
    let share = e.close();
    match mode {
        Parallel::Rows => e.push(Stmt::If {
            cond: Expr::cmp(CmpOp::Ne, phase, Expr::Int(1)),
            then: share,
            els: Vec::new(),
        }),
        Parallel::Partials | Parallel::Stitch => share.into_iter().for_each(|s| e.push(s)),
    }
    for s in after {
        e.push(s);
    }
    Some((mode, bounds))
}

/// The loop a share runs: `for cursor in begin..end { body }`, or over
/// runs, `let cursor = begin; while cursor < end { body }` (the body
/// moves the cursor past its run).
#[derive(Clone, Copy)]
pub(super) struct SharedLoop {
    pub cursor: VarId,
    pub over_runs: bool,
}

impl SharedLoop {
    pub(super) fn emit(self, e: &mut Emitter, begin: Expr, end: Expr, body: Vec<Stmt>) {
        if self.over_runs {
            e.push(Stmt::Let(self.cursor, begin));
            e.push(Stmt::While {
                cond: Expr::lt(Expr::Var(self.cursor), end),
                body,
            });
        } else {
            e.push(Stmt::For {
                var: self.cursor,
                lo: begin,
                hi: end,
                body,
            });
        }
    }
}

/// Rewrite `let var = lo; while var < hi { body }` in `block` as `for var
/// in lo..hi { body }`, the form the share checks and cuts; false where
/// `block` holds no such loop.
fn as_counted_loop(block: &mut Vec<Stmt>, var: VarId) -> bool {
    let Some(k) = block.iter().position(|s| {
        matches!(s, Stmt::While { cond: Expr::Cmp(CmpOp::Lt, x, _), .. } if **x == Expr::Var(var))
    }) else {
        return false;
    };
    let lo = match k.checked_sub(1).map(|j| &block[j]) {
        Some(Stmt::Let(v, lo)) if *v == var => lo.clone(),
        _ => return false,
    };
    let Stmt::While {
        cond: Expr::Cmp(_, _, hi),
        body,
    } = block.remove(k)
    else {
        return false;
    };
    block[k - 1] = Stmt::For {
        var,
        lo,
        hi: *hi,
        body,
    };
    true
}

/// Emit `pending` (if any) under `if cond`.
fn gate(e: &mut Emitter, pending: &mut Vec<Stmt>, cond: Expr) {
    if !pending.is_empty() {
        e.push(Stmt::If {
            cond,
            then: std::mem::take(pending),
            els: Vec::new(),
        });
    }
}

/// The bounds `[begin, end)` of this call's share of the iterations
/// `[lo, hi)`. Boundary `s` of `threads` is the first iteration before
/// which at least `s / threads` of the work lies (work: one per iteration,
/// plus the positions under it when weighed), searched from boundary
/// `s - 1` on, so boundaries never decrease; boundary `threads` is `hi`.
/// With `runs`, a boundary inside a run of equal coordinates moves to its
/// end.
fn share_bounds(
    e: &mut Emitter,
    lo: Expr,
    hi: Expr,
    weight: Option<&Weight>,
    runs: Option<&Coordinate>,
) -> ShareBounds {
    let thread = Expr::Param(ParamRef::call(CALL_THREAD));
    let threads = Expr::Param(ParamRef::call(CALL_THREADS));
    let lo = e.bind("share_lo", lo);
    let hi = e.bind("share_hi", hi);
    let bounds = ShareBounds {
        begin: e.fresh("share_begin", Ty::I64),
        end: e.fresh("share_end", Ty::I64),
    };
    e.push(Stmt::Let(bounds.begin, lo.clone()));
    e.push(Stmt::Let(bounds.end, hi.clone()));
    let (begin, end) = (Expr::Var(bounds.begin), Expr::Var(bounds.end));
    let split = Expr::and(
        Expr::cmp(CmpOp::Gt, threads.clone(), Expr::Int(1)),
        Expr::lt(lo.clone(), hi.clone()),
    );
    e.if_(split, |e| {
        let mut total = Expr::sub(hi.clone(), lo.clone());
        // Read only at iterations inside `[lo, hi)`: `lo` and `m - 1`.
        let base = weight.map(|w| {
            e.push(Stmt::Let(w.lo_at, lo.clone()));
            let base = e.let_var("share_base", w.lo.clone());
            e.push(Stmt::Let(w.hi_at, Expr::sub(hi.clone(), Expr::Int(1))));
            total = Expr::add(total.clone(), Expr::sub(w.hi.clone(), base.clone()));
            base
        });
        let total = e.let_var("share_total", total);
        let b = e.let_var("share_b", lo.clone());
        e.for_(
            "share_s",
            Expr::Int(1),
            Expr::add(thread.clone(), Expr::Int(2)),
            |e, s| {
                let last = e.block(|e| e.set(&b, hi.clone()));
                let search = e.block(|e| {
                    let target = e.let_var(
                        "share_target",
                        Expr::div(Expr::mul(total.clone(), s.clone()), threads.clone()),
                    );
                    let a = e.let_var("share_a", b.clone());
                    let z = e.let_var("share_z", hi.clone());
                    e.while_(Expr::lt(a.clone(), z.clone()), |e| {
                        let m = e.let_var(
                            "share_m",
                            Expr::add(
                                a.clone(),
                                Expr::div(Expr::sub(z.clone(), a.clone()), Expr::Int(2)),
                            ),
                        );
                        let cost = e.let_var("share_cost", Expr::sub(m.clone(), lo.clone()));
                        if let (Some(w), Some(base)) = (weight, &base) {
                            e.if_(Expr::cmp(CmpOp::Gt, m.clone(), lo.clone()), |e| {
                                e.push(Stmt::Set(w.hi_at, Expr::sub(m.clone(), Expr::Int(1))));
                                e.set(
                                    &cost,
                                    Expr::add(cost.clone(), Expr::sub(w.hi.clone(), base.clone())),
                                );
                            });
                        }
                        let found = e.block(|e| e.set(&z, m.clone()));
                        let not = e.block(|e| e.set(&a, Expr::add(m.clone(), Expr::Int(1))));
                        e.push(Stmt::If {
                            cond: Expr::cmp(CmpOp::Ge, cost.clone(), target.clone()),
                            then: found,
                            els: not,
                        });
                    });
                    if let Some(r) = runs {
                        // `a - 1` and `a` are both positions of `[lo, hi)` here.
                        let more = e.let_var(
                            "share_more",
                            Expr::and(
                                Expr::cmp(CmpOp::Gt, a.clone(), lo.clone()),
                                Expr::lt(a.clone(), hi.clone()),
                            ),
                        );
                        e.while_(more.clone(), |e| {
                            e.push(Stmt::Let(r.at, Expr::sub(a.clone(), Expr::Int(1))));
                            let before = e.let_var("share_prev", r.coord.clone());
                            e.push(Stmt::Set(r.at, a.clone()));
                            let same = Expr::eq(r.coord.clone(), before);
                            let next = e.block(|e| e.set(&a, Expr::add(a.clone(), Expr::Int(1))));
                            let stop = e.block(|e| e.set(&more, Expr::Bool(false)));
                            e.push(Stmt::If {
                                cond: same,
                                then: next,
                                els: stop,
                            });
                            e.if_(Expr::cmp(CmpOp::Ge, a.clone(), hi.clone()), |e| {
                                e.set(&more, Expr::Bool(false))
                            });
                        });
                    }
                    e.set(&b, a.clone());
                });
                e.push(Stmt::If {
                    cond: Expr::eq(s.clone(), threads.clone()),
                    then: last,
                    els: search,
                });
                e.if_(Expr::eq(s.clone(), thread.clone()), |e| {
                    e.set(&begin, b.clone())
                });
                e.if_(
                    Expr::eq(s.clone(), Expr::add(thread.clone(), Expr::Int(1))),
                    |e| e.set(&end, b.clone()),
                );
            },
        );
    });
    bounds
}
