//! Errors in format descriptions: typed, with messages that name the level or
//! preset at fault.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum FormatError {
    #[error("unknown level format `{name}` (known: {known})")]
    UnknownLevel { name: String, known: String },
    #[error("unknown format `{name}` (presets: dense, sparse, hash, COO, COO-AoS, CSR, CSC, DCSR, ELL, DIA, BCSR(b), CSB(b), CSF, mode-generic; or a level list such as `dense,compressed`)")]
    UnknownPreset { name: String },
    #[error("level `{level}`: {reason}")]
    BadProperty { level: String, reason: String },
    #[error("format `{format}` has {levels} levels but the tensor has order {order}{hint}")]
    LevelCount {
        format: String,
        levels: usize,
        order: usize,
        hint: String,
    },
    #[error("format `{format}`: block size must be at least 1")]
    ZeroBlock { format: String },
    #[error("mode order `{order}` is not a permutation of 0..{n}")]
    BadModeOrder { order: String, n: usize },
    #[error("format `{format}` does not take a mode order")]
    NoModeOrder { format: String },
    #[error("cannot parse format `{text}` at column {col}: {reason}")]
    Syntax {
        text: String,
        col: usize,
        reason: String,
    },
}
