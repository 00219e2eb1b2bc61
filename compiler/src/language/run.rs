//! Running a `.tensor` kernel: gather each tensor's data (files, or
//! generated from its source), then compile and run the statements in
//! order, each result feeding the statements after it.

use super::db::{compile_kernel, resolve_kernel, Db, Name, SourceFile};
use super::sources::{generate_data, load_file};
use crate::backend::TierPolicy;
use crate::coo::{CooTensor, SplitMix};
use crate::execute::{prepare, Timing};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Debug)]
pub struct StatementRun {
    pub statement: String,
    pub result: String,
    pub dims: Vec<usize>,
    pub nnz: usize,
    pub checksum: f64,
    pub timing: Timing,
    /// Bytes the kernel's operands occupy (for an effective GB/s figure).
    pub bytes: usize,
    /// Threads its runs used (1 when its outermost loop is not shared).
    pub threads: usize,
    /// The backend tier that ran it.
    pub tier: crate::jit::Tier,
}

#[derive(Clone, Debug)]
pub struct KernelRun {
    pub kernel: String,
    pub statements: Vec<StatementRun>,
    /// A statement ran on Cranelift where a cc build, not yet cached,
    /// would serve later runs (`TierPolicy::worth_building`).
    pub cc_worth_building: bool,
}

impl KernelRun {
    pub fn median_ms(&self) -> f64 {
        self.statements
            .iter()
            .map(|s| s.timing.median().as_secs_f64() * 1e3)
            .sum()
    }
    /// The tiers that ran the statements: `cc`, `cranelift`, or both
    /// (`cc+cranelift`).
    pub fn tiers(&self) -> String {
        let mut names: Vec<&str> = self.statements.iter().map(|s| s.tier.name()).collect();
        names.sort_unstable();
        names.dedup();
        names.join("+")
    }
    pub fn gbytes_per_s(&self) -> f64 {
        let bytes: usize = self.statements.iter().map(|s| s.bytes).sum();
        let secs: f64 = self
            .statements
            .iter()
            .map(|s| s.timing.median().as_secs_f64())
            .sum();
        if secs > 0.0 {
            bytes as f64 / secs / 1e9
        } else {
            0.0
        }
    }
}

fn tensor_bytes(t: &crate::storage::Tensor) -> usize {
    t.vals.len() * 8
        + t.levels
            .iter()
            .flat_map(|l| l.arrays.values())
            .map(|a| a.len() * 4)
            .sum::<usize>()
}

/// Data for every input of the kernel: files through the database,
/// generated sources seeded per tensor, zero tensors for results.
fn gather(
    db: &dyn Db,
    resolved: &super::db::Resolved,
) -> Result<BTreeMap<String, CooTensor>, String> {
    let mut data = BTreeMap::new();
    for (name, src) in &resolved.sources {
        let dims = resolved.dims.get(name).cloned().unwrap_or_default();
        let t = match (resolved.data_paths.get(name), src) {
            (Some(path), _) => load_file(db, db.data_file(path))?.as_ref().clone(),
            (None, Some(src)) => {
                generate_data(src, &dims).map_err(|e| format!("tensor `{name}`: {e}"))?
            }
            (None, None) => crate::execute::random_operand(
                name,
                &dims,
                1.0,
                &mut SplitMix(name.bytes().map(u64::from).sum()),
            )
            .map_err(|e| e.to_string())?,
        };
        data.insert(name.clone(), t);
    }
    Ok(data)
}

/// Run kernel `name` of `file`: `runs` timed runs per statement after a
/// warm-up, each on up to `threads`, on the tier `tiers` picks. `cancel`
/// stops between statements.
pub fn run_kernel(
    db: &dyn Db,
    file: SourceFile,
    name: &str,
    runs: usize,
    threads: crate::threads::Threads,
    tiers: TierPolicy,
    cancel: &AtomicBool,
) -> Result<KernelRun, String> {
    let key = Name::new(db, name.to_string());
    let resolved = resolve_kernel(db, file, key)
        .as_ref()
        .map_err(|ps| {
            ps.iter()
                .map(|p| p.message.clone())
                .collect::<Vec<_>>()
                .join("; ")
        })?
        .clone();
    let compiled = compile_kernel(db, file, key).as_ref().map_err(|ps| {
        ps.iter()
            .map(|p| p.message.clone())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let mut data = gather(db, &resolved)?;
    let mut out = KernelRun {
        kernel: name.to_string(),
        statements: Vec::new(),
        cc_worth_building: false,
    };
    for k in &compiled.statements {
        if cancel.load(Ordering::Relaxed) {
            return Err("cancelled".into());
        }
        let a = &k.assignment;
        let out_name = a.lhs.tensor.clone();
        let out_dims = resolved.dims.get(&out_name).cloned().unwrap_or_default();
        let inputs: BTreeMap<String, CooTensor> = a
            .rhs
            .accesses()
            .iter()
            .filter_map(|acc| {
                data.get(&acc.tensor)
                    .map(|t| (acc.tensor.clone(), t.clone()))
            })
            .collect();
        let initial = data.get(&out_name).cloned();
        let mut p = prepare(
            name,
            a,
            &resolved.formats,
            &inputs,
            &out_dims,
            initial.as_ref(),
        )
        .map_err(|e| e.to_string())?;
        p.threads = threads;
        if let Some(code) = tiers.cc_code(&p.kernel.function)? {
            p.compiled = code;
        }
        out.cc_worth_building |= tiers.worth_building(&p.kernel.function);
        let tier = p.compiled.tier;
        let timing = p
            .time(runs.max(1), crate::execute::ResultArrays::Reused)
            .map_err(|e| e.to_string())?;
        let threads = p.threads_used().map_err(|e| e.to_string())?;
        let bytes = p.inputs.iter().map(tensor_bytes).sum::<usize>() + tensor_bytes(&p.output);
        let result = p.result().map_err(|e| e.to_string())?;
        out.statements.push(StatementRun {
            statement: a.to_string(),
            result: out_name.clone(),
            dims: out_dims,
            nnz: result.nnz(),
            checksum: result.vals.iter().sum(),
            timing,
            bytes,
            threads,
            tier,
        });
        data.insert(out_name, result);
    }
    Ok(out)
}

/// Build (into the on-disk cache) the cc tier of every statement of kernel
/// `name` that has none yet, as its runs would compile it; the number
/// built. Statements run in order so that each sees its inputs.
pub fn build_cc_tier(
    db: &dyn Db,
    file: SourceFile,
    name: &str,
    cancel: &AtomicBool,
) -> Result<usize, String> {
    let key = Name::new(db, name.to_string());
    let resolved = resolve_kernel(db, file, key)
        .as_ref()
        .map_err(|ps| {
            ps.iter()
                .map(|p| p.message.clone())
                .collect::<Vec<_>>()
                .join("; ")
        })?
        .clone();
    let compiled = compile_kernel(db, file, key).as_ref().map_err(|ps| {
        ps.iter()
            .map(|p| p.message.clone())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let mut data = gather(db, &resolved)?;
    let mut built = 0;
    for k in &compiled.statements {
        if cancel.load(Ordering::Relaxed) {
            return Err("cancelled".into());
        }
        let a = &k.assignment;
        let out_dims = resolved
            .dims
            .get(&a.lhs.tensor)
            .cloned()
            .unwrap_or_default();
        let inputs: BTreeMap<String, CooTensor> = a
            .rhs
            .accesses()
            .iter()
            .filter_map(|acc| {
                data.get(&acc.tensor)
                    .map(|t| (acc.tensor.clone(), t.clone()))
            })
            .collect();
        let initial = data.get(&a.lhs.tensor).cloned();
        let mut p = prepare(
            name,
            a,
            &resolved.formats,
            &inputs,
            &out_dims,
            initial.as_ref(),
        )
        .map_err(|e| e.to_string())?;
        if !crate::backend::cc::is_cached(&p.kernel.function) {
            crate::backend::cc::build(&p.kernel.function)?;
            built += 1;
        }
        // Later statements read this one's result.
        p.run().map_err(|e| e.to_string())?;
        data.insert(a.lhs.tensor.clone(), p.result().map_err(|e| e.to_string())?);
    }
    Ok(built)
}
