//! The operands of a kernel: each tensor access with its format, and the
//! index variable every one of its levels iterates. Formats with more levels
//! than dimensions bring hidden variables private to the access; blocked
//! formats compute the user's variables from them (derived variables).

use super::ids::OperandId;
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
    pub level_vars: Vec<String>,
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

/// A variable private to one access: the coordinate of a level that has no
/// dimension of its own (DIA's diagonal, a blocked format's block-internal
/// variables). Its name, unique in the kernel, carries the tensor's name.
#[derive(Clone, Debug, PartialEq)]
pub struct HiddenVar {
    pub name: String,
    pub operand: OperandId,
    pub level: usize,
}

/// A user variable computed from two hidden block variables:
/// `var = outer * b + inner`.
#[derive(Clone, Debug)]
pub struct Derivation {
    pub var: String,
    pub outer: String,
    pub inner: String,
    pub b: i64,
}

#[derive(Clone, Debug)]
pub struct Problem {
    pub assignment: Assignment,
    pub operands: Vec<Operand>,
    pub derived: Vec<Derivation>,
    /// Extent of each variable as an IR expression (a tensor dimension or a
    /// level's size parameter).
    pub extents: BTreeMap<String, Expr>,
    pub hidden: Vec<HiddenVar>,
    pub assembly: ResultAssembly,
}

/// How the result is assembled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultAssembly {
    /// Level by level, in the order the loops produce coordinates.
    Direct,
    /// The last level through a dense workspace row with a list of the
    /// coordinates touched, flushed (sorted when the level is ordered) each
    /// time the level above is done: coordinates may arrive in any order and
    /// more than once (Gustavson's SpGEMM; taco's precompute, MLIR's
    /// expand/compress).
    Workspace,
    /// The result is a coordinate buffer packed after the kernel: entries
    /// may be appended in any order and more than once.
    Buffer,
}

impl ResultAssembly {
    /// Whether the result takes coordinates in any order, so that its
    /// levels impose no loop order.
    pub fn any_order(self) -> bool {
        self != ResultAssembly::Direct
    }
}

impl Problem {
    pub fn output(&self) -> &Operand {
        &self.operands[0]
    }
    pub fn inputs(&self) -> &[Operand] {
        &self.operands[1..]
    }
    pub fn derivation(&self, var: &str) -> Option<&Derivation> {
        self.derived.iter().find(|d| d.var == var)
    }
    pub fn is_reduction(&self, var: &str) -> bool {
        !self.output().level_vars.iter().any(|v| v == var) && !self.is_hidden(var)
    }
    /// The hidden variable named `var`, if it is one.
    pub fn hidden_var(&self, var: &str) -> Option<&HiddenVar> {
        self.hidden.iter().find(|h| h.name == var)
    }
    pub fn is_hidden(&self, var: &str) -> bool {
        self.hidden_var(var).is_some()
    }
}

/// Build the operands of `a` given each tensor's format and dimensions.
pub fn resolve(a: &Assignment, formats: &BTreeMap<String, TensorFormat>, dims: &BTreeMap<String, Vec<usize>>) -> Result<Problem, LowerError> {
    let mut operands = Vec::new();
    let mut derived: Vec<Derivation> = Vec::new();
    let mut hidden: Vec<HiddenVar> = Vec::new();
    let mut extents: BTreeMap<String, Expr> = BTreeMap::new();
    let mut extent_values: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let accesses: Vec<(&Access, bool)> = std::iter::once((&a.lhs, true)).chain(a.rhs.accesses().into_iter().map(|x| (x, false))).collect();
    let mut seen_tensors: BTreeMap<String, usize> = BTreeMap::new();
    for (id, (acc, output)) in accesses.into_iter().enumerate() {
        let format = formats.get(&acc.tensor).cloned().ok_or_else(|| LowerError::UnknownTensor { name: acc.tensor.clone(), span: acc.span })?;
        let tdims = dims.get(&acc.tensor).cloned().ok_or_else(|| LowerError::UnknownTensor { name: acc.tensor.clone(), span: acc.span })?;
        if tdims.len() != acc.indices.len() || format.order() != acc.indices.len() {
            return Err(LowerError::Arity {
                access: acc.to_string(),
                order: tdims.len().max(format.order()),
                indices: acc.indices.len(),
                span: acc.span,
            });
        }
        for (d, idx) in acc.indices.iter().enumerate() {
            let n = tdims[d];
            match extent_values.get(&idx.name) {
                Some((m, other)) if *m != n => {
                    return Err(LowerError::Shape { var: idx.name.clone(), first: format!("{other} gives {m}"), second: format!("{} gives {n}", acc), span: idx.span })
                }
                Some(_) => {}
                None => {
                    extent_values.insert(idx.name.clone(), (n, acc.to_string()));
                    extents.insert(idx.name.clone(), Expr::Param(ParamRef::dim(&acc.tensor, d)));
                }
            }
        }
        // Repeated uses of one tensor get distinct hidden variable names.
        let nth = seen_tensors.entry(acc.tensor.clone()).or_insert(0);
        *nth += 1;
        let suffix = if *nth > 1 { format!("{}{}", acc.tensor, nth) } else { acc.tensor.clone() };
        let mut level_vars = Vec::new();
        for k in 0..format.levels.len() {
            match format.map.level_var(k) {
                LevelVar::Dim(d) => level_vars.push(acc.indices[d].name.clone()),
                LevelVar::Hidden(h) => {
                    let name = format!("{h}{suffix}");
                    extents.insert(name.clone(), Expr::Param(ParamRef::level(&acc.tensor, k, "N")));
                    hidden.push(HiddenVar { name: name.clone(), operand: OperandId(id), level: k });
                    level_vars.push(name);
                }
            }
        }
        for d in format.map.derived() {
            let var = acc.indices[d.dim].name.clone();
            if derived.iter().any(|x| x.var == var) {
                return Err(LowerError::Unsupported {
                    reason: format!("index `{var}` would be computed from the blocks of two operands; store one of them in a format without blocks"),
                    span: acc.span,
                });
            }
            derived.push(Derivation { var, outer: level_vars[d.outer].clone(), inner: level_vars[d.inner].clone(), b: d.b as i64 });
        }
        if output && !derived.is_empty() || output && level_vars.iter().any(|v| hidden.iter().any(|h| h.name == *v)) {
            return Err(LowerError::Unsupported {
                reason: format!("the result {} cannot be assembled in {}: formats with hidden levels are input-only", acc, format.display_name()),
                span: acc.span,
            });
        }
        operands.push(Operand { id: OperandId(id), tensor: acc.tensor.clone(), format, level_vars, output, access: acc.clone() });
    }
    for v in a.lhs.vars() {
        if !a.rhs.vars().iter().any(|r| r == v) && !extents.contains_key(v) {
            return Err(LowerError::Unsupported { reason: format!("index `{v}` of the result appears nowhere else"), span: a.lhs.span });
        }
    }
    Ok(Problem { assignment: a.clone(), operands, derived, extents, hidden, assembly: ResultAssembly::Direct })
}
