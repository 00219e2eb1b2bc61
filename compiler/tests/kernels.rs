//! Every kernel of the paper's evaluation, with the formats the paper pairs
//! it with, against the dense reference evaluator on random inputs.

mod common;
use common::*;

fn ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

#[test]
fn spmv_every_matrix_format() {
    for seed in 1..4 {
        let d = random_data(&[("A", vec![13, 11], 0.2), ("x", vec![11], 1.0)], seed);
        for f in [
            "CSR",
            "CSC",
            "COO",
            "COO-AoS",
            "DCSR",
            "ELL",
            "DIA",
            "BCSR(2)",
            "BCSR(4)",
            "CSB(3)",
            "dense",
            "CSF",
            "compressed,compressed:1,0",
        ] {
            ok(check("y(i) = A(i,j) * x(j)", &[("A", f)], &d, &[13]));
        }
    }
}

#[test]
fn spmv_sparse_and_hash_vectors() {
    for seed in 1..4 {
        let d = random_data(&[("A", vec![9, 12], 0.3), ("x", vec![12], 0.3)], seed);
        for f in ["CSR", "DCSR", "COO"] {
            for xf in ["sparse", "hash", "dense"] {
                ok(check(
                    "y(i) = A(i,j) * x(j)",
                    &[("A", f), ("x", xf)],
                    &d,
                    &[9],
                ));
            }
        }
    }
}

#[test]
fn matrix_adds() {
    for seed in 1..4 {
        let d = random_data(&[("B", vec![10, 12], 0.2), ("C", vec![10, 12], 0.2)], seed);
        for (a, b, c) in [
            ("CSR", "CSR", "CSR"),
            ("COO", "COO", "COO"),
            ("dense", "CSR", "COO"),
            ("dense", "DIA", "CSR"),
            ("DCSR", "DCSR", "CSR"),
            ("dense", "ELL", "COO"),
            ("CSR", "CSR", "dense"),
            ("dense", "BCSR(3)", "CSR"),
        ] {
            ok(check(
                "A(i,j) = B(i,j) + C(i,j)",
                &[("A", a), ("B", b), ("C", c)],
                &d,
                &[10, 12],
            ));
            ok(check(
                "A(i,j) = B(i,j) - 2 * C(i,j)",
                &[("A", a), ("B", b), ("C", c)],
                &d,
                &[10, 12],
            ));
        }
    }
}

#[test]
fn unordered_union_runs_through_separate_nests() {
    let d = random_data(&[("B", vec![6, 6], 0.3), ("C", vec![6, 6], 0.3)], 2);
    // An unordered operand cannot be merged: with a dense result each term
    // runs as its own nest; with an appended result the nests append to a
    // coordinate buffer that is packed afterwards.
    for a in ["dense", "CSR", "DCSR", "COO", "CSC"] {
        ok(check(
            "A(i,j) = B(i,j) + C(i,j)",
            &[("A", a), ("B", "hashed,hashed"), ("C", "CSR")],
            &d,
            &[6, 6],
        ));
    }
}

#[test]
fn elementwise_products_figure1() {
    for seed in 1..4 {
        let d = random_data(&[("B", vec![9, 8], 0.3), ("C", vec![9, 8], 0.3)], seed);
        for (b, c) in [
            ("COO", "dense"),
            ("CSR", "dense"),
            ("CSR", "COO"),
            ("COO", "COO"),
            ("DIA", "CSR"),
            ("hashed,hashed", "CSR"),
        ] {
            for a in ["dense", "CSR", "COO", "DCSR"] {
                // DIA visits rows once per diagonal, not in the order an
                // appended result needs: such results go through a buffer.
                ok(check(
                    "A(i,j) = B(i,j) * C(i,j)",
                    &[("A", a), ("B", b), ("C", c)],
                    &d,
                    &[9, 8],
                ));
            }
        }
    }
}

#[test]
fn spdm_and_spmm() {
    for seed in 1..3 {
        let d = random_data(&[("B", vec![7, 9], 0.3), ("C", vec![9, 5], 1.0)], seed);
        for b in ["COO", "CSR", "CSC", "DCSR"] {
            ok(check("A(i,k) = B(i,j) * C(j,k)", &[("B", b)], &d, &[7, 5]));
        }
    }
}

/// Rows of a dense operand chosen by a stored coordinate are asked for
/// ahead (`ir::prefetch`); the Cranelift tier asks once per strip of
/// positions through a call. `D` of 16,000 x 33 values passes the 4 MiB
/// below which the runtime asks for nothing, so the calls prefetch; loops
/// shorter and longer than a strip (CSR's rows of 3 entries, COO's one
/// loop of 300), and strips past the coordinates' end.
#[test]
fn rows_asked_for_ahead_in_strips_on_the_cranelift_tier() {
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    // (expression, A's format, seed, A's entries): the oracle evaluates
    // the whole dense space, so one case each.
    let cases = [
        ("C(i,k) = A(i,j) * D(j,k)", "COO", 1, 300),
        ("C(i,k) = A(i,j) * D(j,k)", "CSR", 2, 40),
        ("C(i,k) = A(i,j,l) * D(l,k)", "COO", 3, 17),
    ];
    for (expr, format, seed, nnz) in cases {
        let a = tensor_compiler::notation::parse_assignment(expr).unwrap();
        let order = a.rhs.accesses()[0].indices.len();
        let mut rng = Rng(seed);
        let mut dims: Vec<usize> = [12, 3][..order - 1].to_vec();
        dims.push(16_000);
        let mut sparse = tensor_compiler::coo::CooTensor::new(dims.clone());
        for _ in 0..nnz {
            let c: Vec<u32> = dims.iter().map(|&n| rng.below(n) as u32).collect();
            sparse.push(&c, rng.value());
        }
        let data: std::collections::BTreeMap<String, _> = [
            ("A".to_string(), sparse),
            ("D".to_string(), random(&[16_000, 33], 1.0, &mut rng)),
        ]
        .into_iter()
        .collect();
        let formats = formats_rest_dense(&a, &[("A", format)], &data, 2);
        let p = tensor_compiler::execute::prepare("kernel", &a, &formats, &data, &[12, 33], None)
            .unwrap();
        let jit = for_codegen(&p.kernel.function, Backend::Cranelift).to_string();
        // D's rows of 33, a constant where the kernel is compiled for
        // this data (`Function::fixed_params`).
        assert!(jit.contains("+ 16 ..+ 8] * 33]"), "{jit}");
        ok(check(expr, &[("A", format)], &data, &[12, 33]));
    }
}

#[test]
fn third_order_kernels() {
    for seed in 1..3 {
        let d = random_data(
            &[
                ("B", vec![5, 6, 7], 0.15),
                ("C", vec![5, 6, 7], 0.15),
                ("c", vec![7], 1.0),
                ("M", vec![4, 7], 1.0),
                ("P", vec![6, 3], 1.0),
                ("Q", vec![7, 3], 1.0),
            ],
            seed,
        );
        for f in ["COO", "CSF", "mode-generic", "dense", "COO-AoS"] {
            ok(check("A(i,j) = B(i,j,k) * c(k)", &[("B", f)], &d, &[5, 6]));
            ok(check(
                "A(i,j,k) = B(i,j,l) * M(k,l)",
                &[("B", f)],
                &d,
                &[5, 6, 4],
            ));
            ok(check(
                "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
                &[("B", f)],
                &d,
                &[5, 3],
            ));
            ok(check(
                "a = B(i,j,k) * C(i,j,k)",
                &[("B", f), ("C", f)],
                &d,
                &[],
            ));
            for out in ["dense", "COO", "CSF"] {
                ok(check(
                    "A(i,j,k) = B(i,j,k) + C(i,j,k)",
                    &[("A", out), ("B", f), ("C", f)],
                    &d,
                    &[5, 6, 7],
                ));
            }
            ok(check(
                "A(i,j) = B(i,j,k) * c(k)",
                &[("A", "COO"), ("B", f)],
                &d,
                &[5, 6],
            ));
            ok(check(
                "A(i,j) = B(i,j,k) * c(k)",
                &[("A", "CSF"), ("B", f)],
                &d,
                &[5, 6],
            ));
        }
    }
}

#[test]
fn sparse_and_hash_vector_results() {
    for seed in 1..4 {
        let d = random_data(
            &[
                ("b", vec![40], 0.2),
                ("c", vec![40], 0.2),
                ("A", vec![40, 30], 0.1),
                ("x", vec![30], 1.0),
            ],
            seed,
        );
        for out in ["sparse", "hash", "dense", "COO"] {
            for (b, c) in [
                ("sparse", "sparse"),
                ("hash", "sparse"),
                ("dense", "sparse"),
                ("COO", "dense"),
            ] {
                ok(check(
                    "a(i) = b(i) * c(i)",
                    &[("a", out), ("b", b), ("c", c)],
                    &d,
                    &[40],
                ));
            }
            ok(check(
                "a(i) = b(i) + c(i)",
                &[("a", out), ("b", "sparse"), ("c", "sparse")],
                &d,
                &[40],
            ));
            ok(check(
                "a(i) = A(i,j) * x(j)",
                &[("a", out), ("A", "CSR")],
                &d,
                &[40],
            ));
        }
    }
}

#[test]
fn nested_sums_and_broadcasts() {
    let d = random_data(
        &[
            ("A", vec![8, 6], 0.3),
            ("x", vec![6], 1.0),
            ("z", vec![8], 0.5),
            ("B", vec![8, 6], 0.3),
        ],
        7,
    );
    ok(check(
        "y(i) = A(i,j) * x(j) + z(i)",
        &[("A", "CSR"), ("z", "sparse")],
        &d,
        &[8],
    ));
    ok(check("y(i) = A(i,j) * x(j) - 3", &[("A", "CSR")], &d, &[8]));
    ok(check(
        "C(i,j) = A(i,j) + z(i)",
        &[("A", "CSR"), ("z", "sparse")],
        &d,
        &[8, 6],
    ));
    ok(check(
        "C(i,j) = z(i) * x(j)",
        &[("C", "dense"), ("z", "sparse")],
        &d,
        &[8, 6],
    ));
    ok(check("a = A(i,j)", &[("A", "COO")], &d, &[]));
    ok(check(
        "y(i) = -A(i,j) * (x(j) + x(j)) * 0.5",
        &[("A", "CSC")],
        &d,
        &[8],
    ));
    ok(check(
        "C(i,j) = A(i,j) * B(i,j) + A(i,j)",
        &[("A", "CSR"), ("B", "COO")],
        &d,
        &[8, 6],
    ));
}

#[test]
fn transposed_operands_and_loop_orders() {
    let d = random_data(&[("B", vec![7, 7], 0.3), ("C", vec![7, 7], 0.3)], 3);
    ok(check(
        "A(i,j) = B(i,j) + C(j,i)",
        &[("B", "CSR"), ("C", "CSC")],
        &d,
        &[7, 7],
    ));
    ok(check(
        "A(i,j) = B(i,j) * C(j,i)",
        &[("B", "CSR"), ("C", "dense")],
        &d,
        &[7, 7],
    ));
    ok(check(
        "A(i,j) = B(i,j) + C(j,i)",
        &[("B", "CSR"), ("C", "dense")],
        &d,
        &[7, 7],
    ));
    // Opposite orders in a union: one nest per term, into any result.
    for a in ["dense", "CSR", "CSC", "DCSR", "COO"] {
        ok(check(
            "A(i,j) = B(i,j) + C(j,i)",
            &[("A", a), ("B", "CSR"), ("C", "CSR")],
            &d,
            &[7, 7],
        ));
    }
    // Opposite orders in one product: no loop order serves both, so one
    // operand is read from a copy in the other order (tests/conversions.rs).
    ok(check(
        "A(i,j) = B(i,j) * C(j,i)",
        &[("B", "CSR"), ("C", "CSR")],
        &d,
        &[7, 7],
    ));
}

/// An access repeated in one expression (`B(i,j) * B(i,j)`, `B(i,j)*x(j) +
/// B(i,j)*z(j)`) is one operand to the lattice: its level is walked once,
/// not merged with itself, and the answers agree with the oracle in every
/// format, including those whose accesses keep hidden variables of their
/// own (blocked formats: each access is walked by itself there).
#[test]
fn a_repeated_access_is_walked_once() {
    let exprs = [
        ("a = B(i,j) * B(i,j)", vec![]),
        ("y(i) = B(i,j) * x(j) + B(i,j) * z(j)", vec![5]),
        ("A(i,j) = B(i,j) - B(i,j) * B(i,j) + C(i,j)", vec![5, 4]),
        ("A(i,j) = (B(i,j) + C(i,j)) * (B(i,j) - D(i,j))", vec![5, 4]),
        ("y(i) = B(i,j) * (x(j) + B(i,j))", vec![5]),
    ];
    for seed in 0..3 {
        let d = random_data(
            &[
                ("B", vec![5, 4], 0.4),
                ("C", vec![5, 4], 0.4),
                ("D", vec![5, 4], 0.3),
                ("x", vec![4], 0.7),
                ("z", vec![4], 0.7),
            ],
            seed,
        );
        for (expr, dims) in &exprs {
            let result = &expr[..1];
            for fb in [
                "CSR",
                "COO",
                "DCSR",
                "CSC",
                "hashed,compressed",
                "ELL",
                "BCSR(2)",
                "dense",
            ] {
                for fa in ["dense", "CSR", "COO"] {
                    let fa = if dims.len() == 2 { fa } else { "dense" };
                    let mut specs = vec![("B", fb), (result, fa)];
                    if expr.contains("C(") {
                        specs.push(("C", "CSR"));
                    }
                    ok(check(expr, &specs, &d, dims));
                }
            }
        }
    }
    // Walked once: one lattice point with one co-iterated level per loop.
    let a = tensor_compiler::notation::parse_assignment("a = B(i,j) * B(i,j)").unwrap();
    let d = random_data(&[("B", vec![5, 4], 0.4)], 1);
    let formats = formats_rest_dense(&a, &[("B", "CSR")], &d, 0);
    let prepared =
        tensor_compiler::execute::prepare("kernel", &a, &formats, &d, &[], None).unwrap();
    for plan in &prepared.kernel.nests[0].plans {
        assert_eq!(plan.loops.len(), 1, "{:?}", plan.loops);
        assert_eq!(plan.loops[0].coiterated.len(), 1, "{:?}", plan.loops);
    }
}

/// A scalar summed over rows: the unrolled row loop adds into two
/// accumulators of its own, then once into the scalar (`ir::unroll`).
/// Rows of every length from empty to ten, odd and even.
#[test]
fn a_scalar_summed_over_rows_of_every_length() {
    for seed in 0..4 {
        let d = random_data(&[("B", vec![40, 10], 0.5), ("x", vec![10], 1.0)], seed);
        for f in ["CSR", "DCSR", "CSC", "COO", "dense"] {
            ok(check("a = B(i,j)", &[("B", f)], &d, &[]));
            ok(check("a = B(i,j) * x(j)", &[("B", f)], &d, &[]));
        }
    }
}
