//! `tensorc run FILE.tensor` and `tensorc check FILE...`.

use crate::cli::{Emit, Options};
use crate::ide::{Analysis, View};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn load(analysis: &mut Analysis, path: &Path) -> Result<crate::language::db::SourceFile, String> {
    let mut bytes = Vec::new();
    crate::io::open_regular(path)
        .and_then(|mut f| {
            std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| format!("cannot read: {e}"))
        })
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let (l, c) = line_col(&String::from_utf8_lossy(&bytes[..at]), at);
        format!(
            "{}:{l}:{c}: not UTF-8 text (byte 0x{:02X})",
            path.display(),
            bytes[at]
        )
    })?;
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(analysis.set_file(&abs, text))
}

/// Every problem as `FILE:LINE:COL: error: message`; the count of errors.
pub fn check_files(files: &[PathBuf]) -> (String, usize) {
    let mut analysis = Analysis::new();
    let mut out = String::new();
    let mut errors = 0;
    for path in files {
        let file = match load(&mut analysis, path) {
            Ok(f) => f,
            Err(e) => {
                let _ = writeln!(out, "error: {e}");
                errors += 1;
                continue;
            }
        };
        let text = analysis.text(file).to_string();
        for d in analysis.diagnostics(file) {
            let (l, c) = line_col(&text, d.span.start);
            let _ = writeln!(
                out,
                "{}:{l}:{c}: {}: {}",
                path.display(),
                if d.is_error { "error" } else { "warning" },
                d.message
            );
            errors += usize::from(d.is_error);
        }
    }
    (out, errors)
}

/// Problems anywhere in the file stop a run: the first one, as an error.
fn first_error(
    analysis: &Analysis,
    file: crate::language::db::SourceFile,
    path: &Path,
    text: &str,
) -> Result<(), String> {
    match analysis.diagnostics(file).into_iter().find(|d| d.is_error) {
        Some(d) => {
            let (l, c) = line_col(text, d.span.start);
            Err(format!("{}:{l}:{c}: {}", path.display(), d.message))
        }
        None => Ok(()),
    }
}

/// Compile and run one kernel of a file (the first when none is named).
pub fn run_file(path: &Path, kernel: Option<&str>, o: &Options) -> Result<String, String> {
    let mut analysis = Analysis::new();
    let file = load(&mut analysis, path)?;
    let text = analysis.text(file).to_string();
    let kernels = crate::language::db::kernel_names(&analysis.db, file).clone();
    let name = match kernel {
        Some(k) if kernels.iter().any(|n| n == k) => k.to_string(),
        Some(k) => {
            return Err(format!(
                "{}: no kernel `{k}` (kernels: {})",
                path.display(),
                kernels.join(", ")
            ))
        }
        None => match kernels.first() {
            Some(k) => k.clone(),
            // A file whose only kernel does not parse says why.
            None => {
                first_error(&analysis, file, path, &text)?;
                return Err(format!("{}: no kernel to run", path.display()));
            }
        },
    };
    first_error(&analysis, file, path, &text)?;
    if let Some(e) = o.emit {
        let view = match e {
            Emit::C => View::C,
            Emit::Ir => View::Ir,
            Emit::Lattice => View::Lattice,
            Emit::Graph => View::Graph,
            Emit::Asm => View::Asm,
        };
        let text = analysis.view(file, &name, view)?;
        if o.time.is_none() && !o.json {
            return Ok(text);
        }
    }
    let runs = o.time.unwrap_or(1);
    let threads = o.threads.map_or_else(
        crate::threads::Threads::all,
        crate::threads::Threads::exactly,
    );
    // A command-line run may wait for the C compiler (its build is cached
    // on disk for the next run); without one, Cranelift with a note.
    let resolved = crate::backend::resolve(o.backend)?;
    if let Some(n) = &resolved.note {
        eprintln!("note: {n}");
    }
    let tiers = crate::backend::TierPolicy {
        choice: o.backend,
        wait: true,
    };
    let run =
        analysis.time_kernel_on(file, &name, runs, threads, tiers, &AtomicBool::new(false))?;
    let mut out = String::new();
    if o.json {
        let st = &run.statements;
        let v = serde_json::json!({
            "kernel": name,
            "statements": st.iter().map(|s| s.statement.clone()).collect::<Vec<_>>(),
            "median_ms": run.median_ms(),
            "min_ms": st.iter().map(|s| s.timing.min().as_secs_f64() * 1e3).sum::<f64>(),
            "runs": runs,
            "compile_ms": st.iter().map(|s| s.timing.compile.as_secs_f64() * 1e3).sum::<f64>(),
            "gbytes_per_s": run.gbytes_per_s(),
            // As the expression form: the most threads a statement used.
            "threads": st.iter().map(|s| s.threads).max().unwrap_or(1),
            "backend": run.tiers(),
            "results": st.iter().map(|s| serde_json::json!({"name": s.result, "dims": s.dims, "nnz": s.nnz, "checksum": s.checksum})).collect::<Vec<_>>(),
        });
        let _ = writeln!(out, "{v}");
        return Ok(out);
    }
    let _ = writeln!(out, "kernel {name} ({})", path.display());
    for s in &run.statements {
        let _ = writeln!(out, "  {}", s.statement);
        let _ = writeln!(
            out,
            "    result {} {:?}: {} stored entries, sum of values {}",
            s.result, s.dims, s.nnz, s.checksum
        );
        let _ = writeln!(
            out,
            "    compile {:.3} ms ({}), median {:.3} ms, min {:.3} ms over {} run(s)",
            s.timing.compile.as_secs_f64() * 1e3,
            s.tier.name(),
            s.timing.median().as_secs_f64() * 1e3,
            s.timing.min().as_secs_f64() * 1e3,
            s.timing.runs.len()
        );
    }
    let _ = writeln!(
        out,
        "  total median {:.3} ms, {:.2} GB/s effective",
        run.median_ms(),
        run.gbytes_per_s()
    );
    if o.emit.is_none() {
        let _ = writeln!(out, "\n{}", analysis.view(file, &name, View::C)?);
    }
    Ok(out)
}
