//! A counting sort's scatter in two passes, for many keys at scattered
//! places.
//!
//! Why: one pass sends each entry straight to its key's next free
//! position. With a million keys in no order (the transpose of the
//! power-law matrix of `bench/run.py`, a million columns) every entry then
//! misses the caches twice, once for its key's counter and once for the
//! line it writes: that pass took four fifths of CSR -> CSC there, slower
//! than SciPy's `.T.tocsr()`. Here the first pass appends each entry, in
//! input order, to the bucket of its key's high bits (a few hundred
//! buckets, each a stream that fills whole lines), in the very arrays the
//! sort fills, each bucket where its keys' runs will lie. The second
//! sorts the buckets one after the other, through a copy: a bucket's
//! counters and its entries stay in the caches while it is sorted.
//! Where the keys follow each other (a stencil's columns, row after row),
//! one pass already finds its counters and lines in the caches, and two
//! would only add a pass.
//!
//! Stable: both passes keep the entries of a bucket, and so of a key, in
//! their input order.

/// Keys from which the counters outgrow a core's L2 cache (256 KiB of
/// `i32`).
const WIDE_KEYS: usize = 1 << 16;
/// Entries from which the extra pass costs less than the misses it saves.
const MANY_ENTRIES: usize = 1 << 18;
/// About 2^8 buckets, whatever the number of keys.
const BUCKET_BITS: u32 = 8;

/// Whether `keys` (the sort's keys in input order, `extent` of them) are
/// scattered in two passes: many entries over many keys, sampled as
/// scattered (`ir::gathers::lines_of_their_own`, the sample that decides
/// the kernels' gathers, taken here on the keys' counters).
pub(super) fn pays(keys: &[i32], extent: usize) -> bool {
    extent >= WIDE_KEYS
        && keys.len() >= MANY_ENTRIES
        && crate::ir::gathers::lines_of_their_own(keys)
            .is_some_and(|s| s > crate::ir::gathers::SCATTERED_LINES)
}

/// Entries appended to their key's bucket, in the arrays the sort fills.
pub(super) struct Buckets<'a> {
    /// A key's bucket is `key >> shift`.
    shift: u32,
    /// Per bucket, its first position, and one past the last bucket.
    bounds: Vec<usize>,
    /// Per bucket, the position its next entry goes to.
    ends: Vec<usize>,
    /// Each position's key.
    keys: Vec<i32>,
    out: &'a mut [i32],
    out_vals: &'a mut [f64],
}

impl<'a> Buckets<'a> {
    /// Empty buckets for keys whose runs start at `starts` (a key's first
    /// position, `starts.len() - 1` keys, as the counting sort's prefix
    /// sums leave them), to fill `out` and `out_vals`.
    pub(super) fn new(starts: &[i32], out: &'a mut [i32], out_vals: &'a mut [f64]) -> Self {
        Buckets::with_shift(starts, out, out_vals, shift_for(starts.len() - 1))
    }

    fn with_shift(starts: &[i32], out: &'a mut [i32], out_vals: &'a mut [f64], shift: u32) -> Self {
        let keys = starts.len() - 1;
        let bounds: Vec<usize> = (0..=(keys >> shift) + 1)
            .map(|b| starts[(b << shift).min(keys)] as usize)
            .collect();
        // Allocated uninitialised and then zeroed, where `vec![0; n]`
        // would map fresh pages for the system to clear: a large block
        // freed by the previous run is taken again (`retained`).
        let mut position_keys = Vec::with_capacity(out.len());
        position_keys.resize(out.len(), 0);
        Buckets {
            shift,
            ends: bounds[..bounds.len() - 1].to_vec(),
            bounds,
            keys: position_keys,
            out,
            out_vals,
        }
    }

    /// Append the next entry in input order: its key, the coordinate it
    /// carries to its sorted position, and its value.
    #[inline]
    pub(super) fn push(&mut self, key: i32, carried: i32, value: f64) {
        let b = (key as u32 >> self.shift) as usize;
        let at = self.ends[b];
        self.ends[b] = at + 1;
        self.keys[at] = key;
        self.out[at] = carried;
        self.out_vals[at] = value;
    }

    /// The second pass, once every entry is in: each bucket's entries to
    /// position `next[key]`, `next[key]` moved on (as the single pass
    /// leaves it).
    pub(super) fn sort(self, next: &mut [i32]) {
        let widest = self.bounds.windows(2).map(|w| w[1] - w[0]).max();
        let (mut keys, mut carried, mut vals) = (Vec::new(), Vec::new(), Vec::new());
        keys.reserve(widest.unwrap_or(0));
        carried.reserve(widest.unwrap_or(0));
        vals.reserve(widest.unwrap_or(0));
        for w in self.bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            keys.clear();
            carried.clear();
            vals.clear();
            keys.extend_from_slice(&self.keys[lo..hi]);
            carried.extend_from_slice(&self.out[lo..hi]);
            vals.extend_from_slice(&self.out_vals[lo..hi]);
            for ((&k, &c), &v) in keys.iter().zip(&carried).zip(&vals) {
                let at = next[k as usize] as usize;
                next[k as usize] += 1;
                self.out[at] = c;
                self.out_vals[at] = v;
            }
        }
    }
}

/// The shift that leaves about `2^BUCKET_BITS` buckets for `keys` keys.
fn shift_for(keys: usize) -> u32 {
    (usize::BITS - keys.leading_zeros()).saturating_sub(BUCKET_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The single pass the buckets stand in for.
    fn one_pass(keys: &[i32], starts: &[i32]) -> (Vec<i32>, Vec<f64>) {
        let mut next = starts.to_vec();
        let (mut out, mut vals) = (vec![-1; keys.len()], vec![-1.0; keys.len()]);
        for (e, &k) in keys.iter().enumerate() {
            let at = next[k as usize] as usize;
            next[k as usize] += 1;
            out[at] = e as i32;
            vals[at] = e as f64 * 0.5;
        }
        (out, vals)
    }

    fn random_keys(extent: usize, n: usize, seed: &mut u64) -> Vec<i32> {
        (0..n)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((*seed >> 33) as usize % extent) as i32
            })
            .collect()
    }

    #[test]
    fn two_passes_place_every_entry_where_one_pass_does() {
        // Keys with repeats, unused keys, the last key used or not; the
        // entry's index carried, so any change of order within a key
        // shows.
        let mut seed = 7;
        for (extent, n) in [(1, 5), (1000, 3000), (70_000, 20_000), (5000, 1), (300, 0)] {
            let keys = random_keys(extent, n, &mut seed);
            let mut starts = vec![0i32; extent + 1];
            keys.iter().for_each(|&k| starts[k as usize + 1] += 1);
            (1..=extent).for_each(|i| starts[i] += starts[i - 1]);
            for shift in [0, 3, shift_for(extent), 31] {
                let (mut out, mut vals) = (vec![-1; n], vec![-1.0; n]);
                let mut b = Buckets::with_shift(&starts, &mut out, &mut vals, shift);
                for (e, &k) in keys.iter().enumerate() {
                    b.push(k, e as i32, e as f64 * 0.5);
                }
                let mut next = starts.clone();
                b.sort(&mut next);
                assert_eq!(
                    (out, vals),
                    one_pass(&keys, &starts),
                    "extent {extent}, shift {shift}"
                );
                assert_eq!(
                    next[..extent],
                    starts[1..],
                    "each key's counter at its run's end"
                );
            }
        }
    }

    #[test]
    fn two_passes_only_for_many_entries_over_many_scattered_keys() {
        let mut seed = 11;
        let scattered = random_keys(1 << 20, 1 << 19, &mut seed);
        assert!(pays(&scattered, 1 << 20));
        assert!(!pays(&scattered[..1000], 1 << 20), "too few entries");
        let in_cache: Vec<i32> = scattered.iter().map(|k| k % 2000).collect();
        assert!(!pays(&in_cache, 2000), "counters in cache");
        let following: Vec<i32> = (0..1 << 19).map(|e| e / 4 + e % 4).collect();
        assert!(!pays(&following, 1 << 20), "keys following each other");
        assert_eq!(shift_for(1 << 20), 13);
        assert_eq!(shift_for(100), 0);
    }
}
