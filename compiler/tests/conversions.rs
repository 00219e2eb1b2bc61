//! Statements the loops cannot run over an operand in its own format run
//! over a copy converted at run time (operands in conflicting orders,
//! unordered operands merged with others, a tensor read in two orders),
//! and sums spanning several terms distribute over them. Each kernel is
//! checked against the dense reference evaluator and the IR interpreter.

mod common;
use common::*;
use std::collections::BTreeMap;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::execute::prepare;
use tensor_compiler::notation::parse_assignment;

fn ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

/// The tensors `expr` converts before its kernel, and to which formats.
fn conversions(
    expr: &str,
    specs: &[(&str, &str)],
    d: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
) -> Vec<(String, String)> {
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
        .conversions
        .iter()
        .map(|c| (c.source.clone(), c.format_text.clone()))
        .collect()
}

#[test]
fn operands_in_conflicting_orders_are_converted() {
    for seed in 1..4 {
        let d = random_data(
            &[("B", vec![30, 30], 0.15), ("C", vec![30, 30], 0.15)],
            seed,
        );
        for (b, c) in [
            ("CSR", "CSR"),
            ("CSC", "CSC"),
            ("COO", "CSR"),
            ("DCSR", "CSR"),
            ("CSR", "COO"),
        ] {
            for y in ["dense", "CSR", "CSC", "COO", "hashed,dense"] {
                let specs = [("B", b), ("C", c), ("A", y)];
                ok(check("A(i,j) = B(i,j) * C(j,i)", &specs, &d, &[30, 30]));
                ok(check(
                    "A(i,j) = B(i,j) * C(j,i) + B(i,j)",
                    &specs,
                    &d,
                    &[30, 30],
                ));
            }
        }
        // One tensor read in two orders: one access reads a copy.
        for b in ["CSR", "CSC", "COO", "DCSR"] {
            ok(check(
                "A(i,j) = B(i,j) * B(j,i)",
                &[("B", b), ("A", "CSR")],
                &d,
                &[30, 30],
            ));
            ok(check("a = B(i,j) * B(j,i)", &[("B", b)], &d, &[]));
        }
    }
    let d = random_data(&[("B", vec![30, 30], 0.15), ("C", vec![30, 30], 0.15)], 7);
    assert_eq!(
        conversions(
            "A(i,j) = B(i,j) * C(j,i)",
            &[("B", "CSR"), ("C", "CSR")],
            &d,
            &[30, 30]
        ),
        [("C".to_string(), "CSC".to_string())]
    );
    // Formats that agree need no conversion.
    assert!(conversions(
        "A(i,j) = B(i,j) * C(j,i)",
        &[("B", "CSR"), ("C", "CSC")],
        &d,
        &[30, 30]
    )
    .is_empty());
}

#[test]
fn a_union_in_conflicting_orders_converts_an_operand_rather_than_buffer_the_result() {
    // `B + Bᵀ` and CSR + CSC into CSR: one operand read from a copy in the
    // other order (a counting sort), the result written directly in order;
    // through the coordinate buffer every entry of the result was sorted.
    for seed in 1..4 {
        let d = random_data(&[("B", vec![25, 25], 0.2), ("C", vec![25, 25], 0.2)], seed);
        for (a, b, c) in [
            ("CSR", "CSR", "CSC"),
            ("CSC", "CSR", "CSC"),
            ("CSR", "CSR", "CSR"),
            ("DCSR", "CSR", "CSC"),
        ] {
            for expr in [
                "A(i,j) = B(i,j) + C(i,j)",
                "A(i,j) = B(i,j) + B(j,i)",
                "A(i,j) = B(i,j) * C(j,i) - 2 * B(j,i)",
            ] {
                let specs = [("A", a), ("B", b), ("C", c)];
                ok(check(expr, &specs, &d, &[25, 25]));
            }
        }
        let a = parse_assignment("A(i,j) = B(i,j) + B(j,i)").unwrap();
        let p = prepare(
            "kernel",
            &a,
            &formats_rest_dense(&a, &[("A", "CSR"), ("B", "CSR")], &d, 2),
            &d,
            &[25, 25],
            None,
        )
        .unwrap();
        assert!(
            p.kernel.buffer.is_none() && p.kernel.conversions.len() == 1,
            "{}",
            p.kernel.function
        );
    }
    // A sum keeps its buffer or workspace: SpGEMM into COO converting C
    // would run inner products over every (i, j).
    let d = random_data(&[("B", vec![25, 25], 0.2), ("C", vec![25, 25], 0.2)], 1);
    assert!(conversions(
        "A(i,j) = B(i,k) * C(k,j)",
        &[("A", "COO"), ("B", "CSR"), ("C", "CSR")],
        &d,
        &[25, 25]
    )
    .is_empty());
}

#[test]
fn a_tensor_read_twice_in_the_wrong_order_is_converted_once_for_both() {
    for seed in 1..4 {
        let d = random_data(
            &[
                ("B", vec![12, 9], 0.3),
                ("C", vec![12, 9], 0.3),
                ("X", vec![12, 9], 0.3),
            ],
            seed,
        );
        for y in ["dense", "dense,dense:1,0", "CSR"] {
            let specs = [("B", "CSR"), ("C", "CSR"), ("X", "CSC"), ("Y", y)];
            ok(check(
                "Y(i,j) = B(i,j) * X(i,j) + C(i,j) * X(i,j)",
                &specs,
                &d,
                &[12, 9],
            ));
        }
        let d3 = random_data(
            &[("B", vec![4, 5, 6], 0.3), ("E", vec![4, 5, 6], 0.3)],
            seed,
        );
        for e in [
            "compressed,dense,compressed:2,0,1",
            "CSF:1,2,0",
            "COO:2,1,0",
        ] {
            ok(check(
                "A(i,j,k) = B(i,j,k) * E(i,j,k)",
                &[("B", "CSF"), ("E", e), ("A", "dense")],
                &d3,
                &[4, 5, 6],
            ));
        }
    }
}

/// Three operands whose orders agree pairwise with some loop order but
/// all together with none: two of them are read from copies in one loop
/// order (no single conversion helps), and the answer is the oracle's.
/// A tensor read three times in one order needs one copy, not three: a
/// loop order wanting `D` and `C` converted is two copies, within the
/// plans' limit (sweep seed 15222462 was refused as four).
#[test]
fn repeated_accesses_count_as_one_copy_of_their_tensor() {
    for seed in 1..4 {
        let d = random_data(
            &[
                ("B", vec![2, 5, 6], 0.4),
                ("D", vec![5, 2, 6], 0.4),
                ("C", vec![6, 2, 5], 0.4),
            ],
            seed,
        );
        let expr = "A(j) = ((-(B(j,k,i)) + (B(j,k,i) + D(k,j,i))) + (B(j,k,i) - D(k,j,i)) * (D(k,j,i) + C(i,j,k)))";
        let specs = [
            ("B", "COO"),
            ("D", "CSF"),
            ("C", "dense,compressed,compressed"),
        ];
        ok(check(expr, &specs, &d, &[2]));
        let made = conversions(expr, &specs, &d, &[2]);
        assert_eq!(made.len(), 2, "{made:?}");
    }
}

/// An operand with hidden levels (CSB's blocks, DIA's diagonals) inside
/// an addition is read from a copy without them; when that copy's loop
/// order then conflicts with another operand, that one is converted too
/// (sweep seed 15064636 was refused before).
#[test]
fn hidden_levels_under_an_addition_convert_then_reorder() {
    for seed in 1..4 {
        let d = random_data(
            &[
                ("C", vec![3, 4, 5], 0.4),
                ("D", vec![4, 5], 0.5),
                ("B", vec![5, 3, 4], 0.4),
            ],
            seed,
        );
        let expr = "A(j) = C(k,j,i) * -(D(j,i)) * (D(j,i) * B(i,k,j) + (B(i,k,j) - D(j,i)))";
        for dfmt in ["CSB(2)", "DIA"] {
            let specs = [
                ("C", "CSF"),
                ("D", dfmt),
                ("B", "compressed,dense,compressed:2,0,1"),
                ("A", "sparse"),
            ];
            ok(check(expr, &specs, &d, &[4]));
            let made = conversions(expr, &specs, &d, &[4]);
            assert!(made.len() >= 2, "{dfmt}: {made:?}");
        }
        let specs = [("A", "CSB(2)")];
        let d2 = random_data(&[("A", vec![4, 4], 0.5), ("x", vec![4], 1.0)], seed);
        ok(check("y(i) = A(i,j) * (x(j) + A(i,j))", &specs, &d2, &[4]));
    }
}

#[test]
fn three_operands_in_cyclic_orders_convert_two_for_one_loop_order() {
    for seed in 1..4 {
        let d = random_data(
            &[
                ("D", vec![4, 5, 6], 0.3),
                ("C", vec![6, 4, 5], 0.3),
                ("B", vec![5, 6, 4], 0.3),
            ],
            seed,
        );
        for (b, out) in [("mode-generic", "CSC"), ("CSF", "CSR"), ("COO", "dense")] {
            let specs = [("D", "CSF"), ("C", "CSF"), ("B", b), ("A", out)];
            let expr = "A(i,k) = 2 * (D(j,k,i) * C(i,j,k) + 3 * B(k,i,j))";
            ok(check(expr, &specs, &d, &[6, 5]));
            let made = conversions(expr, &specs, &d, &[6, 5]);
            assert!((1..=3).contains(&made.len()), "{b} -> {out}: {made:?}");
        }
        // A product of the three: a sum over j under a product.
        let specs = [("D", "CSF"), ("C", "CSF"), ("B", "CSF"), ("A", "CSR")];
        ok(check(
            "A(i,k) = D(j,k,i) * C(i,j,k) * B(k,i,j)",
            &specs,
            &d,
            &[6, 5],
        ));
        // One copy for the loop order, then one more for an unordered
        // level merged with the others (sorted into CSR).
        let d2 = random_data(
            &[
                ("B", vec![5, 4, 6], 0.3),
                ("C", vec![4, 5, 6], 0.3),
                ("D", vec![6, 5], 0.4),
            ],
            seed,
        );
        let specs = [
            ("B", "CSF:2,1,0"),
            ("C", "COO"),
            ("D", "hashed,compressed(unordered)"),
            ("A", "CSR"),
        ];
        let expr = "A(k,i) = B(j,i,k) * C(i,j,k) * B(j,i,k) * (B(j,i,k) - D(k,j))";
        ok(check(expr, &specs, &d2, &[6, 4]));
        assert_eq!(conversions(expr, &specs, &d2, &[6, 4]).len(), 2);
    }
}

/// The iterators `expr`'s loops co-iterate, by name, and its conversions.
fn plan(
    expr: &str,
    specs: &[(&str, &str)],
    d: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
) -> (Vec<String>, Vec<(String, String)>) {
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
    let iterators = p
        .kernel
        .nests
        .iter()
        .flat_map(|n| &n.plans)
        .flat_map(|v| &v.loops)
        .flat_map(|l| l.coiterated.clone())
        .collect();
    (
        iterators,
        p.kernel
            .conversions
            .iter()
            .map(|c| (c.source.clone(), c.format_text.clone()))
            .collect(),
    )
}

#[test]
fn unordered_levels_are_merged_through_a_sorted_copy_in_the_kernel() {
    // The paper's reordering: an unordered, unique level that must be
    // enumerated in order (merged with others, appended to a result) is
    // copied under its parent into scratch arrays and sorted there; no
    // conversion before the kernel.
    for seed in 1..5 {
        // Long vectors: segments past the insertion-sort length (32) take
        // the shell sort's larger gaps.
        let d = random_data(
            &[
                ("b", vec![300], 0.3),
                ("c", vec![300], 0.3),
                ("x", vec![300], 0.3),
                ("a", vec![300], 0.3),
                ("z", vec![300], 1.0),
                ("e", vec![300], 0.0),
            ],
            seed,
        );
        for y in ["dense", "sparse", "hash"] {
            for c in ["compressed(unordered)", "hash"] {
                ok(check(
                    "y(i) = b(i) * c(i) + x(i)",
                    &[("b", "sparse"), ("c", c), ("x", "sparse"), ("y", y)],
                    &d,
                    &[300],
                ));
                ok(check(
                    "y(i) = c(i) + x(i)",
                    &[("c", c), ("x", "sparse"), ("y", y)],
                    &d,
                    &[300],
                ));
                // An empty operand: nothing to copy.
                ok(check(
                    "y(i) = e(i) + x(i)",
                    &[("e", c), ("x", "sparse"), ("y", y)],
                    &d,
                    &[300],
                ));
            }
            ok(check(
                "y(i) = -1.5 * b(i) * a(i) * z(i) + x(i) * z(i) * b(i) + z(i) * x(i) * c(i)",
                &[
                    ("b", "compressed(unordered)"),
                    ("a", "COO"),
                    ("z", "dense"),
                    ("x", "compressed(unordered)"),
                    ("c", "sparse"),
                    ("y", y),
                ],
                &d,
                &[300],
            ));
            // Appended in order to a sparse result: a sorted copy.
            ok(check(
                "y(i) = c(i)",
                &[("c", "compressed(unordered)"), ("y", "sparse")],
                &d,
                &[300],
            ));
        }
        let (its, conv) = plan(
            "y(i) = c(i) + x(i)",
            &[
                ("c", "compressed(unordered)"),
                ("x", "sparse"),
                ("y", "sparse"),
            ],
            &d,
            &[300],
        );
        assert!(
            conv.is_empty() && its.contains(&"reorder<c1:compressed(unordered)>".to_string()),
            "{its:?} {conv:?}"
        );
        let (its, conv) = plan(
            "y(i) = c(i) + x(i)",
            &[("c", "hash"), ("x", "sparse"), ("y", "sparse")],
            &d,
            &[300],
        );
        assert!(
            conv.is_empty() && its.iter().any(|i| i.starts_with("reorder<c1:hashed")),
            "{its:?} {conv:?}"
        );
        // Matrices: rows of a hash table, unordered rows, and both levels
        // unordered; the same tensor twice (scratch arrays of its own each).
        let m = random_data(&[("B", vec![20, 45], 0.2), ("C", vec![20, 45], 0.2)], seed);
        for b in [
            "hashed,dense",
            "dense,compressed(unordered)",
            "hashed,compressed(unordered)",
            "compressed(unordered),compressed(unordered)",
            "hashed,hashed",
        ] {
            for y in ["CSR", "DCSR", "dense"] {
                ok(check(
                    "Y(i,j) = B(i,j) + C(i,j)",
                    &[("B", b), ("C", "CSR"), ("Y", y)],
                    &m,
                    &[20, 45],
                ));
                ok(check(
                    "Y(i,j) = B(i,j) - C(i,j) + 2 * B(i,j)",
                    &[("B", b), ("C", "DCSR"), ("Y", y)],
                    &m,
                    &[20, 45],
                ));
            }
            let (its, conv) = plan(
                "Y(i,j) = B(i,j) + C(i,j)",
                &[("B", b), ("C", "DCSR"), ("Y", "DCSR")],
                &m,
                &[20, 45],
            );
            assert!(
                conv.is_empty() && its.iter().any(|i| i.starts_with("reorder<")),
                "{b}: {its:?} {conv:?}"
            );
        }
    }
    // Below a loop over a variable the operand lacks, each segment would be
    // sorted again for every coordinate of that loop: the operand is
    // converted once before the kernel instead, and the note says why.
    let d = random_data(
        &[
            ("A", vec![30, 40], 0.2),
            ("x", vec![40], 0.3),
            ("z", vec![40], 0.3),
        ],
        3,
    );
    let specs = [
        ("A", "CSR"),
        ("x", "compressed(unordered)"),
        ("z", "sparse"),
    ];
    let (its, conv) = plan("y(i) = A(i,j) * (x(j) + z(j))", &specs, &d, &[30]);
    assert!(
        conv == [("x".to_string(), "sparse".to_string())]
            && !its.iter().any(|i| i.starts_with("reorder<")),
        "{its:?} {conv:?}"
    );
    ok(check("y(i) = A(i,j) * (x(j) + z(j))", &specs, &d, &[30]));
    // The command line says how a workspace row assembles the result.
    let (lattice, stderr) = tensorc(&[
        "A(i,j) = B(i,k) * C(k,j)",
        "-f",
        "A:CSR",
        "-f",
        "B:CSR",
        "-f",
        "C:CSR",
        "-d",
        "B:8,8",
        "-d",
        "C:8,8",
        "--emit",
        "lattice",
    ]);
    assert!(
        stderr.contains("note: `A` is assembled over `j` through a dense workspace row"),
        "{stderr}"
    );
    assert!(
        lattice.starts_with("`A` is assembled over `j`"),
        "{lattice}"
    );
    let (_, stderr) = tensorc(&[
        "y(i) = A(i,j) * (x(j) + z(j))",
        "-f",
        "A:CSR",
        "-f",
        "x:compressed(unordered)",
        "-f",
        "z:sparse",
        "-d",
        "A:30,40",
        "--emit",
        "c",
    ]);
    assert!(
        stderr.contains("its sorted copy would be made again for every `i`"),
        "{stderr}"
    );
}

#[test]
fn the_result_read_transposed_on_its_right_hand_side() {
    for seed in 1..4 {
        let d = random_data(&[("A", vec![15, 15], 0.2), ("B", vec![15, 15], 0.2)], seed);
        for f in ["CSR", "CSC", "COO", "dense"] {
            ok(check(
                "A(i,j) = A(j,i) * B(i,j)",
                &[("A", f), ("B", "CSR")],
                &d,
                &[15, 15],
            ));
            ok(check(
                "A(i,j) = A(j,i) + B(i,j)",
                &[("A", f), ("B", "CSR")],
                &d,
                &[15, 15],
            ));
        }
    }
}

#[test]
fn sums_spanning_several_terms_distribute_over_them() {
    for seed in 1..5 {
        let d = random_data(
            &[
                ("B", vec![9, 7], 0.3),
                ("C", vec![9, 7], 0.3),
                ("x", vec![7], 0.5),
                ("w", vec![7], 0.5),
                ("z", vec![9], 0.5),
                ("b", vec![7], 0.5),
                ("c", vec![7], 0.5),
            ],
            seed,
        );
        for (fb, fc) in [("CSR", "COO"), ("dense", "CSC"), ("BCSR(2)", "DCSR")] {
            for y in ["dense", "sparse", "hash"] {
                let specs = [
                    ("B", fb),
                    ("C", fc),
                    ("x", "dense"),
                    ("w", "sparse"),
                    ("z", "sparse"),
                    ("y", y),
                ];
                ok(check(
                    "y(i) = B(i,j) * x(j) - 2 * C(i,j) * w(j) + z(i)",
                    &specs,
                    &d,
                    &[9],
                ));
                ok(check(
                    "y(i) = B(i,j) * x(j) + C(i,j) * w(j) + 3",
                    &specs,
                    &d,
                    &[9],
                ));
            }
        }
        // A term without the summed variable is added once per coordinate.
        ok(check(
            "a = b(j) + 3 - c(j)",
            &[("b", "sparse"), ("c", "sparse")],
            &d,
            &[],
        ));
        ok(check(
            "a = C(k,i) + 3 + B(k,i) * C(k,i) + 2",
            &[("B", "CSR"), ("C", "COO")],
            &d,
            &[],
        ));
        ok(check(
            "y(i) = (B(i,j) + C(i,j)) * z(i) + C(i,j) * x(j)",
            &[("B", "CSR"), ("C", "CSR"), ("y", "sparse")],
            &d,
            &[9],
        ));
        // A summed variable inside an addition under a product, in a sum
        // that cannot hoist over the whole right-hand side (k is summed
        // inside one term): alone, `(b(j) - 1) * 2` would sum b only, so the
        // term is multiplied out and its constant part added once per j.
        let mut d = d;
        d.extend(random_data(&[("T", vec![9, 7, 7], 0.2)], seed));
        ok(check(
            "a = (b(j) - 1) * 2 + B(k,j) * B(k,j)",
            &[("b", "sparse"), ("B", "CSC")],
            &d,
            &[],
        ));
        for y in ["dense", "sparse", "hash"] {
            ok(check(
                "y(i) = (B(i,j) + 1) * (z(i) - 1) + T(i,j,k) * c(k)",
                &[("B", "CSR"), ("T", "COO"), ("z", "sparse"), ("y", y)],
                &d,
                &[9],
            ));
            // The term's own sum over k holds a `1`, added once per k.
            ok(check(
                "y(i) = (B(i,j) + 1) * (c(k) + (1 + x(k))) + T(i,j,l) * w(l)",
                &[
                    ("B", "CSR"),
                    ("T", "CSF"),
                    ("c", "sparse"),
                    ("w", "sparse"),
                    ("y", y),
                ],
                &d,
                &[9],
            ));
            ok(check(
                "y(i) = -(B(i,j) - 2) * z(i) * 3 + T(i,j,k) * T(i,j,k)",
                &[("B", "dense"), ("T", "CSF"), ("z", "dense"), ("y", y)],
                &d,
                &[9],
            ));
        }
        // The differential sweep's case (order 3, the difference negated).
        ok(check(
            "a = T(i,k,j) * T(i,k,j) - (B(i,k) - 2) * -(1)",
            &[("T", "CSF"), ("B", "CSC")],
            &d,
            &[],
        ));
    }
}

#[test]
fn conversions_are_told_and_counted_in_the_run() {
    // The command line says which operand is converted and why.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tensorc"))
        .args([
            "A(i,j) = B(i,j) * C(j,i)",
            "-f",
            "B:CSR",
            "-f",
            "C:CSR",
            "-f",
            "A:dense",
            "-d",
            "B:6,6",
            "-d",
            "C:6,6",
            "--emit",
            "c",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("note: `C` is converted to CSC before each run, because no loop order works"),
        "{stderr}"
    );
    assert!(
        stdout.starts_with("/* converted before the kernel: C_converted is C stored as CSC */"),
        "{stdout}"
    );
}

#[test]
fn products_over_an_addition_holding_a_sum_are_multiplied_out() {
    for seed in 1..5 {
        let d = random_data(
            &[
                ("B", vec![9, 7], 0.3),
                ("C", vec![7, 7], 0.3),
                ("x", vec![7], 0.5),
                ("b", vec![9], 0.5),
                ("z", vec![9], 0.5),
                ("a", vec![], 1.0),
            ],
            seed,
        );
        for fb in ["CSR", "COO", "DIA", "BCSR(2)", "CSC"] {
            for y in ["dense", "sparse", "hash"] {
                let specs = [
                    ("B", fb),
                    ("x", "dense"),
                    ("b", "sparse"),
                    ("z", "sparse"),
                    ("y", y),
                ];
                ok(check("y(i) = (B(i,j) * x(j) + b(i)) * a", &specs, &d, &[9]));
                ok(check(
                    "y(i) = z(i) * (B(i,j) * x(j) - b(i))",
                    &specs,
                    &d,
                    &[9],
                ));
                ok(check(
                    "y(i) = ((B(i,j) * x(j) + b(i)) * a + z(i)) * 2",
                    &specs,
                    &d,
                    &[9],
                ));
            }
        }
        // Multiplied out, not computed through a temporary; a product that
        // would recompute its sum takes a temporary instead.
        let kernel = |expr: &str| {
            let a = parse_assignment(expr).unwrap();
            let orders: BTreeMap<String, usize> = d
                .iter()
                .map(|(k, v)| (k.clone(), v.order()))
                .chain([("y".to_string(), 1)])
                .collect();
            let formats = formats_of(
                &[
                    ("B", "CSR"),
                    ("C", "CSR"),
                    ("x", "dense"),
                    ("b", "dense"),
                    ("z", "dense"),
                    ("a", "dense"),
                    ("y", "dense"),
                ],
                &orders,
            );
            prepare("kernel", &a, &formats, &d, &[9], None)
                .unwrap()
                .kernel
        };
        assert!(kernel("y(i) = (B(i,j) * x(j) + b(i)) * a")
            .temporaries
            .is_empty());
        assert_eq!(
            kernel("y(i) = B(i,j) * (x(j) + C(j,k) * x(k))")
                .temporaries
                .len(),
            1
        );
    }
}

/// Runs `tensorc` with `args`; returns (stdout, stderr) of a successful run.
fn tensorc(args: &[&str]) -> (String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tensorc"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).to_string(), stderr)
}

#[test]
fn time_spent_converting_and_packing_is_reported() {
    // A result in a format with hidden levels goes through a buffer: the
    // note says so, and the timing splits out the packing.
    let (stdout, stderr) = tensorc(&[
        "A(i,j) = B(i,j)",
        "-f",
        "B:CSR",
        "-f",
        "A:DIA",
        "-d",
        "B:40,40",
        "--time",
        "3",
        "--backend",
        "cranelift",
    ]);
    assert!(
        stderr.contains("note: `A` is assembled through a coordinate buffer")
            && stderr.contains("packed into DIA after each run"),
        "{stderr}"
    );
    assert!(stdout.contains("of which packing the result"), "{stdout}");
    // Conversions likewise, in the text and in the JSON report.
    let (stdout, _) = tensorc(&[
        "A(i,j) = B(i,j) * C(j,i)",
        "-f",
        "B:CSR",
        "-f",
        "C:CSR",
        "-f",
        "A:dense",
        "-d",
        "B:30,30",
        "-d",
        "C:30,30",
        "--time",
        "3",
        "--backend",
        "cranelift",
    ]);
    assert!(stdout.contains("of which converting operands"), "{stdout}");
    let (json, _) = tensorc(&[
        "A(i,j) = B(i,j) * C(j,i)",
        "-f",
        "B:CSR",
        "-f",
        "C:CSR",
        "-f",
        "A:dense",
        "-d",
        "B:30,30",
        "-d",
        "C:30,30",
        "--time",
        "3",
        "--json",
        "--backend",
        "cranelift",
    ]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let (convert, median) = (
        v["convert_ms"].as_f64().unwrap(),
        v["median_ms"].as_f64().unwrap(),
    );
    assert!(convert > 0.0 && convert <= median * 1.5 + 0.01, "{json}");
    assert_eq!(v["pack_ms"].as_f64(), Some(0.0), "{json}");
}

#[test]
fn a_sparse_operand_merged_again_for_every_row_is_read_from_a_dense_copy() {
    // Merging `x` with each row of A starts over from x's first entry:
    // rows × nnz(x); a hashed `x` is probed for every entry of A. A dense
    // copy, located, costs nnz(A) loads.
    for seed in 1..4 {
        let d = random_data(
            &[
                ("A", vec![30, 40], 0.2),
                ("B", vec![30, 40], 0.3),
                ("x", vec![40], 0.3),
                ("z", vec![30], 0.5),
            ],
            seed,
        );
        for (a, x) in [
            ("CSR", "sparse"),
            ("COO", "sparse"),
            ("DCSR", "sparse"),
            ("CSR", "compressed(unordered)"),
            ("CSR", "hash"),
        ] {
            let specs = [("A", a), ("x", x)];
            let want = vec![("x".to_string(), "dense".to_string())];
            assert_eq!(
                conversions("y(i) = A(i,j) * x(j)", &specs, &d, &[30]),
                want,
                "{specs:?}"
            );
            ok(check("y(i) = A(i,j) * x(j)", &specs, &d, &[30]));
            assert_eq!(
                conversions(
                    "C(i,j) = A(i,j) * x(j)",
                    &[("A", a), ("x", x), ("C", "CSR")],
                    &d,
                    &[30, 40]
                ),
                want,
                "{specs:?}"
            );
            ok(check(
                "C(i,j) = A(i,j) * x(j)",
                &[("A", a), ("x", x), ("C", "CSR")],
                &d,
                &[30, 40],
            ));
        }
        // Where x drives its loop (outermost: A stored by columns), or is
        // merged in a union (a dense copy would make the union dense), or
        // is read once (no outer loop), it stays as stored.
        for (expr, specs, out) in [
            (
                "y(i) = A(i,j) * x(j)",
                &[("A", "CSC"), ("x", "sparse")][..],
                &[30][..],
            ),
            (
                "y(i) = A(i,j) * x(j) + z(i)",
                &[("A", "CSR"), ("x", "sparse")][..],
                &[30][..],
            ),
            (
                "a = x(j) * B(i,j) * x(j)",
                &[("B", "CSC"), ("x", "sparse")][..],
                &[][..],
            ),
        ] {
            assert!(
                !conversions(expr, specs, &d, out)
                    .iter()
                    .any(|(_, f)| f == "dense"),
                "{expr} {specs:?}"
            );
            ok(check(expr, specs, &d, out));
        }
    }
}

#[test]
fn a_hypersparse_driver_reads_the_sparse_operand_as_stored() {
    // 50 rows of 200,000 columns with 3 entries each, and x with 500:
    // merging x again for each row costs 50 × 500 steps, probing it 150
    // probes; a dense copy fills 200,000 elements on every run.
    let mut rng = tensor_compiler::coo::SplitMix(7);
    let mut a = CooTensor::new(vec![50, 200_000]);
    let mut x = CooTensor::new(vec![200_000]);
    let mut columns = Vec::new();
    for _ in 0..500 {
        let j = rng.below(200_000) as u32;
        columns.push(j);
        x.push(&[j], rng.unit());
    }
    for i in 0..50 {
        for _ in 0..3 {
            // Mostly columns x has, so the rows meet x's entries.
            let j = if rng.below(4) == 0 {
                rng.below(200_000) as u32
            } else {
                columns[rng.below(500) as usize]
            };
            a.push(&[i, j], rng.unit());
        }
    }
    let d = BTreeMap::from([("A".to_string(), a), ("x".to_string(), x)]);
    for x_format in ["sparse", "hash"] {
        let specs = [("A", "DCSR"), ("x", x_format)];
        assert_eq!(
            conversions("y(i) = A(i,j) * x(j)", &specs, &d, &[50]),
            Vec::<(String, String)>::new(),
            "{specs:?}"
        );
        ok(check("y(i) = A(i,j) * x(j)", &specs, &d, &[50]));
    }
}
