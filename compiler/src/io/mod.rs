//! Reading and writing tensors: Matrix Market (`.mtx`, and taco's `.ttx`
//! tensors) and FROSTT (`.tns`). Streaming readers that never panic: every
//! malformed file is an `IoError` naming the file and line.

mod lines;
pub mod mtx;
pub mod tns;

use crate::coo::CooTensor;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum IoError {
    #[error("{file}:{line}: {message}")]
    At { file: String, line: usize, message: String },
    #[error("{file}: {message}")]
    File { file: String, message: String },
}

impl IoError {
    pub fn at(file: &str, line: usize, message: impl Into<String>) -> Self {
        IoError::At { file: file.to_string(), line, message: message.into() }
    }
    pub fn file(file: &str, message: impl Into<String>) -> Self {
        IoError::File { file: file.to_string(), message: message.into() }
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

fn open(path: &Path) -> Result<std::io::BufReader<std::fs::File>, IoError> {
    let f = std::fs::File::open(path).map_err(|e| IoError::file(&display(path), format!("cannot open: {e}")))?;
    Ok(std::io::BufReader::with_capacity(1 << 20, f))
}

enum Kind {
    MatrixMarket,
    Frostt,
}

fn kind(path: &Path) -> Result<Kind, IoError> {
    match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
        Some("mtx") | Some("ttx") => Ok(Kind::MatrixMarket),
        Some("tns") => Ok(Kind::Frostt),
        _ => Err(IoError::file(&display(path), "unknown file type: expected .mtx, .ttx or .tns")),
    }
}

/// Read a tensor, choosing the format by extension.
pub fn read_tensor(path: &Path) -> Result<CooTensor, IoError> {
    read_tns_with_dims(path, None)
}

/// Read a tensor; for `.tns` files (which carry no dimensions) use `dims`
/// when given, else the largest coordinate of each mode.
pub fn read_tns_with_dims(path: &Path, dims: Option<&[usize]>) -> Result<CooTensor, IoError> {
    let name = display(path);
    match kind(path)? {
        Kind::MatrixMarket => {
            let t = mtx::read_mtx(open(path)?, &name)?;
            if let Some(d) = dims {
                if d != t.dims.as_slice() {
                    return Err(IoError::file(&name, format!("the file's dimensions {:?} differ from the given {:?}", t.dims, d)));
                }
            }
            Ok(t)
        }
        Kind::Frostt => tns::read_tns(open(path)?, &name, dims),
    }
}

/// Write a tensor, choosing the format by extension.
pub fn write_tensor(path: &Path, t: &CooTensor) -> Result<(), IoError> {
    let name = display(path);
    let f = std::fs::File::create(path).map_err(|e| IoError::file(&name, format!("cannot create: {e}")))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let r = match kind(path)? {
        Kind::MatrixMarket => mtx::write_mtx(&mut w, t),
        Kind::Frostt => tns::write_tns(&mut w, t),
    };
    r.and_then(|_| std::io::Write::flush(&mut w)).map_err(|e| IoError::file(&name, format!("cannot write: {e}")))
}
