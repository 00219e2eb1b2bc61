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
use std::collections::BTreeMap;
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

/// An empty result tensor ready for assembly: level parameters chosen,
/// arrays empty (the kernel reserves what it writes).
pub fn prepare_output(name: &str, format: &TensorFormat, dims: &[usize], size_hint: usize) -> Result<Tensor, StorageError> {
    let extents: Vec<usize> = match &format.map {
        CoordMap::Modes(order) => order.iter().map(|&d| dims[d]).collect(),
        _ => {
            return Err(StorageError::Pack { tensor: name.into(), reason: format!("{} cannot be assembled as a result", format.display_name()) });
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
                let width = s.params.get("N").or_else(|| s.params.get("W")).copied().unwrap_or(extents[k] as i64);
                positions = positions.saturating_mul(width.max(0) as u128);
            }
            _ => all_insert = false,
        }
        levels.push(s);
    }
    if all_insert {
        check_allocation(name, "the result", positions, 8)?;
    }
    Ok(Tensor { name: name.into(), format: format.clone(), dims: dims.to_vec(), extents, levels, vals: Vec::new() })
}

/// A compiled, ready-to-run kernel with its packed operands.
pub struct Prepared {
    pub kernel: Kernel,
    pub compiled: CompiledKernel,
    pub inputs: Vec<Tensor>,
    pub output: Tensor,
}

#[derive(Clone, Debug)]
pub struct Timing {
    pub compile: Duration,
    pub runs: Vec<Duration>,
}

impl Timing {
    pub fn median(&self) -> Duration {
        let mut r = self.runs.clone();
        r.sort();
        r.get(r.len() / 2).copied().unwrap_or_default()
    }
    pub fn min(&self) -> Duration {
        self.runs.iter().min().copied().unwrap_or_default()
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
    let mut dims: BTreeMap<String, Vec<usize>> = data.iter().map(|(k, v)| (k.clone(), v.dims.clone())).collect();
    dims.insert(a.lhs.tensor.clone(), out_dims.to_vec());
    let kernel = lower::compile(name, a, formats, &dims)?;
    let mut inputs = Vec::new();
    let mut hint = 0usize;
    for acc in a.rhs.accesses() {
        if inputs.iter().any(|t: &Tensor| t.name == acc.tensor) {
            continue;
        }
        let coo = data.get(&acc.tensor).ok_or_else(|| StorageError::Pack { tensor: acc.tensor.clone(), reason: "no data".into() })?;
        let t = storage::pack(&acc.tensor, coo, &formats[&acc.tensor])?;
        storage::validate(&t)?;
        hint += t.vals.len();
        inputs.push(t);
    }
    let out_format = &formats[&a.lhs.tensor];
    let output = match initial {
        Some(init) if a.accumulate => storage::pack(&a.lhs.tensor, init, out_format)?,
        _ => prepare_output(&a.lhs.tensor, out_format, out_dims, hint)?,
    };
    let compiled = jit::compile(&kernel.function).map_err(ExecError::Jit)?;
    Ok(Prepared { kernel, compiled, inputs, output })
}

impl Prepared {
    /// Run once (validating operands first: cheap, linear).
    pub fn run(&mut self) -> Result<(), ExecError> {
        for t in &self.inputs {
            storage::validate(t)?;
        }
        let refs: Vec<&Tensor> = self.inputs.iter().collect();
        jit::run_kernel(&self.compiled, &refs, &mut self.output)?;
        Ok(())
    }

    /// `runs` timed runs after one warm-up; the result is reused across
    /// runs (as a caller timing a kernel in a loop would).
    pub fn time(&mut self, runs: usize) -> Result<Timing, ExecError> {
        for t in &self.inputs {
            storage::validate(t)?;
        }
        let refs: Vec<&Tensor> = self.inputs.iter().collect();
        let accumulate = self.kernel.assignment.accumulate;
        let initial = self.output.clone();
        jit::run_kernel(&self.compiled, &refs, &mut self.output)?;
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            if accumulate {
                self.output = initial.clone();
            }
            let t0 = Instant::now();
            jit::run_kernel(&self.compiled, &refs, &mut self.output)?;
            times.push(t0.elapsed());
        }
        Ok(Timing { compile: self.compiled.compile_time, runs: times })
    }

    pub fn result(&self) -> Result<CooTensor, StorageError> {
        storage::unpack(&self.output)
    }
}
