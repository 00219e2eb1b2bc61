//! Loop IR to Cranelift IR. One translator, `Variable`s for the IR's
//! variables; array base pointers and parameters are loads Cranelift may
//! place and merge itself (see `Base` and `Regions`).
//! Blocks are sealed as soon as their predecessors are known, so SSA
//! construction never guesses.

use super::helper_calls::Helpers;
use super::vector::Sums;
use crate::ir::{ArrayRef, BinOp, CmpOp, ElemTy, Expr, Function, ParamRef, Stmt, Ty, VarInfo};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AliasRegion, AliasRegionData, Block, Endianness, FuncRef, InstBuilder, MemFlagsData,
    Type, Value,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use std::collections::{BTreeMap, BTreeSet};

// Layout of the argument block and of one array slot, taken from the
// `#[repr(C)]` structures in `call.rs` with `offset_of!` at compile time.
use super::call::{ARGS_ARRAYS, ARGS_PARAMS, SLOT_PTR, SLOT_SIZE};

/// Where an array's base pointer lives: the offset of its slot in the
/// array table, loaded in the preheader of each loop that accesses the
/// array (`Translator::load_bases`) or where used outside loops. `Grown`:
/// the kernel grows the array, so a call may move it.
///
/// Why not a variable for grown pointers: a variable redefined by every
/// append's (cold) growth path becomes a block parameter at every merge of
/// every branch and loop below it, work for the register allocator (the
/// bulk of the compile time of sparse-output kernels) and values to keep
/// live for little use. Loads tagged with their own alias region are merged
/// by Cranelift's alias analysis up to the next call instead.
#[derive(Clone, Copy)]
pub(super) enum Base {
    Fixed(i32),
    Grown(i32),
}

/// Disjoint kinds of memory the kernel writes, for Cranelift's alias
/// analysis: a store to one never changes a load of another. Only calls
/// (growing an array) change the slots.
pub(super) struct Regions {
    /// Elements of the arrays the kernel writes.
    elems: AliasRegion,
    /// Base pointers in the slots of grown arrays.
    ptrs: AliasRegion,
    /// Lengths and capacities in the slots of grown arrays.
    pub(super) sizes: AliasRegion,
    /// Base pointers of the arrays the kernel does not grow (never stored).
    fixed: AliasRegion,
}

impl Regions {
    fn new(dfg: &mut cranelift_codegen::ir::DataFlowGraph) -> Self {
        let mut region = |user_id, description: &'static str| {
            dfg.alias_regions.insert(AliasRegionData {
                user_id,
                description: description.into(),
            })
        };
        Regions {
            elems: region(1, "output elements"),
            ptrs: region(2, "grown pointers"),
            sizes: region(3, "grown sizes"),
            fixed: region(4, "fixed pointers"),
        }
    }
}

pub(super) struct ArrayVars {
    pub(super) slot: i64,
    pub(super) base: Base,
    /// Whether the kernel writes it (loads of inputs are read-only).
    writes: bool,
}

pub struct Translator<'a, 'b> {
    pub(super) b: &'a mut FunctionBuilder<'b>,
    vars: Vec<Variable>,
    /// The IR's variable declarations (types, for the vector loop's plan).
    var_info: Vec<VarInfo>,
    arrays: BTreeMap<ArrayRef, ArrayVars>,
    params: BTreeMap<ParamRef, Value>,
    ptr_ty: Type,
    pub(super) args: Value,
    /// `grow(args, slots, want)`, the `preserve_all` trampoline
    /// (`jit::GROW`), imported by kernels that grow arrays.
    pub(super) grow: Option<FuncRef>,
    /// `prefetch(table, slots, at, positions, stride, len)`, a function
    /// that changes no register (`jit::PREFETCH`), imported by kernels
    /// that prefetch.
    pub(super) prefetch: Option<FuncRef>,
    /// `zero(p, n, len)` (`jit::ZERO`), imported by kernels with zero
    /// fills of results they never read back, and those results.
    pub(super) zero: Option<(FuncRef, std::collections::BTreeSet<ArrayRef>)>,
    pub(super) fail: Block,
    pub(super) regions: Regions,
    /// Loads of input arrays hoisted out of the loops being translated,
    /// innermost last (Cranelift does not move loads out of loops itself).
    hoisted: Vec<(Expr, Value)>,
    /// Base pointers loaded in the preheaders of the loops being
    /// translated, innermost last: those of the arrays a loop's own
    /// statements access (its nested loops load their own), and those of
    /// grown arrays a loop that cannot grow them (no `reserve` inside)
    /// accesses anywhere, which every access would reload otherwise.
    loaded_bases: Vec<(ArrayRef, Value)>,
    /// Variables held two to a vector (`jit::pairs`).
    pub(super) pairs: super::pairs::Pairs,
    /// The array table as last loaded, and in which block.
    table_in: Option<(Block, Value)>,
    /// How many prefetch hints it has emitted (`jit::prefetch`).
    pub(super) hints: u32,
    /// The variables defined once (`defined_once`), and of those, the
    /// values of the ones whose `let` is in scope (each still defines its
    /// `Variable` too, for the readers that ask the SSA builder).
    once: Vec<bool>,
    lets: Vec<Option<Value>>,
    /// The variables of `lets` with a value, in the order their `let`s
    /// were translated (`Translator::scope`, `close_scope`).
    in_scope: Vec<crate::ir::VarId>,
}

pub(super) fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// Loads of what no call changes while the kernel runs (the array table,
/// the base pointers of arrays it does not grow, parameters): pure to
/// Cranelift, which places each where it is first needed (hoisted out of
/// loops) instead of keeping every one live from the entry, through calls,
/// in a stack slot reloaded inside loops.
pub(super) fn pure() -> MemFlagsData {
    MemFlagsData::trusted().with_readonly().with_can_move()
}

fn cl_ty(t: Ty) -> Type {
    match t {
        Ty::I64 => types::I64,
        Ty::F64 => types::F64,
        Ty::Bool => types::I8,
    }
}

/// The variables of `f` defined by one `let` and never set or made a
/// loop's index. While its `let` is in scope such a variable is the value
/// the `let` computed, which dominates every use there: a use reads it
/// directly instead of asking the SSA builder, which, where the use sits
/// in a loop nest whose headers are not yet sealed, makes a block
/// parameter at each header (cycles of them through nested loops survive
/// sealing, and at `opt_level=none` reach the register allocator).
fn defined_once(f: &Function) -> Vec<bool> {
    let mut lets = vec![0u32; f.vars.len()];
    let mut other = vec![false; f.vars.len()];
    crate::ir::walk_block(&f.body, &mut |s| match s {
        Stmt::Let(v, _) => {
            if let Some(n) = lets.get_mut(*v as usize) {
                *n += 1;
            }
        }
        Stmt::Set(v, _) | Stmt::For { var: v, .. } => {
            if let Some(o) = other.get_mut(*v as usize) {
                *o = true;
            }
        }
        _ => {}
    });
    lets.iter()
        .zip(&other)
        .map(|(&n, &o)| n == 1 && !o)
        .collect()
}

/// The longest constant trip count a loop is unrolled at.
const UNROLL_TRIPS: i64 = 4;

/// For a loop from `lo` to `hi` the translator unrolls: its constant
/// bounds, and the bound it is clipped to (`hi` is `min(h, clip)`), if any.
pub(super) fn unrolled<'e>(lo: &Expr, hi: &'e Expr) -> Option<(i64, i64, Option<&'e Expr>)> {
    let (lo, (hi, clip)) = match (lo, hi) {
        (Expr::Int(lo), Expr::Int(hi)) => (*lo, (*hi, None)),
        (Expr::Int(lo), Expr::Bin(BinOp::Min, a, b)) => match (&**a, &**b) {
            (Expr::Int(h), clip) | (clip, Expr::Int(h)) => (*lo, (*h, Some(clip))),
            _ => return None,
        },
        _ => return None,
    };
    (1..=UNROLL_TRIPS)
        .contains(&(hi - lo))
        .then_some((lo, hi, clip))
}

/// Every load in `e` that evaluating `e` always performs (not those on the
/// right of a short-circuit operator), outermost first.
fn collect_loads(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    match e {
        Expr::Load(_, i) => {
            f(e);
            collect_loads(i, f);
        }
        Expr::Bin(BinOp::And | BinOp::Or, a, b) if b.reads_memory() => collect_loads(a, f),
        Expr::Bin(_, a, b) | Expr::Cmp(_, a, b) => {
            collect_loads(a, f);
            collect_loads(b, f);
        }
        Expr::Not(a) | Expr::Neg(a) => collect_loads(a, f),
        Expr::Select(c, a, b) => {
            collect_loads(c, f);
            collect_loads(a, f);
            collect_loads(b, f);
        }
        _ => {}
    }
}

impl<'a, 'b> Translator<'a, 'b> {
    /// Emit the whole function body into `b`, whose entry block takes the
    /// argument-block pointer; the number of prefetch hints it holds
    /// (`jit::prefetch`). Returns an error for IR the JIT cannot run.
    pub fn translate(
        b: &'a mut FunctionBuilder<'b>,
        f: &Function,
        ptr_ty: Type,
        slots: &[(ArrayRef, bool)],
        params: &[ParamRef],
        Helpers {
            grow,
            prefetch,
            zero,
        }: Helpers,
    ) -> Result<u32, String> {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let args = b.block_params(entry)[0];
        let fail = b.create_block();
        let regions = Regions::new(&mut b.func.dfg);
        let mut t = Translator {
            vars: Vec::new(),
            var_info: f.vars.clone(),
            loaded_bases: Vec::new(),
            arrays: BTreeMap::new(),
            params: BTreeMap::new(),
            ptr_ty,
            args,
            grow,
            prefetch,
            zero,
            fail,
            regions,
            hoisted: Vec::new(),
            pairs: super::pairs::find(&f.body),
            table_in: None,
            hints: 0,
            once: defined_once(f),
            lets: vec![None; f.vars.len()],
            in_scope: Vec::new(),
            b,
        };
        for (id, v) in f.vars.iter().enumerate() {
            let ty = if t.pairs.is_first(id as crate::ir::VarId) {
                types::F64X2
            } else {
                cl_ty(v.ty)
            };
            let var = t.b.declare_var(ty);
            t.vars.push(var);
        }
        // Pointers and parameters are loaded once, as plain values: only the
        // pointers of arrays the kernel grows are variables. Lengths and
        // capacities of grown arrays stay in the argument block (touched
        // once per append, they are not worth a register each).
        let mut grown = BTreeSet::new();
        crate::ir::walk_block(&f.body, &mut |s| {
            if let Stmt::Reserve { array, .. } = s {
                grown.insert(array.clone());
            }
        });
        for (slot, (a, writes)) in slots.iter().enumerate() {
            let off = slot as i32 * SLOT_SIZE as i32 + SLOT_PTR;
            let base = if grown.contains(a) {
                Base::Grown(off)
            } else {
                Base::Fixed(off)
            };
            t.arrays.insert(
                a.clone(),
                ArrayVars {
                    slot: slot as i64,
                    base,
                    writes: *writes,
                },
            );
        }
        let ptable = t.b.ins().load(ptr_ty, pure(), args, ARGS_PARAMS);
        for (j, p) in params.iter().enumerate() {
            let v = t.b.ins().load(types::I64, pure(), ptable, (j * 8) as i32);
            t.params.insert(p.clone(), v);
        }
        t.block(&f.body)?;
        let zero = t.b.ins().iconst(types::I64, 0);
        t.b.ins().return_(&[zero]);
        t.b.switch_to_block(fail);
        let one = t.b.ins().iconst(types::I64, 1);
        t.b.ins().return_(&[one]);
        t.b.seal_all_blocks();
        Ok(t.hints)
    }

    pub(super) fn array(&self, a: &ArrayRef) -> Result<&ArrayVars, String> {
        self.arrays
            .get(a)
            .ok_or_else(|| format!("array {} not bound", a.c_name()))
    }

    /// The Cranelift variable of IR variable `v`.
    pub(super) fn var(&self, v: crate::ir::VarId) -> Result<Variable, String> {
        self.vars
            .get(v as usize)
            .copied()
            .ok_or_else(|| "unknown variable".into())
    }

    pub(super) fn writes(&self, a: &ArrayRef) -> Result<bool, String> {
        Ok(self.array(a)?.writes)
    }

    pub(super) fn address(&mut self, a: &ArrayRef, index: &Expr) -> Result<Value, String> {
        let i = self.expr(index)?;
        let base = self.base(a)?;
        Ok(self.element(base, a, i))
    }

    /// The address of element `index` of `a` as a pointer and a constant
    /// byte offset: `x + c` as `x`'s address and `c` elements, a constant
    /// `c` as the base and `c` elements. Each access is then one x64
    /// addressing mode without the constant's instructions (a strip reads
    /// `row + strip + 1` to `row + strip + 15`), and Cranelift has fewer
    /// instructions to fold away: its compile time grows with them.
    pub(super) fn address_at(
        &mut self,
        a: &ArrayRef,
        index: &Expr,
    ) -> Result<(Value, i32), String> {
        let size = a.elem().bytes() as i64;
        let bytes = |c: i64| i32::try_from(c.checked_mul(size)?).ok();
        match index {
            Expr::Int(c) => {
                if let Some(offset) = bytes(*c) {
                    return Ok((self.base(a)?, offset));
                }
            }
            Expr::Bin(BinOp::Add, x, c) => {
                if let Some(offset) = c.as_int().and_then(bytes) {
                    return Ok((self.address(a, x)?, offset));
                }
            }
            _ => {}
        }
        Ok((self.address(a, index)?, 0))
    }

    /// The address of element `i` of `a` from `base`, an address in `a`.
    pub(super) fn element(&mut self, base: Value, a: &ArrayRef, i: Value) -> Value {
        let shift = match a.elem() {
            ElemTy::I32 => 2,
            ElemTy::F64 => 3,
        };
        // A constant element (a loop's first, `pos[0]`) is an offset.
        if let Some(c) = self.constant(i) {
            return match c << shift {
                0 => base,
                off => self.b.ins().iadd_imm_s(base, off),
            };
        }
        let off = self.b.ins().ishl_imm_u(i, shift);
        self.b.ins().iadd(base, off)
    }

    /// The integer `v` is, if an `iconst` defines it.
    fn constant(&self, v: Value) -> Option<i64> {
        let dfg = &self.b.func.dfg;
        let inst = dfg.value_def(v).inst()?;
        match dfg.insts[inst] {
            cranelift_codegen::ir::InstructionData::UnaryImm {
                opcode: cranelift_codegen::ir::Opcode::Iconst,
                imm,
            } => Some(imm.bits()),
            _ => None,
        }
    }

    /// The base pointer of `a`.
    pub(super) fn base(&mut self, a: &ArrayRef) -> Result<Value, String> {
        if let Some((_, v)) = self.loaded_bases.iter().rev().find(|(g, _)| g == a) {
            return Ok(*v);
        }
        let base = self.array(a)?.base;
        Ok(self.load_base(base))
    }

    /// The array table of the argument block.
    pub(super) fn table(&mut self) -> Value {
        let here = self.b.current_block();
        match self.table_in {
            Some((block, v)) if Some(block) == here => v,
            _ => {
                let v = self
                    .b
                    .ins()
                    .load(self.ptr_ty, pure(), self.args, ARGS_ARRAYS);
                self.table_in = here.map(|block| (block, v));
                v
            }
        }
    }

    /// Load a base pointer from its slot, in its own alias region. Not
    /// `pure`: Cranelift would hoist it to the entry and keep it live
    /// through every loop (register allocation, the bulk of a compile,
    /// works on fewer long live ranges); a grown array's pointer also
    /// changes with each call that grows it.
    fn load_base(&mut self, base: Base) -> Value {
        let (off, region) = match base {
            Base::Fixed(off) => (off, self.regions.fixed),
            Base::Grown(off) => (off, self.regions.ptrs),
        };
        let table = self.table();
        self.b.ins().load(
            self.ptr_ty,
            flags().with_alias_region(Some(region)),
            table,
            off,
        )
    }

    fn elems(&self) -> MemFlagsData {
        self.elems_with(flags())
    }

    /// `base` for elements of the arrays the kernel writes.
    pub(super) fn elems_with(&self, base: MemFlagsData) -> MemFlagsData {
        base.with_alias_region(Some(self.regions.elems))
    }

    /// `x op y`: a float compare on `f64`s, else a signed integer one.
    fn compare(&mut self, op: CmpOp, x: Value, y: Value) -> Value {
        if self.value_ty(x) == types::F64 {
            return self.b.ins().fcmp(float_cc(op), x, y);
        }
        let cc = match op {
            CmpOp::Eq => IntCC::Equal,
            CmpOp::Ne => IntCC::NotEqual,
            CmpOp::Lt => IntCC::SignedLessThan,
            CmpOp::Le => IntCC::SignedLessThanOrEqual,
            CmpOp::Gt => IntCC::SignedGreaterThan,
            CmpOp::Ge => IntCC::SignedGreaterThanOrEqual,
        };
        self.b.ins().icmp(cc, x, y)
    }

    fn value_ty(&self, v: Value) -> Type {
        self.b.func.dfg.value_type(v)
    }

    pub(super) fn expr(&mut self, e: &Expr) -> Result<Value, String> {
        Ok(match e {
            Expr::Int(v) => self.b.ins().iconst(types::I64, *v),
            Expr::Float(v) => self.b.ins().f64const(*v),
            Expr::Bool(v) => self.b.ins().iconst(types::I8, *v as i64),
            Expr::Var(v) => match self.lets.get(*v as usize).copied().flatten() {
                Some(x) => x,
                None => {
                    let var = *self.vars.get(*v as usize).ok_or("unknown variable")?;
                    self.b.use_var(var)
                }
            },
            Expr::Param(p) => *self
                .params
                .get(p)
                .ok_or_else(|| format!("parameter {} not bound", p.c_name()))?,
            Expr::Load(..) if self.hoisted.iter().any(|(h, _)| h == e) => self
                .hoisted
                .iter()
                .rev()
                .find(|(h, _)| h == e)
                .map(|(_, v)| *v)
                .ok_or("hoisted load")?,
            Expr::Load(a, i) => {
                let (addr, offset) = self.address_at(a, i)?;
                // Inputs are never written while a kernel runs: readonly
                // lets Cranelift merge repeated loads of the same element.
                let f = if self.array(a)?.writes {
                    self.elems()
                } else {
                    flags().with_readonly()
                };
                match a.elem() {
                    // One sign-extending load (`movslq` from memory): a
                    // load and a `sextend` apart stay two instructions
                    // where Cranelift does not sink the load into it.
                    ElemTy::I32 => self.b.ins().sload32(f, addr, offset),
                    ElemTy::F64 => self.b.ins().load(types::F64, f, addr, offset),
                }
            }
            Expr::Bin(op @ (BinOp::And | BinOp::Or), a, b) if b.reads_memory() => {
                self.short_circuit(*op, a, b)?
            }
            Expr::Bin(op, a, b) => {
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                let float = self.value_ty(x) == types::F64;
                let ins = self.b.ins();
                match (op, float) {
                    (BinOp::Add, false) => ins.iadd(x, y),
                    (BinOp::Sub, false) => ins.isub(x, y),
                    (BinOp::Mul, false) => ins.imul(x, y),
                    (BinOp::Div, false) => ins.sdiv(x, y),
                    (BinOp::Rem, false) => ins.srem(x, y),
                    (BinOp::Min, false) => ins.smin(x, y),
                    (BinOp::Max, false) => ins.smax(x, y),
                    (BinOp::And, _) => ins.band(x, y),
                    (BinOp::Or, _) => ins.bor(x, y),
                    (BinOp::Add, true) => ins.fadd(x, y),
                    (BinOp::Sub, true) => ins.fsub(x, y),
                    (BinOp::Mul, true) => ins.fmul(x, y),
                    (BinOp::Div, true) => ins.fdiv(x, y),
                    (BinOp::Min, true) => ins.fmin(x, y),
                    (BinOp::Max, true) => ins.fmax(x, y),
                    (BinOp::Rem, true) => {
                        return Err("floating-point remainder is not supported".into())
                    }
                }
            }
            Expr::Cmp(op, a, b) => {
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                self.compare(*op, x, y)
            }
            Expr::Not(a) => {
                let x = self.expr(a)?;
                self.b.ins().icmp_imm_s(IntCC::Equal, x, 0)
            }
            Expr::Neg(a) => {
                let x = self.expr(a)?;
                if self.value_ty(x) == types::F64 {
                    self.b.ins().fneg(x)
                } else {
                    self.b.ins().ineg(x)
                }
            }
            Expr::Select(c, a, b) => {
                if let Expr::Cmp(op, p, q) = &**c {
                    let (p, q) = (self.expr(p)?, self.expr(q)?);
                    let (x, y) = (self.expr(a)?, self.expr(b)?);
                    if self.value_ty(p) == types::F64 && self.value_ty(x) == types::F64 {
                        return Ok(self.float_select(*op, (p, q), x, (y, b)));
                    }
                    let c = self.compare(*op, p, q);
                    return Ok(self.b.ins().select(c, x, y));
                }
                let c = self.expr(c)?;
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                self.b.ins().select(c, x, y)
            }
        })
    }

    /// `p op q ? x : y` on `f64`s without a branch. Cranelift lowers a
    /// scalar `f64` select to a conditional jump around a move (two for
    /// `!=`, which also tests for NaN), and where the condition follows
    /// the data, as BCSR's and DIA's test for stored zeros (`fill != 0.0
    /// ? fill * x : 0.0`) does on a real matrix, those jumps mispredict:
    /// BCSR(4) SpMV on bcsstk13 took 0.81 ms this way and 0.38 ms with the
    /// compare in a vector register, its lane mask selecting the bits
    /// (`cmppd`, then an `and` or a blend). Every lane holds the scalars
    /// (a splat is one shuffle) and lane 0 is the result; the compare has
    /// the scalar one's semantics (the same `FloatCC`, NaN included).
    fn float_select(
        &mut self,
        op: CmpOp,
        (p, q): (Value, Value),
        x: Value,
        (y, else_expr): (Value, &Expr),
    ) -> Value {
        let [p, q, x, y] = [p, q, x, y].map(|v| self.b.ins().splat(types::F64X2, v));
        let mask = self.b.ins().fcmp(float_cc(op), p, q);
        let v = self.mask_select(mask, x, y, else_expr);
        self.b.ins().extractlane(v, 0)
    }

    /// Per lane, `x` where the compare `mask` holds and `y` elsewhere. An
    /// `else_expr` of +0.0 (DIA's padding test, `c ? a : 0.0`) is `x`
    /// under the mask, +0.0's bits (all zero) elsewhere: one `and` instead
    /// of a blend (DIA SpMV about 5% faster).
    pub(super) fn mask_select(
        &mut self,
        mask: Value,
        x: Value,
        y: Value,
        else_expr: &Expr,
    ) -> Value {
        let flags = MemFlagsData::new().with_endianness(Endianness::Little);
        let mask = self.b.ins().bitcast(types::F64X2, flags, mask);
        match else_expr {
            Expr::Float(z) if z.to_bits() == 0 => self.b.ins().band(mask, x),
            _ => self.b.ins().bitselect(mask, x, y),
        }
    }

    /// `a && b` / `a || b` evaluating `b` only when needed (it may read an
    /// array at an index `a` guards).
    fn short_circuit(&mut self, op: BinOp, a: &Expr, b: &Expr) -> Result<Value, String> {
        let x = self.expr(a)?;
        let rhs = self.b.create_block();
        let merge = self.b.create_block();
        self.b.append_block_param(merge, types::I8);
        if op == BinOp::And {
            let f = self.b.ins().iconst(types::I8, 0);
            self.b.ins().brif(x, rhs, &[], merge, &[f.into()]);
        } else {
            let t = self.b.ins().iconst(types::I8, 1);
            self.b.ins().brif(x, merge, &[t.into()], rhs, &[]);
        }
        self.b.seal_block(rhs);
        self.b.switch_to_block(rhs);
        let y = self.expr(b)?;
        self.b.ins().jump(merge, &[y.into()]);
        self.b.seal_block(merge);
        self.b.switch_to_block(merge);
        Ok(self.b.block_params(merge)[0])
    }

    /// Branch to `yes` where `cond` holds and to `no` where it does not.
    /// `&&` and `||` become chains of branches, as a C compiler makes them:
    /// where the right side loads (`while p < end && crd[p] == i`), no
    /// boolean merged from two blocks and tested again; where it does not
    /// (`while pB < endB && pC < endC`), no two flags set into registers and
    /// combined, registers a merge loop's values need (CSR add on the
    /// Cranelift tier: 6.5 -> 5.3 ms with the `ir::min_compare` rewrite,
    /// `bench/jit.py`). The tests are predictable: each stays true until
    /// its loop ends.
    fn branch(&mut self, cond: &Expr, yes: Block, no: Block) -> Result<(), String> {
        match cond {
            Expr::Bin(op @ (BinOp::And | BinOp::Or), a, b) => {
                let rhs = self.b.create_block();
                match op {
                    BinOp::And => self.branch(a, rhs, no)?,
                    _ => self.branch(a, yes, rhs)?,
                }
                self.b.seal_block(rhs);
                self.b.switch_to_block(rhs);
                self.branch(b, yes, no)
            }
            Expr::Not(a) => self.branch(a, no, yes),
            _ => {
                let c = self.expr(cond)?;
                self.b.ins().brif(c, yes, &[], no, &[]);
                Ok(())
            }
        }
    }

    /// Loads of read-only arrays that every iteration of a loop over `index`
    /// with `body` evaluates, at an index the loop does not change: those
    /// in expressions of the body's own statements (not nested blocks, not
    /// the right of a short-circuit `&&`/`||`).
    pub(super) fn invariant_loads(&self, index: crate::ir::VarId, body: &[Stmt]) -> Vec<Expr> {
        let mut assigned = BTreeSet::from([index]);
        crate::ir::walk_block(body, &mut |s| match s {
            Stmt::Let(v, _) | Stmt::Set(v, _) | Stmt::For { var: v, .. } => {
                assigned.insert(*v);
            }
            _ => {}
        });
        let invariant = |e: &Expr| {
            let mut ok = true;
            e.walk(&mut |x| match x {
                Expr::Var(v) if assigned.contains(v) => ok = false,
                Expr::Load(a, _) if self.arrays.get(a).is_none_or(|av| av.writes) => ok = false,
                Expr::Bin(BinOp::And | BinOp::Or, _, r) if r.reads_memory() => ok = false,
                _ => {}
            });
            ok
        };
        let mut found: Vec<Expr> = Vec::new();
        // Paired statements load their own vectors (`jit::pairs`).
        for s in body.iter().filter(|s| !self.pairs.names_any(s)) {
            for e in crate::ir::stmt_exprs(s) {
                collect_loads(e, &mut |l| {
                    if invariant(l)
                        && !found.contains(l)
                        && !self.hoisted.iter().any(|(h, _)| h == l)
                    {
                        found.push(l.clone());
                    }
                });
            }
        }
        found
    }

    pub(super) fn block(&mut self, stmts: &[Stmt]) -> Result<(), String> {
        let scope = self.scope();
        self.block_in_scope(stmts)?;
        self.close_scope(scope);
        Ok(())
    }

    /// A mark of the `let`s in scope, for `close_scope`.
    pub(super) fn scope(&self) -> usize {
        self.in_scope.len()
    }

    /// End the scope of the `let`s translated since `mark`: their values
    /// may not dominate what is translated next.
    pub(super) fn close_scope(&mut self, mark: usize) {
        for v in self.in_scope.drain(mark..) {
            if let Some(x) = self.lets.get_mut(v as usize) {
                *x = None;
            }
        }
    }

    fn block_in_scope(&mut self, stmts: &[Stmt]) -> Result<(), String> {
        let mut k = 0;
        while k < stmts.len() {
            // Reserves of one length in a row (an append's arrays, gathered
            // by `passes::gather_reserves`) share one capacity check.
            if let Stmt::Reserve { len, ahead, .. } = &stmts[k] {
                let group: Vec<&ArrayRef> = stmts[k..]
                    .iter()
                    .map_while(|s| match s {
                        Stmt::Reserve {
                            array,
                            len: l,
                            ahead: a,
                        } if l == len && a == ahead => Some(array),
                        _ => None,
                    })
                    .collect();
                k += group.len();
                self.reserve(&group, len, *ahead)?;
                continue;
            }
            if self.pairs.names_any(&stmts[k]) {
                self.paired(&stmts[k], stmts.get(k + 1))?;
                k += 2;
                continue;
            }
            self.stmt(&stmts[k])?;
            k += 1;
        }
        Ok(())
    }

    pub(super) fn stmt(&mut self, s: &Stmt) -> Result<(), String> {
        match s {
            // A cursor stepped where its operand is at the loop's
            // coordinate (`p = c ? p + 1 : p`) is a branch, as gcc makes
            // it: a conditional move makes the next iteration's loads wait
            // on this one's compare, where a predicted branch lets them
            // start. Operands of alike patterns (A + A's shifted copy, a
            // tensor's inner product with one of its pattern) gain 14-30%;
            // unrelated random patterns, where the branch mispredicts,
            // lose 12-17% (`bench/jit.py`).
            Stmt::Set(v, Expr::Select(c, a, b)) if matches!(**b, Expr::Var(w) if w == *v) => {
                let var = *self.vars.get(*v as usize).ok_or("unknown variable")?;
                let (step, done) = (self.b.create_block(), self.b.create_block());
                self.branch(c, step, done)?;
                self.b.seal_block(step);
                self.b.switch_to_block(step);
                let x = self.expr(a)?;
                self.b.def_var(var, x);
                self.b.ins().jump(done, &[]);
                self.b.seal_block(done);
                self.b.switch_to_block(done);
            }
            Stmt::Let(v, e) | Stmt::Set(v, e) => {
                let x = self.expr(e)?;
                let var = *self.vars.get(*v as usize).ok_or("unknown variable")?;
                self.b.def_var(var, x);
                if matches!(s, Stmt::Let(..)) && self.once.get(*v as usize) == Some(&true) {
                    self.lets[*v as usize] = Some(x);
                    self.in_scope.push(*v);
                }
            }
            Stmt::Store(a, i, v) => {
                let (addr, offset) = self.address_at(a, i)?;
                let x = self.expr(v)?;
                let f = self.elems();
                // An index stores its low half (`istore32`, not a store of
                // `ireduce`, which Cranelift folds back to the 32-bit load
                // it came from: two registers for one coordinate).
                if a.elem() == ElemTy::I32 {
                    self.b.ins().istore32(f, x, addr, offset);
                } else {
                    self.b.ins().store(f, x, addr, offset);
                }
            }
            Stmt::For { .. } if self.streams(s) => self.streamed_fill(s)?,
            Stmt::For {
                var: var_id,
                lo,
                hi,
                body,
            } => {
                let var = *self.vars.get(*var_id as usize).ok_or("unknown variable")?;
                if let Some((lo, hi, clip)) =
                    unrolled(lo, hi).filter(|_| !crate::ir::has_loops(body))
                {
                    let bound = clip.map(|e| self.expr(e)).transpose()?;
                    let var_info = std::mem::take(&mut self.var_info);
                    // Short loops qualify with sums too, whose terms
                    // lanes compute and whose adds stay in order.
                    let lanes = (hi - lo >= super::vector::LANES)
                        .then(|| super::vector::plan(*var_id, body, &var_info, Sums::InLaneOrder))
                        .flatten();
                    let done = match lanes {
                        Some(plan) => self.unrolled_vector_loop(&plan, var, (lo, hi, bound), body),
                        None => self.unrolled_loop(var, (lo, hi, bound), body),
                    };
                    self.var_info = var_info;
                    return done;
                }
                let short = super::vector::too_short(lo, hi);
                let whole = super::vector::whole_steps(lo, hi);
                let lo = self.expr(lo)?;
                let hi = self.expr(hi)?;
                let var_info = std::mem::take(&mut self.var_info);
                let pairs = body.iter().any(|s| self.pairs.names_any(s));
                // Whether a vector loop ran, and whether it left nothing.
                let vectorized = match (
                    super::vector::plan(*var_id, body, &var_info, Sums::Refused),
                    super::count::plan(*var_id, body),
                ) {
                    _ if pairs || short => Ok(None),
                    (Some(plan), _) => self
                        .vector_loop(&plan, var, lo, hi, body)
                        .map(|()| Some(whole)),
                    (None, Some(count)) => {
                        self.count_loop(&count, var, lo, hi).map(|()| Some(false))
                    }
                    (None, None) => Ok(None),
                };
                self.var_info = var_info;
                // The scalar loop runs the iterations the vector loop left.
                let lo = match vectorized? {
                    Some(true) => return Ok(()),
                    Some(false) => self.b.use_var(var),
                    None => lo,
                };
                self.scalar_loop(*var_id, var, lo, hi, body)?;
            }
            // Rotated, as counted loops are: one test before entry, then
            // the test at the bottom, so each iteration takes one branch,
            // and a preheader that runs only when the loop does holds what
            // the loop reads unchanged. Merge loops gain most (Cranelift
            // tier, bcsstk13: CSR add 0.27 -> 0.21 ms, COO add 0.56 ->
            // 0.37 ms; INNERPROD COO of the bench 14.8 -> 12.5 ms), for
            // about a tenth more compile time (the test is translated
            // twice).
            Stmt::While { cond, body } => {
                let (pre, body_block, exit) = (
                    self.b.create_block(),
                    self.b.create_block(),
                    self.b.create_block(),
                );
                let outer = self.loaded_bases.len();
                self.branch(cond, pre, exit)?;
                self.b.seal_block(pre);
                self.b.switch_to_block(pre);
                self.load_bases(body);
                self.b.ins().jump(body_block, &[]);
                self.b.switch_to_block(body_block);
                self.block(body)?;
                self.branch(cond, body_block, exit)?;
                self.b.seal_block(body_block);
                self.b.seal_block(exit);
                self.b.switch_to_block(exit);
                self.loaded_bases.truncate(outer);
            }
            Stmt::If { cond, then, els } => {
                let (t, e, merge) = (
                    self.b.create_block(),
                    self.b.create_block(),
                    self.b.create_block(),
                );
                self.branch(cond, t, e)?;
                self.b.seal_block(t);
                self.b.seal_block(e);
                for (entry, body) in [(t, then), (e, els)] {
                    self.b.switch_to_block(entry);
                    let first_new = self.b.func.dfg.num_blocks();
                    self.block(body)?;
                    self.b.ins().jump(merge, &[]);
                    if body.contains(&Stmt::Unlikely) {
                        self.set_cold(entry, first_new);
                    }
                }
                self.b.seal_block(merge);
                self.b.switch_to_block(merge);
            }
            Stmt::Reserve { array, len, ahead } => self.reserve(&[array], len, *ahead)?,
            Stmt::Prefetch {
                array,
                coords,
                at,
                positions,
                stride,
                len,
            } => self.prefetch(array, coords, at, *positions, stride, len)?,
            Stmt::PrefetchStream {
                array,
                at,
                positions,
                ..
            } => self.prefetch_stream(array, at, *positions)?,
            Stmt::PrefetchGather { array, coords, at } => {
                self.prefetch_gather(array, &coords.array, at)?
            }
            Stmt::Comment(_) | Stmt::Unlikely => {}
        }
        Ok(())
    }

    /// Mark `entry` and every block made since the `first_new`th cold:
    /// Cranelift lays them out after the function's hot blocks, so a rare
    /// path (`Stmt::Unlikely`) leaves its loop's code short and its jumps
    /// where `jit::placement` can see them.
    pub(super) fn set_cold(&mut self, entry: Block, first_new: usize) {
        self.b.set_cold_block(entry);
        for k in first_new..self.b.func.dfg.num_blocks() {
            self.b.set_cold_block(Block::from_u32(k as u32));
        }
    }

    /// A short innermost loop of a constant trip count (a block's inner
    /// level, `BCSR(4)`), unrolled: Cranelift does not unroll, and the
    /// loop's compare and branch cost as much as its body. A loop clipped
    /// to a bound (`ir::clip`: the last block of a dimension no multiple of
    /// the block size; `bound` is the clip's value) leaves the unrolled
    /// iterations at the first past it.
    pub(super) fn unrolled_loop(
        &mut self,
        var: Variable,
        (lo, hi, bound): (i64, i64, Option<Value>),
        body: &[Stmt],
    ) -> Result<(), String> {
        let exit = bound.map(|_| self.b.create_block());
        for k in lo..hi {
            let v = self.b.ins().iconst(types::I64, k);
            if let (Some(bound), Some(exit)) = (bound, exit) {
                let inside = self.b.ins().icmp(IntCC::SignedLessThan, v, bound);
                let next = self.b.create_block();
                self.b.ins().brif(inside, next, &[], exit, &[]);
                self.b.seal_block(next);
                self.b.switch_to_block(next);
            }
            self.b.def_var(var, v);
            self.block(body)?;
        }
        if let Some(exit) = exit {
            self.b.ins().jump(exit, &[]);
            self.b.seal_block(exit);
            self.b.switch_to_block(exit);
        }
        Ok(())
    }

    /// `for var in lo..hi { body }` as a rotated loop: one test before
    /// entry, then the test at the bottom, so each iteration takes a single
    /// branch; or tested at the top, where that lets Cranelift fold the
    /// body's loads (`sums_fold_their_loads`).
    fn scalar_loop(
        &mut self,
        index: crate::ir::VarId,
        var: Variable,
        lo: Value,
        hi: Value,
        body: &[Stmt],
    ) -> Result<(), String> {
        self.b.def_var(var, lo);
        let (body_block, exit) = (self.b.create_block(), self.b.create_block());
        let loads = self.invariant_loads(index, body);
        // Tested at the top only where nothing is loaded before the loop:
        // then that test is the entry test too, and the loop pays one jump
        // an iteration. (A hoisted load needs a test before it; with both
        // tests, loops of a few iterations lost more than their folds
        // saved: MTTKRP from CSF, fibres of one or two entries, 1.04x.)
        let header = (loads.is_empty() && sums_fold_their_loads(body, &self.var_info))
            .then(|| self.b.create_block());
        let outer = match header {
            Some(header) => {
                let outer = self.enter_loop(loads, body)?;
                self.b.ins().jump(header, &[]);
                self.b.switch_to_block(header);
                let i = self.b.use_var(var);
                let more = self.b.ins().icmp(IntCC::SignedLessThan, i, hi);
                self.b.ins().brif(more, body_block, &[], exit, &[]);
                self.b.seal_block(body_block);
                outer
            }
            None => {
                let enter = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
                // The loop runs at least once past this test: what every
                // iteration loads at the same place is loaded here once.
                let preheader = self.b.create_block();
                self.b.ins().brif(enter, preheader, &[], exit, &[]);
                self.b.seal_block(preheader);
                self.b.switch_to_block(preheader);
                let outer = self.enter_loop(loads, body)?;
                self.b.ins().jump(body_block, &[]);
                outer
            }
        };
        self.b.switch_to_block(body_block);
        self.block(body)?;
        self.leave_loop(outer);
        let i = self.b.use_var(var);
        match header {
            Some(header) => {
                let next = self.b.ins().iadd_imm_s(i, 1);
                self.b.def_var(var, next);
                self.b.ins().jump(header, &[]);
                self.b.seal_block(header);
                self.b.seal_block(exit);
                self.b.switch_to_block(exit);
            }
            None => self.loop_back(var, i, 1, hi, body_block, exit),
        }
        Ok(())
    }

    /// The end of a counted loop's body starting at `body_block` with
    /// index `var` at `at`: step it, go round again while below `limit`,
    /// and continue after the loop at `exit`.
    pub(super) fn loop_back(
        &mut self,
        var: Variable,
        at: Value,
        step: i64,
        limit: Value,
        body_block: Block,
        exit: Block,
    ) {
        let next = self.b.ins().iadd_imm_s(at, step);
        self.b.def_var(var, next);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, limit);
        self.b.ins().brif(more, body_block, &[], exit, &[]);
        self.b.seal_block(body_block);
        self.b.seal_block(exit);
        self.b.switch_to_block(exit);
    }

    /// In a loop's preheader: load `loads`, what the loop with `body`
    /// reads unchanged in every iteration (`invariant_loads`). Returns the
    /// mark `leave_loop` takes after the body.
    pub(super) fn enter_loop(
        &mut self,
        loads: Vec<Expr>,
        body: &[Stmt],
    ) -> Result<(usize, usize), String> {
        let outer = (self.hoisted.len(), self.loaded_bases.len());
        for load in loads {
            let v = self.expr(&load)?;
            self.hoisted.push((load, v));
        }
        self.load_bases(body);
        Ok(outer)
    }

    pub(super) fn leave_loop(&mut self, (hoisted, grown): (usize, usize)) {
        self.hoisted.truncate(hoisted);
        self.loaded_bases.truncate(grown);
    }

    /// In a loop's preheader, into `loaded_bases`: the base pointers of the
    /// fixed arrays `body`'s own statements access, and of the grown
    /// arrays it accesses when it cannot move them (it grows nothing).
    fn load_bases(&mut self, body: &[Stmt]) {
        let mut grows = false;
        crate::ir::walk_block(body, &mut |s| grows |= matches!(s, Stmt::Reserve { .. }));
        let base_of = |a: &ArrayRef| self.arrays.get(a).map(|v| v.base);
        // References into `body`, cloned only for the few arrays kept.
        let mut fixed: Vec<&ArrayRef> = Vec::new();
        for s in body {
            walk_outside_loops(s, &mut |s| {
                accessed_arrays(s, &mut |a| {
                    if matches!(base_of(a), Some(Base::Fixed(_))) {
                        fixed.push(a);
                    }
                })
            });
        }
        let mut grown: Vec<&ArrayRef> = Vec::new();
        if !grows {
            crate::ir::walk_block(body, &mut |s| {
                accessed_arrays(s, &mut |a| {
                    if matches!(base_of(a), Some(Base::Grown(_))) {
                        grown.push(a);
                    }
                })
            });
        }
        for list in [&mut fixed, &mut grown] {
            list.sort();
            list.dedup();
        }
        let wanted: Vec<ArrayRef> = fixed
            .into_iter()
            .chain(grown)
            .filter(|a| !self.loaded_bases.iter().any(|(g, _)| g == *a))
            .cloned()
            .collect();
        for a in wanted {
            if let Some(base) = self.arrays.get(&a).map(|v| v.base) {
                let v = self.load_base(base);
                self.loaded_bases.push((a, v));
            }
        }
    }
}

/// `f` on each array `s` itself loads from or stores to (with repeats).
fn accessed_arrays<'s>(s: &'s Stmt, f: &mut dyn FnMut(&'s ArrayRef)) {
    if let Stmt::Store(a, ..) = s {
        f(a);
    }
    for e in crate::ir::stmt_exprs(s) {
        e.walk(&mut |x| {
            if let Expr::Load(a, _) = x {
                f(a);
            }
        });
    }
}

/// Sums a loop's body must keep for its test to move to the top
/// (`sums_fold_their_loads`): at a strip of `ir::strips` (eight `f64x2`
/// sums in MTTKRP and SpDM) the folded loads pay for the jump added; at
/// the two sums of `ir::unroll` (SpMV) they did not (every loop tested at
/// the top: SpMV and CSR add 1.05-1.08x the time, in one process).
const MIN_SUMS_FOR_TOP_TEST: usize = 4;

/// Whether a loop is better tested at its top: its body adds at least
/// `MIN_SUMS_FOR_TOP_TEST` values computed from loads into `f64`
/// variables kept across iterations. Cranelift folds a load into the
/// arithmetic that uses it (`vmulpd (mem)`, one instruction for two) only
/// where the value it feeds is used once; a rotated loop uses each sum
/// twice, at its bottom test's two edges (to the next iteration and out),
/// and that taints every load below the sum. Tested at the top, a sum
/// goes only to the test, and the loop's exit reads the test's copy.
/// Measured in one process (`examples/ab_kernels.rs`, rounds alternated),
/// rank-16 MTTKRP on the bench's NELL-2-like tensor: from COO 0.82x the
/// time (faster in 17 of 20 rounds), from CSF 0.91x (18 of 20); SpDM into
/// 32 columns 0.95-0.96x. In alternating processes (`bench/ab_builds.sh`)
/// 0.83x, 0.89x and 0.75-0.91x.
fn sums_fold_their_loads(body: &[Stmt], vars: &[VarInfo]) -> bool {
    let declared = crate::ir::declared(body);
    let sums = body
        .iter()
        .filter(|s| match s {
            Stmt::Set(v, e) => {
                !declared.contains(v)
                    && vars.get(*v as usize).is_some_and(|i| i.ty == Ty::F64)
                    && e.reads_memory()
            }
            _ => false,
        })
        .count();
    sums >= MIN_SUMS_FOR_TOP_TEST
}

/// `f` on `s` and on the statements of its `if`s, not inside its loops
/// but for those the translator unrolls (their statements are the
/// enclosing loop's own: BCSR's loop over a block row's columns).
fn walk_outside_loops<'s>(s: &'s Stmt, f: &mut dyn FnMut(&'s Stmt)) {
    f(s);
    let (first, then): (&[Stmt], &[Stmt]) = match s {
        Stmt::If { then, els, .. } => (then, els),
        Stmt::For { lo, hi, body, .. }
            if unrolled(lo, hi).is_some() && !crate::ir::has_loops(body) =>
        {
            (body, &[])
        }
        _ => return,
    };
    for t in first.iter().chain(then) {
        walk_outside_loops(t, f);
    }
}

/// The IR's comparison on floats (ordered: false when either is NaN, as in C).
pub(super) fn float_cc(op: CmpOp) -> FloatCC {
    match op {
        CmpOp::Eq => FloatCC::Equal,
        CmpOp::Ne => FloatCC::NotEqual,
        CmpOp::Lt => FloatCC::LessThan,
        CmpOp::Le => FloatCC::LessThanOrEqual,
        CmpOp::Gt => FloatCC::GreaterThan,
        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Emitter;
    use cranelift_codegen::ir::{
        AbiParam, Function as ClifFunction, InstructionData, Opcode, Signature,
    };
    use cranelift_frontend::FunctionBuilderContext;

    /// The Cranelift function `f` translates to, before any pass of
    /// Cranelift's.
    fn translated(f: &Function) -> ClifFunction {
        let (arrays, params) = (f.arrays(), f.params());
        let mut func = ClifFunction::new();
        func.signature.params.push(AbiParam::new(types::I64));
        func.signature.returns.push(AbiParam::new(types::I64));
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        // The growth trampoline's signature, `GROW`, for kernels that grow.
        let mut sig = Signature::new(cranelift_codegen::isa::CallConv::PreserveAll);
        sig.params = vec![AbiParam::new(types::I64); 3];
        let signature = b.import_signature(sig);
        let grow = b.import_function(cranelift_codegen::ir::ExtFuncData {
            name: cranelift_codegen::ir::ExternalName::testcase("grow"),
            signature,
            colocated: false,
            patchable: false,
        });
        let helpers = Helpers {
            grow: Some(grow),
            ..Helpers::default()
        };
        let t = Translator::translate(&mut b, f, types::I64, &arrays, &params, helpers);
        t.expect("translates"); // ok: test code
        let isa = super::super::host_isa(super::super::Opt::Speed).expect("host ISA"); // ok: test code
        b.finalize(isa.frontend_config());
        func
    }

    /// A variable set once by its `let` is the value the `let` computed
    /// wherever it is read in scope, also past a nest of merge loops,
    /// whose headers were not sealed when it was read: no block takes it
    /// as a parameter (through nested loops, such parameters form cycles
    /// that sealing does not remove, and at `opt_level=none` they reach
    /// the register allocator).
    #[test]
    fn a_variable_defined_once_is_its_value_in_loop_nests() {
        let y = ArrayRef::vals("y");
        let n = Expr::Param(ParamRef::dim("y", 0));
        let mut e = Emitter::new();
        let hi = e.let_var("hi", Expr::add(n, Expr::Int(1)));
        let a = e.let_var("a", Expr::Int(0));
        e.while_(Expr::lt(a.clone(), hi.clone()), |e| {
            let b = e.let_var("b", a.clone());
            e.while_(Expr::lt(b.clone(), Expr::Int(10)), |e| {
                e.reserve(y.clone(), Expr::add(b.clone(), Expr::Int(1)));
                e.store(y.clone(), b.clone(), Expr::Float(1.0));
                e.set(&b, Expr::add(b.clone(), Expr::Int(1)));
            });
            e.set(&a, b.clone());
        });
        e.if_(Expr::lt(a.clone(), hi.clone()), |e| {
            e.store(y.clone(), Expr::Int(0), Expr::Float(2.0))
        });
        let f = e.finish("k");
        assert_eq!(defined_once(&f), [true, false, false]);
        let func = translated(&f);
        let dfg = &func.dfg;
        let mut his = BTreeSet::new();
        let mut compares = 0;
        for block in func.layout.blocks() {
            for inst in func.layout.block_insts(block) {
                // `x < hi` (the capacity checks ask `>`).
                if let InstructionData::IntCompare {
                    opcode: Opcode::Icmp,
                    args,
                    cond: IntCC::SignedLessThan,
                } = dfg.insts[inst]
                {
                    let right = dfg.resolve_aliases(args[1]);
                    let constant = dfg.value_def(right).inst().map(|i| dfg.insts[i].opcode());
                    if constant != Some(Opcode::Iconst) {
                        compares += 1;
                        his.insert(right);
                    }
                }
            }
        }
        // The outer loop's test before entry and at the bottom, and the
        // last.
        assert_eq!(compares, 3, "{}", func.display());
        let [hi] = his.into_iter().collect::<Vec<_>>()[..] else {
            panic!("`hi` read as more than one value:\n{}", func.display());
        };
        // The `let`'s add, not a block parameter.
        assert!(dfg.value_def(hi).inst().is_some(), "{}", func.display());
    }
}
