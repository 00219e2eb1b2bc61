//! Offset level: one coordinate per parent, the parent's coordinate shifted
//! by the grandparent's entry in the `offset` array of the level above (DIA's
//! column level). Capability: coordinate position iteration. Branchless.

use crate::format::level::*;
use crate::ir::{Emitter, Expr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offset {
    pub ordered: bool,
    pub unique: bool,
}

impl Default for Offset {
    fn default() -> Self {
        Offset {
            ordered: true,
            unique: true,
        }
    }
}

impl LevelFormat for Offset {
    fn name(&self) -> &'static str {
        "offset"
    }
    fn spec(&self) -> String {
        match (self.unique, self.ordered) {
            (true, true) => "offset".into(),
            (false, true) => "offset(nonunique)".into(),
            (true, false) => "offset(unordered)".into(),
            (false, false) => "offset(nonunique,unordered)".into(),
        }
    }
    fn properties(&self) -> Properties {
        Properties {
            full: false,
            ordered: self.ordered,
            unique: self.unique,
            branchless: true,
            compact: false,
        }
    }
    fn iteration(&self) -> Iteration<'_> {
        Iteration::CoordPosition(self)
    }
    fn arrays(&self) -> Vec<&'static str> {
        Vec::new()
    }
    fn structure_rule(
        &self,
        k: usize,
        levels: &[std::sync::Arc<dyn LevelFormat>],
    ) -> Result<(), String> {
        // `pos_access` reads the `offset` array of the level above.
        if k < 2 || !levels[k - 1].arrays().contains(&"offset") {
            return Err(
                "an offset level must follow a level that owns an `offset` array (range)".into(),
            );
        }
        Ok(())
    }
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String> {
        let k = input.level;
        if k < 2 {
            return Err("an offset level needs two levels above it (the one directly above owning `offset`)".into());
        }
        let mut children = Vec::with_capacity(input.parents.len());
        for seg in input.parents {
            let groups = input.groups(seg, true);
            if groups.len() > 1 {
                return Err(format!(
                    "an offset level holds one coordinate per parent; parent {} has {}",
                    seg.pos,
                    groups.len()
                ));
            }
            for (_, lo, hi) in groups {
                children.push(Segment {
                    pos: seg.pos,
                    lo,
                    hi,
                });
            }
        }
        Ok(PackOutput {
            children,
            size: input.parent_size,
            arrays: Vec::new(),
            params: Vec::new(),
        })
    }
    fn validate(&self, input: &ValidateInput) -> Result<usize, String> {
        let k = input.level;
        if k < 2 || input.storage[k - 1].arrays.get("offset").is_none() {
            return Err("an offset level needs the level above it to own an `offset` array".into());
        }
        Ok(input.parent_size)
    }
}

impl CoordPositionIteration for Offset {
    fn pos_bounds(&self, _c: &LevelCtx, _e: &mut Emitter, parent_pos: Expr) -> (Expr, Expr) {
        (parent_pos.clone(), Expr::add(parent_pos, Expr::Int(1)))
    }
    fn pos_access(
        &self,
        c: &LevelCtx,
        _e: &mut Emitter,
        _pos: Expr,
        ancestors: &[Expr],
    ) -> (Expr, Expr) {
        let n = ancestors.len();
        let (grand, parent) = if n >= 2 {
            (ancestors[n - 2].clone(), ancestors[n - 1].clone())
        } else {
            (Expr::Int(0), Expr::Int(0))
        };
        let off = Expr::load(c.array_of(c.level.saturating_sub(1), "offset"), grand);
        (Expr::add(parent, off), Expr::Bool(true))
    }
}
