//! Converting a packed tensor into another format at run time: the step
//! the compiler inserts before a kernel whose operand must be visited in an
//! order or with a capability its own format lacks (a sorted copy of an
//! unordered level, another mode order), and after a kernel that writes a
//! coordinate buffer.

use super::{pack_entries, Entries, StorageError, Tensor};
use crate::format::TensorFormat;

/// `t`'s entries stored as `format` under the name `name`: read as columns
/// (borrowed where `t`'s levels already hold them) and packed directly, so
/// CSR to CSC is one counting sort and no intermediate coordinate list.
/// Where `t`'s values hold fill, its zeros are left out (`without_zeros`).
pub fn convert(t: &Tensor, name: &str, format: &TensorFormat) -> Result<Tensor, StorageError> {
    let entries = Entries::of(t)?;
    let entries = match t.format.values_may_hold_fill() {
        true => entries.without_zeros(),
        false => entries,
    };
    pack_entries(name, entries, format)
}
