//! Cranelift kernels that ask for rows ahead call the native prefetch
//! (`jit::call::prefetch_rows_preserving` on x86-64), which must keep
//! every register: the kernel's values stay in registers across the call.
//! A register it changed would show as a wrong sum or a crash, so each
//! kernel here runs over a dense operand larger than the size below which
//! nothing is asked for, against the IR interpreter, bit for bit: where
//! the hints run in a loop of their own (a row summed in strips) and where
//! they stay in the loop over entries (COO with a row per entry, whose
//! rows are not taken a run at a time).

mod common;
use common::*;
use std::collections::BTreeMap;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::execute::{prepare, Prepared};
use tensor_compiler::format::TensorFormat;
use tensor_compiler::ir::passes::{for_codegen, Backend};
use tensor_compiler::notation::{parse_assignment, Assignment};

#[test]
fn prefetching_kernels_keep_their_registers() {
    // 20,000 x 40 doubles: 6.4 MB, past the 4 MiB below which no row is
    // asked for.
    let (m, n, k) = (400, 20_000, 40);
    let expr = "A(i,l) = B(i,j) * D(j,l)";
    let a = parse_assignment(expr).unwrap();
    for (density, seed) in [(0.00008, 1), (0.002, 2)] {
        let data = random_data(&[("B", vec![m, n], density), ("D", vec![n, k], 1.0)], seed);
        for f in ["COO", "CSR", "DCSR"] {
            let formats = formats_rest_dense(&a, &[("B", f)], &data, 2);
            let jit = prepare("kernel", &a, &formats, &data, &[m, k], None).unwrap();
            let code = for_codegen(&jit.kernel.function, Backend::Cranelift).to_string();
            assert!(code.contains("prefetch"), "{f}: no prefetch\n{code}");
            let what = format!("{f} at density {density}");
            agrees_with_the_interpreter(jit, &a, &formats, &data, &[m, k], &what);
        }
    }
}

/// SpMV whose rows' values pass 4 MiB: the Cranelift kernel asks for the
/// rows' values ahead. On x86-64 with prefetch instructions before each
/// row (`jit::prefetch`, the C's hints: `ir::streams`); elsewhere once per
/// strip of rows where they average 4 or more positions
/// (`ir::streams::ask_rows_by_calls`), with a plain copy of the loop where
/// they are shorter. Against the interpreter, bit for bit. A matrix under
/// the size is asked for in no way.
#[test]
fn row_streams_asked_for_keep_their_registers() {
    let by_calls = !cfg!(target_arch = "x86_64");
    let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    // 6 a row and 4.8 MB of values; 3 a row and 4.8 MB; 2 a row, 1.6 MB.
    for (n, density, seed, copies) in [
        (100_000, 0.00006, 3, true),
        (200_000, 0.000015, 4, true),
        (100_000, 0.00002, 5, false),
    ] {
        let data = random_data(&[("A", vec![n, n], density), ("x", vec![n], 1.0)], seed);
        for f in ["CSR", "CSC", "DCSR"] {
            let formats = formats_rest_dense(&a, &[("A", f)], &data, 1);
            let jit = prepare("kernel", &a, &formats, &data, &[n], None).unwrap();
            let code = for_codegen(&jit.kernel.function, Backend::Cranelift).to_string();
            assert_eq!(
                code.contains("long_rows"),
                copies && by_calls,
                "{f}\n{code}"
            );
            assert_eq!(code.contains("prefetch"), copies, "{f}\n{code}");
            let instructions = jit.compiled.prefetches > 0;
            assert_eq!(instructions, copies && !by_calls, "{f}\n{code}");
            let what = format!("{f} at density {density}");
            agrees_with_the_interpreter(jit, &a, &formats, &data, &[n], &what);
        }
    }
}

/// MTTKRP from CSF with factors past 4 MiB and fibres of one or two
/// entries: the loops over a level's positions ask in strips aligned to
/// multiples of 8 positions, only a strip starting at one calling
/// (`ir::prefetch::strip_for_calls`), so a fibre's loop mostly runs
/// without a call; against the interpreter, bit for bit.
#[test]
fn short_fibres_ask_once_per_aligned_strip() {
    // 40,000 x 16 doubles: 5.1 MB a factor.
    let (m, n, r) = (50, 40_000, 16);
    let expr = "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)";
    let a = parse_assignment(expr).unwrap();
    let data = random_data(
        &[
            ("B", vec![m, n, n], 2.5e-7),
            ("P", vec![n, r], 1.0),
            ("Q", vec![n, r], 1.0),
        ],
        6,
    );
    for f in ["CSF", "COO"] {
        let formats = formats_rest_dense(&a, &[("B", f)], &data, 2);
        let jit = prepare("kernel", &a, &formats, &data, &[m, r], None).unwrap();
        let code = for_codegen(&jit.kernel.function, Backend::Cranelift).to_string();
        assert!(code.contains("if strip % 8 == 0 {"), "{f}\n{code}");
        agrees_with_the_interpreter(jit, &a, &formats, &data, &[m, r], f);
    }
}

/// SpDM over more than 65,536 stored entries, its dense rows past 4 MiB:
/// the coordinates are sampled once on the packed operand
/// (`Function::clustered`). A banded matrix's columns follow each other,
/// and its Cranelift kernel asks for no row; a random matrix's are
/// scattered, and it asks. Both against the interpreter, bit for bit.
#[test]
fn rows_at_clustered_coordinates_are_not_asked_for() {
    let (m, n, k) = (20_000, 20_000, 40);
    let a = parse_assignment("C(i,l) = B(i,j) * D(j,l)").unwrap();
    let mut banded = CooTensor::new(vec![m, n]);
    for i in 0..m as u32 {
        for j in i.saturating_sub(2)..(i + 3).min(n as u32) {
            banded.push(&[i, j], 1.0 + f64::from(i % 7) - f64::from(j % 5) * 0.25);
        }
    }
    let mut data = random_data(&[("B", vec![m, n], 0.0005), ("D", vec![n, k], 1.0)], 7);
    let scattered = data["B"].clone();
    for (matrix, b, asks) in [("banded", banded, false), ("random", scattered, true)] {
        data.insert("B".into(), b);
        for f in ["COO", "CSR"] {
            let formats = formats_rest_dense(&a, &[("B", f)], &data, 2);
            let jit = prepare("kernel", &a, &formats, &data, &[m, k], None).unwrap();
            let code = for_codegen(&jit.kernel.function, Backend::Cranelift).to_string();
            assert_eq!(
                code.contains("prefetch D_vals"),
                asks,
                "{matrix} {f}\n{code}"
            );
            let what = format!("{matrix} in {f}");
            agrees_with_the_interpreter(jit, &a, &formats, &data, &[m, k], &what);
        }
    }
}

/// COO and COO-AoS SpMV over an `x` past 4 MiB and more than 65,536 entries: where
/// the columns sampled are scattered, the Cranelift kernel asks for the
/// elements of `x` it gathers: on x86-64 with a prefetch instruction at
/// each position (`jit::prefetch`), which reads the coordinate it asks at
/// below the array's end; elsewhere once per strip of positions
/// (`ir::gathers::ask_gathers_by_calls`). Where they follow each other (a
/// banded matrix) it does not ask. Against the interpreter, bit for bit.
#[test]
fn gathers_at_scattered_coordinates_are_asked_for() {
    let n = 600_000;
    let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    let mut banded = CooTensor::new(vec![n, n]);
    for i in 0..n as u32 {
        for j in i.saturating_sub(1)..(i + 2).min(n as u32) {
            banded.push(&[i, j], 0.5 + f64::from(i % 3) - f64::from(j % 4) * 0.125);
        }
    }
    let mut data = random_data(&[("A", vec![n, n], 2e-7), ("x", vec![n], 1.0)], 8);
    let scattered = data["A"].clone();
    for (matrix, m, asks) in [("banded", banded, false), ("random", scattered, true)] {
        data.insert("A".into(), m);
        // COO-AoS: the columns are field 1 of the records (row, column),
        // asked for with prefetch instructions only (the calls of other
        // targets take whole arrays of coordinates).
        for (format, asks) in [
            ("COO", asks),
            ("COO-AoS", asks && cfg!(target_arch = "x86_64")),
        ] {
            let formats = formats_rest_dense(&a, &[("A", format)], &data, 1);
            let jit = prepare("kernel", &a, &formats, &data, &[n], None).unwrap();
            let code = for_codegen(&jit.kernel.function, Backend::Cranelift).to_string();
            assert_eq!(
                code.contains("prefetch x_vals"),
                asks,
                "{matrix} {format}\n{code}"
            );
            if cfg!(target_arch = "x86_64") && asks {
                assert!(jit.compiled.prefetches > 0, "{matrix} {format}\n{code}");
            }
            let what = format!("{matrix} in {format}");
            agrees_with_the_interpreter(jit, &a, &formats, &data, &[n], &what);
        }
    }
}

/// Run the prepared kernel `jit`, and the same kernel in the IR
/// interpreter: their results' values must agree bit for bit.
fn agrees_with_the_interpreter(
    mut jit: Prepared,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    data: &BTreeMap<String, CooTensor>,
    dims: &[usize],
    what: &str,
) {
    jit.run().unwrap();
    let mut interpreted = prepare("kernel", a, formats, data, dims, None).unwrap();
    interpreted.run_interpreted().unwrap();
    let bits = |p: &Prepared| {
        let t = p.result().unwrap();
        t.vals.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    };
    assert_eq!(bits(&jit), bits(&interpreted), "{what}");
}
