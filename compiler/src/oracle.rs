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
    let var_dims = index_extents(a, inputs, out_dims)?;
    let mut dense: HashMap<&str, Dense> = HashMap::new();
    for acc in a.rhs.accesses() {
        let t = &inputs[&acc.tensor];
        dense.entry(acc.tensor.as_str()).or_insert_with(|| Dense {
            dims: t.dims.clone(),
            data: t.to_dense(),
        });
    }
    let r = place_reductions(a);
    let free: Vec<String> = a.lhs.vars().iter().map(|s| s.to_string()).collect();
    let size: usize = out_dims.iter().product();
    let mut out = match initial {
        Some(t) if a.accumulate => t.to_dense(),
        _ => vec![0.0; size],
    };
    for_each_point(&free, out_dims, &mut HashMap::new(), &mut |lin, env| {
        out[lin] += eval(&r, &dense, &var_dims, env)
    });
    Ok(CooTensor::from_dense(out_dims.to_vec(), &out))
}

/// Each index variable's extent, from the operands and `out_dims`; an
/// error where an operand is missing, has another order than its access,
/// or two extents of one variable differ.
fn index_extents(
    a: &Assignment,
    inputs: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
) -> Result<HashMap<String, usize>, String> {
    let mut var_dims: HashMap<String, usize> = HashMap::new();
    let mut note = |name: &str, n: usize| match var_dims.insert(name.to_string(), n) {
        Some(old) if old != n => Err(format!("index `{name}` ranges over {old} and {n}")),
        _ => Ok(()),
    };
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
            note(&i.name, *n)?;
        }
    }
    for (i, n) in a.lhs.indices.iter().zip(out_dims) {
        note(&i.name, *n)?;
    }
    Ok(var_dims)
}

/// Call `f` at every point of the variables `vars` over `extents`, with
/// its linear index (row-major) and `env` holding its coordinates.
fn for_each_point(
    vars: &[String],
    extents: &[usize],
    env: &mut HashMap<String, usize>,
    f: &mut dyn FnMut(usize, &mut HashMap<String, usize>),
) {
    let total: usize = extents.iter().product();
    for lin in 0..total {
        let mut rest = lin;
        for d in (0..vars.len()).rev() {
            env.insert(vars[d].clone(), rest % extents[d]);
            rest /= extents[d];
        }
        f(lin, env);
    }
}

/// The linear index of access `acc` of a tensor of `dims` at `env`.
fn linear(acc: &crate::notation::Access, dims: &[usize], env: &HashMap<String, usize>) -> usize {
    let mut lin = 0;
    for (i, n) in acc.indices.iter().zip(dims) {
        lin = lin * n + env[&i.name];
    }
    lin
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
            d.data[linear(acc, &d.dims, env)]
        }
        RExpr::Sum(vars, body) => {
            let extents: Vec<usize> = vars
                .iter()
                .map(|v| dims.get(v).copied().unwrap_or(0))
                .collect();
            let mut acc = 0.0;
            for_each_point(vars, &extents, env, &mut |_, env| {
                acc += eval(body, t, dims, env)
            });
            acc
        }
    }
}

/// `evaluate` reading an entry an operand does not store as no entry
/// rather than as zero: no term of a product (`inf` times an absent entry
/// adds nothing, where `evaluate` reads `0 * inf`, a NaN), and nothing in
/// a sum. The two agree wherever the stored values are finite; this is the
/// oracle for operands holding infinities and NaNs. Operands named in
/// `all_stored` store every coordinate (all-dense formats: their zeros
/// are values, and `0 * inf` is NaN there, as in NumPy).
pub fn evaluate_stored(
    a: &Assignment,
    inputs: &BTreeMap<String, CooTensor>,
    all_stored: &std::collections::BTreeSet<String>,
    out_dims: &[usize],
    initial: Option<&CooTensor>,
) -> Result<CooTensor, String> {
    let dims = index_extents(a, inputs, out_dims)?;
    let mut stored: HashMap<&str, (Vec<usize>, Vec<Option<f64>>)> = HashMap::new();
    for acc in a.rhs.accesses() {
        let t = &inputs[&acc.tensor];
        stored.entry(acc.tensor.as_str()).or_insert_with(|| {
            let absent = all_stored.contains(&acc.tensor).then_some(0.0);
            let mut slots = vec![absent; t.dims.iter().product()];
            for e in 0..t.nnz() {
                let slot = &mut slots[t.linear_index(t.coord(e))];
                *slot = Some(slot.unwrap_or(0.0) + t.vals[e]);
            }
            (t.dims.clone(), slots)
        });
    }
    let r = place_reductions(a);
    let free: Vec<String> = a.lhs.vars().iter().map(|s| s.to_string()).collect();
    let mut out = match initial {
        Some(t) if a.accumulate => t.to_dense(),
        _ => vec![0.0; out_dims.iter().product()],
    };
    for_each_point(&free, out_dims, &mut HashMap::new(), &mut |lin, env| {
        out[lin] += eval_stored(&r, &stored, &dims, env).unwrap_or(0.0)
    });
    Ok(CooTensor::from_dense(out_dims.to_vec(), &out))
}

/// A term's value, or `None` where no operand entry takes part.
fn eval_stored(
    e: &RExpr,
    t: &HashMap<&str, (Vec<usize>, Vec<Option<f64>>)>,
    dims: &HashMap<String, usize>,
    env: &mut HashMap<String, usize>,
) -> Option<f64> {
    match e {
        RExpr::Const(v) => Some(*v),
        RExpr::Neg(x) => eval_stored(x, t, dims, env).map(|v| -v),
        RExpr::Bin(op, a, b) => {
            let (x, y) = (eval_stored(a, t, dims, env), eval_stored(b, t, dims, env));
            match (op, x, y) {
                (BinOp::Mul, Some(x), Some(y)) => Some(x * y),
                (BinOp::Mul, ..) => None,
                (BinOp::Add, Some(x), Some(y)) => Some(x + y),
                (BinOp::Sub, Some(x), Some(y)) => Some(x - y),
                (BinOp::Sub, None, Some(y)) => Some(-y),
                (_, x, None) => x,
                (_, None, y) => y,
            }
        }
        RExpr::Access(acc) => {
            let (d, slots) = &t[acc.tensor.as_str()];
            slots[linear(acc, d, env)]
        }
        RExpr::Sum(vars, body) => {
            let extents: Vec<usize> = vars
                .iter()
                .map(|v| dims.get(v).copied().unwrap_or(0))
                .collect();
            let mut acc = None;
            for_each_point(vars, &extents, env, &mut |_, env| {
                if let Some(v) = eval_stored(body, t, dims, env) {
                    acc = Some(acc.unwrap_or(0.0) + v);
                }
            });
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
