//! Runtime tensors: the arrays each level owns plus the values, packed from
//! coordinates, unpacked back, and validated before any kernel reads them.

mod alloc;
mod assemble;
mod buckets;
mod convert;
mod entries;
mod pack;
mod scatter;
mod scratch;
mod sort;
mod tensor;
mod unpack;
mod validate;

pub use alloc::{check_allocation, MemoryLimit};
pub use assemble::{pack_entries, pack_entries_reusing};
pub use convert::convert;
pub use entries::Entries;
pub use pack::{pack, pack_generic};
pub use scratch::Scratch;
pub use tensor::{StorageError, Tensor};
pub use unpack::{unpack, TensorMemory as TensorMemoryView};
pub use validate::{validate, Validated};
