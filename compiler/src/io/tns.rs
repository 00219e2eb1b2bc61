//! FROSTT `.tns`: one entry per line, `i1 i2 ... iN value` with 1-based
//! indices, any spacing, `#` comment lines and blank lines skipped. Every
//! line has the same number of columns. The file carries no dimensions:
//! they come from the caller or from the largest index of each mode. A
//! scalar (order 0) is a line holding just its value.

use super::lines::{parse_f64, parse_int, show, tokens, IntError, Lines};
use super::IoError;
use crate::coo::CooTensor;
use std::io::{BufRead, Write};

/// Read a FROSTT file; `file` names it in error messages. With `dims`,
/// an index beyond a dimension is an error; without, each dimension is
/// the largest index of its mode (and an empty file is an error).
pub fn read_tns<R: BufRead>(
    reader: R,
    file: &str,
    dims: Option<&[usize]>,
) -> Result<CooTensor, IoError> {
    let mut lines = Lines::new(reader, file);
    // Indices per line, and the line that fixed it (for messages).
    let mut order: Option<(usize, usize)> = None;
    let mut coords: Vec<u32> = Vec::new();
    let mut vals: Vec<f64> = Vec::new();
    let mut maxes: Vec<usize> = Vec::new();
    while lines.advance_to_content(b'#')? {
        let start = coords.len();
        // The last token is the value; every token before it an index.
        let mut pending: Option<&[u8]> = None;
        let mut k = 0;
        for tok in tokens(lines.current()) {
            if let Some(index) = pending {
                coords.push(parse_index(index, k).map_err(|m| lines.error(m))?);
                k += 1;
            }
            pending = Some(tok);
        }
        let Some(value) = pending else { continue }; // not reached: the line has content
        match order {
            None => {
                if let Some(d) = dims {
                    if d.len() != k {
                        return Err(lines.error(format!(
                            "{k} indices per line, but {} dimensions were given",
                            d.len()
                        )));
                    }
                }
                order = Some((k, lines.number()));
                maxes = vec![0; k];
            }
            Some((o, first)) if o != k => {
                return Err(lines.error(format!("{} columns, but line {first} has {} (every line holds the same number of indices, then a value)", k + 1, o + 1)));
            }
            Some(_) => {}
        }
        for (mode, &c) in coords[start..].iter().enumerate() {
            let i = c as usize + 1;
            if let Some(d) = dims {
                if i > d[mode] {
                    return Err(lines.error(format!(
                        "index {i} in mode {} out of range 1..={} (the given dimension)",
                        mode + 1,
                        d[mode]
                    )));
                }
            }
            maxes[mode] = maxes[mode].max(i);
        }
        vals.push(
            parse_f64(value)
                .ok_or_else(|| lines.error(format!("value {} is not a number", show(value))))?,
        );
    }
    let dims = match (dims, order) {
        (Some(d), _) => d.to_vec(),
        (None, Some(_)) => maxes,
        (None, None) => {
            return Err(IoError::file(file, "no entries, so the dimensions are unknown: a .tns file does not store them, give them with -d"));
        }
    };
    Ok(CooTensor { dims, coords, vals })
}

/// A 1-based index in mode `k` (0-based), returned 0-based.
fn parse_index(tok: &[u8], k: usize) -> Result<u32, String> {
    let mode = k + 1;
    match parse_int(tok) {
        Ok(i) if i >= 1 && i <= i64::from(u32::MAX) => Ok((i - 1) as u32),
        Ok(i) if i < 1 => Err(format!(
            "index {i} in mode {mode}: .tns indices are 1-based (a 0-based file must be converted)"
        )),
        Ok(i) => Err(format!(
            "index {i} in mode {mode} is too large (at most {})",
            u32::MAX
        )),
        Err(IntError::Overflow) => Err(format!(
            "index {} in mode {mode} is too large (at most {})",
            String::from_utf8_lossy(tok),
            u32::MAX
        )),
        Err(IntError::Syntax) => Err(format!(
            "index {} in mode {mode} is not an integer",
            show(tok)
        )),
    }
}

/// Write FROSTT lines (dimensions are not stored: read the file back with
/// the same dimensions given). A scalar is one line holding its value, the
/// sum of its entries (0 when it has none).
pub fn write_tns<W: Write>(w: &mut W, t: &CooTensor) -> std::io::Result<()> {
    if t.order() == 0 {
        return writeln!(w, "{:?}", t.vals.iter().sum::<f64>());
    }
    write_entries(w, t)
}

/// One `i1 ... iN value` line per entry, 1-based; shared with Matrix
/// Market, whose data lines have the same form. `{:?}` prints the shortest
/// decimal that parses back to the same f64.
pub(super) fn write_entries<W: Write>(w: &mut W, t: &CooTensor) -> std::io::Result<()> {
    let n = t.order();
    if t.coords.len() != t.nnz() * n {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "inconsistent tensor: coordinate count does not match the entries",
        ));
    }
    for (e, v) in t.vals.iter().enumerate() {
        for &c in &t.coords[e * n..(e + 1) * n] {
            write_u64(w, u64::from(c) + 1)?;
            w.write_all(b" ")?;
        }
        writeln!(w, "{v:?}")?;
    }
    Ok(())
}

/// Decimal digits without the formatting machinery (most of a data line).
fn write_u64<W: Write>(w: &mut W, mut v: u64) -> std::io::Result<()> {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    w.write_all(&buf[at..])
}
