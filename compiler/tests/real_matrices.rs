//! Real matrices and tensors (copied from the shared data set into
//! fixtures): every preset packs and unpacks to the canonical input, and
//! kernels in every format agree with an independent reference.

mod common;
use common::{assert_close, padding_ok, spdm_reference};
use std::path::PathBuf;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::execute::prepare;
use tensor_compiler::format::{parse_format, CoordMap, Registry};
use tensor_compiler::io::read_tensor;
use tensor_compiler::ir::passes;
use tensor_compiler::notation::parse_assignment;
use tensor_compiler::storage::{pack, unpack, validate};
use tensor_compiler::threads::Threads;

/// The real matrices among the fixtures, each named by its path.
fn real_matrices() -> impl Iterator<Item = (String, CooTensor)> {
    fixtures()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "mtx"))
        .map(|p| (p.display().to_string(), read_tensor(&p).unwrap())) // ok: test code, a panic is a failed test
}

fn fixtures() -> Vec<PathBuf> {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut v = Vec::new();
    for dir in ["io/real", "matrices"] {
        for e in std::fs::read_dir(base.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if matches!(p.extension().and_then(|x| x.to_str()), Some("mtx" | "tns")) {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// The real third-order tensors of the fixtures, with their paths.
fn real_order3_tensors() -> Vec<(PathBuf, CooTensor)> {
    fixtures()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "tns"))
        .map(|p| {
            let t = read_tensor(&p).unwrap(); // ok: test code, a panic is a failed test
            (p, t)
        })
        .filter(|(_, t)| t.order() == 3)
        .collect()
}

fn presets(order: usize) -> &'static [&'static str] {
    match order {
        2 => &[
            "CSR",
            "CSC",
            "COO",
            "COO-AoS",
            "DCSR",
            "ELL",
            "DIA",
            "BCSR(4)",
            "CSB(8)",
            "CSF",
            "hashed,compressed",
        ],
        3 => &["COO", "COO-AoS", "CSF", "mode-generic"],
        _ => &["COO", "CSF"],
    }
}

#[test]
fn every_preset_round_trips_on_every_real_fixture() {
    let r = Registry::builtin();
    let mut checked = 0;
    for path in fixtures() {
        let t = read_tensor(&path).unwrap();
        for f in presets(t.order()) {
            if !padding_ok(&t, f) {
                continue;
            }
            let fmt = parse_format(f, t.order(), &r).unwrap();
            let packed =
                pack("T", &t, &fmt).unwrap_or_else(|e| panic!("{}: {f}: {e}", path.display()));
            validate(&packed).unwrap();
            let back = unpack(&packed).unwrap();
            assert_eq!(back.canonical(), t.canonical(), "{} in {f}", path.display());
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked}");
}

/// y = A x by a plain loop over the canonical entries.
fn reference_spmv(a: &CooTensor, x: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; a.dims[0]];
    for e in 0..a.nnz() {
        let c = a.coord(e);
        y[c[0] as usize] += a.vals[e] * x[c[1] as usize];
    }
    y
}

#[test]
fn spmv_on_real_matrices_in_every_format() {
    let r = Registry::builtin();
    let a_expr = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    for path in fixtures()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "mtx"))
    {
        let a = read_tensor(&path).unwrap();
        let n = a.dims[1];
        let x: Vec<f64> = (0..n).map(|j| ((j * 7 % 13) as f64 - 6.0) / 4.0).collect();
        let want = reference_spmv(&a, &x);
        for f in presets(2) {
            if !padding_ok(&a, f) {
                continue;
            }
            let mut formats = std::collections::BTreeMap::new();
            formats.insert("A".to_string(), parse_format(f, 2, &r).unwrap());
            formats.insert("x".to_string(), parse_format("dense", 1, &r).unwrap());
            formats.insert("y".to_string(), parse_format("dense", 1, &r).unwrap());
            let mut data = std::collections::BTreeMap::new();
            data.insert("A".to_string(), a.clone());
            data.insert("x".to_string(), CooTensor::from_dense(vec![n], &x));
            let mut p = prepare("spmv", &a_expr, &formats, &data, &[a.dims[0]], None).unwrap();
            // As a user runs it, then, where the loop can be shared, on 3
            // threads, each searching its share (on the Cranelift tier, in
            // the interpreter before the call: `jit::shares`).
            let shared = p.compiled.parallel.is_some();
            for threads in [None, Some(3)]
                .into_iter()
                .filter(|t| t.is_none() || shared)
            {
                if let Some(n) = threads {
                    p.threads = Threads::exactly(n);
                }
                p.run().unwrap();
                let got = p.result().unwrap().to_dense();
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
                        "{} {f} on {threads:?} threads: y[{i}] = {g}, expected {w}",
                        path.display()
                    );
                }
            }
        }
    }
}

#[test]
fn spmv_with_a_sparse_x_on_real_matrices_with_and_without_its_dense_copy() {
    // x sparse or hashed (every 97th column), merged again or probed for
    // every row: read from a dense copy where that costs less, as stored
    // where it does not (three rows of a wide matrix, a hypersparse one).
    // Both kernels, on every fixture that takes them, against plain loops.
    let r = Registry::builtin();
    let mut paths_taken = std::collections::BTreeSet::new();
    let mut checked_sums = false;
    let a_expr = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    for path in fixtures()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "mtx"))
    {
        let whole = read_tensor(&path).unwrap();
        let n = whole.dims[1];
        let x: Vec<f64> = (0..n)
            .map(|j| {
                if j % 97 == 0 {
                    ((j * 7 % 13) as f64 - 6.0) / 4.0
                } else {
                    0.0
                }
            })
            .collect();
        let mut rows = CooTensor::new(whole.dims.clone());
        for e in (0..whole.nnz()).filter(|&e| whole.coord(e)[0] < 3) {
            rows.push(whole.coord(e), whole.vals[e]);
        }
        for (a, part) in [(&whole, "all rows"), (&rows, "3 rows")] {
            let want = reference_spmv(a, &x);
            for (fa, fx) in [("DCSR", "sparse"), ("CSR", "sparse"), ("DCSR", "hash")] {
                let mut formats = std::collections::BTreeMap::new();
                formats.insert("A".to_string(), parse_format(fa, 2, &r).unwrap());
                formats.insert("x".to_string(), parse_format(fx, 1, &r).unwrap());
                formats.insert("y".to_string(), parse_format("dense", 1, &r).unwrap());
                let mut data = std::collections::BTreeMap::new();
                data.insert("A".to_string(), a.clone());
                data.insert("x".to_string(), CooTensor::from_dense(vec![n], &x));
                let mut p = prepare("spmv", &a_expr, &formats, &data, &[a.dims[0]], None).unwrap();
                let what = format!("{} A {fa} x {fx}, {part}", path.display());
                paths_taken.insert((fx, p.kernel.conversions.iter().any(|c| c.source == "x")));
                // The dense copy's sums run unguarded, checked once
                // (`ir::fill_checks`): their saved starting values show it.
                let made = tensor_compiler::ir::passes::for_codegen(
                    &p.kernel.function,
                    tensor_compiler::ir::passes::Backend::Cranelift,
                );
                checked_sums |= made.to_string().contains("_before");
                p.run().unwrap();
                assert_close(&p.result().unwrap().to_dense(), &want, &what);
            }
        }
    }
    for fx in ["sparse", "hash"] {
        for copy in [true, false] {
            assert!(
                paths_taken.contains(&(fx, copy)),
                "no fixture ran x {fx} with copy = {copy}"
            );
        }
    }
    assert!(checked_sums, "no kernel checked its sums once");
}

/// The order-3 real tensors, each with TTV's vector `c` and the dense
/// answer of `A(i,j) = B(i,j,k) * c(k)` by plain loops over its entries.
fn ttv_cases() -> Vec<(PathBuf, CooTensor, CooTensor, Vec<f64>)> {
    let mut out = Vec::new();
    for path in fixtures()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "tns"))
    {
        let b = read_tensor(&path).unwrap();
        if b.order() != 3 {
            continue;
        }
        let k = b.dims[2];
        let cv: Vec<f64> = (0..k).map(|v| (v % 5) as f64 - 2.0).collect();
        let c = CooTensor::from_dense(vec![k], &cv);
        let mut want = vec![0.0; b.dims[0] * b.dims[1]];
        for e in 0..b.nnz() {
            let co = b.coord(e);
            want[co[0] as usize * b.dims[1] + co[1] as usize] += b.vals[e] * cv[co[2] as usize];
        }
        out.push((path, b, c, want));
    }
    out
}

#[test]
fn ttv_and_innerprod_on_real_tensors() {
    let r = Registry::builtin();
    for (path, b, c, want) in ttv_cases() {
        let inner: f64 = b.vals.iter().map(|v| v * v).sum();
        for f in presets(3) {
            let mut formats = std::collections::BTreeMap::new();
            formats.insert("B".to_string(), parse_format(f, 3, &r).unwrap());
            formats.insert("c".to_string(), parse_format("dense", 1, &r).unwrap());
            formats.insert("A".to_string(), parse_format("dense", 2, &r).unwrap());
            let mut data = std::collections::BTreeMap::new();
            data.insert("B".to_string(), b.clone());
            data.insert("c".to_string(), c.clone());
            let a = parse_assignment("A(i,j) = B(i,j,k) * c(k)").unwrap();
            let mut p = prepare("ttv", &a, &formats, &data, &b.dims[..2], None).unwrap();
            p.run().unwrap();
            assert_eq!(
                p.result().unwrap().to_dense(),
                want,
                "{} {f}",
                path.display()
            );
            // In shares, each filling its own rows of A as it reaches them.
            p.threads = Threads::exactly(3);
            p.run().unwrap();
            let got = p.result().unwrap().to_dense();
            assert_eq!(got.len(), want.len(), "{} {f}, 3 threads", path.display());
            for (x, y) in got.iter().zip(&want) {
                assert!(
                    (x - y).abs() <= 1e-9 * y.abs().max(1.0),
                    "{} {f}, 3 threads",
                    path.display()
                );
            }
            let mut formats2 = formats.clone();
            formats2.insert("s".to_string(), parse_format("dense", 0, &r).unwrap());
            formats2.insert("C".to_string(), parse_format(f, 3, &r).unwrap());
            data.insert("C".to_string(), b.clone());
            let ip = parse_assignment("s = B(i,j,k) * C(i,j,k)").unwrap();
            let mut p = prepare("inner", &ip, &formats2, &data, &[], None).unwrap();
            p.run().unwrap();
            let got: f64 = p.result().unwrap().vals.iter().sum();
            assert!(
                (got - inner).abs() < 1e-6 * inner.max(1.0),
                "{} {f}: {got} vs {inner}",
                path.display()
            );
        }
    }
}

/// TTV into a sparse result, as the bench times it on its Facebook-shaped
/// tensor (CSR from COO, DCSR from CSF, built from empty in every run), on
/// the real order-3 tensors, on both tiers against plain loops.
#[test]
fn ttv_into_sparse_results_on_real_tensors() {
    tensor_compiler::jit::poison_unzeroed_room(true);
    let r = Registry::builtin();
    let a = parse_assignment("A(i,j) = B(i,j,k) * c(k)").unwrap();
    let cc = tensor_compiler::backend::cc::compiler().is_ok();
    for (path, b, c, want) in ttv_cases() {
        for (fb, fa) in [
            ("COO", "CSR"),
            ("CSF", "DCSR"),
            ("COO", "DCSR"),
            ("CSF", "CSR"),
        ] {
            let what = format!("{}: TTV from {fb} into {fa}", path.display());
            let formats = [("A", fa, 2), ("B", fb, 3), ("c", "dense", 1)]
                .into_iter()
                .map(|(n, f, o)| (n.to_string(), parse_format(f, o, &r).unwrap()))
                .collect();
            let data = [("B".to_string(), b.clone()), ("c".to_string(), c.clone())]
                .into_iter()
                .collect();
            let mut p = prepare("ttv", &a, &formats, &data, &b.dims[..2], None).unwrap();
            let fresh = tensor_compiler::execute::ResultArrays::Fresh;
            p.time(2, fresh).unwrap();
            assert_close(&p.result().unwrap().to_dense(), &want, &what);
            if cc {
                p.compiled = tensor_compiler::backend::cc::compile(&p.kernel.function).unwrap();
                p.time(2, fresh).unwrap();
                assert_close(
                    &p.result().unwrap().to_dense(),
                    &want,
                    &format!("{what}, cc tier"),
                );
            }
        }
    }
}

/// MTTKRP as the bench runs it on the Cranelift tier, on the real order-3
/// tensors: made as if for large data, its rows summed in strips of 16,
/// the kernel compiled for its data's sizes (`Function::fixed_params`).
/// Rank 16 is one whole strip with no loop for a rest; rank 20 keeps the
/// rest. From CSF and COO, on 1 and 3 threads, against plain loops over
/// the entries.
#[test]
fn mttkrp_of_whole_strips_and_a_rest_on_real_tensors() {
    let mut whole = 0;
    for (path, b, ..) in ttv_cases() {
        let (i, k, l) = (b.dims[0], b.dims[1], b.dims[2]);
        for rank in [16, 20] {
            let factor = |rows: usize, salt: usize| {
                let v: Vec<f64> = (0..rows * rank)
                    .map(|x| ((x * salt % 23) as f64 - 11.0) / 5.0)
                    .collect();
                (CooTensor::from_dense(vec![rows, rank], &v), v)
            };
            let ((p, pv), (q, qv)) = (factor(k, 7), factor(l, 13));
            let mut want = vec![0.0; i * rank];
            for e in 0..b.nnz() {
                let c = b.coord(e);
                let (ci, ck, cl) = (c[0] as usize, c[1] as usize, c[2] as usize);
                for j in 0..rank {
                    want[ci * rank + j] += b.vals[e] * pv[ck * rank + j] * qv[cl * rank + j];
                }
            }
            for f in ["CSF", "COO"] {
                for threads in [1, 3] {
                    let (got, code) = run_dense_made(
                        "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
                        &[
                            ("A", "dense", 2),
                            ("B", f, 3),
                            ("P", "dense", 2),
                            ("Q", "dense", 2),
                        ],
                        &[("B", &b), ("P", &p), ("Q", &q)],
                        &[i, rank],
                        threads,
                        true,
                    );
                    let what = format!(
                        "{}: MTTKRP of rank {rank} from {f} on {threads} threads",
                        path.display()
                    );
                    if code.contains("strip_sum") {
                        let rest = code.contains(&format!("if strip < {rank} {{"));
                        assert_eq!(rest, rank != 16, "{what}\n{code}");
                        whole += usize::from(!rest);
                    }
                    assert_close(&got, &want, &what);
                }
            }
        }
    }
    assert!(whole > 0, "no real tensor ran whole strips without a rest");
}

/// A + B into a sparse result built from empty in every run, as
/// `tensorc --fresh-result` and the bench time it, B being A plus the
/// diagonal above A's (`bench/run.py`'s pattern), with A, B and the result
/// in CSR, COO and DCSR, on both tiers: two fresh runs, then two into the
/// arrays the run before left. The room of the result's coordinates and
/// values comes unzeroed there (`ir::filled`), here poisoned
/// (`jit::poison_unzeroed_room`), so an element the kernel leaves unwritten
/// shows; against the dense sum.
#[test]
fn adds_into_fresh_sparse_results_on_real_matrices() {
    use tensor_compiler::execute::ResultArrays;
    tensor_compiler::jit::poison_unzeroed_room(true);
    let r = Registry::builtin();
    let a = parse_assignment("C(i,j) = A(i,j) + B(i,j)").unwrap();
    let cc = tensor_compiler::backend::cc::compiler().is_ok();
    for path in fixtures()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "mtx"))
    {
        let m = read_tensor(&path).unwrap(); // ok: test code, a panic is a failed test
        let (rows, cols) = (m.dims[0], m.dims[1]);
        let mut b = m.clone();
        for i in 0..rows.min(cols.saturating_sub(1)) {
            b.push(&[i as u32, i as u32 + 1], 1.0);
        }
        let want: Vec<f64> = m
            .to_dense()
            .iter()
            .zip(b.to_dense())
            .map(|(x, y)| x + y)
            .collect();
        for f in ["CSR", "COO", "DCSR"] {
            let what = format!("{}: A + B in {f}", path.display());
            let formats = ["A", "B", "C"]
                .into_iter()
                .map(|n| (n.to_string(), parse_format(f, 2, &r).unwrap()))
                .collect();
            let data = [("A".to_string(), m.clone()), ("B".to_string(), b.clone())]
                .into_iter()
                .collect();
            let mut p = prepare("add", &a, &formats, &data, &[rows, cols], None).unwrap();
            let tiers = [false, true].into_iter().filter(|&c| !c || cc);
            for on_cc in tiers {
                if on_cc {
                    p.compiled = tensor_compiler::backend::cc::compile(&p.kernel.function).unwrap();
                }
                for arrays in [ResultArrays::Fresh, ResultArrays::Reused] {
                    p.time(2, arrays).unwrap();
                    let how = format!("{what}, cc tier {on_cc}, {arrays:?}");
                    assert_close(&p.result().unwrap().to_dense(), &want, &how);
                }
            }
        }
    }
}

/// B + C on the real order-3 tensors, C being B with its last mode turned
/// by one (another pattern, overlapping B's), with all three in COO and in
/// CSF, against the sum of their dense forms: unions merged at every level
/// (the cursor steps computed before the levels below, `ir::early_steps`;
/// Cranelift without its optimizer, `jit::Opt`).
#[test]
fn three_level_unions_on_real_tensors() {
    for (path, b) in real_order3_tensors() {
        let k = b.dims[2] as u32;
        let mut c = CooTensor::new(b.dims.clone());
        for e in 0..b.nnz() {
            let co = b.coord(e);
            c.push(&[co[0], co[1], (co[2] + 1) % k], 0.5 - b.vals[e]);
        }
        let want: Vec<f64> = b
            .to_dense()
            .iter()
            .zip(c.to_dense())
            .map(|(x, y)| x + y)
            .collect();
        for f in ["COO", "CSF"] {
            let got = run_dense(
                "A(i,j,k) = B(i,j,k) + C(i,j,k)",
                &[("A", f, 3), ("B", f, 3), ("C", f, 3)],
                &[("B", &b), ("C", &c)],
                &b.dims,
            );
            assert_close(&got, &want, &format!("{}: B + C in {f}", path.display()));
        }
    }
}

/// A dense `rows` x `cols` factor matrix of values 1 to 2.25 that vary by
/// row and column.
fn factor_matrix(rows: usize, cols: usize) -> CooTensor {
    let mut m = CooTensor::new(vec![rows, cols]);
    for k in 0..rows {
        for l in 0..cols {
            m.push(
                &[k as u32, l as u32],
                1.0 + ((k * 7 + l * 3) % 11) as f64 / 8.0,
            );
        }
    }
    m
}

/// TTM (`A(i,j,k) = B(i,j,l) * M(k,l)`) of each real order-3 tensor into
/// a dense result, from CSF and from COO on one thread and on two, against
/// the sums over the dense forms. From COO the entries go a run of equal
/// (i, j) at a time (a deduplicated level: its loop over `k` once per run,
/// not once per entry), each value stored once, and the shares' bounds fall
/// between runs of equal rows.
#[test]
fn ttm_over_runs_on_real_tensors() {
    for (path, b) in real_order3_tensors() {
        let (ni, nj, nl, nk) = (b.dims[0], b.dims[1], b.dims[2], 3);
        let m = factor_matrix(nk, nl);
        let (bd, md) = (b.to_dense(), m.to_dense());
        let mut want = vec![0.0; ni * nj * nk];
        for i in 0..ni {
            for j in 0..nj {
                for k in 0..nk {
                    want[(i * nj + j) * nk + k] = (0..nl)
                        .map(|l| bd[(i * nj + j) * nl + l] * md[k * nl + l])
                        .sum();
                }
            }
        }
        for f in ["COO", "CSF"] {
            for threads in [1, 2] {
                let got = run_dense_on(
                    "A(i,j,k) = B(i,j,l) * M(k,l)",
                    &[("A", "dense", 3), ("B", f, 3), ("M", "dense", 2)],
                    &[("B", &b), ("M", &m)],
                    &[ni, nj, nk],
                    threads,
                );
                let what = format!("{}: TTM from {f} on {threads} threads", path.display());
                assert_close(&got, &want, &what);
            }
        }
    }
}

/// Reductions over the runs of COO's first two levels (the loop over `k`
/// between `j` and `l` makes them runs, as in TTM), shared across 2 and 3
/// threads in partial results, on the real order-3 tensors against the
/// dense answer: into a scalar and a vector.
#[test]
fn partial_results_over_runs_on_real_tensors() {
    for (path, b) in real_order3_tensors() {
        let (ni, nj, nl, nk) = (b.dims[0], b.dims[1], b.dims[2], 3);
        let m = factor_matrix(nk, nl);
        let mut z = CooTensor::new(vec![nk]);
        for k in 0..nk {
            z.push(&[k as u32], 0.5 + k as f64);
        }
        let (bd, md) = (b.to_dense(), m.to_dense());
        // w(l) = M(k,l) * z(k); y(j) = B(i,j,l) * w(l); a = y(j)
        let w: Vec<f64> = (0..nl)
            .map(|l| (0..nk).map(|k| md[k * nl + l] * (0.5 + k as f64)).sum())
            .collect();
        let mut y = vec![0.0; nj];
        for i in 0..ni {
            for (j, yj) in y.iter_mut().enumerate() {
                *yj += (0..nl)
                    .map(|l| bd[(i * nj + j) * nl + l] * w[l])
                    .sum::<f64>();
            }
        }
        let a: f64 = y.iter().sum();
        let formats = [("B", "COO", 3), ("M", "dense", 2), ("z", "dense", 1)];
        let data = [("B", &b), ("M", &m), ("z", &z)];
        for threads in [2, 3] {
            let on = |what: &str| format!("{}: {what} on {threads} threads", path.display());
            let mut scalar = formats.to_vec();
            scalar.push(("a", "dense", 0));
            let got = run_dense_on("a = B(i,j,l) * M(k,l) * z(k)", &scalar, &data, &[], threads);
            assert_close(&got, &[a], &on("a scalar"));
            let mut vector = formats.to_vec();
            vector.push(("y", "dense", 1));
            let got = run_dense_on(
                "y(j) = B(i,j,l) * M(k,l) * z(k)",
                &vector,
                &data,
                &[nj],
                threads,
            );
            assert_close(&got, &y, &on("a vector"));
        }
    }
}

/// Kernels whose outermost loop runs over the runs of COO's rows, shared
/// across 2 and 3 threads, on every real matrix against answers computed
/// from the dense forms: rows of a dense result (CSR .* COO, the COO
/// operand its transpose) and stitched CSR results (`2 * A` from COO, and
/// SpGEMM from COO times CSR through its workspace row).
#[test]
fn loops_over_runs_shared_on_real_matrices() {
    for (name, a) in real_matrices() {
        let (m, n) = (a.dims[0], a.dims[1]);
        let ad = a.to_dense();
        let square = m == n;
        let at = transposed(&a);
        let atd = at.to_dense();
        for threads in [2, 3] {
            let on = |what: &str| format!("{name}: {what} on {threads} threads");
            if square {
                let want: Vec<f64> = ad.iter().zip(&atd).map(|(x, y)| x * y).collect();
                let got = run_dense_on(
                    "C(i,j) = A(i,j) * B(i,j)",
                    &[("A", "CSR", 2), ("B", "COO", 2), ("C", "dense", 2)],
                    &[("A", &a), ("B", &at)],
                    &[m, n],
                    threads,
                );
                assert_close(&got, &want, &on("CSR .* COO into dense"));
            }
            let want: Vec<f64> = ad.iter().map(|x| 2.0 * x).collect();
            let got = run_dense_on(
                "C(i,j) = 2 * A(i,j)",
                &[("A", "COO", 2), ("C", "CSR", 2)],
                &[("A", &a)],
                &[m, n],
                threads,
            );
            assert_close(&got, &want, &on("2 * A from COO into CSR"));
            // A times its transpose: m x m, from each entry's row of A^T.
            let mut want = vec![0.0; m * m];
            for e in 0..a.nnz() {
                let (i, j) = (a.coord(e)[0] as usize, a.coord(e)[1] as usize);
                for k in 0..m {
                    want[i * m + k] += a.vals[e] * ad[k * n + j];
                }
            }
            let got = run_dense_on(
                "C(i,k) = A(i,j) * B(j,k)",
                &[("A", "COO", 2), ("B", "CSR", 2), ("C", "CSR", 2)],
                &[("A", &a), ("B", &at)],
                &[m, m],
                threads,
            );
            assert_close(&got, &want, &on("SpGEMM from COO times CSR"));
        }
    }
}

fn transposed(t: &CooTensor) -> CooTensor {
    let mut out = CooTensor::new(vec![t.dims[1], t.dims[0]]);
    for e in 0..t.nnz() {
        let c = t.coord(e);
        out.push(&[c[1], c[0]], t.vals[e]);
    }
    out
}

/// Run `expr` with `formats` (name, preset, order) on `data`; the result as
/// a dense row-major array, after checking that an ordered result's
/// coordinates come out in order.
fn run_dense(
    expr: &str,
    formats: &[(&str, &str, usize)],
    data: &[(&str, &CooTensor)],
    out_dims: &[usize],
) -> Vec<f64> {
    run_dense_on(expr, formats, data, out_dims, 1)
}

/// `run_dense` on `threads` threads. A kernel that neither updates its
/// result nor reads it runs a second time over its first result, as a
/// timing loop runs it, and must give the same answer.
fn run_dense_on(
    expr: &str,
    formats: &[(&str, &str, usize)],
    data: &[(&str, &CooTensor)],
    out_dims: &[usize],
    threads: usize,
) -> Vec<f64> {
    run_dense_made(expr, formats, data, out_dims, threads, false).0
}

/// `run_dense_on`, the Cranelift kernel made as if for large data when
/// `as_if_large` (`Function::make_as_if_large`: what that tier does only
/// there); and the loop IR Cranelift translated.
fn run_dense_made(
    expr: &str,
    formats: &[(&str, &str, usize)],
    data: &[(&str, &CooTensor)],
    out_dims: &[usize],
    threads: usize,
    as_if_large: bool,
) -> (Vec<f64>, String) {
    let r = Registry::builtin();
    let a = parse_assignment(expr).unwrap(); // ok: test code, a panic is a failed test
    let formats = formats
        .iter()
        .map(|(n, f, o)| (n.to_string(), parse_format(f, *o, &r).unwrap()))
        .collect(); // ok: test code, a panic is a failed test
    let data = data
        .iter()
        .map(|(n, t)| (n.to_string(), (*t).clone()))
        .collect();
    let mut p =
        prepare("k", &a, &formats, &data, out_dims, None).unwrap_or_else(|e| panic!("{expr}: {e}"));
    p.threads = Threads::exactly(threads);
    if as_if_large {
        let f = &mut p.kernel.function;
        f.make_as_if_large();
        p.compiled = tensor_compiler::jit::compile(f).unwrap_or_else(|e| panic!("{expr}: {e}"));
    }
    let code = passes::for_codegen(&p.kernel.function, passes::Backend::Cranelift).to_string();
    p.run().unwrap_or_else(|e| panic!("{expr}: {e}"));
    let got = p.result().unwrap_or_else(|e| panic!("{expr}: {e}"));
    if !a.accumulate && a.rhs.accesses().iter().all(|x| x.tensor != a.lhs.tensor) {
        p.run().unwrap_or_else(|e| panic!("{expr}, again: {e}"));
        let again = p.result().unwrap_or_else(|e| panic!("{expr}, again: {e}"));
        assert_eq!(
            again.canonical(),
            got.canonical(),
            "{expr}: a second run over the first's result differs"
        );
    }
    let result = &formats[&a.lhs.tensor];
    let ordered = result.levels.iter().all(|l| l.properties().ordered);
    if let (true, CoordMap::Modes(modes)) = (ordered, &result.map) {
        // In storage order: a CSC result is sorted by column, then row.
        let coords: Vec<Vec<u32>> = (0..got.nnz())
            .map(|e| modes.iter().map(|&m| got.coord(e)[m]).collect())
            .collect();
        assert!(
            coords.windows(2).all(|w| w[0] < w[1]),
            "{expr}: result coordinates out of order"
        );
    }
    (got.to_dense(), code)
}

/// Sparse results on the real matrices against plain loops over their
/// entries: SpGEMM B·Bᵀ through the workspace row (rows of every length,
/// placed by rank or sorted), B + Bᵀ merged linearly at the outer level
/// (COO, DCSR), and B times a dense matrix of 11 columns (the Cranelift
/// tier's vector loop with its remainder).
#[test]
fn sparse_results_and_dense_rows_on_real_matrices() {
    let mut coo_strips = 0;
    for (name, b) in real_matrices() {
        let bt = transposed(&b);
        let (m, n) = (b.dims[0], b.dims[1]);
        // SpGEMM: A = B * Bᵀ, m x m.
        let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
        for e in 0..bt.nnz() {
            let c = bt.coord(e);
            rows[c[0] as usize].push((c[1] as usize, bt.vals[e]));
        }
        let mut want = vec![0.0; m * m];
        for e in 0..b.nnz() {
            let c = b.coord(e);
            for &(j, v) in &rows[c[1] as usize] {
                want[c[0] as usize * m + j] += b.vals[e] * v;
            }
        }
        // CSR x CSR through a workspace row, and operands the compiler
        // converts so that nothing is merged again per row (C in CSC or
        // COO, B in CSC, both converted for a CSC result).
        for (bf, cf, a) in [
            ("CSR", "CSR", "CSR"),
            ("CSR", "CSR", "DCSR"),
            ("CSR", "CSR", "COO"),
            ("CSR", "CSC", "CSR"),
            ("COO", "COO", "COO"),
            ("CSC", "CSR", "CSR"),
            ("DCSR", "CSR", "CSC"),
            ("COO", "CSC", "DCSR"),
        ] {
            let got = run_dense(
                "A(i,j) = B(i,k) * C(k,j)",
                &[("A", a, 2), ("B", bf, 2), ("C", cf, 2)],
                &[("B", &b), ("C", &bt)],
                &[m, m],
            );
            assert_close(&got, &want, &format!("{name}: SpGEMM {bf} x {cf} into {a}"));
        }
        // B + Bᵀ (a union) and B .* Bᵀ (an intersection, its cursors
        // stepped in its cases by `ir::case_steps`), square matrices, into
        // sparse results; the intersection also into a scalar.
        if m == n {
            let (bd, btd) = (b.to_dense(), bt.to_dense());
            let sum: Vec<f64> = bd.iter().zip(&btd).map(|(x, y)| x + y).collect();
            let product: Vec<f64> = bd.iter().zip(&btd).map(|(x, y)| x * y).collect();
            for f in ["COO", "DCSR", "CSR"] {
                for (op, want) in [("+", &sum), ("*", &product)] {
                    // CSR's rows are shared among threads, each stitched
                    // into the result (`Parallel::Stitch`).
                    for threads in [1, 3] {
                        let got = run_dense_on(
                            &format!("A(i,j) = B(i,j) {op} C(i,j)"),
                            &[("A", f, 2), ("B", f, 2), ("C", f, 2)],
                            &[("B", &b), ("C", &bt)],
                            &[m, m],
                            threads,
                        );
                        let what = format!("{name}: B {op} Bt in {f} on {threads} threads");
                        assert_close(&got, want, &what);
                    }
                }
                let got = run_dense(
                    "s = B(i,j) * C(i,j)",
                    &[("s", "dense", 0), ("B", f, 2), ("C", f, 2)],
                    &[("B", &b), ("C", &bt)],
                    &[],
                );
                let total: f64 = product.iter().sum();
                assert_close(&got, &[total], &format!("{name}: <B, Bt> in {f}"));
            }
        }
        // SpDM: B times a dense n x 11 matrix.
        let k = 11;
        let (d, want) = spdm_reference(&b, k, |x| ((x * 5 % 17) as f64 - 8.0) / 3.0);
        // (each row of A zeroed in the loop just before it is first
        // written, by the thread that owns it: `lower::parallel::fill`)
        for f in ["CSR", "COO", "DCSR"] {
            for threads in [1, 3] {
                let got = run_dense_on(
                    "A(i,l) = B(i,j) * D(j,l)",
                    &[("A", "dense", 2), ("B", f, 2), ("D", "dense", 2)],
                    &[("B", &b), ("D", &d)],
                    &[m, k],
                    threads,
                );
                let what = format!("{name}: SpDM with B in {f} on {threads} threads");
                assert_close(&got, &want, &what);
            }
        }
        // The Cranelift tier's strips of 16 sums in vector pairs, as made
        // for large data: 37 columns, two whole strips and 5 past them
        // (COO only where its rows repeat: `ir::row_runs`).
        let k = 37;
        let (d, want) = spdm_reference(&b, k, |x| ((x * 7 % 19) as f64 - 9.0) / 4.0);
        for f in ["CSR", "COO", "DCSR"] {
            for threads in [1, 3] {
                let (got, code) = run_dense_made(
                    "A(i,l) = B(i,j) * D(j,l)",
                    &[("A", "dense", 2), ("B", f, 2), ("D", "dense", 2)],
                    &[("B", &b), ("D", &d)],
                    &[m, k],
                    threads,
                    true,
                );
                let what = format!("{name}: SpDM in strips with B in {f} on {threads} threads");
                let stripped = code.contains("strip_sum");
                assert!(stripped || f == "COO", "{what}: no strips");
                coo_strips += usize::from(stripped && f == "COO");
                assert_close(&got, &want, &what);
            }
        }
    }
    assert!(coo_strips > 0, "no real matrix ran COO's rows in strips");
}

/// A dense `x` of `b`'s columns, `x[j] = value(j)`, and `b * x` by plain
/// loops over `b`'s entries: the answer the kernels are checked against.
fn x_and_plain_spmv(b: &CooTensor, value: impl Fn(usize) -> f64) -> (CooTensor, Vec<f64>) {
    let xv: Vec<f64> = (0..b.dims[1]).map(value).collect();
    let mut want = vec![0.0; b.dims[0]];
    for e in 0..b.nnz() {
        let c = b.coord(e);
        want[c[0] as usize] += b.vals[e] * xv[c[1] as usize];
    }
    (CooTensor::from_dense(vec![b.dims[1]], &xv), want)
}

/// COO SpMV on the real matrices with the Cranelift kernel made as if for
/// large data whose coordinates are scattered: where its loop over the
/// entries is a `for` (rows too short for register runs, `ir::runs`), it
/// asks for the elements of `x` it gathers, once per strip of positions
/// (`gathers::ask_gathers_by_calls`); 1 and 3 threads, against plain
/// loops over the entries. Some matrix must ask.
#[test]
fn gathers_asked_by_calls_on_real_matrices() {
    let mut asked = 0;
    for (name, b) in real_matrices() {
        let m = b.dims[0];
        let (x, want) = x_and_plain_spmv(&b, |j| ((j * 3 % 11) as f64 - 5.0) / 2.0);
        for threads in [1, 3] {
            let (got, code) = run_dense_made(
                "y(i) = B(i,j) * x(j)",
                &[("y", "dense", 1), ("B", "COO", 2), ("x", "dense", 1)],
                &[("B", &b), ("x", &x)],
                &[m],
                threads,
                true,
            );
            let what = format!("{name}: COO SpMV made for large data on {threads} threads");
            asked += usize::from(code.contains("prefetch x_vals"));
            assert_close(&got, &want, &what);
        }
    }
    assert!(asked > 0, "no real matrix's COO SpMV asked for x");
}

/// SpMV in every format whose loops take prefetch hints, on the real
/// matrices, with the Cranelift kernel made as if for large data: every
/// stream, block and gather hint is kept (`ir::hints_for_data`) and, on
/// x86-64, carried as a prefetch instruction (`jit::prefetch`), whose
/// loads are rewritten after compiling. One thread, against plain loops
/// over the entries. Some kernel must carry hints.
#[test]
fn hinted_cranelift_spmv_on_real_matrices() {
    let mut hinted = 0;
    for (name, b) in real_matrices() {
        let m = b.dims[0];
        let (x, want) = x_and_plain_spmv(&b, |j| ((j * 5 % 17) as f64 - 8.0) / 3.0);
        for f in ["CSR", "CSC", "DCSR", "COO", "COO-AoS", "ELL", "BCSR(4)"] {
            let (got, code) = run_dense_made(
                "y(i) = B(i,j) * x(j)",
                &[("y", "dense", 1), ("B", f, 2), ("x", "dense", 1)],
                &[("B", &b), ("x", &x)],
                &[m],
                1,
                true,
            );
            hinted += usize::from(code.contains("prefetch"));
            assert_close(&got, &want, &format!("{name}: {f} SpMV with hints"));
        }
    }
    assert!(hinted > 0, "no real matrix's SpMV carried hints");
}

/// Kernel shapes that read an access more than once, and scalars summed
/// over every row, on the real matrices against plain loops over their
/// entries: the repeated access walked once (`LExpr::from_notation`), the
/// row's two accumulators added once into the scalar (`ir::unroll`), and
/// COO's register runs two entries at a time (`ir::runs`).
#[test]
fn repeated_accesses_and_scalar_sums_on_real_matrices() {
    for (name, b) in real_matrices() {
        let (m, n) = (b.dims[0], b.dims[1]);
        let xv: Vec<f64> = (0..n).map(|j| ((j * 7 % 13) as f64 - 6.0) / 4.0).collect();
        let x = CooTensor::from_dense(vec![n], &xv);
        let (mut sum, mut squares) = (0.0, 0.0);
        let mut rows = vec![0.0; m];
        for e in 0..b.nnz() {
            let (c, v) = (b.coord(e), b.vals[e]);
            sum += v;
            squares += v * v;
            rows[c[0] as usize] += v * xv[c[1] as usize] + v * v;
        }
        let twice: Vec<f64> = b.to_dense().iter().map(|v| 2.0 * v).collect();
        for f in ["CSR", "CSC", "COO", "DCSR", "COO-AoS"] {
            let scalar =
                |expr: &str| run_dense(expr, &[("a", "dense", 0), ("B", f, 2)], &[("B", &b)], &[]);
            assert_close(
                &scalar("a = B(i,j)"),
                &[sum],
                &format!("{name}: sum in {f}"),
            );
            assert_close(
                &scalar("a = B(i,j) * B(i,j)"),
                &[squares],
                &format!("{name}: sum of squares in {f}"),
            );
            let got = run_dense(
                "y(i) = B(i,j) * x(j) + B(i,j) * B(i,j)",
                &[("y", "dense", 1), ("B", f, 2), ("x", "dense", 1)],
                &[("B", &b), ("x", &x)],
                &[m],
            );
            assert_close(&got, &rows, &format!("{name}: B*x + B*B in {f}"));
            if f != "COO-AoS" {
                let got = run_dense(
                    "A(i,j) = B(i,j) + B(i,j)",
                    &[("A", f, 2), ("B", f, 2)],
                    &[("B", &b)],
                    &[m, n],
                );
                assert_close(&got, &twice, &format!("{name}: B + B in {f}"));
            }
        }
    }
}

/// The sum of two SpMVs merged over their rows, `y = A*x + B*x`, with B
/// the transpose of a square real matrix (patterns that differ, rows that
/// only one of them has): CSR with COO (whose runs of equal rows bound the
/// merge's inner ranges), COO with COO and CSR with CSR, against the two
/// products computed by plain loops over the entries.
#[test]
fn two_spmvs_merged_over_rows_on_real_matrices() {
    let r = Registry::builtin();
    let expr = parse_assignment("y(i) = A(i,j) * x(j) + B(i,j) * x(j)").unwrap();
    let mut square = 0;
    for (name, a) in real_matrices().filter(|(_, a)| a.dims[0] == a.dims[1]) {
        square += 1;
        let b = transposed(&a);
        let n = a.dims[1];
        let x: Vec<f64> = (0..n).map(|j| ((j * 5 % 11) as f64 - 5.0) / 3.0).collect();
        let want: Vec<f64> = reference_spmv(&a, &x)
            .iter()
            .zip(reference_spmv(&b, &x))
            .map(|(p, q)| p + q)
            .collect();
        for (fa, fb) in [("CSR", "COO"), ("COO", "COO"), ("CSR", "CSR")] {
            let mut formats = std::collections::BTreeMap::new();
            formats.insert("A".to_string(), parse_format(fa, 2, &r).unwrap());
            formats.insert("B".to_string(), parse_format(fb, 2, &r).unwrap());
            formats.insert("x".to_string(), parse_format("dense", 1, &r).unwrap());
            formats.insert("y".to_string(), parse_format("dense", 1, &r).unwrap());
            let mut data = std::collections::BTreeMap::new();
            data.insert("A".to_string(), a.clone());
            data.insert("B".to_string(), b.clone());
            data.insert("x".to_string(), CooTensor::from_dense(vec![n], &x));
            let mut p = prepare("spmv2", &expr, &formats, &data, &[n], None).unwrap();
            p.run().unwrap();
            let got = p.result().unwrap().to_dense();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
                    "{name} A:{fa} B:{fb}: y[{i}] = {g}, expected {w}"
                );
            }
        }
    }
    assert!(square > 0, "no square real matrix among the fixtures");
}
