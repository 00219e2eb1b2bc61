//! Run-time format conversion (`storage::convert`) on a matrix file, against
//! the reference path it replaced (interpreter `unpack`, then
//! `pack_generic`): median wall-clock ms of each, per format pair.
//! `cargo build --release --workspace --examples &&
//!  target/release/examples/convert_time FILE.mtx [RUNS [FROM:TO...]]`
//! (a pair given on the command line skips the reference, for profiling).

use std::time::Instant;
use tensor_compiler::format::{parse_format, Registry};
use tensor_compiler::storage::{convert, pack, pack_generic, unpack};

fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: convert_time FILE.mtx [RUNS [FROM:TO...]]");
        std::process::exit(2);
    };
    let runs: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(7);
    let coo = tensor_compiler::io::read_tensor(std::path::Path::new(path))
        .unwrap_or_else(|e| panic!("{e}"));
    let r = Registry::builtin();
    println!("{path}: {:?}, {} entries", coo.dims, coo.nnz());
    println!("| from | to | convert ms | unpack + pack_generic ms |");
    println!("|---|---|---|---|");
    let given: Vec<(&str, &str)> = args
        .iter()
        .skip(3)
        .filter_map(|p| p.split_once(':'))
        .collect();
    let default = [
        ("CSR", "CSC"),
        ("CSC", "CSR"),
        ("CSR", "CSR"),
        ("COO", "CSR"),
        ("CSR", "DCSR"),
        ("CSR", "COO"),
    ];
    let pairs = if given.is_empty() {
        default.to_vec()
    } else {
        given.clone()
    };
    for (from, to) in pairs {
        let f = parse_format(from, 2, &r).unwrap();
        let g = parse_format(to, 2, &r).unwrap();
        let t = pack("B", &coo, &f).unwrap();
        let fast = median_ms(runs, || drop(convert(&t, "A", &g).unwrap()));
        let reference = if given.is_empty() {
            median_ms(runs.min(3), || {
                drop(pack_generic("A", &unpack(&t).unwrap(), &g).unwrap())
            })
        } else {
            f64::NAN
        };
        println!("| {from} | {to} | {fast:.3} | {reference:.3} |");
    }
}
