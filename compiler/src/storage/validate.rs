//! Validation before every kernel call: each level checks the invariants its
//! properties and capabilities promise (linear time), so generated code can
//! index arrays without bounds checks.

use super::{StorageError, Tensor};
use crate::format::level::ValidateInput;

/// A tensor that `validate` accepted: the only way to make one, and the only
/// kind of input `jit::run_kernel` takes, so no kernel reads storage nobody
/// checked. It borrows the tensor, so the tensor cannot change meanwhile.
#[derive(Clone, Copy, Debug)]
pub struct Validated<'a>(&'a Tensor);

impl<'a> Validated<'a> {
    /// A tensor this crate's packer just built (`pack_entries`,
    /// `convert`): valid by construction, so not checked again on every
    /// run (the storage tests check that packed tensors validate).
    pub fn packed(t: &'a Tensor) -> Validated<'a> {
        Validated(t)
    }
    pub fn tensor(&self) -> &'a Tensor {
        self.0
    }
}

impl std::ops::Deref for Validated<'_> {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        self.0
    }
}

pub fn validate(t: &Tensor) -> Result<Validated<'_>, StorageError> {
    let nlevels = t.format.levels.len();
    let invalid = |level: usize, reason: String| StorageError::Invalid {
        tensor: t.name.clone(),
        level,
        spec: t
            .format
            .levels
            .get(level)
            .map_or("values".into(), |l| l.spec()),
        reason,
    };
    if t.levels.len() != nlevels || t.extents.len() != nlevels {
        return Err(StorageError::Pack {
            tensor: t.name.clone(),
            reason: format!(
                "storage has {} levels, format has {nlevels}",
                t.levels.len()
            ),
        });
    }
    if t.dims.len() != t.format.order() {
        return Err(StorageError::Pack {
            tensor: t.name.clone(),
            reason: format!(
                "{} dimensions for an order-{} format",
                t.dims.len(),
                t.format.order()
            ),
        });
    }
    for (k, expected) in Tensor::expected_extents(&t.format, &t.dims)
        .into_iter()
        .enumerate()
    {
        if let Some(n) = expected {
            if t.extents[k] != n {
                return Err(invalid(
                    k,
                    format!(
                        "extent {} does not match the tensor's dimensions (expected {n})",
                        t.extents[k]
                    ),
                ));
            }
        }
        if t.extents[k] > i32::MAX as usize {
            return Err(invalid(
                k,
                format!("extent {} does not fit 32-bit coordinates", t.extents[k]),
            ));
        }
    }
    let mut parent_size = 1usize;
    for (k, level) in t.format.levels.iter().enumerate() {
        let input = ValidateInput {
            level: k,
            storage: &t.levels,
            extents: &t.extents,
            parent_size,
        };
        parent_size = level.validate(&input).map_err(|r| invalid(k, r))?;
    }
    if t.vals.len() < parent_size {
        return Err(invalid(
            nlevels.saturating_sub(1),
            format!("{} values for {parent_size} positions", t.vals.len()),
        ));
    }
    Ok(Validated(t))
}
