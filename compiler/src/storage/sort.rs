//! Sorting entry columns lexicographically by level coordinates and summing
//! duplicates, without a permutation array: columns already in order are
//! kept (borrowed) as they are; otherwise one counting pass over the first
//! level's coordinates, a prefix sum and a scatter of the other columns and
//! the values. The first level is then left as runs (the prefix sums: the
//! `pos` array of a compressed level below a dense one) rather than a
//! column, and one pass over the levels below checks that each run is in
//! order (true for a transpose filled row by row), sorting only the runs
//! that are not.
//!
//! Stable throughout, so duplicates are summed in their input order: the
//! same sums, bit for bit, as `CooTensor::canonicalize`.

use super::buckets::{self, Buckets};
use super::scratch::Scratch;
use crate::format::columns::Column;
use std::borrow::Cow;
use std::cmp::Ordering;

/// Entries sorted lexicographically by level coordinates, no two equal.
#[derive(Debug)]
pub struct Sorted<'a> {
    /// One column per level (the first may be runs).
    pub cols: Vec<Column<'a>>,
    pub vals: Cow<'a, [f64]>,
    /// Per entry, the first level at which it differs from the previous
    /// entry (0 for the first).
    pub split: Vec<u8>,
}

/// Sort `cols` (one per level, level order) and `vals`, summing duplicates.
/// Every coordinate must lie in `[0, extents[k])`. At most 254 levels and
/// `i32::MAX - 1` entries. New columns come from `scratch` where it can.
pub fn sort_unique<'a>(
    cols: Vec<Column<'a>>,
    vals: Cow<'a, [f64]>,
    extents: &[usize],
    scratch: &mut Scratch,
) -> Result<Sorted<'a>, String> {
    let n = vals.len();
    let nlevels = cols.len();
    if nlevels == 0
        || nlevels >= DESCENT as usize
        || extents.len() != nlevels
        || n >= i32::MAX as usize
    {
        return Err(format!("cannot sort {n} entries of {nlevels} levels"));
    }
    if let [Column::Values(keys), Column::Runs(rows)] = cols.as_slice() {
        if extents[0] <= 4 * n + 4096 && keys.len() == n && runs_fit(rows, extents[1], n) {
            check_range(keys, extents[0], 0)?;
            // A matrix read row by row, sorted by column (SciPy's csr_tocsc):
            // rows are visited in order, so each column's run comes out
            // sorted by row, and the row column is never materialised.
            let (rest, v, runs) = counting_sort_rows(keys, rows, &vals, extents[0], scratch);
            let mut rest = vec![rest];
            let mut v = v;
            let mut split = run_splits(&mut rest, &mut v, &runs);
            let mut out = vec![Column::Runs(runs)];
            out.extend(rest.into_iter().map(|c| Column::Values(Cow::Owned(c))));
            let mut vals: Cow<'a, [f64]> = Cow::Owned(v);
            if split.iter().any(|&s| usize::from(s) == nlevels) {
                let mut values: Vec<Cow<'a, [i32]>> =
                    out.into_iter().map(Column::into_values).collect();
                sum_duplicates(&mut values, vals.to_mut(), &mut split);
                out = values.into_iter().map(Column::Values).collect();
            }
            return Ok(Sorted {
                cols: out,
                vals,
                split,
            });
        }
    }
    let cols: Vec<Cow<'a, [i32]>> = cols.into_iter().map(Column::into_values).collect();
    for (k, col) in cols.iter().enumerate() {
        if col.len() != n {
            return Err(format!(
                "level {k} has {} coordinates for {n} values",
                col.len()
            ));
        }
        check_range(col, extents[k], k)?;
    }
    let (mut cols, mut vals, mut split) = if let Some(split) = sorted_splits(&cols) {
        (
            cols.into_iter().map(Column::Values).collect::<Vec<_>>(),
            vals,
            split,
        )
    } else if extents[0] <= 4 * n + 4096 {
        let (mut rest, mut v, runs) = counting_sort(&cols, &vals, extents[0], scratch);
        let split = run_splits(&mut rest, &mut v, &runs);
        let mut out = vec![Column::Runs(runs)];
        out.extend(rest.into_iter().map(|c| Column::Values(Cow::Owned(c))));
        (out, Cow::Owned(v), split)
    } else {
        // A first level far wider than the entries: comparing is cheaper
        // than counting.
        let (c, v) = comparison_sort(&cols, &vals);
        let split = sorted_splits(&c).ok_or("entries out of order after sorting")?;
        (c.into_iter().map(Column::Values).collect(), v, split)
    };
    if split.iter().any(|&s| usize::from(s) == nlevels) {
        let mut values: Vec<Cow<'a, [i32]>> = cols.into_iter().map(Column::into_values).collect();
        sum_duplicates(&mut values, vals.to_mut(), &mut split);
        cols = values.into_iter().map(Column::Values).collect();
    }
    Ok(Sorted { cols, vals, split })
}

/// Every coordinate of level `k` in `[0, extent)`. Negative coordinates
/// read as huge unsigned ones (a plain max, which vectorises; the culprit
/// is looked up only on failure).
pub(super) fn check_range(col: &[i32], extent: usize, k: usize) -> Result<(), String> {
    if col
        .iter()
        .map(|&c| c as u32)
        .max()
        .is_some_and(|m| m as usize >= extent)
    {
        let c = col
            .iter()
            .find(|&&c| c as u32 as usize >= extent)
            .copied()
            .unwrap_or(-1);
        return Err(format!(
            "coordinate {c} outside level {k} (extent {extent})"
        ));
    }
    Ok(())
}

/// Runs that cover entries `0..n` in order, for coordinates below `extent`.
pub(super) fn runs_fit(runs: &[i32], extent: usize, n: usize) -> bool {
    runs.len() <= extent + 1
        && runs.first() == Some(&0)
        && runs.last().is_some_and(|&e| e as usize == n)
        && runs.windows(2).all(|w| w[0] <= w[1])
}

fn lex_cmp(cols: &[impl AsRef<[i32]>], a: usize, b: usize) -> Ordering {
    for col in cols {
        let col = col.as_ref();
        match col[a].cmp(&col[b]) {
            Ordering::Equal => continue,
            o => return o,
        }
    }
    Ordering::Equal
}

/// The splits of entries already in order, None when they are not: per
/// entry, the first level where it differs from the previous one
/// (`cols.len()` for a duplicate; 0 for the first entry). Branch-free
/// passes over chunks, so unsorted input (a transpose's buffer) stops after
/// the first chunk.
fn sorted_splits(cols: &[Cow<'_, [i32]>]) -> Option<Vec<u8>> {
    const CHUNK: usize = 4096;
    let first = &cols[0];
    let n = first.len();
    let mut split = vec![0u8; n];
    let mut from = 1;
    while from < n {
        let end = (from + CHUNK).min(n);
        below_splits(&cols[1..], &mut split[..end], from);
        let mut descent = false;
        for ((s, &x), &y) in split[from..end]
            .iter_mut()
            .zip(&first[from - 1..end - 1])
            .zip(&first[from..end])
        {
            descent |= y < x;
            *s = if x == y { *s } else { 0 };
        }
        if descent || split[from..end].contains(&DESCENT) {
            return None;
        }
        from = end;
    }
    Some(split)
}

/// Marks, in the splits, an entry below its predecessor in the levels
/// under the first: out of order unless it starts a run.
const DESCENT: u8 = u8::MAX;

/// The splits of entries `from..` from the levels below the first
/// (`rest`), as if every entry shared its predecessor's first coordinate;
/// `DESCENT` where an entry is below its predecessor there.
fn below_splits(rest: &[impl AsRef<[i32]>], split: &mut [u8], from: usize) {
    let nlevels = rest.len() as u8 + 1;
    let n = split.len();
    match rest {
        [] => split[from.min(n)..].fill(1),
        // Matrices, spelled out branch-free so the pass vectorises.
        [b] => {
            let b = b.as_ref();
            let from = from.max(1);
            if from >= n {
                return;
            }
            for ((s, &x), &y) in split[from..]
                .iter_mut()
                .zip(&b[from - 1..n - 1])
                .zip(&b[from..n])
            {
                let same = 1 + u8::from(x == y);
                *s = if y < x { DESCENT } else { same };
            }
        }
        _ => {
            for e in from.max(1)..n {
                split[e] = nlevels;
                for (k, col) in rest.iter().enumerate() {
                    let col = col.as_ref();
                    if col[e] != col[e - 1] {
                        split[e] = if col[e] < col[e - 1] {
                            DESCENT
                        } else {
                            k as u8 + 1
                        };
                        break;
                    }
                }
            }
        }
    }
}

/// Splits after the counting sort: from the levels below, then 0 at each
/// run start. A run with a descent left inside is sorted (stably) on its
/// own and its splits computed again.
fn run_splits(rest: &mut [Vec<i32>], vals: &mut [f64], runs: &[i32]) -> Vec<u8> {
    let n = vals.len();
    let mut split = vec![0u8; n];
    below_splits(rest, &mut split, 1);
    for w in runs.windows(2) {
        if w[0] < w[1] {
            split[w[0] as usize] = 0;
        }
    }
    if split.contains(&DESCENT) {
        for w in runs.windows(2) {
            let (lo, hi) = (w[0] as usize, w[1] as usize);
            if lo < hi && split[lo + 1..hi].contains(&DESCENT) {
                sort_range(rest, vals, lo, hi);
                below_splits(rest, &mut split[..hi], lo + 1);
            }
        }
    }
    split
}

/// Stable counting sort by the first column: count, prefix sum, scatter the
/// other columns and the values (one pass, no permutation array). Returns
/// the other columns, the values and the runs of the first column.
fn counting_sort(
    cols: &[Cow<'_, [i32]>],
    vals: &[f64],
    extent: usize,
    scratch: &mut Scratch,
) -> (Vec<Vec<i32>>, Vec<f64>, Vec<i32>) {
    let n = vals.len();
    let keys = &cols[0];
    // i32 offsets (fewer than i32::MAX entries): half the cache footprint
    // of usize, and the old result's `pos` array can hold them.
    let mut next = scratch.ints(extent + 1);
    for &k in keys.iter() {
        next[k as usize + 1] += 1;
    }
    for i in 1..next.len() {
        next[i] += next[i - 1];
    }
    let rest = &cols[1..];
    let mut out_rest: Vec<Vec<i32>> = rest.iter().map(|_| scratch.ints(n)).collect();
    let mut out_vals = scratch.floats(n, n);
    match (rest, out_rest.as_mut_slice()) {
        // The common case (matrices) with its one column spelled out.
        ([col], [out]) if buckets::pays(keys, extent) => {
            let mut b = Buckets::new(&next, out, &mut out_vals);
            for ((&k, &c), &v) in keys.iter().zip(col.iter()).zip(vals) {
                b.push(k, c, v);
            }
            b.sort(&mut next);
        }
        ([col], [out]) => {
            for ((&k, &c), &v) in keys.iter().zip(col.iter()).zip(vals) {
                let d = next[k as usize] as usize;
                next[k as usize] += 1;
                out[d] = c;
                out_vals[d] = v;
            }
        }
        _ => {
            for (e, (&k, &v)) in keys.iter().zip(vals).enumerate() {
                let d = next[k as usize] as usize;
                next[k as usize] += 1;
                for (out, col) in out_rest.iter_mut().zip(rest) {
                    out[d] = col[e];
                }
                out_vals[d] = v;
            }
        }
    }
    // `next[k]` is now the end of run k (the start of run k + 1), and
    // `next[extent]` still n: shift by one for the runs.
    next.rotate_right(1);
    next[0] = 0;
    (out_rest, out_vals, next)
}

/// `counting_sort` of a matrix whose second level's coordinates are runs
/// (row `r` for entries `rows[r]..rows[r + 1]`, as `runs_fit` checked):
/// returns the rows scattered, the values and the runs of the keys.
fn counting_sort_rows(
    keys: &[i32],
    rows: &[i32],
    vals: &[f64],
    extent: usize,
    scratch: &mut Scratch,
) -> (Vec<i32>, Vec<f64>, Vec<i32>) {
    let n = vals.len();
    let mut next = scratch.ints(extent + 1);
    for &k in keys {
        next[k as usize + 1] += 1;
    }
    for i in 1..next.len() {
        next[i] += next[i - 1];
    }
    let mut out = scratch.ints(n);
    let mut out_vals = scratch.floats(n, n);
    if buckets::pays(keys, extent) {
        let mut b = Buckets::new(&next, &mut out, &mut out_vals);
        for (r, w) in rows.windows(2).enumerate() {
            let (lo, hi) = (w[0] as usize, w[1] as usize);
            for (&k, &v) in keys[lo..hi].iter().zip(&vals[lo..hi]) {
                b.push(k, r as i32, v);
            }
        }
        b.sort(&mut next);
    } else {
        for (r, w) in rows.windows(2).enumerate() {
            let (lo, hi) = (w[0] as usize, w[1] as usize);
            for (&k, &v) in keys[lo..hi].iter().zip(&vals[lo..hi]) {
                let d = next[k as usize] as usize;
                next[k as usize] += 1;
                out[d] = r as i32;
                out_vals[d] = v;
            }
        }
    }
    next.rotate_right(1);
    next[0] = 0;
    (out, out_vals, next)
}

/// Stable sort of entries `lo..hi` by the columns `rest`.
fn sort_range(rest: &mut [Vec<i32>], vals: &mut [f64], lo: usize, hi: usize) {
    let perm: Vec<u32> = if let [key] = rest {
        // One key column: sort (key, index) pairs as integers, which is
        // stable because the indices are distinct.
        let mut pairs: Vec<u64> = (lo..hi)
            .map(|e| (u64::from(key[e] as u32) << 32) | (e - lo) as u64)
            .collect();
        pairs.sort_unstable();
        pairs.into_iter().map(|p| p as u32).collect()
    } else {
        let mut perm: Vec<u32> = (0..(hi - lo) as u32).collect();
        perm.sort_by(|&a, &b| lex_cmp(rest, lo + a as usize, lo + b as usize));
        perm
    };
    for col in rest.iter_mut() {
        let moved: Vec<i32> = perm.iter().map(|&p| col[lo + p as usize]).collect();
        col[lo..hi].copy_from_slice(&moved);
    }
    let moved: Vec<f64> = perm.iter().map(|&p| vals[lo + p as usize]).collect();
    vals[lo..hi].copy_from_slice(&moved);
}

/// Stable comparison sort of whole entries (a permutation, then a gather).
fn comparison_sort<'a>(
    cols: &[Cow<'_, [i32]>],
    vals: &[f64],
) -> (Vec<Cow<'a, [i32]>>, Cow<'a, [f64]>) {
    let mut perm: Vec<u32> = (0..vals.len() as u32).collect();
    perm.sort_by(|&a, &b| lex_cmp(cols, a as usize, b as usize));
    let out = cols
        .iter()
        .map(|col| Cow::Owned(perm.iter().map(|&p| col[p as usize]).collect()))
        .collect();
    (
        out,
        Cow::Owned(perm.iter().map(|&p| vals[p as usize]).collect()),
    )
}

/// Fold each run of equal entries into its first, summing values in order.
fn sum_duplicates(cols: &mut [Cow<'_, [i32]>], vals: &mut Vec<f64>, split: &mut Vec<u8>) {
    let nlevels = cols.len() as u8;
    let n = vals.len();
    let mut keep = Vec::with_capacity(n);
    let mut w = 0usize;
    for e in 0..n {
        if e > 0 && split[e] == nlevels {
            vals[w - 1] += vals[e];
        } else {
            vals[w] = vals[e];
            split[w] = split[e];
            keep.push(e);
            w += 1;
        }
    }
    vals.truncate(w);
    split.truncate(w);
    for col in cols.iter_mut() {
        let col = col.to_mut();
        for (i, &e) in keep.iter().enumerate() {
            col[i] = col[e];
        }
        col.truncate(w);
    }
}
