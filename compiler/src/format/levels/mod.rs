//! The paper's six level formats, one file each, plus the coordinate layout
//! shared by the AoS variants of compressed and singleton.

pub mod compressed;
pub mod crd_layout;
pub mod dense;
pub mod hashed;
pub mod offset;
pub mod range;
pub mod singleton;

pub use compressed::Compressed;
pub use crd_layout::CrdLayout;
pub use dense::Dense;
pub use hashed::Hashed;
pub use offset::Offset;
pub use range::Range;
pub use singleton::Singleton;
