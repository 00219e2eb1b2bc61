//! The runtime tensor and its errors.

use crate::format::level::LevelStorage;
use crate::format::{LevelVar, TensorFormat};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum StorageError {
    #[error("tensor {tensor}: {reason}")]
    Pack { tensor: String, reason: String },
    #[error("tensor {tensor}, level {level} ({spec}): {reason}")]
    Invalid {
        tensor: String,
        level: usize,
        spec: String,
        reason: String,
    },
    #[error("tensor {tensor}: {what} needs {bytes} bytes, more than the {limit} bytes of memory available")]
    TooLarge {
        tensor: String,
        what: String,
        bytes: u128,
        limit: u128,
    },
}

/// A tensor in some format: per-level storage plus values.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub name: String,
    pub format: TensorFormat,
    /// Logical dimensions.
    pub dims: Vec<usize>,
    /// Extent of each level's coordinates (dimensions, or the number of
    /// diagonals, slots or blocks for levels with hidden coordinates).
    pub extents: Vec<usize>,
    pub levels: Vec<LevelStorage>,
    pub vals: Vec<f64>,
}

impl Tensor {
    pub fn order(&self) -> usize {
        self.dims.len()
    }

    /// Number of value slots in use (the size of the last level).
    pub fn size(&self) -> usize {
        self.vals.len()
    }

    /// Extents each level must have given the logical dims, where the map
    /// determines them (hidden levels with data-dependent extents: None).
    pub fn expected_extents(format: &TensorFormat, dims: &[usize]) -> Vec<Option<usize>> {
        let derived = format.map.derived();
        (0..format.levels.len())
            .map(|k| match format.map.level_var(k) {
                LevelVar::Dim(d) => dims.get(d).copied(),
                LevelVar::Hidden(_) => {
                    for dv in &derived {
                        if dv.inner == k {
                            return Some(dv.b);
                        }
                        if dv.outer == k {
                            return dims.get(dv.dim).map(|n| n.div_ceil(dv.b));
                        }
                    }
                    None
                }
            })
            .collect()
    }
}
