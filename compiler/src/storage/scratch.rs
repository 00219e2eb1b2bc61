//! Vectors handed from one packing to the next. A kernel that packs its
//! coordinate buffer on every run rebuilds a result of the same shape each
//! time: reusing the old result's arrays as the new one's scratch and
//! storage touches memory that is already mapped, where fresh allocations
//! of a few MB fault in every page again (about 4 us a page on this kind of
//! machine: 6 ms for a 700K-entry transpose).

use super::Tensor;

/// A pool of index and value vectors (empty when packing from scratch).
#[derive(Debug, Default)]
pub struct Scratch {
    ints: Vec<Vec<i32>>,
    floats: Vec<Vec<f64>>,
}

impl Scratch {
    /// The arrays and values of `t`, a result about to be rebuilt: `t` is
    /// left with empty arrays.
    pub fn reclaim(t: &mut Tensor) -> Scratch {
        let mut s = Scratch::default();
        for level in &mut t.levels {
            for a in level.arrays.values_mut() {
                s.give_ints(std::mem::take(a));
            }
        }
        s.floats.push(std::mem::take(&mut t.vals));
        s
    }

    pub fn give_ints(&mut self, v: Vec<i32>) {
        if v.capacity() > 0 {
            self.ints.push(v);
        }
    }

    /// `len` zeros, in the smallest pooled vector that holds them (a fresh
    /// one when none does), for an array the caller writes whole: a large
    /// one asks for huge pages (`line_aligned::advise_huge_pages`). The
    /// sorted columns become the packed tensor's arrays (CSR's `crd`);
    /// on 4 KiB pages CSR SpMV on the fem_blocks matrix of `bench/run.py`
    /// ran 2.7-3.0 ms against SciPy's 2.2, whose arrays NumPy advises.
    pub fn ints(&mut self, len: usize) -> Vec<i32> {
        let mut v = match take_fitting(&mut self.ints, len) {
            Some(mut v) => {
                v.resize(len, 0);
                v
            }
            // Zeroed by the allocator, page by page as it is touched.
            None => vec![0; len],
        };
        crate::line_aligned::advise_huge_pages(&mut v);
        v
    }

    /// An empty vector with room for `len` items.
    pub fn empty_ints(&mut self, len: usize) -> Vec<i32> {
        take_fitting(&mut self.ints, len).unwrap_or_else(|| Vec::with_capacity(len))
    }

    /// `len` zeros, pooled when a vector fits, of which the caller writes
    /// `written`: huge pages when that is most of them
    /// (`line_aligned::advise_huge_pages_if_mostly_written`).
    pub fn floats(&mut self, len: usize, written: usize) -> Vec<f64> {
        let mut v = match take_fitting(&mut self.floats, len) {
            Some(mut v) => {
                v.resize(len, 0.0);
                v
            }
            None => vec![0.0; len],
        };
        crate::line_aligned::advise_huge_pages_if_mostly_written(&mut v, written);
        v
    }
}

/// The pooled vector of least capacity holding `len` items, cleared.
fn take_fitting<T>(pool: &mut Vec<Vec<T>>, len: usize) -> Option<Vec<T>> {
    let (i, _) = pool
        .iter()
        .enumerate()
        .filter(|(_, v)| v.capacity() >= len)
        .min_by_key(|(_, v)| v.capacity())?;
    let mut v = pool.swap_remove(i);
    v.clear();
    Some(v)
}
