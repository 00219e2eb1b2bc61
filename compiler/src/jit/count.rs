//! Counting loops in vector lanes: `for m in lo..hi { r = r + (a[m] < key ?
//! 1 : 0) }` over an `i32` array, the rank of a key among a row's
//! (`Emitter::rank_of`, which places a flushed workspace row's short list
//! without sorting it). The cc tier's compiler vectorizes it; here it runs
//! in `i64x2` lanes, eight elements per iteration: each pair of elements
//! is loaded sign-extended, compared with the key, and the comparison's
//! mask (-1 where true) subtracted from a lane count. Integer sums are
//! exact in any order, so the result is the scalar loop's.

use super::translate::Translator;
use crate::ir::{ArrayRef, BinOp, CmpOp, ElemTy, Expr, Stmt, VarId};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::Variable;

/// Vectors per iteration (two `i32` elements each).
const UNROLL: i64 = 4;

/// A counting loop found: `count += (keys[index] op key)` for `index` in
/// the loop's range.
pub(super) struct Count {
    count: VarId,
    keys: ArrayRef,
    op: CmpOp,
    key: Expr,
}

/// The counting loop `for index in ..: body`, if `body` is one.
pub(super) fn plan(index: VarId, body: &[Stmt]) -> Option<Count> {
    let [Stmt::Set(count, Expr::Bin(BinOp::Add, acc, one))] = body else {
        return None;
    };
    let (Expr::Var(acc), Expr::Select(cond, yes, no)) = (&**acc, &**one) else {
        return None;
    };
    let (Expr::Cmp(op, load, key), Expr::Int(1), Expr::Int(0)) = (&**cond, &**yes, &**no) else {
        return None;
    };
    let Expr::Load(keys, at) = &**load else {
        return None;
    };
    let uniform = |e: &Expr| {
        let mut ok = true;
        e.walk(&mut |x| {
            ok &= !matches!(x, Expr::Var(v) if *v == index || v == count)
                && !matches!(x, Expr::Load(..))
        });
        ok
    };
    let counts =
        acc == count && keys.elem() == ElemTy::I32 && **at == Expr::Var(index) && uniform(key);
    let lanes_compare = matches!(op, CmpOp::Lt | CmpOp::Gt);
    (counts && lanes_compare).then(|| Count {
        count: *count,
        keys: keys.clone(),
        op: *op,
        key: (**key).clone(),
    })
}

impl Translator<'_, '_> {
    /// The vector part of the counting loop `c` over `var` in `lo..hi`:
    /// adds its count to `c.count` and leaves `var` at the first iteration
    /// it did not run, for the scalar loop to finish.
    pub(super) fn count_loop(
        &mut self,
        c: &Count,
        var: Variable,
        lo: Value,
        hi: Value,
    ) -> Result<(), String> {
        let step = 2 * UNROLL;
        self.b.def_var(var, lo);
        let key = self.expr(&c.key)?;
        let key = self.b.ins().splat(types::I64X2, key);
        let zero = self.b.ins().iconst(types::I64, 0);
        let zero = self.b.ins().splat(types::I64X2, zero);
        let lanes: Vec<Variable> = (0..UNROLL)
            .map(|_| self.b.declare_var(types::I64X2))
            .collect();
        for &l in &lanes {
            self.b.def_var(l, zero);
        }
        let limit = self.b.ins().iadd_imm_s(hi, -(step - 1));
        let enter = self.b.ins().icmp(IntCC::SignedLessThan, lo, limit);
        let (vbody, rest) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(enter, vbody, &[], rest, &[]);
        self.b.switch_to_block(vbody);
        let k = self.b.use_var(var);
        let base = self.base(&c.keys)?;
        let row = self.element(base, &c.keys, k);
        let flags = match self.writes(&c.keys)? {
            true => self.elems_with(MemFlagsData::new().with_notrap()),
            false => MemFlagsData::new().with_notrap().with_readonly(),
        };
        let cc = match c.op {
            CmpOp::Gt => IntCC::SignedGreaterThan,
            _ => IntCC::SignedLessThan,
        };
        for (copy, &l) in lanes.iter().enumerate() {
            let pair = self.b.ins().sload32x2(flags, row, (copy * 8) as i32);
            let mask = self.b.ins().icmp(cc, pair, key);
            let n = self.b.use_var(l);
            let n = self.b.ins().isub(n, mask);
            self.b.def_var(l, n);
        }
        self.loop_back(var, k, step, limit, vbody, rest);
        let mut sum = self.b.use_var(lanes[0]);
        for &l in &lanes[1..] {
            let n = self.b.use_var(l);
            sum = self.b.ins().iadd(sum, n);
        }
        let (a, b) = (
            self.b.ins().extractlane(sum, 0),
            self.b.ins().extractlane(sum, 1),
        );
        let counted = self.b.ins().iadd(a, b);
        let count = self.var(c.count)?;
        let before = self.b.use_var(count);
        let after = self.b.ins().iadd(before, counted);
        self.b.def_var(count, after);
        Ok(())
    }
}
