//! The parameters a kernel's calls all give the same value
//! (`Function::fixed_params`: the dimensions of the data it is compiled
//! for) as constants, for the Cranelift tier. MTTKRP's factor rows of rank
//! 16 then have a known length: the row summed in strips of 16 needs no
//! loop for a rest (`ir::strips`), a third less code to compile (2.4 ms
//! -> 1.85 as if for large data), and `k * P2_N` multiplies by a
//! constant, one register fewer in loops short of them.
//!
//! Exact while the calls give those values, which `jit::call` checks
//! before each. Expressions left with only constants are folded, with the
//! 64-bit wrapping arithmetic the backends give them.

use super::{fold_constant_operands, rewrite_block, Expr, Function};

pub(super) fn compile_in(f: &mut Function) {
    if f.fixed_params.is_empty() {
        return;
    }
    let fixed = f.fixed_params.clone();
    rewrite_block(&mut f.body, &mut |e| {
        if let Expr::Param(p) = e {
            if let Some(&(_, v)) = fixed.iter().find(|(q, _)| q == p) {
                *e = Expr::Int(v);
            }
        }
        fold_constant_operands(e);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::interp::test_memory::{run, scratch};
    use crate::ir::{Emitter, ParamRef};

    /// `for j in 0..n * 2 { y[j] = j < n ? n : 0 }` with `n` the dimension
    /// of `x`.
    fn kernel() -> Function {
        let n = Expr::Param(ParamRef::dim("x", 0));
        let mut e = Emitter::new();
        let hi = Expr::mul(n.clone(), Expr::Int(2));
        e.for_("j", Expr::Int(0), hi, |e, j| {
            let v = Expr::select(Expr::lt(j.clone(), n.clone()), n.clone(), Expr::Int(0));
            e.store(scratch("y"), j, v);
        });
        e.finish("k")
    }

    #[test]
    fn fixed_parameters_become_constants_and_fold() {
        let mut f = kernel();
        f.fixed_params = vec![(ParamRef::dim("x", 0), 3)];
        compile_in(&mut f);
        let text = f.to_string();
        assert!(text.contains("for j in 0..6 {"), "{text}");
        assert!(text.contains("y_y[j] = j < 3 ? 3 : 0"), "{text}");
        assert!(f.params().is_empty(), "{text}");
        assert_eq!(run(&f, vec![("y", vec![9; 6])], "y"), [3, 3, 3, 0, 0, 0]);
    }

    #[test]
    fn other_parameters_stay() {
        let mut f = kernel();
        f.fixed_params = vec![(ParamRef::dim("x", 1), 3)];
        let before = f.clone();
        compile_in(&mut f);
        assert_eq!(f, before);
    }
}
