//! What the code generator decided, per loop, in words the editor shows:
//! which operands are merged, which levels are co-iterated and which
//! located, with the iterator conversions applied.

use super::vars::{IndexVar, IndexVars};
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub struct LoopPlan {
    /// Operands that have a nonzero in this lattice point.
    pub operands: Vec<String>,
    /// The sub-expression this point computes.
    pub expr: String,
    pub coiterated: Vec<String>,
    pub located: Vec<String>,
    /// A branchless level handled without a loop of its own.
    pub fused: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VarPlan {
    pub var: IndexVar,
    pub loops: Vec<LoopPlan>,
}

/// A plan with the table that names its variable (its nest's).
#[derive(Clone, Copy)]
pub struct NamedPlan<'a> {
    pub plan: &'a VarPlan,
    pub vars: &'a IndexVars,
}

impl NamedPlan<'_> {
    /// The name of the plan's variable.
    pub fn var(&self) -> &str {
        self.vars.name(self.plan.var)
    }

    pub fn loops(&self) -> &[LoopPlan] {
        &self.plan.loops
    }

    /// One-line summary for inlay hints: `co-iterate A2 ∪ B2` / `locate x1`.
    pub fn summary(&self) -> String {
        let first = &self.plan.loops[0];
        let mut parts = Vec::new();
        if first.fused {
            parts.push(format!("fused {}", first.coiterated.join(", ")));
        } else if first.coiterated.len() > 1 {
            parts.push(format!("merge {}", first.coiterated.join(" ∧ ")));
        } else {
            parts.push(format!("iterate {}", first.coiterated.join("")));
        }
        if !first.located.is_empty() {
            parts.push(format!("locate {}", first.located.join(", ")));
        }
        if self.plan.loops.len() > 1 {
            parts.push(format!("{} lattice points", self.plan.loops.len()));
        }
        format!("{}: {}", self.var(), parts.join("; "))
    }
}

impl fmt::Display for NamedPlan<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "index {}:", self.var())?;
        for (n, l) in self.plan.loops.iter().enumerate() {
            writeln!(
                f,
                "  point {n}: [{}] computes {}",
                l.operands.join(", "),
                l.expr
            )?;
            writeln!(
                f,
                "    co-iterate: {}",
                if l.coiterated.is_empty() {
                    "-".into()
                } else {
                    l.coiterated.join(", ")
                }
            )?;
            writeln!(
                f,
                "    locate:     {}",
                if l.located.is_empty() {
                    "-".into()
                } else {
                    l.located.join(", ")
                }
            )?;
            if l.fused {
                writeln!(f, "    fused: no loop of its own (branchless level)")?;
            }
        }
        Ok(())
    }
}
