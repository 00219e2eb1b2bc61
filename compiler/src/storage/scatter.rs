//! Packing entries into a format whose every level places them at an
//! offset computed from their coordinates (`ColumnPack::offset_storage`:
//! dense levels). Each entry's position is known without looking at the
//! others, so the entries are added into place in the order they come,
//! and nothing is sorted: converting a sparse or hashed vector to dense
//! before each run of a kernel that reads it by locate is one pass over
//! its entries, not a sort and a pass over runs.
//!
//! Duplicates are summed in their input order, as the sorting path sums
//! them (the one difference: a lone `-0.0` entry is stored as `0.0`).

use super::alloc::check_allocation;
use super::scratch::Scratch;
use super::sort::{check_range, runs_fit};
use super::StorageError;
use crate::format::columns::{Column, ColumnPack};
use crate::format::level::LevelStorage;
use crate::format::TensorFormat;

/// The levels and values of `cols` (one per level, level order) and `vals`
/// packed by offsets, or None when a level does not place entries so.
pub(super) fn scatter(
    name: &str,
    format: &TensorFormat,
    packers: &[&dyn ColumnPack],
    cols: &[Column<'_>],
    vals: &[f64],
    extents: &[usize],
    scratch: &mut Scratch,
) -> Option<Result<(Vec<LevelStorage>, Vec<f64>), StorageError>> {
    let mut parent_size = 1usize;
    let mut levels = Vec::with_capacity(packers.len());
    for (k, packer) in packers.iter().enumerate() {
        let out = match packer.offset_storage(parent_size, extents[k])? {
            Ok(out) => out,
            Err(reason) => {
                return Some(Err(StorageError::Invalid {
                    tensor: name.to_string(),
                    level: k,
                    spec: format.levels[k].spec(),
                    reason,
                }))
            }
        };
        let mut storage = LevelStorage::default();
        storage.arrays.extend(out.arrays);
        storage.params.extend(out.params);
        levels.push(storage);
        parent_size = out.size;
    }
    // As the sorting path does: refused with a clear error, not aborted on.
    if let Err(e) = check_allocation(name, "values", parent_size as u128, 8) {
        return Some(Err(e));
    }
    let placed = positions(cols, vals.len(), extents)
        .map(|pos| add_into_place(&pos, vals, parent_size, scratch))
        .map_err(|reason| StorageError::Pack {
            tensor: name.to_string(),
            reason,
        });
    Some(placed.map(|v| (levels, v)))
}

/// Every entry's position: level by level, `p * extent + coordinate`,
/// after checking each coordinate lies in its level's extent.
fn positions(cols: &[Column<'_>], n: usize, extents: &[usize]) -> Result<Vec<usize>, String> {
    let mut pos = vec![0usize; n];
    for (k, (col, &extent)) in cols.iter().zip(extents).enumerate() {
        match col {
            Column::Values(c) => {
                if c.len() != n {
                    return Err(format!(
                        "level {k} has {} coordinates for {n} values",
                        c.len()
                    ));
                }
                check_range(c, extent, k)?;
                for (p, &c) in pos.iter_mut().zip(c.iter()) {
                    *p = *p * extent + c as usize;
                }
            }
            Column::Runs(runs) => {
                if !runs_fit(runs, extent, n) {
                    return Err(format!(
                        "level {k}'s coordinate runs do not cover the {n} entries"
                    ));
                }
                for (c, w) in runs.windows(2).enumerate() {
                    for p in &mut pos[w[0] as usize..w[1] as usize] {
                        *p = *p * extent + c;
                    }
                }
            }
        }
    }
    Ok(pos)
}

/// `size` values, each the sum of the entries placed there (zero where
/// none is).
fn add_into_place(pos: &[usize], vals: &[f64], size: usize, scratch: &mut Scratch) -> Vec<f64> {
    let mut out = scratch.floats(size, pos.len());
    for (&p, &v) in pos.iter().zip(vals) {
        out[p] += v;
    }
    out
}
