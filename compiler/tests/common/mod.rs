//! Helpers shared by kernel tests: random operands and the oracle check.

#![allow(dead_code)]

use std::collections::BTreeMap;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::execute::prepare;
use tensor_compiler::format::{parse_format, Registry, TensorFormat};
use tensor_compiler::ir::passes::{for_codegen, Backend};
use tensor_compiler::notation::parse_assignment;
use tensor_compiler::oracle;

/// Deterministic pseudo-random numbers (xorshift), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn value(&mut self) -> f64 {
        (self.below(17) as f64 - 8.0) / 4.0
    }
}

/// A random tensor: at `density` 1.0 (or more) every position holds a
/// nonzero value, as a dense operand does; below, about `density` of the
/// positions drawn at random, with some duplicates and in no order.
/// (Drawing `size` coordinates with replacement would leave about a third
/// of a "dense" operand's positions empty: zeros in `x` that hide a kernel
/// skipping an entry.)
pub fn random(dims: &[usize], density: f64, rng: &mut Rng) -> CooTensor {
    let mut t = CooTensor::new(dims.to_vec());
    let total: usize = dims.iter().product();
    let mut c = vec![0u32; dims.len()];
    let nonzero = |rng: &mut Rng| {
        let v = rng.value();
        if v == 0.0 {
            1.0
        } else {
            v
        }
    };
    if density >= 1.0 {
        let vals: Vec<f64> = (0..total).map(|_| nonzero(rng)).collect();
        return CooTensor::from_dense(dims.to_vec(), &vals);
    }
    let n = ((total as f64) * density).ceil() as usize;
    for _ in 0..n {
        for (d, &m) in dims.iter().enumerate() {
            c[d] = rng.below(m) as u32;
        }
        t.push(&c, nonzero(rng));
    }
    t
}

pub use tensor_compiler::oracle::close;

/// Random tensors by name: (name, dims, density), drawn in order from one
/// seeded generator.
pub fn random_data(entries: &[(&str, Vec<usize>, f64)], seed: u64) -> BTreeMap<String, CooTensor> {
    let mut rng = Rng(seed);
    entries
        .iter()
        .map(|(n, d, dens)| (n.to_string(), random(d, *dens, &mut rng)))
        .collect()
}

/// The formats of every tensor of `a`: those in `specs`, dense for the
/// rest (the tensors of `data` and the result, of order `out_order`).
pub fn formats_rest_dense(
    a: &tensor_compiler::notation::Assignment,
    specs: &[(&str, &str)],
    data: &BTreeMap<String, CooTensor>,
    out_order: usize,
) -> BTreeMap<String, TensorFormat> {
    let mut orders: BTreeMap<String, usize> =
        data.iter().map(|(k, v)| (k.clone(), v.order())).collect();
    orders.insert(a.lhs.tensor.clone(), out_order);
    let mut all: Vec<(&str, &str)> = specs.to_vec();
    for name in orders.keys() {
        if !all.iter().any(|(n, _)| n == name) {
            all.push((name.as_str(), "dense"));
        }
    }
    formats_of(&all, &orders)
}

pub fn formats_of(
    specs: &[(&str, &str)],
    order_of: &BTreeMap<String, usize>,
) -> BTreeMap<String, TensorFormat> {
    let r = Registry::builtin();
    specs
        .iter()
        .map(|(n, f)| {
            (
                n.to_string(),
                parse_format(f, order_of[*n], &r).unwrap_or_else(|e| panic!("{n}:{f}: {e}")),
            )
        })
        .collect()
}

/// Compile and run `expr` with the given formats on `data`, compare with
/// the oracle. Returns the error text when the compiler refuses.
pub fn check(
    expr: &str,
    specs: &[(&str, &str)],
    data: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
) -> Result<(), String> {
    tensor_compiler::jit::poison_unzeroed_room(true);
    let a = parse_assignment(expr).map_err(|e| e.to_string())?;
    let formats = formats_rest_dense(&a, specs, data, out_dims.len());
    let ctx = |e: String| format!("{expr} with {specs:?}: {e}");
    let mut prepared =
        prepare("kernel", &a, &formats, data, out_dims, None).map_err(|e| ctx(e.to_string()))?;
    prepared.run().map_err(|e| ctx(e.to_string()))?;
    let got = prepared
        .result()
        .map_err(|e| format!("{}\n{}", ctx(e.to_string()), prepared.kernel.function))?;
    let want = oracle::evaluate(&a, data, out_dims, None)?;
    // The IR interpreter (bounds-checked) must agree with the JIT.
    let mut interpreted =
        prepare("kernel", &a, &formats, data, out_dims, None).map_err(|e| ctx(e.to_string()))?;
    interpreted.run_interpreted().map_err(|e| {
        format!(
            "{}\n{}",
            ctx(format!("interpreter: {e}")),
            prepared.kernel.function
        )
    })?;
    let by_ir = interpreted.result().map_err(|e| ctx(e.to_string()))?;
    close(&by_ir, &want).map_err(|e| {
        format!(
            "{expr} with {specs:?}: wrong result from the IR itself: {e}\n{}",
            prepared.kernel.function
        )
    })?;
    // The C's IR too, where it differs (shorter runs added in registers).
    let f = &prepared.kernel.function;
    if for_codegen(f, Backend::C) != for_codegen(f, Backend::Cranelift) {
        let mut as_c = prepare("kernel", &a, &formats, data, out_dims, None)
            .map_err(|e| ctx(e.to_string()))?;
        as_c.run_interpreted_as(Backend::C)
            .map_err(|e| format!("{}\n{f}", ctx(format!("interpreter, the C's IR: {e}"))))?;
        let by_c_ir = as_c.result().map_err(|e| ctx(e.to_string()))?;
        close(&by_c_ir, &want).map_err(|e| {
            format!("{expr} with {specs:?}: wrong result from the C's IR: {e}\n{f}")
        })?;
    }
    close(&got, &want).map_err(|e| {
        format!(
            "{expr} with {specs:?}: wrong result: {e}\n{}",
            prepared.kernel.function
        )
    })?;
    // Again into the arrays the first run left, as timed runs and the
    // editor's reruns do: their contents are kept, their spare room is
    // poison (`jit::poison_unzeroed_room`). Not where the kernel adds
    // into what the result held (`+=`): a second run adds twice.
    if prepared.kernel.assignment.accumulate && prepared.kernel.prior.is_none() {
        return Ok(());
    }
    prepared.run().map_err(|e| ctx(e.to_string()))?;
    let again = prepared.result().map_err(|e| ctx(e.to_string()))?;
    close(&again, &want).map_err(|e| {
        format!(
            "{expr} with {specs:?}: wrong result of a second run into the first's arrays: {e}\n{}",
            prepared.kernel.function
        )
    })
}

/// `got` against `want`, element by element, to a relative 1e-9.
pub fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (x, y)) in got.iter().zip(want).enumerate() {
        assert!(
            (x - y).abs() <= 1e-9 * (1.0 + y.abs()),
            "{what}: element {i} = {x}, expected {y}"
        );
    }
}

/// SpDM's operand and answer for matrix `b` (m x n): a dense n x `k`
/// matrix D whose element at row-major position `x` is `value(x)`, and
/// B·D (m x k, row-major) by plain loops over `b`'s entries.
pub fn spdm_reference(
    b: &CooTensor,
    k: usize,
    value: impl Fn(usize) -> f64,
) -> (CooTensor, Vec<f64>) {
    let (m, n) = (b.dims[0], b.dims[1]);
    let dv: Vec<f64> = (0..n * k).map(value).collect();
    let mut want = vec![0.0; m * k];
    for e in 0..b.nnz() {
        let c = b.coord(e);
        for col in 0..k {
            want[c[0] as usize * k + col] += b.vals[e] * dv[c[1] as usize * k + col];
        }
    }
    (CooTensor::from_dense(vec![n, k], &dv), want)
}

/// DIA and ELL store a dense block per diagonal / slot: skip them where
/// that padding would dwarf the matrix.
pub fn padding_ok(t: &CooTensor, f: &str) -> bool {
    let n = t.dims.iter().product::<usize>().max(1);
    match f {
        "DIA" => {
            let mut offs: Vec<i64> = (0..t.nnz())
                .map(|e| t.coord(e)[1] as i64 - t.coord(e)[0] as i64)
                .collect();
            offs.sort_unstable();
            offs.dedup();
            offs.len() * t.dims[0] <= 40 * t.nnz().max(1)
        }
        "ELL" => {
            let mut counts = vec![0usize; t.dims[0]];
            for e in 0..t.nnz() {
                counts[t.coord(e)[0] as usize] += 1;
            }
            counts.iter().max().copied().unwrap_or(0) * t.dims[0] <= 40 * t.nnz().max(1)
        }
        _ => n > 0,
    }
}
