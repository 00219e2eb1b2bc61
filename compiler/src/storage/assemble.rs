//! Packing entry columns into a format directly: the columns are put in
//! level order, sorted with duplicates summed (`sort`), and each level
//! builds its arrays in one pass over them through its `ColumnPack`
//! capability, tracking every entry's position as it goes. Formats that are
//! not one level per dimension, or have a level without the capability, go
//! through the reference packer (`pack::pack_generic`); formats of levels
//! that place entries at computed offsets (dense) skip the sort
//! (`scatter`).

use super::alloc::{check_allocation, MemoryLimit};
use super::entries::Entries;
use super::pack::{check_shape, pack_generic};
use super::scatter::scatter;
use super::scratch::Scratch;
use super::sort::{sort_unique, Sorted};
use super::{StorageError, Tensor};
use crate::format::columns::{Column, ColumnPack, ColumnPackInput, Placement};
use crate::format::level::LevelStorage;
use crate::format::{CoordMap, TensorFormat};
use std::borrow::Cow;

/// Pack `entries` (any order, duplicates summed) into `format`.
pub fn pack_entries(
    name: &str,
    entries: Entries<'_>,
    format: &TensorFormat,
) -> Result<Tensor, StorageError> {
    pack_entries_reusing(name, entries, format, &mut Scratch::default())
}

/// `pack_entries`, taking the new columns and arrays from `scratch` where
/// its vectors fit (the old result of a kernel that rebuilds it each run).
pub fn pack_entries_reusing(
    name: &str,
    entries: Entries<'_>,
    format: &TensorFormat,
    scratch: &mut Scratch,
) -> Result<Tensor, StorageError> {
    let err = |reason: String| StorageError::Pack {
        tensor: name.to_string(),
        reason,
    };
    check_shape(name, &entries.dims, format)?;
    let Some((order, packers)) = column_packers(format) else {
        let coo = entries.to_coo().map_err(err)?;
        return pack_generic(name, &coo, format);
    };
    let Entries { dims, cols, vals } = entries;
    if cols.len() != order.len() {
        return Err(err(format!(
            "{} coordinate columns for an order-{} format",
            cols.len(),
            order.len()
        )));
    }
    let extents: Vec<usize> = order.iter().map(|&d| dims[d]).collect();
    if vals.len() >= i32::MAX as usize || !positions_fit_i32(format, &extents, vals.len()) {
        let coo = Entries { dims, cols, vals }.to_coo().map_err(err)?;
        return pack_generic(name, &coo, format);
    }
    let mut by_dim: Vec<Option<Column<'_>>> = cols.into_iter().map(Some).collect();
    let level_cols: Vec<Column<'_>> = order
        .iter()
        .map(|&d| {
            by_dim[d]
                .take()
                .unwrap_or(Column::Values(Cow::Borrowed(&[])))
        })
        .collect();
    let (levels, vals) = match scatter(
        name,
        format,
        &packers,
        &level_cols,
        &vals,
        &extents,
        scratch,
    ) {
        Some(placed) => placed?,
        None => pack_sorted(name, format, &packers, level_cols, vals, &extents, scratch)?,
    };
    Ok(Tensor {
        name: name.to_string(),
        format: format.clone(),
        dims,
        extents,
        levels,
        vals,
    })
}

/// The levels and values of `level_cols` (one per level, level order) and
/// `vals`, sorted with duplicates summed and handed to each level's packer.
fn pack_sorted(
    name: &str,
    format: &TensorFormat,
    packers: &[&dyn ColumnPack],
    level_cols: Vec<Column<'_>>,
    vals: Cow<'_, [f64]>,
    extents: &[usize],
    scratch: &mut Scratch,
) -> Result<(Vec<LevelStorage>, Vec<f64>), StorageError> {
    let err = |reason: String| StorageError::Pack {
        tensor: name.to_string(),
        reason,
    };
    let sorted = sort_unique(level_cols, vals, extents, scratch).map_err(err)?;
    let Sorted {
        cols: mut sorted_cols,
        vals: sorted_vals,
        split,
    } = sorted;
    let n = sorted_vals.len();
    // The root holds every entry at its one position.
    let mut placement = Placement::Runs(vec![0, n as i32]);
    let mut parent_size = 1usize;
    let mut levels = Vec::with_capacity(packers.len());
    let memory = u128::from(MemoryLimit::available().0);
    for (k, packer) in packers.iter().enumerate() {
        let level = &format.levels[k];
        let chain_len = format.levels[k + 1..]
            .iter()
            .take_while(|l| l.properties().branchless)
            .count();
        check_allocation(
            name,
            &format!("level {k} ({})", level.spec()),
            level.positions_bound(parent_size as u128, extents[k], n),
            4,
        )?;
        // The level may keep its own column; the ones below stay readable
        // (below the first level, they are columns of values).
        let (head, tail) = sorted_cols.split_at_mut(k + 1);
        let coords = std::mem::replace(&mut head[k], Column::Values(Cow::Borrowed(&[])));
        let below: Vec<&[i32]> = tail
            .iter()
            .map(|c| if let Column::Values(v) = c { &**v } else { &[] })
            .collect();
        let input = ColumnPackInput {
            level: k,
            coords,
            below: &below,
            split: &split,
            extents,
            parent_size,
            chain_len,
            memory,
        };
        let out =
            packer
                .pack_columns(input, &mut placement)
                .map_err(|r| StorageError::Invalid {
                    tensor: name.to_string(),
                    level: k,
                    spec: level.spec(),
                    reason: r,
                })?;
        if out.size >= i32::MAX as usize {
            return Err(err(format!(
                "level {k} has {} positions, more than 32-bit index arrays reach",
                out.size
            )));
        }
        let mut storage = LevelStorage::default();
        storage.arrays.extend(out.arrays);
        storage.params.extend(out.params);
        levels.push(storage);
        parent_size = out.size;
    }
    check_allocation(name, "values", parent_size as u128, 8)?;
    // Entries land in position order, one position each, when the last
    // level stores exactly the entries (CSR, COO, CSF): keep the column.
    let vals = match placement {
        Placement::Identity if parent_size == n => sorted_vals.into_owned(),
        placement => {
            let mut v = scratch.floats(parent_size, n);
            for (&p, &x) in placement.into_each(n).iter().zip(sorted_vals.iter()) {
                v[p as usize] = x;
            }
            v
        }
    };
    Ok((levels, vals))
}

/// Whether every level's positions are sure to fit the `i32` indices the
/// column packers track them in, as index arrays hold them (dense levels
/// multiply: a dense level of more positions goes through the reference).
fn positions_fit_i32(format: &TensorFormat, extents: &[usize], n: usize) -> bool {
    let mut bound: u128 = 1;
    for (level, &extent) in format.levels.iter().zip(extents) {
        bound = level.positions_bound(bound.min(usize::MAX as u128), extent, n);
        if bound >= i32::MAX as u128 {
            return false;
        }
    }
    true
}

/// The mode order and every level's `ColumnPack`, when the format has one
/// level per dimension (at least one, at most 254) and all offer it.
fn column_packers(format: &TensorFormat) -> Option<(&[usize], Vec<&dyn ColumnPack>)> {
    let CoordMap::Modes(order) = &format.map else {
        return None;
    };
    if order.is_empty() || order.len() != format.levels.len() || order.len() >= u8::MAX as usize {
        return None;
    }
    let packers = format
        .levels
        .iter()
        .map(|l| l.column_pack())
        .collect::<Option<Vec<_>>>()?;
    Some((order, packers))
}

#[cfg(test)]
mod tests {
    use crate::coo::CooTensor;
    use crate::format::{parse_format, Registry};
    use crate::line_aligned::{advised_huge, HUGE};

    /// An order-2 tensor of `rows` x `cols` with an entry at every
    /// `every`-th position.
    fn entries(rows: usize, cols: usize, every: usize) -> CooTensor {
        let mut t = CooTensor::new(vec![rows, cols]);
        for p in (0..rows * cols).step_by(every) {
            t.push(&[(p / cols) as u32, (p % cols) as u32], 1.0);
        }
        t
    }

    #[test]
    fn values_written_whole_go_on_huge_pages_and_padded_ones_not() {
        let r = Registry::builtin();
        let dense = parse_format("dense", 2, &r).unwrap(); // ok: test code
        let rows = HUGE / 8 / 64 * 2; // values of 2 * HUGE bytes
        let full = super::super::pack(&"D".to_string(), &entries(rows, 64, 1), &dense).unwrap(); // ok: test code
                                                                                                 // 64 MiB, above glibc's largest mmap threshold: a fresh mapping,
                                                                                                 // never memory an earlier block (of another test thread) had advised.
        let rows_sparse = (64 << 20) / 8 / 64;
        let sparse =
            super::super::pack(&"E".to_string(), &entries(rows_sparse, 64, 97), &dense).unwrap(); // ok: test code
        let middle = |v: &[f64]| v[v.len() / 2..].as_ptr() as *const u8;
        match (
            advised_huge(middle(&full.vals)),
            advised_huge(middle(&sparse.vals)),
        ) {
            (Some(f), Some(s)) => assert!(f && !s, "full {f}, sparse {s}"),
            _ => eprintln!("skipped: /proc/self/smaps does not tell"),
        }
        assert_eq!(full.vals.len(), rows * 64);
        assert!(full.vals.iter().all(|&v| v == 1.0));
        assert_eq!(
            sparse.vals.iter().filter(|&&v| v == 1.0).count(),
            (rows_sparse * 64).div_ceil(97)
        );
    }

    #[test]
    fn sorted_columns_kept_as_arrays_go_on_huge_pages() {
        // Entries column by column: CSR sorts them, and keeps the sorted
        // columns as its `crd` and values. Over 32 MiB of `crd`, past
        // glibc's largest mmap threshold: fresh mappings, never memory an
        // earlier block (of another test thread) had advised.
        let (rows, cols) = (2048, 4160);
        let mut t = CooTensor::new(vec![rows, cols]);
        for c in 0..cols {
            for r in 0..rows {
                t.push(&[r as u32, c as u32], (r + c) as f64);
            }
        }
        let csr = parse_format("CSR", 2, &Registry::builtin()).unwrap(); // ok: test code
        let a = super::super::pack(&"A".to_string(), &t, &csr).unwrap(); // ok: test code
        let crd = a.levels[1].arrays.get("crd").unwrap(); // ok: test code
        assert!(crd.len() * 4 > 32 << 20);
        match (
            advised_huge(crd[crd.len() / 2..].as_ptr() as *const u8),
            advised_huge(a.vals[a.vals.len() / 2..].as_ptr() as *const u8),
        ) {
            (Some(c), Some(v)) => assert!(c && v, "crd {c}, values {v}"),
            _ => eprintln!("skipped: /proc/self/smaps does not tell"),
        }
        assert_eq!(crd[..3], [0, 1, 2]);
        assert_eq!(a.vals[rows * cols - 1], (rows - 1 + cols - 1) as f64);
    }
}
