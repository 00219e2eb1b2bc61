//! Differential testing at scale (see `differential/mod.rs`): 2,000 seeded
//! cases from templates, each judged against the dense oracle. Fails on any
//! wrong answer or crash; refusals are allowed here and counted.
//!
//! `scripts/sweep.sh [N]` runs the ignored `differential_sweep` on N cases
//! (default 20,000) and prints the same report.

mod differential;

use differential::isolate::{run_isolated, worker_main};
use differential::{Class, Summary};
use std::time::{Duration, Instant};

/// Cases the test suite runs.
const CI_CASES: u64 = 2_000;
/// A case that takes longer than this (a few kernels on tensors of at most
/// a few hundred entries) is frozen.
const TIMEOUT: Duration = Duration::from_secs(60);

fn workers() -> usize {
    std::env::var("DIFFERENTIAL_WORKERS").ok().and_then(|w| w.parse().ok()).unwrap_or(2)
}

#[test]
fn seeded_cases_match_the_oracle() {
    let t0 = Instant::now();
    let summary = Summary::new(run_isolated(0..CI_CASES, workers(), TIMEOUT));
    println!("{}", summary.render(40));
    println!("{} cases in {:.1} s", CI_CASES, t0.elapsed().as_secs_f64());
    assert_eq!(summary.records.len() as u64, CI_CASES, "every case is judged");
    let (wrong, crash) = (summary.count(Class::Wrong), summary.count(Class::Crash));
    assert!(wrong == 0 && crash == 0, "{wrong} wrong answers and {crash} crashes in {CI_CASES} cases (reproducers above)");
}

/// `scripts/sweep.sh`: `DIFFERENTIAL_CASES` cases (default 20,000) from
/// seed `DIFFERENTIAL_FIRST_SEED` (default 0).
#[test]
#[ignore = "long: run by scripts/sweep.sh"]
fn differential_sweep() {
    let n: u64 = std::env::var("DIFFERENTIAL_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let first: u64 = std::env::var("DIFFERENTIAL_FIRST_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
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
    if let Ok(range) = std::env::var("DIFFERENTIAL_LIST") {
        let (a, b) = range.split_once("..").expect("DIFFERENTIAL_LIST is A..B");
        for seed in a.parse::<u64>().unwrap()..b.parse::<u64>().unwrap() {
            println!("{seed} [{}] {}", differential::templates::generate(seed).family, differential::templates::generate(seed).describe());
        }
        return;
    }
    let seed: u64 = std::env::var("DIFFERENTIAL_SEED").expect("DIFFERENTIAL_SEED").parse().unwrap();
    let r = differential::isolate::judge_seed(seed);
    println!("seed {seed} [{}] {}\n{}: {}\n{}", r.family, r.case, r.class.name(), r.message, r.detail);
}
