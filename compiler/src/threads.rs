//! Running a kernel on several threads: how many, and how their results
//! come together. The lowerer decides whether a kernel's outermost loop may
//! be shared (`lower::parallel`, `ir::Parallel`); this module runs it:
//!
//! - `Rows`: the threads share the result (`jit::run_rows`).
//! - `Partials`: thread 0 writes the result, every other thread a result
//!   of its own, added into it in thread order once all have joined, so a
//!   given thread count always gives the same sums.
//! - `Stitch`: every thread writes a sparse result of its own over its
//!   rows; they are stitched in thread order (`Append::stitch_shares`),
//!   giving exactly one thread's result.
//!
//! Threads are scoped (`std::thread::scope`) and started per call: a call
//! worth sharing runs for far longer than starting a thread takes, and
//! smaller ones stay on the calling thread (`Threads::min_work`).

use crate::ir::Parallel;
use crate::jit::{self, CompiledKernel, RunError, Share};
use crate::storage::{Tensor, Validated};

/// More shares than this would not speed anything up on any machine this
/// runs on, and keeps the kernels' share arithmetic far from overflow.
pub const MAX_THREADS: usize = 1024;

/// Stored input values below which a kernel runs on the calling thread
/// however many threads are allowed. Starting and joining a thread per call
/// costs 50-100 us here (a 2-core VM), a CSR SpMV pass over 100K values or
/// more: on 2 threads, SpMV of 200K and 390K values ran slower than on one
/// (CSR 0.13 -> 0.16 ms, COO 0.37 -> 0.42), of 800K faster (CSR 0.55 ->
/// 0.37 ms).
pub const DEFAULT_MIN_WORK: usize = 1 << 19;

/// How many threads a kernel may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threads {
    /// At most this many (1: today's single call, exactly).
    pub count: usize,
    /// Fewer stored input values than this run on one thread.
    pub min_work: usize,
}

impl Threads {
    /// Every core, for kernels big enough to gain from them.
    pub fn all() -> Threads {
        Threads::up_to(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// At most `n` threads (clamped to 1..=`MAX_THREADS`), for kernels big
    /// enough to gain from them.
    pub fn up_to(n: usize) -> Threads {
        Threads {
            count: n.clamp(1, MAX_THREADS),
            min_work: DEFAULT_MIN_WORK,
        }
    }

    /// Exactly `n` threads wherever the kernel can be shared, however small
    /// (for tests).
    pub fn exactly(n: usize) -> Threads {
        Threads {
            count: n.clamp(1, MAX_THREADS),
            min_work: 0,
        }
    }
}

impl Default for Threads {
    fn default() -> Self {
        Threads::all()
    }
}

/// The number of values the inputs store: a proxy for a kernel's work.
fn stored(inputs: &[Validated<'_>]) -> usize {
    inputs.iter().map(|t| t.tensor().vals.len()).sum()
}

/// How many threads a run of `k` uses: 1 unless its loop can be shared
/// and the inputs hold enough work; a `Partials` kernel takes no more than
/// the work pays for, each thread beyond the first costing a whole result
/// to zero and add.
pub fn used(
    k: &CompiledKernel,
    inputs: &[Validated<'_>],
    output: &Tensor,
    threads: Threads,
) -> usize {
    let work = stored(inputs);
    let n = threads.count.clamp(1, MAX_THREADS);
    match k.parallel {
        Some(_) if work < threads.min_work => 1,
        Some(Parallel::Rows | Parallel::Stitch) => n,
        Some(Parallel::Partials) => n.min(1 + work / output.dims.iter().product::<usize>().max(1)),
        None => 1,
    }
}

/// Run `k` once on up to `threads.count` threads. `spares` holds the other
/// threads' results of a stitched kernel between runs (their arrays are
/// reused, as the result's are).
pub fn run(
    k: &CompiledKernel,
    inputs: &[Validated<'_>],
    output: &mut Tensor,
    threads: Threads,
    spares: &mut Vec<Tensor>,
) -> Result<(), RunError> {
    match (k.parallel, used(k, inputs, output, threads)) {
        (Some(Parallel::Rows), n) if n > 1 => jit::run_rows(k, inputs, output, n),
        (Some(Parallel::Partials), n) if n > 1 => partials(k, inputs, output, n),
        (Some(Parallel::Stitch), n) if n > 1 => stitch(k, inputs, output, n, spares),
        _ => jit::run_kernel(k, inputs, output),
    }
}

/// A result like `output` with nothing stored: the kernel allocates and
/// zeroes what it writes.
fn empty_like(output: &Tensor) -> Tensor {
    let levels = output
        .levels
        .iter()
        .map(|l| crate::format::level::LevelStorage {
            arrays: l.arrays.keys().map(|&k| (k, Vec::new())).collect(),
            params: l.params.clone(),
        })
        .collect();
    Tensor {
        name: output.name.clone(),
        format: output.format.clone(),
        dims: output.dims.clone(),
        extents: output.extents.clone(),
        levels,
        vals: Vec::new(),
    }
}

/// Run share `t` of `n` into each of `outs` (share 0 into the first), on
/// one thread each.
fn run_shares(
    k: &CompiledKernel,
    inputs: &[Validated<'_>],
    outs: &mut [&mut Tensor],
    n: usize,
) -> Result<(), RunError> {
    let share = |thread: usize| Share {
        thread: thread as i64,
        threads: n as i64,
        phase: 0,
    };
    let (first, rest) = outs
        .split_first_mut()
        .ok_or_else(|| RunError::Shares("no result to run into".into()))?;
    let results: Vec<Result<(), RunError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = rest
            .iter_mut()
            .enumerate()
            .map(|(t, out)| scope.spawn(move || jit::run_share(k, inputs, out, share(t + 1))))
            .collect();
        let mut results = vec![jit::run_share(k, inputs, first, share(0))];
        results.extend(
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(RunError::OutOfMemory))),
        );
        results
    });
    results
        .into_iter()
        .collect::<Result<Vec<()>, _>>()
        .map(|_| ())
}

/// A `Stitch` kernel on `n` threads: each share into an empty result of
/// its own (the old result's arrays reused by share 0), then level by
/// level: a dense first level is the same in every share; the appended
/// level below it combines its shares, and the values follow.
fn stitch(
    k: &CompiledKernel,
    inputs: &[Validated<'_>],
    output: &mut Tensor,
    n: usize,
    spares: &mut Vec<Tensor>,
) -> Result<(), RunError> {
    spares.truncate(n - 1);
    while spares.len() < n - 1 {
        spares.push(empty_like(output));
    }
    let parts = spares;
    {
        let mut outs: Vec<&mut Tensor> = std::iter::once(&mut *output)
            .chain(parts.iter_mut())
            .collect();
        run_shares(k, inputs, &mut outs, n)?;
    }
    let fail =
        |why: String| RunError::Shares(format!("stitching the shares of {}: {why}", output.name));
    let dense_first = output.format.levels.first().is_some_and(|l| l.is_dense());
    let (Some(crate::format::level::Assembly::Append(app)), 2, true) = (
        output.format.levels.get(1).map(|l| l.assembly()),
        output.levels.len(),
        dense_first,
    ) else {
        return Err(fail(
            "the result is not a dense level over an appended one".into(),
        ));
    };
    // The shares keep their arrays for the next run: the stitched level is
    // built from copies of what they hold.
    let first = std::mem::take(&mut output.levels[1]);
    let rest: Vec<&crate::format::level::LevelStorage> =
        parts.iter().map(|p| &p.levels[1]).collect();
    let parents = output.extents[0];
    let (level, sizes) = app
        .stitch_shares()
        .ok_or_else(|| fail("its appended level cannot be stitched".into()))?
        .stitch(first, &rest, parents)
        .map_err(fail)?;
    output.levels[1] = level;
    output.vals.truncate(sizes[0]);
    for (part, &size) in parts.iter().zip(&sizes[1..]) {
        output.vals.extend_from_slice(
            part.vals
                .get(..size)
                .ok_or_else(|| fail("a share holds fewer values than positions".into()))?,
        );
    }
    Ok(())
}

/// A `Partials` kernel on `n` threads.
fn partials(
    k: &CompiledKernel,
    inputs: &[Validated<'_>],
    output: &mut Tensor,
    n: usize,
) -> Result<(), RunError> {
    let mut others: Vec<Tensor> = (1..n).map(|_| empty_like(output)).collect();
    let share = |thread: usize| Share {
        thread: thread as i64,
        threads: n as i64,
        phase: 0,
    };
    let results: Vec<Result<(), RunError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = others
            .iter_mut()
            .enumerate()
            .map(|(t, out)| scope.spawn(move || jit::run_share(k, inputs, out, share(t + 1))))
            .collect();
        let mut results = vec![jit::run_share(k, inputs, output, share(0))];
        results.extend(
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(RunError::OutOfMemory))),
        );
        results
    });
    results.into_iter().collect::<Result<Vec<()>, _>>()?;
    for other in &others {
        if other.vals.len() != output.vals.len() {
            return Err(RunError::Shares(format!(
                "a thread's partial {} holds {} values, the first {}",
                output.name,
                other.vals.len(),
                output.vals.len()
            )));
        }
        for (a, b) in output.vals.iter_mut().zip(&other.vals) {
            *a += *b;
        }
    }
    Ok(())
}
