//! Packing coordinates into any format. `pack` goes through the entry
//! columns (`assemble`); `pack_generic` is the reference it is tested
//! against and the path of formats the columns do not cover (DIA, ELL,
//! blocked formats, hashed levels): level by level, each level format
//! builds its own arrays from its parent's segments; the values land at the
//! positions of the last level.

use super::alloc::{check_allocation, MemoryLimit};
use super::entries::Entries;
use super::{StorageError, Tensor};
use crate::coo::CooTensor;
use crate::format::level::{LevelStorage, PackInput, Segment};
use crate::format::TensorFormat;

/// Pack `coo` (any order of entries, duplicates summed) into `format`.
pub fn pack(name: &str, coo: &CooTensor, format: &TensorFormat) -> Result<Tensor, StorageError> {
    super::assemble::pack_entries(name, Entries::from_coo(coo), format)
}

/// Refuse data whose order or dimensions the format cannot hold.
pub(super) fn check_shape(
    name: &str,
    dims: &[usize],
    format: &TensorFormat,
) -> Result<(), StorageError> {
    let err = |reason: String| StorageError::Pack {
        tensor: name.to_string(),
        reason,
    };
    if dims.len() != format.order() {
        return Err(err(format!(
            "format {} is for order {}, the data has order {}",
            format.display_name(),
            format.order(),
            dims.len()
        )));
    }
    for (d, &n) in dims.iter().enumerate() {
        if n > i32::MAX as usize {
            return Err(err(format!(
                "dimension {d} ({n}) does not fit 32-bit coordinates"
            )));
        }
    }
    Ok(())
}

/// The reference packer: canonicalize, map to level coordinates, sort, and
/// let each level build its arrays from its parent's segments.
pub fn pack_generic(
    name: &str,
    coo: &CooTensor,
    format: &TensorFormat,
) -> Result<Tensor, StorageError> {
    let err = |reason: String| StorageError::Pack {
        tensor: name.to_string(),
        reason,
    };
    check_shape(name, &coo.dims, format)?;
    let mut canon = coo.clone();
    canon.canonicalize();
    let (mut coords, extents) = format.map.to_levels(&canon).map_err(err)?;
    let nlevels = format.levels.len();
    let n = canon.nnz();
    let mut vals_in = canon.vals;
    sort_entries(&mut coords, &mut vals_in, nlevels, &extents);

    let mut parents = vec![Segment {
        pos: 0,
        lo: 0,
        hi: n,
    }];
    let mut parent_size = 1usize;
    let mut levels = Vec::with_capacity(nlevels);
    for (k, level) in format.levels.iter().enumerate() {
        let chain_len = format.levels[k + 1..]
            .iter()
            .take_while(|l| l.properties().branchless)
            .count();
        let memory = u128::from(MemoryLimit::available().0);
        let input = PackInput {
            level: k,
            coords: &coords,
            nlevels,
            extents: &extents,
            parents: &parents,
            parent_size,
            chain_len,
            memory,
        };
        check_allocation(
            name,
            &format!("level {k} ({})", level.spec()),
            level.positions_bound(parent_size as u128, extents[k], n),
            4,
        )?;
        let out = level.pack(&input).map_err(|r| StorageError::Invalid {
            tensor: name.to_string(),
            level: k,
            spec: level.spec(),
            reason: r,
        })?;
        let mut storage = LevelStorage::default();
        for (a, v) in out.arrays {
            storage.arrays.insert(a, v);
        }
        for (p, v) in out.params {
            storage.params.insert(p, v);
        }
        levels.push(storage);
        parents = out.children;
        parent_size = out.size;
    }
    check_allocation(name, "values", parent_size as u128, 8)?;
    let mut vals = vec![0.0; parent_size];
    crate::line_aligned::advise_huge_pages_if_mostly_written(&mut vals, parents.len());
    for seg in &parents {
        vals[seg.pos] = vals_in[seg.lo..seg.hi].iter().sum();
    }
    Ok(Tensor {
        name: name.to_string(),
        format: format.clone(),
        dims: coo.dims.clone(),
        extents,
        levels,
        vals,
    })
}

/// Sort entries lexicographically by level coordinates (skipped when they
/// already are, as for row-major formats over canonical input).
fn sort_entries(coords: &mut Vec<i64>, vals: &mut Vec<f64>, nlevels: usize, extents: &[usize]) {
    let n = vals.len();
    if nlevels == 0 || n < 2 {
        return;
    }
    let key = |e: usize| &coords[e * nlevels..(e + 1) * nlevels];
    if (1..n).all(|e| key(e - 1) <= key(e)) {
        return;
    }
    let ext: Vec<u64> = extents.iter().map(|&x| x as u64).collect();
    let counted = (ext.len() == nlevels)
        .then(|| {
            crate::coo::sorted_order(n, &ext, |e, d| {
                u64::try_from(coords[e * nlevels + d]).unwrap_or(u64::MAX)
            })
        })
        .flatten();
    let perm = counted.unwrap_or_else(|| {
        let mut perm: Vec<u32> = (0..n as u32).collect();
        perm.sort_by(|&a, &b| key(a as usize).cmp(key(b as usize)));
        perm
    });
    let mut c2 = Vec::with_capacity(coords.len());
    let mut v2 = Vec::with_capacity(n);
    for &e in &perm {
        c2.extend_from_slice(key(e as usize));
        v2.push(vals[e as usize]);
    }
    *coords = c2;
    *vals = v2;
}
