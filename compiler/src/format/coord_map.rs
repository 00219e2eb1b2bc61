//! How a tensor's logical coordinates map to level coordinates. Most formats
//! store one dimension per level in some mode order; DIA, ELL, BCSR and CSB
//! store more levels than dimensions, and their extra levels carry hidden
//! index variables the user never writes.

use crate::coo::CooTensor;

/// Which coordinate a block level stores: `c / b` (outer) or `c % b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCoord {
    pub dim: usize,
    pub inner: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordMap {
    /// Level `k` stores dimension `order[k]`.
    Modes(Vec<usize>),
    /// DIA: (diagonal number, row, column); column = row + offset[diagonal].
    Diagonals,
    /// ELL: (slot, row, column); slot = rank of the entry within its row.
    Slots,
    /// BCSR / CSB: block and in-block coordinates with block size `b`.
    Blocked { b: usize, levels: Vec<BlockCoord> },
}

/// What index variable a level iterates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LevelVar {
    /// The logical dimension `d` (the user's index variable).
    Dim(usize),
    /// A hidden variable private to the access, e.g. DIA's diagonal.
    Hidden(String),
}

/// A logical dimension computed from two hidden level variables:
/// `dim = level[outer] * b + level[inner]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Derived {
    pub dim: usize,
    pub outer: usize,
    pub inner: usize,
    pub b: usize,
}

impl CoordMap {
    pub fn identity(order: usize) -> Self {
        CoordMap::Modes((0..order).collect())
    }

    /// Number of levels this map needs for a tensor of `order`.
    pub fn levels_for(&self, order: usize) -> usize {
        match self {
            CoordMap::Modes(_) => order,
            CoordMap::Diagonals | CoordMap::Slots => 3,
            CoordMap::Blocked { levels, .. } => levels.len(),
        }
    }

    /// The order this map is defined for, when it is fixed.
    pub fn fixed_order(&self) -> Option<usize> {
        match self {
            CoordMap::Modes(o) => Some(o.len()),
            _ => Some(2),
        }
    }

    pub fn level_var(&self, k: usize) -> LevelVar {
        match self {
            CoordMap::Modes(order) => LevelVar::Dim(order[k]),
            CoordMap::Diagonals => match k {
                0 => LevelVar::Hidden("diag".into()),
                k => LevelVar::Dim(k - 1),
            },
            CoordMap::Slots => match k {
                0 => LevelVar::Hidden("slot".into()),
                k => LevelVar::Dim(k - 1),
            },
            CoordMap::Blocked { levels, .. } => {
                let bc = levels[k];
                let axis = ["i", "j", "k", "l"].get(bc.dim).copied().unwrap_or("d");
                LevelVar::Hidden(format!("{axis}{}", if bc.inner { "in" } else { "blk" }))
            }
        }
    }

    /// The extent of level `k` when the map fixes it whatever the tensor's
    /// dimensions: a block's inner levels span the block size.
    pub fn fixed_extent(&self, k: usize) -> Option<usize> {
        match self {
            CoordMap::Blocked { b, levels } => levels.get(k).filter(|l| l.inner).map(|_| *b),
            _ => None,
        }
    }

    /// Dimensions computed from hidden level variables.
    pub fn derived(&self) -> Vec<Derived> {
        match self {
            CoordMap::Blocked { b, levels } => {
                let mut out = Vec::new();
                for d in 0..2 {
                    let outer = levels.iter().position(|l| l.dim == d && !l.inner);
                    let inner = levels.iter().position(|l| l.dim == d && l.inner);
                    if let (Some(outer), Some(inner)) = (outer, inner) {
                        out.push(Derived {
                            dim: d,
                            outer,
                            inner,
                            b: *b,
                        });
                    }
                }
                out
            }
            _ => Vec::new(),
        }
    }

    /// Level coordinates of every entry (flat, `levels` per entry) and the
    /// extent of each level. `t` must be canonical (sorted, no duplicates).
    pub fn to_levels(&self, t: &CooTensor) -> Result<(Vec<i64>, Vec<usize>), String> {
        let n = t.nnz();
        match self {
            CoordMap::Modes(order) => {
                let mut out = Vec::with_capacity(n * order.len());
                for e in 0..n {
                    let c = t.coord(e);
                    out.extend(order.iter().map(|&d| c[d] as i64));
                }
                Ok((out, order.iter().map(|&d| t.dims[d]).collect()))
            }
            CoordMap::Diagonals => {
                let mut offs: Vec<i64> = (0..n)
                    .map(|e| t.coord(e)[1] as i64 - t.coord(e)[0] as i64)
                    .collect();
                offs.sort_unstable();
                offs.dedup();
                let mut out = Vec::with_capacity(n * 3);
                for e in 0..n {
                    let c = t.coord(e);
                    let off = c[1] as i64 - c[0] as i64;
                    let k = offs.binary_search(&off).unwrap_or(0) as i64; // ok: off was inserted above
                    out.extend([k, c[0] as i64, c[1] as i64]);
                }
                Ok((out, vec![offs.len(), t.dims[0], t.dims[1]]))
            }
            CoordMap::Slots => {
                let mut out = Vec::with_capacity(n * 3);
                let (mut row, mut rank, mut width) = (u32::MAX, 0i64, 0i64);
                for e in 0..n {
                    let c = t.coord(e);
                    if c[0] != row {
                        row = c[0];
                        rank = 0;
                    }
                    out.extend([rank, c[0] as i64, c[1] as i64]);
                    rank += 1;
                    width = width.max(rank);
                }
                Ok((out, vec![width as usize, t.dims[0], t.dims[1]]))
            }
            CoordMap::Blocked { b, levels } => {
                let b = *b;
                let mut out = Vec::with_capacity(n * levels.len());
                for e in 0..n {
                    let c = t.coord(e);
                    for l in levels {
                        let v = c[l.dim] as usize;
                        out.push(if l.inner { v % b } else { v / b } as i64);
                    }
                }
                let extents = levels
                    .iter()
                    .map(|l| {
                        if l.inner {
                            b
                        } else {
                            t.dims[l.dim].div_ceil(b)
                        }
                    })
                    .collect();
                Ok((out, extents))
            }
        }
    }

    /// Logical coordinates of one entry from its level coordinates; `None`
    /// for padding outside the tensor (BCSR blocks past the edge).
    pub fn to_logical(&self, level: &[i64], dims: &[usize]) -> Option<Vec<u32>> {
        let out: Vec<i64> = match self {
            CoordMap::Modes(order) => {
                let mut c = vec![0i64; order.len()];
                for (k, &d) in order.iter().enumerate() {
                    c[d] = level[k];
                }
                c
            }
            CoordMap::Diagonals | CoordMap::Slots => vec![level[1], level[2]],
            CoordMap::Blocked { .. } => {
                let mut c = vec![0i64; 2];
                for d in self.derived() {
                    c[d.dim] = level[d.outer] * d.b as i64 + level[d.inner];
                }
                c
            }
        };
        let in_range = out
            .iter()
            .zip(dims)
            .all(|(&c, &n)| c >= 0 && (c as usize) < n);
        in_range.then(|| out.into_iter().map(|c| c as u32).collect())
    }

    /// Text for `-f NAME:FORMAT:ORDER` style printing (only mode orders).
    pub fn mode_order_text(&self) -> Option<String> {
        match self {
            CoordMap::Modes(o) if o.iter().enumerate().any(|(k, &d)| k != d) => Some(
                o.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            _ => None,
        }
    }
}
