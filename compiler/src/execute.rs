//! Running a kernel end to end: pack and validate operands, allocate the
//! result, compile, call, and time. Shared by the command line, the tests
//! and the language server.

use crate::coo::CooTensor;
use crate::format::level::LevelStorage;
use crate::format::{CoordMap, TensorFormat};
use crate::jit::{self, CompiledKernel};
use crate::lower::{self, Kernel, LowerError};
use crate::notation::Assignment;
use crate::storage::{self, check_allocation, StorageError, Tensor};
use crate::threads::Threads;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ExecError {
    #[error(transparent)]
    Lower(#[from] LowerError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("JIT: {0}")]
    Jit(String),
    #[error(transparent)]
    Run(#[from] jit::RunError),
}

/// Ready the JIT on a thread of its own while the command line or the
/// language server reads its input: Cranelift's host ISA at both levels
/// and the trampolines, which every compile needs (about 0.5 ms).
pub fn warm_up() {
    WARMING.store(true, Ordering::Relaxed);
    std::thread::spawn(jit::build_shared_pieces);
}

/// Whether `warm_up` has run: the process compiles kernels.
static WARMING: AtomicBool = AtomicBool::new(false);

/// Operand data of at least this many bytes takes long enough to read or
/// generate (10 ms and more) that the throwaway compiles of
/// `warm_up_while_reading` finish before the kernel's compile begins.
const WARM_UP_COMPILES_FROM_BYTES: u64 = 1 << 20;

/// The process is about to read `bytes` of operand data (a file's size,
/// or 16 per entry `random_operand` makes): if that is large and
/// `warm_up` has run, a throwaway compile of one kernel of each kind
/// Cranelift is given (a counted loop at `opt_level=speed`, a merge at
/// `none`), on a thread of its own. A process's first compile otherwise runs cold (Cranelift's code
/// and the allocator's pages not yet touched): a CSR add's took 2.2-4.5 ms
/// against 1.7 ms after the throwaways. They give way to the first real
/// compile (`jit::warm_up_compile`), which waits for the one in progress:
/// two compiles at once ran slower than both in turn (5-7 ms for that add
/// beside one), so with little to read there are none.
pub fn warm_up_while_reading(bytes: u64) {
    static STARTED: std::sync::Once = std::sync::Once::new();
    if bytes < WARM_UP_COMPILES_FROM_BYTES || !WARMING.load(Ordering::Relaxed) {
        return;
    }
    STARTED.call_once(|| {
        std::thread::spawn(|| {
            for (expr, format) in [
                ("y(i) = A(i,j) * x(j)", "CSR"),
                ("C(i,j) = A(i,j) + B(i,j)", "COO"),
            ] {
                if !jit::warm_up_compile(|| warm_up_kernel(expr, format)) {
                    return;
                }
            }
        });
    });
}

/// `expr` lowered with its matrices in `format` (64 x 64) and the rest dense.
fn warm_up_kernel(expr: &str, format: &str) -> Option<crate::ir::Function> {
    let registry = crate::format::Registry::builtin();
    let a = crate::notation::parse_assignment(expr).ok()?;
    let mut formats = BTreeMap::new();
    let mut dims = BTreeMap::new();
    for access in std::iter::once(&a.lhs).chain(a.rhs.accesses()) {
        let order = access.indices.len();
        let f = if order == 2 { format } else { "dense" };
        formats.insert(
            access.tensor.clone(),
            crate::format::parse_format(f, order, &registry).ok()?,
        );
        dims.insert(access.tensor.clone(), vec![64; order]);
    }
    Some(
        lower::compile("warm_up", &a, &formats, &dims)
            .ok()?
            .function,
    )
}

/// Refuse to generate data that cannot fit: `entries` coordinates of an
/// order-`order` tensor.
pub fn check_generated(name: &str, entries: u128, order: usize) -> Result<(), StorageError> {
    check_allocation(name, "the generated data", entries, 4 * order as u128 + 8)
}

/// Random operand data (values in [-1, 1)), refused before allocation when
/// it cannot fit.
pub fn random_operand(
    name: &str,
    dims: &[usize],
    density: f64,
    rng: &mut crate::coo::SplitMix,
) -> Result<CooTensor, StorageError> {
    let total: u128 = dims.iter().map(|&d| d as u128).product();
    let entries = if density >= 1.0 {
        total
    } else {
        (total as f64 * density.max(0.0)) as u128
    };
    check_generated(name, entries, dims.len())?;
    warm_up_while_reading(entries.saturating_mul(16).min(u64::MAX as u128) as u64);
    Ok(CooTensor::random(dims, density, rng))
}

/// An empty result tensor ready for assembly: level parameters chosen,
/// arrays empty (the kernel reserves what it writes).
pub fn prepare_output(
    name: &str,
    format: &TensorFormat,
    dims: &[usize],
    size_hint: usize,
) -> Result<Tensor, StorageError> {
    let extents: Vec<usize> = match &format.map {
        CoordMap::Modes(order) => order.iter().map(|&d| dims[d]).collect(),
        _ => {
            return Err(StorageError::Pack {
                tensor: name.into(),
                reason: format!("{} cannot be assembled as a result", format.display_name()),
            });
        }
    };
    let mut levels = Vec::new();
    let mut positions: u128 = 1;
    let mut all_insert = true;
    for (k, l) in format.levels.iter().enumerate() {
        let mut s = LevelStorage::default();
        for (p, v) in l.output_params(extents[k], size_hint) {
            s.params.insert(p, v);
        }
        for a in l.arrays() {
            s.arrays.insert(a, Vec::new());
        }
        match l.assembly() {
            crate::format::level::Assembly::Insert(_) => {
                positions = positions.saturating_mul(l.output_width(extents[k], size_hint))
            }
            _ => all_insert = false,
        }
        levels.push(s);
    }
    if all_insert {
        check_allocation(name, "the result", positions, 8)?;
    }
    Ok(Tensor {
        name: name.into(),
        format: format.clone(),
        dims: dims.to_vec(),
        extents,
        levels,
        vals: Vec::new(),
    })
}

/// A compiled, ready-to-run kernel with its packed operands.
pub struct Prepared {
    pub kernel: Kernel,
    pub compiled: CompiledKernel,
    pub inputs: Vec<Tensor>,
    pub output: Tensor,
    /// The coordinate buffer the kernel writes when the result is packed
    /// from one (`Kernel::buffer`).
    pub buffer: Option<Tensor>,
    /// How many threads a run may use (default: every core, for kernels
    /// big enough; `Threads::up_to(1)` is one call on the calling thread).
    pub threads: Threads,
    /// The results of the other threads' shares of a stitched kernel
    /// (`ir::Parallel::Stitch`), kept between runs so that their arrays
    /// are reused as the result's are.
    pub shares: Vec<Tensor>,
}

/// What a timed run writes its result into (`Prepared::time`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResultArrays {
    /// The arrays of the run before, grown to size already.
    #[default]
    Reused,
    /// Empty arrays: the run allocates and grows them.
    Fresh,
}

#[derive(Clone, Debug)]
pub struct Timing {
    pub compile: Duration,
    /// The compiling thread's CPU time (`CompiledKernel::compile_cpu`).
    pub compile_cpu: Option<Duration>,
    /// Each run's whole time, what the user waits for.
    pub runs: Vec<Duration>,
    /// The parts of each run spent outside the kernel, run for run.
    pub phases: Vec<Phases>,
}

/// Time a run spends around the kernel itself, inside its timer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Phases {
    /// Converting operands the kernel reads in another format.
    pub convert: Duration,
    /// Packing the result from the coordinate buffer the kernel wrote.
    pub pack: Duration,
}

fn median_of(mut r: Vec<Duration>) -> Duration {
    r.sort();
    r.get(r.len() / 2).copied().unwrap_or_default()
}

impl Timing {
    pub fn median(&self) -> Duration {
        median_of(self.runs.clone())
    }
    pub fn min(&self) -> Duration {
        self.runs.iter().min().copied().unwrap_or_default()
    }
    /// Median time of converting operands, over the runs.
    pub fn median_convert(&self) -> Duration {
        median_of(self.phases.iter().map(|p| p.convert).collect())
    }
    /// Median time of packing the result from its buffer, over the runs.
    pub fn median_pack(&self) -> Duration {
        median_of(self.phases.iter().map(|p| p.pack).collect())
    }
}

/// Pack every operand, compile the kernel, allocate the result.
/// `initial` is the result's current contents for `+=`.
pub fn prepare(
    name: &str,
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    data: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
    initial: Option<&CooTensor>,
) -> Result<Prepared, ExecError> {
    let mut dims: BTreeMap<String, Vec<usize>> = data
        .iter()
        .map(|(k, v)| (k.clone(), v.dims.clone()))
        .collect();
    dims.insert(a.lhs.tensor.clone(), out_dims.to_vec());
    for (tensor, d) in &dims {
        if let Some(n) = d.iter().find(|&&n| n > i32::MAX as usize) {
            return Err(StorageError::Pack {
                tensor: tensor.clone(),
                reason: format!(
                    "dimension {n} does not fit 32-bit coordinates (at most {})",
                    i32::MAX
                ),
            }
            .into());
        }
    }
    let entries: BTreeMap<String, usize> = data.iter().map(|(k, v)| (k.clone(), v.nnz())).collect();
    let mut kernel = lower::compile_for_entries(name, a, formats, &dims, &entries)?;
    let mut inputs = Vec::new();
    let mut hint = 0usize;
    let out_name = &a.lhs.tensor;
    if let Some(prior) = &kernel.prior {
        // The result's old contents, read under their own name.
        let empty = CooTensor::new(out_dims.to_vec());
        let old = initial.or_else(|| data.get(out_name)).unwrap_or(&empty);
        let t = storage::pack(prior, old, &formats[out_name])?;
        storage::validate(&t)?;
        hint += t.vals.len();
        inputs.push(t);
    }
    for acc in a.rhs.accesses() {
        if inputs.iter().any(|t: &Tensor| t.name == acc.tensor)
            || (kernel.prior.is_some() && &acc.tensor == out_name)
        {
            continue;
        }
        let coo = data.get(&acc.tensor).ok_or_else(|| StorageError::Pack {
            tensor: acc.tensor.clone(),
            reason: "no data".into(),
        })?;
        let t = storage::pack(&acc.tensor, coo, &formats[&acc.tensor])?;
        storage::validate(&t)?;
        hint += t.vals.len();
        inputs.push(t);
    }
    kernel.function.lines_of_their_own = sampled_coordinates(&inputs);
    let out_format = &formats[&a.lhs.tensor];
    // A result assembled through a coordinate buffer: the kernel writes the
    // buffer; the result is packed from it after each run.
    let buffer = match &kernel.buffer {
        Some(b) => Some(prepare_output(&b.name, &b.format, out_dims, hint)?),
        None => None,
    };
    if let Some(b) = &buffer {
        fix_params(&mut kernel.function, &inputs, b);
        let compiled = jit::compile(&kernel.function).map_err(ExecError::Jit)?;
        let output = storage::pack(
            &a.lhs.tensor,
            &CooTensor::new(out_dims.to_vec()),
            out_format,
        )?;
        return Ok(Prepared {
            kernel,
            compiled,
            inputs,
            output,
            buffer,
            threads: Threads::default(),
            shares: Vec::new(),
        });
    }
    let output = match initial {
        Some(init) if a.accumulate && kernel.prior.is_none() => {
            // `+=` reads the result's storage too.
            let t = storage::pack(&a.lhs.tensor, init, out_format)?;
            storage::validate(&t)?;
            t
        }
        _ => prepare_output(&a.lhs.tensor, out_format, out_dims, hint)?,
    };
    fix_params(&mut kernel.function, &inputs, &output);
    let compiled = jit::compile(&kernel.function).map_err(ExecError::Jit)?;
    Ok(Prepared {
        kernel,
        compiled,
        inputs,
        output,
        buffer: None,
        threads: Threads::default(),
        shares: Vec::new(),
    })
}

/// Fix the parameters of `f` to the values `inputs` and `output` give
/// them (`Function::fixed_params`): every run of a prepared kernel reads
/// the same data, and the Cranelift tier compiles them in.
fn fix_params(f: &mut crate::ir::Function, inputs: &[Tensor], output: &Tensor) {
    let find = jit::find_tensor(inputs.iter(), output);
    f.fixed_params = f
        .params()
        .into_iter()
        .filter(|p| p.call_name().is_none())
        .filter_map(|p| Some((p.clone(), jit::param_value(&p, &find).ok()?)))
        .collect();
}

/// The stored coordinates of the packed `inputs`, each level's, sampled
/// (`Function::lines_of_their_own`).
fn sampled_coordinates(inputs: &[Tensor]) -> Vec<(crate::ir::Coordinates, f64)> {
    let mut out = Vec::new();
    for t in inputs {
        for (k, format) in t.format.levels.iter().enumerate() {
            let Some(at) = format.stored_coordinates(k) else {
                continue;
            };
            let values = t
                .levels
                .get(at.owner)
                .and_then(|storage| storage.arrays.get(at.array))
                .map_or(&[][..], |v| v.as_slice());
            let share = crate::ir::gathers::field_lines_of_their_own(values, at.stride, at.field);
            if let Some(share) = share {
                let coords = crate::ir::Coordinates {
                    array: crate::ir::ArrayRef::level(&t.name, at.owner, at.array),
                    stride: at.stride as i64,
                    field: at.field as i64,
                };
                out.push((coords, share));
            }
        }
    }
    out
}

impl Prepared {
    /// Run once (validating operands first: cheap, linear).
    pub fn run(&mut self) -> Result<Phases, ExecError> {
        let inputs = self
            .inputs
            .iter()
            .map(storage::validate)
            .collect::<Result<Vec<_>, _>>()?;
        call(
            &self.kernel,
            &self.compiled,
            &inputs,
            &mut self.output,
            &mut self.buffer,
            self.threads,
            &mut self.shares,
        )
    }

    /// `runs` timed runs after one warm-up. With `ResultArrays::Reused`
    /// each run writes into the arrays the run before left (as a caller
    /// timing a kernel in a loop would); with `Fresh` each starts from the
    /// empty result, so growing its arrays is inside the timer.
    pub fn time(&mut self, runs: usize, arrays: ResultArrays) -> Result<Timing, ExecError> {
        check_allocation(
            &self.kernel.function.name,
            "the timing samples",
            runs as u128,
            std::mem::size_of::<Duration>() as u128,
        )?;
        let refs = self
            .inputs
            .iter()
            .map(storage::validate)
            .collect::<Result<Vec<_>, _>>()?;
        // A kernel that reads its prior contents as an operand rebuilds the
        // result; one that updates in place starts each run from the same state.
        let accumulate = self.kernel.assignment.accumulate && self.kernel.prior.is_none();
        // The states runs start from, kept only where a run restores them.
        let fresh = arrays == ResultArrays::Fresh;
        let initial = (accumulate || fresh).then(|| self.output.clone());
        let initial_buffer = fresh.then(|| self.buffer.clone());
        call(
            &self.kernel,
            &self.compiled,
            &refs,
            &mut self.output,
            &mut self.buffer,
            self.threads,
            &mut self.shares,
        )?;
        let mut times = Vec::with_capacity(runs);
        let mut phases = Vec::with_capacity(runs);
        for _ in 0..runs {
            // The previous run's arrays are dropped here, outside the timer.
            if let Some(initial) = &initial {
                self.output = initial.clone();
            }
            if let Some(initial_buffer) = &initial_buffer {
                self.buffer = initial_buffer.clone();
            }
            let t0 = Instant::now();
            phases.push(call(
                &self.kernel,
                &self.compiled,
                &refs,
                &mut self.output,
                &mut self.buffer,
                self.threads,
                &mut self.shares,
            )?);
            times.push(t0.elapsed());
        }
        Ok(Timing {
            compile: self.compiled.compile_time,
            compile_cpu: self.compiled.compile_cpu,
            runs: times,
            phases,
        })
    }

    /// How many threads a run uses (`threads::used`).
    pub fn threads_used(&self) -> Result<usize, ExecError> {
        if self.kernel.result_is_copy {
            // The conversion runs; the kernel does not.
            return Ok(1);
        }
        let mut inputs = self
            .inputs
            .iter()
            .map(storage::validate)
            .collect::<Result<Vec<_>, _>>()?;
        let copies = converted_operands(&self.kernel, &inputs)?;
        for c in &copies {
            inputs.push(storage::validate(c)?);
        }
        let output = self.buffer.as_ref().unwrap_or(&self.output);
        Ok(crate::threads::used(
            &self.compiled,
            &inputs,
            output,
            self.threads,
        ))
    }

    /// The result's stored entries, in storage order, as columns: read by
    /// its levels' `ColumnUnpack` where they can (a dense result of 42M
    /// entries in a fraction of a second, borrowing its values), by the
    /// level functions in the interpreter otherwise (`storage::unpack`,
    /// which `tests/pack_paths.rs` holds the columns to).
    pub fn result_entries(&self) -> Result<storage::Entries<'_>, StorageError> {
        storage::Entries::of(&self.output)
    }

    /// The values of the result's stored entries, without their
    /// coordinates (`Entries::stored_values`): what a summary needs.
    pub fn result_values(&self) -> Result<std::borrow::Cow<'_, [f64]>, StorageError> {
        storage::Entries::stored_values(&self.output)
    }

    /// The result's stored entries as a coordinate list.
    pub fn result(&self) -> Result<CooTensor, StorageError> {
        self.result_entries()?
            .to_coo()
            .map_err(|reason| StorageError::Pack {
                tensor: self.output.name.clone(),
                reason,
            })
    }
}

/// The copies of operands a kernel reads in another format
/// (`Kernel::conversions`), converted from the packed operands.
fn converted_operands(
    kernel: &Kernel,
    inputs: &[storage::Validated<'_>],
) -> Result<Vec<Tensor>, ExecError> {
    let mut copies: Vec<Tensor> = Vec::with_capacity(kernel.conversions.len());
    for c in &kernel.conversions {
        // A copy may be made from an earlier copy (an operand converted
        // for one refusal, that copy converted again for a loop order).
        let source = copies
            .iter()
            .chain(inputs.iter().map(|v| v.tensor()))
            .find(|t| t.name == c.source)
            .ok_or_else(|| StorageError::Pack {
                tensor: c.source.clone(),
                reason: "no data".into(),
            })?;
        let copy = storage::convert(source, &c.copy, &c.format)?;
        copies.push(copy);
    }
    Ok(copies)
}

/// One call of the kernel (on up to `threads` threads): operands it reads
/// in another format are converted first (inside the timer: the user pays for them), and a
/// result written through a coordinate buffer is packed after (the kernel
/// writes the buffer; the result is rebuilt from it).
/// Returns how long the conversions and the packing took.
fn call(
    kernel: &Kernel,
    compiled: &CompiledKernel,
    inputs: &[storage::Validated<'_>],
    output: &mut Tensor,
    buffer: &mut Option<Tensor>,
    threads: Threads,
    shares: &mut Vec<Tensor>,
) -> Result<Phases, ExecError> {
    if kernel.result_is_copy {
        return convert_into_result(kernel, inputs, output);
    }
    if !kernel.conversions.is_empty() {
        let t0 = Instant::now();
        let copies = converted_operands(kernel, inputs)?;
        let mut all = inputs.to_vec();
        // Built by the packer: valid by construction.
        all.extend(copies.iter().map(storage::Validated::packed));
        let convert = t0.elapsed();
        let pack = call_converted(compiled, &all, output, buffer, threads, shares)?;
        return Ok(Phases { convert, pack });
    }
    let pack = call_converted(compiled, inputs, output, buffer, threads, shares)?;
    Ok(Phases {
        convert: Duration::ZERO,
        pack,
    })
}

/// A kernel that only copies its one converted operand
/// (`Kernel::result_is_copy`): the operand is converted straight into the
/// result's arrays (reusing the old result's), and the copy is skipped.
fn convert_into_result(
    kernel: &Kernel,
    inputs: &[storage::Validated<'_>],
    output: &mut Tensor,
) -> Result<Phases, ExecError> {
    let t0 = Instant::now();
    let [c] = kernel.conversions.as_slice() else {
        return Err(StorageError::Pack {
            tensor: output.name.clone(),
            reason: "internal: a copied result needs exactly one conversion".into(),
        }
        .into());
    };
    let source = inputs
        .iter()
        .map(|v| v.tensor())
        .find(|t| t.name == c.source)
        .ok_or_else(|| StorageError::Pack {
            tensor: c.source.clone(),
            reason: "no data".into(),
        })?;
    let mut scratch = storage::Scratch::reclaim(output);
    let copy = storage::pack_entries_reusing(
        &output.name,
        storage::Entries::of(source)?,
        &c.format,
        &mut scratch,
    )?;
    // The copy's levels are the result's, each storing the same variable:
    // its arrays are the result's storage.
    output.levels = copy.levels;
    output.vals = copy.vals;
    Ok(Phases {
        convert: t0.elapsed(),
        pack: Duration::ZERO,
    })
}

/// Run the kernel; returns how long packing its buffer took (zero without one).
fn call_converted(
    compiled: &CompiledKernel,
    inputs: &[storage::Validated<'_>],
    output: &mut Tensor,
    buffer: &mut Option<Tensor>,
    threads: Threads,
    shares: &mut Vec<Tensor>,
) -> Result<Duration, ExecError> {
    match buffer {
        None => {
            crate::threads::run(compiled, inputs, output, threads, shares)?;
            Ok(Duration::ZERO)
        }
        Some(buffer) => {
            jit::run_kernel(compiled, inputs, buffer)?;
            let t0 = Instant::now();
            *output = pack_buffer(buffer, output)?;
            Ok(t0.elapsed())
        }
    }
}

/// The result packed from a coordinate buffer: its entries in any order,
/// duplicates summed, stored in the result's format. The buffer's columns
/// are read in place (its levels lend their coordinate arrays), and the old
/// result's arrays are reused for the new one (`result` is left empty).
fn pack_buffer(buffer: &Tensor, result: &mut Tensor) -> Result<Tensor, StorageError> {
    let mut entries = storage::Entries::of(buffer)?;
    entries.dims = result.dims.clone();
    let mut scratch = storage::Scratch::reclaim(result);
    storage::pack_entries_reusing(&result.name, entries, &result.format, &mut scratch)
}

/// Memory for running a kernel in the IR interpreter: inputs read-only,
/// the result's arrays growable. The reference for the JIT's behaviour.
struct InterpMemory<'a> {
    inputs: &'a [Tensor],
    output: &'a mut Tensor,
    lens: BTreeMap<crate::ir::ArrayRef, usize>,
    /// The kernel's scratch arrays (a workspace row), zero when grown.
    scratch: BTreeMap<crate::ir::ArrayRef, Vec<crate::ir::interp::Value>>,
}

impl crate::ir::interp::Memory for InterpMemory<'_> {
    fn param(&self, p: &crate::ir::ParamRef) -> Result<i64, String> {
        let t = if *p.tensor == *self.output.name {
            &*self.output
        } else {
            self.inputs
                .iter()
                .find(|t| *t.name == *p.tensor)
                .ok_or("unknown tensor")?
        };
        storage::TensorMemoryView(t).param(p)
    }
    fn load(&self, a: &crate::ir::ArrayRef, i: i64) -> Result<crate::ir::interp::Value, String> {
        if let Some(v) = self.scratch.get(a) {
            return usize::try_from(i)
                .ok()
                .and_then(|i| v.get(i).copied())
                .ok_or_else(|| format!("load beyond {}", a.c_name()));
        }
        let t = if *a.tensor == *self.output.name {
            &*self.output
        } else {
            self.inputs
                .iter()
                .find(|t| *t.name == *a.tensor)
                .ok_or("unknown tensor")?
        };
        storage::TensorMemoryView(t).load(a, i)
    }
    fn store(
        &mut self,
        a: &crate::ir::ArrayRef,
        i: i64,
        v: crate::ir::interp::Value,
    ) -> Result<(), String> {
        // Scratch arrays (a workspace row, a temporary) belong to the call.
        if *a.tensor != *self.output.name && !matches!(a.slot, crate::ir::Slot::Scratch(..)) {
            return Err(format!("store into input {}", a.c_name()));
        }
        let i = usize::try_from(i).map_err(|_| "negative index")?;
        match &a.slot {
            crate::ir::Slot::Vals => {
                *self
                    .output
                    .vals
                    .get_mut(i)
                    .ok_or_else(|| format!("store beyond {}", a.c_name()))? = v.float()?
            }
            crate::ir::Slot::Level(k, name) => {
                let arr = self.output.levels[*k]
                    .arrays
                    .get_mut(name)
                    .ok_or("no array")?;
                *arr.get_mut(i)
                    .ok_or_else(|| format!("store beyond {}", a.c_name()))? = v.int()? as i32;
            }
            crate::ir::Slot::Scratch(..) => {
                *self
                    .scratch
                    .get_mut(a)
                    .and_then(|s| s.get_mut(i))
                    .ok_or_else(|| format!("store beyond {}", a.c_name()))? = v;
            }
        }
        Ok(())
    }
    fn reserve(&mut self, a: &crate::ir::ArrayRef, len: i64) -> Result<(), String> {
        let e = self.lens.entry(a.clone()).or_insert(0);
        *e = (*e).max(len.max(0) as usize);
        self.reserve_ahead(a, len)
    }
    fn reserve_ahead(&mut self, a: &crate::ir::ArrayRef, len: i64) -> Result<(), String> {
        let len = len.max(0) as usize;
        match &a.slot {
            crate::ir::Slot::Vals => {
                if self.output.vals.len() < len {
                    self.output.vals.resize(len, 0.0)
                }
            }
            crate::ir::Slot::Level(k, name) => {
                let arr = self.output.levels[*k].arrays.entry(name).or_default();
                if arr.len() < len {
                    arr.resize(len, 0);
                }
            }
            crate::ir::Slot::Scratch(_, ty) => {
                let zero = match ty {
                    crate::ir::ElemTy::I32 => crate::ir::interp::Value::I(0),
                    crate::ir::ElemTy::F64 => crate::ir::interp::Value::F(0.0),
                };
                let s = self.scratch.entry(a.clone()).or_default();
                if s.len() < len {
                    s.resize(len, zero);
                }
            }
        }
        Ok(())
    }
}

impl Prepared {
    /// Run the kernel's loop IR in the interpreter instead of the JIT
    /// (bounds-checked; for testing the JIT against the IR): the IR the
    /// Cranelift tier translates, after `ir::passes`, so that every array
    /// access of the code that runs is checked.
    pub fn run_interpreted(&mut self) -> Result<(), String> {
        self.run_interpreted_as(crate::ir::passes::Backend::Cranelift)
    }

    /// `run_interpreted` on the IR `backend` translates (the C's sums
    /// dense rows in strips, `ir::strips`).
    pub fn run_interpreted_as(
        &mut self,
        backend: crate::ir::passes::Backend,
    ) -> Result<(), String> {
        let f = &crate::ir::passes::for_codegen(&self.kernel.function, backend);
        let target = match &mut self.buffer {
            Some(b) => b,
            None => &mut self.output,
        };
        let validated = self
            .inputs
            .iter()
            .map(storage::validate)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let mut inputs = converted_operands(&self.kernel, &validated).map_err(|e| e.to_string())?;
        inputs.extend(self.inputs.iter().cloned());
        let mut mem = InterpMemory {
            inputs: &inputs,
            output: target,
            lens: BTreeMap::new(),
            scratch: BTreeMap::new(),
        };
        let mut it = crate::ir::interp::Interp::new(f.vars.len(), &mut mem);
        it.fuel = 1 << 32;
        it.run(&f.body)?;
        let lens = std::mem::take(&mut mem.lens);
        let target = match &mut self.buffer {
            Some(b) => b,
            None => &mut self.output,
        };
        for (a, len) in lens {
            match &a.slot {
                crate::ir::Slot::Vals => target.vals.truncate(len),
                crate::ir::Slot::Level(k, name) => {
                    if let Some(v) = target.levels[*k].arrays.get_mut(name) {
                        v.truncate(len)
                    }
                }
                _ => {}
            }
        }
        if let Some(b) = &self.buffer {
            self.output = pack_buffer(b, &mut self.output).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
