//! The calls a kernel makes out of its loops, and the trampolines they
//! go through: growing the arrays of a result (`reserve`, through
//! `jit::GROW`), zero fills of results the kernel never reads back
//! (`jit::ZERO`), and asking the caches for rows (`jit::PREFETCH`). Each
//! trampoline is a `preserve_all` function, so a call in a loop leaves the
//! loop's registers alone.

use super::call::{
    ARGS_RESERVE_GROUP, ARGS_RUNTIME, GROUP_BITS, GROUP_SLOTS, SLOT_CAP, SLOT_LEN, SLOT_SIZE,
};
use super::translate::{flags, pure, Base, Translator};
use crate::ir::{ArrayRef, Expr, Stmt};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, FuncRef, InstBuilder, Signature, Type};
use cranelift_frontend::FunctionBuilder;

/// The functions a kernel calls, those it imports.
#[derive(Default)]
pub struct Helpers {
    pub grow: Option<FuncRef>,
    pub prefetch: Option<FuncRef>,
    pub zero: Option<(FuncRef, std::collections::BTreeSet<ArrayRef>)>,
}

impl Translator<'_, '_> {
    /// Grow output arrays that take `len` elements through the runtime when
    /// it exceeds a capacity; a refused allocation ends the kernel with
    /// status 1. Each array's logical length (the largest `len` reserved)
    /// is kept in its slot. One branch covers the whole group and the calls
    /// sit in a cold block: fewer blocks and calls keep register allocation,
    /// most of the compile time, short. The runtime stores each new pointer
    /// in its slot, where the array's next access loads it (`Base::Grown`).
    /// A reserve `ahead` of a loop's appends grows without setting lengths.
    pub(super) fn reserve(
        &mut self,
        group: &[&ArrayRef],
        len: &Expr,
        ahead: bool,
    ) -> Result<(), String> {
        let mut slots = Vec::with_capacity(group.len());
        for a in group {
            let av = self.array(a)?;
            match av.base {
                Base::Grown(_) => slots.push(av.slot),
                Base::Fixed(_) => return Err(format!("{} is not growable", a.c_name())),
            }
        }
        let want = self.expr(len)?;
        let table = self.table();
        let sizes = flags().with_alias_region(Some(self.regions.sizes));
        let mut grow = None;
        for &slot in &slots {
            let off = (slot * SLOT_SIZE) as i32;
            if !ahead {
                let cur = self.b.ins().load(types::I64, sizes, table, off + SLOT_LEN);
                let newlen = self.b.ins().smax(cur, want);
                self.b.ins().store(sizes, newlen, table, off + SLOT_LEN);
            }
            let cap = self.b.ins().load(types::I64, sizes, table, off + SLOT_CAP);
            let over = self.b.ins().icmp(IntCC::SignedGreaterThan, want, cap);
            grow = Some(match grow {
                None => over,
                Some(g) => self.b.ins().bor(g, over),
            });
        }
        let Some(grow) = grow else { return Ok(()) };
        let (grow_block, done) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(grow_block);
        self.b.ins().brif(grow, grow_block, &[], done, &[]);
        self.b.seal_block(grow_block);
        self.b.switch_to_block(grow_block);
        // One call per few arrays; `grow` clobbers nothing.
        let grow = self
            .grow
            .ok_or("a kernel that grows arrays without `grow`")?;
        for chunk in slots.chunks(GROUP_SLOTS) {
            if !chunk.iter().all(|&s| s + 1 < 1 << GROUP_BITS) {
                return Err("too many arrays for one reserve group".into());
            }
            let packed = self.b.ins().iconst(
                types::I64,
                chunk
                    .iter()
                    .rev()
                    .fold(0i64, |p, &s| (p << GROUP_BITS) | (s + 1)),
            );
            self.b.ins().call(grow, &[self.args, packed, want]);
        }
        // A refused allocation leaves its array's capacity short.
        let table = self.table();
        let mut failed = None;
        for &slot in &slots {
            let cap = self.b.ins().load(
                types::I64,
                sizes,
                table,
                (slot * SLOT_SIZE) as i32 + SLOT_CAP,
            );
            let short = self.b.ins().icmp(IntCC::SignedGreaterThan, want, cap);
            failed = Some(match failed {
                None => short,
                Some(x) => self.b.ins().bor(x, short),
            });
        }
        let fail = self.fail;
        // `slots` is not empty (checked above), so the loop set `failed`.
        let failed = failed.expect("a group has an array"); // ok: slots is not empty
        self.b.ins().brif(failed, fail, &[], done, &[]);
        self.b.seal_block(done);
        self.b.switch_to_block(done);
        Ok(())
    }

    /// Whether `s` is a zero fill of a result the kernel never reads back,
    /// which `zero` does.
    pub(super) fn streams(&self, s: &Stmt) -> bool {
        let Some((_, streamed)) = &self.zero else {
            return false;
        };
        crate::ir::zero_fill(s).is_some_and(|(a, ..)| streamed.contains(a))
    }

    /// The zero fill `s` (`streams`) as a call of `zero`.
    pub(super) fn streamed_fill(&mut self, s: &Stmt) -> Result<(), String> {
        let (Some((zero, _)), Some((a, lo, hi))) = (&self.zero, crate::ir::zero_fill(s)) else {
            return Err("a zero fill without `zero`".into());
        };
        let zero = *zero;
        let (addr, offset) = self.address_at(a, lo)?;
        let at = self.b.ins().iadd_imm_s(addr, i64::from(offset));
        let (lo, hi) = (self.expr(lo)?, self.expr(hi)?);
        let n = self.b.ins().isub(hi, lo);
        let slot = self.array(a)?.slot;
        let table = self.table();
        let sizes = flags().with_alias_region(Some(self.regions.sizes));
        let len = self.b.ins().load(
            types::I64,
            sizes,
            table,
            (slot * SLOT_SIZE) as i32 + SLOT_LEN,
        );
        self.b.ins().call(zero, &[at, n, len]);
        Ok(())
    }

    /// A call to the prefetch routine, which clobbers no register.
    /// Cranelift has no prefetch instruction; `ir::prefetch` asks once per
    /// strip of positions where the hint is a call.
    pub(super) fn prefetch(
        &mut self,
        array: &ArrayRef,
        coords: &ArrayRef,
        at: &Expr,
        positions: i64,
        stride: &Expr,
        len: &Expr,
    ) -> Result<(), String> {
        let call = self
            .prefetch
            .ok_or("a kernel that prefetches without `prefetch`")?;
        let slots = (self.array(array)?.slot, self.array(coords)?.slot);
        let packed = self.b.ins().iconst(types::I64, slots.0 | (slots.1 << 32));
        let (at, stride, len) = (self.expr(at)?, self.expr(stride)?, self.expr(len)?);
        let positions = self.b.ins().iconst(types::I64, positions);
        let table = self.table();
        self.b
            .ins()
            .call(call, &[table, packed, at, positions, stride, len]);
        Ok(())
    }
}

/// The body of the `prefetch` trampoline: a `preserve_all` function that
/// passes its six arguments on to `call::prefetch_rows`, which follows the
/// platform's convention.
pub(super) fn prefetch_body(b: &mut FunctionBuilder, ptr_ty: Type) {
    pass_on(b, ptr_ty, 5, super::call::prefetch_rows as *const u8);
}

/// The body of `zero(p, n, len)` (`jit::ZERO`): its arguments passed on
/// to `call::zero_f64`.
pub(super) fn zero_body(b: &mut FunctionBuilder, ptr_ty: Type) {
    pass_on(b, ptr_ty, 2, super::call::zero_f64 as *const u8);
}

/// A trampoline's body that passes its arguments (a pointer and
/// `int_args` integers) on to `target`, a function of the platform's
/// convention.
fn pass_on(b: &mut FunctionBuilder, ptr_ty: Type, int_args: usize, target: *const u8) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let params = b.block_params(entry).to_vec();
    let mut sig = Signature::new(cranelift_codegen::isa::CallConv::SystemV);
    sig.params.push(AbiParam::new(ptr_ty));
    sig.params
        .extend(std::iter::repeat_n(AbiParam::new(types::I64), int_args));
    let sig = b.import_signature(sig);
    let f = b.ins().iconst(ptr_ty, target as i64);
    b.ins().call_indirect(sig, f, &params);
    b.ins().return_(&[]);
}

/// The body of `grow(args, slots, want)` (`jit::GROW`): the
/// runtime's `reserve_group(args.runtime, slots, want)`.
pub(super) fn grow_body(b: &mut FunctionBuilder, ptr_ty: Type) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let (args, slots, want) = (
        b.block_params(entry)[0],
        b.block_params(entry)[1],
        b.block_params(entry)[2],
    );
    let mut sig = Signature::new(cranelift_codegen::isa::CallConv::SystemV);
    sig.params.extend([
        AbiParam::new(ptr_ty),
        AbiParam::new(types::I64),
        AbiParam::new(types::I64),
    ]);
    let sig = b.import_signature(sig);
    let rt = b.ins().load(ptr_ty, pure(), args, ARGS_RUNTIME);
    let f = b.ins().load(ptr_ty, pure(), args, ARGS_RESERVE_GROUP);
    b.ins().call_indirect(sig, f, &[rt, slots, want]);
    b.ins().return_(&[]);
}
