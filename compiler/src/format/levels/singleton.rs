//! Singleton level: exactly one coordinate per parent, stored in `crd` at the
//! parent's position. Capabilities: coordinate position iteration, append.
//! Branchless. Full, ordered and unique are configurable; `aos` reads the
//! coordinate from an interleaved array owned by the compressed level above.

use super::crd_layout::CrdLayout;
use crate::format::level::*;
use crate::ir::{Emitter, Expr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Singleton {
    pub full: bool,
    pub ordered: bool,
    pub unique: bool,
    pub layout: CrdLayout,
}

impl Default for Singleton {
    fn default() -> Self {
        Singleton { full: false, ordered: true, unique: true, layout: CrdLayout::Own }
    }
}

impl LevelFormat for Singleton {
    fn name(&self) -> &'static str {
        "singleton"
    }
    fn spec(&self) -> String {
        let flags: Vec<&str> = [
            (self.full, "full"),
            (!self.unique, "nonunique"),
            (!self.ordered, "unordered"),
            (self.layout.is_aos(), "aos"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
        if flags.is_empty() {
            "singleton".into()
        } else {
            format!("singleton({})", flags.join(","))
        }
    }
    fn properties(&self) -> Properties {
        Properties { full: self.full, ordered: self.ordered, unique: self.unique, branchless: true, compact: true }
    }
    fn iteration(&self) -> Iteration<'_> {
        Iteration::CoordPosition(self)
    }
    fn assembly(&self) -> Assembly<'_> {
        if self.layout.is_aos() {
            Assembly::None
        } else {
            Assembly::Append(self)
        }
    }
    fn arrays(&self) -> Vec<&'static str> {
        if self.layout.is_aos() {
            Vec::new()
        } else {
            vec!["crd"]
        }
    }
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String> {
        // One child per parent position; parents without entries (padding,
        // as in ELL) get coordinate 0 and will hold an explicit zero.
        let mut crd = vec![0i32; input.parent_size];
        let mut children = Vec::with_capacity(input.parents.len());
        for seg in input.parents {
            let groups = input.groups(seg, true);
            if groups.len() > 1 {
                return Err(format!(
                    "a singleton level holds one coordinate per parent, but parent position {} has {} distinct coordinates",
                    seg.pos,
                    groups.len()
                ));
            }
            for (coord, lo, hi) in groups {
                crd[seg.pos] = coord as i32;
                children.push(Segment { pos: seg.pos, lo, hi });
            }
        }
        let arrays = if self.layout.is_aos() { Vec::new() } else { vec![("crd", crd)] };
        Ok(PackOutput { children, size: input.parent_size, arrays, params: Vec::new() })
    }
    fn validate(&self, input: &ValidateInput) -> Result<usize, String> {
        let n = input.parent_size;
        let have = self.layout.positions(input.storage, input.level)?;
        if have < n {
            return Err(format!("crd holds {have} coordinates for {n} parent positions"));
        }
        let mine: Vec<i32> = (0..n).map(|p| self.layout.read(input.storage, input.level, p)).collect::<Result<_, _>>()?;
        checks::coords_in_range(&mine, input.extent())?;
        Ok(n)
    }
}

impl CoordPositionIteration for Singleton {
    fn pos_bounds(&self, _c: &LevelCtx, _e: &mut Emitter, parent_pos: Expr) -> (Expr, Expr) {
        (parent_pos.clone(), Expr::add(parent_pos, Expr::Int(1)))
    }
    fn pos_access(&self, c: &LevelCtx, _e: &mut Emitter, pos: Expr, _ancestors: &[Expr]) -> (Expr, Expr) {
        (self.layout.load(c, pos), Expr::Bool(true))
    }
}

impl Append for Singleton {
    fn append_init(&self, _c: &LevelCtx, _e: &mut Emitter, _parent_size: Expr, _size: Expr) {}
    fn append_coord(&self, c: &LevelCtx, e: &mut Emitter, pos: Expr, coord: Expr) {
        e.reserve(c.array("crd"), Expr::add(pos.clone(), Expr::Int(1)));
        e.store(c.array("crd"), pos, coord);
    }
    fn append_edges(&self, _c: &LevelCtx, _e: &mut Emitter, _parent_pos: Expr, _pbegin: Expr, _pend: Expr) {}
    fn append_finalize(&self, _c: &LevelCtx, _e: &mut Emitter, _parent_size: Expr, _size: Expr) {}
}
