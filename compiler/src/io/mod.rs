//! Reading and writing tensors: Matrix Market (`.mtx`, and taco's `.ttx`
//! for tensors of any order) and FROSTT (`.tns`).
//!
//! The readers stream through a `BufRead` and never panic: every malformed
//! input becomes an [`IoError`] whose `Display` is one line,
//! `FILE:LINE: what is wrong` (or `FILE: what is wrong` when no single line
//! is at fault).
//!
//! Duplicate entries are kept as they appear in the file (so `nnz()` counts
//! stored entries after symmetric expansion); [`CooTensor::canonicalize`]
//! and the compiled kernels sum them, like scipy and taco do.

mod lines;
pub use lines::MAX_LINE;
pub mod mtx;
mod mtx_header;
pub mod tns;

use crate::coo::CooTensor;
use std::path::Path;
use thiserror::Error;

/// A file that could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IoError {
    /// Something wrong on one line (1-based).
    #[error("{file}:{line}: {message}")]
    At {
        file: String,
        line: usize,
        message: String,
    },
    /// Something wrong with the file as a whole (cannot open, empty, ...).
    #[error("{file}: {message}")]
    File { file: String, message: String },
}

impl IoError {
    pub fn at(file: &str, line: usize, message: impl Into<String>) -> Self {
        IoError::At {
            file: one_line(file),
            line,
            message: one_line(&message.into()),
        }
    }

    pub fn file(file: &str, message: impl Into<String>) -> Self {
        IoError::File {
            file: one_line(file),
            message: one_line(&message.into()),
        }
    }

    /// The 1-based line at fault, if any.
    pub fn line(&self) -> Option<usize> {
        match self {
            IoError::At { line, .. } => Some(*line),
            IoError::File { .. } => None,
        }
    }

    /// What is wrong, without the file and line.
    pub fn message(&self) -> &str {
        match self {
            IoError::At { message, .. } | IoError::File { message, .. } => message,
        }
    }
}

/// Keep `Display` on one line whatever a path or OS message contains.
fn one_line(s: &str) -> String {
    if s.chars().any(char::is_control) {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    } else {
        s.to_string()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// `.mtx` and taco's `.ttx`.
    MatrixMarket,
    /// `.tns`.
    Frostt,
}

fn kind(path: &Path) -> Result<Kind, IoError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("mtx") | Some("ttx") => Ok(Kind::MatrixMarket),
        Some("tns") => Ok(Kind::Frostt),
        _ => Err(IoError::file(
            &name(path),
            "unknown file type: expected a .mtx, .ttx or .tns extension",
        )),
    }
}

fn name(path: &Path) -> String {
    path.display().to_string()
}

fn open(path: &Path) -> Result<std::io::BufReader<std::fs::File>, IoError> {
    let f = open_regular(path).map_err(|message| IoError::file(&name(path), message))?;
    Ok(std::io::BufReader::with_capacity(1 << 20, f))
}

/// Open a file for reading only if it is a regular file (after following
/// symlinks): a FIFO would block forever, a device such as /dev/zero never
/// ends, a directory is no data. Opened without blocking, then checked on
/// the open handle, so nothing can be swapped in between.
pub fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let f = options
        .open(path)
        .map_err(|e| format!("cannot open: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("cannot open: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".to_string());
    }
    Ok(f)
}

/// Read a tensor, choosing the format by extension: `.mtx`/`.ttx` (Matrix
/// Market) or `.tns` (FROSTT, dimensions taken from the largest coordinate
/// of each mode).
pub fn read_tensor(path: &Path) -> Result<CooTensor, IoError> {
    read_tns_with_dims(path, None)
}

/// Read a tensor whose dimensions may be given by the caller.
///
/// A `.tns` file carries no dimensions: `dims` are used when given (a
/// coordinate beyond them is an error), else each mode's largest
/// coordinate; an empty `.tns` needs `dims`. A Matrix Market file states
/// its dimensions, which must then equal `dims`.
pub fn read_tns_with_dims(path: &Path, dims: Option<&[usize]>) -> Result<CooTensor, IoError> {
    let file = name(path);
    match kind(path)? {
        Kind::MatrixMarket => {
            let t = mtx::read_mtx(open(path)?, &file)?;
            match dims {
                Some(d) if d != t.dims.as_slice() => Err(IoError::file(
                    &file,
                    format!(
                        "the file's dimensions {} differ from the given {}",
                        show_dims(&t.dims),
                        show_dims(d)
                    ),
                )),
                _ => Ok(t),
            }
        }
        Kind::Frostt => tns::read_tns(open(path)?, &file, dims),
    }
}

/// Write a tensor, choosing the format by extension: Matrix Market
/// coordinate real general for `.mtx`/`.ttx` (the `tensor` object of taco
/// when the order is not 2), FROSTT for `.tns`.
pub fn write_tensor(path: &Path, t: &CooTensor) -> Result<(), IoError> {
    let file = name(path);
    let kind = kind(path)?;
    if t.coords.len() != t.nnz() * t.order() {
        return Err(IoError::file(
            &file,
            "inconsistent tensor: coordinate count does not match the entries",
        ));
    }
    let f = std::fs::File::create(path)
        .map_err(|e| IoError::file(&file, format!("cannot create: {e}")))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let written = match kind {
        Kind::MatrixMarket => mtx::write_mtx(&mut w, t),
        Kind::Frostt => tns::write_tns(&mut w, t),
    };
    written
        .and_then(|()| std::io::Write::flush(&mut w))
        .map_err(|e| IoError::file(&file, format!("cannot write: {e}")))
}

fn show_dims(d: &[usize]) -> String {
    let parts: Vec<String> = d.iter().map(usize::to_string).collect();
    if parts.is_empty() {
        "(scalar)".to_string()
    } else {
        parts.join("x")
    }
}
