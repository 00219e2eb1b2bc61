//! Differential testing at scale (see `differential/mod.rs`): 2,000 seeded
//! cases from templates, each judged against the dense oracle, run both as
//! compiled and by the bounds-checked IR interpreter (every array access of
//! the IR the backends translate checked), some again on the cc tier and
//! with infinities and NaNs among the operands' values. Fails on any wrong
//! answer or crash; refusals are allowed here and counted.
//!
//! `scripts/sweep.sh [N]` runs the ignored `differential_sweep` on N cases
//! (default 20,000) and prints the same report.

mod differential;

use differential::isolate::{
    run_isolated, run_isolated_with, worker_main, ABORT_AT_ENV, SPIN_AT_ENV,
};
use differential::report::normalize;
use differential::run::{compare, expected};
use differential::templates::generate;
use differential::{Class, Summary};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Cases the test suite runs.
const CI_CASES: u64 = 2_000;
/// A case that takes this much CPU time (a few kernels on tensors of at
/// most a few hundred entries) is frozen.
const TIMEOUT: Duration = Duration::from_secs(60);

fn workers() -> usize {
    std::env::var("DIFFERENTIAL_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(2)
}

#[test]
fn seeded_cases_match_the_oracle() {
    all_match_the_oracle(0..CI_CASES, &[], "");
}

/// Cases the test suite also runs on the cc tier (each compiles its C with
/// the system compiler, a tenth of a second or more).
const CC_CASES: u64 = 300;

/// The first cases again, their kernels on the cc tier: the C most runs
/// end up on, against the same oracle. Objects go to a cache of this run's
/// own, so none is reused from an earlier build of the compiler.
#[test]
fn seeded_cases_match_the_oracle_on_the_cc_tier() {
    if let Err(e) = tensor_compiler::backend::cc::compiler() {
        println!("skipped the cc tier: {e}");
        return;
    }
    /// Removes the cache when the test ends, failed or not.
    struct Cache(std::path::PathBuf);
    impl Drop for Cache {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let cache = Cache(std::env::temp_dir().join(format!("differential-cc-{}", std::process::id())));
    let dir = cache.0.to_string_lossy().into_owned();
    all_match_the_oracle(
        0..CC_CASES,
        &[("DIFFERENTIAL_TIER", "cc"), ("TENSOR_CACHE_DIR", &dir)],
        " on the cc tier",
    );
}

/// Cases the test suite also runs with infinities and NaNs among the
/// operands' values.
const NON_FINITE_CASES: u64 = 1_000;

/// Seeded cases whose operands hold infinities and NaNs
/// (`DIFFERENTIAL_NON_FINITE=1`), against the oracle that reads an entry
/// an operand does not store as no term: fill (a block's padding, a dense
/// copy's zeros, an operand located where it has no entry) must never
/// meet an infinity in a product.
#[test]
fn seeded_cases_with_non_finite_values_match_the_oracle() {
    all_match_the_oracle(
        0..NON_FINITE_CASES,
        &[("DIFFERENTIAL_NON_FINITE", "1")],
        " with non-finite values",
    );
}

/// Judge `seeds` in worker processes (with `env`, described by `on` in the
/// log): every case judged, none wrong or crashed.
fn all_match_the_oracle(seeds: std::ops::Range<u64>, env: &[(&str, &str)], on: &str) {
    let t0 = Instant::now();
    let n = seeds.end - seeds.start;
    let summary = Summary::new(run_isolated_with(seeds, workers(), TIMEOUT, env));
    // The full report (reproducers) shows when the test fails; the counts
    // and the top refusals always go to the log, past the output capture.
    println!("{}", summary.render(40));
    let headline = format!(
        "{}{n} differential cases{on} in {:.1} s\n",
        summary.headline(10),
        t0.elapsed().as_secs_f64()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), headline.as_bytes());
    assert_eq!(summary.records.len() as u64, n, "every case is judged");
    let (wrong, crash) = (summary.count(Class::Wrong), summary.count(Class::Crash));
    assert!(
        wrong == 0 && crash == 0,
        "{wrong} wrong answers and {crash} crashes in {n} cases (reproducers above)"
    );
}

/// The reproducer printed for a case is faithful: for cases that pass in
/// process, running it with `tensorc` gives the oracle's answer.
#[test]
fn reproducers_give_the_same_answer_on_the_command_line() {
    let bin = Path::new(env!("CARGO_BIN_EXE_tensorc")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Judged in child processes, like every case, so a crash stays there.
    let passing: Vec<u64> = run_isolated(0..60, 1, TIMEOUT)
        .iter()
        .filter(|r| r.class == Class::Pass)
        .map(|r| r.seed)
        .take(15)
        .collect();
    let mut checked = 0;
    for seed in passing {
        let case = generate(seed);
        let dir =
            std::env::temp_dir().join(format!("differential-repro-{}-{seed}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = case.command_line();
        let out = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(&dir)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "seed {seed}: {script}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = dir.join(format!("{}.out.tns", case.result.name));
        let got = tensor_compiler::io::read_tns_with_dims(&file, Some(&case.result.dims)).unwrap();
        let diff = compare(&got, &expected(&case).unwrap());
        assert!(
            diff.is_none(),
            "seed {seed}: the command line disagrees with the oracle: {diff:?}\n{script}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        checked += 1;
    }
    assert_eq!(checked, 15, "enough passing cases to check");
}

/// A worker that dies or spins inside a case costs that case only: it is
/// reported as a crash and the run goes on from the next seed.
#[test]
fn dead_and_frozen_workers_are_crashes() {
    let records = run_isolated_with(
        0..4,
        1,
        Duration::from_secs(1),
        &[(ABORT_AT_ENV, "1"), (SPIN_AT_ENV, "2")],
    );
    let seeds: Vec<u64> = records.iter().map(|r| r.seed).collect();
    assert_eq!(seeds, vec![0, 1, 2, 3]);
    assert_eq!(records[1].class, Class::Crash);
    assert!(
        records[1].message.contains("died"),
        "{}",
        records[1].message
    );
    assert_eq!(records[2].class, Class::Crash);
    assert!(
        records[2].message.contains("frozen"),
        "{}",
        records[2].message
    );
    assert!(
        records[1].detail.contains("tensorc '"),
        "a crash comes with its reproducer"
    );
}

#[test]
fn comparison_finds_a_single_wrong_entry() {
    use tensor_compiler::coo::CooTensor;
    let mut want = CooTensor::new(vec![2, 3]);
    want.push(&[1, 2], 1.5);
    let mut got = want.clone();
    assert!(compare(&got, &want).is_none());
    got.push(&[0, 0], 1e-12);
    assert!(compare(&got, &want).is_none(), "within tolerance");
    got.push(&[1, 2], 0.25);
    let diff = compare(&got, &want).expect("a wrong entry");
    assert!(diff.contains("[1, 2]") && diff.contains("1.75"), "{diff}");
}

#[test]
fn refusals_differing_only_in_names_and_sizes_count_as_one() {
    let a = "x1:hashed stores coordinates unordered, so it cannot be co-iterated with other operands over `j`";
    let b = "B1:hashed stores coordinates unordered, so it cannot be co-iterated with other operands over `i`";
    assert_eq!(normalize(a), normalize(b));
    let c = "no loop order works: B(i,j) (CSR) visits i before j, assembled in order but C(i,j) (CSC) visits j before i; store C with mode order 0,1 (-f C:dense,compressed:0,1)";
    let d = "no loop order works: C(k,j) (DCSR) visits k before j, assembled in order but B(k,j) (COO) visits j before k but A(k,j) (CSR) visits k before j; store B with mode order 1,0 (-f B:compressed,compressed:1,0)";
    assert_eq!(normalize(c), normalize(d));
    assert_ne!(normalize(a), normalize(c));
}

/// `scripts/sweep.sh`: `DIFFERENTIAL_CASES` cases (default 20,000) from
/// seed `DIFFERENTIAL_FIRST_SEED` (default 0).
#[test]
#[ignore = "long: run by scripts/sweep.sh"]
fn differential_sweep() {
    let n: u64 = std::env::var("DIFFERENTIAL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let first: u64 = std::env::var("DIFFERENTIAL_FIRST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let t0 = Instant::now();
    let summary = Summary::new(run_isolated(first..first + n, workers(), TIMEOUT));
    println!("{}", summary.render(usize::MAX));
    println!("{n} cases in {:.1} s", t0.elapsed().as_secs_f64());
}

/// The child process of `run_isolated`; does nothing unless started by it.
#[test]
#[ignore = "started by the other tests in a child process"]
fn differential_worker() {
    worker_main();
}

/// One case by seed, judged in this process and printed with its
/// reproducer: `DIFFERENTIAL_SEED=N cargo test --release -p tensor-compiler
/// --test differential_testing differential_case -- --ignored --nocapture`.
/// With `DIFFERENTIAL_LIST=A..B` it only prints the cases of those seeds.
#[test]
#[ignore = "a tool for reproducing one case"]
fn differential_case() {
    tensor_compiler::jit::poison_unzeroed_room(true);
    if let Ok(range) = std::env::var("DIFFERENTIAL_LIST") {
        let (a, b) = range.split_once("..").expect("DIFFERENTIAL_LIST is A..B");
        for seed in a.parse::<u64>().unwrap()..b.parse::<u64>().unwrap() {
            println!(
                "{seed} [{}] {}",
                differential::templates::generate(seed).family,
                differential::templates::generate(seed).describe()
            );
        }
        return;
    }
    let seed: u64 = std::env::var("DIFFERENTIAL_SEED")
        .expect("DIFFERENTIAL_SEED")
        .parse()
        .unwrap();
    let r = differential::isolate::judge_seed(seed);
    println!(
        "seed {seed} [{}] {}\n{}: {} ({:.1} s of CPU)\n{}",
        r.family,
        r.case,
        r.class.name(),
        r.message,
        r.cpu_ms / 1e3,
        r.detail
    );
}
