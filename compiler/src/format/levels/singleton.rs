//! Singleton level: exactly one coordinate per parent, stored in `crd` at the
//! parent's position. Capabilities: coordinate position iteration, append.
//! Branchless. Full, ordered and unique are configurable; `aos` reads the
//! coordinate from an interleaved array owned by the compressed level above.
//! `padded` (ELL's column level) lets a parent have no coordinate: its slot
//! holds -1 and iteration skips it, so padding never meets the other
//! operands (an explicit zero times an infinite `x(j)` would be NaN).

use super::crd_layout::CrdLayout;
use crate::format::columns::*;
use crate::format::level::*;
use crate::ir::{Emitter, Expr};
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Singleton {
    pub full: bool,
    pub ordered: bool,
    pub unique: bool,
    pub layout: CrdLayout,
    /// Parents without an entry store -1 and are skipped.
    pub padded: bool,
}

impl Default for Singleton {
    fn default() -> Self {
        Singleton {
            full: false,
            ordered: true,
            unique: true,
            layout: CrdLayout::Own,
            padded: false,
        }
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
            (self.padded, "padded"),
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
        Properties {
            full: self.full,
            ordered: self.ordered,
            unique: self.unique,
            branchless: true,
            compact: true,
        }
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
    fn aos_role(&self) -> Option<AosRole> {
        Some(AosRole::Field)
    }
    fn arrays(&self) -> Vec<&'static str> {
        if self.layout.is_aos() {
            Vec::new()
        } else {
            vec!["crd"]
        }
    }
    fn coordinate_array(&self) -> Option<&'static str> {
        // Interleaved with another level's, an AoS array is no run of one
        // level's coordinates.
        (!self.layout.is_aos()).then_some("crd")
    }
    fn stored_coordinates(&self, level: usize) -> Option<StoredCoordinates> {
        Some(self.layout.stored(level))
    }
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String> {
        // One child per parent position; parents without entries (padding,
        // as in ELL) get -1 when padded (skipped), else coordinate 0 and an
        // explicit zero.
        let empty = if self.padded { -1 } else { 0 };
        let mut crd = vec![empty; input.parent_size];
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
                children.push(Segment {
                    pos: seg.pos,
                    lo,
                    hi,
                });
            }
        }
        let arrays = if self.layout.is_aos() {
            Vec::new()
        } else {
            vec![("crd", crd)]
        };
        Ok(PackOutput {
            children,
            size: input.parent_size,
            arrays,
            params: Vec::new(),
        })
    }
    fn column_pack(&self) -> Option<&dyn ColumnPack> {
        Some(self)
    }
    fn column_unpack(&self) -> Option<&dyn ColumnUnpack> {
        Some(self)
    }
    fn validate(&self, input: &ValidateInput) -> Result<usize, String> {
        let n = input.parent_size;
        let have = self.layout.positions(input.storage, input.level)?;
        if have < n {
            return Err(format!(
                "crd holds {have} coordinates for {n} parent positions"
            ));
        }
        let mut mine = self.layout.column(input.storage, input.level, n)?;
        if self.padded {
            mine.to_mut().retain(|&c| c != -1);
        }
        checks::coords_in_range(&mine, input.extent())?;
        Ok(n)
    }
}

impl ColumnPack for Singleton {
    /// Positions are the parents'; an entry under the same parent as the
    /// previous one with another coordinate has no slot of its own. Under
    /// parents holding one entry each (COO), `crd` is the column itself.
    fn pack_columns(
        &self,
        mut input: ColumnPackInput<'_>,
        placement: &mut Placement,
    ) -> Result<ColumnPackOutput, String> {
        let n = input.len();
        let coords =
            std::mem::replace(&mut input.coords, Column::Values(Cow::Borrowed(&[]))).into_values();
        if *placement == Placement::Identity && input.parent_size == n {
            let arrays = if self.layout.is_aos() {
                Vec::new()
            } else {
                vec![("crd", coords.into_owned())]
            };
            return Ok(ColumnPackOutput {
                size: n,
                arrays,
                params: Vec::new(),
            });
        }
        let positions = std::mem::replace(placement, Placement::Identity).into_each(n);
        let empty = if self.padded { -1 } else { 0 };
        let mut crd = vec![empty; input.parent_size];
        for e in 0..n {
            let parent = positions[e];
            if e > 0 && parent == positions[e - 1] {
                if usize::from(input.split[e]) <= input.level {
                    let distinct = distinct_under(&input, &positions, e);
                    return Err(format!(
                        "a singleton level holds one coordinate per parent, but parent position {parent} has {distinct} distinct coordinates"
                    ));
                }
                continue;
            }
            crd[parent as usize] = coords[e];
        }
        *placement = Placement::Each(positions);
        let arrays = if self.layout.is_aos() {
            Vec::new()
        } else {
            vec![("crd", crd)]
        };
        Ok(ColumnPackOutput {
            size: input.parent_size,
            arrays,
            params: Vec::new(),
        })
    }
}

/// How many distinct coordinates the entries under entry `e`'s parent have
/// (for the error message).
fn distinct_under(input: &ColumnPackInput, positions: &[i32], e: usize) -> usize {
    let parent = positions[e];
    let lo = (0..e)
        .rev()
        .take_while(|&x| positions[x] == parent)
        .last()
        .unwrap_or(e);
    let hi = (e..positions.len())
        .take_while(|&x| positions[x] == parent)
        .last()
        .unwrap_or(e)
        + 1;
    1 + (lo + 1..hi)
        .filter(|&x| usize::from(input.split[x]) <= input.level)
        .count()
}

impl ColumnUnpack for Singleton {
    fn children<'s>(&self, input: &ColumnUnpackInput<'s, '_>) -> Result<Children<'s>, String> {
        let parents = input.parents;
        if let (CrdLayout::Own, false, Positions::Range(lo, hi)) =
            (&self.layout, self.padded, parents)
        {
            let crd = input.storage[input.level].array("crd")?;
            let coords = crd
                .get(*lo..*hi)
                .ok_or_else(|| format!("positions {lo}..{hi} beyond crd (length {})", crd.len()))?;
            return Ok(Children {
                positions: parents.clone(),
                coords: Cow::Borrowed(coords),
                owners: Owners::Same,
            });
        }
        if parents.len() > u32::MAX as usize {
            return Err(format!(
                "{} parent positions do not fit 32-bit indices",
                parents.len()
            ));
        }
        let (mut positions, mut coords, mut owners) = (
            Vec::with_capacity(parents.len()),
            Vec::with_capacity(parents.len()),
            Vec::new(),
        );
        let crd = self.layout.reader(input.storage, input.level)?;
        for i in 0..parents.len() {
            let p = parents.at(i);
            let c = crd.at(p)?;
            if self.padded && c == -1 {
                continue;
            }
            positions.push(p);
            coords.push(c);
            owners.push(i as u32);
        }
        let owners = if owners.len() == parents.len() {
            Owners::Same
        } else {
            Owners::Each(owners)
        };
        Ok(Children {
            positions: Positions::List(positions),
            coords: Cow::Owned(coords),
            owners,
        })
    }
}

impl CoordPositionIteration for Singleton {
    fn pos_bounds(&self, _c: &LevelCtx, _e: &mut Emitter, parent_pos: Expr) -> (Expr, Expr) {
        (parent_pos.clone(), Expr::add(parent_pos, Expr::Int(1)))
    }
    fn pos_access(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        pos: Expr,
        _ancestors: &[Expr],
    ) -> (Expr, Expr) {
        if self.padded {
            let coord = e.bind("scrd", self.layout.load(c, pos));
            return (coord.clone(), Expr::ne(coord, Expr::Int(-1)));
        }
        (self.layout.load(c, pos), Expr::Bool(true))
    }
}

impl Append for Singleton {
    fn append_init(&self, _c: &LevelCtx, _e: &mut Emitter, _parent_size: Expr, _parents: &Parents) {
    }
    fn append_coord(&self, c: &LevelCtx, e: &mut Emitter, pos: Expr, coord: Expr) {
        e.reserve(c.array("crd"), Expr::add(pos.clone(), Expr::Int(1)));
        e.store(c.array("crd"), pos, coord);
    }
    fn append_edges(
        &self,
        _c: &LevelCtx,
        _e: &mut Emitter,
        _parent_pos: Expr,
        _children: (Expr, Expr),
        _parents: &Parents,
    ) {
    }
    fn append_finalize(
        &self,
        _c: &LevelCtx,
        _e: &mut Emitter,
        _parent_size: Expr,
        _size: Expr,
        _parents: &Parents,
    ) {
    }
}
