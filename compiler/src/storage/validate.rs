//! Validation before every kernel call: each level checks the invariants its
//! properties and capabilities promise (linear time), so generated code can
//! index arrays without bounds checks.

use super::{StorageError, Tensor};
use crate::format::level::ValidateInput;

pub fn validate(t: &Tensor) -> Result<(), StorageError> {
    let nlevels = t.format.levels.len();
    let invalid = |level: usize, reason: String| StorageError::Invalid {
        tensor: t.name.clone(),
        level,
        spec: t.format.levels.get(level).map_or("values".into(), |l| l.spec()),
        reason,
    };
    if t.levels.len() != nlevels || t.extents.len() != nlevels {
        return Err(StorageError::Pack { tensor: t.name.clone(), reason: format!("storage has {} levels, format has {nlevels}", t.levels.len()) });
    }
    if t.dims.len() != t.format.order() {
        return Err(StorageError::Pack { tensor: t.name.clone(), reason: format!("{} dimensions for an order-{} format", t.dims.len(), t.format.order()) });
    }
    for (k, expected) in Tensor::expected_extents(&t.format, &t.dims).into_iter().enumerate() {
        if let Some(n) = expected {
            if t.extents[k] != n {
                return Err(invalid(k, format!("extent {} does not match the tensor's dimensions (expected {n})", t.extents[k])));
            }
        }
        if t.extents[k] > i32::MAX as usize {
            return Err(invalid(k, format!("extent {} does not fit 32-bit coordinates", t.extents[k])));
        }
    }
    let mut parent_size = 1usize;
    for (k, level) in t.format.levels.iter().enumerate() {
        let input = ValidateInput { level: k, storage: &t.levels, extents: &t.extents, parent_size };
        parent_size = level.validate(&input).map_err(|r| invalid(k, r))?;
    }
    if t.vals.len() < parent_size {
        return Err(invalid(nlevels.saturating_sub(1), format!("{} values for {parent_size} positions", t.vals.len())));
    }
    Ok(())
}
