//! A tensor's entries as flat coordinate columns (one per dimension) and
//! values, borrowed from storage wherever a level already keeps one column
//! per entry (a coordinate buffer, the last level of CSR): the exchange form
//! of run-time packing and conversion, without a `CooTensor` copy.

use super::alloc::MemoryLimit;
use super::{unpack, StorageError, Tensor};
use crate::coo::CooTensor;
use crate::format::columns::{
    expand_runs, Column, ColumnUnpack, ColumnUnpackInput, Owners, Positions,
};
use crate::format::CoordMap;
use std::borrow::Cow;

/// Entries in storage order: entry `e` has coordinate `cols[d][e]` in
/// dimension `d` and value `vals[e]`. Unsorted, duplicates allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct Entries<'a> {
    pub dims: Vec<usize>,
    /// One per dimension; a column is runs only where it is sorted (a
    /// matrix's rows read from CSR).
    pub cols: Vec<Column<'a>>,
    pub vals: Cow<'a, [f64]>,
}

impl<'a> Entries<'a> {
    pub fn len(&self) -> usize {
        self.vals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }

    /// The columns of a coordinate list (coordinates are checked against
    /// the dimensions when the entries are packed).
    pub fn from_coo(coo: &CooTensor) -> Entries<'static> {
        let order = coo.order();
        let n = coo.nnz();
        let mut cols: Vec<Vec<i32>> = (0..order).map(|_| Vec::with_capacity(n)).collect();
        for entry in coo
            .coords
            .chunks_exact(order.max(1))
            .take(if order == 0 { 0 } else { n })
        {
            for (col, &c) in cols.iter_mut().zip(entry) {
                // Beyond i32 reads as negative: out of range, refused later.
                col.push(c as i32);
            }
        }
        Entries {
            dims: coo.dims.clone(),
            cols: cols
                .into_iter()
                .map(|c| Column::Values(Cow::Owned(c)))
                .collect(),
            vals: Cow::Owned(coo.vals.clone()),
        }
    }

    /// Without the entries whose value is zero: read from a format whose
    /// values hold fill (a DIA diagonal's or a BCSR block's positions with
    /// no entry), those are fill, not entries, and a copy in another
    /// format must not turn them into stored zeros (`0 * inf` in a product
    /// would make a NaN the tensor does not hold). A stored zero is
    /// dropped with them: the two look alike.
    pub fn without_zeros(self) -> Entries<'a> {
        if !self.vals.contains(&0.0) {
            return self;
        }
        let keep: Vec<usize> = (0..self.len()).filter(|&e| self.vals[e] != 0.0).collect();
        let cols = self
            .cols
            .into_iter()
            .map(|c| {
                let c = c.into_values();
                Column::Values(Cow::Owned(keep.iter().map(|&e| c[e]).collect()))
            })
            .collect();
        let vals = Cow::Owned(keep.iter().map(|&e| self.vals[e]).collect());
        Entries {
            dims: self.dims,
            cols,
            vals,
        }
    }

    /// Back to a coordinate list, refusing coordinates outside the dimensions.
    pub fn to_coo(&self) -> Result<CooTensor, String> {
        let mut coo = CooTensor::new(self.dims.clone());
        coo.coords.reserve(self.len() * self.cols.len());
        let cols: Vec<Cow<'_, [i32]>> = self.cols.iter().map(|c| c.clone().into_values()).collect();
        for e in 0..self.len() {
            for (d, col) in cols.iter().enumerate() {
                let c = col[e];
                if c < 0 || c as usize >= self.dims[d] {
                    return Err(format!(
                        "coordinate {c} outside dimension {d} (extent {})",
                        self.dims[d]
                    ));
                }
                coo.coords.push(c as u32);
            }
        }
        coo.vals = self.vals.to_vec();
        Ok(coo)
    }

    /// Every stored entry of `t`, in storage order (padding left out), read
    /// by the levels' `ColumnUnpack` capability; tensors whose levels lack
    /// it, or whose levels are not one per dimension, are unpacked by their
    /// level functions.
    pub fn of(t: &'a Tensor) -> Result<Entries<'a>, StorageError> {
        let err = |reason: String| StorageError::Pack {
            tensor: t.name.clone(),
            reason,
        };
        let (Some(unpackers), CoordMap::Modes(order)) = (column_unpackers(t), &t.format.map) else {
            return Ok(Entries::from_coo(&unpack(t)?));
        };
        let nlevels = unpackers.len();
        let mut levels = Vec::with_capacity(nlevels);
        let parents = walk_levels(t, &unpackers, |u, input| {
            let children = u.children(input)?;
            levels.push((children.coords, children.owners));
            Ok(children.positions)
        })?;
        let n = parents.len();
        let vals = values_at(t, &parents)?;
        let level_cols = columns(levels, n).map_err(err)?;
        // Level k holds dimension order[k].
        let mut cols: Vec<Option<Column<'a>>> = vec![None; nlevels];
        for (k, col) in level_cols.into_iter().enumerate() {
            cols[order[k]] = Some(col);
        }
        let cols = cols
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| err("the mode order is not a permutation".into()))?;
        Ok(Entries {
            dims: t.dims.clone(),
            cols,
            vals,
        })
    }
}

impl<'a> Entries<'a> {
    /// The values of `t`'s stored entries, as `of` gives them, without
    /// their coordinates: each level gives only the positions of its
    /// children (`ColumnUnpack::child_positions`), so a result of many
    /// rows and few entries is read in memory in proportion to its
    /// entries (CSR of 2e9 rows: `of` lists 16 bytes a row).
    pub fn stored_values(t: &'a Tensor) -> Result<Cow<'a, [f64]>, StorageError> {
        let Some(unpackers) = column_unpackers(t) else {
            return Ok(Cow::Owned(Entries::of(t)?.vals.into_owned()));
        };
        let positions = walk_levels(t, &unpackers, |u, input| u.child_positions(input))?;
        values_at(t, &positions)
    }
}

/// The levels' column unpacking, where every level has it and there is
/// one level per dimension in a mode order; `None` where `t` is unpacked
/// by its level functions instead.
fn column_unpackers(t: &Tensor) -> Option<Vec<&dyn ColumnUnpack>> {
    let CoordMap::Modes(order) = &t.format.map else {
        return None;
    };
    let unpackers: Vec<&dyn ColumnUnpack> = t
        .format
        .levels
        .iter()
        .map(|l| l.column_unpack())
        .collect::<Option<_>>()?;
    let n = unpackers.len();
    let one_per_dimension = n > 0
        && order.len() == n
        && t.levels.len() == n
        && t.extents.len() == n
        && t.dims.len() == n;
    one_per_dimension.then_some(unpackers)
}

/// The positions of `t`'s last level that hold entries: from the root
/// down, `step` reads level `k` under its parents' positions and gives
/// the positions of their children.
fn walk_levels<'s>(
    t: &'s Tensor,
    unpackers: &[&dyn ColumnUnpack],
    mut step: impl FnMut(&dyn ColumnUnpack, &ColumnUnpackInput<'s, '_>) -> Result<Positions, String>,
) -> Result<Positions, StorageError> {
    let memory = u128::from(MemoryLimit::available().0);
    let mut parents = Positions::Range(0, 1);
    for (k, u) in unpackers.iter().enumerate() {
        let input = ColumnUnpackInput {
            level: k,
            storage: &t.levels,
            extents: &t.extents,
            parents: &parents,
            memory,
        };
        parents = step(*u, &input).map_err(|reason| StorageError::Invalid {
            tensor: t.name.clone(),
            level: k,
            spec: t.format.levels[k].spec(),
            reason,
        })?;
    }
    Ok(parents)
}

/// The values at the last level's `positions`, borrowed where they are
/// one run.
fn values_at<'a>(t: &'a Tensor, positions: &Positions) -> Result<Cow<'a, [f64]>, StorageError> {
    let err = |reason: String| StorageError::Pack {
        tensor: t.name.clone(),
        reason,
    };
    Ok(match positions {
        Positions::Range(lo, hi) => Cow::Borrowed(t.vals.get(*lo..*hi).ok_or_else(|| {
            err(format!(
                "value positions {lo}..{hi} beyond the {} values",
                t.vals.len()
            ))
        })?),
        Positions::List(v) => {
            // Checked once up front, so the gather is a plain loop.
            if v.iter().max().is_some_and(|&p| p >= t.vals.len()) {
                return Err(err("a value position beyond the values".into()));
            }
            Cow::Owned(v.iter().map(|&p| t.vals[p]).collect())
        }
    })
}

/// One column per level from each level's children, bottom up: entry `e`
/// is child `e` of the last level; its coordinate in a level above is that
/// of the ancestor its owners lead to. A first level that lists every
/// coordinate once (dense) over a level keeping each parent's children
/// together (compressed) gives its column as runs, the way CSR's `pos`
/// holds it, not one coordinate per entry.
fn columns(levels: Vec<(Cow<'_, [i32]>, Owners)>, n: usize) -> Result<Vec<Column<'_>>, String> {
    let nlevels = levels.len();
    let mut out = Vec::with_capacity(nlevels);
    // Which child of the current level each entry is (None: entry e is
    // child e).
    let mut index: Option<Vec<u32>> = None;
    // Entry e is child e of level 1, whose children are runs of level 0's.
    let mut runs_below: Option<Vec<i32>> = None;
    for (k, (coords, owners)) in levels.into_iter().enumerate().rev() {
        if let (0, Some(runs)) = (k, runs_below.take()) {
            if runs.len() == coords.len() + 1
                && coords.iter().enumerate().all(|(c, &x)| x as usize == c)
            {
                out.push(Column::Runs(runs));
                break;
            }
            index = Some(expand_runs(&runs).into_iter().map(|p| p as u32).collect());
        }
        let col = match &index {
            None if coords.len() == n => coords,
            None => {
                return Err(format!(
                    "level {k} lists {} children for {n} entries",
                    coords.len()
                ))
            }
            Some(ix) => {
                // One check of the largest index, then a plain gather.
                if ix.iter().max().is_some_and(|&m| m as usize >= coords.len()) {
                    return Err(format!(
                        "level {k}: a child index beyond its {} children",
                        coords.len()
                    ));
                }
                Cow::Owned(ix.iter().map(|&i| coords[i as usize]).collect())
            }
        };
        out.push(Column::Values(col));
        if k == 0 {
            break;
        }
        index = match owners {
            Owners::Same => index,
            Owners::First => Some(vec![0; n]),
            Owners::Runs(runs) => match index {
                None if k == 1 && runs.last().is_some_and(|&e| e as usize == n) => {
                    runs_below = Some(runs);
                    None
                }
                None if runs.last().is_some_and(|&e| e as usize == n) => {
                    Some(expand_runs(&runs).into_iter().map(|p| p as u32).collect())
                }
                None => {
                    return Err(format!(
                        "level {k} names owners of {} children for {n} entries",
                        runs.last().copied().unwrap_or(0)
                    ))
                }
                Some(ix) => {
                    let owner = expand_runs(&runs);
                    if ix.iter().max().is_some_and(|&m| m as usize >= owner.len()) {
                        return Err(format!("level {k}: a child index beyond its owners"));
                    }
                    Some(ix.iter().map(|&i| owner[i as usize] as u32).collect())
                }
            },
            Owners::Each(o) => Some(match index {
                None if o.len() == n => o,
                None => {
                    return Err(format!(
                        "level {k} names owners of {} children for {n} entries",
                        o.len()
                    ))
                }
                Some(ix) => {
                    if ix.iter().max().is_some_and(|&m| m as usize >= o.len()) {
                        return Err(format!("level {k}: a child index beyond its owners"));
                    }
                    ix.iter().map(|&i| o[i as usize]).collect()
                }
            }),
        };
    }
    out.reverse();
    Ok(out)
}
