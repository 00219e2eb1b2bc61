//! Cranelift compile time of the paper's kernels: the first compile in the
//! process and the median of the following ones, in CPU time of the compiling thread.
//! `cargo run --release -p tensor-compiler --example compile_time [FILTER [RUNS]]`
//! (FILTER: only kernels whose label contains it, e.g. `PLUS`; RUNS
//! compiles each, 15 by default: more for a profiler to sample.)
//! `PASSES=1` adds Cranelift's pass timings, `CODEGEN_IR=1` the loop IR
//! Cranelift's translator is given (after `passes::for_codegen`),
//! `AS_IF_LARGE=1` compiles every kernel as if made for large data
//! (`Function::make_as_if_large`: what the Cranelift tier does only there),
//! `DIMS="P:300,16 Q:400,16"` gives tensors other dimensions than 100 in
//! each, and `FIXED=1` compiles the dense levels' sizes and the dimensions
//! in as constants, as `tensorc` does for the data it runs
//! (`Function::fixed_params`). The bench's MTTKRP of rank 16:
//! `AS_IF_LARGE=1 FIXED=1 DIMS="A:3023,16 B:3023,2296,7204 P:2296,16 Q:7204,16"`.

use std::collections::BTreeMap;
use std::time::Instant;
use tensor_compiler::format::{parse_format, Registry};
use tensor_compiler::ir::passes;
use tensor_compiler::lower::{compile, compile_for_entries};
use tensor_compiler::notation::parse_assignment;

fn main() {
    let r = Registry::builtin();
    let kernels: &[(&str, &str, &[(&str, &str, usize)])] = &[
        (
            "COPY",
            "y(i) = b(i)",
            &[("b", "dense", 1), ("y", "dense", 1)],
        ),
        (
            "SpMV CSR",
            "y(i) = A(i,j) * x(j)",
            &[("A", "CSR", 2), ("x", "dense", 1), ("y", "dense", 1)],
        ),
        (
            "SpMV COO",
            "y(i) = A(i,j) * x(j)",
            &[("A", "COO", 2), ("x", "dense", 1), ("y", "dense", 1)],
        ),
        (
            "SpMV DIA",
            "y(i) = A(i,j) * x(j)",
            &[("A", "DIA", 2), ("x", "dense", 1), ("y", "dense", 1)],
        ),
        (
            "SpMV ELL",
            "y(i) = A(i,j) * x(j)",
            &[("A", "ELL", 2), ("x", "dense", 1), ("y", "dense", 1)],
        ),
        (
            "SpMV BCSR(4)",
            "y(i) = A(i,j) * x(j)",
            &[("A", "BCSR(4)", 2), ("x", "dense", 1), ("y", "dense", 1)],
        ),
        (
            "SpMV CSB(8)",
            "y(i) = A(i,j) * x(j)",
            &[("A", "CSB(8)", 2), ("x", "dense", 1), ("y", "dense", 1)],
        ),
        (
            "PLUS CSR",
            "A(i,j) = B(i,j) + C(i,j)",
            &[("A", "CSR", 2), ("B", "CSR", 2), ("C", "CSR", 2)],
        ),
        (
            "PLUS COO",
            "A(i,j) = B(i,j) + C(i,j)",
            &[("A", "COO", 2), ("B", "COO", 2), ("C", "COO", 2)],
        ),
        (
            "PLUS3 COO",
            "A(i,j,k) = B(i,j,k) + C(i,j,k)",
            &[("A", "COO", 3), ("B", "COO", 3), ("C", "COO", 3)],
        ),
        (
            "PLUS3 CSF",
            "A(i,j,k) = B(i,j,k) + C(i,j,k)",
            &[("A", "CSF", 3), ("B", "CSF", 3), ("C", "CSF", 3)],
        ),
        (
            "SpDM COO",
            "A(i,k) = B(i,j) * C(j,k)",
            &[("A", "dense", 2), ("B", "COO", 2), ("C", "dense", 2)],
        ),
        (
            "SpDM CSR",
            "A(i,k) = B(i,j) * C(j,k)",
            &[("A", "dense", 2), ("B", "CSR", 2), ("C", "dense", 2)],
        ),
        (
            "TTV COO",
            "A(i,j) = B(i,j,k) * c(k)",
            &[("A", "dense", 2), ("B", "COO", 3), ("c", "dense", 1)],
        ),
        (
            "MTTKRP",
            "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
            &[
                ("A", "dense", 2),
                ("B", "COO", 3),
                ("P", "dense", 2),
                ("Q", "dense", 2),
            ],
        ),
        (
            "MTTKRP CSF",
            "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
            &[
                ("A", "dense", 2),
                ("B", "CSF", 3),
                ("P", "dense", 2),
                ("Q", "dense", 2),
            ],
        ),
        (
            "INNERPROD",
            "a = B(i,j,k) * C(i,j,k)",
            &[("a", "dense", 0), ("B", "COO", 3), ("C", "COO", 3)],
        ),
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = args.first().cloned().unwrap_or_default();
    let runs: usize = args
        .get(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(15)
        .max(2);
    for (label, expr, specs) in kernels.iter().filter(|(l, ..)| l.contains(filter.as_str())) {
        let a = parse_assignment(expr).unwrap();
        let formats = specs
            .iter()
            .map(|(n, f, o)| (n.to_string(), parse_format(f, *o, &r).unwrap()))
            .collect();
        let mut dims: BTreeMap<String, Vec<usize>> = specs
            .iter()
            .map(|(n, _, o)| (n.to_string(), vec![100; *o]))
            .collect();
        dims.extend(dims_from_env());
        let t0 = Instant::now();
        let as_if_large = std::env::var_os("AS_IF_LARGE").is_some_and(|v| v == "1");
        let mut k = if as_if_large {
            // 16M stored entries in every operand: COO's rows come in runs,
            // as in the bench's matrices (`lower::runs_of_equal_coordinates`).
            let entries = specs
                .iter()
                .map(|(n, ..)| (n.to_string(), 1 << 24))
                .collect();
            compile_for_entries("kernel", &a, &formats, &dims, &entries).unwrap()
        } else {
            compile("kernel", &a, &formats, &dims).unwrap()
        };
        if as_if_large {
            k.function.make_as_if_large();
        }
        if std::env::var_os("FIXED").is_some_and(|v| v == "1") {
            fix_dimensions(&mut k.function, &dims);
        }
        let lower_ms = t0.elapsed().as_secs_f64() * 1e3;
        // CPU time of the compiling thread, not wall time: the figures
        // hold on a busy machine.
        let mut times: Vec<f64> = (0..runs)
            .map(|_| {
                let c = tensor_compiler::jit::compile(&k.function).unwrap();
                c.compile_cpu.unwrap_or(c.compile_time).as_secs_f64() * 1e3
            })
            .collect();
        let first = times.remove(0);
        times.sort_by(f64::total_cmp);
        if std::env::var_os("CODEGEN_IR").is_some() {
            let g = passes::for_codegen(&k.function, passes::Backend::Cranelift);
            println!("{}", tensor_compiler::ir::print::function(&g));
        }
        if std::env::var_os("PASSES").is_some() {
            println!("{}", cranelift_codegen::timing::take_current());
        }
        println!(
            "{label:12} lower {lower_ms:6.3} ms  jit first {first:7.3} ms  then median {:6.3} ms",
            times[times.len() / 2]
        );
    }
}

/// `DIMS`: `NAME:D1,D2,...` separated by spaces.
fn dims_from_env() -> BTreeMap<String, Vec<usize>> {
    let text = std::env::var("DIMS").unwrap_or_default();
    text.split_whitespace()
        .map(|spec| {
            let (name, list) = spec.split_once(':').expect("DIMS: NAME:D1,D2,..."); // ok: example's input
            let dims = list.split(',').map(|d| d.parse().expect("DIMS: a number")); // ok: example's input
            (name.to_string(), dims.collect())
        })
        .collect()
}

/// Each dense level's size and each dimension as a fixed parameter.
fn fix_dimensions(f: &mut tensor_compiler::ir::Function, dims: &BTreeMap<String, Vec<usize>>) {
    use tensor_compiler::ir::ParamSlot;
    f.fixed_params = f
        .params()
        .into_iter()
        .filter_map(|p| {
            let d = match p.slot {
                ParamSlot::Level(k, "N") => k,
                ParamSlot::Dim(d) => d,
                _ => return None,
            };
            let v = *dims.get(&*p.tensor)?.get(d)?;
            Some((p, v as i64))
        })
        .collect();
}
