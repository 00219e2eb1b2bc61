//! The `tensorc` contract of DESIGN.md, driven as a user would: every bad
//! input is one `error:` line and a non-zero exit, never a panic.

use std::process::Command;

fn tensorc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run tensorc");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Fails with exactly one `error:` line mentioning `needle` (after any
/// `note:` lines announcing generated operands).
fn fails_with(args: &[&str], needle: &str) {
    let (code, _, err) = tensorc(args);
    assert_ne!(code, 0, "{args:?} should fail");
    let lines: Vec<&str> = err
        .trim_end()
        .lines()
        .filter(|l| !l.starts_with("note: "))
        .collect();
    assert_eq!(lines.len(), 1, "{args:?}: one error line: `{err}`");
    assert!(lines[0].starts_with("error: "), "{args:?}: `{err}`");
    assert!(
        lines[0].contains(needle),
        "{args:?}: `{err}` should mention `{needle}`"
    );
}

/// A scratch directory for one test, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("tensorc-cli-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

const M: &str = "tests/fixtures/io/real/west0479.mtx";

#[test]
fn runs_spmv_and_reports() {
    let (code, out, err) = tensorc(&[
        "y(i) = A(i,j) * x(j)",
        "-f",
        "A:CSR",
        "-i",
        &format!("A:{M}"),
        "--time",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("result:  y [479]") && out.contains("median"),
        "{out}"
    );
}

#[test]
fn json_has_the_contract_fields() {
    let (code, out, err) = tensorc(&[
        "y(i) = A(i,j) * x(j)",
        "-f",
        "A:COO",
        "-i",
        &format!("A:{M}"),
        "--time",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for k in ["kernel", "median_ms", "min_ms", "runs", "compile_ms"] {
        assert!(v.get(k).is_some(), "missing {k} in {out}");
    }
    assert_eq!(v["runs"], 2);
}

#[test]
fn emits_c_ir_lattice_graph() {
    for (what, needle) in [
        ("c", "for (int64_t"),
        ("ir", "fn kernel("),
        ("lattice", "co-iterate"),
        ("graph", "loop order: i -> j"),
    ] {
        let (code, out, err) = tensorc(&[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:CSR",
            "-d",
            "A:5,5",
            "--emit",
            what,
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(needle), "--emit {what}: {out}");
    }
}

#[test]
fn writes_results_and_reads_them_back() {
    let dir = std::env::temp_dir().join(format!("tensorc-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("y.tns");
    let (code, _, err) = tensorc(&[
        "y(i) = A(i,j) * x(j)",
        "-f",
        "A:DIA",
        "-i",
        &format!("A:{M}"),
        "-o",
        &format!("y:{}", out.display()),
    ]);
    assert_eq!(code, 0, "{err}");
    let y = tensor_compiler::io::read_tns_with_dims(&out, Some(&[479])).unwrap();
    let (code, _, err) = tensorc(&[
        "y(i) = A(i,j) * x(j)",
        "-f",
        "A:CSR",
        "-i",
        &format!("A:{M}"),
        "-o",
        &format!("y:{}", dir.join("z.tns").display()),
    ]);
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
    fails_with(
        &["y(i) = A(i,j) * x(j)", "-f", "A:CRS", "-d", "A:3,3"],
        "unknown level format `CRS`",
    );
    fails_with(&["y(i) = A(i,j) * x(j)", "-f", "Q:CSR"], "no tensor `Q`");
    fails_with(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:dense,compressed,dense",
            "-d",
            "A:3,3",
        ],
        "3 levels but the tensor has order 2",
    );
    fails_with(
        &["y(i) = A(i,j) * x(j)", "-f", "A:BCSR(0)", "-d", "A:3,3"],
        "block size must be at least 1",
    );
    fails_with(
        &[
            "y(i) = A(i,j) * x(j)",
            "-i",
            "A:tests/fixtures/io/edge/fmm_invalid_bad_value.mtx",
        ],
        "fmm_invalid_bad_value.mtx:3:",
    );
    fails_with(
        &["y(i) = A(i,j) * x(j)", "-i", "A:does/not/exist.mtx"],
        "cannot open",
    );
    fails_with(
        &["y(i) = A(i,j) * x(j)", "-i", &m, "-d", "x:5"],
        "shape mismatch",
    );
    fails_with(&["y(i) = A(i,j,k) * x(j)", "-i", &m], "order-2 tensor");
    fails_with(
        &[
            "A(i,j) = B(i,j)",
            "-f",
            "A:dense,range,offset",
            "-d",
            "B:4,4",
        ],
        "3 levels",
    );
    fails_with(
        &[
            "A(i,j) = B(i,k) * C(k,j)",
            "-d",
            "B:1000000,1",
            "-d",
            "C:1,1000000",
        ],
        "memory",
    );
    fails_with(&["y(i) = x(i)", "-d", "x:abc"], "non-negative integers");
    fails_with(&["y(i) = x(i)", "--bogus"], "unexpected argument");
    fails_with(&[], "no expression");
    fails_with(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:CSR",
            "-d",
            "A:100000000,100000000",
            "--density",
            "0.1",
        ],
        "memory",
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let parens = format!("y(i) = {}x(i){}", "(".repeat(10_000), ")".repeat(10_000));
    let minus = format!("y(i) = {}x(i)", "-".repeat(100_000));
    let sum = format!("y(i) = x(i){}", " + x(i)".repeat(10_000));
    for e in [&parens, &minus, &sum] {
        fails_with(&[e, "-d", "x:3"], "more than 200 levels");
    }
    // The .tensor front end reports it as a diagnostic.
    let dir = Scratch::new("deep");
    let file = dir.file("deep.tensor", &format!("tensor x : f64[3] @ dense\ntensor y : f64[3] @ dense\nkernel k {{ y(i) = {}x(i){} }}\n", "(".repeat(10_000), ")".repeat(10_000)));
    let (code, _, err) = tensorc(&["check", &file]);
    assert_ne!(code, 0);
    assert!(
        err.contains(":3:")
            && err.contains("error: expression nested too deeply: more than 200 levels"),
        "{err}"
    );
    // Shallow enough is fine, and runs.
    let ok = format!("y(i) = {}x(i){}", "(".repeat(150), ")".repeat(150));
    let (code, _, err) = tensorc(&[&ok, "-d", "x:3"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn sum_of_thirteen_dense_vectors() {
    let e = format!("y(i) = x(i){}", " + x(i)".repeat(12));
    let (code, out, err) = tensorc(&[&e, "-d", "x:5"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("result:  y [5]"), "{out}");
}

#[test]
fn empty_expression_is_a_clean_error() {
    fails_with(&[""], "expected a tensor name");
    fails_with(&["   "], "expected a tensor name");
}

#[test]
fn numeric_flags_are_range_checked() {
    let spmv = ["y(i) = A(i,j) * x(j)", "-f", "A:CSR", "-d", "A:5,5"];
    let with = |extra: &[&str], needle: &str| {
        let mut args = spmv.to_vec();
        args.extend_from_slice(extra);
        fails_with(&args, needle);
    };
    for n in ["18446744073709551615", "100000000000", "0", "-1", "x"] {
        with(
            &[&format!("--time={n}")],
            "number of runs from 1 to 1000000",
        );
    }
    for d in ["NaN", "nan", "-0.5", "1.5", "inf", "x"] {
        with(&[&format!("--density={d}")], "density from 0 to 1");
    }
    with(&["--seed=-1"], "--seed");
    with(&["--seed", "18446744073709551616"], "--seed");
    fails_with(&["y(i) = x(i)", "-d", "x:3000000000"], "above 2147483647");
    fails_with(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:BCSR(99999999999)",
            "-d",
            "A:5,5",
        ],
        "block size 99999999999 is above",
    );
    fails_with(
        &[
            "y(i) = x(i)",
            "-f",
            "x:hashed(W=1000000000000)",
            "-d",
            "x:5",
        ],
        "W=1000000000000 is above",
    );
    // Limits themselves are accepted.
    let (code, _, err) = tensorc(&[
        "y(i) = x(i)",
        "-d",
        "x:3",
        "--density",
        "1",
        "--seed",
        "18446744073709551615",
        "--time",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn sizes_a_user_names_go_through_the_memory_guard() {
    // Hashed buckets: 1000 parents x W=2e9 slots.
    fails_with(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:dense,hashed(W=2000000000)",
            "-d",
            "A:1000,1000",
        ],
        "memory",
    );
    // Blocks of 2e9 x 2e9.
    fails_with(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:BCSR(2000000000)",
            "-d",
            "A:5,5",
        ],
        "memory",
    );
    // Generated dense operands of named dimensions.
    fails_with(
        &["y(i) = A(i,j) * x(j)", "-d", "A:2000000000,2000000000"],
        "memory",
    );
}

#[test]
fn readers_accept_only_regular_files() {
    let dir = Scratch::new("files");
    for ext in ["mtx", "tns"] {
        let link = dir.path(&format!("zero.{ext}"));
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        fails_with(
            &["y(i) = A(i,j) * x(j)", "-i", &format!("A:{link}")],
            &format!("{link}: not a regular file"),
        );
        let sub = dir.path(&format!("sub.{ext}"));
        std::fs::create_dir(&sub).unwrap();
        fails_with(
            &["y(i) = A(i,j) * x(j)", "-i", &format!("A:{sub}")],
            &format!("{sub}: not a regular file"),
        );
        let fifo = dir.path(&format!("fifo.{ext}"));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        fails_with(
            &["y(i) = A(i,j) * x(j)", "-i", &format!("A:{fifo}")],
            &format!("{fifo}: not a regular file"),
        );
        let long = dir.file(
            &format!("long.{ext}"),
            &"1".repeat(tensor_compiler::io::MAX_LINE + 5),
        );
        fails_with(
            &["y(i) = A(i,j) * x(j)", "-i", &format!("A:{long}")],
            &format!(
                "{long}:1: line longer than {} bytes",
                tensor_compiler::io::MAX_LINE
            ),
        );
    }
    // The .tensor language reads data through the same readers.
    let link = dir.path("zero2.mtx");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let file = dir.file("z.tensor", &format!("tensor A : f64[N, N] @ CSR = mtx(\"{link}\")\ntensor x : f64[N] @ dense\ntensor y : f64[N] @ dense\nkernel k {{ y(i) = A(i,j) * x(j) }}\n"));
    let (code, _, err) = tensorc(&["check", &file]);
    assert_ne!(code, 0);
    assert!(err.contains("not a regular file"), "{err}");
    // And so does reading a .tensor file itself.
    let (code, _, err) = tensorc(&["check", "/dev/zero"]);
    assert_ne!(code, 0);
    assert!(
        err.starts_with("error: /dev/zero: not a regular file"),
        "{err}"
    );
}

#[test]
fn the_same_name_twice_is_an_error() {
    let m = format!("A:{M}");
    fails_with(
        &["y(i) = A(i,j) * x(j)", "-i", &m, "-i", &m],
        "`A` is already given by -i",
    );
    fails_with(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:CSR",
            "-f",
            "A:COO",
            "-d",
            "A:3,3",
        ],
        "`A` is already given by -f A:CSR",
    );
    fails_with(
        &["y(i) = A(i,j) * x(j)", "-d", "A:3,3", "-d", "A:4,4"],
        "`A` is already given by -d A:3,3",
    );
}

#[test]
fn check_of_a_missing_file_prints_an_error_line() {
    let (code, _, err) = tensorc(&["check", "/nonexistent.tensor"]);
    assert_ne!(code, 0);
    assert!(
        err.starts_with("error: /nonexistent.tensor: cannot open"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// y = A x where x(0) is infinite: rows of A without column 0 must give
/// their finite sums whatever the format pads with.
fn spmv_with_infinite_x(format: &str) -> Vec<f64> {
    let dir = Scratch::new(&format!("inf-{}", format.replace(['(', ')'], "")));
    // Rows of 2, 1, 1, 3 entries (ELL pads rows 1, 2; BCSR(2) pads blocks).
    let a = dir.file("a.mtx", "%%MatrixMarket matrix coordinate real general\n4 4 7\n1 1 1\n1 2 2\n2 2 3\n3 3 4\n4 2 5\n4 3 6\n4 4 7\n");
    let x = dir.file("x.tns", "1 inf\n2 1\n3 1\n4 1\n");
    let y = dir.path("y.tns");
    let (code, _, err) = tensorc(&[
        "y(i) = A(i,j) * x(j)",
        "-f",
        &format!("A:{format}"),
        "-i",
        &format!("A:{a}"),
        "-i",
        &format!("x:{x}"),
        "-o",
        &format!("y:{y}"),
    ]);
    assert_eq!(code, 0, "{format}: {err}");
    let t = tensor_compiler::io::read_tns_with_dims(std::path::Path::new(&y), Some(&[4])).unwrap();
    let mut dense = vec![0.0; 4];
    for (e, v) in t.vals.iter().enumerate() {
        dense[t.coords[e] as usize] += v;
    }
    dense
}

#[test]
fn ell_padding_does_not_contribute() {
    let csr = spmv_with_infinite_x("CSR");
    assert_eq!(csr, vec![f64::INFINITY, 3.0, 4.0, 18.0]);
    assert_eq!(spmv_with_infinite_x("ELL"), csr);
}

#[test]
fn fill_inside_blocks_and_diagonals_does_not_contribute() {
    // BCSR blocks, DIA diagonals and dense rows under a sparse level store
    // zeros for coordinates with no entry: fill, not entries (a dense
    // tensor's zeros are entries: `0 * inf` is NaN there, as in NumPy).
    let csr = spmv_with_infinite_x("CSR");
    for f in [
        "BCSR(2)",
        "DIA",
        "compressed,dense",
        "hashed,dense",
        "CSB(2)",
    ] {
        assert_eq!(spmv_with_infinite_x(f), csr, "{f}");
    }
    assert!(spmv_with_infinite_x("dense,dense")[1].is_nan());
}

#[test]
fn generated_operands_are_announced() {
    let (code, _, err) = tensorc(&[
        "y(i) = A(i,j) * x(j)",
        "-f",
        "A:CSR",
        "-i",
        &format!("A:{M}"),
        "--seed",
        "7",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err.trim_end(),
        "note: x has no -i: generated dense [479], seed 7"
    );
    let (code, _, err) = tensorc(&["y(i) = A(i,j) * x(j)", "-f", "A:CSR", "-d", "A:5,6"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err.trim_end().lines().collect::<Vec<_>>(),
        [
            "note: A has no -i: generated CSR [5, 6] at density 0.1, seed 1",
            "note: x has no -i: generated dense [6], seed 1"
        ]
    );
}

#[test]
fn a_kernel_declared_twice_is_reported_where_it_is() {
    // Found by fuzzing: the second kernel's problems were placed with the
    // first one's offsets, past the end of the file.
    let dir = Scratch::new("twice");
    let file = dir.file("twice.tensor", "tensor x : f64[3] @ dense\ntensor y : f64[3] @ dense\nkernel k {\n  y(i) = q(i)\n}\nkernel k { y(i) = x(i) }\n");
    let (code, _, err) = tensorc(&["check", &file]);
    assert_ne!(code, 0);
    assert!(
        err.contains("twice.tensor:4:10: error: unknown tensor `q`"),
        "{err}"
    );
    assert!(
        err.contains("twice.tensor:6:8: error: kernel `k` is declared twice"),
        "{err}"
    );
    tensor_compiler::selfcheck::language(&std::fs::read_to_string(&file).unwrap());
}

/// A second format or tensor of a name was ignored without a word (the
/// first was used); it is an error at its name, as a second kernel is.
#[test]
fn a_format_or_tensor_declared_twice_is_an_error() {
    let dir = Scratch::new("twice_decl");
    let file = dir.file(
        "decl.tensor",
        "format F = (dense)\nformat F = (compressed)\ntensor x : f64[3] @ F\ntensor x : f64[4] @ dense\ntensor y : f64[3] @ dense\nkernel k { y(i) = x(i) }\n",
    );
    let (code, _, err) = tensorc(&["check", &file]);
    assert_ne!(code, 0);
    assert!(
        err.contains("decl.tensor:2:8: error: format `F` is declared twice"),
        "{err}"
    );
    assert!(
        err.contains("decl.tensor:4:8: error: tensor `x` is declared twice"),
        "{err}"
    );
    let (code, _, err) = tensorc(&["run", &file]);
    assert_ne!(code, 0);
    assert!(err.starts_with("error: "), "{err}");
}

/// `run` of a file that is not UTF-8, or whose only kernel does not
/// parse, says where, not "no kernel to run".
#[test]
fn run_reports_what_keeps_a_file_from_having_a_kernel() {
    let dir = Scratch::new("no_kernel");
    let garbled = dir.file("garbled.tensor", "kernel k { y(i) = x(i) \n");
    let (code, _, err) = tensorc(&["run", &garbled]);
    assert_ne!(code, 0);
    assert!(err.contains("garbled.tensor:"), "{err}");
    assert!(!err.contains("no kernel to run"), "{err}");
    let latin1 = dir.path("latin1.tensor");
    std::fs::write(&latin1, b"// caf\xe9\nkernel k { y(i) = x(i) }\n").unwrap();
    let (code, _, err) = tensorc(&["run", &latin1]);
    assert_ne!(code, 0);
    assert!(
        err.contains("latin1.tensor:1:7: not UTF-8 text (byte 0xE9)"),
        "{err}"
    );
    let empty = dir.file("empty.tensor", "");
    let (_, _, err) = tensorc(&["run", &empty]);
    assert!(err.contains("no kernel to run"), "{err}");
}

/// `--fresh-result` times each run from an empty result (its arrays
/// allocated and grown inside the timer): the result is the one the
/// reused-arrays timing gives, also where it outgrows the room a fresh
/// result is first given (an outer product holds more entries than its
/// operands), and the flag needs `--time`.
#[test]
fn fresh_result_timing_gives_the_reused_timings_result() {
    let dir = Scratch::new("fresh_result");
    let cases: [&[&str]; 2] = [
        &[
            "C(i,j) = A(i,j) + B(i,j)",
            "-f",
            "A:CSR",
            "-f",
            "B:CSR",
            "-f",
            "C:CSR",
            "-i",
            &format!("A:{M}"),
            "-i",
            &format!("B:{M}"),
        ],
        &[
            "C(i,j) = b(i) * c(j)",
            "-f",
            "b:sparse",
            "-f",
            "c:sparse",
            "-f",
            "C:COO",
            "-d",
            "b:300",
            "-d",
            "c:400",
        ],
    ];
    for (k, case) in cases.iter().enumerate() {
        let mut written = Vec::new();
        for fresh in [false, true] {
            let path = dir.0.join(format!("c{k}_{fresh}.mtx"));
            let out = format!("C:{}", path.display());
            let mut args: Vec<&str> = case.to_vec();
            args.extend(["--time", "3", "--threads", "1", "-o", &out]);
            if fresh {
                args.push("--fresh-result");
            }
            let (code, _, err) = tensorc(&args);
            assert_eq!(code, 0, "{args:?}: {err}");
            written.push(std::fs::read_to_string(&path).unwrap());
        }
        assert!(written[0].lines().count() > 3, "{}", written[0]);
        assert_eq!(written[0], written[1], "{case:?}");
    }
    let (code, _, err) = tensorc(&["y(i) = x(i)", "-d", "x:3", "--fresh-result"]);
    assert_ne!(code, 0);
    assert!(err.contains("--time"), "{err}");
}

/// A syntax error in a `.tensor` kernel says what the command line says
/// of the same statement (tree-sitter alone said `unexpected `A(``), and a
/// kernel without its `}` is named as such.
#[test]
fn kernel_syntax_errors_match_the_command_line() {
    let dir = Scratch::new("body_errors");
    let file = dir.file(
        "body.tensor",
        "tensor A : f64[3, 3] @ CSR\ntensor y : f64[3] @ dense\nkernel k { y(i) = sqrt(A(i,j)) }\nkernel open { y(i) = A(i,j)\nkernel c { y(i) = A(i,j) }\n",
    );
    let (code, _, err) = tensorc(&["check", &file]);
    assert_ne!(code, 0);
    let (_, _, cli) = tensorc(&["y(i) = sqrt(A(i,j))", "-d", "A:3,3"]);
    let why = "`sqrt(...)` holds `A(...)`";
    assert!(cli.contains(why), "{cli}");
    assert!(
        err.contains(&format!("body.tensor:3:19: error: syntax error: {why}")),
        "{err}"
    );
    assert!(
        err.contains("body.tensor:4:28: error: syntax error: missing `}`"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "one error each: {err}");
    tensor_compiler::selfcheck::language(&std::fs::read_to_string(&file).unwrap());
}
