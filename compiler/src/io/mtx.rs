//! Matrix Market (`.mtx`) and taco's tensor extension (`.ttx`).
//!
//! Read: `coordinate` and `array` layouts; `real`, `integer` and `pattern`
//! fields (pattern entries are 1.0); `symmetric` and `skew-symmetric`
//! matrices are expanded to both triangles. `complex` and `hermitian` are
//! rejected. Write: coordinate real general.
//!
//! Where real readers are lenient we are too: comment and blank lines
//! anywhere (also between data lines, as LAGraph allows), indented
//! comments, CRLF, free-format spacing, entries of a symmetric file in the
//! upper triangle (mirrored like scipy does), values beyond f64 as
//! infinity. Where the format is plainly violated we fail: the data line
//! count must equal the size line's, indices must be in range, a coordinate
//! line holds exactly its indices and value.

use super::lines::{is_integer, parse_f64, parse_int, show, tokens, IntError, Lines};
use super::mtx_header::{read_header, Field, Header, Layout, Symmetry};
use super::tns::write_entries;
use super::IoError;
use crate::coo::CooTensor;
use std::io::{BufRead, Write};

/// Read a Matrix Market file; `file` names it in error messages.
pub fn read_mtx<R: BufRead>(reader: R, file: &str) -> Result<CooTensor, IoError> {
    let mut lines = Lines::new(reader, file);
    let header = read_header(&mut lines)?;
    let mut t = CooTensor::new(header.dims.clone());
    match header.layout {
        Layout::Coordinate => read_coordinate(&mut lines, &header, &mut t)?,
        Layout::Array => read_array(&mut lines, &header, &mut t)?,
    }
    Ok(t)
}

/// Write `t` as `coordinate real general`: object `matrix` for order 2,
/// taco's `tensor` otherwise (the size line then lists every dimension;
/// a scalar has only the entry count). Values are written in the shortest
/// form that reads back to the same f64.
pub fn write_mtx<W: Write>(w: &mut W, t: &CooTensor) -> std::io::Result<()> {
    let object = if t.order() == 2 { "matrix" } else { "tensor" };
    writeln!(w, "%%MatrixMarket {object} coordinate real general")?;
    for d in &t.dims {
        write!(w, "{d} ")?;
    }
    writeln!(w, "{}", t.nnz())?;
    write_entries(w, t)
}

fn read_coordinate<R: BufRead>(
    lines: &mut Lines<R>,
    h: &Header,
    t: &mut CooTensor,
) -> Result<(), IoError> {
    let mirrored = h.symmetry != Symmetry::General;
    reserve(t, h.nnz, mirrored);
    let mut coord = vec![0u32; h.dims.len()];
    let mut seen: u64 = 0;
    while lines.advance_to_content(b'%')? {
        if seen == h.nnz {
            return Err(lines.error(format!(
                "more data lines than the {} entries announced on the size line (line {})",
                h.nnz, h.size_line
            )));
        }
        let value = parse_entry(lines.current(), h, &mut coord).map_err(|m| lines.error(m))?;
        t.push(&coord, value);
        if mirrored {
            let (i, j) = (coord[0], coord[1]);
            match h.symmetry {
                _ if i != j => t.push(
                    &[j, i],
                    if h.symmetry == Symmetry::SkewSymmetric {
                        -value
                    } else {
                        value
                    },
                ),
                Symmetry::SkewSymmetric => {
                    return Err(lines.error(format!("diagonal entry ({}, {}) in a skew-symmetric matrix, whose diagonal is zero and not stored", i + 1, j + 1)));
                }
                _ => {}
            }
        }
        seen += 1;
    }
    if seen < h.nnz {
        return Err(lines.error_at_end(format!(
            "file ends after {seen} of the {} entries announced on the size line (line {})",
            h.nnz, h.size_line
        )));
    }
    if t.vals.capacity() > t.vals.len() + t.vals.len() / 8 {
        t.vals.shrink_to_fit();
        t.coords.shrink_to_fit();
    }
    Ok(())
}

/// Reserve room for the announced entries, but trust the size line only
/// so far: a corrupt header must not allocate gigabytes up front (and an
/// allocation that fails is ignored rather than aborting).
fn reserve(t: &mut CooTensor, announced: u64, mirrored: bool) {
    let entries = announced.min(1 << 24) as usize * if mirrored { 2 } else { 1 };
    let _ = t.vals.try_reserve_exact(entries);
    let _ = t.coords.try_reserve_exact(entries * t.order());
}

/// Parse one coordinate line into `coord` (0-based) and return its value.
/// Errors are messages; the caller adds file and line.
fn parse_entry(line: &[u8], h: &Header, coord: &mut [u32]) -> Result<f64, String> {
    let nd = coord.len();
    let mut toks = tokens(line);
    for (k, c) in coord.iter_mut().enumerate() {
        // Named only for a message: a String per index and line was a
        // sixth of the time to read a ten-million-entry file.
        let name = || index_name(nd, k);
        let Some(tok) = toks.next() else {
            return Err(format!("missing {}: {}", name(), entry_form(nd, h.field)));
        };
        let dim = h.dims[k];
        let i = match parse_int(tok) {
            Ok(i) if i >= 1 && i as u64 <= dim as u64 => i,
            Ok(0) => {
                return Err(format!(
                    "{} 0 out of range 1..={dim} (Matrix Market indices are 1-based)",
                    name()
                ))
            }
            Ok(i) => return Err(format!("{} {i} out of range 1..={dim}", name())),
            Err(IntError::Overflow) => {
                return Err(format!(
                    "{} {} out of range 1..={dim}",
                    name(),
                    String::from_utf8_lossy(tok)
                ))
            }
            Err(IntError::Syntax) => {
                return Err(format!(
                    "{} {} is not an integer: {}",
                    name(),
                    show(tok),
                    entry_form(nd, h.field)
                ))
            }
        };
        // In range of a dimension that is at most u32::MAX, so this fits.
        *c = (i - 1) as u32;
    }
    let value = match h.field {
        Field::Pattern => 1.0,
        Field::Real | Field::Integer => {
            let Some(tok) = toks.next() else {
                return Err(format!("missing value: {}", entry_form(nd, h.field)));
            };
            parse_value(tok, h.field)?
        }
    };
    if let Some(extra) = toks.next() {
        return Err(format!(
            "unexpected {} at the end of the entry: {}",
            show(extra),
            entry_form(nd, h.field)
        ));
    }
    Ok(value)
}

fn index_name(order: usize, k: usize) -> String {
    match (order, k) {
        (2, 0) => "row index".to_string(),
        (2, 1) => "column index".to_string(),
        (1, _) => "index".to_string(),
        _ => format!("mode-{} index", k + 1),
    }
}

fn entry_form(order: usize, field: Field) -> String {
    let indices = if order == 1 {
        "1 index".to_string()
    } else {
        format!("{order} indices")
    };
    match field {
        Field::Pattern => format!("a pattern entry holds {indices} and no value"),
        Field::Real => format!("an entry holds {indices} and a value"),
        Field::Integer => format!("an entry holds {indices} and an integer value"),
    }
}

fn parse_value(tok: &[u8], field: Field) -> Result<f64, String> {
    if field == Field::Integer && !is_integer(tok) {
        return Err(format!(
            "value {} is not an integer (banner field `integer`)",
            show(tok)
        ));
    }
    parse_f64(tok).ok_or_else(|| format!("value {} is not a number", show(tok)))
}

fn read_array<R: BufRead>(
    lines: &mut Lines<R>,
    h: &Header,
    t: &mut CooTensor,
) -> Result<(), IoError> {
    let mut cells = ArrayCells::new(&h.dims, h.symmetry);
    let mut read: u64 = 0;
    while lines.advance_to_content(b'%')? {
        for tok in tokens(lines.current()) {
            let Some(c) = cells.current() else {
                return Err(lines.error(format!(
                    "more values than the {} the array holds",
                    cells.describe()
                )));
            };
            let v = parse_value(tok, h.field).map_err(|m| lines.error(m))?;
            // Keep nonzeros only: the result is a sparse tensor.
            if v != 0.0 {
                t.push(c, v);
                if h.symmetry != Symmetry::General && c[0] != c[1] {
                    t.push(
                        &[c[1], c[0]],
                        if h.symmetry == Symmetry::SkewSymmetric {
                            -v
                        } else {
                            v
                        },
                    );
                }
            }
            cells.step();
            read += 1;
        }
    }
    if cells.current().is_some() {
        return Err(lines.error_at_end(format!(
            "file ends after {read} of the {} the array holds",
            cells.describe()
        )));
    }
    Ok(())
}

/// Walks the positions of an array's values in file order: column-major
/// (first index fastest, as taco does for `.ttx`); for symmetric arrays
/// the lower triangle column by column, for skew-symmetric the strict lower
/// triangle. Computed on the fly: a dense header cannot make us allocate.
struct ArrayCells {
    dims: Vec<usize>,
    symmetry: Symmetry,
    idx: Vec<u32>,
    done: bool,
}

impl ArrayCells {
    fn new(dims: &[usize], symmetry: Symmetry) -> Self {
        let mut idx = vec![0u32; dims.len()];
        let mut done = dims.contains(&0);
        if symmetry == Symmetry::SkewSymmetric {
            // Start below the diagonal; a 1x1 skew array holds nothing.
            if let Some(first) = idx.first_mut() {
                *first = 1;
            }
            done |= dims.first().is_some_and(|&n| n < 2);
        }
        ArrayCells {
            dims: dims.to_vec(),
            symmetry,
            idx,
            done,
        }
    }

    fn current(&self) -> Option<&[u32]> {
        (!self.done).then_some(self.idx.as_slice())
    }

    fn step(&mut self) {
        if self.done {
            return;
        }
        match self.symmetry {
            Symmetry::General => {
                for (i, &d) in self.idx.iter_mut().zip(&self.dims) {
                    *i += 1;
                    if (*i as usize) < d {
                        return;
                    }
                    *i = 0;
                }
                self.done = true;
            }
            Symmetry::Symmetric | Symmetry::SkewSymmetric => {
                let n = self.dims[0] as u64;
                let (mut i, mut j) = (u64::from(self.idx[0]) + 1, u64::from(self.idx[1]));
                if i >= n {
                    j += 1;
                    i = j + u64::from(self.symmetry == Symmetry::SkewSymmetric);
                }
                if i >= n {
                    self.done = true;
                } else {
                    // i < n and j <= i are below u32::MAX.
                    self.idx[0] = i as u32;
                    self.idx[1] = j as u32;
                }
            }
        }
    }

    /// "N values" for messages, N as the size line implies.
    fn describe(&self) -> String {
        let total: u128 = match self.symmetry {
            Symmetry::General => self
                .dims
                .iter()
                .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))
                .unwrap_or(u128::MAX),
            Symmetry::Symmetric => (self.dims[0] as u128) * (self.dims[0] as u128 + 1) / 2,
            Symmetry::SkewSymmetric => {
                (self.dims[0] as u128) * (self.dims[0] as u128).saturating_sub(1) / 2
            }
        };
        let which = match self.symmetry {
            Symmetry::General => "values",
            Symmetry::Symmetric => "values of the lower triangle",
            Symmetry::SkewSymmetric => "values of the strict lower triangle",
        };
        format!("{total} {which}")
    }
}
