//! Terms that add into one workspace row. A statement whose terms cannot
//! share a loop nest (a sum inside an addition, `A(i,j) = B(i,k) * C(k,j) +
//! D(i,j)`; `+=` into CSR, which reads the old result as a term of its own)
//! runs each term as its own nest. With a result assembled through a
//! workspace row, the nests go under one loop over the result's rows: each
//! term adds its part of row `i` to the row, which is flushed once per row.
//! (Separate nests over all rows would each need a row of their own, and
//! went through the coordinate buffer instead, which holds every product.)
//!
//! The result must have one full level of rows over the appended level
//! the row assembles (CSR, CSC), and every term's operands must be
//! locatable at a row (dense rows); otherwise the caller falls back to the
//! coordinate buffer.

use super::graph::{self, IterationGraph};
use super::lattice::LExpr;
use super::operands::{resolve, Problem, ResultAssembly, Row};
use super::{Kernel, LowerError, Lowerer, Nest, Sink, State};
use crate::format::level::{Assembly, LevelCtx};
use crate::format::TensorFormat;
use crate::ir::{Emitter, Expr, Stmt, Ty};
use crate::notation::Assignment;
use std::collections::BTreeMap;

/// `a`, split into `parts`, as one loop over the result's rows whose body
/// runs every part's nest below the row into the workspace row, then
/// flushes it.
pub(super) fn compile_sharing_rows(
    name: &str,
    a: &Assignment,
    parts: &[Assignment],
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    row: Row,
) -> Result<Kernel, LowerError> {
    let mut problems: Vec<(Problem, IterationGraph)> = Vec::new();
    for part in parts {
        let mut p = resolve(part, formats, dims)?;
        p.assembly = ResultAssembly::Workspace(row);
        let graph = graph::build(&p)?;
        super::workspace_fits(&p, &graph)?;
        problems.push((p, graph));
    }
    let Some((first, first_graph)) = problems.first() else {
        return Err(LowerError::Internal("no terms".into()));
    };
    let out = first.output();
    let rows_full = out
        .format
        .levels
        .first()
        .is_some_and(|l| l.properties().full);
    let Some(Assembly::Append(app)) = out.format.levels.get(1).map(|l| l.assembly()) else {
        return Err(unsupported(a));
    };
    if out.level_vars.len() != 2 || !rows_full {
        return Err(unsupported(a));
    }
    // The result's set-up, the rows loop and the row's place in the result.
    let mut l = lowerer(
        first,
        first_graph,
        Emitter::new(),
        (BTreeMap::new(), BTreeMap::new()),
        None,
        Vec::new(),
    );
    l.e.comment(a.to_string());
    l.prologue()?;
    let rows = out.level_vars[0];
    let extent = l.extent(rows);
    let i = l.e.fresh(first.name(rows), Ty::I64);
    l.e.open();
    let st = state(first, Expr::Var(i), Vec::new());
    let (at, found) = l.locate(super::ids::OperandId::OUTPUT, Expr::Var(i), &st)?;
    if let Some(Assembly::Insert(ins)) = out.format.levels.first().map(|l| l.assembly()) {
        l.e.open();
        ins.insert_coord(
            &LevelCtx::new(&out.tensor, 0),
            &mut l.e,
            at.clone(),
            Expr::Var(i),
        );
        let insert = l.e.close();
        if !insert.is_empty() {
            l.e.push(Stmt::If {
                cond: Expr::not(found),
                then: insert,
                els: Vec::new(),
            });
        }
    }
    let counter = l.out_sizes[&1].clone();
    let begin =
        l.e.let_var(&format!("{}2_begin", out.tensor), counter.clone());
    // The result's counters pass from each part's lowerer to the next.
    let (mut e, mut counters, mut row_state) = (l.e, (l.out_sizes, l.last_parents), l.row);
    let mut lengths = l.lengths_at_end;
    let mut nests = Vec::new();
    for (part, (p, graph)) in parts.iter().zip(&problems) {
        let mut l = lowerer(p, graph, e, counters, row_state, lengths);
        l.e.comment(format!("{part}"));
        let rows = p.output().level_vars[0];
        l.coords.push((i, rows));
        let st = state(p, Expr::Var(i), vec![at.clone()]);
        // The row is bound: what follows is the part's nest below it.
        l.after_bind(1, st, LExpr::from_notation(&part.rhs, &p.operands))?;
        nests.push(Nest {
            problem: p.clone(),
            graph: graph.clone(),
            plans: std::mem::take(&mut l.plans),
            coords: std::mem::take(&mut l.coords),
        });
        counters = (l.out_sizes, l.last_parents);
        (e, row_state, lengths) = (l.e, l.row, l.lengths_at_end);
    }
    let mut l = lowerer(first, first_graph, e, counters, row_state, lengths);
    l.flush_workspace(&state(first, Expr::Var(i), vec![at.clone()]), &[]);
    l.close_parent(1, app, at, (begin, counter));
    let body = l.e.close();
    l.e.push(Stmt::For {
        var: i,
        lo: Expr::Int(0),
        hi: extent,
        body,
    });
    l.epilogue();
    // The rows are shared among threads as a single nest's would be.
    let parallel =
        super::parallel::share_outer(&mut l.e, first, &super::parallel::OuterLoop::rows(i, rows));
    let mut function = l.e.finish(name);
    function.parallel = parallel.map(|(mode, _)| mode);
    function.shares = parallel.map(|(_, bounds)| bounds);
    if std::env::var_os("TENSOR_NO_UNROLL").is_none() {
        crate::ir::unroll::two_accumulators(&mut function);
    }
    Ok(Kernel {
        assignment: a.clone(),
        nests,
        function,
        prior: None,
        buffer: None,
        conversions: Vec::new(),
        temporaries: Vec::new(),
        result_is_copy: false,
    })
}

fn lowerer<'p>(
    p: &'p Problem,
    graph: &IterationGraph,
    e: Emitter,
    (out_sizes, last_parents): (BTreeMap<usize, Expr>, BTreeMap<usize, Expr>),
    row: Option<super::workspace::RowState>,
    lengths_at_end: Vec<(crate::ir::ArrayRef, Expr)>,
) -> Lowerer<'p> {
    Lowerer {
        p,
        order: graph.order.clone(),
        e,
        plans: Vec::new(),
        out_sizes,
        last_parents,
        accumulating_stores: 0,
        exact_stores: 0,
        assigning_stores: 0,
        row,
        outer: None,
        coords: Vec::new(),
        lengths_at_end,
    }
}

/// What the part's nest starts from: the row bound to `i`, the result at
/// its position `out` when given.
fn state(p: &Problem, i: Expr, out: Vec<Expr>) -> State {
    let n = p.operands.len();
    let mut pos = vec![Vec::new(); n];
    pos[0] = out;
    let bound = [(p.output().level_vars[0], i)].into_iter().collect();
    State {
        bound,
        pos,
        run_end: vec![None; n],
        found: vec![Expr::Bool(true); n],
        sink: Sink::Direct,
        exact: false,
        once: false,
        stored: Default::default(),
    }
}

fn unsupported(a: &Assignment) -> LowerError {
    LowerError::Unsupported { reason: format!("the terms of `{a}` cannot share the rows of a workspace: its result needs one full level of rows over an appended one"), span: a.span }
}
