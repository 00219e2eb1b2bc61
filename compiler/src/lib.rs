//! tensor-compiler: a sparse tensor algebra compiler after "Format
//! Abstraction for Sparse Tensor Algebra Compilers" (Chou, Kjolstad,
//! Amarasinghe, OOPSLA 2018). See ARCHITECTURE.md at the repository root.

pub mod backend;
pub mod cli;
pub mod coo;
pub mod execute;
pub mod format;
pub mod generate;
pub mod heap_policy;
pub mod ide;
pub mod io;
pub mod ir;
pub mod jit;
pub mod language;
pub mod line_aligned;
pub mod lower;
pub mod notation;
pub mod oracle;
pub mod retained;
pub mod selfcheck;
pub mod storage;
pub mod threads;
