//! The dense reference evaluator: index notation computed by brute force
//! over dense copies of the operands. The oracle for every kernel test; it
//! shares only the AST and the reduction placement with the compiler.

use crate::coo::CooTensor;
use crate::notation::reduce::{place_reductions, RExpr};
use crate::notation::{Assignment, BinOp};
use std::collections::{BTreeMap, HashMap};

/// The right-hand side with its index variables numbered and its operands
/// named by position: per point the evaluators only index vectors (names
/// looked up by hashing, per point, made the oracle most of a test's time).
enum Node {
    Const(f64),
    Neg(Box<Node>),
    Bin(BinOp, Box<Node>, Box<Node>),
    /// Operand number, and the variable number of each of its indices.
    Access(usize, Vec<usize>),
    /// The summed variables' numbers and extents.
    Sum(Vec<(usize, usize)>, Box<Node>),
}

/// `a`'s right-hand side with reductions placed, as a `Node`; the free
/// variables (the left-hand side's, numbered first) with their extents;
/// and the operands in the order `Node::Access` numbers them.
struct Numbered {
    rhs: Node,
    free: Vec<(usize, usize)>,
    operands: Vec<String>,
    vars: usize,
}

impl Numbered {
    fn new(a: &Assignment, extents: &HashMap<String, usize>, out_dims: &[usize]) -> Numbered {
        let mut names: Vec<String> = a.lhs.vars().iter().map(|s| s.to_string()).collect();
        let free = (0..names.len()).zip(out_dims.iter().copied()).collect();
        let mut operands = Vec::new();
        let rhs = number(&place_reductions(a), extents, &mut names, &mut operands);
        Numbered {
            rhs,
            free,
            operands,
            vars: names.len(),
        }
    }
}

fn number(
    e: &RExpr,
    extents: &HashMap<String, usize>,
    names: &mut Vec<String>,
    operands: &mut Vec<String>,
) -> Node {
    fn slot(list: &mut Vec<String>, name: &str) -> usize {
        match list.iter().position(|n| n == name) {
            Some(k) => k,
            None => {
                list.push(name.to_string());
                list.len() - 1
            }
        }
    }
    let mut sub =
        |x: &RExpr, names: &mut Vec<String>| Box::new(number(x, extents, names, operands));
    match e {
        RExpr::Const(v) => Node::Const(*v),
        RExpr::Neg(x) => Node::Neg(sub(x, names)),
        RExpr::Bin(op, x, y) => Node::Bin(*op, sub(x, names), sub(y, names)),
        RExpr::Sum(vars, body) => {
            let summed = vars
                .iter()
                .map(|v| (slot(names, v), extents.get(v).copied().unwrap_or(0)))
                .collect();
            Node::Sum(summed, sub(body, names))
        }
        RExpr::Access(acc) => Node::Access(
            slot(operands, &acc.tensor),
            acc.indices.iter().map(|i| slot(names, &i.name)).collect(),
        ),
    }
}

/// Evaluate `a` on `inputs`. The result has `out_dims`; with `+=` it starts
/// from `initial` (zero when absent).
pub fn evaluate(
    a: &Assignment,
    inputs: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
    initial: Option<&CooTensor>,
) -> Result<CooTensor, String> {
    let extents = index_extents(a, inputs, out_dims)?;
    let n = Numbered::new(a, &extents, out_dims);
    let dense: Vec<(Vec<usize>, Vec<f64>)> = n
        .operands
        .iter()
        .map(|name| (inputs[name].dims.clone(), inputs[name].to_dense()))
        .collect();
    let size: usize = out_dims.iter().product();
    let mut out = match initial {
        Some(t) if a.accumulate => t.to_dense(),
        _ => vec![0.0; size],
    };
    for_each_point(&n.free, &mut vec![0; n.vars], &mut |lin, env| {
        out[lin] += eval(&n.rhs, &dense, env)
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

/// Call `f` at every point of the variables `vars` (number, extent), with
/// its linear index (row-major) and `env` holding its coordinates at the
/// variables' numbers.
fn for_each_point(
    vars: &[(usize, usize)],
    env: &mut [usize],
    f: &mut dyn FnMut(usize, &mut [usize]),
) {
    let total: usize = vars.iter().map(|v| v.1).product();
    for lin in 0..total {
        let mut rest = lin;
        for &(var, extent) in vars.iter().rev() {
            env[var] = rest % extent;
            rest /= extent;
        }
        f(lin, env);
    }
}

/// The linear index (row-major) into a tensor of `dims` of the access by
/// the variables numbered `vars` at `env`.
fn linear(vars: &[usize], dims: &[usize], env: &[usize]) -> usize {
    vars.iter()
        .zip(dims)
        .fold(0, |lin, (v, n)| lin * n + env[*v])
}

fn eval(e: &Node, t: &[(Vec<usize>, Vec<f64>)], env: &mut [usize]) -> f64 {
    match e {
        Node::Const(v) => *v,
        Node::Neg(x) => -eval(x, t, env),
        Node::Bin(op, a, b) => {
            let (x, y) = (eval(a, t, env), eval(b, t, env));
            match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
            }
        }
        Node::Access(k, vars) => {
            let (dims, data) = &t[*k];
            data[linear(vars, dims, env)]
        }
        Node::Sum(vars, body) => {
            let mut acc = 0.0;
            for_each_point(vars, env, &mut |_, env| acc += eval(body, t, env));
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
    let extents = index_extents(a, inputs, out_dims)?;
    let n = Numbered::new(a, &extents, out_dims);
    let stored: Vec<(Vec<usize>, Vec<Option<f64>>)> = n
        .operands
        .iter()
        .map(|name| {
            let t = &inputs[name];
            let absent = all_stored.contains(name).then_some(0.0);
            let mut slots = vec![absent; t.dims.iter().product()];
            for e in 0..t.nnz() {
                let slot = &mut slots[t.linear_index(t.coord(e))];
                *slot = Some(slot.unwrap_or(0.0) + t.vals[e]);
            }
            (t.dims.clone(), slots)
        })
        .collect();
    let mut out = match initial {
        Some(t) if a.accumulate => t.to_dense(),
        _ => vec![0.0; out_dims.iter().product()],
    };
    for_each_point(&n.free, &mut vec![0; n.vars], &mut |lin, env| {
        out[lin] += eval_stored(&n.rhs, &stored, env).unwrap_or(0.0)
    });
    Ok(CooTensor::from_dense(out_dims.to_vec(), &out))
}

/// A term's value, or `None` where no operand entry takes part.
fn eval_stored(e: &Node, t: &[(Vec<usize>, Vec<Option<f64>>)], env: &mut [usize]) -> Option<f64> {
    match e {
        Node::Const(v) => Some(*v),
        Node::Neg(x) => eval_stored(x, t, env).map(|v| -v),
        Node::Bin(op, a, b) => {
            let (x, y) = (eval_stored(a, t, env), eval_stored(b, t, env));
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
        Node::Access(k, vars) => {
            let (dims, slots) = &t[*k];
            slots[linear(vars, dims, env)]
        }
        Node::Sum(vars, body) => {
            let mut acc = None;
            for_each_point(vars, env, &mut |_, env| {
                if let Some(v) = eval_stored(body, t, env) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse_assignment;

    fn inputs(list: &[(&str, Vec<usize>, Vec<f64>)]) -> BTreeMap<String, CooTensor> {
        list.iter()
            .map(|(n, dims, data)| (n.to_string(), CooTensor::from_dense(dims.clone(), data)))
            .collect()
    }

    fn dense(expr: &str, data: &BTreeMap<String, CooTensor>, out_dims: &[usize]) -> Vec<f64> {
        let a = parse_assignment(expr).expect("test expression parses");
        evaluate(&a, data, out_dims, None)
            .expect("test operands fit")
            .to_dense()
    }

    #[test]
    fn products_and_sums_by_hand() {
        // A = [[1, 2], [0, 3], [4, 0]], x = [5, 6]
        let data = inputs(&[
            ("A", vec![3, 2], vec![1.0, 2.0, 0.0, 3.0, 4.0, 0.0]),
            ("x", vec![2], vec![5.0, 6.0]),
            ("z", vec![3], vec![1.0, 1.0, 1.0]),
        ]);
        assert_eq!(
            dense("y(i) = A(i,j) * x(j)", &data, &[3]),
            [17.0, 18.0, 20.0]
        );
        // The sum over `j` covers the product only: `z` is added once.
        assert_eq!(
            dense("y(i) = A(i,j) * x(j) + z(i)", &data, &[3]),
            [18.0, 19.0, 21.0]
        );
        // A transpose, then a scalar: every element of A times itself.
        assert_eq!(
            dense("B(j,i) = A(i,j)", &data, &[2, 3]),
            [1.0, 0.0, 4.0, 2.0, 3.0, 0.0]
        );
        assert_eq!(dense("a = A(i,j) * A(i,j)", &data, &[]), [30.0]);
        // Both operands read at the same variables in another order.
        assert_eq!(
            dense("w(j) = A(i,j) * z(i) - x(j)", &data, &[2]),
            [0.0, -1.0]
        );
    }

    #[test]
    fn an_accumulating_assignment_starts_from_the_initial_result() {
        let data = inputs(&[("b", vec![2], vec![1.0, 2.0])]);
        let a = parse_assignment("y(i) += b(i)").expect("parses");
        let initial = CooTensor::from_dense(vec![2], &[10.0, 20.0]);
        let y = evaluate(&a, &data, &[2], Some(&initial)).expect("fits");
        assert_eq!(y.to_dense(), [11.0, 22.0]);
    }

    #[test]
    fn absent_entries_are_no_terms_for_the_stored_oracle() {
        // A stores (0,0) only; x(1) is infinite: evaluate reads 0 * inf.
        let data = inputs(&[
            ("A", vec![1, 2], vec![2.0, 0.0]),
            ("x", vec![2], vec![3.0, f64::INFINITY]),
        ]);
        let a = parse_assignment("y(i) = A(i,j) * x(j)").expect("parses");
        assert!(evaluate(&a, &data, &[1], None).expect("fits").to_dense()[0].is_nan());
        let none = std::collections::BTreeSet::new();
        let y = evaluate_stored(&a, &data, &none, &[1], None).expect("fits");
        assert_eq!(y.to_dense(), [6.0]);
        // Stored as dense, A's zero is a value: 0 * inf is NaN again.
        let all: std::collections::BTreeSet<String> = ["A".to_string()].into();
        let y = evaluate_stored(&a, &data, &all, &[1], None).expect("fits");
        assert!(y.to_dense()[0].is_nan());
    }

    #[test]
    fn mismatched_extents_are_errors() {
        let data = inputs(&[
            ("A", vec![2, 2], vec![1.0; 4]),
            ("x", vec![3], vec![1.0; 3]),
        ]);
        let a = parse_assignment("y(i) = A(i,j) * x(j)").expect("parses");
        let e = evaluate(&a, &data, &[2], None).err().expect("an error");
        assert!(e.contains("index `j` ranges over 2 and 3"), "{e}");
    }
}
