//! Dense level: the coordinates `[0, N)` of every parent, stored implicitly.
//! Capabilities: coordinate value iteration, locate, insert.

use crate::format::columns::*;
use crate::format::level::*;
use crate::ir::{Emitter, Expr};
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dense;

impl LevelFormat for Dense {
    fn name(&self) -> &'static str {
        "dense"
    }
    fn spec(&self) -> String {
        "dense".into()
    }
    fn properties(&self) -> Properties {
        Properties {
            full: true,
            ordered: true,
            unique: true,
            branchless: false,
            compact: true,
        }
    }
    fn iteration(&self) -> Iteration<'_> {
        Iteration::CoordValue(self)
    }
    fn locate(&self) -> Option<&dyn Locate> {
        Some(self)
    }
    fn assembly(&self) -> Assembly<'_> {
        Assembly::Insert(self)
    }
    fn stores_fill(&self) -> bool {
        true
    }
    fn arrays(&self) -> Vec<&'static str> {
        Vec::new()
    }
    fn output_params(&self, extent: usize, _size_hint: usize) -> Vec<(&'static str, i64)> {
        vec![("N", extent as i64)]
    }
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String> {
        let n = input.extent();
        let size = input
            .parent_size
            .checked_mul(n)
            .ok_or("dense level size overflows")?;
        let mut children = Vec::new();
        for seg in input.parents {
            for (coord, lo, hi) in input.groups(seg, true) {
                children.push(Segment {
                    pos: seg.pos * n + coord as usize,
                    lo,
                    hi,
                });
            }
        }
        Ok(PackOutput {
            children,
            size,
            arrays: Vec::new(),
            params: vec![("N", n as i64)],
        })
    }
    fn column_pack(&self) -> Option<&dyn ColumnPack> {
        Some(self)
    }
    fn column_unpack(&self) -> Option<&dyn ColumnUnpack> {
        Some(self)
    }
    fn validate(&self, input: &ValidateInput) -> Result<usize, String> {
        let n = input.own().param("N")?;
        if n != input.extent() as i64 {
            return Err(format!(
                "N = {n} but the level's extent is {}",
                input.extent()
            ));
        }
        input
            .parent_size
            .checked_mul(n as usize)
            .ok_or_else(|| "level size overflows".to_string())
    }
}

impl CoordValueIteration for Dense {
    fn coord_bounds(&self, c: &LevelCtx, _e: &mut Emitter, _ancestors: &[Expr]) -> (Expr, Expr) {
        (Expr::Int(0), c.param("N"))
    }
    fn coord_access(
        &self,
        c: &LevelCtx,
        _e: &mut Emitter,
        parent_pos: Expr,
        coords: &[Expr],
    ) -> (Expr, Expr) {
        (position(c, parent_pos, coords), Expr::Bool(true))
    }
}

fn position(c: &LevelCtx, parent_pos: Expr, coords: &[Expr]) -> Expr {
    let i = coords.last().cloned().unwrap_or(Expr::Int(0));
    Expr::add(Expr::mul(parent_pos, c.param("N")), i)
}

impl Locate for Dense {
    fn locate(
        &self,
        c: &LevelCtx,
        _e: &mut Emitter,
        parent_pos: Expr,
        coords: &[Expr],
    ) -> (Expr, Expr) {
        (position(c, parent_pos, coords), Expr::Bool(true))
    }
}

impl Insert for Dense {
    fn size(&self, c: &LevelCtx, _e: &mut Emitter, parent_size: Expr) -> Expr {
        Expr::mul(parent_size, c.param("N"))
    }
    fn insert_init(&self, _c: &LevelCtx, _e: &mut Emitter, _parent_size: Expr, _size: Expr) {}
    fn insert_coord(&self, _c: &LevelCtx, _e: &mut Emitter, _pos: Expr, _coord: Expr) {}
    fn insert_finalize(&self, _c: &LevelCtx, _e: &mut Emitter, _parent_size: Expr, _size: Expr) {}
}

impl ColumnPack for Dense {
    /// Position `parent * N + coordinate`; under the root that is the
    /// coordinate itself, so coordinate runs are position runs as they are.
    fn pack_columns(
        &self,
        input: ColumnPackInput<'_>,
        placement: &mut Placement,
    ) -> Result<ColumnPackOutput, String> {
        let n = input.extent();
        let storage = dense_storage(input.parent_size, n)?;
        let entries = input.len();
        *placement = match (input.parent_size, input.coords) {
            (1, coords) => Placement::Runs(coords.into_runs(n)),
            (_, coords) => {
                let mut each = std::mem::replace(placement, Placement::Identity).into_each(entries);
                for (p, &c) in each.iter_mut().zip(coords.into_values().iter()) {
                    *p = *p * n as i32 + c;
                }
                Placement::Each(each)
            }
        };
        Ok(storage)
    }

    fn offset_storage(
        &self,
        parent_size: usize,
        extent: usize,
    ) -> Option<Result<ColumnPackOutput, String>> {
        Some(dense_storage(parent_size, extent))
    }
}

/// A dense level of `n` coordinates under `parent_size` positions: no
/// arrays, only its extent.
fn dense_storage(parent_size: usize, n: usize) -> Result<ColumnPackOutput, String> {
    let size = parent_size
        .checked_mul(n)
        .ok_or("dense level size overflows")?;
    checks::fits_i32(size, "number of positions")?;
    Ok(ColumnPackOutput {
        size,
        arrays: Vec::new(),
        params: vec![("N", n as i64)],
    })
}

impl ColumnUnpack for Dense {
    fn children<'s>(&self, input: &ColumnUnpackInput<'s, '_>) -> Result<Children<'s>, String> {
        let n = input.extent();
        let parents = input.parents;
        let total = parents
            .len()
            .checked_mul(n)
            .ok_or("dense level size overflows")?;
        input.fits("the positions of a dense level", total as u128, 16)?;
        let coords: Vec<i32> = (0..parents.len()).flat_map(|_| 0..n as i32).collect();
        let positions = dense_positions(parents, n)?;
        let owners =
            owners_from_counts(std::iter::repeat_n(n, parents.len()), parents.len(), total)?;
        Ok(Children {
            positions,
            coords: Cow::Owned(coords),
            owners,
        })
    }

    fn child_positions(&self, input: &ColumnUnpackInput<'_, '_>) -> Result<Positions, String> {
        let n = input.extent();
        if let Positions::List(v) = input.parents {
            let total = v.len().checked_mul(n).ok_or("dense level size overflows")?;
            input.fits("the positions of a dense level", total as u128, 8)?;
        }
        dense_positions(input.parents, n)
    }
}

/// The positions under `parents` of a dense level of extent `n`: every
/// coordinate of each, in order (a range stays a range).
fn dense_positions(parents: &Positions, n: usize) -> Result<Positions, String> {
    Ok(match parents {
        Positions::Range(lo, hi) => Positions::Range(
            lo * n,
            hi.checked_mul(n).ok_or("dense level size overflows")?,
        ),
        Positions::List(v) => {
            let last = v.iter().max().map_or(Some(0), |&p| (p + 1).checked_mul(n));
            last.ok_or("dense level size overflows")?;
            Positions::List(v.iter().flat_map(|&p| p * n..(p + 1) * n).collect())
        }
    })
}
