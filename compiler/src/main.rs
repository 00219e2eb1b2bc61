//! `tensorc`: see `cli.rs`. Every failure is one `error:` line and a
//! non-zero exit, panics included.

use clap::Parser;
use std::process::ExitCode;
use tensor_compiler::cli::{Cli, Command};

/// Tensors' arrays on cache lines (see `line_aligned`).
#[global_allocator]
static ALLOCATOR: tensor_compiler::line_aligned::LineAligned =
    tensor_compiler::line_aligned::LineAligned;

fn main() -> ExitCode {
    tensor_compiler::heap_policy::keep_freed_memory();
    if std::env::var_os("TENSORC_DEBUG").is_none() {
        std::panic::set_hook(Box::new(|_| {}));
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                print!("{e}");
                return ExitCode::SUCCESS;
            }
            // clap's first paragraph on one line: a message ending in `:`
            // goes on with what it names ("...not provided: --time <N>").
            let text = e.to_string();
            let first: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let first = first.join(" ");
            let first = first.trim_start_matches("error: ");
            let first = if first.is_empty() {
                "bad arguments"
            } else {
                first
            };
            eprintln!("error: {first}");
            return ExitCode::from(2);
        }
    };
    // The JIT warms up while the files are read and lowered, for the
    // commands that use it.
    if cli.runs_kernels() {
        tensor_compiler::execute::warm_up();
    }
    // Expressions are at most MAX_EXPR_DEPTH deep, but the compiler's walks
    // over them are recursive: a roomy stack (reserved, not committed)
    // keeps the deepest legal expression well clear of overflow.
    let worker = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || dispatch(&cli));
    let result = match worker {
        Ok(handle) => handle.join(),
        Err(e) => Ok(Err(format!("cannot start the compiler thread: {e}"))),
    };
    match result {
        Ok(Ok(out)) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Ok(Err(msg)) => {
            match msg.strip_prefix('\u{0}') {
                Some(lines) => eprint!("{lines}"),
                None => eprintln!("error: {msg}"),
            }
            ExitCode::FAILURE
        }
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            eprintln!("error: internal compiler error: {what}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cli: &Cli) -> Result<String, String> {
    match &cli.command {
        Some(Command::Run { file, kernel, opts }) => {
            tensor_compiler::language::run_file(file, kernel.as_deref(), opts)
        }
        Some(Command::Check { files }) => {
            let (out, errors) = tensor_compiler::language::check_files(files);
            if errors > 0 {
                // Already `FILE:LINE:COL: error: ...` lines.
                Err(format!("\u{0}{out}"))
            } else {
                Ok(out)
            }
        }
        None => match &cli.expr {
            Some(expr) => tensor_compiler::cli::run_expression(expr, &cli.opts),
            None => Err(
                "no expression given (try: tensorc \"y(i) = A(i,j) * x(j)\" -f A:CSR -d A:100,100)"
                    .into(),
            ),
        },
    }
}
