//! The dense reference evaluator: index notation computed by brute force
//! over dense copies of the operands. The oracle for every kernel test; it
//! shares only the AST and the reduction placement with the compiler.

use crate::coo::CooTensor;
use crate::notation::reduce::{place_reductions, RExpr};
use crate::notation::{Assignment, BinOp};
use std::collections::{BTreeMap, HashMap};

struct Dense {
    dims: Vec<usize>,
    data: Vec<f64>,
}

/// Evaluate `a` on `inputs`. The result has `out_dims`; with `+=` it starts
/// from `initial` (zero when absent).
pub fn evaluate(
    a: &Assignment,
    inputs: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
    initial: Option<&CooTensor>,
) -> Result<CooTensor, String> {
    let mut dense: HashMap<&str, Dense> = HashMap::new();
    let mut var_dims: HashMap<String, usize> = HashMap::new();
    for acc in a.rhs.accesses() {
        let t = inputs
            .get(&acc.tensor)
            .ok_or_else(|| format!("no input tensor `{}`", acc.tensor))?;
        if t.order() != acc.indices.len() {
            return Err(format!(
                "{} has order {} but is indexed by {} variables",
                acc.tensor,
                t.order(),
                acc.indices.len()
            ));
        }
        for (i, n) in acc.indices.iter().zip(&t.dims) {
            if let Some(old) = var_dims.insert(i.name.clone(), *n) {
                if old != *n {
                    return Err(format!("index `{}` ranges over {old} and {n}", i.name));
                }
            }
        }
        dense.entry(acc.tensor.as_str()).or_insert_with(|| Dense {
            dims: t.dims.clone(),
            data: t.to_dense(),
        });
    }
    for (i, n) in a.lhs.indices.iter().zip(out_dims) {
        if let Some(old) = var_dims.insert(i.name.clone(), *n) {
            if old != *n {
                return Err(format!("index `{}` ranges over {old} and {n}", i.name));
            }
        }
    }
    let r = place_reductions(a);
    let free: Vec<String> = a.lhs.vars().iter().map(|s| s.to_string()).collect();
    let size: usize = out_dims.iter().product();
    let mut out = match initial {
        Some(t) if a.accumulate => t.to_dense(),
        _ => vec![0.0; size],
    };
    let mut env: HashMap<String, usize> = HashMap::new();
    for (lin, slot) in out.iter_mut().enumerate() {
        let mut rest = lin;
        for d in (0..free.len()).rev() {
            env.insert(free[d].clone(), rest % out_dims[d]);
            rest /= out_dims[d];
        }
        *slot += eval(&r, &dense, &var_dims, &mut env);
    }
    Ok(CooTensor::from_dense(out_dims.to_vec(), &out))
}

fn eval(
    e: &RExpr,
    t: &HashMap<&str, Dense>,
    dims: &HashMap<String, usize>,
    env: &mut HashMap<String, usize>,
) -> f64 {
    match e {
        RExpr::Const(v) => *v,
        RExpr::Neg(x) => -eval(x, t, dims, env),
        RExpr::Bin(op, a, b) => {
            let (x, y) = (eval(a, t, dims, env), eval(b, t, dims, env));
            match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
            }
        }
        RExpr::Access(acc) => {
            let d = &t[acc.tensor.as_str()];
            let mut lin = 0;
            for (i, n) in acc.indices.iter().zip(&d.dims) {
                lin = lin * n + env[&i.name];
            }
            d.data[lin]
        }
        RExpr::Sum(vars, body) => {
            let extents: Vec<usize> = vars
                .iter()
                .map(|v| dims.get(v).copied().unwrap_or(0))
                .collect();
            let total: usize = extents.iter().product();
            let mut acc = 0.0;
            for lin in 0..total {
                let mut rest = lin;
                for d in (0..vars.len()).rev() {
                    env.insert(vars[d].clone(), rest % extents[d]);
                    rest /= extents[d];
                }
                acc += eval(body, t, dims, env);
            }
            acc
        }
    }
}

/// Whether two tensors agree entry by entry, within a relative tolerance of
/// 1e-9 (duplicates summed, absent entries zero): the test of every kernel.
pub fn close(a: &CooTensor, b: &CooTensor) -> Result<(), String> {
    let (a, b) = (a.to_dense(), b.to_dense());
    if a.len() != b.len() {
        return Err(format!("sizes {} vs {}", a.len(), b.len()));
    }
    for (n, (x, y)) in a.iter().zip(&b).enumerate() {
        if (x - y).abs() > 1e-9 * (1.0 + x.abs().max(y.abs())) {
            return Err(format!("entry {n}: {x} vs {y}"));
        }
    }
    Ok(())
}
