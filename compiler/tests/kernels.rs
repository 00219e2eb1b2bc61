//! Every kernel of the paper's evaluation, with the formats the paper pairs
//! it with, against the dense reference evaluator on random inputs.

mod common;
use common::*;
use std::collections::BTreeMap;

fn data(entries: &[(&str, Vec<usize>, f64)], seed: u64) -> BTreeMap<String, tensor_compiler::coo::CooTensor> {
    let mut rng = Rng(seed);
    entries.iter().map(|(n, d, dens)| (n.to_string(), random(d, *dens, &mut rng))).collect()
}

fn ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

#[test]
fn spmv_every_matrix_format() {
    for seed in 1..4 {
        let d = data(&[("A", vec![13, 11], 0.2), ("x", vec![11], 1.0)], seed);
        for f in ["CSR", "CSC", "COO", "COO-AoS", "DCSR", "ELL", "DIA", "BCSR(2)", "BCSR(4)", "CSB(3)", "dense", "CSF", "compressed,compressed:1,0"] {
            ok(check("y(i) = A(i,j) * x(j)", &[("A", f)], &d, &[13]));
        }
    }
}

#[test]
fn spmv_sparse_and_hash_vectors() {
    for seed in 1..4 {
        let d = data(&[("A", vec![9, 12], 0.3), ("x", vec![12], 0.3)], seed);
        for f in ["CSR", "DCSR", "COO"] {
            for xf in ["sparse", "hash", "dense"] {
                ok(check("y(i) = A(i,j) * x(j)", &[("A", f), ("x", xf)], &d, &[9]));
            }
        }
    }
}
