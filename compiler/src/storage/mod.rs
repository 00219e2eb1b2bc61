//! Runtime tensors: the arrays each level owns plus the values, packed from
//! coordinates, unpacked back, and validated before any kernel reads them.

mod alloc;
mod convert;
mod pack;
mod tensor;
mod unpack;
mod validate;

pub use alloc::{check_allocation, MemoryLimit};
pub use convert::convert;
pub use pack::pack;
pub use tensor::{StorageError, Tensor};
pub use unpack::{unpack, unpack_buffer, TensorMemory as TensorMemoryView};
pub use validate::{validate, Validated};
