//! Coordinate lists: the exchange form between file readers, packers,
//! unpackers and the dense reference evaluator.
//!
//! Coordinates are stored flat (`order` values per entry) to keep a
//! 10-million-entry tensor in two allocations.

/// A tensor as a list of (coordinate, value) entries, possibly unsorted and
/// with duplicates until [`CooTensor::canonicalize`] is called.
#[derive(Debug, Clone, PartialEq)]
pub struct CooTensor {
    /// Extent of each dimension.
    pub dims: Vec<usize>,
    /// `nnz * order` coordinates, entry-major.
    pub coords: Vec<u32>,
    /// One value per entry.
    pub vals: Vec<f64>,
}

impl CooTensor {
    pub fn new(dims: Vec<usize>) -> Self {
        CooTensor {
            dims,
            coords: Vec::new(),
            vals: Vec::new(),
        }
    }

    pub fn order(&self) -> usize {
        self.dims.len()
    }

    pub fn nnz(&self) -> usize {
        self.vals.len()
    }

    /// Coordinates of entry `e`.
    pub fn coord(&self, e: usize) -> &[u32] {
        let n = self.order();
        &self.coords[e * n..(e + 1) * n]
    }

    pub fn push(&mut self, coord: &[u32], val: f64) {
        debug_assert_eq!(coord.len(), self.order());
        self.coords.extend_from_slice(coord);
        self.vals.push(val);
    }

    /// Sort entries lexicographically and sum duplicates. Explicit zeros are
    /// kept (use [`CooTensor::drop_zeros`] to remove them).
    pub fn canonicalize(&mut self) {
        let n = self.order();
        let nnz = self.nnz();
        if n == 0 {
            let total: f64 = self.vals.iter().sum();
            self.vals = if nnz == 0 { Vec::new() } else { vec![total] };
            return;
        }
        let mut perm: Vec<u32> = (0..nnz as u32).collect();
        let coords = &self.coords;
        let already_sorted =
            (1..nnz).all(|e| lex_le(&coords[(e - 1) * n..e * n], &coords[e * n..(e + 1) * n]));
        if !already_sorted {
            let extents: Vec<u64> = self.dims.iter().map(|&d| d as u64).collect();
            perm =
                sorted_order(nnz, &extents, |e, d| coords[e * n + d] as u64).unwrap_or_else(|| {
                    perm.sort_by(|&a, &b| {
                        let (a, b) = (a as usize, b as usize);
                        coords[a * n..(a + 1) * n].cmp(&coords[b * n..(b + 1) * n])
                    });
                    perm
                });
        }
        let mut out_coords = Vec::with_capacity(self.coords.len());
        let mut out_vals: Vec<f64> = Vec::with_capacity(nnz);
        for &e in &perm {
            let e = e as usize;
            let c = &self.coords[e * n..(e + 1) * n];
            let len = out_vals.len();
            if len > 0 && same(&out_coords[(len - 1) * n..len * n], c) {
                out_vals[len - 1] += self.vals[e];
            } else {
                out_coords.extend_from_slice(c);
                out_vals.push(self.vals[e]);
            }
        }
        self.coords = out_coords;
        self.vals = out_vals;
    }

    /// Remove entries whose value is exactly zero.
    pub fn drop_zeros(&mut self) {
        let n = self.order();
        let mut w = 0;
        for e in 0..self.nnz() {
            if self.vals[e] != 0.0 {
                self.vals[w] = self.vals[e];
                self.coords.copy_within(e * n..(e + 1) * n, w * n);
                w += 1;
            }
        }
        self.vals.truncate(w);
        self.coords.truncate(w * n);
    }

    /// Canonical form used to compare tensors: sorted, duplicates summed,
    /// zeros removed.
    pub fn canonical(&self) -> CooTensor {
        let mut t = self.clone();
        t.canonicalize();
        t.drop_zeros();
        t
    }

    /// Row-major dense copy (for small tensors and the reference evaluator).
    pub fn to_dense(&self) -> Vec<f64> {
        let size: usize = self.dims.iter().product();
        let mut out = vec![0.0; size];
        for e in 0..self.nnz() {
            out[self.linear_index(self.coord(e))] += self.vals[e];
        }
        out
    }

    pub fn linear_index(&self, coord: &[u32]) -> usize {
        let mut idx = 0usize;
        for (d, &c) in coord.iter().enumerate() {
            idx = idx * self.dims[d] + c as usize;
        }
        idx
    }

    /// Build from a row-major dense array, keeping nonzeros only.
    pub fn from_dense(dims: Vec<usize>, data: &[f64]) -> CooTensor {
        let mut t = CooTensor::new(dims.clone());
        let mut coord = vec![0u32; dims.len()];
        for (lin, &v) in data.iter().enumerate() {
            if v != 0.0 {
                let mut rest = lin;
                for d in (0..dims.len()).rev() {
                    coord[d] = (rest % dims[d]) as u32;
                    rest /= dims[d];
                }
                t.push(&coord, v);
            }
        }
        t
    }
}

/// A small seeded generator (SplitMix64) for reproducible random operands.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

impl CooTensor {
    /// A random tensor with values in [-1, 1): every entry when `density`
    /// is 1, else about `density * size` entries at random coordinates.
    pub fn random(dims: &[usize], density: f64, rng: &mut SplitMix) -> CooTensor {
        let mut t = CooTensor::new(dims.to_vec());
        let total: u128 = dims.iter().map(|&d| d as u128).product();
        if total == 0 {
            return t;
        }
        let mut coord = vec![0u32; dims.len()];
        if density >= 1.0 {
            // Every coordinate in row-major order, counted like an odometer
            // (a division per dimension and entry was a tenth of a
            // 42M-entry operand's set-up). Callers check that the entries
            // fit (`random_operand`).
            let n = usize::try_from(total).unwrap_or(0);
            t.coords.reserve(n.saturating_mul(dims.len()));
            t.vals.reserve(n);
            for _ in 0..total {
                t.push(&coord, rng.unit() * 2.0 - 1.0);
                for d in (0..dims.len()).rev() {
                    coord[d] += 1;
                    if coord[d] < dims[d] as u32 {
                        break;
                    }
                    coord[d] = 0;
                }
            }
            return t;
        }
        let n = ((total as f64) * density.max(0.0)).round() as u64;
        for _ in 0..n {
            for (d, &m) in dims.iter().enumerate() {
                coord[d] = rng.below(m as u64) as u32;
            }
            t.push(&coord, rng.unit() * 2.0 - 1.0);
        }
        t.canonicalize();
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalize_sorts_and_sums_duplicates() {
        let mut t = CooTensor::new(vec![3, 3]);
        t.push(&[2, 1], 1.0);
        t.push(&[0, 2], 2.0);
        t.push(&[2, 1], 3.0);
        t.canonicalize();
        assert_eq!(t.coords, vec![0, 2, 2, 1]);
        assert_eq!(t.vals, vec![2.0, 4.0]);
    }

    #[test]
    fn a_dense_random_operand_holds_every_coordinate_once_in_order() {
        let t = CooTensor::random(&[3, 4, 2], 1.0, &mut SplitMix(7));
        let coords: Vec<Vec<u32>> = t.coords.chunks(3).map(|c| c.to_vec()).collect();
        let mut expected = Vec::new();
        for i in 0..3 {
            for j in 0..4 {
                for k in 0..2 {
                    expected.push(vec![i, j, k]);
                }
            }
        }
        assert_eq!(coords, expected);
        assert_eq!(t.vals.len(), 24);
        assert!(t.vals.iter().all(|v| (-1.0..1.0).contains(v)));
        assert_eq!(CooTensor::random(&[3, 0], 1.0, &mut SplitMix(7)).nnz(), 0);
    }

    #[test]
    fn dense_round_trip() {
        let mut t = CooTensor::new(vec![2, 3]);
        t.push(&[1, 2], 5.0);
        t.push(&[0, 0], -1.0);
        let back = CooTensor::from_dense(vec![2, 3], &t.to_dense());
        assert_eq!(back, t.canonical());
    }
}

/// The order that sorts `n` entries lexicographically by their keys
/// (`key(e, d)` for dimension `d`, below `extents[d]`), as a stable
/// least-significant-dimension-first counting sort: linear in the entries
/// and the extents. `None` when an extent dwarfs the entries (a comparison
/// sort is cheaper then) or a key falls outside its extent.
pub fn sorted_order(
    n: usize,
    extents: &[u64],
    key: impl Fn(usize, usize) -> u64,
) -> Option<Vec<u32>> {
    if n > u32::MAX as usize || extents.iter().any(|&x| x > 4 * n as u64 + 4096) {
        return None;
    }
    let mut perm: Vec<u32> = (0..n as u32).collect();
    let mut next = vec![0u32; n];
    for d in (0..extents.len()).rev() {
        // Entries already in order by this key (a buffer filled row by row
        // of a transposed operand) need no pass: the sort is stable.
        if perm
            .windows(2)
            .all(|w| key(w[0] as usize, d) <= key(w[1] as usize, d))
        {
            if perm.iter().any(|&e| key(e as usize, d) >= extents[d]) {
                return None;
            }
            continue;
        }
        let mut start = vec![0usize; extents[d] as usize + 1];
        for &e in &perm {
            let k = key(e as usize, d);
            if k >= extents[d] {
                return None;
            }
            start[k as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        for &e in &perm {
            let k = key(e as usize, d) as usize;
            next[start[k]] = e;
            start[k] += 1;
        }
        std::mem::swap(&mut perm, &mut next);
    }
    Some(perm)
}

/// `a <= b` lexicographically, element by element (a call to `memcmp` per
/// entry costs more than comparing two or three coordinates).
#[inline]
fn lex_le(a: &[u32], b: &[u32]) -> bool {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x < y;
        }
    }
    true
}

#[inline]
fn same(a: &[u32], b: &[u32]) -> bool {
    a.iter().zip(b).all(|(x, y)| x == y)
}
