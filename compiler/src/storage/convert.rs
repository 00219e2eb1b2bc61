//! Converting a packed tensor into another format at run time: the step
//! the compiler inserts before a kernel whose operand must be visited in an
//! order or with a capability its own format lacks (a sorted copy of an
//! unordered level, another mode order), and after a kernel that writes a
//! coordinate buffer.

use super::{pack, unpack, StorageError, Tensor};
use crate::format::TensorFormat;

/// `t`'s entries stored as `format` under the name `name`.
pub fn convert(t: &Tensor, name: &str, format: &TensorFormat) -> Result<Tensor, StorageError> {
    let coo = unpack(t)?;
    pack(name, &coo, format)
}
