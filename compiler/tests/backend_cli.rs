//! `--backend`, `--emit asm` and `--emit c` as a user drives them. Tests
//! that need a C compiler say they were skipped on a machine without one.

use std::process::Command;

fn cache() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("backend_cli_cache")
}

fn tensorc(args: &[&str], cc: Option<&str>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tensorc"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("TENSOR_CACHE_DIR", cache());
    if let Some(cc) = cc {
        cmd.env("CC", cc);
    }
    let out = cmd.output().expect("run tensorc");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn have_cc(test: &str) -> bool {
    match tensor_compiler::backend::cc::compiler() {
        Ok(_) => true,
        Err(e) => {
            println!("skipped {test}: {e}");
            false
        }
    }
}

const M: &str = "tests/fixtures/io/real/west0479.mtx";

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn each_backend_says_which_ran() {
    let a = format!("A:{M}");
    let (code, out, err) = tensorc(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:CSR",
            "-i",
            &a,
            "--time",
            "2",
            "--json",
            "--backend",
            "cranelift",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["backend"], "cranelift");
    for k in ["kernel", "median_ms", "min_ms", "runs", "compile_ms"] {
        assert!(v.get(k).is_some(), "missing {k} in {out}");
    }
    // The compiling thread's CPU time: some, and no more than the wall
    // time around it (one thread compiles).
    let (wall, cpu) = (v["compile_ms"].as_f64(), v["compile_cpu_ms"].as_f64());
    assert!(
        matches!((wall, cpu), (Some(w), Some(c)) if c > 0.0 && c <= w + 0.01),
        "{out}"
    );
    if !have_cc("each_backend_says_which_ran (cc part)") {
        return;
    }
    let (code, out, err) = tensorc(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:CSR",
            "-i",
            &a,
            "--time",
            "2",
            "--json",
            "--backend",
            "cc",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let cc = json(&out);
    assert_eq!(cc["backend"], "cc");
    // gcc is another process: no thread's CPU time to tell.
    assert!(cc["compile_cpu_ms"].is_null(), "{out}");
    assert_eq!(cc["result"], v["result"], "the tiers disagree");
    // auto times both tiers and reports each.
    let (code, out, err) = tensorc(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:CSR",
            "-i",
            &a,
            "--time",
            "2",
            "--json",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let auto = json(&out);
    assert_eq!(auto["backend"], "cc");
    assert_eq!(auto["tiers"]["cranelift"]["runs"], 2, "{out}");
    assert_eq!(auto["tiers"]["cc"]["runs"], 2, "{out}");
    assert_eq!(auto["result"], v["result"]);
    let (code, out, _) = tensorc(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:CSR",
            "-i",
            &a,
            "--time",
            "2",
        ],
        None,
    );
    assert_eq!(code, 0);
    assert!(
        out.contains("backend: cc") && out.contains("(cranelift)") && out.contains("(cc)"),
        "{out}"
    );
}

#[test]
fn without_a_compiler_auto_notes_and_cc_refuses() {
    let a = format!("A:{M}");
    let missing = "/nonexistent/bin/cc";
    let (code, out, err) = tensorc(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:CSR",
            "-i",
            &a,
            "--time",
            "1",
            "--json",
        ],
        Some(missing),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["backend"], "cranelift");
    // One note about the compiler (besides the one announcing generated x).
    let notes: Vec<&str> = err.lines().filter(|l| !l.contains("has no -i")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(
        notes[0].starts_with("note: ") && notes[0].contains("Cranelift"),
        "{err}"
    );
    let (code, _, err) = tensorc(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:CSR",
            "-i",
            &a,
            "--backend",
            "cc",
        ],
        Some(missing),
    );
    assert_ne!(code, 0);
    let lines: Vec<&str> = err.lines().filter(|l| !l.contains("has no -i")).collect();
    assert!(
        lines.len() == 1 && lines[0].starts_with("error: ") && lines[0].contains(missing),
        "{err}"
    );
}

/// A compiler whose assembler refuses the option that keeps jumps off
/// 32-byte boundaries (older binutils, other assemblers) still builds the
/// cc tier, without it.
#[cfg(target_arch = "x86_64")]
#[test]
fn an_assembler_without_the_branch_alignment_option_still_builds() {
    use std::os::unix::fs::PermissionsExt;
    if !have_cc("an_assembler_without_the_branch_alignment_option_still_builds") {
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("old_assembler");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory of its own");
    let wrapper = dir.join("cc");
    let log = dir.join("calls");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in -Wa,-mbranches*) echo refused >> {log}; \
             echo 'as: unrecognized option' >&2; exit 1;; esac; done\necho built >> {log}\nexec cc \"$@\"\n",
            log = log.display()
        ),
    )
    .expect("write the wrapper");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let a = format!("A:{M}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tensorc"));
    cmd.args([
        "y(i) = A(i,j) * x(j)",
        "-f",
        "A:CSR",
        "-i",
        &a,
        "--json",
        "--backend",
        "cc",
    ])
    .current_dir(env!("CARGO_MANIFEST_DIR"))
    .env("TENSOR_CACHE_DIR", dir.join("cache"))
    .env("CC", &wrapper);
    let out = cmd.output().expect("run tensorc");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(json(&stdout)["backend"], "cc");
    let calls = std::fs::read_to_string(&log).expect("the wrapper ran");
    assert!(
        calls.contains("refused") && calls.contains("built"),
        "{calls}"
    );
}

#[test]
fn emit_asm_prints_machine_code() {
    let (code, out, err) = tensorc(
        &[
            "y(i) = A(i,j) * x(j)",
            "-f",
            "A:DIA",
            "-d",
            "A:9,9",
            "--emit",
            "asm",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("block0:") && out.contains("ret"), "{out}");
    // The shares of DIA's diagonals are searched before each call.
    assert!(
        out.starts_with("; the thread-share search runs before each call"),
        "{out}"
    );
}

#[test]
fn emitted_c_compiles_as_printed() {
    if !have_cc("emitted_c_compiles_as_printed") {
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("backend_cli_emit");
    std::fs::create_dir_all(&dir).unwrap();
    for (n, args) in [
        vec![
            "A(i,j) = B(i,j) + C(i,j)",
            "-f",
            "A:CSR",
            "-f",
            "B:CSR",
            "-f",
            "C:CSR",
            "-d",
            "B:9,9",
            "-d",
            "C:9,9",
        ],
        vec!["y(i) = A(i,j) * x(j)", "-f", "A:DIA", "-d", "A:9,9"],
        vec![
            "A(i,j) = B(i,j) * C(i,j)",
            "-f",
            "A:COO",
            "-f",
            "B:hashed,hashed",
            "-f",
            "C:CSR",
            "-d",
            "B:9,9",
            "-d",
            "C:9,9",
        ],
    ]
    .iter()
    .enumerate()
    {
        let mut full = args.clone();
        full.extend(["--emit", "c"]);
        let (code, out, err) = tensorc(&full, None);
        assert_eq!(code, 0, "{err}");
        let src = dir.join(format!("k{n}.c"));
        std::fs::write(&src, &out).unwrap();
        let cc = &tensor_compiler::backend::cc::compiler().unwrap().command;
        let built = Command::new(&cc[0])
            .args(&cc[1..])
            .args(["-std=c99", "-O2", "-Wall", "-Werror", "-c", "-o"])
            .arg(dir.join(format!("k{n}.o")))
            .arg(&src)
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "{}\n{out}",
            String::from_utf8_lossy(&built.stderr)
        );
    }
}

#[test]
fn the_library_resolves_choices() {
    use tensor_compiler::backend::{resolve, Choice};
    use tensor_compiler::jit::Tier;
    assert_eq!(resolve(Choice::Cranelift).unwrap().tier, Tier::Cranelift);
    assert_eq!(Choice::parse("CC"), Some(Choice::Cc));
    assert_eq!(Choice::parse("fast"), None);
    let auto = resolve(Choice::Auto).unwrap();
    assert_eq!(
        auto.tier == Tier::Cc,
        tensor_compiler::backend::cc::compiler().is_ok()
    );
    assert_eq!(auto.note.is_some(), auto.tier == Tier::Cranelift);
}

/// `TENSOR_PERF_MAP=1`: the Cranelift tier names each kernel it compiles in
/// `/tmp/perf-<pid>.map` (`jit::perf_map`), one line of hexadecimal
/// address, hexadecimal length and name, for `perf report`; without the
/// variable no line is written.
#[test]
fn a_profiler_map_names_the_kernels_when_asked() {
    let a = format!("A:{M}");
    let args = ["y(i) = A(i,j) * x(j)", "-f", "A:CSR", "-i", a.as_str()];
    for asked in [true, false] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tensorc"));
        cmd.args(args)
            .args(["--time", "2", "--backend", "cranelift"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if asked {
            cmd.env("TENSOR_PERF_MAP", "1");
        } else {
            cmd.env_remove("TENSOR_PERF_MAP");
        }
        let child = cmd
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let map = std::path::PathBuf::from(format!("/tmp/perf-{}.map", child.id()));
        let status = child.wait_with_output().unwrap().status;
        assert!(status.success());
        let text = std::fs::read_to_string(&map).unwrap_or_default();
        std::fs::remove_file(&map).ok();
        let ours: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("tensor_kernel_"))
            .collect();
        assert_eq!(ours.len(), usize::from(asked), "{text}");
        for line in ours {
            let fields: Vec<&str> = line.split(' ').collect();
            assert_eq!(fields.len(), 3, "{line}");
            let address = u64::from_str_radix(fields[0], 16).unwrap();
            let len = u64::from_str_radix(fields[1], 16).unwrap();
            assert!(address > 0 && len > 16, "{line}");
        }
    }
}
