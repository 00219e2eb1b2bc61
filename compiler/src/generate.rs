//! Structured and random test matrices: the inputs of the paper's
//! evaluation when the real ones are not at hand (stencils, banded,
//! power-law graphs, FEM-like blocks, uniform random).

use crate::coo::{CooTensor, SplitMix};

/// The Laplacian-like stencil of a `grid`^d mesh: 5 points in 2-D, 7 in
/// 3-D (`points` picks which), values random in [-1, 1) with a heavier
/// diagonal.
pub fn stencil(points: usize, grid: usize, seed: u64) -> Result<CooTensor, String> {
    let dims = match points {
        5 => 2,
        7 => 3,
        _ => {
            return Err(format!(
                "stencil points must be 5 (2-D) or 7 (3-D), not {points}"
            ))
        }
    };
    let n = grid
        .checked_pow(dims as u32)
        .filter(|&n| n <= i32::MAX as usize)
        .ok_or("stencil grid too large")?;
    // Refused before allocating: a grid of 40,000 is 1.6G rows.
    crate::execute::check_generated("stencil", (n * points) as u128, 2)
        .map_err(|e| e.to_string())?;
    let mut rng = SplitMix(seed);
    let mut t = CooTensor::new(vec![n, n]);
    t.coords.reserve(2 * n * points);
    t.vals.reserve(n * points);
    let strides: Vec<usize> = (0..dims).map(|d| grid.pow(d as u32)).collect();
    for row in 0..n {
        let mut neighbours: Vec<usize> = Vec::with_capacity(points);
        for &s in strides.iter().rev() {
            if row / s % grid > 0 {
                neighbours.push(row - s);
            }
        }
        neighbours.push(row);
        for &s in &strides {
            if row / s % grid + 1 < grid {
                neighbours.push(row + s);
            }
        }
        neighbours.sort_unstable();
        for col in neighbours {
            let v = if col == row {
                points as f64
            } else {
                rng.unit() * 2.0 - 1.0
            };
            t.push(&[row as u32, col as u32], v);
        }
    }
    Ok(t)
}

/// An `n` x `n` matrix with `bands` diagonals centred on the main one.
pub fn banded(n: usize, bands: usize, seed: u64) -> CooTensor {
    let mut rng = SplitMix(seed);
    let mut t = CooTensor::new(vec![n, n]);
    let half = bands as i64 / 2;
    for i in 0..n as i64 {
        for off in -half..(bands as i64 - half) {
            let j = i + off;
            if j >= 0 && j < n as i64 {
                t.push(&[i as u32, j as u32], rng.unit() * 2.0 - 1.0);
            }
        }
    }
    t
}

/// A web-like graph: out-degrees follow a power law (Zipf-ish), targets
/// biased towards low-numbered "popular" vertices.
pub fn power_law(n: usize, avg_degree: usize, seed: u64) -> CooTensor {
    let mut rng = SplitMix(seed);
    let mut t = CooTensor::new(vec![n, n]);
    for i in 0..n {
        let u = rng.unit().max(1e-9);
        let deg = ((avg_degree as f64 * 0.5) / u.sqrt()).min(n as f64 / 4.0) as usize;
        for _ in 0..deg.max(1) {
            let r = rng.unit();
            let j = ((n as f64) * r * r * r) as usize % n.max(1);
            t.push(&[i as u32, j as u32], rng.unit() * 2.0 - 1.0);
        }
    }
    t.canonicalize();
    t
}

/// A uniform random `n` x `n` matrix with about `per_row` entries a row
/// (`per_row * n` coordinates drawn uniformly, duplicates summed): the
/// issue's "uniform 100K, 2M nnz" is `uniform(100_000, 20, 1)`.
pub fn uniform(n: usize, per_row: usize, seed: u64) -> CooTensor {
    let density = if n == 0 {
        0.0
    } else {
        (per_row as f64 / n as f64).min(1.0)
    };
    CooTensor::random(&[n, n], density, &mut SplitMix(seed))
}

/// FEM-like: dense `b` x `b` blocks on a 2-D 5-point block pattern.
pub fn blocks(grid: usize, b: usize, seed: u64) -> Result<CooTensor, String> {
    let pattern = stencil(5, grid, seed)?;
    let n = pattern.dims[0] * b;
    let mut rng = SplitMix(seed ^ 0x5eed);
    let mut t = CooTensor::new(vec![n, n]);
    for e in 0..pattern.nnz() {
        let c = pattern.coord(e);
        for bi in 0..b {
            for bj in 0..b {
                let (i, j) = (c[0] as usize * b + bi, c[1] as usize * b + bj);
                t.push(&[i as u32, j as u32], rng.unit() * 2.0 - 1.0);
            }
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stencil_shapes() {
        let t = stencil(7, 3, 1).unwrap(); // ok: test code, a panic is a failed test
        assert_eq!(t.dims, vec![27, 27]);
        // Interior point has 7 entries, corners 4: 27*7 - 6*9 = 135.
        assert_eq!(t.nnz(), 135);
        assert_eq!(stencil(5, 4, 1).unwrap().nnz(), 16 * 5 - 4 * 4); // ok: test code, a panic is a failed test
        assert!(stencil(9, 3, 1).is_err());
        // 1.6G rows: refused before allocating, not an abort.
        assert!(stencil(5, 40_000, 1).is_err());
    }

    #[test]
    fn uniform_rows_hold_about_per_row_entries_anywhere() {
        let t = uniform(2000, 20, 1);
        assert_eq!(t.dims, vec![2000, 2000]);
        // 40,000 draws over 4M cells: about 200 land twice (40,000^2 / 8M).
        assert!((39_600..=40_000).contains(&t.nnz()), "{}", t.nnz());
        let rows_used = (0..t.nnz())
            .map(|e| t.coord(e)[0])
            .collect::<std::collections::BTreeSet<_>>();
        let high_cols = (0..t.nnz()).filter(|&e| t.coord(e)[1] >= 1000).count();
        assert!(rows_used.len() > 1990, "{}", rows_used.len());
        assert!((19_000..=21_000).contains(&high_cols), "{high_cols}");
        assert_eq!(
            uniform(2000, 20, 1).vals,
            t.vals,
            "the same seed, the same matrix"
        );
    }

    #[test]
    fn banded_counts() {
        assert_eq!(banded(10, 3, 1).nnz(), 28);
    }
}
