//! The `tensorc` contract of DESIGN.md, driven as a user would: every bad
//! input is one `error:` line and a non-zero exit, never a panic.

use std::process::Command;

fn tensorc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorc")).args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().expect("run tensorc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn fails_with(args: &[&str], needle: &str) {
    let (code, _, err) = tensorc(args);
    assert_ne!(code, 0, "{args:?} should fail");
    assert!(err.starts_with("error: "), "{args:?}: `{err}`");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line: `{err}`");
    assert!(err.contains(needle), "{args:?}: `{err}` should mention `{needle}`");
}

const M: &str = "tests/fixtures/io/real/west0479.mtx";

#[test]
fn runs_spmv_and_reports() {
    let (code, out, err) = tensorc(&["y(i) = A(i,j) * x(j)", "-f", "A:CSR", "-i", &format!("A:{M}"), "--time", "3"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("result:  y [479]") && out.contains("median"), "{out}");
}

#[test]
fn json_has_the_contract_fields() {
    let (code, out, err) = tensorc(&["y(i) = A(i,j) * x(j)", "-f", "A:COO", "-i", &format!("A:{M}"), "--time", "2", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for k in ["kernel", "median_ms", "min_ms", "runs", "compile_ms"] {
        assert!(v.get(k).is_some(), "missing {k} in {out}");
    }
    assert_eq!(v["runs"], 2);
}

#[test]
fn emits_c_ir_lattice_graph() {
    for (what, needle) in [("c", "for (int64_t"), ("ir", "fn kernel("), ("lattice", "co-iterate"), ("graph", "loop order: i -> j")] {
        let (code, out, err) = tensorc(&["y(i) = A(i,j) * x(j)", "-f", "A:CSR", "-d", "A:5,5", "--emit", what]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(needle), "--emit {what}: {out}");
    }
}

#[test]
fn writes_results_and_reads_them_back() {
    let dir = std::env::temp_dir().join(format!("tensorc-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("y.tns");
    let (code, _, err) = tensorc(&["y(i) = A(i,j) * x(j)", "-f", "A:DIA", "-i", &format!("A:{M}"), "-o", &format!("y:{}", out.display())]);
    assert_eq!(code, 0, "{err}");
    let y = tensor_compiler::io::read_tns_with_dims(&out, Some(&[479])).unwrap();
    let (code, _, err) = tensorc(&["y(i) = A(i,j) * x(j)", "-f", "A:CSR", "-i", &format!("A:{M}"), "-o", &format!("y:{}", dir.join("z.tns").display())]);
    assert_eq!(code, 0, "{err}");
    let z = tensor_compiler::io::read_tns_with_dims(&dir.join("z.tns"), Some(&[479])).unwrap();
    assert_eq!(y.canonical().coords, z.canonical().coords);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bad_input_is_one_error_line() {
    let m = format!("A:{M}");
    fails_with(&["y(i) = A(i,j) * * x(j)"], "column 17");
    fails_with(&["y(i) = A(i,j"], "expected `)`");
    fails_with(&["y(i) = A(i,j) * x(j)", "-f", "A:CRS", "-d", "A:3,3"], "unknown level format `CRS`");
    fails_with(&["y(i) = A(i,j) * x(j)", "-f", "Q:CSR"], "no tensor `Q`");
    fails_with(&["y(i) = A(i,j) * x(j)", "-f", "A:dense,compressed,dense", "-d", "A:3,3"], "3 levels but the tensor has order 2");
    fails_with(&["y(i) = A(i,j) * x(j)", "-f", "A:BCSR(0)", "-d", "A:3,3"], "block size must be at least 1");
    fails_with(&["y(i) = A(i,j) * x(j)", "-i", "A:tests/fixtures/io/edge/fmm_invalid_bad_value.mtx"], "fmm_invalid_bad_value.mtx:3:");
    fails_with(&["y(i) = A(i,j) * x(j)", "-i", "A:does/not/exist.mtx"], "cannot open");
    fails_with(&["y(i) = A(i,j) * x(j)", "-i", &m, "-d", "x:5"], "shape mismatch");
    fails_with(&["y(i) = A(i,j,k) * x(j)", "-i", &m], "order-2 tensor");
    // Operands that want opposite loop orders inside one product: no order
    // and no buffer helps (a union of them is split into nests instead).
    fails_with(&["A(i,j) = B(i,j) * C(j,i)", "-f", "B:CSR", "-f", "C:CSR", "-d", "B:4,4", "-d", "C:4,4"], "no loop order");
    fails_with(&["A(i,j) = B(i,j)", "-f", "A:dense,range,offset", "-d", "B:4,4"], "3 levels");
    fails_with(&["A(i,j) = B(i,k) * C(k,j)", "-d", "B:1000000,1", "-d", "C:1,1000000"], "memory");
    fails_with(&["y(i) = x(i)", "-d", "x:abc"], "non-negative integers");
    fails_with(&["y(i) = x(i)", "--bogus"], "unexpected argument");
    fails_with(&[], "no expression");
    fails_with(&["y(i) = A(i,j) * x(j)", "-f", "A:CSR", "-d", "A:100000000,100000000", "--density", "0.1"], "memory");
}
