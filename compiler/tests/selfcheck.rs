//! A short, seeded run of the fuzz targets' properties (`fuzz/`,
//! `scripts/fuzz.sh` runs them coverage-guided for longer): the
//! expression parser, the `.tensor` front end, the Matrix Market and
//! FROSTT readers, and random small kernels against the oracle.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tensor_compiler::selfcheck;

/// A deterministic runner: the same cases on every machine.
fn runner(cases: u32, seed: u8) -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    )
}

/// Text from pieces of the notations, so most cases get past the lexer.
fn soup(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec(prop_oneof![4 => prop::sample::select(pieces).prop_map(str::to_string), 1 => any::<char>().prop_map(String::from)], 0..40).prop_map(|v| v.concat())
}

const EXPR: &[&str] = &[
    "y", "A", "x", "(", ")", "i", "j", ",", "=", "+=", "+", "-", "*", " ", "2", "1.5e3", ".5",
    "(i)", "(i,j)", "A(i,j)", "x(j)",
];
const LANG: &[&str] = &[
    "format F = (dense, compressed)\n",
    "tensor ",
    "A",
    "x",
    "y",
    " : f64[",
    "N",
    "M",
    "3",
    "]",
    " @ ",
    "CSR",
    "dense",
    "sparse",
    "hash",
    "ELL",
    "BCSR(2)",
    "(compressed(nonunique), singleton)",
    " = random(seed: 1, density: 0.5)",
    " = mtx(\"m.mtx\")",
    "\n",
    "kernel k { ",
    "y(i) = A(i,j) * x(j)",
    " }",
    "{",
    "}",
    "(",
    ")",
    "+",
    "*",
    "-",
    ",",
];
const DATA: &[&str] = &[
    "%%MatrixMarket matrix coordinate real general\n",
    "%%MatrixMarket matrix array real symmetric\n",
    "%%MatrixMarket matrix coordinate pattern skew-symmetric\n",
    "%%MatrixMarket tensor coordinate integer general\n",
    "% c\n",
    "3 3 2\n",
    "1 1 1.0\n",
    "2 3 -2\n",
    "3\n",
    "0 ",
    "1 ",
    "2 ",
    "4294967296 ",
    "-1 ",
    "1e308 ",
    "inf ",
    "nan ",
    "\n",
    "\r\n",
    "# c\n",
    " ",
];

#[test]
fn expressions_parse_or_fail_cleanly() {
    runner(3000, 1)
        .run(&soup(EXPR), |s| {
            selfcheck::expression(&s);
            Ok(())
        })
        .unwrap();
}

#[test]
fn tensor_files_give_diagnostics_not_panics() {
    runner(300, 2)
        .run(&soup(LANG), |s| {
            selfcheck::language(&s);
            Ok(())
        })
        .unwrap();
}

#[test]
fn readers_accept_or_refuse_cleanly() {
    runner(3000, 3)
        .run(&soup(DATA), |s| {
            selfcheck::readers(s.as_bytes());
            Ok(())
        })
        .unwrap();
    runner(1000, 4)
        .run(&prop::collection::vec(any::<u8>(), 0..300), |b| {
            selfcheck::readers(&b);
            Ok(())
        })
        .unwrap();
}

#[test]
fn random_kernels_match_the_oracle_or_are_refused() {
    runner(150, 5)
        .run(&prop::collection::vec(any::<u8>(), 0..40), |b| {
            selfcheck::kernel(&b);
            Ok(())
        })
        .unwrap();
}
