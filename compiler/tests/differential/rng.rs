//! The seeded random source of the generator: every case is a function of
//! its seed, so a seed printed in a report regenerates the same case.

use tensor_compiler::coo::SplitMix;

pub struct Rng(SplitMix);

impl Rng {
    /// The generator for case `seed` (scrambled so neighbouring seeds differ
    /// in every draw).
    pub fn for_case(seed: u64) -> Self {
        let mut s = SplitMix(seed ^ 0x5DEE_CE66_D1CE_F00D);
        s.next_u64();
        Rng(s)
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }

    /// Inclusive range.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.0.unit() < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// An item chosen with the given weights.
    pub fn weighted<'a, T>(&mut self, items: &'a [(u32, T)]) -> &'a T {
        let total: u32 = items.iter().map(|(w, _)| w).sum();
        let mut r = self.below(total as usize) as u32;
        for (w, t) in items {
            if r < *w {
                return t;
            }
            r -= w;
        }
        &items[items.len() - 1].1
    }

    /// A small value that prints exactly (a multiple of 1/4 in [-2, 2]),
    /// never zero.
    pub fn value(&mut self) -> f64 {
        let v = (self.below(17) as f64 - 8.0) / 4.0;
        if v == 0.0 {
            1.0
        } else {
            v
        }
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}
