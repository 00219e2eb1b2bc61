//! Two builds of one kernel in one process: the cc tier's own C and an
//! edited copy of it, timed in alternation on the same operands, to
//! measure a change to the emitted C before making it in the passes.
//!
//! Why in one process: this host's speed drifts by tens of percent over
//! seconds to minutes (neighbours on the shared caches and memory), so
//! processes run minutes apart, or even one after the other, compare the
//! drift as much as the kernels; rounds alternated within one process see
//! the same drift, and the order within a round flips every round.
//!
//! ```text
//! tensorc "y(i) = A(i,j) * x(j)" -f A:CSR -i A:m.mtx --emit c > edited.c
//! (edit edited.c)
//! cargo run --release -p tensor-compiler --example ab_kernels -- \
//!     edited.c 20 20 -- "y(i) = A(i,j) * x(j)" -f A:CSR -i A:m.mtx
//! ```
//!
//! Arguments: the edited C, then optionally ROUNDS (20) and RUNS a round
//! (20), then `--` and the tensorc arguments that name the kernel and its
//! operands (`--threads` and `--fresh-result` are honoured). Prints each
//! build's median of round medians and least run, how many rounds the
//! edited copy won, and the ratio edited / own. In place of the edited C,
//! `cranelift` times the Cranelift tier's build against the cc tier's:
//! the ratio of the tiers, both measured in the same drift.

use clap::Parser;
use tensor_compiler::backend::cc;
use tensor_compiler::cli::{setup, Cli};
use tensor_compiler::execute::ResultArrays;
use tensor_compiler::notation::parse_assignment;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: ab_kernels EDITED.c [ROUNDS [RUNS]] -- TENSORC-ARGS";
    let split = args.iter().position(|a| a == "--").ok_or(usage)?;
    let (own_args, tensorc_args) = (&args[..split], &args[split + 1..]);
    let number = |k: usize, default: usize| -> Result<usize, String> {
        own_args.get(k).map_or(Ok(default), |s| {
            s.parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(format!("{s}: not a positive count; {usage}"))
        })
    };
    let variant = own_args.first().ok_or(usage)?;
    let (rounds, runs) = (number(1, 20)?, number(2, 20)?);
    let text = match variant.as_str() {
        "cranelift" => None,
        _ => Some(std::fs::read_to_string(variant).map_err(|e| format!("{variant}: {e}"))?),
    };
    let cli = Cli::try_parse_from(
        std::iter::once("tensorc".to_string()).chain(tensorc_args.iter().cloned()),
    )
    .map_err(|e| e.to_string())?;
    let expr = cli
        .expr
        .ok_or("no expression among the tensorc arguments")?;
    let a = parse_assignment(&expr).map_err(|e| format!("in expression: {e}"))?;
    let s = setup(&a, &cli.opts, std::path::Path::new("."))?;
    let mut p = s.prepare("kernel")?;
    p.threads = tensor_compiler::threads::Threads::exactly(cli.opts.threads.unwrap_or(1));
    let arrays = match cli.opts.fresh_result {
        true => ResultArrays::Fresh,
        false => ResultArrays::Reused,
    };
    // The build timed sits in `p.compiled`, swapped in and out.
    let mut builds = [
        cc::compile(&p.kernel.function)?,
        match &text {
            Some(text) => cc::compile_variant(&p.kernel.function, text)?,
            None => tensor_compiler::jit::compile(&p.kernel.function)?,
        },
    ];
    let mut timed = |p: &mut tensor_compiler::execute::Prepared, k: usize| {
        std::mem::swap(&mut p.compiled, &mut builds[k]);
        let t = p.time(runs, arrays).map_err(|e| e.to_string());
        let result = p.result().map_err(|e| e.to_string());
        std::mem::swap(&mut p.compiled, &mut builds[k]);
        Ok::<_, String>((t?, result?))
    };
    let (_, own_result) = timed(&mut p, 0)?;
    let (_, edited_result) = timed(&mut p, 1)?;
    if own_result.vals != edited_result.vals || own_result.coords != edited_result.coords {
        eprintln!("note: the edited copy's result differs from the kernel's");
    }
    let mut medians = [Vec::new(), Vec::new()];
    let mut least = [f64::INFINITY; 2];
    let mut wins = 0;
    for r in 0..rounds {
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let (t, _) = timed(&mut p, k)?;
            medians[k].push(t.median().as_secs_f64() * 1e3);
            least[k] = least[k].min(t.min().as_secs_f64() * 1e3);
        }
        wins += usize::from(medians[1][r] < medians[0][r]);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (own, edited) = (median(&mut medians[0]), median(&mut medians[1]));
    println!(
        "own: median {own:.4} ms, least {:.4} | edited: median {edited:.4} ms, least {:.4} | edited faster in {wins} of {rounds} rounds | edited / own {:.3}",
        least[0],
        least[1],
        edited / own
    );
    Ok(())
}
