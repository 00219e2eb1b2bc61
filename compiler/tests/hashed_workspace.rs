//! The hashed workspace row: a result's last level wider than a dense row
//! may span (`TENSOR_WORKSPACE_ROW_LIMIT`, set to 0 here so that every
//! workspace in this binary is hashed) is assembled through a hash table of
//! the coordinates touched. Checked against the oracle and the IR
//! interpreter on rows that double the table several times, sorted and
//! unordered results, `+=` and the result on the right-hand side, on
//! threads, and with a real 2e9-column result on both tiers.

mod common;
use common::*;
use std::collections::BTreeMap;
use tensor_compiler::backend::cc;
use tensor_compiler::execute::prepare;
use tensor_compiler::notation::parse_assignment;
use tensor_compiler::threads::Threads;

fn hashed_rows_only() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        std::env::set_var("TENSOR_WORKSPACE_ROW_LIMIT", "0");
        std::env::set_var(
            "TENSOR_CACHE_DIR",
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hashed-workspace-cc"),
        );
    });
}

fn ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

/// Whether `expr`'s kernel goes through a hashed row.
fn hashed(
    expr: &str,
    specs: &[(&str, &str)],
    d: &BTreeMap<String, tensor_compiler::coo::CooTensor>,
    out_dims: &[usize],
) -> bool {
    let a = parse_assignment(expr).unwrap();
    let p = prepare(
        "kernel",
        &a,
        &formats_rest_dense(&a, specs, d, out_dims.len()),
        d,
        out_dims,
        None,
    )
    .unwrap_or_else(|e| panic!("{expr}: {e}"));
    p.kernel
        .function
        .to_string()
        .contains("hash table of the coordinates touched")
}

#[test]
fn spgemm_and_friends_through_a_hashed_row() {
    hashed_rows_only();
    for seed in 1..4 {
        // Short rows, and rows of up to 1500 coordinates: the table (1024
        // slots to start) doubles twice within a row.
        for (rows, inner, cols, density) in [(30, 20, 40, 0.2), (12, 40, 1500, 0.3)] {
            let d = random_data(
                &[
                    ("B", vec![rows, inner], density),
                    ("C", vec![inner, cols], density),
                    ("E", vec![inner, rows], density),
                    ("D", vec![rows, cols], density),
                ],
                seed,
            );
            for a in [
                "CSR",
                "dense,compressed(unordered)",
                "dense,compressed(nonunique)",
            ] {
                let specs = [("A", a), ("B", "CSR"), ("C", "CSR")];
                ok(check("A(i,j) = B(i,k) * C(k,j)", &specs, &d, &[rows, cols]));
                assert!(
                    hashed("A(i,j) = B(i,k) * C(k,j)", &specs, &d, &[rows, cols]),
                    "{specs:?}"
                );
            }
            ok(check(
                "A(i,j) = B(i,k) * C(k,j)",
                &[("A", "CSC"), ("B", "CSC"), ("C", "CSC")],
                &d,
                &[rows, cols],
            ));
            ok(check(
                "A(i,j) = B(i,k) * C(k,j) + 2 * B(i,k) * C(k,j)",
                &[("A", "CSR"), ("B", "CSR"), ("C", "COO")],
                &d,
                &[rows, cols],
            ));
            // Terms under one rows loop, adding into the hashed row.
            ok(check(
                "A(i,j) = B(i,k) * C(k,j) + D(i,j)",
                &[("A", "CSR"), ("B", "CSR"), ("C", "CSR"), ("D", "CSR")],
                &d,
                &[rows, cols],
            ));
            assert!(hashed(
                "A(i,j) = B(i,k) * C(k,j) + D(i,j)",
                &[("A", "CSR"), ("B", "CSR"), ("C", "CSR"), ("D", "CSR")],
                &d,
                &[rows, cols]
            ));
            // A transpose added to a matrix: coordinates out of order.
            ok(check(
                "A(i,j) = B(i,j) + E(j,i)",
                &[("A", "CSR"), ("B", "CSR"), ("E", "CSR")],
                &d,
                &[rows, inner],
            ));
        }
    }
}

#[test]
fn a_hashed_row_on_threads_gives_the_one_thread_answer() {
    hashed_rows_only();
    let d = random_data(&[("B", vec![300, 40], 0.2), ("C", vec![40, 2000], 0.2)], 9);
    let a = parse_assignment("A(i,j) = B(i,k) * C(k,j)").unwrap();
    let formats = formats_rest_dense(&a, &[("A", "CSR"), ("B", "CSR"), ("C", "CSR")], &d, 2);
    let want = tensor_compiler::oracle::evaluate(&a, &d, &[300, 2000], None).unwrap();
    for threads in [1, 2, 3, 7] {
        let mut p = prepare("kernel", &a, &formats, &d, &[300, 2000], None).unwrap();
        p.threads = Threads::exactly(threads);
        p.run().unwrap();
        close(&p.result().unwrap(), &want).unwrap_or_else(|e| panic!("{threads} threads: {e}"));
    }
}

#[test]
fn a_two_billion_column_product_on_both_tiers() {
    hashed_rows_only();
    // The row a dense workspace would need: 2e9 coordinates, 32 GB.
    let cols = 2_000_000_000usize;
    let mut rng = Rng(4);
    let b = random(&[50, 60], 0.1, &mut rng);
    let mut c = tensor_compiler::coo::CooTensor::new(vec![60, cols]);
    for k in 0..60u32 {
        for n in 0..8u64 {
            let j = (k as u64 * 33_333_331 + n * 249_999_989) % cols as u64;
            c.push(&[k, j as u32], 1.0 + n as f64);
        }
    }
    let d: BTreeMap<String, tensor_compiler::coo::CooTensor> =
        [("B".to_string(), b), ("C".to_string(), c)]
            .into_iter()
            .collect();
    let a = parse_assignment("A(i,j) = B(i,k) * C(k,j)").unwrap();
    let formats = formats_rest_dense(&a, &[("A", "CSR"), ("B", "CSR"), ("C", "CSR")], &d, 2);
    // The dense oracle cannot hold the result: the product by hand.
    let mut by_hand: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    for (e, &bv) in d["B"].vals.iter().enumerate() {
        let (i, k) = (d["B"].coord(e)[0], d["B"].coord(e)[1]);
        for (f, &cv) in d["C"].vals.iter().enumerate() {
            if d["C"].coord(f)[0] == k {
                *by_hand.entry((i, d["C"].coord(f)[1])).or_default() += bv * cv;
            }
        }
    }
    let same = |got: tensor_compiler::coo::CooTensor, tier: &str| {
        let got = got.canonical();
        let entries: Vec<((u32, u32), f64)> = (0..got.nnz())
            .map(|e| ((got.coord(e)[0], got.coord(e)[1]), got.vals[e]))
            .collect();
        assert_eq!(entries.len(), by_hand.len(), "{tier}: entries");
        for (((i, j), v), ((wi, wj), w)) in entries.iter().zip(&by_hand) {
            assert!(
                (i, j) == (wi, wj) && (v - w).abs() <= 1e-9 * (1.0 + w.abs()),
                "{tier}: ({i}, {j}) = {v}, want ({wi}, {wj}) = {w}"
            );
        }
    };
    let mut p = prepare("kernel", &a, &formats, &d, &[50, cols], None).unwrap();
    assert!(p
        .kernel
        .function
        .to_string()
        .contains("hash table of the coordinates touched"));
    p.run().unwrap();
    same(p.result().unwrap(), "cranelift");
    match cc::compiler() {
        Ok(_) => {
            let mut p = prepare("kernel", &a, &formats, &d, &[50, cols], None).unwrap();
            p.compiled = cc::compile(&p.kernel.function).unwrap();
            p.run().unwrap();
            same(p.result().unwrap(), "cc");
        }
        Err(e) => println!("skipped the cc tier: {e}"),
    }
}
