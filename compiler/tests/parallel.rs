//! Kernels whose outermost loop runs on several threads: every kind the
//! lowerer shares (rows of a dense result; partial results of reductions;
//! rows of a CSR result, stitched)
//! gives the single-threaded answer and the oracle's on random inputs, on
//! 1, 2, 3 and 7 threads and on more threads than the loop has iterations,
//! with empty inputs too, on both tiers (the cc tier is skipped, with a
//! line saying so, when there is no C compiler). Kernels that cannot be
//! shared say so and run on one thread.

mod common;
use common::*;
use std::collections::BTreeMap;
use tensor_compiler::backend::cc;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::execute::{prepare, Prepared};
use tensor_compiler::ir::Parallel;
use tensor_compiler::jit::Tier;
use tensor_compiler::notation::parse_assignment;
use tensor_compiler::oracle;
use tensor_compiler::threads::Threads;

/// A kernel to share: expression, formats (others dense), how it is shared.
struct Case {
    expr: &'static str,
    formats: &'static [(&'static str, &'static str)],
    mode: Option<Parallel>,
}

const fn case(
    expr: &'static str,
    formats: &'static [(&'static str, &'static str)],
    mode: Option<Parallel>,
) -> Case {
    Case {
        expr,
        formats,
        mode,
    }
}

use Parallel::{Partials, Rows, Stitch};

const CASES: &[Case] = &[
    // Rows: each iteration owns its coordinate of a result variable.
    case("y(i) = A(i,j) * x(j)", &[("A", "CSR")], Some(Rows)),
    case("y(i) = A(i,j) * x(j)", &[("A", "DCSR")], Some(Rows)),
    case(
        "y(i) = A(i,j) * x(j)",
        &[("A", "CSR"), ("x", "sparse")],
        Some(Rows),
    ),
    case(
        "y(i) = A(i,j) * x(j)",
        &[("A", "CSR"), ("x", "hash")],
        Some(Rows),
    ),
    case("y(i) += A(i,j) * x(j)", &[("A", "DCSR")], Some(Rows)),
    case("C(i,k) = A(i,j) * B(j,k)", &[("A", "CSR")], Some(Rows)),
    case(
        "C(i,k) = A(i,j) * B(j,k)",
        &[("A", "CSR"), ("B", "CSR")],
        Some(Rows),
    ),
    case("C(i,j) = A(i,j) * B(i,j)", &[("A", "CSR")], Some(Rows)),
    case("C(i,j) = A(j,i)", &[("A", "CSR")], Some(Rows)),
    case("y(i) = A(i,j,k) * B(j,k)", &[("A", "CSF")], Some(Rows)),
    case("y(i) = 2 * x(i)", &[], Some(Rows)),
    // (a COO row's entries stay in one share)
    case("y(i) = A(i,j) * x(j)", &[("A", "COO")], Some(Rows)),
    case("y(i) += A(i,j) * x(j)", &[("A", "COO")], Some(Rows)),
    case("C(i,k) = A(i,j,k) * x(j)", &[("A", "COO")], Some(Rows)),
    // (a dense result's rows zeroed inside the shared loop, in order)
    case("C(i,k) = A(i,j) * B(j,k)", &[("A", "COO")], Some(Rows)),
    case("C(i,k) = A(i,j) * B(j,k)", &[("A", "DCSR")], Some(Rows)),
    // (runs of a deduplicated COO level, one an iteration, the shares'
    // bounds between runs: TTM sums each run into values stored once)
    case("A(i,j,k) = B(i,j,l) * M(k,l)", &[("B", "COO")], Some(Rows)),
    case(
        "C(i,j) = A(i,j) * B(i,j)",
        &[("A", "CSR"), ("B", "COO")],
        Some(Rows),
    ),
    // Partials: reductions, and loops that may meet a coordinate twice.
    case("a = x(i) * z(i)", &[], Some(Partials)),
    case(
        "a = A(i,j) * B(i,j)",
        &[("A", "CSR"), ("B", "CSR")],
        Some(Partials),
    ),
    case("y(j) = A(i,j) * x(i)", &[("A", "CSR")], Some(Partials)),
    case("y(i) = A(i,j) * x(j)", &[("A", "CSC")], Some(Partials)),
    case("y(i) = A(i,j) * x(j)", &[("A", "ELL")], Some(Partials)),
    case("y(i) = A(i,j) * x(j)", &[("A", "DIA")], Some(Partials)),
    case("y(i) = A(i,j) * x(j)", &[("A", "BCSR(2)")], Some(Partials)),
    case("y(j) = A(i,j) * x(i)", &[("A", "COO")], Some(Partials)),
    // (over the runs of a deduplicated COO level, as TTM above, reducing
    // over their coordinates: into a scalar, a vector and a matrix)
    case(
        "a = B(i,j,l) * M(k,l) * z(k)",
        &[("B", "COO")],
        Some(Partials),
    ),
    case(
        "y(j) = B(i,j,l) * M(k,l) * z(k)",
        &[("B", "COO")],
        Some(Partials),
    ),
    case(
        "A(j,l) = B(i,j,l) * M(k,l) * z(k)",
        &[("B", "COO")],
        Some(Partials),
    ),
    // Stitch: rows of a CSR result, each share into a result of its own.
    case(
        "C(i,j) = A(i,j) + B(i,j)",
        &[("A", "CSR"), ("B", "CSR"), ("C", "CSR")],
        Some(Stitch),
    ),
    case(
        "C(i,j) = A(i,j) * B(i,j)",
        &[("A", "CSR"), ("B", "CSC"), ("C", "CSR")],
        Some(Stitch),
    ),
    case(
        "C(i,j) = 2 * A(i,j)",
        &[("A", "CSR"), ("C", "CSR")],
        Some(Stitch),
    ),
    case(
        "C(i,j) += A(i,j)",
        &[("A", "CSR"), ("C", "CSR")],
        Some(Stitch),
    ),
    case(
        "C(i,j) = A(i,j) * x(j)",
        &[("A", "CSR"), ("C", "dense,compressed(unordered)")],
        Some(Stitch),
    ),
    // (an unordered operand read through a sorted copy of each row, made
    // by the thread that owns the row)
    case(
        "C(i,j) = A(i,j) + B(i,j)",
        &[
            ("A", "dense,compressed(unordered)"),
            ("B", "CSR"),
            ("C", "CSR"),
        ],
        Some(Stitch),
    ),
    // (Gustavson's SpGEMM: a workspace row per thread)
    case(
        "C(i,k) = A(i,j) * B(j,k)",
        &[("A", "CSR"), ("B", "CSR"), ("C", "CSR")],
        Some(Stitch),
    ),
    // (terms under one rows loop, adding into one workspace row)
    case(
        "C(i,k) += A(i,j) * B(j,k)",
        &[("A", "CSR"), ("B", "CSR"), ("C", "CSR")],
        Some(Stitch),
    ),
    case(
        "C(i,k) = A(i,j) * B(j,k) + D(i,k)",
        &[("A", "CSR"), ("B", "CSR"), ("C", "CSR"), ("D", "CSR")],
        Some(Stitch),
    ),
    // (COO's rows, deduplicated: a loop over runs, its shares' bounds
    // between runs; SpGEMM's workspace row per thread)
    case(
        "C(i,j) = 2 * A(i,j)",
        &[("A", "COO"), ("C", "CSR")],
        Some(Stitch),
    ),
    case(
        "C(i,k) = A(i,j) * B(j,k)",
        &[("A", "COO"), ("B", "CSR"), ("C", "CSR")],
        Some(Stitch),
    ),
    // One thread: other sparse results, several nests, merged outer loops.
    case(
        "C(i,j) = A(i,j) + B(i,j)",
        &[("A", "CSR"), ("B", "CSR"), ("C", "DCSR")],
        None,
    ),
    case("C(i,j) = A(i,j)", &[("A", "CSR"), ("C", "COO")], None),
    case("y(i) = A(i,j) * x(j) + z(i)", &[("A", "CSR")], None),
    case(
        "y(i) = x(i) + z(i)",
        &[("x", "sparse"), ("z", "sparse")],
        None,
    ),
    case(
        "C(i,j) = A(i,j)",
        &[("A", "CSR"), ("C", "dense,hashed")],
        None,
    ),
    // (a sorted copy of a hash table's rows merged with DCSR's: a merge
    // loop, not a plain one to share)
    case(
        "C(i,j) = A(i,j) + B(i,j)",
        &[("A", "hashed,compressed"), ("B", "DCSR"), ("C", "CSR")],
        None,
    ),
];

/// Dimensions by index name; `rows` is the extent of `i`.
fn extent(var: &str, rows: usize) -> usize {
    match var {
        "i" => rows,
        "j" => 11,
        _ => 5,
    }
}

struct Data {
    a: tensor_compiler::notation::Assignment,
    formats: BTreeMap<String, tensor_compiler::format::TensorFormat>,
    data: BTreeMap<String, CooTensor>,
    out_dims: Vec<usize>,
    initial: Option<CooTensor>,
}

fn data(c: &Case, rows: usize, seed: u64) -> Data {
    let a = parse_assignment(c.expr).unwrap();
    let dims = |acc: &tensor_compiler::notation::Access| -> Vec<usize> {
        acc.indices.iter().map(|i| extent(&i.name, rows)).collect()
    };
    let mut rng = Rng(seed);
    let mut data = BTreeMap::new();
    for acc in a.rhs.accesses() {
        data.entry(acc.tensor.clone())
            .or_insert_with(|| random(&dims(acc), 0.3, &mut rng));
    }
    let out_dims = dims(&a.lhs);
    let initial = a.accumulate.then(|| random(&out_dims, 0.5, &mut rng));
    let formats = formats_rest_dense(&a, c.formats, &data, out_dims.len());
    Data {
        a,
        formats,
        data,
        out_dims,
        initial,
    }
}

impl Data {
    fn prepare(&self, tier: Tier) -> Prepared {
        let mut p = prepare(
            "kernel",
            &self.a,
            &self.formats,
            &self.data,
            &self.out_dims,
            self.initial.as_ref(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", self.a));
        if tier == Tier::Cc {
            p.compiled =
                cc::compile(&p.kernel.function).unwrap_or_else(|e| panic!("{}: {e}", self.a));
        }
        p
    }

    fn run(&self, tier: Tier, threads: Threads) -> (CooTensor, usize) {
        let mut p = self.prepare(tier);
        p.threads = threads;
        let used = p.threads_used().unwrap();
        p.run()
            .unwrap_or_else(|e| panic!("{} on {threads:?}: {e}", self.a));
        tensor_compiler::storage::validate(&p.output)
            .unwrap_or_else(|e| panic!("{} on {threads:?}: {e}", self.a));
        let first = p.result().unwrap();
        if !self.a.accumulate {
            // Run again over the first run's result, as a timing loop
            // does: every value the first run left must be replaced (a
            // fill that skips a row would leave its old sums to add to).
            p.run()
                .unwrap_or_else(|e| panic!("{} on {threads:?}, again: {e}", self.a));
            let again = p.result().unwrap();
            assert_eq!(
                again.canonical(),
                first.canonical(),
                "{} {:?} on {threads:?}: a second run over the first's result differs",
                self.a,
                self.formats.keys().collect::<Vec<_>>()
            );
        }
        (first, used)
    }
}

/// A private cache for the cc tier's objects; `None` (and a line saying
/// so) without a C compiler.
fn cc_tier(test: &str) -> Option<Tier> {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        std::env::set_var(
            "TENSOR_CACHE_DIR",
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("parallel-cc"),
        )
    });
    match cc::compiler() {
        Ok(_) => Some(Tier::Cc),
        Err(e) => {
            println!("skipped the cc tier of {test}: {e}");
            None
        }
    }
}

/// Every case on `tier` with `rows` rows: the marking, then each thread
/// count against one thread and the oracle.
fn check_cases(tier: Tier, rows: usize, seeds: std::ops::Range<u64>) {
    for c in CASES {
        for seed in seeds.clone() {
            let d = data(c, rows, seed);
            let p = d.prepare(tier);
            assert_eq!(
                p.kernel.function.parallel, c.mode,
                "{} {:?}: shared as {:?}\n{}",
                c.expr, c.formats, p.kernel.function.parallel, p.kernel.function
            );
            let want = oracle::evaluate(&d.a, &d.data, &d.out_dims, d.initial.as_ref()).unwrap();
            let (one, _) = d.run(tier, Threads::exactly(1));
            close(&one, &want).unwrap_or_else(|e| {
                panic!("{} {:?} on 1 thread ({tier:?}): {e}", c.expr, c.formats)
            });
            for n in [2, 3, 7, rows + 5] {
                let (got, used) = d.run(tier, Threads::exactly(n));
                let ctx = format!(
                    "{} {:?}, {rows} rows, seed {seed}, {n} threads ({tier:?})",
                    c.expr, c.formats
                );
                match c.mode {
                    Some(Rows | Stitch) => assert_eq!(used, n, "{ctx}"),
                    Some(Partials) => assert!((1..=n).contains(&used), "{ctx}: {used} threads"),
                    None => assert_eq!(used, 1, "{ctx}"),
                }
                close(&got, &want).unwrap_or_else(|e| panic!("{ctx}: against the oracle: {e}"));
                close(&got, &one).unwrap_or_else(|e| panic!("{ctx}: against one thread: {e}"));
                if c.mode != Some(Partials) {
                    // Shared rows are computed exactly as on one thread.
                    assert_eq!(
                        got.canonical(),
                        one.canonical(),
                        "{ctx}: differs from one thread"
                    );
                }
                // A thread count always gives the same sums.
                let (again, _) = d.run(tier, Threads::exactly(n));
                assert_eq!(
                    again.canonical(),
                    got.canonical(),
                    "{ctx}: not deterministic"
                );
            }
        }
    }
}

#[test]
fn shared_kernels_agree_with_one_thread_and_the_oracle() {
    check_cases(Tier::Cranelift, 40, 1..4);
}

#[test]
fn more_threads_than_rows_and_no_rows_at_all() {
    for rows in [0, 1, 3] {
        check_cases(Tier::Cranelift, rows, 1..2);
    }
}

#[test]
fn the_cc_tier_shares_the_same_way() {
    let Some(tier) = cc_tier("the_cc_tier_shares_the_same_way") else {
        return;
    };
    check_cases(tier, 40, 1..2);
    for rows in [0, 3] {
        check_cases(tier, rows, 1..2);
    }
}

/// Shares balance CSR rows by their nonzeros: one dense row among empty
/// ones gets a thread of its own, and the answer is still exact.
#[test]
fn shares_follow_the_nonzeros_of_skewed_rows() {
    let mut a = CooTensor::new(vec![100, 100]);
    for j in 0..100 {
        a.push(&[97, j], 1.0 + j as f64);
    }
    a.push(&[3, 4], 2.0);
    let x = random(&[100], 1.0, &mut Rng(7));
    let c = &CASES[0];
    let mut d = data(c, 100, 1);
    d.data.insert("A".into(), a);
    d.data.insert("x".into(), x);
    let want = oracle::evaluate(&d.a, &d.data, &d.out_dims, None).unwrap();
    for n in [2, 3, 4, 150] {
        let (got, used) = d.run(Tier::Cranelift, Threads::exactly(n));
        assert_eq!(used, n);
        close(&got, &want).unwrap_or_else(|e| panic!("{n} threads: {e}"));
    }
}

/// By default small kernels stay on the calling thread; one thread is
/// today's single call whatever the kernel.
#[test]
fn small_kernels_and_one_thread_use_one_call() {
    let d = data(&CASES[0], 40, 1);
    let mut p = d.prepare(Tier::Cranelift);
    p.threads = Threads::up_to(8);
    assert_eq!(p.threads_used().unwrap(), 1);
    p.threads = Threads::exactly(1);
    assert_eq!(p.threads_used().unwrap(), 1);
    p.threads = Threads::exactly(8);
    assert_eq!(p.threads_used().unwrap(), 8);
}

/// The interpreter runs the shared kernels whole (thread 0 of 1).
#[test]
fn the_interpreter_runs_shared_kernels_whole() {
    for c in CASES.iter().filter(|c| c.mode.is_some()) {
        let d = data(c, 9, 3);
        let want = oracle::evaluate(&d.a, &d.data, &d.out_dims, d.initial.as_ref()).unwrap();
        let mut p = d.prepare(Tier::Cranelift);
        p.run_interpreted()
            .unwrap_or_else(|e| panic!("{}: {e}", c.expr));
        close(&p.result().unwrap(), &want).unwrap_or_else(|e| panic!("{}: {e}", c.expr));
    }
}

/// Run one call of `p`'s kernel on its own: `share`'s thread, threads and
/// phase, as `threads::run` would make it.
fn run_alone(p: &mut Prepared, share: tensor_compiler::jit::Share) {
    let inputs: Vec<_> = p
        .inputs
        .iter()
        .map(|t| tensor_compiler::storage::validate(t).unwrap())
        .collect();
    tensor_compiler::jit::run_share(&p.compiled, &inputs, &mut p.output, share).unwrap();
}

/// Where the first of two shares ends: with the nonzeros all in the first
/// half of the rows, balancing by rows plus nonzeros puts the boundary
/// near row 27 of 100 (21 m = (100 + 50 * 20) / 2), not at row 50.
#[test]
fn a_share_covers_rows_by_their_work() {
    let mut a = CooTensor::new(vec![100, 100]);
    for i in 0..50 {
        for j in 0..20 {
            a.push(&[i, j * 5], 1.0);
        }
    }
    let mut x = CooTensor::new(vec![100]);
    for j in 0..100 {
        x.push(&[j], 1.0);
    }
    for tier in [
        Some(Tier::Cranelift),
        cc_tier("a_share_covers_rows_by_their_work"),
    ]
    .into_iter()
    .flatten()
    {
        let mut d = data(&CASES[0], 100, 1);
        d.data.insert("A".into(), a.clone());
        d.data.insert("x".into(), x.clone());
        let mut p = d.prepare(tier);
        let share = tensor_compiler::jit::Share {
            thread: 0,
            threads: 2,
            phase: 0,
        };
        run_alone(&mut p, share);
        let written: Vec<usize> = (0..100).filter(|&i| p.output.vals[i] != 0.0).collect();
        assert_eq!(written, (0..27).collect::<Vec<_>>(), "{tier:?}");
    }
}

/// COO SpMV shares rows: a run of one row's entries never straddles two
/// shares, however the work splits. Each share, run alone, writes rows no
/// other share writes, and together they write every row with entries.
#[test]
fn coo_rows_stay_in_one_share() {
    let mut a = CooTensor::new(vec![10, 100]);
    for (i, n) in [(0, 1), (2, 3), (4, 60), (5, 1), (9, 20)] {
        for j in 0..n {
            a.push(&[i, j], 1.0);
        }
    }
    let mut x = CooTensor::new(vec![100]);
    for j in 0..100 {
        x.push(&[j], 1.0);
    }
    let c = CASES
        .iter()
        .find(|c| c.formats == [("A", "COO")] && c.expr.starts_with("y(i) ="))
        .unwrap();
    for tier in [Some(Tier::Cranelift), cc_tier("coo_rows_stay_in_one_share")]
        .into_iter()
        .flatten()
    {
        let mut d = data(c, 10, 1);
        d.data.insert("A".into(), a.clone());
        d.data.insert("x".into(), x.clone());
        for threads in [2, 3, 4, 7, 30] {
            let mut owner = [None; 10];
            for t in 0..threads {
                let mut p = d.prepare(tier);
                let share = tensor_compiler::jit::Share {
                    thread: t,
                    threads,
                    phase: 0,
                };
                run_alone(&mut p, share);
                for (i, v) in p.output.vals.iter().enumerate() {
                    if *v != 0.0 {
                        assert_eq!(
                            owner[i], None,
                            "row {i} in shares {:?} and {t} of {threads} ({tier:?})",
                            owner[i]
                        );
                        assert_eq!(
                            *v,
                            [1.0, 0.0, 3.0, 0.0, 60.0, 1.0, 0.0, 0.0, 0.0, 20.0][i],
                            "row {i}, share {t} of {threads}"
                        );
                        owner[i] = Some(t);
                    }
                }
            }
            let rows: Vec<usize> = (0..10).filter(|&i| owner[i].is_some()).collect();
            assert_eq!(rows, [0, 2, 4, 5, 9], "{threads} threads ({tier:?})");
        }
    }
}

/// A dense result's rows are zeroed inside the shared loop: run alone on
/// a result of NaNs, each share replaces exactly the rows from its first
/// coordinate to the next share's (the empty rows before, between and
/// after the entries included), so the shares together write every row
/// once, and the values are the oracle's.
#[test]
fn each_share_zeroes_its_own_rows() {
    let mut a = CooTensor::new(vec![12, 6]);
    for (i, n) in [(2, 1), (3, 4), (6, 6), (7, 1), (9, 2)] {
        for j in 0..n {
            a.push(&[i, j], 1.0 + (i * j) as f64);
        }
    }
    let b = random(&[6, 5], 1.0, &mut Rng(3));
    for formats in [&[("A", "COO")][..], &[("A", "DCSR")], &[("A", "CSR")]] {
        let c = case("C(i,k) = A(i,j) * B(j,k)", formats, Some(Rows));
        let mut d = data(&c, 12, 1);
        d.data.insert("A".into(), a.clone());
        d.data.insert("B".into(), b.clone());
        let want = oracle::evaluate(&d.a, &d.data, &d.out_dims, None).unwrap();
        for tier in [
            Some(Tier::Cranelift),
            cc_tier("each_share_zeroes_its_own_rows"),
        ]
        .into_iter()
        .flatten()
        {
            for threads in [1, 2, 3, 5, 20] {
                let ctx = format!("{formats:?} on {threads} threads ({tier:?})");
                let mut owner = [None; 12];
                let mut whole = None;
                for t in 0..threads {
                    let mut p = d.prepare(tier);
                    let call = |phase, thread| tensor_compiler::jit::Share {
                        thread,
                        threads,
                        phase,
                    };
                    run_alone(&mut p, call(1, 0));
                    p.output.vals.iter_mut().for_each(|v| *v = f64::NAN);
                    run_alone(&mut p, call(2, t));
                    for (i, row) in p.output.vals.chunks(5).enumerate() {
                        let written = row.iter().filter(|v| !v.is_nan()).count();
                        assert!(written == 0 || written == 5, "{ctx}: row {i} half written");
                        if written == 5 {
                            assert_eq!(
                                owner[i], None,
                                "{ctx}: row {i} in shares {:?} and {t}",
                                owner[i]
                            );
                            owner[i] = Some(t);
                        }
                    }
                    let merged = whole.get_or_insert_with(|| vec![f64::NAN; p.output.vals.len()]);
                    for (m, v) in merged.iter_mut().zip(&p.output.vals) {
                        if !v.is_nan() {
                            *m = *v;
                        }
                    }
                }
                assert!(
                    owner.iter().all(|o| o.is_some()),
                    "{ctx}: rows unwritten: {owner:?}"
                );
                let mut p = d.prepare(tier);
                p.run().unwrap();
                p.output.vals = whole.unwrap();
                close(&p.result().unwrap(), &want).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            }
        }
    }
}

/// TTV from COO into a dense result whose fibres are long enough to sum in
/// a register (`ir::runs`) fills the result's rows as the loop reaches
/// them too (`lower::parallel::fill`), on one thread and on shares: with
/// rows left empty, fibres of odd and even lengths (a row that starts at
/// the second entry of a pair), and a second run into the first's result.
#[test]
fn runs_into_a_dense_result_fill_its_rows_as_they_come() {
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    let (rows, cols, depth) = (30, 6, 24);
    let mut tiers = vec![Tier::Cranelift];
    tiers.extend(cc_tier(
        "runs_into_a_dense_result_fill_its_rows_as_they_come",
    ));
    // The last row holds one entry or two: it starts at the second entry
    // of the last pair or at the last entry alone, whatever came before.
    for last_row_entries in [1, 2] {
        let mut b = CooTensor::new(vec![rows, cols, depth]);
        let mut rng = Rng(7);
        for i in 0..rows as u32 - 1 {
            if i % 3 == 1 {
                continue;
            }
            for j in (0..cols as u32).filter(|j| (i + j) % 2 == 0) {
                for k in 0..(depth as u32 - (i + j) % 5) {
                    b.push(&[i, j, k], rng.value() + 0.125);
                }
            }
        }
        for k in 0..last_row_entries {
            b.push(&[rows as u32 - 1, 3, k], 1.5);
        }
        let c = random(&[depth], 1.0, &mut rng);
        let a = parse_assignment("A(i,j) = B(i,j,k) * c(k)").unwrap();
        let data = BTreeMap::from([("B".to_string(), b), ("c".to_string(), c)]);
        let d = Data {
            formats: formats_rest_dense(&a, &[("B", "COO")], &data, 2),
            a,
            data,
            out_dims: vec![rows, cols],
            initial: None,
        };
        let want = oracle::evaluate(&d.a, &d.data, &d.out_dims, None).unwrap();
        for &tier in &tiers {
            let f = &d.prepare(tier).kernel.function;
            for backend in [Backend::C, Backend::Cranelift] {
                let code = for_codegen(f, backend).to_string();
                assert!(
                    code.contains("run_sum") && code.contains("fill_row"),
                    "{backend:?}: runs and the row fill\n{code}"
                );
            }
            for n in [1, 2, 3, 7] {
                let (got, _) = d.run(tier, Threads::exactly(n));
                close(&got, &want).unwrap_or_else(|e| {
                    panic!("{last_row_entries} in the last row, {n} threads ({tier:?}): {e}")
                });
            }
        }
    }
}

/// COO's rows ascend, so a pair of entries continues the run where its
/// second entry does (`ir::runs`): rows of every length from 0 to 6 in an
/// order that puts a row's start at either entry of a pair, against the
/// oracle on 1-7 threads and both tiers. An unordered level's or a deeper
/// level's coordinates do not ascend, and keep both tests.
#[test]
fn runs_over_ascending_rows_test_a_pair_s_second_entry() {
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    let rows = 40;
    let mut tiers = vec![Tier::Cranelift];
    tiers.extend(cc_tier(
        "runs_over_ascending_rows_test_a_pair_s_second_entry",
    ));
    let mut a = CooTensor::new(vec![rows, 9]);
    let mut rng = Rng(11);
    for i in 0..rows as u32 {
        for j in 0..(i * 5 + i / 7) % 7 {
            a.push(&[i, j], rng.value() + 0.125);
        }
    }
    // Every x(j) and A(i,j) nonzero (multiples of 1/4 plus 1/8): a row's
    // first entry, which may be a pair's second, counts.
    let mut x = CooTensor::new(vec![9]);
    for j in 0..9 {
        x.push(&[j], rng.value() + 0.125);
    }
    let expr = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    let data = BTreeMap::from([("A".to_string(), a), ("x".to_string(), x)]);
    let want = oracle::evaluate(&expr, &data, &[rows], None).unwrap();
    let unordered = "compressed(nonunique,unordered),singleton(nonunique,unordered)";
    for (format, ascends) in [("COO", true), (unordered, false)] {
        let d = Data {
            formats: formats_rest_dense(&expr, &[("A", format)], &data, 1),
            a: expr.clone(),
            data: data.clone(),
            out_dims: vec![rows],
            initial: None,
        };
        for &tier in &tiers {
            let f = &d.prepare(tier).kernel.function;
            let flags: Vec<bool> = f.runs.iter().map(|r| r.ascending).collect();
            assert!(flags.iter().any(|&x| x) == ascends, "{format}: {flags:?}");
            for backend in [Backend::C, Backend::Cranelift] {
                let code = for_codegen(f, backend).to_string();
                assert!(
                    code.contains("run_sum2"),
                    "{format} {backend:?}: paired runs\n{code}"
                );
                assert_eq!(
                    code.contains("run_i == run_at"),
                    !ascends,
                    "{format} {backend:?}: the pair's tests\n{code}"
                );
            }
            for n in [1, 2, 3, 7] {
                let (got, _) = d.run(tier, Threads::exactly(n));
                close(&got, &want)
                    .unwrap_or_else(|e| panic!("{format}, {n} threads ({tier:?}): {e}"));
            }
        }
    }
    // A 3-D COO's second level repeats within its first level's rows only.
    let b = random(&[6, 5, 4], 0.6, &mut rng);
    let expr = parse_assignment("A(i,j) = B(i,j,k) * c(k)").unwrap();
    let data = BTreeMap::from([
        ("B".to_string(), b),
        ("c".to_string(), random(&[4], 1.0, &mut rng)),
    ]);
    let d = Data {
        formats: formats_rest_dense(&expr, &[("B", "COO")], &data, 2),
        a: expr,
        data,
        out_dims: vec![6, 5],
        initial: None,
    };
    let f = &d.prepare(Tier::Cranelift).kernel.function;
    let first = ["pos", "crd"].map(|a| tensor_compiler::ir::ArrayRef::level("B", 0, a));
    assert!(f.runs.len() > 2, "{:?}", f.runs);
    for r in &f.runs {
        assert_eq!(r.ascending, first.contains(&r.array), "{r:?}");
    }
}

/// Scans over long runs of an ascending first level take strides of 8
/// (`ir::run_strides`): rows of every length around a stride (0-2, 7-9,
/// 15-17, .., 127-129, and hundreds), so that the strides end at each
/// place they can, and a row ends the tensor. TTV into CSR (the
/// deduplicating iterator's scan), MTTKRP (the runs of `ir::row_runs`), a
/// sum into COO and an inner product (merges) from COO, against the oracle
/// on 1-3 threads and both tiers.
#[test]
fn long_runs_are_scanned_in_strides() {
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    let lengths = [
        0, 1, 2, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 47, 63, 64, 65, 100, 127, 128, 129, 300, 511,
    ];
    let (rows, cols, depth) = (lengths.len(), 40, 16);
    let mut rng = Rng(23);
    // Entries t = 0.. of row i at (t / depth, t % depth), in order;
    // `shift` moves C's entries against B's so the merges see both sides.
    let mut rows_of = |shift: u32| {
        let mut t3 = CooTensor::new(vec![rows, cols, depth]);
        for (i, &n) in lengths.iter().enumerate() {
            for t in shift..shift + n {
                let t = t % (cols * depth) as u32;
                t3.push(
                    &[i as u32, t / depth as u32, t % depth as u32],
                    rng.value() + 0.125,
                );
            }
        }
        t3.canonicalize();
        t3
    };
    let (b, c) = (rows_of(0), rows_of(5));
    let mut tiers = vec![Tier::Cranelift];
    tiers.extend(cc_tier("long_runs_are_scanned_in_strides"));
    let cases: [(&str, &[(&str, &str)], Vec<usize>); 4] = [
        (
            "A(i,j) = B(i,j,k) * c(k)",
            &[("B", "COO"), ("A", "CSR")],
            vec![rows, cols],
        ),
        (
            "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
            &[("B", "COO")],
            vec![rows, 20],
        ),
        (
            "A(i,j,k) = B(i,j,k) + C(i,j,k)",
            &[("B", "COO"), ("C", "COO"), ("A", "COO")],
            vec![rows, cols, depth],
        ),
        (
            "a = B(i,j,k) * C(i,j,k)",
            &[("B", "COO"), ("C", "COO")],
            vec![],
        ),
    ];
    for (expr, formats, out_dims) in cases {
        let a = parse_assignment(expr).unwrap(); // ok: test code, a panic is a failed test
        let mut data = BTreeMap::from([("B".to_string(), b.clone()), ("C".to_string(), c.clone())]);
        data.insert("c".into(), random(&[depth], 1.0, &mut rng));
        data.insert("P".into(), random(&[cols, 20], 1.0, &mut rng));
        data.insert("Q".into(), random(&[depth, 20], 1.0, &mut rng));
        data.retain(|name, _| a.rhs.accesses().iter().any(|acc| acc.tensor == *name));
        let want = oracle::evaluate(&a, &data, &out_dims, None).unwrap(); // ok: test code, a panic is a failed test
        let d = Data {
            formats: formats_rest_dense(&a, formats, &data, out_dims.len()),
            a,
            data,
            out_dims,
            initial: None,
        };
        let f = &d.prepare(Tier::Cranelift).kernel.function;
        assert!(
            for_codegen(f, Backend::C).to_string().contains(" + 7] == "),
            "{expr}: no scan in strides\n{}",
            for_codegen(f, Backend::C)
        );
        for &tier in &tiers {
            for n in [1, 2, 3] {
                let (got, _) = d.run(tier, Threads::exactly(n));
                close(&got, &want)
                    .unwrap_or_else(|e| panic!("{expr}, {n} threads ({tier:?}): {e}"));
            }
        }
    }
}
