//! The optimizing tier: the kernel's C (`ir::c::function`, exactly what
//! `--emit c` prints) compiled by the system C compiler (`$CC`, default
//! `cc`) at -O3 for the host CPU into a shared object, cached on disk by a
//! hash of the C text, the flags and the compiler's `--version`. The
//! flags define the target's constants at the host's values
//! (`target::host_defines`), which the Cranelift tier also takes.

use crate::ir::{c, target, Function};
use crate::jit::{Code, CompiledKernel, Tier};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Flags of the optimizing build. `-std=c99` also keeps floating-point
/// contraction off, so both tiers compute bit-identical results.
const FLAGS: &[&str] = &["-std=c99", "-O3", "-march=native", "-fPIC", "-shared"];

/// On x86-64, keep jumps off 32-byte boundaries. Intel's microcode fix for
/// the JCC erratum (Skylake to Cascade Lake) keeps a loop whose branch
/// crosses or ends on such a boundary out of the decoded-instruction
/// cache: ELL SpMV on the power-law matrix ran in 2.34 s instead of 1.31 s
/// with its inner branch one byte further on. An assembler without the
/// option builds without it (`build` retries).
#[cfg(target_arch = "x86_64")]
const ASM_FLAGS: &[&str] = &["-Wa,-mbranches-within-32B-boundaries"];
#[cfg(not(target_arch = "x86_64"))]
const ASM_FLAGS: &[&str] = &[];

/// Set once a build failed with `ASM_FLAGS` and succeeded without them.
static ASM_FLAGS_REFUSED: AtomicBool = AtomicBool::new(false);

/// The C compiler found on this machine.
#[derive(Clone, Debug)]
pub struct Compiler {
    /// The command (`$CC` split on spaces, e.g. `ccache gcc`).
    pub command: Vec<String>,
    /// First line of its `--version`, for messages.
    pub version: String,
    /// Its whole `--version` output, part of the cache key.
    full_version: String,
}

/// The compiler named by `$CC` (default `cc`), or why there is none.
/// Looked up once per process.
pub fn compiler() -> Result<&'static Compiler, String> {
    static FOUND: OnceLock<Result<Compiler, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let cc = std::env::var("CC")
                .ok()
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| "cc".to_string());
            let command: Vec<String> = cc.split_whitespace().map(str::to_string).collect();
            let out = Command::new(&command[0])
                .args(&command[1..])
                .arg("--version")
                .output()
                .map_err(|e| format!("no C compiler `{cc}` ({e})"))?;
            if !out.status.success() {
                return Err(format!(
                    "C compiler `{cc}` does not run (`{cc} --version` failed)"
                ));
            }
            let full_version = String::from_utf8_lossy(&out.stdout).into_owned();
            let version = full_version
                .lines()
                .next()
                .unwrap_or(&cc)
                .trim()
                .to_string();
            Ok(Compiler {
                command,
                version,
                full_version,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Where shared objects are kept: `$TENSOR_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/tensor/cc`, else `~/.cache/tensor/cc`.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TENSOR_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("tensor").join("cc");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => PathBuf::from(h).join(".cache").join("tensor").join("cc"),
        None => std::env::temp_dir().join("tensor-cc"),
    }
}

/// FNV-1a over 128 bits: stable across Rust versions and platforms, which
/// a cache key on disk needs (std's hasher promises neither).
fn fnv128(parts: &[&str]) -> u128 {
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for p in parts {
        for b in p.bytes().chain([0xff]) {
            h ^= b as u128;
            h = h.wrapping_mul(0x0000000001000000000000000000013B);
        }
    }
    h
}

/// A shared object ready to load.
#[derive(Clone, Debug)]
pub struct Built {
    pub path: PathBuf,
    pub symbol: String,
    /// Time to find or build it (a cache hit costs only the hash).
    pub time: Duration,
    pub cached: bool,
}

/// The C text of `f`, its cache key and where its object goes.
fn plan(f: &Function, cc: &Compiler) -> (String, String, PathBuf) {
    plan_text(c::function(f), cc)
}

/// `plan` for a C text of its own.
fn plan_text(text: String, cc: &Compiler) -> (String, String, PathBuf) {
    let flags = [FLAGS, ASM_FLAGS].concat().join(" ") + " " + &target::host_defines().join(" ");
    let key = format!(
        "{:032x}",
        fnv128(&[&text, &flags, &cc.command.join(" "), &cc.full_version])
    );
    let so = cache_dir().join(format!("{key}.so"));
    (text, key, so)
}

/// Whether `f`'s shared object is already in the cache.
pub fn is_cached(f: &Function) -> bool {
    compiler().is_ok_and(|cc| plan(f, cc).2.is_file())
}

/// Build (or find in the cache) the shared object of `f`'s C.
pub fn build(f: &Function) -> Result<Built, String> {
    let start = Instant::now();
    let cc = compiler()?;
    build_planned(plan(f, cc), c::symbol(f), cc, start)
}

/// Build and load `text`, an edited copy of `f`'s C (`--emit c`), as
/// `f`'s kernel: a change to the emitted C measured before it is made in
/// the passes (`examples/ab_kernels.rs`). The copy must keep the kernel's
/// symbol and calling convention; its enums of array and parameter slots
/// must read as `f`'s do, since the runtime passes the arrays by them.
pub fn compile_variant(f: &Function, text: &str) -> Result<CompiledKernel, String> {
    let start = Instant::now();
    let cc = compiler()?;
    let (own, symbol) = (c::function(f), c::symbol(f));
    for which in ["array", "param"] {
        let head = format!("enum {symbol}_{which} {{");
        let slots = own
            .find(&head)
            .and_then(|at| own[at..].find("};").map(|end| &own[at..at + end]))
            .ok_or_else(|| format!("the kernel's C has no `{head}`"))?;
        if !text.contains(slots) {
            return Err(format!(
                "the variant's `{head} ... }}` differs from the kernel's: the runtime passes the slots as the kernel's C numbers them"
            ));
        }
    }
    let built = build_planned(plan_text(text.to_string(), cc), symbol, cc, start)?;
    load(f, &built)
}

/// Build (or find in the cache) the shared object of a planned C text.
fn build_planned(
    (text, key, so): (String, String, PathBuf),
    symbol: String,
    cc: &Compiler,
    start: Instant,
) -> Result<Built, String> {
    let dir = cache_dir();
    if so.is_file() {
        return Ok(Built {
            path: so,
            symbol,
            time: start.elapsed(),
            cached: true,
        });
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cache directory {}: {e}", dir.display()))?;
    let src = dir.join(format!("{key}.c"));
    std::fs::write(&src, &text).map_err(|e| format!("{}: {e}", src.display()))?;
    // Build under a name of our own, then rename: another process building
    // the same kernel never sees a half-written object.
    let tmp = dir.join(
        format!(
            "{key}.{}.{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        )
        .replace(['(', ')'], ""),
    );
    let run = |flags: &[&str]| {
        Command::new(&cc.command[0])
            .args(&cc.command[1..])
            .args(flags)
            .args(target::host_defines())
            .arg("-o")
            .arg(&tmp)
            .arg(&src)
            .arg("-lm")
            .output()
            .map_err(|e| format!("running {}: {e}", cc.command.join(" ")))
    };
    // The assembler's refusal is remembered: later kernels build once.
    let align = !ASM_FLAGS.is_empty() && !ASM_FLAGS_REFUSED.load(Ordering::Relaxed);
    let mut out = run(&if align {
        [FLAGS, ASM_FLAGS].concat()
    } else {
        FLAGS.to_vec()
    })?;
    if !out.status.success() && align {
        out = run(FLAGS)?;
        ASM_FLAGS_REFUSED.store(out.status.success(), Ordering::Relaxed);
    }
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err
            .lines()
            .find(|l| l.contains("error"))
            .or_else(|| err.lines().next())
            .unwrap_or("")
            .trim();
        return Err(format!(
            "{} failed on {}: {first}",
            cc.command.join(" "),
            src.display()
        ));
    }
    std::fs::rename(&tmp, &so).map_err(|e| format!("{}: {e}", so.display()))?;
    Ok(Built {
        path: so,
        symbol,
        time: start.elapsed(),
        cached: false,
    })
}

/// Load a built object as a runnable kernel of `f`.
pub fn load(f: &Function, built: &Built) -> Result<CompiledKernel, String> {
    let code = Code::load_shared_object(&built.path, &built.symbol)?;
    Ok(CompiledKernel::from_code(f, Tier::Cc, built.time, code))
}

/// Build and load in one step (blocking).
pub fn compile(f: &Function) -> Result<CompiledKernel, String> {
    load(f, &build(f)?)
}

/// A build running on a background thread while another tier serves.
pub struct Background {
    function: Function,
    handle: std::thread::JoinHandle<Result<Built, String>>,
}

impl Background {
    pub fn start(f: &Function) -> Background {
        let g = f.clone();
        Background {
            function: f.clone(),
            handle: std::thread::spawn(move || build(&g)),
        }
    }

    /// Whether `wait` would return at once.
    pub fn is_ready(&self) -> bool {
        self.handle.is_finished()
    }

    /// The kernel, once built; blocks until the build ends.
    pub fn wait(self) -> Result<CompiledKernel, String> {
        let built = self
            .handle
            .join()
            .map_err(|_| "the C build thread panicked".to_string())??;
        load(&self.function, &built)
    }
}
