//! `tensor-lsp --timing-worker`: the child process that times a kernel.
//!
//! The server re-executes itself with this flag for every timing run, so
//! that a run holds no lock of the server's, stops at once when killed, and
//! cannot take the server down if the kernel crashes. The request is one
//! line of JSON on stdin; the answer one line of JSON on stdout, either
//! `{"ok": {...figures...}}` or `{"error": "..."}`. The server keeps stdin
//! open while it waits: when it closes (the server ended or gave up), the
//! worker ends too.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use tensor_compiler::backend::{Choice, TierPolicy};
use tensor_compiler::ide::Analysis;
use tensor_compiler::threads::Threads;

pub const FLAG: &str = "--timing-worker";

#[derive(Clone, Serialize, Deserialize)]
pub struct Request {
    /// The document's path: data paths are relative to its directory.
    pub path: PathBuf,
    /// The document's text when the run was asked for.
    pub text: String,
    pub kernel: String,
    pub runs: usize,
    /// At most this many threads per kernel (absent: every core, for
    /// kernels big enough to gain).
    #[serde(default)]
    pub threads: Option<usize>,
    /// The `backend` setting: `auto` (absent), `cranelift` or `cc`.
    #[serde(default)]
    pub backend: Option<String>,
    /// Build the kernel's cc tier into the on-disk cache instead of timing
    /// it (what a later `auto` run then uses).
    #[serde(default)]
    pub build_cc: bool,
}

/// Run one request from stdin; the exit code is 0 whenever an answer was
/// written (the error is in the answer).
pub fn main() -> i32 {
    tensor_compiler::execute::warm_up();
    let mut input = String::new();
    let read = std::io::stdin().lock().read_line(&mut input);
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(2);
    });
    let answer = match read
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_str::<Request>(&input).map_err(|e| e.to_string()))
    {
        Ok(req) => match run(&req) {
            Ok(v) => json!({ "ok": v }),
            Err(e) => json!({ "error": e }),
        },
        Err(e) => json!({ "error": format!("bad timing request: {e}") }),
    };
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{answer}").and_then(|_| out.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

fn run(req: &Request) -> Result<Value, String> {
    let mut analysis = Analysis::new();
    let file = analysis.set_file(&req.path, req.text.clone());
    if req.build_cc {
        let built = analysis.build_cc_tier(file, &req.kernel, &AtomicBool::new(false))?;
        return Ok(json!({ "kernel": req.kernel, "built": built }));
    }
    let threads = req.threads.map_or_else(Threads::all, Threads::up_to);
    let choice = match req.backend.as_deref() {
        None => Choice::Auto,
        Some(s) => Choice::parse(s)
            .ok_or_else(|| format!("unknown backend `{s}` (expected auto, cranelift or cc)"))?,
    };
    // `auto` never waits for the C compiler here: the server builds the cc
    // tier in the background when the answer says it is worth it.
    let tiers = TierPolicy {
        choice,
        wait: false,
    };
    let run = analysis.time_kernel_on(
        file,
        &req.kernel,
        req.runs,
        threads,
        tiers,
        &AtomicBool::new(false),
    )?;
    Ok(json!({
        "kernel": run.kernel,
        "median_ms": run.median_ms(),
        "gbytes_per_s": run.gbytes_per_s(),
        "runs": req.runs,
        "threads": run.statements.iter().map(|s| s.threads).max().unwrap_or(1),
        "backend": run.tiers(),
        "cc_worth_building": run.cc_worth_building,
        "statements": run.statements.iter().map(|s| json!({"statement": s.statement, "nnz": s.nnz, "median_ms": s.timing.median().as_secs_f64() * 1e3})).collect::<Vec<_>>(),
    }))
}
