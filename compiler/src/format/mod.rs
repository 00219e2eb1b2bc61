//! Formats: level formats (the paper's section 3 abstraction) and the tensor
//! formats composed from them.

pub mod alternatives;
pub mod columns;
pub mod coord_map;
pub mod error;
pub mod level;
pub mod levels;
pub mod registry;
pub mod tensor_format;

pub use coord_map::{CoordMap, LevelVar};
pub use error::FormatError;
pub use level::{LevelFormat, Properties};
pub use registry::Registry;
pub use tensor_format::{coordinate_buffer, parse_format, TensorFormat};
