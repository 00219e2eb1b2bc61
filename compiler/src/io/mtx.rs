//! Matrix Market: `coordinate` and `array`, `real`/`integer`/`pattern`,
//! `general`/`symmetric`/`skew-symmetric` (expanded on read). `complex` and
//! `hermitian` are rejected. taco's `tensor` object (`.ttx`) is accepted
//! with any number of dimensions.

use super::lines::{float, int, text, tokens, Lines};
use super::IoError;
use crate::coo::CooTensor;
use std::io::{BufRead, Write};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Field {
    Real,
    Integer,
    Pattern,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Symmetry {
    General,
    Symmetric,
    Skew,
}

pub fn read_mtx<R: BufRead>(reader: R, file: &str) -> Result<CooTensor, IoError> {
    let mut lines = Lines::new(reader);
    let err = |line: usize, m: String| IoError::at(file, line, m);
    if !lines.advance().map_err(|m| err(1, m))? {
        return Err(err(1, "empty file: missing %%MatrixMarket banner".into()));
    }
    let banner = lines.current().to_vec();
    let toks: Vec<String> = tokens(&banner).map(|t| text(t).to_ascii_lowercase()).collect();
    if toks.first().map(|s| s.as_str()) != Some("%%matrixmarket") {
        return Err(err(1, "not a Matrix Market file: missing %%MatrixMarket banner".into()));
    }
    if toks.len() < 5 {
        return Err(err(1, format!("truncated banner: expected `%%MatrixMarket matrix coordinate|array FIELD SYMMETRY`, found {} words", toks.len())));
    }
    let tensor_object = match toks[1].as_str() {
        "matrix" => false,
        "tensor" => true,
        o => return Err(err(1, format!("unsupported object `{o}` (expected matrix)"))),
    };
    let coordinate = match toks[2].as_str() {
        "coordinate" => true,
        "array" => false,
        f => return Err(err(1, format!("unknown format `{f}` (expected coordinate or array)"))),
    };
    let field = match toks[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" => Field::Pattern,
        "complex" => return Err(err(1, "complex values are not supported (field `complex`)".into())),
        f => return Err(err(1, format!("unknown field `{f}` (expected real, integer or pattern)"))),
    };
    let symmetry = match toks[4].as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::Skew,
        "hermitian" => return Err(err(1, "hermitian matrices are not supported (complex values)".into())),
        s => return Err(err(1, format!("unknown symmetry `{s}` (expected general, symmetric or skew-symmetric)"))),
    };
    if toks.len() > 5 {
        return Err(err(1, format!("unexpected `{}` after the banner's four fields", toks[5])));
    }
    if !coordinate && field == Field::Pattern {
        return Err(err(1, "`array pattern` is not a valid combination".into()));
    }
    // Size line: first non-comment, non-blank line.
    let (size_line, size): (usize, Vec<i64>) = loop {
        let at = lines.number + 1;
        if !lines.advance().map_err(|m| err(at, m))? {
            return Err(err(lines.number.max(1), "missing size line".into()));
        }
        if lines.skippable(b'%') {
            continue;
        }
        let line = lines.number;
        let mut v = Vec::new();
        for t in tokens(lines.current()) {
            match int(t) {
                Some(x) if x >= 0 => v.push(x),
                Some(x) => return Err(err(line, format!("negative size {x}"))),
                None => return Err(err(line, format!("size line: `{}` is not a non-negative integer", text(t)))),
            }
        }
        break (line, v);
    };
    let nd = if tensor_object { size.len() - usize::from(coordinate) } else { 2 };
    let expected = if coordinate { nd + 1 } else { nd };
    if tensor_object && size.len() < expected.max(1) || !tensor_object && size.len() != expected {
        return Err(err(size_line, format!("size line has {} integers, expected {expected}", size.len())));
    }
    let dims: Vec<usize> = size[..nd].iter().map(|&d| d as usize).collect();
    if symmetry != Symmetry::General && (nd != 2 || dims[0] != dims[1]) {
        return Err(err(size_line, format!("a {} matrix must be square", if symmetry == Symmetry::Skew { "skew-symmetric" } else { "symmetric" })));
    }
    let mut t = CooTensor::new(dims.clone());
    if coordinate {
        read_entries(&mut lines, file, &mut t, size[nd] as usize, field, symmetry)?;
    } else {
        read_array(&mut lines, file, &mut t, field, symmetry)?;
    }
    Ok(t)
}

/// Move to the next data line (comment and blank lines between data lines
/// are tolerated, as LAGraph does); its number, or `None` at the end.
fn data_line<R: BufRead>(lines: &mut Lines<R>, file: &str) -> Result<Option<usize>, IoError> {
    loop {
        let n = lines.number + 1;
        if !lines.advance().map_err(|m| IoError::at(file, n, m))? {
            return Ok(None);
        }
        if !lines.skippable(b'%') {
            return Ok(Some(lines.number));
        }
    }
}

fn read_entries<R: BufRead>(lines: &mut Lines<R>, file: &str, t: &mut CooTensor, nnz: usize, field: Field, sym: Symmetry) -> Result<(), IoError> {
    let nd = t.dims.len();
    let want = nd + usize::from(field != Field::Pattern);
    t.coords.reserve(nnz.min(1 << 28) * nd * if sym == Symmetry::General { 1 } else { 2 });
    t.vals.reserve(nnz.min(1 << 28));
    let mut coord = vec![0u32; nd];
    let mut seen = 0usize;
    let dims = t.dims.clone();
    while let Some(line) = data_line(lines, file)? {
        let l = lines.current();
        if seen == nnz {
            return Err(IoError::at(file, line, format!("more data lines than the {nnz} entries the size line announces")));
        }
        let mut n = 0;
        let mut value = 1.0;
        for tok in tokens(l) {
            if n < nd {
                let i = int(tok).ok_or_else(|| IoError::at(file, line, format!("index `{}` is not an integer (or overflows)", text(tok))))?;
                if i < 1 || i as u128 > dims[n] as u128 {
                    return Err(IoError::at(file, line, format!("index {i} out of range 1..={} in dimension {}", dims[n], n + 1)));
                }
                coord[n] = (i - 1) as u32;
            } else if n == nd && field != Field::Pattern {
                value = float(tok).ok_or_else(|| IoError::at(file, line, format!("value `{}` is not a number", text(tok))))?;
                if field == Field::Integer && int(tok).is_none() {
                    return Err(IoError::at(file, line, format!("value `{}` is not an integer", text(tok))));
                }
            } else {
                return Err(IoError::at(file, line, format!("unexpected extra token `{}` ({want} expected)", text(tok))));
            }
            n += 1;
        }
        if n < want {
            return Err(IoError::at(file, line, format!("{n} tokens, expected {want} (indices{})", if field == Field::Pattern { "" } else { " and a value" })));
        }
        if sym == Symmetry::Skew && coord[0] == coord[1] {
            return Err(IoError::at(file, line, "a skew-symmetric matrix cannot store a diagonal entry".to_string()));
        }
        t.push(&coord, value);
        if sym != Symmetry::General && coord[0] != coord[1] {
            let mirrored = if sym == Symmetry::Skew { -value } else { value };
            t.push(&[coord[1], coord[0]], mirrored);
        }
        seen += 1;
    }
    if seen < nnz {
        return Err(IoError::at(file, lines.number.max(1), format!("file ends after {seen} of the {nnz} entries the size line announces")));
    }
    Ok(())
}

fn read_array<R: BufRead>(lines: &mut Lines<R>, file: &str, t: &mut CooTensor, field: Field, sym: Symmetry) -> Result<(), IoError> {
    let dims = t.dims.clone();
    // Column-major; symmetric arrays store the lower triangle only.
    let mut cells: Vec<Vec<u32>> = Vec::new();
    let total: u128 = dims.iter().map(|&d| d as u128).product();
    if total > 1 << 31 {
        return Err(IoError::file(file, format!("dense array of {total} entries is too large")));
    }
    let nd = dims.len();
    let mut idx = vec![0u32; nd];
    for _ in 0..total {
        if sym == Symmetry::General || idx[0] >= idx[1] + u32::from(sym == Symmetry::Skew) {
            cells.push(idx.clone());
        }
        for d in 0..nd {
            idx[d] += 1;
            if (idx[d] as usize) < dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let mut n = 0usize;
    while let Some(line) = data_line(lines, file)? {
        for tok in tokens(lines.current()) {
            let Some(c) = cells.get(n) else {
                return Err(IoError::at(file, line, format!("more values than the {} the size line announces", cells.len())));
            };
            let v = float(tok).ok_or_else(|| IoError::at(file, line, format!("value `{}` is not a number", text(tok))))?;
            if field == Field::Integer && int(tok).is_none() {
                return Err(IoError::at(file, line, format!("value `{}` is not an integer", text(tok))));
            }
            if v != 0.0 {
                t.push(c, v);
                if sym != Symmetry::General && c[0] != c[1] {
                    t.push(&[c[1], c[0]], if sym == Symmetry::Skew { -v } else { v });
                }
            }
            n += 1;
        }
    }
    if n < cells.len() {
        return Err(IoError::at(file, lines.number.max(1), format!("file ends after {n} of {} values", cells.len())));
    }
    Ok(())
}

/// Write a coordinate real general file (any order: `tensor` object).
pub fn write_mtx<W: Write>(w: &mut W, t: &CooTensor) -> std::io::Result<()> {
    let object = if t.order() == 2 { "matrix" } else { "tensor" };
    writeln!(w, "%%MatrixMarket {object} coordinate real general")?;
    let dims: Vec<String> = t.dims.iter().map(|d| d.to_string()).collect();
    writeln!(w, "{} {}", dims.join(" "), t.nnz())?;
    let mut line = String::new();
    for e in 0..t.nnz() {
        line.clear();
        for c in t.coord(e) {
            line.push_str(&(c + 1).to_string());
            line.push(' ');
        }
        line.push_str(&format!("{:?}", t.vals[e]));
        writeln!(w, "{line}")?;
    }
    Ok(())
}
