//! Lowering index notation to the loop IR, reasoning only about level
//! capabilities and properties (section 5 of the paper).
//!
//! operands -> iteration graph -> per variable: merge lattice, co-iterate vs
//! locate, iterator adapters -> loops, with the result assembled by insert
//! or append. Split by concern: `operands`, `graph`, `lattice`, `ids` (typed
//! identities), `iterate` (the iterator protocol), `loops` (strategies and
//! adapters), `emit` (loops through the protocol), `assemble` (result),
//! `plan` (what was chosen).

mod ahead;
mod assemble;
pub mod convert;
mod emit;
pub mod graph;
mod hidden_levels;
pub mod ids;
mod iterate;
pub mod lattice;
mod loops;
mod one_order;
pub mod operands;
mod parallel;
pub mod plan;
mod prior;
mod shared_rows;
mod temporary;
pub mod vars;
mod workspace;

use crate::format::level::Assembly;
use crate::format::TensorFormat;
use crate::ir::{Emitter, Expr, Function, VarId};
use crate::notation::reduce::{
    additive_terms, distributed_terms, sums_hoist_with_private, Undistributable, MAX_MONOMIALS,
};
use crate::notation::{Access, Assignment, Expr as NExpr, Span};
use convert::Conversion;
use graph::IterationGraph;
use lattice::LExpr;
use operands::{resolve, Problem, ResultAssembly, Row};
use plan::{NamedPlan, VarPlan};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;
use vars::IndexVar;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum LowerError {
    #[error("unknown tensor `{name}`")]
    UnknownTensor { name: String, span: Span },
    #[error("{access} is indexed by {indices} variables but the tensor has order {order}")]
    Arity {
        access: String,
        order: usize,
        indices: usize,
        span: Span,
    },
    #[error("shape mismatch for index `{var}`: {first}, {second}")]
    Shape {
        var: String,
        first: String,
        second: String,
        span: Span,
    },
    #[error("no loop order works: {detail}")]
    NoLoopOrder { detail: String, span: Span },
    #[error("{reason}")]
    Capability { reason: String, span: Span },
    #[error("{reason}")]
    NeedsOrder { reason: String, span: Span },
    #[error("unsupported: {reason}")]
    Unsupported { reason: String, span: Span },
    #[error("internal compiler error: {0}")]
    Internal(String),
}

impl LowerError {
    /// A kernel the compiler declines to build for these formats (as
    /// opposed to a mistake in the statement itself).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            LowerError::NoLoopOrder { .. }
                | LowerError::Capability { .. }
                | LowerError::NeedsOrder { .. }
                | LowerError::Unsupported { .. }
        )
    }

    pub fn span(&self) -> Option<Span> {
        match self {
            LowerError::UnknownTensor { span, .. }
            | LowerError::Arity { span, .. }
            | LowerError::Shape { span, .. }
            | LowerError::NoLoopOrder { span, .. }
            | LowerError::Capability { span, .. }
            | LowerError::NeedsOrder { span, .. }
            | LowerError::Unsupported { span, .. } => Some(*span),
            LowerError::Internal(_) => None,
        }
    }
}

/// One loop nest of a kernel (a kernel whose sum cannot be hoisted over an
/// addition is computed as one nest per term).
#[derive(Clone, Debug)]
pub struct Nest {
    pub problem: Problem,
    pub graph: IterationGraph,
    pub plans: Vec<VarPlan>,
    /// The IR variables of `Kernel::function` that hold coordinates of an
    /// index variable (loop counters and cursors that are coordinates,
    /// coordinates read or computed), so that the loops of a variable are
    /// found without reading IR names.
    pub coords: Vec<(VarId, IndexVar)>,
}

/// A compiled kernel: the loop IR and how it was derived.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The statement as written.
    pub assignment: Assignment,
    pub nests: Vec<Nest>,
    pub function: Function,
    /// The operand that reads the result's contents from before the kernel
    /// (the result on its own right-hand side, or `+=` into an appended
    /// result): the caller binds it to the old result.
    pub prior: Option<String>,
    /// The coordinate buffer the kernel writes instead of the result, which
    /// the caller packs into the result's format.
    pub buffer: Option<ResultBuffer>,
    /// Operands the kernel reads from copies in another format, which the
    /// caller converts before each run.
    pub conversions: Vec<Conversion>,
    /// Sums computed first into dense temporaries, in the order the kernel
    /// computes them (`lower::temporary`): each a statement writing one.
    pub temporaries: Vec<Assignment>,
    /// The kernel only copies its one converted operand, whose storage is
    /// the result's (`convert::compile_as_permutation`): the caller may
    /// take the converted copy as the result and skip the copy.
    pub result_is_copy: bool,
}

/// A result assembled through a coordinate buffer: the kernel appends every
/// entry it computes (any order, duplicates included) to `name`, stored in
/// `format` (see `format::coordinate_buffer`).
#[derive(Clone, Debug)]
pub struct ResultBuffer {
    pub name: String,
    pub format: TensorFormat,
}

impl Kernel {
    pub fn output(&self) -> &str {
        &self.assignment.lhs.tensor
    }
    /// Every nest's plans, each with its nest's variable names.
    pub fn plans(&self) -> impl Iterator<Item = NamedPlan<'_>> {
        self.nests.iter().flat_map(|n| {
            n.plans.iter().map(|plan| NamedPlan {
                plan,
                vars: &n.problem.vars,
            })
        })
    }
    /// The operands (as the user named them) that the loops merge again
    /// from their start for each coordinate of an outer loop over a
    /// variable they lack: an inner product's rows x columns merges, which
    /// the compiler avoids by converting an operand wherever it can.
    pub fn remerged_operands(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .nests
            .iter()
            .flat_map(|n| convert::remerged_operands(self, n))
            .map(|(o, _)| convert::source_of(self, o))
            .collect();
        names.dedup();
        names
    }
    /// The workspace row the result's last level goes through, if any:
    /// the level's variable and what the row is, for the user.
    pub fn workspace(&self) -> Option<(String, String)> {
        let nest = self.nests.first()?;
        let ResultAssembly::Workspace(row) = nest.problem.assembly else {
            return None;
        };
        let vars = &nest.problem.output().level_vars;
        let (&last, rows) = vars.split_last()?;
        let (var, rows) = (
            nest.problem.name(last).to_string(),
            nest.problem.vars.join(rows, ", "),
        );
        let what = match row {
            Row::Dense => "a dense workspace row (values and a touched flag per coordinate, and the list of coordinates touched)",
            Row::Hashed => "a hashed workspace row (the level is too wide for a dense one: a hash table of the coordinates touched, their values in the order they came)",
        };
        let order = if nest.problem.output().format.levels[vars.len() - 1]
            .properties()
            .ordered
        {
            "sorted and appended"
        } else {
            "appended"
        };
        Some((var.clone(), format!("`{}` is assembled over `{var}` through {what}: the loops add to it in any order, and after each `{rows}` its coordinates are {order} to the result", self.output())))
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Sink {
    /// Add each value into the result's values at its position.
    Direct,
    /// Add into a scalar accumulator, stored once the inner loops finish;
    /// `touched` (an integer variable, when given) is set to 1 by the first
    /// value, so that a sparse result gets an entry only where a reduction
    /// met one (an inner product whose operands share no coordinate
    /// stores nothing, not an explicit zero).
    Temp { sum: Expr, touched: Option<Expr> },
}

/// What the recursion knows at a point in the loop nest.
#[derive(Clone, Debug)]
pub(crate) struct State {
    pub bound: BTreeMap<IndexVar, Expr>,
    /// Per operand: positions of its resolved levels.
    pub pos: Vec<Vec<Expr>>,
    /// Per operand: end of a deduplicated run at its last resolved level.
    pub run_end: Vec<Option<Expr>>,
    /// Per operand: whether late locates found its coordinates.
    pub found: Vec<Expr>,
    pub sink: Sink,
    /// Every result position so far is visited exactly once, in a plain
    /// loop over a full level: the result can be stored, not accumulated,
    /// and needs no zero fill.
    pub exact: bool,
    /// Every result position so far is visited at most once (loops over
    /// distinct coordinates, which may skip some): the result can be
    /// stored, not accumulated, though the positions no loop visits keep
    /// their zero fill. A kernel that then never reads its result lets
    /// the C fill it with streaming stores (`ir::c`).
    pub once: bool,
    /// Variables bound to a coordinate an operand stores
    /// (`LevelFormat::stores_coordinates`), not one a loop enumerated: a
    /// blocked dimension whose inner variable is one lies inside the
    /// tensor (`Lowerer::after_bind`).
    pub stored: BTreeSet<IndexVar>,
}

impl State {
    /// Whether `e` can have an entry here, given the operands found by
    /// locates so far (`LExpr::presence`).
    pub fn presence(&self, e: &lattice::LExpr) -> Expr {
        e.presence(&|op| self.found[op].clone())
    }
}

pub(crate) struct Lowerer<'p> {
    pub p: &'p Problem,
    pub order: Vec<IndexVar>,
    pub e: Emitter,
    pub plans: Vec<VarPlan>,
    /// Counter of appended positions per append chain head of the result.
    pub out_sizes: BTreeMap<usize, Expr>,
    /// Per appending result level whose parents are closed in order, the
    /// variable holding the last one closed (`Parents::InOrder`).
    pub last_parents: BTreeMap<usize, Expr>,
    /// Stores into the result that accumulate (`+=`) / that assign (`=`).
    pub accumulating_stores: usize,
    pub exact_stores: usize,
    /// Stores of a value into a position visited at most once (`once`),
    /// not exactly once: the zero fill stays.
    pub assigning_stores: usize,
    /// The workspace row's count of coordinates touched (and table size).
    pub row: Option<workspace::RowState>,
    /// The outermost loop, when it is a plain `for` (`lower::parallel`).
    pub outer: Option<parallel::OuterLoop>,
    /// IR variables holding coordinates of index variables (`Nest::coords`).
    pub coords: Vec<(VarId, IndexVar)>,
    /// Lengths of appended arrays reserved once, after the whole nest
    /// (`Lowerer::emit_with_room`).
    pub lengths_at_end: Vec<(crate::ir::ArrayRef, Expr)>,
}

impl Problem {
    /// Whether every level of the result can be written by insert.
    pub fn output_inserts(&self) -> bool {
        self.output()
            .format
            .levels
            .iter()
            .all(|l| matches!(l.assembly(), Assembly::Insert(_)))
    }
}

/// Whether `acc`'s format has levels with no dimension of their own: their
/// variables are private to the access and summed where it is (DIA's
/// diagonals are summed per access), which reduction placement must know.
fn has_hidden_levels(acc: &Access, formats: &BTreeMap<String, TensorFormat>) -> bool {
    formats
        .get(&acc.tensor)
        .is_some_and(format_has_hidden_levels)
}

/// Whether a level of `f` stands for a variable of the format's own (DIA's
/// diagonal, CSB's block), summed over where the tensor is read.
fn format_has_hidden_levels(f: &TensorFormat) -> bool {
    (0..f.levels.len()).any(|k| matches!(f.map.level_var(k), crate::format::LevelVar::Hidden(_)))
}

/// Compile `a` given each tensor's format and dimensions.
pub fn compile(
    name: &str,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
) -> Result<Kernel, LowerError> {
    compile_with(name, a, formats, dims, None)
}

/// `compile` for operands whose stored entries are known (by tensor name):
/// choices that pay only on some data (a dense copy of an operand merged
/// again for each row) weigh them. Without them, `compile` assumes those
/// choices pay, as for operands of typical density.
pub fn compile_for_entries(
    name: &str,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    entries: &BTreeMap<String, usize>,
) -> Result<Kernel, LowerError> {
    compile_with(name, a, formats, dims, Some(entries))
}

fn compile_with(
    name: &str,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    entries: Option<&BTreeMap<String, usize>>,
) -> Result<Kernel, LowerError> {
    let prior = prior::read_prior(a, formats, dims);
    let (statement, formats, dims) = match &prior {
        Some(p) => (&p.assignment, &p.formats, &p.dims),
        None => (a, formats, dims),
    };
    let kernel = compile_resolved(name, statement, formats, dims)?;
    let kernel =
        convert::densify_remerged(statement, formats, dims, entries, kernel, &|s, f, d| {
            compile_resolved(name, s, f, d)
        });
    let kernel = convert::reorder_remerged(statement, formats, dims, kernel, &|s, f, d| {
        compile_resolved(name, s, f, d)
    });
    let mut kernel = Kernel {
        assignment: a.clone(),
        prior: prior.as_ref().map(|p| p.name.clone()),
        ..kernel
    };
    inline_fixed_sizes(&mut kernel);
    kernel.function.index_limits = index_limits(&kernel);
    // TENSOR_NO_RUNS=1 keeps COO's stores per entry (to compare).
    if let (Some(entries), None) = (entries, std::env::var_os("TENSOR_NO_RUNS")) {
        kernel.function.runs = runs_of_equal_coordinates(&kernel, dims, entries);
    }
    if let Some(entries) = entries {
        kernel.function.lengths = lengths_of_values(&kernel, dims, entries);
    }
    Ok(kernel)
}

/// The result arrays the result's level formats bound
/// (`Function::index_limits`).
fn index_limits(kernel: &Kernel) -> Vec<(crate::ir::ArrayRef, u64)> {
    let mut out: Vec<(crate::ir::ArrayRef, u64)> = Vec::new();
    let results = kernel.nests.iter().flat_map(|n| &n.problem.operands);
    for o in results.filter(|o| o.output) {
        for (k, level) in o.format.levels.iter().enumerate() {
            for name in level.arrays() {
                let a = crate::ir::ArrayRef::level(&o.tensor, k, name);
                match level.array_limit(name) {
                    Some(limit) if !out.iter().any(|(b, _)| *b == a) => out.push((a, limit)),
                    _ => {}
                }
            }
        }
    }
    out
}

/// Sizes a format fixes (the inner levels of a block: each dense level of
/// `BCSR(4)` holds 4) written into the kernel as constants, not read from
/// parameters: a C compiler unrolls a loop of 4 it can see, where it
/// vectorizes one of unknown length with masks that cost more than the
/// four iterations (BCSR SpMV ran 1.8x slower under gcc than Cranelift).
fn inline_fixed_sizes(kernel: &mut Kernel) {
    let mut known = BTreeMap::new();
    for o in kernel.nests.iter().flat_map(|n| &n.problem.operands) {
        for (k, level) in o.format.levels.iter().enumerate() {
            if let (true, Some(b)) = (level.is_dense(), o.format.map.fixed_extent(k)) {
                for (name, v) in level.output_params(b, 0) {
                    known.insert(crate::ir::ParamRef::level(&o.tensor, k, name), v);
                }
            }
        }
    }
    crate::ir::rewrite_block(&mut kernel.function.body, &mut |e| {
        if let Expr::Param(p) = e {
            if let Some(&v) = known.get(p) {
                *e = Expr::Int(v);
            }
        }
    });
}

/// A statement whose result is not read on its right-hand side: assembled
/// directly or through a buffer; else with a temporary for a sum nested in
/// a product's addition; else over converted operands.
fn compile_resolved(
    name: &str,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
) -> Result<Kernel, LowerError> {
    match compile_or_buffer(name, a, formats, dims, true) {
        Err(e) if e.is_refusal() => {
            // A rewritten statement gets every remedy again.
            let again = |s: &Assignment,
                         f: &BTreeMap<String, TensorFormat>,
                         d: &BTreeMap<String, Vec<usize>>| {
                compile_resolved(name, s, f, d)
            };
            if let Some(kernel) = temporary::compile_with_temporary(a, formats, dims, &again) {
                return Ok(kernel);
            }
            let compile = |s: &Assignment,
                           f: &BTreeMap<String, TensorFormat>,
                           d: &BTreeMap<String, Vec<usize>>| {
                compile_or_buffer(name, s, f, d, false)
            };
            convert::compile_converting(a, formats, dims, e, &compile)
                .or_else(|e| match e {
                    LowerError::NoLoopOrder { .. } => {
                        one_order::compile_in_one_order(a, formats, dims, &e, &compile).ok_or(e)
                    }
                    e => Err(e),
                })
                .or_else(|e| {
                    hidden_levels::compile_without_hidden_levels(a, formats, dims, &e, &again)
                        .ok_or(e)
                })
        }
        r => r,
    }
}

/// Assemble the result directly, or else through a coordinate buffer: a
/// result the loops cannot produce in its own order (a transpose, a
/// conversion to another mode order, a product whose reduction sits
/// between result levels, a format with hidden levels) is appended to in
/// any order and packed into its format afterwards. With `reorder`, an
/// operand read in an order the others conflict with is converted first
/// where that lets the loops assemble the result directly (not inside a
/// conversion search, which converts operands itself).
fn compile_or_buffer(
    name: &str,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    reorder: bool,
) -> Result<Kernel, LowerError> {
    let refusal = match compile_statement(name, a, formats, dims, ResultAssembly::Direct) {
        Err(e) if e.is_refusal() && !a.lhs.indices.is_empty() => e,
        r => return r,
    };
    if let Some(kernel) = convert::compile_as_permutation(a, formats, dims, &refusal, &|s, f, d| {
        compile_statement(name, s, f, d, ResultAssembly::Direct)
    }) {
        return Ok(kernel);
    }
    if let Some(kernel) = compile_in_workspace(name, a, formats, dims) {
        return Ok(kernel);
    }
    // Operands that visit their indices in conflicting orders (`B(i,j) +
    // B(j,i)`, CSR + CSC, CSC x CSR into CSR): one read from a copy in the
    // other order (a counting sort of its entries) lets the loops write
    // the result in order, for less than buffering and sorting every entry
    // of the result. With a sum, only where the copy's loops do not merge
    // an operand again for each outer coordinate (SpGEMM into COO would
    // become inner products over every (i, j)).
    let sums = !a.reduction_vars().is_empty();
    if reorder && matches!(refusal, LowerError::NoLoopOrder { .. }) {
        let in_order = |s: &Assignment,
                        f: &BTreeMap<String, TensorFormat>,
                        d: &BTreeMap<String, Vec<usize>>| {
            match compile_statement(name, s, f, d, ResultAssembly::Direct) {
                Err(e) if e.is_refusal() => compile_in_workspace(name, s, f, d).ok_or(e),
                r => r,
            }
        };
        let once = convert::without_remerging(&in_order, &refusal, false);
        let compile: convert::Compile = if sums { &once } else { &in_order };
        if let Ok(kernel) = convert::compile_converting(a, formats, dims, refusal.clone(), compile)
        {
            return Ok(kernel);
        }
        if let Some(kernel) = one_order::compile_in_one_order(a, formats, dims, &refusal, compile) {
            return Ok(kernel);
        }
    }
    let out = &a.lhs.tensor;
    let mut buffer = format!("{out}_buffer");
    while formats.contains_key(&buffer) {
        buffer.push('_');
    }
    let Ok(format) = crate::format::coordinate_buffer(a.lhs.indices.len()) else {
        return Err(refusal);
    };
    let mut formats = formats.clone();
    formats.insert(buffer.clone(), format.clone());
    let mut dims = dims.clone();
    if let Some(d) = dims.get(out).cloned() {
        dims.insert(buffer.clone(), d);
    }
    let through = Assignment {
        lhs: Access {
            tensor: buffer.clone(),
            ..a.lhs.clone()
        },
        ..a.clone()
    };
    match compile_statement(name, &through, &formats, &dims, ResultAssembly::Buffer) {
        Ok(kernel) => Ok(Kernel {
            assignment: a.clone(),
            buffer: Some(ResultBuffer {
                name: buffer,
                format,
            }),
            ..kernel
        }),
        // A result in any order still fails: the reason lies in the inputs
        // (say so), unless it is about the buffer, which the user never
        // wrote (messages about the inputs quote only the right-hand side).
        Err(e) if e.span() != Some(a.lhs.span) => Err(e),
        Err(_) => Err(refusal),
    }
}

/// The statement with its result assembled through a workspace row,
/// where the result has one (`workspace_row`) and that compiles.
fn compile_in_workspace(
    name: &str,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
) -> Option<Kernel> {
    let row = workspace_row(a, formats, dims)?;
    compile_statement(name, a, formats, dims, ResultAssembly::Workspace(row)).ok()
}

/// The coordinate arrays of the operands' non-unique levels, each with
/// the least average length its runs of equal coordinates can have, from
/// which each backend decides where to add runs in a register
/// (`ir::runs`). A level's runs are those of the coordinates of it and
/// every level above together (a 3-D COO's second level repeats a row
/// and column pair), of which there are at most the product of their
/// extents: at least the stored entries over that product, on average.
/// Dividing by the level's own extent alone took TTV's 1.8 entries per
/// fibre (the NELL-2-like tensor) for 653, and its loop ran 1.25x slower
/// under Cranelift with the runs than without.
fn runs_of_equal_coordinates(
    kernel: &Kernel,
    dims: &BTreeMap<String, Vec<usize>>,
    entries: &BTreeMap<String, usize>,
) -> Vec<crate::ir::Repeats> {
    let mut out = Vec::new();
    for (o, source) in inputs_and_sources(kernel) {
        let (Some(&stored), Some(extents)) = (entries.get(&source), dims.get(&source)) else {
            continue;
        };
        // Coordinates the levels so far can hold; past a level that is no
        // plain dimension (a block's), as many as stored: no runs known.
        let mut prefixes = 1usize;
        for (k, level) in o.format.levels.iter().enumerate() {
            let crate::format::LevelVar::Dim(d) = o.format.map.level_var(k) else {
                prefixes = stored.max(1);
                continue;
            };
            let extent = extents.get(d).copied().unwrap_or(0).max(1);
            prefixes = prefixes.saturating_mul(extent).min(stored.max(1));
            let properties = level.properties();
            if !properties.unique {
                // The first level has one segment: an ordered one's
                // coordinates ascend along every loop over its positions.
                // (A deeper level's ascend only within a segment, and a
                // branchless one's segments are single positions.)
                let ascending = k == 0 && properties.ordered && !properties.branchless;
                out.extend(level.arrays().into_iter().map(|name| crate::ir::Repeats {
                    array: crate::ir::ArrayRef::level(&o.tensor, k, name),
                    per_coordinate: stored / prefixes,
                    stored,
                    ascending,
                }));
            }
        }
    }
    out
}

/// Each input operand of the kernel's nests with the tensor of the data
/// it is made from (the source of a conversion's copy).
fn inputs_and_sources(kernel: &Kernel) -> impl Iterator<Item = (&operands::Operand, String)> {
    kernel
        .nests
        .iter()
        .flat_map(|n| n.problem.inputs())
        .map(|o| (o, convert::source_of(kernel, o)))
}

/// The length of each input's value array in the data the kernel is made
/// for: every position of a dense tensor, a sparse one's stored entries
/// (a lower bound: ELL and DIA store padding too).
fn lengths_of_values(
    kernel: &Kernel,
    dims: &BTreeMap<String, Vec<usize>>,
    entries: &BTreeMap<String, usize>,
) -> Vec<(crate::ir::ArrayRef, usize)> {
    let mut out = Vec::new();
    for (o, source) in inputs_and_sources(kernel) {
        let length = match o.format.is_all_dense() {
            true => dims
                .get(&source)
                .map(|d| d.iter().fold(1usize, |n, &e| n.saturating_mul(e))),
            false => entries.get(&source).copied(),
        };
        let vals = crate::ir::ArrayRef::vals(&o.tensor);
        if let Some(length) = length.filter(|_| !out.iter().any(|(a, _)| *a == vals)) {
            out.push((vals, length));
        }
    }
    out
}

/// Most coordinates a dense workspace row spans (16 bytes each: value,
/// touched flag, touched list): 64 MiB. A wider last level (a hypersparse
/// result) goes through a hashed row, whose memory follows the row's
/// entries, not the dimension. `TENSOR_WORKSPACE_ROW_LIMIT` overrides it
/// (the tests of the hashed row set 0).
const WORKSPACE_ROW_LIMIT: usize = 1 << 22;

/// The workspace row for the result of `a`: one exists where the result's
/// last level appends over a dimension of its own, below levels of rows
/// that insert or that append unique coordinates (DCSR's rows: the loops
/// visit each row once, in order, `workspace_fits`); dense when that
/// dimension is narrow enough, else hashed. A last level that appends
/// with its parent (COO's singleton) has no rows of its own.
fn workspace_row(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
) -> Option<Row> {
    let f = formats.get(&a.lhs.tensor)?;
    let n = f.levels.len();
    let rows_fit = |l: &std::sync::Arc<dyn crate::format::level::LevelFormat>| match l.assembly() {
        Assembly::Insert(_) => true,
        Assembly::Append(_) => l.properties().unique,
        Assembly::None => false,
    };
    // The levels appended together with the last one (COO's coordinates
    // of an entry: a chain of singletons below its head), each written
    // once per flushed coordinate.
    let head = f.append_chain_head(n.saturating_sub(1));
    let chained = head + 1 < n;
    let last_fits = n >= 2
        && matches!(f.levels[n - 1].assembly(), Assembly::Append(_))
        && (chained || !f.levels[n - 1].properties().branchless);
    let levels_fit = last_fits && f.levels[..head.min(n - 1)].iter().all(rows_fit);
    let crate::format::LevelVar::Dim(k) = f.map.level_var(n - 1) else {
        return None;
    };
    if !levels_fit {
        return None;
    }
    let limit = std::env::var("TENSOR_WORKSPACE_ROW_LIMIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(WORKSPACE_ROW_LIMIT);
    match dims.get(&a.lhs.tensor).and_then(|d| d.get(k)) {
        Some(&width) if width > limit => Some(Row::Hashed),
        _ => Some(Row::Dense),
    }
}

/// The workspace row is flushed each time the result's next-to-last
/// variable is done, and rows are appended in order: the variables of the
/// levels above the workspace must be the outermost loops, in level order
/// (each then visits its coordinates once, in order).
fn workspace_fits(p: &Problem, graph: &IterationGraph) -> Result<(), LowerError> {
    let vars = &p.output().level_vars;
    let n = vars.len();
    if graph.order.len() >= n && graph.order[..n - 1] == vars[..n - 1] {
        return Ok(());
    }
    Err(LowerError::Unsupported {
        reason: format!(
            "the loops ({}) do not visit the result's rows ({}) outermost",
            p.vars.join(&graph.order, ", "),
            p.vars.join(&vars[..n - 1], ", ")
        ),
        span: p.assignment.span,
    })
}

fn compile_statement(
    name: &str,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    assembly: ResultAssembly,
) -> Result<Kernel, LowerError> {
    compile_statement_expanding(name, a, formats, dims, assembly, true)
}

fn compile_statement_expanding(
    name: &str,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    assembly: ResultAssembly,
    expand: bool,
) -> Result<Kernel, LowerError> {
    let hoists = sums_hoist_with_private(a, &|acc| has_hidden_levels(acc, formats));
    if !hoists && expand {
        // `(A(i,j)*x(j) + b(i)) * a`: multiplied out, the sum is a term of
        // its own. Kept only when that compiles; else the statement's own
        // reason is given.
        if let Some(expanded) = crate::notation::expand::expand_summed_products(a, &|acc| {
            has_hidden_levels(acc, formats)
        }) {
            if let Ok(kernel) =
                compile_statement_expanding(name, &expanded, formats, dims, assembly, false)
            {
                return Ok(Kernel {
                    assignment: a.clone(),
                    ..kernel
                });
            }
        }
    }
    if !hoists {
        return compile_parts(
            name,
            a,
            split_terms(a, formats, dims, assembly.any_order())?,
            formats,
            dims,
            assembly,
        );
    }
    match compile_parts(name, a, vec![a.clone()], formats, dims, assembly) {
        // Terms that cannot share one loop nest (an unordered operand in a
        // union, operands that want opposite loop orders): with a result
        // that takes updates in any order, each term runs as its own nest.
        Err(e) if e.is_refusal() && additive_terms(&a.rhs).len() > 1 => {
            match split_terms(a, formats, dims, assembly.any_order()) {
                Ok(parts) => compile_parts(name, a, parts, formats, dims, assembly).map_err(|_| e),
                Err(_) => Err(e),
            }
        }
        r => r,
    }
}

fn compile_parts(
    name: &str,
    a: &Assignment,
    parts: Vec<Assignment>,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    assembly: ResultAssembly,
) -> Result<Kernel, LowerError> {
    // Each part's sums must hoist out of its additions, whichever way the
    // parts are assembled (terms sharing a workspace row included).
    for part in &parts {
        if !sums_hoist_with_private(part, &|acc| has_hidden_levels(acc, formats)) {
            return Err(LowerError::Unsupported {
                reason: format!("in `{}`, a sum sits inside an addition; write the terms as separate `+=` statements", part.rhs),
                span: part.rhs.span(),
            });
        }
    }
    if let (ResultAssembly::Workspace(row), true) = (assembly, parts.len() > 1) {
        return shared_rows::compile_sharing_rows(name, a, &parts, formats, dims, row);
    }
    let buffered = assembly == ResultAssembly::Buffer;
    let mut e = Emitter::new();
    let mut nests = Vec::new();
    // A buffer is initialised once and finalised once: every nest appends
    // to the same counters.
    let mut out_sizes = BTreeMap::new();
    let mut last_parents = BTreeMap::new();
    let mut lengths_at_end = Vec::new();
    let mut outer = None;
    let last = parts.len().saturating_sub(1);
    for (n, part) in parts.iter().enumerate() {
        let mut p = resolve(part, formats, dims)?;
        p.assembly = assembly;
        let graph = graph::build(&p)?;
        if assembly.is_workspace() {
            workspace_fits(&p, &graph)?;
        }
        let mut l = Lowerer {
            p: &p,
            order: graph.order.clone(),
            e,
            plans: Vec::new(),
            out_sizes: std::mem::take(&mut out_sizes),
            last_parents: std::mem::take(&mut last_parents),
            accumulating_stores: 0,
            exact_stores: 0,
            assigning_stores: 0,
            row: None,
            outer: None,
            coords: Vec::new(),
            lengths_at_end: std::mem::take(&mut lengths_at_end),
        };
        l.e.comment(format!("{part}"));
        let body_start = l.e.mark();
        if !buffered || n == 0 {
            l.prologue()?;
        }
        let n_ops = p.operands.len();
        let dense_result = p
            .output()
            .format
            .levels
            .iter()
            .all(|lv| lv.properties().full && matches!(lv.assembly(), Assembly::Insert(_)));
        let exact = parts.len() == 1 && !part.accumulate && dense_result;
        let st = State {
            bound: BTreeMap::new(),
            pos: vec![Vec::new(); n_ops],
            run_end: vec![None; n_ops],
            found: vec![Expr::Bool(true); n_ops],
            sink: Sink::Direct,
            exact,
            once: exact && !p.assembly.is_workspace(),
            stored: BTreeSet::new(),
        };
        l.after_bind(0, st, LExpr::from_notation(&part.rhs, &p.operands))?;
        if !buffered || n == last {
            l.epilogue();
        }
        if exact && l.accumulating_stores == 0 && l.assigning_stores == 0 && l.exact_stores > 0 {
            // Every position is stored exactly once: drop the zero fill.
            l.e.remove_zero_fill(body_start, &crate::ir::ArrayRef::vals(&p.output().tensor));
        }
        let plans = std::mem::take(&mut l.plans);
        let coords = std::mem::take(&mut l.coords);
        out_sizes = std::mem::take(&mut l.out_sizes);
        last_parents = std::mem::take(&mut l.last_parents);
        // Lengths deferred by a nest that is not the last to append go to
        // the last one's epilogue.
        lengths_at_end = std::mem::take(&mut l.lengths_at_end);
        outer = l.outer.take();
        e = l.e;
        nests.push(Nest {
            problem: p.clone(),
            graph,
            plans,
            coords,
        });
    }
    // One nest only: the shares of several nests would have to agree on
    // which thread owns which rows.
    let parallel = match (nests.as_slice(), &outer) {
        ([nest], Some(outer)) => parallel::share_outer(&mut e, &nest.problem, outer),
        _ => None,
    };
    let mut function = e.finish(name);
    function.parallel = parallel.map(|(mode, _)| mode);
    function.shares = parallel.map(|(_, bounds)| bounds);
    // TENSOR_NO_UNROLL=1 keeps single accumulators (to compare the IR).
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

/// `y(i) = A(i,j)*x(j) + z(i)` as `y(i) = A(i,j)*x(j); y(i) += z(i)`: valid
/// when the result can be updated in place (insert levels). A sum spanning
/// several terms is distributed over them (`notation::reduce::distributed_terms`).
fn split_terms(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    any_order: bool,
) -> Result<Vec<Assignment>, LowerError> {
    let out_inserts = any_order
        || formats.get(&a.lhs.tensor).is_some_and(|f| {
            f.levels
                .iter()
                .all(|l| matches!(l.assembly(), Assembly::Insert(_)))
        });
    let extent = |v: &str| {
        a.rhs.accesses().iter().find_map(|acc| {
            let k = acc.indices.iter().position(|i| i.name == v)?;
            dims.get(&acc.tensor)?.get(k).copied()
        })
    };
    let terms = distributed_terms(a, extent).map_err(|why| {
        let (reason, span) = match why {
            Undistributable::TooManyTerms(term) => (
                format!(
                    "in `{}`, a sum spans several terms, and `{term}` uses a summed variable inside an addition: multiplied out, it has more than {MAX_MONOMIALS} terms, each a loop nest of its own; write the terms as separate `+=` statements",
                    a.rhs
                ),
                term.span(),
            ),
            Undistributable::UnknownExtent(v) => (
                format!(
                    "in `{}`, a sum over `{v}` adds a term without `{v}` once per coordinate, and no tensor gives `{v}`'s extent",
                    a.rhs
                ),
                a.rhs.span(),
            ),
        };
        LowerError::Unsupported { reason, span }
    })?;
    if !out_inserts {
        return Err(LowerError::Unsupported {
            reason: format!(
                "`{a}` sums over a variable inside an addition (or adds a format with hidden levels), which needs one loop nest per term; that requires a result written by insert (dense or hash), not {}",
                formats.get(&a.lhs.tensor).map_or("this format".into(), |f| f.display_name())
            ),
            span: a.rhs.span(),
        });
    }
    Ok(terms
        .into_iter()
        .enumerate()
        .map(|(n, (positive, term))| {
            let span = term.span();
            let rhs = if positive {
                term
            } else {
                NExpr::Neg(Box::new(term), span)
            };
            Assignment {
                lhs: a.lhs.clone(),
                accumulate: a.accumulate || n > 0,
                rhs,
                span: a.span,
            }
        })
        .collect())
}
