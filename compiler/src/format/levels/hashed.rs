//! Hashed level: each parent owns a bucket of `W` slots in `crd` (empty slots
//! hold -1), coordinates placed by `i % W` with linear probing. Capabilities:
//! coordinate position iteration, locate, insert. Never ordered; unique and
//! full configurable; `W` fixed by the format (`hashed(W=1024)`) or chosen
//! when packing.

use crate::format::columns::*;
use crate::format::level::*;
use crate::ir::{CmpOp, Emitter, Expr};
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashed {
    pub full: bool,
    pub unique: bool,
    /// Bucket size; `None` chooses one when packing.
    pub width: Option<usize>,
}

impl Default for Hashed {
    fn default() -> Self {
        Hashed {
            full: false,
            unique: true,
            width: None,
        }
    }
}

impl Hashed {
    /// Buckets per parent of an output level: as wide as the dimension, so
    /// a bucket can never overflow.
    fn output_buckets(&self, extent: usize) -> usize {
        self.width
            .unwrap_or(0)
            .max(extent.max(1).next_power_of_two())
    }
}

impl LevelFormat for Hashed {
    fn name(&self) -> &'static str {
        "hashed"
    }
    fn spec(&self) -> String {
        let mut flags: Vec<String> = Vec::new();
        if self.full {
            flags.push("full".into());
        }
        if !self.unique {
            flags.push("nonunique".into());
        }
        if let Some(w) = self.width {
            flags.push(format!("W={w}"));
        }
        if flags.is_empty() {
            "hashed".into()
        } else {
            format!("hashed({})", flags.join(","))
        }
    }
    fn properties(&self) -> Properties {
        Properties {
            full: self.full,
            ordered: false,
            unique: self.unique,
            branchless: false,
            compact: false,
        }
    }
    fn iteration(&self) -> Iteration<'_> {
        Iteration::CoordPosition(self)
    }
    fn locate(&self) -> Option<&dyn Locate> {
        Some(self)
    }
    fn assembly(&self) -> Assembly<'_> {
        Assembly::Insert(self)
    }
    fn arrays(&self) -> Vec<&'static str> {
        vec!["crd"]
    }
    fn output_params(&self, extent: usize, _size_hint: usize) -> Vec<(&'static str, i64)> {
        vec![("W", self.output_buckets(extent) as i64)]
    }
    fn output_width(&self, extent: usize, _size_hint: usize) -> u128 {
        self.output_buckets(extent) as u128
    }
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String> {
        let per_parent: Vec<Vec<(i64, usize, usize)>> = input
            .parents
            .iter()
            .map(|s| input.groups(s, self.unique))
            .collect();
        let most = per_parent.iter().map(|g| g.len()).max().unwrap_or(0);
        let w = match self.width {
            Some(w) if w < most => {
                return Err(format!(
                    "W={w} is too small: one parent has {most} coordinates"
                ));
            }
            Some(w) => w,
            None => (2 * most).max(1).next_power_of_two(),
        };
        let size = input
            .parent_size
            .checked_mul(w)
            .ok_or("hashed level size overflows")?;
        input.fits(
            &format!("crd ({} parents x W={w})", input.parent_size),
            size as u128,
            4,
        )?;
        let mut crd = vec![-1i32; size];
        let mut children = Vec::new();
        for (seg, groups) in input.parents.iter().zip(per_parent) {
            let base = seg.pos * w;
            for (coord, lo, hi) in groups {
                let mut slot = coord as usize % w;
                while crd[base + slot] != -1 {
                    slot = (slot + 1) % w;
                }
                crd[base + slot] = coord as i32;
                children.push(Segment {
                    pos: base + slot,
                    lo,
                    hi,
                });
            }
        }
        children.sort_by_key(|s| s.pos);
        Ok(PackOutput {
            children,
            size,
            arrays: vec![("crd", crd)],
            params: vec![("W", w as i64)],
        })
    }
    fn column_unpack(&self) -> Option<&dyn ColumnUnpack> {
        Some(self)
    }
    fn validate(&self, input: &ValidateInput) -> Result<usize, String> {
        let w = input.own().param("W")?;
        if w < 1 {
            return Err(format!("W = {w} must be at least 1"));
        }
        let w = w as usize;
        let crd = input.own().array("crd")?;
        let size = input
            .parent_size
            .checked_mul(w)
            .ok_or("level size overflows")?;
        if crd.len() != size {
            return Err(format!(
                "crd has {} slots, expected {} parents x W={w}",
                crd.len(),
                input.parent_size
            ));
        }
        let extent = input.extent();
        for (q, &c) in crd.iter().enumerate() {
            if c == -1 {
                continue;
            }
            if c < 0 || c as usize >= extent {
                return Err(format!("crd[{q}] = {c} out of range 0..{extent}"));
            }
            // Probing from the home slot must reach q without passing an
            // empty slot or another copy of c, or locate would miss it.
            let base = q / w * w;
            let mut s = base + c as usize % w;
            while s != q {
                if crd[s] == -1 {
                    return Err(format!(
                        "crd[{q}] = {c} is unreachable: empty slot {s} on its probe path"
                    ));
                }
                if crd[s] == c && self.unique {
                    return Err(format!(
                        "coordinate {c} stored twice (slots {s} and {q}): level claims unique"
                    ));
                }
                s = base + (s - base + 1) % w;
            }
        }
        Ok(size)
    }
}

impl ColumnUnpack for Hashed {
    /// The occupied slots of each parent's bucket, in slot order.
    fn children<'s>(&self, input: &ColumnUnpackInput<'s, '_>) -> Result<Children<'s>, String> {
        let w = input.storage[input.level].param("W")?;
        let w = usize::try_from(w)
            .ok()
            .filter(|&w| w >= 1)
            .ok_or_else(|| format!("W = {w} must be at least 1"))?;
        let crd = input.storage[input.level].array("crd")?;
        let parents = input.parents;
        if parents.len() > u32::MAX as usize {
            return Err(format!(
                "{} parent positions do not fit 32-bit indices",
                parents.len()
            ));
        }
        // Owners are kept only where there are several parents to tell
        // apart; a vector's one bucket needs none.
        let several = parents.len() > 1;
        let bucket = |i: usize| -> Result<(usize, &[i32]), String> {
            let base = parents
                .at(i)
                .checked_mul(w)
                .ok_or("hashed level size overflows")?;
            let slots = crd.get(base..base + w).ok_or_else(|| {
                format!(
                    "bucket {base}..{} beyond crd (length {})",
                    base + w,
                    crd.len()
                )
            })?;
            Ok((base, slots))
        };
        // Counted first (a pass that vectorises), so the lists never grow.
        let mut stored = 0;
        for i in 0..parents.len() {
            stored += bucket(i)?.1.iter().filter(|&&c| c != -1).count();
        }
        let mut positions = Vec::with_capacity(stored);
        let mut coords = Vec::with_capacity(stored);
        let mut owners = Vec::with_capacity(if several { stored } else { 0 });
        for i in 0..parents.len() {
            let (base, slots) = bucket(i)?;
            for (slot, &c) in slots.iter().enumerate() {
                if c != -1 {
                    positions.push(base + slot);
                    coords.push(c);
                    if several {
                        owners.push(i as u32);
                    }
                }
            }
        }
        let owners = if !several {
            Owners::First
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

impl CoordPositionIteration for Hashed {
    fn pos_bounds(&self, c: &LevelCtx, _e: &mut Emitter, parent_pos: Expr) -> (Expr, Expr) {
        let w = c.param("W");
        (
            Expr::mul(parent_pos.clone(), w.clone()),
            Expr::mul(Expr::add(parent_pos, Expr::Int(1)), w),
        )
    }
    fn pos_access(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        pos: Expr,
        _ancestors: &[Expr],
    ) -> (Expr, Expr) {
        let coord = e.bind("hcrd", c.load("crd", pos));
        (coord.clone(), Expr::ne(coord, Expr::Int(-1)))
    }
}

impl Locate for Hashed {
    fn locate(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        parent_pos: Expr,
        coords: &[Expr],
    ) -> (Expr, Expr) {
        let i = coords.last().cloned().unwrap_or(Expr::Int(0));
        let w = c.param("W");
        let base = e.bind("hbase", Expr::mul(parent_pos, w.clone()));
        // The coordinate may be another level's padding (-1: ELL's empty
        // slot, co-iterated up to the guard that skips it): a negative
        // coordinate starts at the bucket's first slot, so every probe
        // stays inside the bucket, and is never found.
        let p = e.let_var(
            "hpos",
            Expr::add(
                base.clone(),
                Expr::rem(Expr::max(i.clone(), Expr::Int(0)), w.clone()),
            ),
        );
        let probes = e.let_var("hprobe", Expr::Int(0));
        let crd = c.array("crd");
        let at = Expr::load(crd.clone(), p.clone());
        let keep_going = Expr::and(
            Expr::and(
                Expr::ne(at.clone(), i.clone()),
                Expr::ne(at.clone(), Expr::Int(-1)),
            ),
            Expr::lt(probes.clone(), w.clone()),
        );
        e.while_(keep_going, |e| {
            let next = Expr::add(
                base.clone(),
                Expr::rem(
                    Expr::add(Expr::sub(p.clone(), base.clone()), Expr::Int(1)),
                    w.clone(),
                ),
            );
            e.set(&p, next);
            e.set(&probes, Expr::add(probes.clone(), Expr::Int(1)));
        });
        let found = Expr::and(
            Expr::eq(at, i.clone()),
            Expr::cmp(CmpOp::Ge, i, Expr::Int(0)),
        );
        (p, found)
    }
}

impl Insert for Hashed {
    fn size(&self, c: &LevelCtx, _e: &mut Emitter, parent_size: Expr) -> Expr {
        Expr::mul(parent_size, c.param("W"))
    }
    fn insert_init(&self, c: &LevelCtx, e: &mut Emitter, _parent_size: Expr, size: Expr) {
        e.reserve(c.array("crd"), size.clone());
        e.for_("hinit", Expr::Int(0), size, |e, p| {
            e.store(c.array("crd"), p, Expr::Int(-1))
        });
    }
    fn insert_coord(&self, c: &LevelCtx, e: &mut Emitter, pos: Expr, coord: Expr) {
        e.store(c.array("crd"), pos, coord);
    }
    fn insert_finalize(&self, _c: &LevelCtx, _e: &mut Emitter, _parent_size: Expr, _size: Expr) {}
}
