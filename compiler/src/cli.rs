//! The `tensorc` command line (the contract in DESIGN.md): an expression,
//! formats, inputs, outputs, emission, timing. Every failure is returned as
//! one message the binary prints after `error: `.

use crate::coo::CooTensor;
use crate::execute::{prepare, Prepared, Timing};
use crate::format::{parse_format, Registry, TensorFormat};
use crate::lower;
use crate::notation::{parse_assignment, Assignment};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "tensorc",
    version,
    about = "Sparse tensor algebra compiler: compiles index notation over any combination of formats, prints the C, runs it with a JIT."
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Index notation, e.g. "y(i) = A(i,j) * x(j)".
    pub expr: Option<String>,
    #[command(flatten)]
    pub opts: Options,
}

impl Cli {
    /// Whether the command compiles a kernel with the JIT (every command
    /// but `check` and an expression that only prints or writes code).
    pub fn runs_kernels(&self) -> bool {
        match &self.command {
            Some(Command::Check { .. }) => false,
            Some(Command::Run { opts, .. }) => !prints_only(opts),
            None => !prints_only(&self.opts),
        }
    }
}

/// Whether the options ask only for code (`--emit`, `--write-source`),
/// with nothing to run, time or write.
fn prints_only(o: &Options) -> bool {
    (o.emit.is_some() || o.write_source.is_some())
        && o.time.is_none()
        && o.output.is_empty()
        && !o.json
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Compile and run a kernel of a .tensor file.
    Run {
        file: PathBuf,
        #[arg(long)]
        kernel: Option<String>,
        #[command(flatten)]
        opts: Options,
    },
    /// Report every problem in .tensor files as FILE:LINE:COL: error: ...
    Check { files: Vec<PathBuf> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    C,
    Ir,
    Lattice,
    Graph,
    /// Cranelift's machine code for the kernel.
    Asm,
}

#[derive(Args, Debug, Clone, Default)]
pub struct Options {
    /// NAME:FORMAT[:ORDER], a preset (CSR, COO, DIA, BCSR(4), ...) or a level list.
    #[arg(short = 'f', value_name = "NAME:FORMAT[:ORDER]")]
    pub format: Vec<String>,
    /// NAME:PATH, read a .mtx or .tns file.
    #[arg(short = 'i', value_name = "NAME:PATH")]
    pub input: Vec<String>,
    /// NAME:PATH, write the result as .mtx or .tns.
    #[arg(short = 'o', value_name = "NAME:PATH")]
    pub output: Vec<String>,
    /// NAME:D1,D2,..., dimensions of a tensor no file gives.
    #[arg(short = 'd', value_name = "NAME:DIMS")]
    pub dims: Vec<String>,
    /// Print the generated code or analysis instead of only running.
    #[arg(long, value_enum)]
    pub emit: Option<Emit>,
    /// Time N runs after a warm-up (1 to 1000000).
    #[arg(long, value_name = "N", value_parser = parse_runs)]
    pub time: Option<usize>,
    /// Print one JSON object with the timing and result summary.
    #[arg(long)]
    pub json: bool,
    /// Seed for operands generated without a file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Density of sparse operands generated without a file (0 to 1).
    #[arg(long, default_value_t = 0.1, value_parser = parse_density)]
    pub density: f64,
    /// Which backend runs the kernel: cranelift, cc (the system C compiler
    /// at -O3, cached) or auto (cc when there is one; --time builds it in
    /// the background and times both tiers).
    #[arg(long, value_enum, default_value_t = crate::backend::Choice::Auto)]
    pub backend: crate::backend::Choice,
    /// Run the outermost loop on up to N threads where that is race-free
    /// (1 to 1024; default: every core, for kernels big enough to gain).
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<usize>,
    /// Write the kernel as a C header and source pair (NAME.h, NAME.c) into DIR.
    #[arg(long, value_name = "DIR")]
    pub write_source: Option<PathBuf>,
    /// With --time: start each timed run from an empty result, so that
    /// allocating and growing its arrays is inside the timer (by default
    /// a run writes into the arrays the run before left).
    #[arg(long, requires = "time")]
    pub fresh_result: bool,
}

/// The most timed runs `--time` accepts: the samples are kept in memory.
pub const MAX_RUNS: usize = 1_000_000;

fn parse_runs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_RUNS).contains(&n) => Ok(n),
        _ => Err(format!("expected a number of runs from 1 to {MAX_RUNS}")),
    }
}

fn parse_threads(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=crate::threads::MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a number of threads from 1 to {}",
            crate::threads::MAX_THREADS
        )),
    }
}

fn parse_density(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        // NaN fails the range test too.
        Ok(d) if (0.0..=1.0).contains(&d) => Ok(d),
        _ => Err("expected a density from 0 to 1".to_string()),
    }
}

/// Dimensions are 32-bit coordinates in every level's arrays.
pub const MAX_DIM: usize = i32::MAX as usize;

fn split_pair<'a>(arg: &'a str, flag: &str) -> Result<(&'a str, &'a str), String> {
    arg.split_once(':')
        .filter(|(n, v)| !n.is_empty() && !v.is_empty())
        .ok_or_else(|| format!("-{flag} {arg}: expected NAME:VALUE"))
}

/// Everything a kernel run needs, resolved from the options.
pub struct Setup {
    pub assignment: Assignment,
    pub formats: BTreeMap<String, TensorFormat>,
    pub data: BTreeMap<String, CooTensor>,
    pub out_dims: Vec<usize>,
    pub initial: Option<CooTensor>,
    /// Operands generated because no `-i` gave them, as the user should
    /// hear about them: (name, format, dimensions, density).
    pub generated: Vec<Generated>,
}

impl Setup {
    /// The kernel `name` of this setup, its operands packed.
    pub fn prepare(&self, name: &str) -> Result<Prepared, String> {
        prepare(
            name,
            &self.assignment,
            &self.formats,
            &self.data,
            &self.out_dims,
            self.initial.as_ref(),
        )
        .map_err(|e| e.to_string())
    }
}

/// An operand made up by `setup` (no `-i` named a file for it).
#[derive(Clone, Debug, PartialEq)]
pub struct Generated {
    pub name: String,
    pub format: String,
    pub dims: Vec<usize>,
    pub density: f64,
    pub seed: u64,
}

impl std::fmt::Display for Generated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} has no -i: generated {} {:?}",
            self.name, self.format, self.dims
        )?;
        if self.density < 1.0 {
            write!(f, " at density {}", self.density)?;
        }
        write!(f, ", seed {}", self.seed)
    }
}

/// The same NAME given twice to one flag is a mistake, not an override.
fn once<'a>(
    seen: &mut BTreeMap<&'a str, &'a str>,
    name: &'a str,
    arg: &'a str,
    flag: &str,
) -> Result<(), String> {
    match seen.insert(name, arg) {
        Some(prev) => Err(format!(
            "-{flag} {arg}: `{name}` is already given by -{flag} {prev}"
        )),
        None => Ok(()),
    }
}

/// Resolve formats, data and dimensions for `a` from the options.
pub fn setup(a: &Assignment, o: &Options, base: &std::path::Path) -> Result<Setup, String> {
    let registry = Registry::builtin();
    let mut orders: BTreeMap<String, usize> = BTreeMap::new();
    for acc in std::iter::once(&a.lhs).chain(a.rhs.accesses()) {
        if let Some(prev) = orders.insert(acc.tensor.clone(), acc.indices.len()) {
            if prev != acc.indices.len() {
                return Err(format!(
                    "{} is used with {prev} and with {} indices",
                    acc.tensor,
                    acc.indices.len()
                ));
            }
        }
    }
    let mut formats = BTreeMap::new();
    let mut seen = BTreeMap::new();
    for f in &o.format {
        let (name, spec) = split_pair(f, "f")?;
        once(&mut seen, name, f, "f")?;
        let order = *orders
            .get(name)
            .ok_or_else(|| format!("-f {f}: no tensor `{name}` in the expression"))?;
        let fmt = parse_format(spec, order, &registry).map_err(|e| format!("-f {f}: {e}"))?;
        formats.insert(name.to_string(), fmt);
    }
    for (name, &order) in &orders {
        if !formats.contains_key(name) {
            let fmt = parse_format("dense", order, &registry).map_err(|e| e.to_string())?;
            formats.insert(name.clone(), fmt);
        }
    }
    let mut given_dims: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut seen = BTreeMap::new();
    for d in &o.dims {
        let (name, list) = split_pair(d, "d")?;
        once(&mut seen, name, d, "d")?;
        let order = *orders
            .get(name)
            .ok_or_else(|| format!("-d {d}: no tensor `{name}` in the expression"))?;
        let dims: Vec<usize> = list
            .split(',')
            .map(|x| x.trim().parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("-d {d}: dimensions must be non-negative integers"))?;
        if dims.len() != order {
            return Err(format!(
                "-d {d}: {name} has order {order} but {} dimensions were given",
                dims.len()
            ));
        }
        if let Some(big) = dims.iter().find(|&&n| n > MAX_DIM) {
            return Err(format!(
                "-d {d}: dimension {big} is above {MAX_DIM} (32-bit coordinates)"
            ));
        }
        given_dims.insert(name.to_string(), dims);
    }
    let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut seen = BTreeMap::new();
    for i in &o.input {
        let (name, path) = split_pair(i, "i")?;
        once(&mut seen, name, i, "i")?;
        if !orders.contains_key(name) {
            return Err(format!("-i {i}: no tensor `{name}` in the expression"));
        }
        let p = PathBuf::from(path);
        files.insert(
            name.to_string(),
            if p.is_absolute() { p } else { base.join(p) },
        );
    }
    // A large input leaves the JIT time to warm up while it is read.
    let bytes = files
        .values()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    crate::execute::warm_up_while_reading(bytes);
    // Read files; .tns files carry no dimensions, so fix those after.
    let mut data: BTreeMap<String, CooTensor> = BTreeMap::new();
    for (name, path) in &files {
        let t = crate::io::read_tns_with_dims(path, given_dims.get(name).map(|d| d.as_slice()))
            .map_err(|e| e.to_string())?;
        if t.order() != orders[name] {
            return Err(format!(
                "{}: {name} is used with {} indices but the file holds an order-{} tensor",
                path.display(),
                orders[name],
                t.order()
            ));
        }
        data.insert(name.clone(), t);
    }
    // Index extents from every tensor whose dimensions are known.
    let mut extents: BTreeMap<String, usize> = BTreeMap::new();
    for acc in std::iter::once(&a.lhs).chain(a.rhs.accesses()) {
        let dims = given_dims
            .get(&acc.tensor)
            .or_else(|| data.get(&acc.tensor).map(|t| &t.dims));
        if let Some(dims) = dims {
            for (i, &n) in acc.indices.iter().zip(dims) {
                let e = extents.entry(i.name.clone()).or_insert(n);
                *e = (*e).max(n);
            }
        }
    }
    let dims_of = |acc: &crate::notation::Access| -> Result<Vec<usize>, String> {
        if let Some(d) = given_dims.get(&acc.tensor) {
            return Ok(d.clone());
        }
        acc.indices
            .iter()
            .map(|i| {
                extents.get(&i.name).copied().ok_or_else(|| {
                    format!(
                        "cannot tell the extent of index `{}` of {}: give -d {}:...",
                        i.name, acc.tensor, acc.tensor
                    )
                })
            })
            .collect()
    };
    let mut rng = crate::coo::SplitMix(o.seed);
    let mut generated = Vec::new();
    let mut done: Vec<&str> = Vec::new();
    for acc in a.rhs.accesses() {
        if done.contains(&acc.tensor.as_str()) {
            continue;
        }
        done.push(&acc.tensor);
        let dims = dims_of(acc)?;
        let from_tns = files
            .get(&acc.tensor)
            .is_some_and(|f| f.extension().is_some_and(|e| e == "tns"));
        match data.get_mut(&acc.tensor) {
            Some(t) => {
                if !from_tns && t.dims != dims {
                    return Err(format!(
                        "shape mismatch: {} is {:?} in its file but its indices need {:?}",
                        acc.tensor, t.dims, dims
                    ));
                }
                // A .tns file's largest coordinate is only a lower bound.
                for (d, n) in t.dims.iter_mut().zip(&dims) {
                    *d = (*d).max(*n);
                }
            }
            None => {
                let dense = formats[&acc.tensor].is_all_dense();
                let density = if dense { 1.0 } else { o.density };
                generated.push(Generated {
                    name: acc.tensor.clone(),
                    format: formats[&acc.tensor].display_name(),
                    dims: dims.clone(),
                    density,
                    seed: o.seed,
                });
                let t = crate::execute::random_operand(&acc.tensor, &dims, density, &mut rng)
                    .map_err(|e| e.to_string())?;
                data.insert(acc.tensor.clone(), t);
            }
        }
    }
    let out_dims = dims_of(&a.lhs)?;
    let initial = if a.accumulate {
        data.get(&a.lhs.tensor)
            .cloned()
            .or_else(|| Some(CooTensor::new(out_dims.clone())))
    } else {
        None
    };
    Ok(Setup {
        assignment: a.clone(),
        formats,
        data,
        out_dims,
        initial,
        generated,
    })
}

/// What `--emit` prints for a compiled kernel.
pub fn emit_text(k: &lower::Kernel, what: Emit) -> String {
    // Operands read from converted copies: the kernel's arrays are the
    // copies', which the caller converts first.
    let converts: Vec<String> = k
        .conversions
        .iter()
        .map(|c| format!("{} is {} stored as {}", c.copy, c.source, c.format_text))
        .collect();
    let note = |open: &str, close: &str| {
        if converts.is_empty() {
            String::new()
        } else {
            format!(
                "{open}converted before the kernel: {}{close}\n",
                converts.join("; ")
            )
        }
    };
    match what {
        Emit::C => format!(
            "{}{}",
            note("/* ", " */"),
            crate::ir::c::function(&k.function)
        ),
        Emit::Ir => format!("{}{}", note("// ", ""), k.function),
        Emit::Graph => format!(
            "{}{}",
            note("", ""),
            k.nests
                .iter()
                .map(|n| n.graph.display(&n.problem.vars).to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
        Emit::Lattice => {
            let row = k
                .workspace()
                .map_or(String::new(), |(_, row)| format!("{row}\n"));
            format!(
                "{}{row}{}",
                note("", ""),
                k.plans()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join("")
            )
        }
        Emit::Asm => crate::jit::disassemble(&k.function)
            .unwrap_or_else(|e| format!("; no machine code: {e}\n")),
    }
}

/// Write `NAME.h` and `NAME.c` into `dir`; returns the paths written.
pub fn write_source(k: &lower::Kernel, dir: &std::path::Path) -> Result<Vec<PathBuf>, String> {
    let name = crate::ir::c::symbol(&k.function);
    std::fs::create_dir_all(dir).map_err(|e| format!("--write-source {}: {e}", dir.display()))?;
    let (h, c) = (dir.join(format!("{name}.h")), dir.join(format!("{name}.c")));
    std::fs::write(&h, crate::ir::c::header(&k.function))
        .map_err(|e| format!("{}: {e}", h.display()))?;
    std::fs::write(&c, crate::ir::c::source(&k.function, &format!("{name}.h")))
        .map_err(|e| format!("{}: {e}", c.display()))?;
    Ok(vec![h, c])
}

/// The expression around byte `offset` for an error line: all of it when
/// short, else 40 characters either side, cut with `…`.
fn excerpt(expr: &str, offset: usize) -> String {
    const SIDE: usize = 40;
    let at = expr.get(..offset).map_or(0, |s| s.chars().count());
    let n = expr.chars().count();
    let (lo, hi) = (at.saturating_sub(SIDE), (at + SIDE).min(n));
    let mid: String = expr.chars().skip(lo).take(hi - lo).collect();
    let before = if lo > 0 { "…" } else { "" };
    let after = if hi < n { "…" } else { "" };
    format!("{before}{mid}{after}")
}

/// Run the expression form; returns what to print on stdout.
pub fn run_expression(expr: &str, o: &Options) -> Result<String, String> {
    let a = parse_assignment(expr)
        .map_err(|e| format!("in expression: {e}: {}", excerpt(expr, e.offset)))?;
    let s = setup(&a, o, std::path::Path::new("."))?;
    // A mistyped name must not pass silently as random data.
    for g in &s.generated {
        eprintln!("note: {g}");
    }
    run_setup("kernel", &s, o)
}

/// Timings of one tier.
struct TierTiming {
    tier: crate::jit::Tier,
    timing: Timing,
}

/// Compile, optionally run and time; format the report.
pub fn run_setup(name: &str, s: &Setup, o: &Options) -> Result<String, String> {
    use crate::backend::{self, Choice};
    let mut prepared = s.prepare(name)?;
    for c in &prepared.kernel.conversions {
        eprintln!("note: {}", c.describe());
    }
    if let (true, [c]) = (
        prepared.kernel.result_is_copy,
        prepared.kernel.conversions.as_slice(),
    ) {
        eprintln!("note: the conversion writes `{}` itself (it holds {} in the result's levels), so runs skip the kernel's level-by-level copy; the emitted C still makes it", s.assignment.lhs.tensor, c.source);
    }
    for t in &prepared.kernel.temporaries {
        eprintln!("note: `{}` sits inside an addition inside a product, so it is computed first into a dense temporary: {t}", t.rhs);
    }
    if let Some((_, row)) = prepared.kernel.workspace() {
        eprintln!("note: {row}");
    }
    if prepared.kernel.buffer.is_some() {
        let out = &s.assignment.lhs.tensor;
        let format = s
            .formats
            .get(out)
            .map(|f| f.display_name())
            .unwrap_or_default();
        eprintln!("note: `{out}` is assembled through a coordinate buffer: the loops cannot write {format} in the order they produce entries, so the kernel appends them in any order and they are packed into {format} after each run (inside the timer; --time says how long packing takes)");
    }
    // An explicit count is used wherever the loop can be shared, however
    // small the kernel; the default leaves small kernels on one thread.
    prepared.threads = o.threads.map_or_else(
        crate::threads::Threads::all,
        crate::threads::Threads::exactly,
    );
    let mut out = String::new();
    let mut written = Vec::new();
    if let Some(dir) = &o.write_source {
        written = write_source(&prepared.kernel, dir)?;
    }
    if let Some(what) = o.emit {
        out.push_str(&emit_text(&prepared.kernel, what));
    }
    if prints_only(o) {
        for p in written {
            let _ = writeln!(out, "wrote {}", p.display());
        }
        return Ok(out);
    }
    let resolved = backend::resolve(o.backend)?;
    if let Some(n) = &resolved.note {
        eprintln!("note: {n}");
    }
    let function = prepared.kernel.function.clone();
    let arrays = if o.fresh_result {
        crate::execute::ResultArrays::Fresh
    } else {
        crate::execute::ResultArrays::Reused
    };
    let mut timings: Vec<TierTiming> = Vec::new();
    match (resolved.tier, o.backend, o.time) {
        (crate::jit::Tier::Cc, Choice::Auto, Some(n)) => {
            // Cranelift serves while the C compiler works; then the cc tier
            // is timed on the same inputs from the same starting result.
            let build = backend::cc::Background::start(&function);
            let before = prepared.output.clone();
            timings.push(TierTiming {
                tier: crate::jit::Tier::Cranelift,
                timing: prepared.time(n.max(1), arrays).map_err(|e| e.to_string())?,
            });
            match build.wait() {
                Ok(k) => {
                    prepared.compiled = k;
                    prepared.output = before;
                    timings.push(TierTiming {
                        tier: crate::jit::Tier::Cc,
                        timing: prepared.time(n.max(1), arrays).map_err(|e| e.to_string())?,
                    });
                }
                Err(e) => eprintln!("note: {e}: timed the Cranelift tier only"),
            }
        }
        (tier, choice, time) => {
            if tier == crate::jit::Tier::Cc {
                // Without timing, `auto` uses a cached build and never waits.
                let cached = choice == Choice::Cc || backend::cc::is_cached(&function);
                if cached {
                    prepared.compiled = backend::cc::compile(&function)?;
                }
            }
            let timing = match time {
                Some(n) => prepared.time(n.max(1), arrays).map_err(|e| e.to_string())?,
                None => {
                    let t0 = std::time::Instant::now();
                    let phases = prepared.run().map_err(|e| e.to_string())?;
                    Timing {
                        compile: prepared.compiled.compile_time,
                        compile_cpu: prepared.compiled.compile_cpu,
                        runs: vec![t0.elapsed()],
                        phases: vec![phases],
                    }
                }
            };
            timings.push(TierTiming {
                tier: prepared.compiled.tier,
                timing,
            });
        }
    }
    // The figures reported first are those of the tier that served last.
    let served = timings.last().ok_or("no run")?;
    let timing = served.timing.clone();
    // The summary needs only the values, read without coordinates (a
    // result of many rows and few entries would list every row); a
    // coordinate list is built for -o.
    let (stored, checksum, coordinate_list) = if o.output.is_empty() {
        let vals = prepared.result_values().map_err(|e| e.to_string())?;
        (vals.len(), vals.iter().sum::<f64>(), None)
    } else {
        let entries = prepared.result_entries().map_err(|e| e.to_string())?;
        let list = entries
            .to_coo()
            .map_err(|reason| format!("tensor {}: {reason}", s.assignment.lhs.tensor))?;
        (entries.len(), entries.vals.iter().sum::<f64>(), Some(list))
    };
    for w in &o.output {
        let (tname, path) = split_pair(w, "o")?;
        if tname != s.assignment.lhs.tensor {
            return Err(format!(
                "-o {w}: `{tname}` is not the result (the result is {})",
                s.assignment.lhs.tensor
            ));
        }
        if let Some(result) = &coordinate_list {
            crate::io::write_tensor(std::path::Path::new(path), result)
                .map_err(|e| e.to_string())?;
        }
    }
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let threads_used = prepared.threads_used().map_err(|e| e.to_string())?;
    if o.json {
        let v = serde_json::json!({
            "kernel": s.assignment.to_string(),
            "formats": s.formats.iter().map(|(k, f)| (k.clone(), f.display_name())).collect::<BTreeMap<_, _>>(),
            "median_ms": ms(timing.median()),
            "min_ms": ms(timing.min()),
            "runs": timing.runs.len(),
            "compile_ms": ms(timing.compile),
            "compile_cpu_ms": timing.compile_cpu.map(ms),
            "backend": served.tier.name(),
            "threads": threads_used,
            "shared_loop": prepared.compiled.parallel.map(crate::ir::Parallel::name),
            "convert_ms": ms(timing.median_convert()),
            "pack_ms": ms(timing.median_pack()),
            "tiers": timings.iter().map(|t| (t.tier.name().to_string(), serde_json::json!({
                "median_ms": ms(t.timing.median()), "min_ms": ms(t.timing.min()), "runs": t.timing.runs.len(), "compile_ms": ms(t.timing.compile),
                "compile_cpu_ms": t.timing.compile_cpu.map(ms),
                "convert_ms": ms(t.timing.median_convert()), "pack_ms": ms(t.timing.median_pack()),
            }))).collect::<serde_json::Map<_, _>>(),
            "result": { "name": s.assignment.lhs.tensor, "dims": s.out_dims, "nnz": stored, "checksum": checksum },
        });
        out.push_str(&v.to_string());
        out.push('\n');
        return Ok(out);
    }
    let _ = writeln!(out, "kernel:  {}", s.assignment);
    for (n, f) in &s.formats {
        let dims = if *n == s.assignment.lhs.tensor {
            s.out_dims.clone()
        } else {
            s.data.get(n).map(|t| t.dims.clone()).unwrap_or_default()
        };
        let _ = writeln!(out, "  {n}: {} {:?}", f.display_name(), dims);
    }
    let _ = writeln!(
        out,
        "result:  {} {:?}, {} stored entries, sum of values {}",
        s.assignment.lhs.tensor, s.out_dims, stored, checksum
    );
    let _ = writeln!(out, "backend: {}", served.tier.name());
    let _ = writeln!(
        out,
        "threads: {threads_used}{}",
        prepared
            .compiled
            .parallel
            .map_or(String::new(), |m| format!(
                " (outermost loop shared: {})",
                m.name()
            ))
    );
    for t in timings.iter().rev() {
        let label = if timings.len() > 1 {
            format!(" ({})", t.tier.name())
        } else {
            String::new()
        };
        let _ = writeln!(out, "compile: {:.3} ms{label}", ms(t.timing.compile));
        let _ = writeln!(
            out,
            "time:    median {:.3} ms, min {:.3} ms over {} run(s){label}",
            ms(t.timing.median()),
            ms(t.timing.min()),
            t.timing.runs.len()
        );
        let mut around = Vec::new();
        if !prepared.kernel.conversions.is_empty() {
            around.push(format!(
                "converting operands {:.3} ms",
                ms(t.timing.median_convert())
            ));
        }
        if prepared.kernel.buffer.is_some() {
            around.push(format!(
                "packing the result {:.3} ms",
                ms(t.timing.median_pack())
            ));
        }
        if !around.is_empty() {
            let _ = writeln!(
                out,
                "         of which {} (medians){label}",
                around.join(", ")
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::excerpt;

    /// A short expression is shown whole; a long one (10,000 parentheses)
    /// only around the problem, so the error stays one readable line.
    #[test]
    fn error_lines_show_the_expression_around_the_problem() {
        assert_eq!(excerpt("y(i) = x(j", 10), "y(i) = x(j");
        let long = format!("y(i) = {}x(i){}", "(".repeat(10_000), ")".repeat(10_000));
        let shown = excerpt(&long, 207);
        assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
        assert_eq!(shown.chars().count(), 82);
        assert_eq!(excerpt("é(i) = x", 100), "é(i) = x");
    }
}
