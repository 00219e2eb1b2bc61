//! The Cranelift JIT: compile a loop-IR function to native code and run it
//! on runtime tensors. `call.rs` holds every `unsafe` line of the JIT.

mod call;
mod count;
mod helper_calls;
mod pairs;
mod perf_map;
mod placement;
mod prefetch;
mod room;
mod shares;
mod translate;
mod vector;

pub(crate) use call::Code;
pub use call::{find_tensor, param_value, run_kernel, run_rows, run_share, RunError, Share};
pub use room::poison_unzeroed_room;

use crate::ir::{passes, ArrayRef, Function, ParamRef};
use cranelift_codegen::ir::{types, AbiParam, UserFuncName};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Which backend produced a kernel's machine code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Cranelift, in process: compiles in about a millisecond.
    Cranelift,
    /// The system C compiler at -O3, loaded from a shared object.
    Cc,
}

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Cranelift => "cranelift",
            Tier::Cc => "cc",
        }
    }
}

/// A kernel compiled to native code, with the array and parameter order its
/// argument block expects.
pub struct CompiledKernel {
    pub name: String,
    pub arrays: Vec<(ArrayRef, bool)>,
    pub params: Vec<ParamRef>,
    /// Parameters compiled in as constants, with their values
    /// (`Function::fixed_params`): each call must give them these.
    pub fixed_params: Vec<(ParamRef, i64)>,
    /// The result arrays its appends grow (`Function::grown_by_appends`).
    pub grown_by_appends: std::collections::BTreeSet<ArrayRef>,
    /// The result arrays it fills in order, whose room needs no zeros
    /// (`Function::filled_in_order`).
    pub filled_in_order: std::collections::BTreeSet<ArrayRef>,
    /// Result arrays bounded by their level's storage, with the bound
    /// (`Function::index_limits`).
    pub index_limits: Vec<(ArrayRef, u64)>,
    pub compile_time: Duration,
    /// CPU time of the thread that compiled it, beside `compile_time`'s
    /// wall time: a machine busy with other work stretches the one and
    /// not the other. `None` for the cc tier, whose compiler is another
    /// process.
    pub compile_cpu: Option<Duration>,
    pub tier: Tier,
    /// How the outermost loop may be shared among threads (`ir::Parallel`).
    pub parallel: Option<crate::ir::Parallel>,
    /// The share search, run by each call, of a kernel compiled without
    /// it (`shares`); `None` where the kernel searches its own share.
    shares: Option<shares::ShareSearch>,
    /// How many prefetch hints the Cranelift tier's code carries as
    /// instructions (`prefetch`); 0 for the cc tier, whose C asks at run
    /// time.
    pub prefetches: u32,
    code: call::Code,
}

impl std::fmt::Debug for CompiledKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompiledKernel({}, {})", self.name, self.tier.name())
    }
}

impl CompiledKernel {
    /// A kernel of another tier whose code follows the same calling
    /// convention for `f` (see `backend::cc`): the C's.
    pub(crate) fn from_code(
        f: &Function,
        tier: Tier,
        compile_time: Duration,
        code: call::Code,
    ) -> Self {
        let f = passes::for_codegen(f, passes::Backend::C);
        CompiledKernel {
            name: f.name.clone(),
            arrays: f.arrays(),
            params: f.params(),
            fixed_params: Vec::new(),
            grown_by_appends: f.grown_by_appends(),
            filled_in_order: f.filled_in_order(),
            index_limits: f.index_limits.clone(),
            compile_time,
            compile_cpu: None,
            tier,
            parallel: f.parallel,
            shares: None,
            prefetches: 0,
            code,
        }
    }
}

/// How much Cranelift optimizes a kernel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Opt {
    /// `opt_level=speed`: the e-graph pass (GVN, LICM, constant folding).
    Speed,
    /// `opt_level=none`.
    None,
}

impl Opt {
    /// `none` for a nest of merges: a kernel with a `while` inside a
    /// `while` (the levels of a COO or CSF add or inner product) and no
    /// counted loop (`for`) inside another loop. Register allocation is
    /// most of its compile, and the e-graph's longer live ranges make it
    /// harder; at `none` it compiles in a fifth fewer instructions (a
    /// three-level COO add: 158M -> 123M instructions for 11 compiles) and
    /// runs as fast (`bench/jit.py`), since the loop IR computes each value
    /// once and the translator loads base pointers ahead of each loop.
    /// `speed` everywhere else: counted loops (vector loops, dense rows,
    /// position ranges) gain from the e-graph's code motion and folding
    /// (at `none`, SpDM and MTTKRP run 1.6-1.8x slower, CSR SpMV 1.15x).
    fn for_function(f: &Function) -> Opt {
        use crate::ir::Stmt;
        let counted = |s: &Stmt| match s {
            // a loop of a few constant trips is unrolled (`translate`)
            Stmt::For { lo, hi, .. } => translate::unrolled(lo, hi).is_none(),
            _ => false,
        };
        let any_loop = |s: &Stmt| matches!(s, Stmt::For { .. } | Stmt::While { .. });
        let merge = |s: &Stmt| matches!(s, Stmt::While { .. });
        match nested(&f.body, false, &any_loop, &counted) || !nested(&f.body, false, &merge, &merge)
        {
            true => Opt::Speed,
            false => Opt::None,
        }
    }
}

/// Whether a statement that is `inner` sits inside one that is `outer`
/// (`within`: `b` already does).
fn nested(
    b: &[crate::ir::Stmt],
    within: bool,
    outer: &dyn Fn(&crate::ir::Stmt) -> bool,
    inner: &dyn Fn(&crate::ir::Stmt) -> bool,
) -> bool {
    use crate::ir::Stmt;
    b.iter().any(|s| {
        let here = within || outer(s);
        (within && inner(s))
            || match s {
                Stmt::For { body, .. } | Stmt::While { body, .. } => {
                    nested(body, here, outer, inner)
                }
                Stmt::If { then, els, .. } => {
                    nested(then, within, outer, inner) || nested(els, within, outer, inner)
                }
                _ => false,
            }
    })
}

/// The host ISA at `opt`, built once per process and level (building it
/// detects CPU features and costs more than compiling a small kernel).
fn host_isa(opt: Opt) -> Result<OwnedTargetIsa, String> {
    static SPEED: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    static NONE: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    let cell = match opt {
        Opt::Speed => &SPEED,
        Opt::None => &NONE,
    };
    cell.get_or_init(|| {
        let mut flags = settings::builder();
        let set = |flags: &mut settings::Builder, k: &str, v: &str| {
            flags
                .set(k, v)
                .map_err(|e| format!("cranelift setting {k}: {e}"))
        };
        let level = match opt {
            Opt::Speed => "speed",
            Opt::None => "none",
        };
        set(&mut flags, "opt_level", level)?;
        set(&mut flags, "use_colocated_libcalls", "false")?;
        set(&mut flags, "is_pic", "false")?;
        // The verifier costs a third of the compile time; the translator's
        // output is checked by it in debug builds (and so in `cargo test`
        // without --release).
        set(
            &mut flags,
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        )?;
        // Kernels never unwind.
        set(&mut flags, "unwind_info", "false")?;
        // Block offsets, for `placement`.
        set(&mut flags, "machine_code_cfg_info", "true")?;
        let isa_builder = cranelift_native::builder().map_err(|e| format!("host ISA: {e}"))?;
        isa_builder
            .finish(settings::Flags::new(flags))
            .map_err(|e| format!("host ISA: {e}"))
    })
    .clone()
}

/// Cranelift's working memory for a compile: its context (the register
/// allocator's tables among them) and the function builder's. Kept between
/// compiles (`Workspace::take`, `give_back`), as a fresh one allocates and
/// grows every table anew.
struct Workspace {
    ctx: Context,
    fctx: FunctionBuilderContext,
}

/// Workspaces of finished compiles, at most one per compiling thread that
/// ran at once (the language server's compiles may overlap).
static WORKSPACES: Mutex<Vec<Workspace>> = Mutex::new(Vec::new());

impl Workspace {
    fn take() -> Workspace {
        let spare = WORKSPACES.lock().ok().and_then(|mut w| w.pop());
        spare.unwrap_or_else(|| Workspace {
            ctx: Context::new(),
            fctx: FunctionBuilderContext::new(),
        })
    }

    /// Cleared of its function, back to the pool.
    fn give_back(mut self) {
        self.ctx.clear();
        if let Ok(mut w) = WORKSPACES.lock() {
            w.push(self);
        }
    }
}

/// A kernel's module, its function's id, and how many prefetch hints its
/// code carries (`prefetch`).
type Built = (JITModule, cranelift_module::FuncId, u32);

/// Translate `f` into a fresh module with the argument block `arrays` and
/// `params`, in `ws` (whose context then holds the compiled code, with its
/// disassembly when `disasm` asked for it). Where its hints' loads could
/// not all become prefetches (`prefetch::define`), without its hints.
fn build(
    f: &Function,
    arrays: &[(ArrayRef, bool)],
    params: &[ParamRef],
    disasm: bool,
    ws: &mut Workspace,
) -> Result<Built, String> {
    if let Some(built) = build_as_given(f, arrays, params, disasm, ws)? {
        return Ok(built);
    }
    let plain = prefetch::without_hints(f);
    build_as_given(&plain, arrays, params, disasm, ws)?.ok_or_else(|| "hints left in".into())
}

/// `build` with `f`'s hints, or `None` where they could not all become
/// prefetches.
fn build_as_given(
    f: &Function,
    arrays: &[(ArrayRef, bool)],
    params: &[ParamRef],
    disasm: bool,
    ws: &mut Workspace,
) -> Result<Option<Built>, String> {
    let isa = host_isa(Opt::for_function(f))?;
    let (mut grows, mut prefetches) = (false, false);
    let mut filled = std::collections::BTreeSet::new();
    crate::ir::walk_block(&f.body, &mut |s| {
        grows |= matches!(s, crate::ir::Stmt::Reserve { .. });
        prefetches |= matches!(s, crate::ir::Stmt::Prefetch { .. });
        filled.extend(crate::ir::zero_fill(s).map(|(a, ..)| a.clone()));
    });
    // The filled results the kernel never reads back, whose fills stream
    // (only a kernel with fills looks for them).
    let streamed: std::collections::BTreeSet<ArrayRef> = match filled.is_empty() {
        true => filled,
        false => f
            .never_read_results()
            .intersection(&filled)
            .cloned()
            .collect(),
    };
    let zeroes = !streamed.is_empty();
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    if grows {
        builder.symbol(GROW.symbol, GROW.address()? as *const u8);
    }
    if prefetches {
        builder.symbol(PREFETCH.symbol, PREFETCH.address()? as *const u8);
    }
    if zeroes {
        builder.symbol(ZERO.symbol, ZERO.address()? as *const u8);
    }
    let mut module = JITModule::new(builder);
    let ptr_ty = module.target_config().pointer_type();
    let Workspace { ctx, fctx } = ws;
    ctx.clear();
    ctx.set_disasm(disasm);
    ctx.func.signature = module.make_signature();
    ctx.func.signature.params.push(AbiParam::new(ptr_ty));
    ctx.func.signature.returns.push(AbiParam::new(types::I64));
    ctx.func.name = UserFuncName::testcase(f.name.as_bytes());
    let mut import = |used: bool, t: &Trampoline| -> Result<_, String> {
        if !used {
            return Ok(None);
        }
        let id = module
            .declare_function(t.symbol, Linkage::Import, &t.signature(&module))
            .map_err(|e| format!("declare: {e}"))?;
        Ok(Some(module.declare_func_in_func(id, &mut ctx.func)))
    };
    let grow = import(grows, &GROW)?;
    let prefetch = import(prefetches, &PREFETCH)?;
    let zero = import(zeroes, &ZERO)?.map(|z| (z, streamed));
    let hints;
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let helpers = helper_calls::Helpers {
            grow,
            prefetch,
            zero,
        };
        hints = translate::Translator::translate(&mut b, f, ptr_ty, arrays, params, helpers)?;
        b.finalize(module.target_config());
    }
    let id = module
        .declare_function(&f.name, Linkage::Local, &ctx.func.signature)
        .map_err(|e| format!("declare: {e}"))?;
    if hints == 0 {
        module
            .define_function(id, ctx)
            .map_err(|e| format!("cranelift: {e:?}"))?;
        return Ok(Some((module, id, 0)));
    }
    let defined = prefetch::define(&mut module, id, ctx, hints)?;
    Ok(defined.then_some((module, id, hints)))
}

/// A `preserve_all` function kernels call in a block of their loops: it
/// clobbers no register, where a call that clobbers the caller-saved
/// registers would make register allocation keep every value live across
/// the loop in a stack slot instead (and take longer). Compiled once per
/// process into a module of its own that lives as long as the process;
/// kernels import it by `symbol` instead of compiling a copy each (0.15-0.3
/// ms of a compile).
struct Trampoline {
    symbol: &'static str,
    /// Its arguments after the first, a pointer; it returns nothing.
    int_args: usize,
    body: fn(&mut FunctionBuilder, cranelift_codegen::ir::Type),
    /// The address of a function written to clobber no register, used
    /// instead of compiling `body` where there is one.
    native: Option<fn() -> usize>,
    address: OnceLock<Result<usize, String>>,
}

/// `grow(args, slots, want)`: calls the runtime's `reserve_group` (through
/// the argument block) when an append finds an array full (in a cold
/// block). The kernel learns of a refused allocation from the capacities.
static GROW: Trampoline = Trampoline {
    symbol: "tensor_grow",
    int_args: 2,
    body: helper_calls::grow_body,
    native: None,
    address: OnceLock::new(),
};

#[cfg(target_arch = "x86_64")]
const PREFETCH_NATIVE: Option<fn() -> usize> =
    Some(|| call::prefetch_rows_preserving as *const () as usize);
#[cfg(not(target_arch = "x86_64"))]
const PREFETCH_NATIVE: Option<fn() -> usize> = None;

/// `prefetch(table, slots, at, positions, stride, len)`: asks the caches
/// for the rows a loop reads soon (`call::prefetch_rows`), once per strip
/// of positions (`ir::prefetch`).
static PREFETCH: Trampoline = Trampoline {
    symbol: "tensor_prefetch",
    int_args: 5,
    body: helper_calls::prefetch_body,
    native: PREFETCH_NATIVE,
    address: OnceLock::new(),
};

/// `zero(p, n, len)`: the zero fill of `n` doubles from `p` in a result
/// array of `len` elements the kernel never reads back, past the caches
/// where the array is large (`call::zero_f64`, the C's `tensor_zero_f64`).
static ZERO: Trampoline = Trampoline {
    symbol: "tensor_zero",
    int_args: 2,
    body: helper_calls::zero_body,
    native: None,
    address: OnceLock::new(),
};

impl Trampoline {
    fn signature(&self, module: &JITModule) -> cranelift_codegen::ir::Signature {
        let ptr_ty = module.target_config().pointer_type();
        let mut sig = module.make_signature();
        sig.call_conv = cranelift_codegen::isa::CallConv::PreserveAll;
        sig.params.push(AbiParam::new(ptr_ty));
        sig.params.extend(std::iter::repeat_n(
            AbiParam::new(types::I64),
            self.int_args,
        ));
        sig
    }

    /// Its address, compiled on first use.
    fn address(&self) -> Result<usize, String> {
        self.address
            .get_or_init(|| {
                if let Some(native) = self.native {
                    return Ok(native());
                }
                let mut module = JITModule::new(JITBuilder::with_isa(
                    host_isa(Opt::Speed)?,
                    cranelift_module::default_libcall_names(),
                ));
                let sig = self.signature(&module);
                let id = module
                    .declare_function(self.symbol, Linkage::Local, &sig)
                    .map_err(|e| format!("declare: {e}"))?;
                let mut ctx = module.make_context();
                ctx.func.signature = sig;
                {
                    let mut fctx = FunctionBuilderContext::new();
                    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
                    (self.body)(&mut b, module.target_config().pointer_type());
                    b.finalize(module.target_config());
                }
                module
                    .define_function(id, &mut ctx)
                    .map_err(|e| format!("cranelift: {e:?}"))?;
                module
                    .finalize_definitions()
                    .map_err(|e| format!("finalize: {e}"))?;
                let address = module.get_finalized_function(id) as usize;
                // The code must outlive every kernel that calls it.
                Box::leak(Box::new(module));
                Ok(address)
            })
            .clone()
    }
}

/// Build what every compile needs (the host ISA at both levels, the
/// trampolines), so that a process's first compile finds them ready;
/// `execute::warm_up` runs it on a thread of its own at start-up.
pub fn build_shared_pieces() {
    let _ = GROW.address();
    let _ = PREFETCH.address();
    let _ = ZERO.address();
    let _ = host_isa(Opt::None);
    let _ = host_isa(Opt::Speed);
}

/// Set once a compile that is not the warm-up's has begun.
static WARM_UP_STOPPED: AtomicBool = AtomicBool::new(false);
/// Held by the warm-up through each throwaway compile.
static WARM_UP_COMPILING: Mutex<()> = Mutex::new(());

/// A throwaway compile of the kernel `make` lowers, which readies a
/// process for its first real one (`execute::warm_up_while_reading`), unless a
/// real compile has begun; whether it ran. Two compiles at once share one
/// malloc arena (`heap_policy`) and the caches and run slower than both in
/// turn, so a real compile waits for the throwaway in progress.
pub fn warm_up_compile(make: impl FnOnce() -> Option<Function>) -> bool {
    let _compiling = WARM_UP_COMPILING.lock();
    if WARM_UP_STOPPED.load(Ordering::Acquire) {
        return false;
    }
    if let Some(f) = make() {
        let _ = compile_now(&f, Instant::now(), false);
    }
    true
}

/// Stop the warm-up, after its compile in progress if any.
fn stop_warm_up() {
    if !WARM_UP_STOPPED.swap(true, Ordering::AcqRel) {
        drop(WARM_UP_COMPILING.lock());
    }
}

/// Compile `f` with Cranelift for the host CPU (at the level `Opt` picks).
/// Its compile time counts any wait for the warm-up's compile to finish.
pub fn compile(f: &Function) -> Result<CompiledKernel, String> {
    let start = Instant::now();
    stop_warm_up();
    compile_now(f, start, true)
}

/// `compile` without waiting for the warm-up; its compile time is counted
/// from `start`. `profiled`: named in a profiler's map (`jit::perf_map`);
/// the warm-up's throwaway is not, as its pages are reused by the next.
fn compile_now(f: &Function, start: Instant, profiled: bool) -> Result<CompiledKernel, String> {
    let cpu_start = thread_cpu_time();
    let Translated {
        kernel,
        search,
        arrays,
        params,
    } = Translated::of(f);
    let mut ws = Workspace::take();
    let built = build(&kernel, &arrays, &params, false, &mut ws);
    let placing = ws.ctx.compiled_code().and_then(placing);
    let code_len = ws.ctx.compiled_code().map_or(0, |c| c.code_buffer().len());
    let (mut module, id, prefetches) = built?;
    ws.give_back();
    module
        .finalize_definitions()
        .map_err(|e| format!("finalize: {e}"))?;
    let ptr = module.get_finalized_function(id);
    let code = match placing {
        // The module's own copy sits where it should already.
        Some((len, offset)) if ptr as usize % 32 != offset => {
            call::Code::placed(module, ptr, len, offset)
        }
        _ => call::Code::new(module, ptr),
    };
    if profiled {
        perf_map::record(code.address(), code_len, &kernel.name);
    }
    Ok(CompiledKernel {
        name: kernel.name.clone(),
        arrays,
        params,
        fixed_params: f.fixed_params.clone(),
        grown_by_appends: kernel.grown_by_appends(),
        filled_in_order: kernel.filled_in_order(),
        index_limits: f.index_limits.clone(),
        compile_time: start.elapsed(),
        compile_cpu: Some(thread_cpu_time().saturating_sub(cpu_start)),
        tier: Tier::Cranelift,
        parallel: kernel.parallel,
        shares: search,
        prefetches,
        code,
    })
}

/// CPU time the calling thread has used so far.
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the given struct only.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// What Cranelift is given of a kernel: its loop IR after this tier's
/// passes, less the share search where each call runs it (`shares`), and
/// the arrays and parameters of its argument block.
struct Translated {
    kernel: Function,
    search: Option<shares::ShareSearch>,
    arrays: Vec<(ArrayRef, bool)>,
    params: Vec<ParamRef>,
}

impl Translated {
    fn of(f: &Function) -> Translated {
        let f = passes::for_codegen(f, passes::Backend::Cranelift);
        // The argument block: `f`'s arrays and parameters, so that the
        // search, run by the caller, finds every one it reads, and the
        // share bounds the kernel reads as parameters.
        let (arrays, mut params) = (f.arrays(), f.params());
        let (mut kernel, search) = match shares::split(f) {
            Ok((kernel, search)) => {
                params.extend(kernel.params());
                params.sort();
                params.dedup();
                (kernel, Some(search))
            }
            Err(f) => (f, None),
        };
        // After the split: the search reads declarations made before it,
        // which must stay where it finds them.
        crate::ir::sink::sink_past_loops(&mut kernel, &arrays);
        Translated {
            kernel,
            search,
            arrays,
            params,
        }
    }
}

/// The length of `code` and the offset to place it at (`placement`), on
/// x86-64 only and where the code can move: its only relocations are
/// absolute addresses of other functions.
fn placing(code: &cranelift_codegen::CompiledCode) -> Option<(usize, usize)> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    let movable = code
        .buffer
        .relocs()
        .iter()
        .all(|r| r.kind == cranelift_codegen::binemit::Reloc::Abs8);
    if !movable {
        return None;
    }
    let bytes = code.code_buffer();
    Some((bytes.len(), placement::best_offset(bytes, &code.bb_starts)))
}

/// The machine code Cranelift makes of `f`, as assembly text (`--emit asm`).
pub fn disassemble(f: &Function) -> Result<String, String> {
    let t = Translated::of(f);
    let mut ws = Workspace::take();
    let (module, ..) = build(&t.kernel, &t.arrays, &t.params, true, &mut ws)?;
    let text = ws.ctx.compiled_code().and_then(|c| c.vcode.clone());
    ws.give_back();
    let text = prefetch::shown_as_run(&text.ok_or("Cranelift kept no disassembly")?);
    // Never finalized: nothing of it can run.
    drop(module);
    Ok(match t.search {
        Some(_) => format!(
            "; the thread-share search runs before each call (in the IR interpreter); \
             this code reads the share as the parameters share_begin and share_end\n{text}"
        ),
        None => text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Emitter, Expr};

    /// A throwaway compile runs until a real compile begins, and never
    /// after: the real one does not share the machine with it.
    #[test]
    fn the_warm_up_gives_way_to_the_first_real_compile() {
        let kernel = || {
            let mut e = Emitter::new();
            e.store(ArrayRef::vals("y"), Expr::Int(0), Expr::Float(1.0));
            e.finish("k")
        };
        // Other tests of this process may have compiled already.
        if !WARM_UP_STOPPED.load(Ordering::Acquire) {
            assert!(warm_up_compile(|| Some(kernel())));
        }
        compile(&kernel()).expect("compiles"); // ok: test code
        assert!(!warm_up_compile(|| panic!("lowered after a real compile")));
    }

    /// `none` only where merges (`while`) nest and no counted loop sits
    /// inside another loop, whatever runs at the top level or is unrolled
    /// (a fill of two `pos` entries).
    #[test]
    fn the_optimizer_runs_where_counted_loops_nest() {
        let y = ArrayRef::vals("y");
        let n = || Expr::Param(crate::ir::ParamRef::call("n"));
        let kernel = |outer_for: bool, inner_for: bool, trips: Expr| {
            let mut e = Emitter::new();
            let store = |e: &mut Emitter, i: Expr| e.store(y.clone(), i, Expr::Float(1.0));
            e.for_("fill", Expr::Int(0), n(), |e, i| store(e, i));
            let inner = |e: &mut Emitter| match inner_for {
                true => e.for_("q", Expr::Int(0), trips.clone(), |e, q| store(e, q)),
                false => e.while_(Expr::lt(Expr::Int(0), n()), |e| store(e, Expr::Int(0))),
            };
            match outer_for {
                true => e.for_("i", Expr::Int(0), n(), |e, _| inner(e)),
                false => e.while_(Expr::lt(Expr::Int(1), n()), inner),
            }
            e.finish("k")
        };
        let opt = |f: &Function| Opt::for_function(f);
        assert_eq!(opt(&kernel(true, true, n())), Opt::Speed);
        assert_eq!(opt(&kernel(false, true, n())), Opt::Speed);
        assert_eq!(opt(&kernel(true, false, n())), Opt::Speed);
        assert_eq!(opt(&kernel(false, false, n())), Opt::None);
        assert_eq!(opt(&kernel(false, true, Expr::Int(2))), Opt::Speed);
        // merges nesting, with a pair of entries set in the outer one
        let mut merges_with_a_pair = kernel(false, false, n());
        let mut e = Emitter::new();
        e.for_("pair", Expr::Int(0), Expr::Int(2), |e, q| {
            e.store(y.clone(), q, Expr::Float(0.0))
        });
        if let Some(crate::ir::Stmt::While { body, .. }) = merges_with_a_pair.body.last_mut() {
            body.extend(e.finish("pair").body);
        }
        assert_eq!(opt(&merges_with_a_pair), Opt::None);
    }

    /// A constant element is an offset of its access, with no shift or
    /// add of constants for Cranelift to fold (or, at `opt_level=none`,
    /// to run): `x[1]` and `y[0]` outside the loop, `x[i + 1]` and
    /// `y[i + 7]` inside it.
    #[test]
    fn constant_elements_are_offsets_of_their_access() {
        use cranelift_codegen::ir::{InstructionData, Opcode};
        let (x, y) = (ArrayRef::vals("x"), ArrayRef::vals("y"));
        let mut e = Emitter::new();
        e.store(y.clone(), Expr::Int(0), Expr::load(x.clone(), Expr::Int(1)));
        let n = Expr::Param(ParamRef::dim("y", 0));
        e.for_("i", Expr::Int(0), n, |e, i| {
            let v = Expr::load(x.clone(), Expr::add(i.clone(), Expr::Int(1)));
            e.store(y.clone(), Expr::add(i, Expr::Int(7)), v);
        });
        let f = e.finish("k");
        let (arrays, params) = (f.arrays(), f.params());
        let isa = host_isa(Opt::Speed).expect("host ISA"); // ok: test code
        let mut func = cranelift_codegen::ir::Function::new();
        func.signature.params.push(AbiParam::new(types::I64));
        func.signature.returns.push(AbiParam::new(types::I64));
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        translate::Translator::translate(
            &mut b,
            &f,
            types::I64,
            &arrays,
            &params,
            helper_calls::Helpers::default(),
        )
        .expect("translates"); // ok: test code
        b.finalize(isa.frontend_config());
        let dfg = &func.dfg;
        let constant = |v| {
            dfg.value_def(v)
                .inst()
                .is_some_and(|i| dfg.insts[i].opcode() == Opcode::Iconst)
        };
        // The offsets of the accesses to elements (of f64s), in order.
        let mut offsets = Vec::new();
        for block in func.layout.blocks() {
            for inst in func.layout.block_insts(block) {
                let args = dfg.inst_args(inst);
                let element = match dfg.insts[inst] {
                    InstructionData::Binary {
                        opcode: Opcode::Ishl,
                        ..
                    } => {
                        assert!(!constant(args[0]), "{}", func.display());
                        None
                    }
                    InstructionData::Load { offset, .. } => {
                        let elem = dfg.value_type(dfg.first_result(inst)) == types::F64;
                        elem.then_some(offset)
                    }
                    InstructionData::Store { offset, .. } => {
                        (dfg.value_type(args[0]) == types::F64).then_some(offset)
                    }
                    _ => None,
                };
                offsets.extend(element.map(i32::from));
            }
        }
        assert_eq!(offsets, [8, 0, 8, 56], "{}", func.display());
    }

    /// A growth past an array's index limit (`Function::index_limits`) is
    /// refused before any memory is asked for, and says which array; up
    /// to the limit it grows, and the kernel is never given room past it.
    #[test]
    fn a_growth_past_the_index_limit_is_refused_and_named() {
        let kernel = |reserved: i64| {
            let mut e = Emitter::new();
            let vals = ArrayRef::vals("y");
            e.reserve(vals.clone(), Expr::Int(reserved));
            e.store(vals.clone(), Expr::Int(reserved - 1), Expr::Float(1.0));
            let mut f = e.finish("k");
            f.index_limits = vec![(vals, 10)];
            compile(&f).expect("compiles") // ok: test code, a panic is a failed test
        };
        let format = crate::format::parse_format("dense", 1, &crate::format::Registry::builtin())
            .expect("dense"); // ok: test code
        let mut y = crate::execute::prepare_output("y", &format, &[4], 0).expect("output"); // ok: test code
        assert!(run_kernel(&kernel(10), &[], &mut y).is_ok());
        assert_eq!(y.vals.len(), 10);
        assert_eq!(y.vals[9], 1.0);
        let mut y = crate::execute::prepare_output("y", &format, &[4], 0).expect("output"); // ok: test code
        match run_kernel(&kernel(11), &[], &mut y) {
            Err(e @ RunError::PastIndexLimit { limit: 10, .. }) => {
                let message = e.to_string();
                assert!(message.contains("`y_vals`"), "{message}");
            }
            other => panic!("{other:?}"), // ok: test code
        }
    }

    /// A growth the runtime refuses (more memory than the machine has)
    /// ends the kernel with `OutOfMemory`, found through the capacity
    /// `grow` leaves short: the trampoline returns nothing.
    #[test]
    fn a_refused_growth_ends_the_kernel_with_out_of_memory() {
        let mut e = Emitter::new();
        let vals = ArrayRef::vals("y");
        e.reserve(vals.clone(), Expr::Int(1 << 58));
        e.store(vals, Expr::Int(0), Expr::Float(1.0));
        let k = compile(&e.finish("k")).expect("compiles"); // ok: test code, a panic is a failed test
        let format = crate::format::parse_format("dense", 1, &crate::format::Registry::builtin())
            .expect("dense"); // ok: test code
        let mut y = crate::execute::prepare_output("y", &format, &[4], 0).expect("output"); // ok: test code
        assert!(matches!(
            run_kernel(&k, &[], &mut y),
            Err(RunError::OutOfMemory)
        ));
    }

    /// Conditions of `while`s, `if`s and cursor steps that combine loads
    /// with `&&`, `||` and `!` (branch chains, not booleans) decide as the
    /// IR says, the right side only where the left lets it: a search for
    /// the first key equal to each probe, and tests on what it found.
    #[test]
    fn short_circuit_conditions_branch_as_they_read() {
        use crate::ir::{CmpOp, ElemTy, Slot};
        let keys = ArrayRef {
            tensor: "y".into(),
            slot: Slot::Scratch("keys".into(), ElemTy::I32),
        };
        let vals = ArrayRef::vals("y");
        let stored = [3i64, 1, 4, 1, 5, 9, 2, 6];
        let n = stored.len() as i64;
        let probes = [3i64, 1, 6, 7, -1];
        let mut e = Emitter::new();
        e.reserve(keys.clone(), Expr::Int(n));
        e.reserve(vals.clone(), Expr::Int(3 * probes.len() as i64));
        for (m, &k) in stored.iter().enumerate() {
            e.store(keys.clone(), Expr::Int(m as i64), Expr::Int(k));
        }
        let key = |p: &Expr| Expr::load(keys.clone(), p.clone());
        let bump = |e: &mut Emitter, at: i64| {
            let at = Expr::Int(at);
            e.store(
                vals.clone(),
                at.clone(),
                Expr::add(Expr::load(vals.clone(), at), Expr::Float(1.0)),
            )
        };
        for (n_probe, &probe) in probes.iter().enumerate() {
            let base = 3 * n_probe as i64;
            let p = e.let_var("p", Expr::Int(0));
            e.while_(
                Expr::and(
                    Expr::lt(p.clone(), Expr::Int(n)),
                    Expr::not(Expr::eq(key(&p), Expr::Int(probe))),
                ),
                |e| e.set(&p, Expr::add(p.clone(), Expr::Int(1))),
            );
            // vals[base] = p (as a count of 1.0s)
            e.for_("q", Expr::Int(0), p.clone(), |e, _| bump(e, base));
            // found, or the probe is the first key
            let found = Expr::and(
                Expr::lt(p.clone(), Expr::Int(n)),
                Expr::eq(key(&p), Expr::Int(probe)),
            );
            e.if_(
                Expr::or(
                    Expr::not(found.clone()),
                    Expr::eq(key(&Expr::Int(0)), Expr::Int(probe)),
                ),
                |e| bump(e, base + 1),
            );
            // a cursor stepped past the key found when it exceeds 2
            let c = e.let_var("c", Expr::Int(0));
            e.set(
                &c,
                Expr::select(
                    Expr::and(
                        Expr::lt(p.clone(), Expr::Int(n)),
                        Expr::cmp(CmpOp::Gt, key(&p), Expr::Int(2)),
                    ),
                    Expr::add(c.clone(), Expr::Int(2)),
                    c.clone(),
                ),
            );
            e.for_("q", Expr::Int(0), c, |e, _| bump(e, base + 2));
        }
        let k = compile(&e.finish("k")).expect("compiles"); // ok: test code, a panic is a failed test
        let format = crate::format::parse_format("dense", 1, &crate::format::Registry::builtin())
            .expect("dense"); // ok: test code
        let mut y =
            crate::execute::prepare_output("y", &format, &[3 * probes.len()], 0).expect("output"); // ok: test code
        run_kernel(&k, &[], &mut y).expect("runs"); // ok: test code
        for (n_probe, &probe) in probes.iter().enumerate() {
            let p = stored.iter().position(|&k| k == probe);
            let at = p.unwrap_or(stored.len());
            let expect = [
                at as f64,
                (p.is_none() || stored[0] == probe) as i64 as f64,
                if p.is_some_and(|p| stored[p] > 2) {
                    2.0
                } else {
                    0.0
                },
            ];
            assert_eq!(
                &y.vals[3 * n_probe..3 * n_probe + 3],
                &expect,
                "probe {probe}"
            );
        }
    }

    /// Counting loops (`rank_of`) run in vector lanes: the counts of keys
    /// below and above each of a row's keys, for rows of every length
    /// around the eight elements of a vector iteration, are exact.
    #[test]
    fn counting_loops_count_exactly_in_lanes() {
        use crate::ir::{CmpOp, ElemTy, Slot};
        let keys = ArrayRef {
            tensor: "y".into(),
            slot: Slot::Scratch("keys".into(), ElemTy::I32),
        };
        let vals = ArrayRef::vals("y");
        let probes = [-60i64, -3, 0, 17, 49, 3_000_000_000];
        for len in 0..40i64 {
            // Keys spread with repeats and negatives: (m * 37) % 101 - 50.
            let stored: Vec<i64> = (0..len).map(|m| (m * 37) % 101 - 50).collect();
            let mut e = Emitter::new();
            e.reserve(keys.clone(), Expr::Int(len.max(1)));
            e.reserve(vals.clone(), Expr::Int(2 * probes.len() as i64));
            for (m, &k) in stored.iter().enumerate() {
                e.store(keys.clone(), Expr::Int(m as i64), Expr::Int(k));
            }
            for (n, &probe) in probes.iter().enumerate() {
                for (side, op) in [CmpOp::Lt, CmpOp::Gt].into_iter().enumerate() {
                    let count = e.let_var("count", Expr::Int(0));
                    e.for_("m", Expr::Int(0), Expr::Int(len), |e, m| {
                        let hit = Expr::select(
                            Expr::cmp(op, Expr::load(keys.clone(), m), Expr::Int(probe)),
                            Expr::Int(1),
                            Expr::Int(0),
                        );
                        e.set(&count, Expr::add(count.clone(), hit));
                    });
                    // (the IR has no integer-to-float conversion: add 1.0s)
                    let at = Expr::Int((2 * n + side) as i64);
                    e.for_("q", Expr::Int(0), count, |e, _| {
                        e.store(
                            vals.clone(),
                            at.clone(),
                            Expr::add(Expr::load(vals.clone(), at.clone()), Expr::Float(1.0)),
                        )
                    });
                }
            }
            let k = compile(&e.finish("k")).expect("compiles"); // ok: test code, a panic is a failed test
            let format =
                crate::format::parse_format("dense", 1, &crate::format::Registry::builtin())
                    .expect("dense"); // ok: test code
            let mut y = crate::execute::prepare_output("y", &format, &[2 * probes.len()], 0)
                .expect("output"); // ok: test code
            run_kernel(&k, &[], &mut y).expect("runs"); // ok: test code
            for (n, &probe) in probes.iter().enumerate() {
                let below = stored.iter().filter(|&&k| k < probe).count() as f64;
                let above = stored.iter().filter(|&&k| k > probe).count() as f64;
                assert_eq!(
                    (y.vals[2 * n], y.vals[2 * n + 1]),
                    (below, above),
                    "{len} keys, probe {probe}"
                );
            }
        }
    }
}
