//! Sums inside an addition inside a product that multiplying out would
//! recompute are computed first into a dense temporary (taco's `where`),
//! in the same kernel. Each kernel is checked against the dense reference
//! evaluator and the IR interpreter, and on the cc tier where there is one.

mod common;
use common::*;
use std::collections::BTreeMap;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::execute::prepare;
use tensor_compiler::notation::parse_assignment;

fn data(seed: u64) -> BTreeMap<String, CooTensor> {
    let mut rng = Rng(seed);
    [
        ("A", vec![9, 7], 0.3),
        ("B", vec![7, 6], 0.4),
        ("C", vec![7, 7], 0.3),
        ("x", vec![7], 0.6),
        ("w", vec![6], 0.7),
        ("z", vec![9], 0.5),
    ]
    .iter()
    .map(|(n, d, dens)| (n.to_string(), random(d, *dens, &mut rng)))
    .collect()
}

fn ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

#[test]
fn a_nested_sum_runs_through_a_temporary() {
    for seed in 1..4 {
        let d = data(seed);
        for (fa, fb) in [
            ("CSR", "CSR"),
            ("COO", "CSC"),
            ("dense", "DCSR"),
            ("DIA", "BCSR(2)"),
            ("CSC", "COO"),
        ] {
            for y in ["dense", "sparse", "hash"] {
                let specs = [("A", fa), ("B", fb), ("y", y), ("x", "sparse")];
                ok(check(
                    "y(i) = A(i,j) * (x(j) + B(j,k) * w(k))",
                    &specs,
                    &d,
                    &[9],
                ));
                ok(check(
                    "y(i) = z(i) * (2 - A(i,j) * x(j)) + A(i,j) * (x(j) - 3 * B(j,k) * w(k))",
                    &specs,
                    &d,
                    &[9],
                ));
                // Two temporaries, one inside the other's statement.
                ok(check(
                    "y(i) = A(i,j) * (x(j) + C(j,l) * (x(l) + B(l,k) * w(k)))",
                    &[("A", fa), ("B", fb), ("C", "CSR"), ("y", y)],
                    &d,
                    &[9],
                ));
            }
        }
        // A scalar temporary.
        ok(check(
            "y(i) = z(i) * (1 + x(j) * x(j))",
            &[("x", "sparse"), ("z", "sparse")],
            &d,
            &[9],
        ));
    }
}

#[test]
fn the_temporary_is_shown_and_runs_on_both_tiers() {
    let d = data(5);
    let a = parse_assignment("y(i) = A(i,j) * (x(j) + B(j,k) * w(k))").unwrap();
    let orders: BTreeMap<String, usize> = d
        .iter()
        .map(|(k, v)| (k.clone(), v.order()))
        .chain([("y".to_string(), 1)])
        .collect();
    let formats = formats_of(
        &[
            ("A", "CSR"),
            ("B", "CSR"),
            ("x", "dense"),
            ("w", "dense"),
            ("z", "dense"),
            ("C", "dense"),
            ("y", "dense"),
        ],
        &orders,
    );
    let mut p = prepare("kernel", &a, &formats, &d, &[9], None).unwrap();
    assert_eq!(
        p.kernel.nests.len(),
        2,
        "one nest for the temporary, one for the statement"
    );
    let c = tensor_compiler::ir::c::function(&p.kernel.function);
    assert!(
        c.contains("// y_t(j) = B(j,k) * w(k)") && c.contains("y_t_vals"),
        "{c}"
    );
    p.run().unwrap();
    let jit = p.result().unwrap();
    if let Ok(k) = tensor_compiler::backend::cc::compile(&p.kernel.function) {
        p.compiled = k;
        p.run().unwrap();
        close(&p.result().unwrap(), &jit).unwrap();
    } else {
        eprintln!("no C compiler: the cc tier was skipped");
    }
}

#[test]
fn the_command_line_says_what_is_computed_first() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tensorc"))
        .args([
            "y(i) = A(i,j) * (x(j) + B(j,k) * w(k))",
            "-f",
            "A:CSR",
            "-f",
            "B:CSR",
            "-d",
            "A:6,5",
            "-d",
            "B:5,4",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("note: `B(j,k) * w(k)` sits inside an addition inside a product, so it is computed first into a dense temporary: y_t(j) = B(j,k) * w(k)"), "{stderr}");
}
