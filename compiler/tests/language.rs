//! The `.tensor` language end to end: every example checks and runs, the
//! salsa database recomputes only the edited kernel, problems carry
//! FILE:LINE:COL, and no text at all makes the pipeline panic.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use tensor_compiler::ide::{Analysis, View};

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tensor"))
        .collect();
    v.sort();
    v
}

fn tensorc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorc"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_example_checks_and_every_kernel_runs() {
    let files = examples();
    assert!(files.len() >= 12);
    for f in &files {
        let p = f.to_str().unwrap();
        let (code, out, err) = tensorc(&["check", p]);
        assert_eq!(code, 0, "{p}: {out}{err}");
        let mut a = Analysis::new();
        let file = a.set_file(
            &std::fs::canonicalize(f).unwrap(),
            std::fs::read_to_string(f).unwrap(),
        );
        for k in tensor_compiler::language::db::kernel_names(&a.db, file).clone() {
            let (code, out, err) = tensorc(&["run", p, "--kernel", &k, "--json"]);
            assert_eq!(code, 0, "{p} {k}: {err}");
            let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
            assert_eq!(v["kernel"], k);
        }
    }
}

#[test]
fn run_matches_the_expression_form() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let (code, out, err) = tensorc(&[
        "run",
        dir.join("spmv_coo.tensor").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let via_file = v["results"][0]["nnz"].as_u64().unwrap();
    assert_eq!(via_file, 1000);
    // Like the expression form's, its JSON says how many threads ran.
    let (code, out, err) = tensorc(&[
        "run",
        dir.join("spmv_coo.tensor").to_str().unwrap(),
        "--json",
        "--threads",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["threads"], 1, "{v}");
}

#[test]
fn run_of_a_file_names_the_tier_it_timed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let file = dir.join("spmv_csr.tensor");
    let (code, out, err) = tensorc(&[
        "run",
        file.to_str().unwrap(),
        "--json",
        "--backend",
        "cranelift",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["backend"], "cranelift", "{v}");
    let (code, out, err) = tensorc(&["run", file.to_str().unwrap(), "--backend", "cranelift"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ms (cranelift), median"), "{out}");
    if tensor_compiler::backend::cc::compiler().is_err() {
        println!("skipped the cc tier: no C compiler on this machine");
        return;
    }
    let cache = std::env::temp_dir().join(format!("tensor-lang-cc-{}", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tensorc"))
        .args(["run", file.to_str().unwrap(), "--json", "--backend", "cc"])
        .env("TENSOR_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["backend"], "cc", "{v}");
    std::fs::remove_dir_all(cache).ok();
}

#[test]
fn check_reports_file_line_col() {
    let dir = std::env::temp_dir().join(format!("tensor-lang-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.tensor");
    std::fs::write(
        &f,
        "tensor A : f64[4, 4] @ CRS\ntensor B : f64[4, 4] @ CSR\ntensor C : f64[4, 4] @ CSR\ntensor x : f32[4] @ dense\nkernel k { y(i) = A(i,j) * x(j) }\nkernel t { C(i,j) = B(j,i) + C(i,j) }\nkernel broken { y(i) = * }\n",
    )
    .unwrap();
    let (code, _, err) = tensorc(&["check", f.to_str().unwrap()]);
    assert_ne!(code, 0);
    let fname = f.display().to_string();
    for needle in [
        format!("{fname}:1:24: error: format of `A`: unknown level format `CRS`"),
        format!("{fname}:4:12: error: element type `f32`"),
        format!("{fname}:5:12: error: unknown tensor `y`"),
        format!("{fname}:7:"),
    ] {
        assert!(err.contains(&needle), "missing `{needle}` in:\n{err}");
    }
    assert!(err.lines().all(|l| l.starts_with(&fname)), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

const FILE: &str = "tensor A : f64[8, 8] @ CSR = random(seed: 1, density: 0.3)\ntensor x : f64[8] @ dense = random(seed: 2)\ntensor y : f64[8] @ dense\nkernel one { y(i) = A(i,j) * x(j) }\nkernel two { y(i) = A(i,j) * x(j) }\n";

fn executed(log: &[String], what: &str) -> usize {
    log.iter().filter(|l| l.contains(what)).count()
}

#[test]
fn editing_one_kernel_recomputes_only_that_kernel() {
    let mut a = Analysis::new();
    let path = Path::new("/virtual/inc.tensor");
    let file = a.set_file(path, FILE.to_string());
    assert!(a.diagnostics(file).is_empty());
    a.view(file, "one", View::C).unwrap();
    a.view(file, "two", View::C).unwrap();
    a.db.start_logging();
    // Edit inside kernel `one` (and shift nothing before `two`'s start: the
    // edit keeps the length).
    let edited = FILE.replace(
        "kernel one { y(i) = A(i,j) * x(j) }",
        "kernel one { y(i) = A(i,k) * x(k) }",
    );
    a.set_file(path, edited.clone());
    assert!(a.diagnostics(file).is_empty());
    a.view(file, "one", View::C).unwrap();
    a.view(file, "two", View::C).unwrap();
    let log = a.db.take_log();
    assert_eq!(executed(&log, "compile_kernel"), 1, "{log:#?}");
    assert_eq!(executed(&log, "resolve_kernel"), 1, "{log:#?}");
    assert!(executed(&log, "parse_file") == 1, "{log:#?}");
    // An edit that shifts kernel `two` (longer text in `one`) still leaves
    // `two` alone: its spans are relative to its own start.
    a.db.start_logging();
    a.set_file(path, edited.replace("A(i,k) * x(k)", "A(i,k) * x(k) * 2"));
    a.view(file, "two", View::C).unwrap();
    let log = a.db.take_log();
    assert_eq!(executed(&log, "compile_kernel"), 0, "{log:#?}");
}

#[test]
fn editing_a_data_file_recomputes_only_its_readers() {
    let dir = std::env::temp_dir().join(format!("tensor-data-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("m.mtx"),
        "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n2 3 2.0\n",
    )
    .unwrap();
    let text = "tensor A : f64[M, N] @ CSR = mtx(\"m.mtx\")\ntensor B : f64[3, 3] @ CSR = random(seed: 1)\ntensor x : f64[N] @ dense = random(seed: 2)\ntensor y : f64[3] @ dense\nkernel reads { y(i) = A(i,j) * x(j) }\nkernel other { y(i) = B(i,j) * x(j) }\n";
    let mut a = Analysis::new();
    let file = a.set_file(&dir.join("d.tensor"), text.into());
    assert!(a.diagnostics(file).is_empty(), "{:?}", a.diagnostics(file));
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(
        dir.join("m.mtx"),
        "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 5.0\n",
    )
    .unwrap();
    a.db.start_logging();
    a.refresh_data_files();
    assert!(a.diagnostics(file).is_empty());
    let log = a.db.take_log();
    assert_eq!(executed(&log, "load_data"), 1, "{log:#?}");
    assert!(executed(&log, "resolve_kernel") <= 2, "{log:#?}");
    std::fs::remove_dir_all(dir).ok();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Random edits of a real file (deletions, insertions of random text
    /// and of bytes) never panic anywhere in parse, resolve, compile,
    /// diagnostics, hovers, hints or formatting.
    #[test]
    fn random_edits_never_panic(cut in 0usize..400, len in 0usize..40, insert in ".{0,12}", garbage in prop::collection::vec(any::<u8>(), 0..8)) {
        let base = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tensor3.tensor")).unwrap();
        let mut bytes = base.into_bytes();
        let at = cut.min(bytes.len());
        let end = (at + len).min(bytes.len());
        bytes.splice(at..end, insert.bytes().chain(garbage));
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let mut a = Analysis::new();
        let file = a.set_file(Path::new("/virtual/fuzz.tensor"), text.clone());
        let _ = a.diagnostics(file);
        let _ = a.inlay_hints(file);
        let _ = a.symbols(file);
        let _ = a.format(file);
        let _ = a.semantic_tokens(file);
        for off in [0, at, text.len() / 2, text.len()] {
            let _ = a.hover(file, off);
            let _ = a.completions(file, off);
            let _ = a.definition(file, off);
        }
    }
}

/// Latency figures for the note (not a timed test: run with
/// `cargo test --release -p tensor-compiler --test language -- --ignored --nocapture`).
#[test]
#[ignore]
fn latency_on_a_100_kernel_file() {
    let mut text = String::from("tensor A : f64[64, 64] @ CSR = random(seed: 1, density: 0.1)\ntensor B : f64[64, 64] @ COO = random(seed: 3, density: 0.1)\ntensor x : f64[64] @ dense = random(seed: 2)\ntensor y : f64[64] @ dense\n");
    for k in 0..100 {
        text.push_str(&format!(
            "kernel k{k} {{ y(i) = A(i,j) * x(j) + B(i,j) * x(j) }}\n"
        ));
    }
    let mut a = Analysis::new();
    let t0 = std::time::Instant::now();
    let file = a.set_file(Path::new("/virtual/big.tensor"), text.clone());
    assert!(a.diagnostics(file).is_empty());
    let full = t0.elapsed();
    let mut times = Vec::new();
    for n in 0..50 {
        let k = n % 100;
        let edited = text
            .replace(
                &format!("kernel k{k} {{ y(i) = A(i,j)"),
                &format!("kernel k{k} {{ y(i) = A(i,k)"),
            )
            .replace(
                &format!("kernel k{k} {{ y(i) = A(i,k) * x(j)"),
                &format!("kernel k{k} {{ y(i) = A(i,k) * x(k)"),
            );
        let t0 = std::time::Instant::now();
        a.set_file(
            Path::new("/virtual/big.tensor"),
            if n % 2 == 0 { edited } else { text.clone() },
        );
        let _ = a.diagnostics(file);
        times.push(t0.elapsed());
    }
    times.sort();
    println!("100-kernel file: full check {:.2} ms; re-check after an edit inside one kernel: median {:.3} ms, max {:.3} ms", full.as_secs_f64() * 1e3, times[times.len() / 2].as_secs_f64() * 1e3, times[times.len() - 1].as_secs_f64() * 1e3);
}
