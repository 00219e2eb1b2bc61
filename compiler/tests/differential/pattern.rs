//! The structural check: a sparse result stores an entry (zero or not)
//! only where the expression can have one. The pattern is the oracle run
//! on the operands' stored positions (every stored value, explicit zeros
//! and padding included, read as 1) with subtraction read as addition and
//! negation dropped, so that nothing cancels: a position the pattern leaves
//! out is one where no term met an entry. Catches kernels that append an
//! explicit zero for every coordinate they visit (an inner product that
//! stored all rows x columns), which value comparison cannot see.

use std::collections::{BTreeMap, BTreeSet};
use tensor_compiler::coo::CooTensor;
use tensor_compiler::format::{CoordMap, TensorFormat};
use tensor_compiler::notation::{Assignment, BinOp, Expr};
use tensor_compiler::oracle;
use tensor_compiler::storage::{self, Tensor};

/// A description of the first stored result entry outside the pattern,
/// or `None` (also when the result's format stores positions of its own,
/// a dense level below a sparse one or hidden levels, which the check
/// cannot judge).
pub fn outside_pattern(
    a: &Assignment,
    result_format: &TensorFormat,
    data: &BTreeMap<String, CooTensor>,
    packed: &[Tensor],
    initial: Option<&CooTensor>,
    got: &CooTensor,
) -> Option<String> {
    if !checkable(result_format) {
        return None;
    }
    let ones = |mut c: CooTensor| {
        c.vals.iter_mut().for_each(|v| *v = 1.0);
        c
    };
    // An operand's stored positions as packed (a DIA diagonal's or a
    // block's padding included), else as given.
    let stored = |name: &String, given: &CooTensor| match packed.iter().find(|t| t.name == *name) {
        Some(t) => storage::unpack(t).ok(),
        None => Some(given.clone()),
    };
    let data: BTreeMap<String, CooTensor> = data
        .iter()
        .filter_map(|(name, given)| Some((name.clone(), ones(stored(name, given)?))))
        .collect();
    let initial = initial.cloned().map(ones);
    let positive = Assignment {
        rhs: without_cancellation(&a.rhs),
        ..a.clone()
    };
    let pattern = oracle::evaluate(&positive, &data, &got.dims, initial.as_ref()).ok()?;
    let order = got.dims.len();
    let allowed: BTreeSet<&[u32]> = (0..pattern.vals.len())
        .filter(|&e| pattern.vals[e] != 0.0)
        .map(|e| &pattern.coords[e * order..(e + 1) * order])
        .collect();
    let extra: Vec<usize> = (0..got.vals.len())
        .filter(|&e| !allowed.contains(&got.coords[e * order..(e + 1) * order]))
        .collect();
    let &first = extra.first()?;
    Some(format!(
        "the result stores {} entries where no term has one (the first at {:?}, value {})",
        extra.len(),
        &got.coords[first * order..(first + 1) * order],
        got.vals[first]
    ))
}

/// Dense levels (which store every position of their parent) only above
/// the sparse ones, and no hidden levels.
fn checkable(f: &TensorFormat) -> bool {
    let first_sparse = f.levels.iter().position(|l| !l.is_dense());
    matches!(f.map, CoordMap::Modes(_))
        && first_sparse.is_some_and(|k| f.levels[k..].iter().all(|l| !l.is_dense()))
}

fn without_cancellation(e: &Expr) -> Expr {
    match e {
        Expr::Access(_) => e.clone(),
        Expr::Const(_, s) => Expr::Const(1.0, *s),
        Expr::Neg(x, _) => without_cancellation(x),
        Expr::Bin(op, x, y, s) => {
            let op = if *op == BinOp::Sub { BinOp::Add } else { *op };
            Expr::Bin(
                op,
                Box::new(without_cancellation(x)),
                Box::new(without_cancellation(y)),
                *s,
            )
        }
    }
}
