//! Kernels whose innermost loops the Cranelift tier runs in vector lanes
//! (rows of a dense operand, diagonals, dense element-wise loops, rows
//! summed in strips of vector pairs), at every
//! trip count around the vector width, against the IR interpreter: the
//! lanes do the scalar loop's operations in its order, so the answers must
//! be the same bit for bit, remainder iterations included.

mod common;
use common::*;
use std::collections::BTreeMap;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::execute::prepare;
use tensor_compiler::ir::passes;
use tensor_compiler::notation::parse_assignment;

fn same_bits(
    expr: &str,
    specs: &[(&str, &str)],
    data: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
) {
    same_bits_made_for(expr, specs, data, out_dims, Made::ForTheData);
}

/// What the Cranelift kernel is made for.
#[derive(Clone, Copy, PartialEq)]
enum Made {
    ForTheData,
    /// As if for data of 16M entries in every tensor, with its rows summed
    /// in strips where it has rows to (`ir::strips`, which the Cranelift
    /// tier takes only for large data): whether it must have them.
    AsIfLarge {
        strips: bool,
    },
}

fn same_bits_made_for(
    expr: &str,
    specs: &[(&str, &str)],
    data: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
    made: Made,
) {
    let a = parse_assignment(expr).unwrap();
    let formats = formats_rest_dense(&a, specs, data, out_dims.len());
    let mut jit = prepare("kernel", &a, &formats, data, out_dims, None)
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    if let Made::AsIfLarge { strips } = made {
        let f = &mut jit.kernel.function;
        f.make_as_if_large();
        let g = passes::for_codegen(f, passes::Backend::Cranelift);
        assert_eq!(
            g.to_string().contains("strip_sum"),
            strips,
            "{expr} {specs:?}\n{g}"
        );
        jit.compiled = tensor_compiler::jit::compile(f).unwrap();
    }
    jit.run().unwrap_or_else(|e| panic!("{expr}: {e}"));
    let mut interpreted = prepare("kernel", &a, &formats, data, out_dims, None).unwrap();
    interpreted
        .run_interpreted()
        .unwrap_or_else(|e| panic!("{expr}: interpreter: {e}"));
    let (got, want) = (jit.result().unwrap(), interpreted.result().unwrap());
    assert_eq!(got.dims, want.dims, "{expr} {specs:?}");
    let bits = |t: &CooTensor| t.vals.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&got),
        bits(&want),
        "{expr} {specs:?} out {out_dims:?}\n{}",
        jit.kernel.function
    );
    assert!(got.nnz() > 0 || want.nnz() == 0);
}

#[test]
fn sparse_times_dense_at_every_row_width() {
    for cols in 1..=19 {
        let d = random_data(
            &[("B", vec![7, 6], 0.4), ("C", vec![6, cols], 1.0)],
            cols as u64,
        );
        for f in ["CSR", "COO"] {
            same_bits("A(i,k) = B(i,j) * C(j,k)", &[("B", f)], &d, &[7, cols]);
        }
    }
}

#[test]
fn mttkrp_at_every_row_width() {
    for cols in 1..=18 {
        let d = random_data(
            &[
                ("B", vec![4, 5, 3], 0.3),
                ("P", vec![5, cols], 1.0),
                ("Q", vec![3, cols], 1.0),
            ],
            cols as u64,
        );
        same_bits(
            "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
            &[("B", "COO")],
            &d,
            &[4, cols],
        );
    }
}

/// A kernel is compiled for its data's sizes (`Function::fixed_params`):
/// given data of another size, a call refuses to run rather than read
/// rows of the length it was compiled for.
#[test]
fn a_kernel_compiled_for_one_size_refuses_another() {
    let expr = "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)";
    let a = parse_assignment(expr).unwrap();
    let prepared = |cols: usize| {
        let d = random_data(
            &[
                ("B", vec![4, 5, 3], 0.3),
                ("P", vec![5, cols], 1.0),
                ("Q", vec![3, cols], 1.0),
            ],
            cols as u64,
        );
        let formats = formats_rest_dense(&a, &[("B", "CSF")], &d, 2);
        prepare("kernel", &a, &formats, &d, &[4, cols], None).unwrap()
    };
    let (mut sixteen, eight) = (prepared(16), prepared(8));
    assert!(
        sixteen
            .compiled
            .fixed_params
            .iter()
            .any(|(p, v)| p.c_name() == "P2_N" && *v == 16),
        "{:?}",
        sixteen.compiled.fixed_params
    );
    sixteen.run().expect("its own data");
    sixteen.inputs = eight.inputs;
    sixteen.output = eight.output;
    let e = sixteen.run().expect_err("data of another size").to_string();
    assert!(
        e.contains("kernel compiled for") && e.contains("= 16, called with 8"),
        "{e}"
    );
}

/// Rows summed in strips of registers (`ir::strips`), which the Cranelift
/// tier holds two elements to a vector (`jit::pairs`), in kernels made as
/// if for large data (the only ones that have them): rows of whole strips
/// of 16 and the elements past them, summed over one loop (SpDM, MTTKRP
/// from COO, its rows taken a run at a time), and of 8 over a slice's
/// fibers and their entries (MTTKRP from CSF, whose `P(k,j)` holds across
/// a fiber's entries).
#[test]
fn rows_summed_in_vector_pairs_at_every_strip_width() {
    for cols in [7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40, 41] {
        let d = random_data(
            &[("B", vec![9, 8], 0.4), ("C", vec![8, cols], 1.0)],
            100 + cols as u64,
        );
        for f in ["CSR", "COO", "DCSR"] {
            same_bits_made_for(
                "A(i,k) = B(i,j) * C(j,k)",
                &[("B", f)],
                &d,
                &[9, cols],
                Made::AsIfLarge { strips: true },
            );
        }
        let d = random_data(
            &[
                ("B", vec![4, 5, 6], 0.3),
                ("P", vec![5, cols], 1.0),
                ("Q", vec![6, cols], 1.0),
            ],
            200 + cols as u64,
        );
        for (f, strips) in [("CSF", true), ("COO", true)] {
            same_bits_made_for(
                "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
                &[("B", f)],
                &d,
                &[4, cols],
                Made::AsIfLarge { strips },
            );
        }
    }
}

#[test]
fn diagonals_of_every_length() {
    for n in 1..=20 {
        let d = random_data(&[("A", vec![n, n], 0.5), ("x", vec![n], 1.0)], n as u64);
        same_bits("y(i) = A(i,j) * x(j)", &[("A", "DIA")], &d, &[n]);
    }
}

#[test]
fn dense_element_wise_loops() {
    for n in 1..=18 {
        let d = random_data(&[("B", vec![3, n], 1.0), ("C", vec![3, n], 1.0)], n as u64);
        same_bits("A(i,j) = B(i,j) - 2 * C(i,j)", &[], &d, &[3, n]);
        same_bits("A(i,j) = -B(i,j) * C(i,j)", &[], &d, &[3, n]);
    }
}

#[test]
fn blocks_of_every_size_around_the_unrolled_length() {
    // The Cranelift tier unrolls innermost loops of up to 4 constant
    // iterations (a block's inner level): blocks of 1 to 6, bit for bit.
    for b in 1..=6 {
        let d = random_data(
            &[
                ("A", vec![13, 11], 0.4),
                ("B", vec![13, 11], 0.4),
                ("x", vec![11], 1.0),
            ],
            b as u64,
        );
        let f = format!("BCSR({b})");
        same_bits("y(i) = A(i,j) * x(j)", &[("A", f.as_str())], &d, &[13]);
        same_bits(
            "C(i,j) = A(i,j) + B(i,j)",
            &[("A", f.as_str()), ("B", f.as_str())],
            &d,
            &[13, 11],
        );
    }
}

#[test]
fn block_rows_in_lanes_add_in_order_and_skip_stored_zeros() {
    // A block row's products run in lanes and are added one lane after
    // the other: terms whose sum depends on the order (1e16, 1, -1e16)
    // must come out as the interpreter adds them. Column 1 of `x` is
    // infinite and meets only stored zeros inside blocks, which must not
    // turn into NaN. 8 columns fill the blocks of 4; 9 and 7 leave the
    // last block cut short (the scalar path).
    for (rows, cols) in [(8, 8), (9, 9), (7, 7), (6, 8)] {
        let mut a = CooTensor::new(vec![rows, cols]);
        for i in 0..rows as u32 {
            for j in 0..cols as u32 {
                if j != 1 && (i + j) % 3 != 2 {
                    let v = [1e16, 1.0, -1e16, 3.0][(i * 7 + j) as usize % 4];
                    a.push(&[i, j], v);
                }
            }
        }
        let mut x = CooTensor::new(vec![cols]);
        for j in 0..cols as u32 {
            x.push(
                &[j],
                if j == 1 {
                    f64::INFINITY
                } else {
                    1.0 + j as f64
                },
            );
        }
        let d = BTreeMap::from([("A".to_string(), a), ("x".to_string(), x)]);
        for f in ["BCSR(4)", "BCSR(2)", "BCSR(3)"] {
            same_bits("y(i) = A(i,j) * x(j)", &[("A", f)], &d, &[rows]);
            // And against the dense oracle, an answer of its own.
            check("y(i) = A(i,j) * x(j)", &[("A", f)], &d, &[rows])
                .unwrap_or_else(|e| panic!("{f} on {rows}x{cols}: {e}"));
        }
    }
}

/// A strip's loop adds eight pairs of products into sums kept across it;
/// tested at its top (`jit::translate`'s `sums_fold_their_loads`), each sum
/// is used once, and Cranelift folds the factor rows' loads into the
/// multiplies (`vmulpd 0x10(..), ..`), where a loop tested at its bottom
/// loaded each into a register first: MTTKRP from COO and CSF, 0.82x and
/// 0.91x the time. (That the loops tested at the top give the answer
/// bit for bit, rows the loop never enters included, is
/// `rows_summed_in_vector_pairs_at_every_strip_width`.)
#[test]
fn strip_loops_fold_their_loads_into_the_multiplies() {
    let d = random_data(
        &[
            ("B", vec![4, 5, 6], 0.3),
            ("P", vec![5, 16], 1.0),
            ("Q", vec![6, 16], 1.0),
        ],
        316,
    );
    let expr = "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)";
    let a = parse_assignment(expr).unwrap();
    for f in ["COO", "CSF"] {
        let formats = formats_rest_dense(&a, &[("B", f)], &d, 2);
        let mut p = prepare("kernel", &a, &formats, &d, &[4, 16], None).unwrap();
        p.kernel.function.make_as_if_large();
        let asm = tensor_compiler::jit::disassemble(&p.kernel.function).unwrap();
        if !asm.contains("vmulpd") {
            // No AVX on this host: SSE's `mulpd` folds only aligned loads.
            continue;
        }
        let folded = asm
            .lines()
            .filter(|l| l.contains("vmulpd") && l.contains("(%"))
            .count();
        // P's and Q's eight pairs each, in the strip of 16.
        assert!(folded >= 16, "{f}: {folded} multiplies from memory\n{asm}");
    }
}
