//! The loop IR: a small, target-independent imperative language.
//!
//! Level functions build IR expressions and statements; the lowerer stitches
//! them into loop nests; the C printer and the Cranelift translator both read
//! the same IR, so what the user reads is what the JIT runs.
//!
//! Arrays and scalar parameters are referenced symbolically (tensor name plus
//! slot), so a level function can be written and tested without a kernel.

mod block_streams;
mod build;
pub mod c;
mod c_copies;
mod case_steps;
mod clip;
mod early_steps;
mod fill_checks;
mod filled;
mod fixed_params;
pub mod gathers;
mod hints_for_data;
pub mod interp;
mod known_values;
pub mod min_compare;
pub mod passes;
pub(crate) mod prefetch;
pub mod print;
mod ran_flags;
mod row_runs;
mod run_strides;
pub mod runs;
pub mod sink;
mod sort;
pub mod splice;
mod streams;
mod strips;
pub mod target;
mod tile;
pub mod unroll;

pub use build::{is_row_fill, is_zero_fill, row_fill, Emitter};
pub use target::TargetConstant;

use std::fmt;
use std::sync::Arc;

/// Storage element type of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElemTy {
    /// Coordinates, positions, offsets: 32-bit to halve index bandwidth.
    I32,
    F64,
}

impl ElemTy {
    /// Bytes an element takes.
    pub fn bytes(self) -> usize {
        match self {
            ElemTy::I32 => 4,
            ElemTy::F64 => 8,
        }
    }
}

/// Which array of a tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    /// An index array owned by level `k` (0-based), e.g. `pos`, `crd`.
    Level(usize, &'static str),
    /// The values array.
    Vals,
    /// A scratch array the kernel owns (reordering, deduplication).
    Scratch(String, ElemTy),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArrayRef {
    /// Shared: loop IR clones array references at every load it copies.
    pub tensor: Arc<str>,
    pub slot: Slot,
}

impl ArrayRef {
    pub fn level(tensor: &str, level: usize, name: &'static str) -> Self {
        ArrayRef {
            tensor: tensor.into(),
            slot: Slot::Level(level, name),
        }
    }
    pub fn vals(tensor: &str) -> Self {
        ArrayRef {
            tensor: tensor.into(),
            slot: Slot::Vals,
        }
    }
    pub fn elem(&self) -> ElemTy {
        match &self.slot {
            Slot::Level(..) => ElemTy::I32,
            Slot::Vals => ElemTy::F64,
            Slot::Scratch(_, ty) => *ty,
        }
    }
    /// The name used in emitted C, in taco's style (`A2_crd`, `A_vals`).
    pub fn c_name(&self) -> String {
        match &self.slot {
            Slot::Level(k, name) => format!("{}{}_{}", self.tensor, k + 1, name),
            Slot::Vals => format!("{}_vals", self.tensor),
            Slot::Scratch(name, _) => format!("{}_{}", self.tensor, name),
        }
    }
}

/// Stored coordinates a loop reads by position: those at every `stride`-th
/// element of `array` from `field`, the coordinate of position `p` at
/// `array[p * stride + field]`. A level's own coordinate array has stride
/// 1; the records of an interleaved (AoS) one hold each level's in a field.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Coordinates {
    pub array: ArrayRef,
    pub stride: i64,
    pub field: i64,
}

impl Coordinates {
    /// A level's own array of coordinates, one a position.
    pub fn whole(array: ArrayRef) -> Self {
        Coordinates {
            array,
            stride: 1,
            field: 0,
        }
    }

    /// The coordinates `crd` read at `index`, where `index` is a position
    /// of `positions` (`p`), or of the records of an interleaved array
    /// (`p * stride + field`, as `CrdLayout::index` writes it): the
    /// position and the coordinates.
    pub fn of_load(
        crd: &ArrayRef,
        index: &Expr,
        positions: impl Fn(VarId) -> bool,
    ) -> Option<(VarId, Coordinates)> {
        let (p, stride, field) = index.scaled_position(positions)?;
        (stride >= 1 && (0..stride).contains(&field)).then(|| {
            (
                p,
                Coordinates {
                    array: crd.clone(),
                    stride,
                    field,
                },
            )
        })
    }

    /// The index of the coordinate of position `p`.
    pub fn index(&self, p: Expr) -> Expr {
        if self.stride == 1 {
            return p;
        }
        Expr::add(Expr::mul(p, Expr::Int(self.stride)), Expr::Int(self.field))
    }

    /// The C name of a flag about these coordinates (`A2_crd_scattered`,
    /// for an interleaved array's field `A1_crd_1of2_scattered`).
    pub fn c_flag(&self, flag: &str) -> String {
        match self.stride {
            1 => format!("{}_{flag}", self.array.c_name()),
            k => format!("{}_{}of{k}_{flag}", self.array.c_name(), self.field),
        }
    }
}

/// A runtime integer parameter: a level's size parameter or a dimension,
/// or a constant of the machine the code is built for (`ParamRef::target`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ParamSlot {
    Level(usize, &'static str),
    Dim(usize),
    Target(TargetConstant),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamRef {
    pub tensor: Arc<str>,
    pub slot: ParamSlot,
}

impl ParamRef {
    /// A parameter of the call rather than of a tensor (see [`Parallel`]).
    /// Its tensor name is empty, which no tensor's is; it keeps the
    /// `ParamSlot::Level` shape so that code matching on slots needs no
    /// case for it (only the kernel's own callers ever supply it).
    pub fn call(name: &'static str) -> Self {
        ParamRef {
            tensor: "".into(),
            slot: ParamSlot::Level(0, name),
        }
    }
    /// A constant of the machine the code is built for, where measurements
    /// found machines to differ (`ir::target`). No caller supplies it, so
    /// it is no parameter of the kernel (`Function::params`): the C names
    /// a macro its compiler's target defines, and the Cranelift tier never
    /// sees one (its passes write the host's value in).
    pub fn target(constant: TargetConstant) -> Self {
        ParamRef {
            tensor: "".into(),
            slot: ParamSlot::Target(constant),
        }
    }
    /// Whether this is a parameter of the call (`ParamRef::call`).
    pub fn call_name(&self) -> Option<&'static str> {
        match (&self.slot, self.tensor.is_empty()) {
            (ParamSlot::Level(_, name), true) => Some(name),
            _ => None,
        }
    }
    pub fn level(tensor: &str, level: usize, name: &'static str) -> Self {
        ParamRef {
            tensor: tensor.into(),
            slot: ParamSlot::Level(level, name),
        }
    }
    pub fn dim(tensor: &str, d: usize) -> Self {
        ParamRef {
            tensor: tensor.into(),
            slot: ParamSlot::Dim(d),
        }
    }
    pub fn c_name(&self) -> String {
        if let Some(name) = self.call_name() {
            return format!("tensor_{name}");
        }
        match &self.slot {
            ParamSlot::Level(k, name) => format!("{}{}_{}", self.tensor, k + 1, name),
            ParamSlot::Dim(d) => format!("{}{}_dimension", self.tensor, d + 1),
            ParamSlot::Target(t) => t.c_name().to_string(),
        }
    }
}

pub type VarId = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    I64,
    F64,
    Bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Int(i64),
    Float(f64),
    Bool(bool),
    Var(VarId),
    Param(ParamRef),
    /// Load element `index` of an array; I32 arrays are sign-extended to i64.
    Load(ArrayRef, Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// Declare a mutable variable with its initial value.
    Let(VarId, Expr),
    Set(VarId, Expr),
    Store(ArrayRef, Expr, Expr),
    /// `for var in lo..hi` (step 1); `var` is declared by the loop.
    For {
        var: VarId,
        lo: Expr,
        hi: Expr,
        body: Block,
    },
    While {
        cond: Expr,
        body: Block,
    },
    If {
        cond: Expr,
        then: Block,
        els: Block,
    },
    /// Make an output array hold at least `len` elements (grows geometrically;
    /// the only call back into the runtime). `len` also becomes the array's
    /// length (the largest reserved), unless `ahead`: room made before a
    /// loop for the appends it makes at most (`lower::reserve_ahead`),
    /// which then check no capacity; their length is reserved after it.
    Reserve {
        array: ArrayRef,
        len: Expr,
        ahead: bool,
    },
    /// A hint (`ir::prefetch`): for each position `q` of `coords` in
    /// `at..at + positions` (below its length), elements
    /// `coords[q] * stride ..+ len` of `array` are read soon. It changes no
    /// value and never faults.
    Prefetch {
        array: ArrayRef,
        coords: ArrayRef,
        at: Expr,
        positions: i64,
        stride: Expr,
        len: Expr,
    },
    /// A hint (`ir::streams`): elements `at..at + positions` of `array`
    /// are read in order soon, by a loop over positions. It changes no
    /// value and never faults, whatever `at` is (past the array's end for
    /// the last rows).
    PrefetchStream {
        array: ArrayRef,
        at: Expr,
        positions: i64,
        /// Asked only in the copy of the loop that asks for its gathers
        /// (`PrefetchGather`): the C drops it with them where the
        /// coordinates turn out not to be scattered.
        beside_gathers: bool,
    },
    /// A hint (`ir::gathers`): the element of `array` at the coordinate
    /// `coords.array[at]` is read soon, by a loop gathering `array` at
    /// stored coordinates (`at` an index of that array: `q * stride +
    /// field` for the record `q` of interleaved ones); asked only where
    /// `at` is below the array's length. The C asks only where `coords`
    /// turn out scattered at run time. It changes no value and never faults.
    PrefetchGather {
        array: ArrayRef,
        coords: Coordinates,
        at: Expr,
    },
    Comment(String),
    /// A hint: the arm of an `if` that holds it (at its top level) runs
    /// rarely, such as a run's end among long runs (`ir::runs`), so a
    /// backend may lay it out away from the hot path. It changes nothing
    /// else.
    Unlikely,
}

pub type Block = Vec<Stmt>;

#[derive(Clone, Debug, PartialEq)]
pub struct VarInfo {
    pub name: String,
    pub ty: Ty,
}

/// A coordinate array with runs of equal values, and how long they are in
/// the data a kernel was made for.
#[derive(Clone, Debug, PartialEq)]
pub struct Repeats {
    pub array: ArrayRef,
    /// Stored entries per coordinate, on average (a run's length).
    pub per_coordinate: usize,
    /// Stored entries of the tensor the array belongs to.
    pub stored: usize,
    /// The coordinates never decrease from one position to the next, as in
    /// an ordered tensor's first level (one segment, in order).
    pub ascending: bool,
}

/// A whole kernel: its variables and body. Arrays and parameters are found by
/// walking the body.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    pub vars: Vec<VarInfo>,
    pub body: Block,
    /// How the outermost loop may run on several threads (`None`: one call
    /// runs the whole kernel, and the kernel reads no call parameters).
    pub parallel: Option<Parallel>,
    /// Where a shared loop's bounds are computed (set with `parallel`).
    pub shares: Option<ShareBounds>,
    /// Coordinate arrays that hold runs of equal values (a non-unique
    /// level's: COO's rows) in the data the kernel was made for;
    /// `passes::for_codegen` adds the runs that pay in a register
    /// (`ir::runs`).
    pub runs: Vec<Repeats>,
    /// Value arrays of the inputs with their lengths in the data the
    /// kernel was made for (every position of a dense tensor; a sparse
    /// one's stored entries, a lower bound): `passes::for_codegen` asks
    /// for rows ahead through calls only in arrays known to be large
    /// (`prefetch::strip_for_calls`).
    pub lengths: Vec<(ArrayRef, usize)>,
    /// The inputs' stored coordinates (`LevelFormat::stored_coordinates`:
    /// a level's own array, or its field of an interleaved one) sampled in
    /// the data the kernel was made for, each with the share of its
    /// samples on cache lines of their own
    /// (`gathers::field_lines_of_their_own`): low where the coordinates
    /// follow each other and the hardware prefetchers fetch the rows they
    /// choose. The Cranelift tier asks for no row chosen by coordinates
    /// that follow each other (`prefetch::strip_for_calls`), and asks for
    /// the elements gathered at scattered ones (`ir::hints_for_data`).
    /// Coordinates not sampled (short, or no data) are not here.
    pub lines_of_their_own: Vec<(Coordinates, f64)>,
    /// Parameters with the value every call gives them: the dimensions and
    /// level parameters of the data the kernel is compiled for
    /// (`execute::prepare`). The Cranelift tier compiles them in as
    /// constants (`passes::for_codegen`), so that rows of a known length
    /// need no loop for their rest and strides multiply by constants, and
    /// its calls check that they still hold (`jit::call`). The C stays
    /// generic: one build serves every size.
    pub fixed_params: Vec<(ParamRef, i64)>,
    /// Result arrays that may hold at most so many elements, a bound of
    /// their level's storage (`LevelFormat::array_limit`: a compressed
    /// level's `crd`, whose positions `pos` records in 32 bits). Both
    /// tiers' runtimes refuse to grow one past it, where the positions
    /// would wrap; an array not here is bounded by memory alone.
    pub index_limits: Vec<(ArrayRef, u64)>,
}

/// The variables holding the bounds `[begin, end)` of a call's share of
/// the outermost loop. Each is declared with the whole loop's bound, and
/// the statement right after `end`'s declaration (the share search) sets
/// both for thread `thread` of `threads`; nothing else assigns them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareBounds {
    pub begin: VarId,
    pub end: VarId,
}

/// The call parameters of a kernel whose outermost loop runs in shares:
/// `thread` of `threads` (0 of 1 is the whole loop), each call computing
/// its share's bounds itself (`lower::parallel`).
pub const CALL_THREAD: &str = "thread";
pub const CALL_THREADS: &str = "threads";
/// What a call of a `Parallel::Rows` kernel runs: 0 everything, 1 only the
/// statements before the loop (allocation, zero fill), 2 only its share of
/// the loop (after a phase-1 call sized the result).
pub const CALL_PHASE: &str = "phase";
/// A share's bounds computed by the caller (`jit::shares`): kernels read
/// them only where the share search was taken out of the compiled code.
pub const CALL_SHARE_BEGIN: &str = "share_begin";
pub const CALL_SHARE_END: &str = "share_end";

/// How a kernel's outermost loop is shared among threads. Either way every
/// thread only reads the inputs; what differs is where results go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parallel {
    /// Iterations write disjoint positions of a dense result (each binds a
    /// different coordinate of one of the result's variables): the threads
    /// share one result, set up once by a phase-1 call.
    Rows,
    /// Iterations may add into the same positions (a reduction, scalar or
    /// dense): each thread runs the whole kernel into a result of its own,
    /// and the results are summed in thread order afterwards.
    Partials,
    /// The result is sparse, its first level dense over the loop's
    /// variable and its second appended (CSR): each thread runs the whole
    /// kernel over its share of the rows into an empty result of its own,
    /// and the results are stitched in share order afterwards (the
    /// appended level's `Append::stitch_shares`).
    Stitch,
}

impl Parallel {
    pub fn name(self) -> &'static str {
        match self {
            Parallel::Rows => "rows",
            Parallel::Partials => "partials",
            Parallel::Stitch => "stitch",
        }
    }
}

impl Expr {
    pub fn ty(&self, vars: &[VarInfo]) -> Ty {
        match self {
            Expr::Int(_) | Expr::Param(_) => Ty::I64,
            Expr::Float(_) => Ty::F64,
            Expr::Bool(_) | Expr::Cmp(..) | Expr::Not(_) => Ty::Bool,
            Expr::Var(v) => vars[*v as usize].ty,
            Expr::Load(a, _) => match a.elem() {
                ElemTy::I32 => Ty::I64,
                ElemTy::F64 => Ty::F64,
            },
            Expr::Bin(op, a, _) => match op {
                BinOp::And | BinOp::Or => Ty::Bool,
                _ => a.ty(vars),
            },
            Expr::Neg(a) => a.ty(vars),
            Expr::Select(_, a, _) => a.ty(vars),
        }
    }

    /// Whether evaluating it loads from an array (so `&&` must short-circuit,
    /// and a C select must not hide the load behind a branch).
    pub fn reads_memory(&self) -> bool {
        let mut found = false;
        self.walk(&mut |x| found |= matches!(x, Expr::Load(..)));
        found
    }

    /// Rewrite every sub-expression in place, children first.
    pub fn rewrite(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        match self {
            Expr::Load(_, i) | Expr::Not(i) | Expr::Neg(i) => i.rewrite(f),
            Expr::Bin(_, a, b) | Expr::Cmp(_, a, b) => {
                a.rewrite(f);
                b.rewrite(f);
            }
            Expr::Select(c, a, b) => {
                c.rewrite(f);
                a.rewrite(f);
                b.rewrite(f);
            }
            _ => {}
        }
        f(self);
    }

    /// Visit every sub-expression (pre-order).
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Load(_, i) | Expr::Not(i) | Expr::Neg(i) => i.walk(f),
            Expr::Bin(_, a, b) | Expr::Cmp(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::Select(c, a, b) => {
                c.walk(f);
                a.walk(f);
                b.walk(f);
            }
            _ => {}
        }
    }

    /// Whether the expression reads variable `v`.
    pub fn uses(&self, v: VarId) -> bool {
        let mut found = false;
        self.walk(&mut |x| found |= *x == Expr::Var(v));
        found
    }

    /// The variables the expression reads.
    pub fn vars(&self) -> std::collections::BTreeSet<VarId> {
        let mut out = std::collections::BTreeSet::new();
        self.walk(&mut |x| {
            if let Expr::Var(v) = x {
                out.insert(*v);
            }
        });
        out
    }
}

/// Visit every statement of a block, recursively (pre-order), with the
/// expressions it holds.
pub fn walk_block<'a>(block: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for s in block {
        f(s);
        match s {
            Stmt::For { body, .. } | Stmt::While { body, .. } => walk_block(body, f),
            Stmt::If { then, els, .. } => {
                walk_block(then, f);
                walk_block(els, f);
            }
            _ => {}
        }
    }
}

/// The blocks a statement holds (a loop's body, an `if`'s two arms).
pub fn nested_blocks_mut(s: &mut Stmt) -> Few<&mut Block> {
    match s {
        Stmt::For { body, .. } | Stmt::While { body, .. } => Few::one(body),
        Stmt::If { then, els, .. } => Few::two(then, els),
        _ => Few::none(),
    }
}

/// Rewrite every expression of a block, recursively.
pub fn rewrite_block(block: &mut Block, f: &mut dyn FnMut(&mut Expr)) {
    for s in block {
        for e in stmt_exprs_mut(s) {
            e.rewrite(f);
        }
        for inner in nested_blocks_mut(s) {
            rewrite_block(inner, f);
        }
    }
}

/// Fold `e` where its own operands are constants (integers or booleans;
/// its children are not looked into: a rewrite visits them first), with
/// the 64-bit wrapping arithmetic the backends give them.
pub(super) fn fold_constant_operands(e: &mut Expr) {
    let folded = match e {
        Expr::Bin(op, a, b) if is_constant(a) && is_constant(b) => {
            Some(Expr::bin(*op, (**a).clone(), (**b).clone()))
        }
        Expr::Cmp(op, a, b) if is_constant(a) && is_constant(b) => {
            Some(Expr::cmp(*op, (**a).clone(), (**b).clone()))
        }
        Expr::Not(a) if is_constant(a) => Some(Expr::not((**a).clone())),
        Expr::Select(c, a, b) => match **c {
            Expr::Bool(true) => Some((**a).clone()),
            Expr::Bool(false) => Some((**b).clone()),
            _ => None,
        },
        _ => None,
    };
    if let Some(x) = folded {
        *e = x;
    }
}

/// Whether `e` is an integer or boolean constant.
pub(super) fn is_constant(e: &Expr) -> bool {
    matches!(e, Expr::Int(_) | Expr::Bool(_))
}

/// `stmt_exprs`, to change them.
pub(super) fn stmt_exprs_mut(s: &mut Stmt) -> Few<&mut Expr> {
    match s {
        Stmt::Let(_, e) | Stmt::Set(_, e) => Few::one(e),
        Stmt::Store(_, i, v) => Few::two(i, v),
        Stmt::For { lo, hi, .. } => Few::two(lo, hi),
        Stmt::While { cond, .. } | Stmt::If { cond, .. } => Few::one(cond),
        Stmt::Reserve { len, .. } => Few::one(len),
        Stmt::Prefetch {
            at, stride, len, ..
        } => Few::three(at, stride, len),
        Stmt::PrefetchStream { at, .. } | Stmt::PrefetchGather { at, .. } => Few::one(at),
        Stmt::Comment(_) | Stmt::Unlikely => Few::none(),
    }
}

/// Up to three items kept in place: what a statement holds directly
/// (`stmt_exprs`, `nested_blocks_mut`). Every pass asks for them at every
/// statement it walks, so they come without a heap allocation.
pub struct Few<T> {
    items: [Option<T>; 3],
}

impl<T> Few<T> {
    fn none() -> Self {
        Few {
            items: [None, None, None],
        }
    }
    fn one(a: T) -> Self {
        Few {
            items: [Some(a), None, None],
        }
    }
    fn two(a: T, b: T) -> Self {
        Few {
            items: [Some(a), Some(b), None],
        }
    }
    fn three(a: T, b: T, c: T) -> Self {
        Few {
            items: [Some(a), Some(b), Some(c)],
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter().flatten()
    }
}

impl<T> IntoIterator for Few<T> {
    type Item = T;
    type IntoIter = std::iter::Flatten<std::array::IntoIter<Option<T>, 3>>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter().flatten()
    }
}

/// Every expression held directly by a statement.
pub fn stmt_exprs(s: &Stmt) -> Few<&Expr> {
    match s {
        Stmt::Let(_, e) | Stmt::Set(_, e) => Few::one(e),
        Stmt::Store(_, i, v) => Few::two(i, v),
        Stmt::For { lo, hi, .. } => Few::two(lo, hi),
        Stmt::While { cond, .. } | Stmt::If { cond, .. } => Few::one(cond),
        Stmt::Reserve { len, .. } => Few::one(len),
        Stmt::Prefetch {
            at, stride, len, ..
        } => Few::three(at, stride, len),
        Stmt::PrefetchStream { at, .. } | Stmt::PrefetchGather { at, .. } => Few::one(at),
        Stmt::Comment(_) | Stmt::Unlikely => Few::none(),
    }
}

/// The array and range loop `s` zeroes, where that is all it does:
/// `for q in lo..hi { a[q] = 0.0 }` (a result's zero fill).
pub fn zero_fill(s: &Stmt) -> Option<(&ArrayRef, &Expr, &Expr)> {
    let Stmt::For { var, lo, hi, body } = s else {
        return None;
    };
    match body.as_slice() {
        [Stmt::Store(a, at, Expr::Float(z))] if *at == Expr::Var(*var) && *z == 0.0 => {
            Some((a, lo, hi))
        }
        _ => None,
    }
}

/// The arrays `b` loads from, at any depth.
pub fn loaded_arrays(b: &[Stmt]) -> std::collections::BTreeSet<ArrayRef> {
    let mut out = std::collections::BTreeSet::new();
    walk_block(b, &mut |s| {
        for e in stmt_exprs(s) {
            e.walk(&mut |x| {
                if let Expr::Load(a, _) = x {
                    out.insert(a.clone());
                }
            });
        }
    });
    out
}

/// The assignments in `b` to variables it does not declare itself (the
/// state it carries out, or across iterations of a loop), in order.
pub fn sets_outside(b: &[Stmt]) -> Vec<(VarId, Expr)> {
    let mut sets = Vec::new();
    walk_block(b, &mut |x| {
        if let Stmt::Set(v, e) = x {
            sets.push((*v, e.clone()));
        }
    });
    let declared = declared(b);
    sets.retain(|(v, _)| !declared.contains(v));
    sets
}

/// The variables `b` declares, at any depth: its `let`s and loop variables.
pub fn declared(b: &[Stmt]) -> std::collections::BTreeSet<VarId> {
    let mut out = std::collections::BTreeSet::new();
    walk_block(b, &mut |s| {
        if let Stmt::Let(v, _) | Stmt::For { var: v, .. } = s {
            out.insert(*v);
        }
    });
    out
}

/// Whether `b` holds a loop, at any depth.
pub fn has_loops(b: &[Stmt]) -> bool {
    let mut found = false;
    walk_block(b, &mut |s| {
        found |= matches!(s, Stmt::For { .. } | Stmt::While { .. })
    });
    found
}

/// Whether `s` (or a statement inside it) reads `v`.
pub fn reads(s: &Stmt, v: VarId) -> bool {
    let mut found = false;
    walk_block(std::slice::from_ref(s), &mut |s| {
        found |= stmt_exprs(s).into_iter().any(|e| e.uses(v));
    });
    found
}

/// Whether `s` (or a statement inside it) gives `v` a value.
pub fn assigns(s: &Stmt, v: VarId) -> bool {
    let mut found = false;
    walk_block(
        std::slice::from_ref(s),
        &mut |s| {
            found |=
                matches!(s, Stmt::Let(w, _) | Stmt::Set(w, _) | Stmt::For { var: w, .. } if *w == v)
        },
    );
    found
}

/// A new variable of `ty` in `vars`, named `name` (with `_` appended
/// until no other variable has it), for passes that rewrite a function.
pub fn fresh_var(vars: &mut Vec<VarInfo>, name: &str, ty: Ty) -> VarId {
    let mut name = name.to_string();
    while vars.iter().any(|v| v.name == name) {
        name.push('_');
    }
    vars.push(VarInfo { name, ty });
    (vars.len() - 1) as VarId
}

impl Function {
    /// Value arrays the function grows and never loads from: results it
    /// stores each value of at most once (`lower::State::once`). Their
    /// zero fills may stream past the caches where the array is large
    /// (the C's `tensor_zero_f64`): a cached store first reads its line,
    /// and nothing reads it back.
    pub fn never_read_results(&self) -> std::collections::BTreeSet<ArrayRef> {
        let loaded = loaded_arrays(&self.body);
        let mut out = std::collections::BTreeSet::new();
        walk_block(&self.body, &mut |s| {
            if let Stmt::Reserve { array, .. } = s {
                if array.elem() == ElemTy::F64 && !loaded.contains(array) {
                    out.insert(array.clone());
                }
            }
        });
        out
    }

    /// The arrays the function writes (stores to or grows).
    pub fn written_arrays(&self) -> std::collections::BTreeSet<ArrayRef> {
        // Only statements write: no expression need be walked.
        let mut out = std::collections::BTreeSet::new();
        walk_block(&self.body, &mut |s| {
            if let Stmt::Store(a, ..) | Stmt::Reserve { array: a, .. } = s {
                out.insert(a.clone());
            }
        });
        out
    }

    /// Make the data facts say the kernel is made for large data: 16M
    /// values in every array of values it only reads (`lengths`), and
    /// every index array it only reads sampled as scattered
    /// (`lines_of_their_own`). What the Cranelift tier does only on large
    /// data (rows summed in strips, asks by calls) then runs on any data:
    /// for tests, sweeps and compile-time measurements.
    pub fn make_as_if_large(&mut self) {
        let read: Vec<ArrayRef> = self
            .arrays()
            .into_iter()
            .filter(|(_, written)| !written)
            .map(|(a, _)| a)
            .collect();
        self.lengths = read
            .iter()
            .filter(|a| a.slot == Slot::Vals)
            .map(|a| (a.clone(), 1 << 24))
            .collect();
        let mut sampled: std::collections::BTreeSet<Coordinates> = read
            .into_iter()
            .filter(|a| matches!(a.slot, Slot::Level(..)))
            .map(Coordinates::whole)
            .collect();
        // The fields of interleaved records the function reads, as an
        // AoS level's coordinates are sampled.
        walk_block(&self.body, &mut |s| {
            for e in stmt_exprs(s) {
                e.walk(&mut |x| {
                    if let Expr::Load(a, i) = x {
                        let whole = Coordinates::whole(a.clone());
                        if let Some((_, c)) = Coordinates::of_load(a, i, |_| true) {
                            if c.stride > 1 && sampled.contains(&whole) {
                                sampled.insert(c);
                            }
                        }
                    }
                });
            }
        });
        self.lines_of_their_own = sampled.into_iter().map(|c| (c, 1.0)).collect();
    }

    /// Arrays the function touches, sorted, with whether it writes them.
    pub fn arrays(&self) -> Vec<(ArrayRef, bool)> {
        // A list, searched: a kernel touches a dozen arrays or so, and
        // every compile asks (a map's nodes and name comparisons cost more).
        let mut out: Vec<(ArrayRef, bool)> = Vec::new();
        let mut note = |a: &ArrayRef, writes: bool| match out.iter_mut().find(|(b, _)| b == a) {
            Some((_, w)) => *w |= writes,
            None => out.push((a.clone(), writes)),
        };
        walk_block(&self.body, &mut |s| {
            match s {
                Stmt::Store(a, ..) | Stmt::Reserve { array: a, .. } => note(a, true),
                Stmt::Prefetch { array, coords, .. } => {
                    note(array, false);
                    note(coords, false);
                }
                Stmt::PrefetchStream { array, .. } => note(array, false),
                Stmt::PrefetchGather { array, coords, .. } => {
                    note(array, false);
                    note(&coords.array, false);
                }
                _ => {}
            }
            for e in stmt_exprs(s) {
                e.walk(&mut |x| {
                    if let Expr::Load(a, _) = x {
                        note(a, false);
                    }
                });
            }
        });
        out.sort_by(|x, y| x.0.cmp(&y.0));
        out
    }

    /// Arrays that appends grow: those first reserved inside a loop, whose
    /// final length the kernel learns only as it goes. An array first
    /// reserved before the loops has a length known up front (a compressed
    /// level's `pos`, a dense level's values), even where the loops reserve
    /// it again as they fill it. The runtime gives only the former a first
    /// room ahead of their appends (`jit::call`).
    pub fn grown_by_appends(&self) -> std::collections::BTreeSet<ArrayRef> {
        type FirstReserves = std::collections::BTreeMap<ArrayRef, bool>;
        fn visit(block: &[Stmt], in_loop: bool, first: &mut FirstReserves) {
            for s in block {
                match s {
                    Stmt::Reserve { array, .. } => {
                        first.entry(array.clone()).or_insert(in_loop);
                    }
                    Stmt::For { body, .. } | Stmt::While { body, .. } => visit(body, true, first),
                    Stmt::If { then, els, .. } => {
                        visit(then, in_loop, first);
                        visit(els, in_loop, first);
                    }
                    _ => {}
                }
            }
        }
        let mut first = FirstReserves::new();
        visit(&self.body, false, &mut first);
        first
            .into_iter()
            .filter(|(_, in_loop)| *in_loop)
            .map(|(a, _)| a)
            .collect()
    }

    /// Parameters the function reads, sorted: what its callers supply,
    /// so no constant of the target (`ParamRef::target`).
    pub fn params(&self) -> Vec<ParamRef> {
        let mut out: std::collections::BTreeSet<ParamRef> = Default::default();
        walk_block(&self.body, &mut |s| {
            for e in stmt_exprs(s) {
                e.walk(&mut |x| match x {
                    Expr::Param(p) if !matches!(p.slot, ParamSlot::Target(_)) => {
                        out.insert(p.clone());
                    }
                    _ => {}
                });
            }
        });
        out.into_iter().collect()
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print::function(self))
    }
}
