//! Kernels that once gave wrong answers with exit 0 or were refused, each
//! checked against the dense reference evaluator (and the IR interpreter):
//! W1 unions of products with a dense factor, W2 non-unique operands
//! reduced into an insert-then-append result, W3 results read on their own
//! right-hand side; workspaces (SpGEMM), coordinate buffers (transposes,
//! conversions), and unions linear in their terms; hidden level variables
//! that shared a name with another variable.

mod common;
use common::*;
use std::collections::BTreeMap;
use tensor_compiler::coo::CooTensor;

fn tensor(dims: &[usize], entries: &[(&[u32], f64)]) -> CooTensor {
    let mut t = CooTensor::new(dims.to_vec());
    for (c, v) in entries {
        t.push(c, *v);
    }
    t
}

fn ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

fn transpose(t: &CooTensor) -> CooTensor {
    let mut out = CooTensor::new(vec![t.dims[1], t.dims[0]]);
    for e in 0..t.nnz() {
        let c = t.coord(e);
        out.push(&[c[1], c[0]], t.vals[e]);
    }
    out
}

#[test]
fn w1_union_of_products_with_a_dense_factor() {
    // The reproducer: [1, 0] instead of [1, 5].
    let mut d = BTreeMap::new();
    d.insert("a".to_string(), tensor(&[2], &[(&[0], 1.0)]));
    d.insert("b".to_string(), tensor(&[2], &[(&[1], 5.0)]));
    d.insert("x".to_string(), tensor(&[2], &[(&[0], 1.0), (&[1], 1.0)]));
    ok(check(
        "y(i) = a(i)*x(i) + b(i)*x(i)",
        &[("a", "sparse"), ("b", "sparse"), ("x", "dense")],
        &d,
        &[2],
    ));
    for seed in 1..6 {
        let mut d = random_data(
            &[
                ("B", vec![40, 40], 0.1),
                ("x", vec![40], 1.0),
                ("c", vec![40], 0.3),
                ("z", vec![40], 0.3),
            ],
            seed,
        );
        let bt = transpose(&d["B"]);
        d.insert("C".into(), bt);
        for y in ["dense", "sparse"] {
            ok(check(
                "y(i) = B(i,j)*x(j) + C(i,j)*x(j)",
                &[("B", "CSR"), ("C", "CSR"), ("y", y)],
                &d,
                &[40],
            ));
            ok(check(
                "y(i) = B(i,j)*x(j) + C(i,j)*x(j)",
                &[("B", "COO"), ("C", "COO"), ("y", y)],
                &d,
                &[40],
            ));
            ok(check(
                "y(i) = c(i)*x(i) + z(i)*x(i)",
                &[("c", "sparse"), ("z", "sparse"), ("y", y)],
                &d,
                &[40],
            ));
            ok(check(
                "y(i) = c(i)*x(i) + 2*x(i)*z(i)*x(i)",
                &[("c", "sparse"), ("z", "sparse"), ("y", y)],
                &d,
                &[40],
            ));
        }
        for f in ["DCSR", "CSR", "COO", "dense"] {
            ok(check(
                "Y(i,j) = B(i,j)*D(i,j) + C(i,j)*D(i,j)",
                &[("B", "COO"), ("C", "CSR"), ("D", "dense"), ("Y", f)],
                &{
                    let mut d = d.clone();
                    d.insert("D".into(), random(&[40, 40], 1.0, &mut Rng(seed + 100)));
                    d
                },
                &[40, 40],
            ));
        }
    }
}

#[test]
fn w2_nonunique_operand_reduced_into_insert_then_append_result() {
    // The reproducer: 1, 1 instead of 3, 3.
    let mut d = BTreeMap::new();
    d.insert(
        "B".to_string(),
        tensor(&[2, 2], &[(&[0, 0], 1.0), (&[0, 1], 2.0)]),
    );
    d.insert(
        "C".to_string(),
        tensor(
            &[2, 2],
            &[
                (&[0, 0], 1.0),
                (&[0, 1], 1.0),
                (&[1, 0], 1.0),
                (&[1, 1], 1.0),
            ],
        ),
    );
    ok(check(
        "Y(i,j) = B(i,k) * C(k,j)",
        &[("B", "COO"), ("C", "dense"), ("Y", "CSR")],
        &d,
        &[2, 2],
    ));
    for seed in 1..5 {
        let d = random_data(&[("B", vec![12, 9], 0.3), ("C", vec![9, 7], 0.5)], seed);
        for b in [
            "COO",
            "COO-AoS",
            "CSB(2)",
            "compressed(nonunique),singleton",
        ] {
            for y in [
                "CSR",
                "dense,compressed(nonunique)",
                "DCSR",
                "COO",
                "CSC",
                "dense",
                "hashed,dense",
            ] {
                ok(check(
                    "Y(i,j) = B(i,k) * C(k,j)",
                    &[("B", b), ("C", "dense"), ("Y", y)],
                    &d,
                    &[12, 7],
                ));
            }
        }
    }
}

#[test]
fn rows_of_an_appended_result_come_in_order_from_an_unordered_operand() {
    // A CSR result's rows are dense, its columns appended: each row's
    // segment goes after the previous row's. Rows driven by a hashed
    // operand came in bucket order, and the prefix sum over the row counts
    // gave each row another row's entries (values swapped between rows 1
    // and 4 here): the rows are now visited through a sorted copy.
    let mut d = BTreeMap::new();
    d.insert(
        "B".to_string(),
        tensor(&[6, 2], &[(&[1, 1], 1.0), (&[4, 0], 1.0)]),
    );
    d.insert(
        "C".to_string(),
        tensor(&[2, 2], &[(&[1, 1], 1.0), (&[1, 0], -0.25)]),
    );
    for a in ["CSR", "hashed,compressed", "DCSR", "COO"] {
        ok(check(
            "A(i,j) = B(i,k) * C(j,k)",
            &[("B", "hashed,dense"), ("C", "COO"), ("A", a)],
            &d,
            &[6, 2],
        ));
    }
    for seed in 1..4 {
        let d = random_data(&[("B", vec![40, 9], 0.2), ("C", vec![9, 7], 0.4)], seed);
        for b in ["hashed,dense", "hashed,compressed", "dense,hashed"] {
            for a in ["CSR", "DCSR", "COO", "dense,compressed(nonunique)"] {
                ok(check(
                    "A(i,j) = B(i,k) * C(k,j)",
                    &[("B", b), ("C", "CSR"), ("A", a)],
                    &d,
                    &[40, 7],
                ));
                ok(check(
                    "A(i,k) = B(i,k) * 2",
                    &[("B", b), ("A", a)],
                    &d,
                    &[40, 9],
                ));
            }
        }
    }
}

#[test]
fn w3_result_read_on_its_right_hand_side() {
    for seed in 1..5 {
        let d = random_data(
            &[
                ("A", vec![9, 7], 0.3),
                ("B", vec![9, 7], 0.3),
                ("S", vec![7, 7], 0.3),
                ("y", vec![9], 0.5),
                ("x", vec![7], 1.0),
            ],
            seed,
        );
        for a in [
            "dense",
            "CSR",
            "CSC",
            "DCSR",
            "COO",
            "hashed,dense",
            "dense,hashed",
        ] {
            ok(check("A(i,j) = 2 * A(i,j)", &[("A", a)], &d, &[9, 7]));
            ok(check(
                "A(i,j) = A(i,j) + B(i,j)",
                &[("A", a), ("B", "CSR")],
                &d,
                &[9, 7],
            ));
            ok(check(
                "A(i,j) = B(i,j) - A(i,j) * A(i,j)",
                &[("A", a), ("B", "COO")],
                &d,
                &[9, 7],
            ));
            ok(check("S(i,j) = S(j,i)", &[("S", a)], &d, &[7, 7]));
        }
        for y in ["dense", "sparse", "hash"] {
            ok(check(
                "y(i) = y(i) + B(i,j) * x(j)",
                &[("y", y), ("B", "CSR")],
                &d,
                &[9],
            ));
        }
    }
}

#[test]
fn spgemm_through_a_workspace_or_buffer() {
    let sparse = ["CSR", "CSC", "DCSR", "COO"];
    for seed in 1..4 {
        let d = random_data(&[("B", vec![15, 11], 0.2), ("C", vec![11, 13], 0.2)], seed);
        for b in sparse {
            for c in sparse {
                for a in sparse {
                    ok(check(
                        "A(i,j) = B(i,k) * C(k,j)",
                        &[("A", a), ("B", b), ("C", c)],
                        &d,
                        &[15, 13],
                    ));
                }
            }
        }
    }
}

#[test]
fn spgemm_rows_of_every_length_come_out_sorted() {
    // Row r of B has r entries and C about 5 a row over 10K columns, so
    // row r of A has about 5r coordinates spread too widely for the flag
    // scan: rows up to 128 keys are placed by rank, longer ones sorted.
    let mut rng = Rng(7);
    let mut b = CooTensor::new(vec![45, 45]);
    for r in 0..45u32 {
        for k in 0..r {
            b.push(&[r, k], rng.value());
        }
    }
    let d: BTreeMap<String, CooTensor> = [
        ("B".to_string(), b),
        ("C".to_string(), random(&[45, 10_000], 5e-4, &mut rng)),
    ]
    .into_iter()
    .collect();
    for a in ["CSR", "DCSR"] {
        ok(check(
            "A(i,j) = B(i,k) * C(k,j)",
            &[("A", a), ("B", "CSR"), ("C", "CSR")],
            &d,
            &[45, 10_000],
        ));
    }
}

#[test]
fn dcsr_spgemm_reads_the_right_operand_by_rows_and_appends_rows_from_a_workspace() {
    // `A(i,j) = B(i,k) * C(k,j)` all DCSR: C's rows, merged with each row
    // of B, were merged again from C's first row for every `i` (rows ×
    // rows steps: minutes on a million rows). C is read from a CSR copy
    // (its rows dense, located; its columns as stored), and A's rows,
    // visited once each in order, are appended after a workspace row.
    for seed in 1..4 {
        let d = random_data(&[("B", vec![40, 30], 0.1), ("C", vec![30, 50], 0.1)], seed);
        for (b, c) in [
            ("DCSR", "DCSR"),
            ("CSR", "DCSR"),
            ("DCSR", "COO"),
            ("COO", "DCSR"),
        ] {
            ok(check(
                "A(i,j) = B(i,k) * C(k,j)",
                &[("A", "DCSR"), ("B", b), ("C", c)],
                &d,
                &[40, 50],
            ));
        }
        let a = tensor_compiler::notation::parse_assignment("A(i,j) = B(i,k) * C(k,j)").unwrap();
        let formats = formats_rest_dense(&a, &[("A", "DCSR"), ("B", "DCSR"), ("C", "DCSR")], &d, 2);
        let p =
            tensor_compiler::execute::prepare("kernel", &a, &formats, &d, &[40, 50], None).unwrap();
        let copies: Vec<(String, String)> = p
            .kernel
            .conversions
            .iter()
            .map(|c| (c.source.clone(), c.format_text.clone()))
            .collect();
        assert_eq!(copies, [("C".to_string(), "CSR".to_string())]);
        assert!(
            p.kernel.buffer.is_none() && p.kernel.workspace().is_some(),
            "{}",
            p.kernel.function
        );
    }
}

#[test]
fn terms_of_a_sum_inside_an_addition_share_one_workspace_row() {
    // `A = B*C + D` and `A = A + B*C` (what `+=` becomes) into CSR or CSC:
    // one loop over the result's rows, each term adding its part of the
    // row to the workspace, flushed once per row. Operands without a
    // locatable row (COO, DCSR) fall back to the coordinate buffer.
    for seed in 1..4 {
        let d = random_data(
            &[
                ("A", vec![12, 10], 0.3),
                ("B", vec![12, 9], 0.3),
                ("C", vec![9, 10], 0.3),
                ("D", vec![12, 10], 0.3),
                ("E", vec![10, 12], 0.3),
            ],
            seed,
        );
        for (out, ops) in [
            ("CSR", "CSR"),
            ("CSR", "dense"),
            ("CSC", "CSC"),
            ("CSR", "COO"),
            ("CSR", "DCSR"),
            ("CSC", "CSR"),
        ] {
            let specs = [("A", out), ("B", ops), ("C", ops), ("D", ops), ("E", ops)];
            for expr in [
                "A(i,j) = B(i,k) * C(k,j) + D(i,j)",
                "A(i,j) = A(i,j) + B(i,k) * C(k,j)",
                "A(i,j) = D(i,j) - 2 * B(i,k) * C(k,j) + E(j,i)",
                "A(i,j) = B(i,k) * C(k,j) + B(i,k) * C(k,j) * 3",
            ] {
                ok(check(expr, &specs, &d, &[12, 10]));
            }
        }
        // One workspace, no buffer, where every row can be located.
        let a = tensor_compiler::notation::parse_assignment("A(i,j) = B(i,k) * C(k,j) + D(i,j)")
            .unwrap();
        let formats = formats_rest_dense(
            &a,
            &[("A", "CSR"), ("B", "CSR"), ("C", "CSR"), ("D", "CSR")],
            &d,
            2,
        );
        let p =
            tensor_compiler::execute::prepare("kernel", &a, &formats, &d, &[12, 10], None).unwrap();
        assert!(
            p.kernel.buffer.is_none() && p.kernel.workspace().is_some(),
            "{}",
            p.kernel.function
        );
    }
}

#[test]
fn spgemm_into_a_result_too_wide_for_a_dense_workspace_row() {
    // 5M columns: a dense row (16 bytes a column) would take 80 MB per
    // kernel; CSR and DCSR results go through a hashed row, whose memory
    // follows the row's entries. Checked against products summed by hand
    // (the dense oracle cannot hold the result).
    let wide = 5_000_000u32;
    let b = tensor(
        &[3, 4],
        &[
            (&[0, 0], 1.0),
            (&[0, 2], 2.0),
            (&[2, 1], 3.0),
            (&[2, 3], -1.0),
        ],
    );
    let c = tensor(
        &[4, wide as usize],
        &[
            (&[0, 7], 1.5),
            (&[0, wide - 1], 2.0),
            (&[1, 7], 4.0),
            (&[2, wide - 1], 0.5),
            (&[2, 12], 1.0),
            (&[3, 7], 1.0),
        ],
    );
    let mut want: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    for e in 0..b.nnz() {
        for f in 0..c.nnz() {
            if b.coord(e)[1] == c.coord(f)[0] {
                *want.entry((b.coord(e)[0], c.coord(f)[1])).or_default() += b.vals[e] * c.vals[f];
            }
        }
    }
    let data: BTreeMap<String, CooTensor> = [("B".to_string(), b), ("C".to_string(), c)].into();
    let a = tensor_compiler::notation::parse_assignment("A(i,j) = B(i,k) * C(k,j)").unwrap();
    for result in ["CSR", "DCSR"] {
        let specs = [("A", result), ("B", "CSR"), ("C", "CSR")];
        let orders: BTreeMap<String, usize> = [("A", 2), ("B", 2), ("C", 2)]
            .iter()
            .map(|(n, o)| (n.to_string(), *o))
            .collect();
        let formats = formats_of(&specs, &orders);
        let mut prepared = tensor_compiler::execute::prepare(
            "kernel",
            &a,
            &formats,
            &data,
            &[3, wide as usize],
            None,
        )
        .unwrap();
        let hashed = prepared
            .kernel
            .function
            .to_string()
            .contains("hash table of the coordinates touched");
        assert!(
            hashed && prepared.kernel.buffer.is_none(),
            "{result}: a hashed row"
        );
        prepared.run().unwrap();
        let got = prepared.result().unwrap();
        let got: BTreeMap<(u32, u32), f64> = (0..got.nnz())
            .map(|e| ((got.coord(e)[0], got.coord(e)[1]), got.vals[e]))
            .collect();
        assert_eq!(got, want, "{result}");
    }
}

#[test]
fn transposes_and_conversions_between_formats() {
    let inputs = [
        "dense",
        "CSR",
        "CSC",
        "DCSR",
        "COO",
        "COO-AoS",
        "ELL",
        "DIA",
        "BCSR(2)",
        "CSB(3)",
        "hashed,dense",
    ];
    let results = [
        "dense",
        "CSR",
        "CSC",
        "DCSR",
        "COO",
        "ELL",
        "DIA",
        "BCSR(2)",
        "CSB(2)",
        "hashed,dense",
        "dense,hashed",
    ];
    for seed in 1..3 {
        let d = random_data(&[("B", vec![10, 10], 0.25)], seed);
        for b in inputs {
            for a in results {
                ok(check(
                    "A(i,j) = B(i,j)",
                    &[("A", a), ("B", b)],
                    &d,
                    &[10, 10],
                ));
                ok(check(
                    "A(i,j) = B(j,i)",
                    &[("A", a), ("B", b)],
                    &d,
                    &[10, 10],
                ));
            }
        }
        for a in ["dense", "CSR", "CSC", "COO"] {
            ok(check(
                "A(i,j) = B(i,j) + B(j,i)",
                &[("A", a), ("B", "CSR")],
                &d,
                &[10, 10],
            ));
            ok(check(
                "A(i,j) = B(i,j) + C(i,j)",
                &[("A", a), ("B", "CSR"), ("C", "CSC")],
                &{
                    let mut d = d.clone();
                    d.insert("C".into(), random(&[10, 10], 0.25, &mut Rng(seed + 9)));
                    d
                },
                &[10, 10],
            ));
        }
    }
}

#[test]
fn unions_are_linear_in_their_terms() {
    // 40 CSR matrices: one merge loop with a guarded term each (a lattice
    // of every subset would never finish); 13+ dense vectors.
    let n = 40;
    let names: Vec<String> = (0..n).map(|k| format!("B{k}")).collect();
    let entries: Vec<(&str, Vec<usize>, f64)> = names
        .iter()
        .map(|s| (s.as_str(), vec![6, 5], 0.2))
        .collect();
    let d = random_data(&entries, 7);
    let expr = format!(
        "Y(i,j) = {}",
        names
            .iter()
            .map(|s| format!("{s}(i,j)"))
            .collect::<Vec<_>>()
            .join(" + ")
    );
    let started = std::time::Instant::now();
    for y in ["CSR", "dense", "DCSR"] {
        let specs: Vec<(&str, &str)> = names
            .iter()
            .map(|s| (s.as_str(), if s.ends_with('1') { "DCSR" } else { "CSR" }))
            .chain([("Y", y)])
            .collect();
        ok(check(&expr, &specs, &d, &[6, 5]));
    }
    // A guard against exponential blow-up, not a timing test.
    assert!(
        started.elapsed().as_secs() < 60,
        "a 40-term union took {:?}",
        started.elapsed()
    );
    let d = random_data(&[("x", vec![5], 1.0), ("s", vec![5], 0.4)], 3);
    let many = vec!["x(i)"; 20].join(" + ");
    ok(check(&format!("y(i) = {many}"), &[], &d, &[5]));
    ok(check(
        &format!("y(i) = {many} - 3 * s(i) + 1"),
        &[("s", "sparse"), ("y", "sparse")],
        &d,
        &[5],
    ));
}

#[test]
fn linear_merges_cover_the_dimension_where_constants_keep_terms_alive() {
    // Found by the sweep: lattices merged in one guarded loop must run over
    // the whole dimension when a constant keeps a product nonzero where no
    // sparse operand is present (`(D + 2) * (B - C)` with D empty).
    for seed in 1..4 {
        for density in [0.0, 0.3] {
            let d = random_data(
                &[
                    ("D", vec![5, 2], density),
                    ("B", vec![4], density),
                    ("C", vec![], 1.0),
                ],
                seed,
            );
            ok(check(
                "A = (D(i,j) * D(i,j) * (B(k) + 3) + (D(i,j) + 2) * (B(k) - C))",
                &[("D", "CSC"), ("B", "hash")],
                &d,
                &[],
            ));
            let d = random_data(&[("C", vec![3], density), ("B", vec![6, 3, 4], 0.2)], seed);
            ok(check(
                "A = -((C(i) + 3)) * ((B(j,i,k) + B(j,i,k)) - -(B(j,i,k)))",
                &[("C", "COO")],
                &d,
                &[],
            ));
            let d = random_data(&[("B", vec![], 1.0), ("C", vec![4, 6, 6], density)], seed);
            ok(check(
                "A = B * ((C(k,i,j) - B) + (C(k,i,j) - B))",
                &[("C", "mode-generic")],
                &d,
                &[],
            ));
        }
    }
}

#[test]
fn hidden_variables_are_their_own_whatever_their_names() {
    // A hidden variable is shown as the format's name for it followed by
    // its tensor's (`diagA`, the second use of `A`: `diagA2`). A user
    // variable spelled the same, or the hidden variable of a tensor named
    // `A2`, is another variable: once they were merged into one loop.
    for seed in 1..4 {
        let d = random_data(
            &[
                ("A", vec![5, 5], 0.4),
                ("A2", vec![5, 5], 0.4),
                ("x", vec![5], 1.0),
                ("B", vec![3], 1.0),
            ],
            seed,
        );
        for f in ["DIA", "ELL", "BCSR(2)"] {
            ok(check(
                "y(i) = A(i,j) * x(j) * B(diagA)",
                &[("A", f)],
                &d,
                &[5],
            ));
            ok(check(
                "y(i) = A(i,j) * x(j) * B(slotA)",
                &[("A", f)],
                &d,
                &[5],
            ));
            ok(check(
                "y(i) = A(i,j) * x(j) * B(iblkA)",
                &[("A", f)],
                &d,
                &[5],
            ));
            ok(check(
                "y(i) = A(i,j) * A(i,j) * A2(i,j) * x(j)",
                &[("A", f), ("A2", f)],
                &d,
                &[5],
            ));
        }
    }
}

/// The kernel `expr` lowers to with the formats `specs` (dense for the
/// rest) on the dimensions of `data` and a result of `out`.
fn lowered(
    expr: &str,
    specs: &[(&str, &str)],
    data: &BTreeMap<String, CooTensor>,
    out: &[usize],
) -> tensor_compiler::lower::Kernel {
    let a = tensor_compiler::notation::parse_assignment(expr).unwrap(); // ok: test code, a panic is a failed test
    let formats = formats_rest_dense(&a, specs, data, out.len());
    let dims: BTreeMap<String, Vec<usize>> = a
        .rhs
        .accesses()
        .iter()
        .map(|x| (x.tensor.clone(), data[&x.tensor].dims.clone()))
        .chain([(a.lhs.tensor.clone(), out.to_vec())])
        .collect();
    tensor_compiler::lower::compile("k", &a, &formats, &dims).unwrap() // ok: test code, a panic is a failed test
}

#[test]
fn block_sizes_the_format_fixes_are_constants_in_the_kernel() {
    // BCSR(3)'s dense inner levels hold 3 whatever the matrix: the loops
    // over them run to 3, not to a parameter (gcc unrolls them then), and
    // the kernel still agrees with the oracle on a matrix whose last block
    // is cut by the edge.
    let d = random_data(
        &[
            ("A", vec![10, 11], 0.3),
            ("B", vec![10, 11], 0.3),
            ("x", vec![11], 1.0),
        ],
        4,
    );
    for (expr, specs, out) in [
        ("y(i) = A(i,j) * x(j)", &[("A", "BCSR(3)")][..], &[10][..]),
        (
            "C(i,j) = A(i,j) + B(i,j)",
            &[("A", "BCSR(3)"), ("B", "BCSR(3)"), ("C", "dense")][..],
            &[10, 11][..],
        ),
    ] {
        let k = lowered(expr, specs, &d, out);
        let block_params: Vec<String> = k
            .function
            .params()
            .iter()
            .map(|p| p.c_name())
            .filter(|n| n.starts_with("A3") || n.starts_with("A4"))
            .collect();
        assert!(
            block_params.is_empty(),
            "{expr}: {block_params:?}\n{}",
            k.function
        );
        if let Err(e) = check(expr, specs, &d, out) {
            panic!("{e}");
        }
    }
}

#[test]
fn a_blocked_coordinate_an_operand_stores_needs_no_edge_test() {
    // `i = ib * b + ii` lies past the tensor's edge only where `ii` was
    // enumerated over the block (BCSR's dense rows within a block); where
    // it came with a stored entry (CSB's compressed and singleton levels)
    // it lies inside, and the kernel tests nothing (Cranelift ran CSB
    // SpMV 1.5-1.6x as long as the C with the tests). Every kernel agrees
    // with the oracle on a matrix whose last blocks the edge cuts.
    let d = random_data(
        &[
            ("A", vec![13, 11], 0.3),
            ("B", vec![13, 11], 0.5),
            ("x", vec![11], 1.0),
        ],
        5,
    );
    for (expr, specs, out, tests_edge) in [
        (
            "y(i) = A(i,j) * x(j)",
            &[("A", "CSB(3)")][..],
            &[13][..],
            false,
        ),
        (
            "y(i) = A(i,j) * x(j)",
            &[("A", "BCSR(3)")][..],
            &[13][..],
            true,
        ),
        (
            "C(i,j) = A(i,j) * B(i,j)",
            &[("A", "CSB(4)"), ("B", "dense"), ("C", "dense")][..],
            &[13, 11][..],
            false,
        ),
        // BCSR's rows and columns within a block are enumerated, the
        // edge is tested, and the CSB result gets only the entries inside.
        (
            "C(i,j) = B(i,j)",
            &[("B", "BCSR(4)"), ("C", "CSB(4)")][..],
            &[13, 11][..],
            true,
        ),
        (
            "C(i,j) = A(i,j)",
            &[("A", "CSB(4)"), ("C", "CSB(3)")][..],
            &[13, 11][..],
            false,
        ),
    ] {
        let k = lowered(expr, specs, &d, out);
        let edge_tests = k
            .function
            .params()
            .iter()
            .any(|p| p.c_name().ends_with("_dimension"));
        assert_eq!(edge_tests, tests_edge, "{expr} {specs:?}\n{}", k.function);
        if let Err(e) = check(expr, specs, &d, out) {
            panic!("{e}");
        }
    }
}

/// The number of entries the kernel's result stores (explicit zeros
/// included), after checking its values against the oracle.
fn stored(
    expr: &str,
    specs: &[(&str, &str)],
    data: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
) -> usize {
    ok(check(expr, specs, data, out_dims));
    let a = tensor_compiler::notation::parse_assignment(expr).unwrap(); // ok: test code, a panic is a failed test
    let formats = formats_rest_dense(&a, specs, data, out_dims.len());
    let mut prepared =
        tensor_compiler::execute::prepare("kernel", &a, &formats, data, out_dims, None).unwrap(); // ok: test code
    prepared.run().unwrap(); // ok: test code
    prepared.result().unwrap().nnz() // ok: test code
}

#[test]
fn sparse_results_store_only_entries_some_term_has() {
    // An inner product over every (i, j) appended an explicit zero for each
    // pair whose row and column share no k: n^2 entries, which on a
    // 40K-row matrix ran out of memory.
    let mut d = BTreeMap::new();
    d.insert(
        "B".to_string(),
        tensor(&[4, 4], &[(&[0, 0], 1.0), (&[2, 1], 2.0)]),
    );
    d.insert(
        "C".to_string(),
        tensor(&[4, 4], &[(&[0, 0], 1.0), (&[2, 1], 2.0)]),
    );
    for c in ["CSC", "CSR", "COO", "DCSR"] {
        for a in ["CSR", "CSC", "DCSR", "COO", "dense,hashed"] {
            assert_eq!(
                stored(
                    "A(i,j) = B(i,k) * C(k,j)",
                    &[("B", "CSR"), ("C", c), ("A", a)],
                    &d,
                    &[4, 4]
                ),
                1,
                "C {c}, A {a}"
            );
            assert_eq!(
                stored(
                    "A(i,j) = B(i,k) * C(k,j)",
                    &[("B", "DCSR"), ("C", c), ("A", a)],
                    &d,
                    &[4, 4]
                ),
                1,
                "B DCSR, C {c}, A {a}"
            );
        }
    }
    // A hashed operand located where it holds nothing; a dense copy of a
    // sparse operand (its zeros are no entries); a hashed result.
    let mut d = BTreeMap::new();
    d.insert("B".to_string(), tensor(&[4, 5], &[]));
    d.insert("M".to_string(), tensor(&[3, 3], &[(&[1, 1], 1.0)]));
    d.insert("x".to_string(), tensor(&[3], &[]));
    assert_eq!(
        stored(
            "A(i,j) = B(i,j)",
            &[("B", "dense,hashed"), ("A", "CSC")],
            &d,
            &[4, 5]
        ),
        0
    );
    for y in ["sparse", "hash"] {
        for m in ["CSR", "CSB(2)", "COO"] {
            assert_eq!(
                stored(
                    "y(i) = M(i,j) * x(j)",
                    &[("M", m), ("x", "sparse"), ("y", y)],
                    &d,
                    &[3]
                ),
                0,
                "M {m}, y {y}"
            );
        }
    }
}

/// A 2-D five-point stencil on an n x n grid (n^2 rows).
fn stencil(n: u32) -> CooTensor {
    let mut t = CooTensor::new(vec![(n * n) as usize; 2]);
    for r in 0..n {
        for c in 0..n {
            let row = r * n + c;
            for (dr, dc) in [(0i64, 0i64), (-1, 0), (1, 0), (0, -1), (0, 1)] {
                let (rr, cc) = (r as i64 + dr, c as i64 + dc);
                if (0..n as i64).contains(&rr) && (0..n as i64).contains(&cc) {
                    t.push(&[row, (rr * n as i64 + cc) as u32], 1.0 + (row % 7) as f64);
                }
            }
        }
    }
    t
}

#[test]
fn spgemm_in_every_format_runs_without_inner_products() {
    // With C in CSC (or any C whose rows cannot be located), the loops
    // could take an inner product of B's row and C's column for every
    // (i, j): 9 s on a 40K-row stencil, out of memory into CSR. An operand
    // is converted instead, so no format combination merges an operand
    // again for each outer coordinate.
    let presets = ["CSR", "CSC", "DCSR", "COO"];
    let mut d = BTreeMap::new();
    d.insert("B".to_string(), stencil(12));
    d.insert("C".to_string(), transpose(&stencil(12)));
    let a = tensor_compiler::notation::parse_assignment("A(i,j) = B(i,k) * C(k,j)").unwrap(); // ok: test code
    for b in presets {
        for c in presets {
            for out in presets {
                let specs = [("B", b), ("C", c), ("A", out)];
                // The answers (every combination is also in the
                // differential sweep's SpGEMM family).
                if b == out || c == out {
                    ok(check("A(i,j) = B(i,k) * C(k,j)", &specs, &d, &[144, 144]));
                }
                let formats = formats_rest_dense(&a, &specs, &d, 2);
                let dims: BTreeMap<String, Vec<usize>> = ["A", "B", "C"]
                    .iter()
                    .map(|t| (t.to_string(), vec![1 << 20, 1 << 20]))
                    .collect();
                let kernel =
                    tensor_compiler::lower::compile("kernel", &a, &formats, &dims).unwrap(); // ok: test code
                assert!(
                    kernel.remerged_operands().is_empty(),
                    "{b} x {c} -> {out} merges {:?} again for each outer coordinate",
                    kernel.remerged_operands()
                );
                // Gustavson's rows into every result, COO's too (each
                // flushed coordinate appended with its row).
                assert!(
                    kernel.buffer.is_none() && kernel.workspace().is_some(),
                    "{b} x {c} -> {out} is not assembled through a workspace row"
                );
            }
        }
    }
}

#[test]
fn coo_rows_of_many_entries_add_in_a_register() {
    // COO SpMV stored into y once per entry: every entry of a row waited
    // for the previous store to y[i] (2x CSR's time on rows of 15). Long
    // runs of a row are now summed in a register, on a matrix this small
    // from runs of 2, on both tiers (`ir::runs::shortest_run`; a large
    // one keeps the stores below 4 a row, `ir::runs`'s unit tests).
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    let function_of = |density: f64, seed: u64, backend: Backend| {
        let d = random_data(&[("A", vec![60, 60], density), ("x", vec![60], 1.0)], seed);
        ok(check("y(i) = A(i,j) * x(j)", &[("A", "COO")], &d, &[60]));
        let a = tensor_compiler::notation::parse_assignment("y(i) = A(i,j) * x(j)").unwrap(); // ok: test code
        let formats = formats_rest_dense(&a, &[("A", "COO")], &d, 1);
        let p = tensor_compiler::execute::prepare("kernel", &a, &formats, &d, &[60], None).unwrap(); // ok: test code
        for_codegen(&p.kernel.function, backend).to_string()
    };
    for seed in 1..4 {
        for backend in [Backend::C, Backend::Cranelift] {
            assert!(
                function_of(0.5, seed, backend).contains("run_sum"),
                "rows of 30 entries, {backend:?}"
            );
        }
        for backend in [Backend::C, Backend::Cranelift] {
            assert!(
                function_of(0.05, seed, backend).contains("run_sum"),
                "rows of 3 entries, {backend:?}"
            );
            assert!(
                !function_of(0.01, seed, backend).contains("run_sum"),
                "rows of 0.6 entries, {backend:?}"
            );
        }
    }
}

#[test]
fn a_fibre_runs_as_long_as_its_row_and_column_pairs_allow() {
    // TTV on a 3-D COO adds into A(i,j): its runs are those of (i,j)
    // pairs, not of j alone. 40 x 40 x 40 at 4% holds 1.6 entries per
    // pair, though 64 per coordinate of j: no runs (Cranelift's TTV on
    // 1.8 entries a fibre ran 1.25x slower with them). Dense fibres of
    // 40 keep them.
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    let function_of = |density: f64| {
        let d = random_data(&[("B", vec![40, 40, 40], density), ("c", vec![40], 1.0)], 5);
        ok(check(
            "A(i,j) = B(i,j,k) * c(k)",
            &[("B", "COO")],
            &d,
            &[40, 40],
        ));
        let a = tensor_compiler::notation::parse_assignment("A(i,j) = B(i,j,k) * c(k)").unwrap(); // ok: test code
        let formats = formats_rest_dense(&a, &[("B", "COO")], &d, 2);
        let p =
            tensor_compiler::execute::prepare("kernel", &a, &formats, &d, &[40, 40], None).unwrap(); // ok: test code
        [Backend::C, Backend::Cranelift].map(|b| {
            for_codegen(&p.kernel.function, b)
                .to_string()
                .contains("run_sum")
        })
    };
    assert_eq!(function_of(0.04), [false, false], "1.6 entries a fibre");
    assert_eq!(function_of(1.0), [true, true], "40 entries a fibre");
}

/// Sums over dimensions of extent 0 make the constant 0, which is no
/// entry: a COO result stored a zero at each of its 4 rows (sweep seed
/// 17149029).
#[test]
fn a_sum_over_an_empty_dimension_stores_no_entries() {
    let mut d = BTreeMap::new();
    d.insert("B".to_string(), CooTensor::new(vec![0]));
    d.insert("C".to_string(), CooTensor::new(vec![4, 0]));
    let expr = "A(i) = (((B(k) - B(k)) - C(i,j)) - (B(k) + -(C(i,j))))";
    for out in ["COO", "sparse", "hash"] {
        let specs = [("B", "sparse"), ("C", "DIA"), ("A", out)];
        ok(check(expr, &specs, &d, &[4]));
        let a = tensor_compiler::notation::parse_assignment(expr).unwrap(); // ok: test code
        let formats = formats_rest_dense(&a, &specs, &d, 1);
        let mut p =
            tensor_compiler::execute::prepare("kernel", &a, &formats, &d, &[4], None).unwrap(); // ok: test code
        p.run().unwrap(); // ok: test code
        assert_eq!(p.result().unwrap().nnz(), 0, "{out}"); // ok: test code
    }
    // A zero elsewhere in an expression leaves the other terms' entries.
    let d = random_data(&[("B", vec![30], 0.3)], 2);
    ok(check(
        "A(i) = B(i) + 0",
        &[("B", "sparse"), ("A", "sparse")],
        &d,
        &[30],
    ));
    ok(check(
        "A(i) = B(i) * 0 + B(i)",
        &[("B", "sparse"), ("A", "COO")],
        &d,
        &[30],
    ));
}

#[test]
fn rows_make_room_ahead_of_their_appends_and_keep_exact_lengths() {
    // The loops over a sparse result's last level append at most once per
    // stored entry they walk: the room is reserved once before them, no
    // append inside checks a capacity, and the length is the entries
    // appended. B + B appends half the room it reserves.
    use tensor_compiler::ir::{walk_block, Stmt};
    let mut d = random_data(&[("B", vec![30, 40], 0.3), ("C", vec![30, 40], 0.2)], 7);
    d.insert("D".to_string(), d["B"].clone());
    for (expr, f) in [
        ("A(i,j) = B(i,j) + C(i,j)", "CSR"),
        ("A(i,j) = B(i,j) + D(i,j)", "CSR"),
        ("A(i,j) = B(i,j) * C(i,j)", "DCSR"),
        ("A(i,j) = B(i,j) + C(i,j)", "COO"),
    ] {
        let specs = [("A", f), ("B", f), ("C", f), ("D", f)];
        ok(check(expr, &specs, &d, &[30, 40]));
        let a = tensor_compiler::notation::parse_assignment(expr).unwrap(); // ok: test code, a panic is a failed test
        let formats = formats_rest_dense(&a, &specs, &d, 2);
        let mut p =
            tensor_compiler::execute::prepare("k", &a, &formats, &d, &[30, 40], None).unwrap(); // ok: test code, a panic is a failed test
        let mut ahead = 0;
        walk_block(&p.kernel.function.body, &mut |s| match s {
            Stmt::Reserve { ahead: true, .. } => ahead += 1,
            // The innermost loops: those over the last level.
            Stmt::While { body, .. } => {
                let (mut loops, mut reserves) = (0, 0);
                walk_block(body, &mut |s| match s {
                    Stmt::While { .. } | Stmt::For { .. } => loops += 1,
                    Stmt::Reserve { .. } => reserves += 1,
                    _ => {}
                });
                assert!(
                    loops > 0 || reserves == 0,
                    "{expr} {f}: a reserve inside a merge loop\n{}",
                    p.kernel.function
                );
            }
            _ => {}
        });
        assert!(
            ahead > 0,
            "{expr} {f}: no room made ahead\n{}",
            p.kernel.function
        );
        // Timed runs reuse the result's arrays: still the same entries.
        p.run().unwrap(); // ok: test code, a panic is a failed test
        let once = p.result().unwrap(); // ok: test code, a panic is a failed test
        p.time(3, tensor_compiler::execute::ResultArrays::Reused)
            .unwrap(); // ok: test code, a panic is a failed test
        let again = p.result().unwrap(); // ok: test code, a panic is a failed test
        assert_eq!(once.nnz(), again.nnz(), "{expr} {f}");
        close(&again, &once).unwrap(); // ok: test code, a panic is a failed test
    }
}

#[test]
fn a_product_multiplied_out_keeps_the_shape_of_its_addition() {
    // `C(i) * ((D(i,k) + C(i)) + (D(i,k) + C(i)))` sums `k` around both
    // `C(i)`s (each added |k| times). Multiplied out into a flat chain
    // `C*D + C*C + C*D + C*C`, read left to right, the last `C*C` fell
    // outside the sum over `k`: 4 instead of 6 with D in CSB(2), whose
    // hidden levels make the compiler multiply the product out (found by
    // the sweep at seed 318632).
    let mut d = BTreeMap::new();
    d.insert("C".to_string(), tensor(&[6], &[(&[5], 1.0)]));
    d.insert("D".to_string(), tensor(&[6, 3], &[]));
    let exprs = [
        "A = C(i) * ((D(i,k) + C(i)) + (D(i,k) + C(i)))",
        "A = C(i) * (D(i,k) + (C(i) - (D(i,k) + C(i))))",
        "A = ((D(i,k) + C(i)) - (C(i) + D(i,k))) * C(i)",
    ];
    for seed in 0..4 {
        let random = random_data(&[("C", vec![6], 0.5), ("D", vec![6, 3], 0.4)], seed);
        for data in [&d, &random] {
            for e in exprs {
                for fd in ["dense", "CSR", "CSB(2)", "BCSR(2)", "COO"] {
                    ok(check(
                        e,
                        &[("C", "dense"), ("D", fd), ("A", "dense")],
                        data,
                        &[],
                    ));
                }
            }
        }
    }
}

#[test]
fn a_temporary_is_never_converted_before_the_kernel() {
    // The statement reading a temporary may need an operand converted; the
    // search converted the temporary itself (made inside the kernel, it has
    // no data before it), and the run failed with "tensor A_t: no data".
    // The unordered operand is converted instead (found by the sweep of
    // the random-expr family at seeds 1202427 and 1317457).
    let mut d = BTreeMap::new();
    d.insert(
        "C".to_string(),
        tensor(&[6], &[(&[0], 0.75), (&[1], -0.75), (&[2], 2.0)]),
    );
    d.insert(
        "B".to_string(),
        tensor(
            &[5, 2, 6],
            &[(&[0, 0, 2], 0.25), (&[3, 0, 4], 0.75), (&[4, 1, 5], 0.75)],
        ),
    );
    ok(check(
        "A(k) = C(i) * -((C(i) + B(k,j,i)))",
        &[
            ("C", "compressed(unordered)"),
            ("B", "COO-AoS"),
            ("A", "sparse"),
        ],
        &d,
        &[5],
    ));
    let mut d = BTreeMap::new();
    d.insert("B".to_string(), tensor(&[3], &[(&[1], 1.0), (&[2], 1.75)]));
    d.insert("C".to_string(), tensor(&[3, 3, 4], &[]));
    ok(check(
        "A(j,k) = (1 - -(3)) * (B(k) * C(j,k,i) - (B(k) + B(k)))",
        &[
            ("B", "compressed(unordered)"),
            ("C", "COO-AoS"),
            ("A", "dense"),
        ],
        &d,
        &[3, 3],
    ));
}

#[test]
fn terms_sharing_a_workspace_row_keep_their_sums_apart() {
    // `C(i,j) * (2 + D(k))` sums `k` over `D(k)` alone. Split into terms
    // that share a CSR result's workspace row, the term was lowered
    // without the check that its sum can leave the addition, and `k` was
    // summed around `2 + D(k)`: 12 instead of 2 (found by the sweep of the
    // random-expr family at seed 3107665). Now the term gets a temporary.
    let mut d = BTreeMap::new();
    d.insert("C".to_string(), tensor(&[4, 4], &[(&[3, 3], 1.0)]));
    d.insert("D".to_string(), tensor(&[6], &[]));
    for seed in 0..3 {
        let random = random_data(&[("C", vec![4, 4], 0.4), ("D", vec![6], 0.5)], seed);
        for data in [&d, &random] {
            for fa in ["CSR", "DCSR", "COO", "dense"] {
                ok(check(
                    "A(i,j) = (C(i,j) * (2 + D(k)) + -((C(i,j) - C(i,j))))",
                    &[("C", "dense"), ("D", "dense"), ("A", fa)],
                    data,
                    &[4, 4],
                ));
            }
        }
    }
}

#[test]
fn a_temporary_summed_over_an_empty_range_holds_no_entries() {
    // `A_t(j) = D(k,j)` over an empty `k` has no terms, so the terms that
    // read it have no entries: a COO result stored an explicit zero for
    // every `j` (found by the sweep's structure check, random-expr family,
    // seed 3307350).
    let expr = "A(j) = (D(k,j) * 3 - C(i,j)) * -((1 - C(i,j)))";
    let mut d = BTreeMap::new();
    d.insert("D".to_string(), tensor(&[0, 3], &[]));
    d.insert("C".to_string(), tensor(&[1, 3], &[]));
    for fa in ["COO", "sparse", "hash"] {
        let specs = [("D", "dense"), ("C", "CSC"), ("A", fa)];
        assert_eq!(stored(expr, &specs, &d, &[3]), 0, "A {fa}");
    }
    // A scalar temporary of a sparse sum over an empty range: its one
    // value is fill (seed 5007562: a hash result stored a zero per `j`).
    let mut e = BTreeMap::new();
    e.insert("C".to_string(), tensor(&[0], &[]));
    e.insert("B".to_string(), tensor(&[3, 3], &[]));
    let scalar = "A(j) = (C(k) + B(i,j)) * ((B(i,j) - B(i,j)) + 3)";
    for fa in ["hash", "sparse", "COO"] {
        let specs = [
            ("C", "sparse"),
            ("B", "compressed(nonunique),singleton"),
            ("A", fa),
        ];
        assert_eq!(stored(scalar, &specs, &e, &[3]), 0, "A {fa}");
    }
    // With terms to sum, the temporary's entries are the dense operand's.
    let d = random_data(&[("D", vec![2, 3], 1.0), ("C", vec![1, 3], 0.5)], 3);
    ok(check(
        expr,
        &[("D", "dense"), ("C", "CSC"), ("A", "COO")],
        &d,
        &[3],
    ));
}

#[test]
fn padding_of_an_ell_row_is_no_coordinate_in_a_union() {
    // In a union whose operands run out at different times, an ELL row's
    // padding (coordinate -1) was read as a coordinate, and -1 was appended
    // to a CSR result: "coordinate -1 outside level 1" (found by the sweep
    // at seed 72591). A guarded read now says whether its position holds
    // a coordinate.
    let mut d = BTreeMap::new();
    d.insert("B".to_string(), tensor(&[6, 1], &[(&[1, 0], 0.5)]));
    d.insert("D".to_string(), tensor(&[3], &[(&[2], -0.5), (&[2], -1.0)]));
    let expr = "A(j,k) = B(j,k) * (1 + D(i)) * (D(i) - (B(j,k) + D(i)))";
    for fd in ["COO", "sparse"] {
        ok(check(
            expr,
            &[("B", "ELL"), ("D", fd), ("A", "CSR")],
            &d,
            &[6, 1],
        ));
    }
    for seed in 0..3 {
        let d = random_data(&[("B", vec![7, 5], 0.3), ("C", vec![7, 5], 0.3)], seed);
        for e in [
            "A(i,j) = B(i,j) + C(i,j) + B(i,j)",
            "A(i,j) = B(i,j) - C(i,j)",
        ] {
            for fa in ["CSR", "COO", "dense"] {
                ok(check(
                    e,
                    &[("B", "ELL"), ("C", "ELL"), ("A", fa)],
                    &d,
                    &[7, 5],
                ));
            }
        }
    }
}

#[test]
fn padding_of_an_ell_row_is_looked_up_inside_a_hashed_bucket() {
    // Two ELL iterators co-iterated with a hashed vector: where one of them
    // stands on padding (coordinate -1), the merged coordinate is -1, and
    // the hashed lookup at it started at slot -1 % W = -1, a read before
    // the coordinate array (the interpreter: "negative index -1 into
    // C1_crd"; sweep seed 17294597). A negative coordinate now starts at
    // the bucket's first slot and is never found.
    let mut d = BTreeMap::new();
    let b: &[(&[u32], f64)] = &[
        (&[0, 0], 2.0),
        (&[0, 2], 2.75),
        (&[1, 1], 1.75),
        (&[1, 2], 2.25),
        (&[1, 3], 1.25),
        (&[1, 4], 0.75),
        (&[2, 3], 2.5),
        (&[2, 4], 1.5),
        (&[3, 0], -0.75),
        (&[3, 1], 1.0),
        (&[4, 1], -1.0),
        (&[4, 4], 3.0),
        (&[5, 4], -1.5),
    ];
    d.insert("B".to_string(), tensor(&[6, 5], b));
    for c in [
        tensor(&[5], &[]),
        tensor(&[5], &[(&[1], 2.0), (&[4], -0.5)]),
    ] {
        d.insert("C".to_string(), c);
        for w in ["hashed(W=8)", "hashed(W=2)"] {
            ok(check(
                "A = B(k,i) * (B(k,i) * C(i) + -(B(k,i)))",
                &[("B", "ELL"), ("C", w), ("A", "dense")],
                &d,
                &[],
            ));
        }
    }
}

#[test]
fn register_runs_taken_two_entries_at_a_time_cross_row_ends() {
    // Runs of a row are added two entries at a time, into two sums
    // (`ir::runs::paired_runs`); a pair that straddles rows, a row of one
    // entry, an empty row and an odd last entry take the one-by-one path.
    let lengths = [9usize, 1, 17, 0, 12, 3, 8, 20, 2, 11];
    let mut a = CooTensor::new(vec![lengths.len(), 40]);
    for (i, &n) in lengths.iter().enumerate() {
        for j in 0..n {
            a.push(
                &[i as u32, (j * 2 + i % 2) as u32],
                1.0 + (i * 40 + j) as f64 / 7.0,
            );
        }
    }
    let mut d = random_data(&[("x", vec![40], 1.0), ("c", vec![40], 1.0)], 3);
    d.insert("A".to_string(), a.clone());
    let mut b = CooTensor::new(vec![lengths.len(), 3, 40]);
    for e in 0..a.nnz() {
        let c = a.coord(e);
        b.push(&[c[0], c[0] % 3, c[1]], a.vals[e]);
    }
    d.insert("B".to_string(), b);
    for f in ["COO", "COO-AoS"] {
        ok(check(
            "y(i) = A(i,j) * x(j)",
            &[("A", f)],
            &d,
            &[lengths.len()],
        ));
        ok(check(
            "C(i,j) = B(i,j,k) * c(k)",
            &[("B", f)],
            &d,
            &[lengths.len(), 3],
        ));
    }
    let e = tensor_compiler::notation::parse_assignment("y(i) = A(i,j) * x(j)").unwrap(); // ok: test code
    let formats = formats_rest_dense(&e, &[("A", "COO")], &d, 1);
    let p = tensor_compiler::execute::prepare("kernel", &e, &formats, &d, &[lengths.len()], None)
        .unwrap(); // ok: test code
    let f = tensor_compiler::ir::passes::for_codegen(
        &p.kernel.function,
        tensor_compiler::ir::passes::Backend::Cranelift,
    );
    assert!(f.to_string().contains("run_sum2"), "two sums");
}

/// An operand converted for one refusal and its copy converted again for
/// a loop order (BCSR(2) -> CSR -> CSC): the second conversion reads the
/// first copy, which no run found among the inputs ("tensor D_converted:
/// no data", sweep seed 16542381).
#[test]
fn a_copy_converted_again_is_made_from_the_first_copy() {
    let mut d = BTreeMap::new();
    d.insert(
        "C".to_string(),
        tensor(
            &[3, 1, 4],
            &[
                (&[1, 0, 0], 1.0),
                (&[2, 0, 0], 2.0),
                (&[0, 0, 3], 1.0),
                (&[0, 0, 2], 2.0),
                (&[2, 0, 3], 2.0),
                (&[1, 0, 3], 1.25),
                (&[1, 0, 1], -1.5),
            ],
        ),
    );
    d.insert(
        "D".to_string(),
        tensor(
            &[4, 1],
            &[
                (&[1, 0], 1.75),
                (&[3, 0], -1.75),
                (&[0, 0], 0.25),
                (&[2, 0], -0.5),
            ],
        ),
    );
    d.insert(
        "B".to_string(),
        tensor(&[1, 4, 3], &[(&[0, 3, 1], -0.75), (&[0, 0, 2], 0.25)]),
    );
    ok(check(
        "A(i) = (C(k,i,j) * 1 - D(j,i)) * -(B(i,j,k) * C(k,i,j))",
        &[
            ("C", "CSF"),
            ("D", "BCSR(2)"),
            ("B", "COO-AoS"),
            ("A", "sparse"),
        ],
        &d,
        &[1],
    ));
}

#[test]
fn only_arrays_that_appends_grow_take_a_first_room() {
    // A fresh result's arrays that appends grow first take room for all
    // the operands' values (`jit::call::first_room`); a compressed level's
    // `pos`, reserved once at its known length, took that room too (CSR
    // add: 32 MB of `pos` for 1.2 MB of rows, zeroed in every run).
    let d = random_data(&[("A", vec![30, 40], 0.2), ("B", vec![30, 40], 0.2)], 5);
    let a = tensor_compiler::notation::parse_assignment("C(i,j) = A(i,j) + B(i,j)").unwrap(); // ok: test code
    let formats = formats_rest_dense(&a, &[("A", "CSR"), ("B", "CSR"), ("C", "CSR")], &d, 2);
    let p = tensor_compiler::execute::prepare("kernel", &a, &formats, &d, &[30, 40], None).unwrap(); // ok: test code
    let grown: Vec<String> = p
        .kernel
        .function
        .grown_by_appends()
        .iter()
        .map(|a| a.c_name())
        .collect();
    assert_eq!(grown, ["C2_crd", "C_vals"], "{}", p.kernel.function);
    ok(check(
        "C(i,j) = A(i,j) + B(i,j)",
        &[("A", "CSR"), ("B", "CSR"), ("C", "CSR")],
        &d,
        &[30, 40],
    ));
}

/// `y` computed by `expr` over `data` with `formats` (the rest dense), on
/// the Cranelift tier and by the interpreter, against the oracle that
/// reads an entry an operand does not store as no term
/// (`oracle::evaluate_stored`): NaN where it has NaN, the same infinity,
/// the same finite values.
fn non_finite_check(
    expr: &str,
    specs: &[(&str, &str)],
    data: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
) {
    use tensor_compiler::execute::prepare;
    let a = tensor_compiler::notation::parse_assignment(expr).unwrap();
    let formats = formats_rest_dense(&a, specs, data, out_dims.len());
    let all_stored = formats
        .iter()
        .filter(|(_, f)| f.is_all_dense())
        .map(|(n, _)| n.clone())
        .collect();
    let want = tensor_compiler::oracle::evaluate_stored(&a, data, &all_stored, out_dims, None)
        .unwrap()
        .to_dense();
    for interpreted in [false, true] {
        let mut p = prepare("kernel", &a, &formats, data, out_dims, None).unwrap();
        match interpreted {
            true => p.run_interpreted().unwrap(),
            false => {
                p.run().unwrap();
            }
        }
        let got = p.result().unwrap().to_dense();
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            let same = g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-12;
            assert!(
                same,
                "{expr} {specs:?}, interpreted {interpreted}: entry {n}: {g} against {w}"
            );
        }
    }
}

#[test]
fn padding_converted_to_another_format_is_no_entry() {
    // DIA read in CSR order for SpGEMM: its copy held the diagonal's
    // padding as stored zeros, and `0 * NaN` made a NaN (found by
    // `DIFFERENTIAL_NON_FINITE=1 scripts/sweep.sh`, seed 18668607).
    let data: BTreeMap<String, CooTensor> = [
        ("B".to_string(), tensor(&[3, 2], &[(&[1, 1], 1.0)])),
        ("C".to_string(), tensor(&[2, 6], &[(&[0, 4], f64::NAN)])),
    ]
    .into_iter()
    .collect();
    for b in ["DIA", "BCSR(2)", "ELL", "compressed,dense"] {
        non_finite_check(
            "A(i,j) = B(i,k) * C(k,j)",
            &[("B", b), ("C", "CSC"), ("A", "COO")],
            &data,
            &[3, 6],
        );
    }
}

#[test]
fn a_sum_of_located_operands_with_no_entry_is_no_factor() {
    // At an `i` of `C` and no `B`, `(B + D) - D` is `D - D`, located from
    // the loop over `j`: where `D` has no entry either, the factor has
    // none, and `NaN * (0 - 0)` must not be a term (seed 18730470).
    let data: BTreeMap<String, CooTensor> = [
        ("D".to_string(), tensor(&[6, 4], &[])),
        (
            "C".to_string(),
            tensor(&[2, 4, 6], &[(&[1, 2, 5], f64::NAN)]),
        ),
        ("B".to_string(), tensor(&[6, 4, 2], &[(&[5, 2, 0], 1.0)])),
    ]
    .into_iter()
    .collect();
    non_finite_check(
        "A(j) = (D(k,j) - -(C(i,j,k))) * ((B(k,j,i) + D(k,j)) + -(D(k,j)))",
        &[("D", "COO"), ("C", "COO"), ("B", "COO")],
        &data,
        &[4],
    );
    // A hashed `x` probed in a BCSR block's padding.
    let data: BTreeMap<String, CooTensor> = [
        (
            "A".to_string(),
            tensor(&[4, 4], &[(&[0, 0], f64::NEG_INFINITY), (&[1, 1], 2.0)]),
        ),
        ("x".to_string(), tensor(&[4], &[(&[1], 3.0)])),
    ]
    .into_iter()
    .collect();
    non_finite_check(
        "y(i) = A(i,j) * x(j)",
        &[("A", "BCSR(2)"), ("x", "hash")],
        &data,
        &[4],
    );
}

/// A compressed result level records its positions in a 32-bit `pos`:
/// every kernel bounds its `crd` at `i32::MAX` elements
/// (`Function::index_limits`), so a result past 2^31 - 1 entries at one
/// level is refused (`RunError::PastIndexLimit`, which a unit test of the
/// JIT checks) where its positions would have wrapped. Dense and
/// coordinate-only levels are bounded by memory alone.
#[test]
fn compressed_result_levels_bound_their_positions() {
    use tensor_compiler::ir::{ArrayRef, Slot};
    let d = random_data(&[("B", vec![6, 7], 0.4), ("C", vec![6, 7], 0.4)], 3);
    for (out, bounded) in [
        ("CSR", &[1][..]),
        ("CSC", &[1]),
        ("DCSR", &[0, 1]),
        ("COO", &[0]),
        ("dense", &[]),
    ] {
        let k = lowered(
            "A(i,j) = B(i,j) + C(i,j)",
            &[("A", out), ("B", "CSR"), ("C", "COO")],
            &d,
            &[6, 7],
        );
        let limits = &k.function.index_limits;
        let want: Vec<(ArrayRef, u64)> = bounded
            .iter()
            .map(|&l| (ArrayRef::level("A", l, "crd"), i32::MAX as u64))
            .collect();
        assert_eq!(limits, &want, "{out}");
        // Every bounded array is one the kernel writes.
        let written: Vec<ArrayRef> = k
            .function
            .arrays()
            .into_iter()
            .filter(|(_, w)| *w)
            .map(|(a, _)| a)
            .collect();
        for (a, _) in limits {
            assert!(
                matches!(a.slot, Slot::Level(..)) && written.contains(a),
                "{out}: {a:?}"
            );
        }
    }
}
