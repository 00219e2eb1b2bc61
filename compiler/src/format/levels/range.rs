//! Range level: the coordinates of an interval whose bounds come from the
//! parent's entry in an `offset` array and the dimension sizes `N` (this
//! level) and `M` (the next level), as DIA's row level. Capability:
//! coordinate value iteration. Not full, not compact.

use crate::format::level::*;
use crate::ir::{Emitter, Expr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub ordered: bool,
    pub unique: bool,
}

impl Default for Range {
    fn default() -> Self {
        Range {
            ordered: true,
            unique: true,
        }
    }
}

impl LevelFormat for Range {
    fn name(&self) -> &'static str {
        "range"
    }
    fn spec(&self) -> String {
        match (self.unique, self.ordered) {
            (true, true) => "range".into(),
            (false, true) => "range(nonunique)".into(),
            (true, false) => "range(unordered)".into(),
            (false, false) => "range(nonunique,unordered)".into(),
        }
    }
    fn properties(&self) -> Properties {
        Properties {
            full: false,
            ordered: self.ordered,
            unique: self.unique,
            branchless: false,
            compact: false,
        }
    }
    fn iteration(&self) -> Iteration<'_> {
        Iteration::CoordValue(self)
    }
    fn stores_fill(&self) -> bool {
        true
    }
    fn arrays(&self) -> Vec<&'static str> {
        vec!["offset"]
    }
    fn structure_rule(
        &self,
        k: usize,
        levels: &[std::sync::Arc<dyn LevelFormat>],
    ) -> Result<(), String> {
        if k == 0 || k + 1 == levels.len() {
            return Err("a range level needs a parent and a child level".into());
        }
        Ok(())
    }
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String> {
        let k = input.level;
        if k == 0 || k + 1 >= input.nlevels {
            return Err("a range level needs a parent level and a child level".into());
        }
        let n = input.extent();
        let m = input.extents[k + 1];
        let mut offset = vec![0i32; input.extents[k - 1]];
        let mut children = Vec::new();
        for seg in input.parents {
            let groups = input.groups(seg, true);
            if let Some(&(_, lo, _)) = groups.first() {
                let parent_coord = input.coord(lo, k - 1) as usize;
                let off = input.coord(lo, k + 1) - input.coord(lo, k);
                offset[parent_coord] =
                    checks::fits_i32(off.unsigned_abs() as usize, "offset")? * off.signum() as i32;
            }
            for (coord, lo, hi) in groups {
                children.push(Segment {
                    pos: seg.pos * n + coord as usize,
                    lo,
                    hi,
                });
            }
        }
        let size = input
            .parent_size
            .checked_mul(n)
            .ok_or("range level size overflows")?;
        Ok(PackOutput {
            children,
            size,
            arrays: vec![("offset", offset)],
            params: vec![("N", n as i64), ("M", m as i64)],
        })
    }
    fn validate(&self, input: &ValidateInput) -> Result<usize, String> {
        let k = input.level;
        if k == 0 || k + 1 >= input.extents.len() {
            return Err("a range level needs a parent level and a child level".into());
        }
        let own = input.own();
        let (n, m) = (own.param("N")?, own.param("M")?);
        if n != input.extent() as i64 || m != input.extents[k + 1] as i64 {
            return Err(format!(
                "N = {n}, M = {m} do not match the level extents {} and {}",
                input.extent(),
                input.extents[k + 1]
            ));
        }
        let offset = own.array("offset")?;
        if offset.len() != input.extents[k - 1] {
            return Err(format!(
                "offset has {} entries, expected one per parent coordinate ({})",
                offset.len(),
                input.extents[k - 1]
            ));
        }
        input
            .parent_size
            .checked_mul(n as usize)
            .ok_or_else(|| "level size overflows".to_string())
    }
}

impl CoordValueIteration for Range {
    fn coord_bounds(&self, c: &LevelCtx, e: &mut Emitter, ancestors: &[Expr]) -> (Expr, Expr) {
        let parent = ancestors.last().cloned().unwrap_or(Expr::Int(0));
        let off = e.bind("off", c.load("offset", parent));
        let begin = Expr::max(Expr::Int(0), Expr::neg(off.clone()));
        let end = Expr::min(c.param("N"), Expr::sub(c.param("M"), off));
        (begin, end)
    }
    fn coord_access(
        &self,
        c: &LevelCtx,
        _e: &mut Emitter,
        parent_pos: Expr,
        coords: &[Expr],
    ) -> (Expr, Expr) {
        let i = coords.last().cloned().unwrap_or(Expr::Int(0));
        (
            Expr::add(Expr::mul(parent_pos, c.param("N")), i),
            Expr::Bool(true),
        )
    }
}
