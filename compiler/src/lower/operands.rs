//! The operands of a kernel: each tensor access with its format, and the
//! index variable every one of its levels iterates. Formats with more levels
//! than dimensions bring hidden variables private to the access; blocked
//! formats compute the user's variables from them (derived variables).

use super::ids::OperandId;
use super::vars::{IndexVar, IndexVars, VarKind};
use super::LowerError;
use crate::format::{LevelVar, TensorFormat};
use crate::ir::{Expr, ParamRef};
use crate::notation::{Access, Assignment};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub struct Operand {
    /// Position in `Problem::operands`; the output is operand 0.
    pub id: OperandId,
    pub tensor: String,
    pub format: TensorFormat,
    /// The variable each level iterates, outermost level first.
    pub level_vars: Vec<IndexVar>,
    /// The variable written for each dimension of the access.
    pub dim_vars: Vec<IndexVar>,
    pub output: bool,
    pub access: Access,
}

impl Operand {
    pub fn describe(&self) -> String {
        format!("{} ({})", self.access, self.format.display_name())
    }
    /// Whether every level can be located (dense, hashed): such an operand
    /// need not constrain the loop order.
    pub fn fully_locatable(&self) -> bool {
        self.format.levels.iter().all(|l| l.locate().is_some())
    }
    pub fn level_name(&self, k: usize) -> String {
        format!("{}{} {}", self.tensor, k + 1, self.format.levels[k].spec())
    }
}

#[derive(Clone, Debug)]
pub struct Problem {
    pub assignment: Assignment,
    pub operands: Vec<Operand>,
    /// Every index variable: the user's, the hidden ones of each access.
    pub vars: IndexVars,
    pub assembly: ResultAssembly,
}

/// How the result is assembled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultAssembly {
    /// Level by level, in the order the loops produce coordinates.
    Direct,
    /// The last level through a workspace row with a list of the
    /// coordinates touched, flushed (sorted when the level is ordered) each
    /// time the level above is done: coordinates may arrive in any order and
    /// more than once (Gustavson's SpGEMM; taco's precompute, MLIR's
    /// expand/compress).
    Workspace(Row),
    /// The result is a coordinate buffer packed after the kernel: entries
    /// may be appended in any order and more than once.
    Buffer,
}

/// The workspace row of `ResultAssembly::Workspace` (`lower/workspace.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Row {
    /// Values and touched flags over the level's whole extent.
    Dense,
    /// A hash table of the coordinates touched: memory follows the row's
    /// entries, for a level too wide for a dense row.
    Hashed,
}

impl ResultAssembly {
    /// Whether the result takes coordinates in any order, so that its
    /// levels impose no loop order.
    pub fn any_order(self) -> bool {
        self != ResultAssembly::Direct
    }
    pub fn is_workspace(self) -> bool {
        matches!(self, ResultAssembly::Workspace(_))
    }
}

impl Problem {
    pub fn output(&self) -> &Operand {
        &self.operands[0]
    }
    pub fn inputs(&self) -> &[Operand] {
        &self.operands[1..]
    }
    /// A variable the loops sum over: neither a result variable nor a
    /// hidden one (summed with its access).
    pub fn is_reduction(&self, v: IndexVar) -> bool {
        !self.output().level_vars.contains(&v) && !self.vars.is_hidden(v)
    }
    /// The reduction variables the statement names, in order of first use.
    pub fn reduction_vars(&self) -> Vec<IndexVar> {
        self.vars.ids().filter(|&v| self.is_reduction(v)).collect()
    }
    /// The name `v` is shown by (IR variables are named after it).
    pub fn name(&self, v: IndexVar) -> &str {
        self.vars.name(v)
    }
}

/// Build the operands of `a` given each tensor's format and dimensions.
pub fn resolve(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
) -> Result<Problem, LowerError> {
    let mut operands = Vec::new();
    let mut vars = IndexVars::default();
    // Each user variable by name, with the extent it was first given and
    // the access that gave it (for a mismatch's message).
    let mut user: BTreeMap<String, (IndexVar, usize, String)> = BTreeMap::new();
    let accesses: Vec<(&Access, bool)> = std::iter::once((&a.lhs, true))
        .chain(a.rhs.accesses().into_iter().map(|x| (x, false)))
        .collect();
    let mut seen_tensors: BTreeMap<String, usize> = BTreeMap::new();
    for (id, (acc, output)) in accesses.into_iter().enumerate() {
        let format =
            formats
                .get(&acc.tensor)
                .cloned()
                .ok_or_else(|| LowerError::UnknownTensor {
                    name: acc.tensor.clone(),
                    span: acc.span,
                })?;
        let tdims = dims
            .get(&acc.tensor)
            .cloned()
            .ok_or_else(|| LowerError::UnknownTensor {
                name: acc.tensor.clone(),
                span: acc.span,
            })?;
        if tdims.len() != acc.indices.len() || format.order() != acc.indices.len() {
            return Err(LowerError::Arity {
                access: acc.to_string(),
                order: tdims.len().max(format.order()),
                indices: acc.indices.len(),
                span: acc.span,
            });
        }
        let mut dim_vars = Vec::new();
        for (d, idx) in acc.indices.iter().enumerate() {
            let n = tdims[d];
            match user.get(&idx.name) {
                Some((_, m, other)) if *m != n => {
                    return Err(LowerError::Shape {
                        var: idx.name.clone(),
                        first: format!("{other} gives {m}"),
                        second: format!("{} gives {n}", acc),
                        span: idx.span,
                    })
                }
                Some((v, _, _)) => dim_vars.push(*v),
                None => {
                    let v = vars.add(
                        idx.name.clone(),
                        VarKind::User,
                        Expr::Param(ParamRef::dim(&acc.tensor, d)),
                    );
                    user.insert(idx.name.clone(), (v, n, acc.to_string()));
                    dim_vars.push(v);
                }
            }
        }
        // Repeated uses of one tensor show distinct hidden variable names.
        let nth = seen_tensors.entry(acc.tensor.clone()).or_insert(0);
        *nth += 1;
        let suffix = if *nth > 1 {
            format!("{}{}", acc.tensor, nth)
        } else {
            acc.tensor.clone()
        };
        let mut level_vars = Vec::new();
        let mut hidden_levels = false;
        for k in 0..format.levels.len() {
            match format.map.level_var(k) {
                LevelVar::Dim(d) => level_vars.push(dim_vars[d]),
                LevelVar::Hidden(h) => {
                    hidden_levels = true;
                    let extent = Expr::Param(ParamRef::level(&acc.tensor, k, "N"));
                    level_vars.push(vars.add(
                        format!("{h}{suffix}"),
                        VarKind::Hidden {
                            operand: OperandId(id),
                            level: k,
                        },
                        extent,
                    ));
                }
            }
        }
        let derivations = format.map.derived();
        for d in &derivations {
            let var = dim_vars[d.dim];
            if vars.derivation(var).is_some() {
                return Err(LowerError::Unsupported {
                    reason: format!("index `{}` would be computed from the blocks of two operands; store one of them in a format without blocks", vars.name(var)),
                    span: acc.span,
                });
            }
            vars.derive(var, level_vars[d.outer], level_vars[d.inner], d.b as i64);
        }
        if output && (!derivations.is_empty() || hidden_levels) {
            return Err(LowerError::Unsupported {
                reason: format!("the result {} cannot be assembled in {}: formats with hidden levels are input-only", acc, format.display_name()),
                span: acc.span,
            });
        }
        operands.push(Operand {
            id: OperandId(id),
            tensor: acc.tensor.clone(),
            format,
            level_vars,
            dim_vars,
            output,
            access: acc.clone(),
        });
    }
    for v in a.lhs.vars() {
        if !a.rhs.vars().iter().any(|r| r == v) && !user.contains_key(v) {
            return Err(LowerError::Unsupported {
                reason: format!("index `{v}` of the result appears nowhere else"),
                span: a.lhs.span,
            });
        }
    }
    Ok(Problem {
        assignment: a.clone(),
        operands,
        vars,
        assembly: ResultAssembly::Direct,
    })
}
