//! The Matrix Market banner and size line.
//!
//! `%%MatrixMarket matrix coordinate|array real|integer|pattern
//! general|symmetric|skew-symmetric`, tokens case-insensitive, then any
//! comment or blank lines, then the size line: `rows cols nnz` for
//! coordinate, `rows cols` for array. taco's `tensor` object (`.ttx`) has
//! any number of dimensions on the size line (followed by nnz for
//! coordinate).

use super::lines::{parse_int, show, tokens, IntError, Lines};
use super::IoError;
use std::io::BufRead;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Layout {
    Coordinate,
    /// Dense, column-major (first index fastest).
    Array,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Field {
    Real,
    Integer,
    /// No values: every stored entry is 1.
    Pattern,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Symmetry {
    General,
    /// Lower triangle stored; the mirror is implied.
    Symmetric,
    /// Strict lower triangle stored; the mirror is implied with its sign
    /// flipped.
    SkewSymmetric,
}

#[derive(Debug)]
pub(super) struct Header {
    pub layout: Layout,
    pub field: Field,
    pub symmetry: Symmetry,
    pub dims: Vec<usize>,
    /// Entries announced on the size line (coordinate layout only).
    pub nnz: u64,
    /// Line of the size line, for messages about the announced count.
    pub size_line: usize,
}

const BANNER_FORM: &str =
    "%%MatrixMarket matrix coordinate|array real|integer|pattern general|symmetric|skew-symmetric";

/// Read the banner and the size line, leaving `lines` on the size line.
pub(super) fn read_header<R: BufRead>(lines: &mut Lines<R>) -> Result<Header, IoError> {
    if !lines.advance()? {
        return Err(IoError::file(
            lines.file(),
            "empty file: expected a %%MatrixMarket banner",
        ));
    }
    let banner = parse_banner(lines)?;
    if !lines.advance_to_content(b'%')? {
        return Err(lines.error_at_end("missing size line after the banner"));
    }
    let (dims, nnz) = parse_size_line(lines, &banner)?;
    if banner.symmetry != Symmetry::General {
        let what = if banner.symmetry == Symmetry::Symmetric {
            "symmetric"
        } else {
            "skew-symmetric"
        };
        if dims.len() != 2 {
            return Err(lines.error(format!(
                "a {what} tensor must be a matrix, but the size line gives {} dimensions",
                dims.len()
            )));
        }
        if dims[0] != dims[1] {
            return Err(lines.error(format!(
                "a {what} matrix must be square, but the size line gives {}x{}",
                dims[0], dims[1]
            )));
        }
    }
    Ok(Header {
        layout: banner.layout,
        field: banner.field,
        symmetry: banner.symmetry,
        dims,
        nnz,
        size_line: lines.number(),
    })
}

struct Banner {
    /// taco's `tensor` object: any number of dimensions.
    tensor: bool,
    layout: Layout,
    field: Field,
    symmetry: Symmetry,
}

fn parse_banner<R>(lines: &Lines<R>) -> Result<Banner, IoError> {
    let mut line = lines.current();
    line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line); // UTF-8 byte order mark
    let mut toks = tokens(line);
    match toks.next() {
        Some(t) if t.eq_ignore_ascii_case(b"%%MatrixMarket") => {}
        Some(t) => {
            return Err(lines.error(format!(
            "not a Matrix Market file: the first line must be a `{BANNER_FORM}` banner, found {}",
            show(t)
        )))
        }
        None => {
            return Err(lines.error(format!(
            "not a Matrix Market file: the first line is blank, expected a `{BANNER_FORM}` banner"
        )))
        }
    }
    let mut next = |what: &str| {
        toks.next().ok_or_else(|| {
            lines.error(format!(
                "truncated banner: the {what} is missing (expected `{BANNER_FORM}`)"
            ))
        })
    };
    let object = next("object")?;
    let tensor = if object.eq_ignore_ascii_case(b"matrix") {
        false
    } else if object.eq_ignore_ascii_case(b"tensor") {
        true
    } else {
        return Err(lines.error(format!(
            "unknown object {} in the banner (expected matrix, or tensor as in taco's .ttx)",
            show(object)
        )));
    };
    let format = next("format")?;
    let layout = match_word(
        format,
        &[("coordinate", Layout::Coordinate), ("array", Layout::Array)],
    )
    .ok_or_else(|| {
        lines.error(format!(
            "unknown format {} in the banner (expected coordinate or array)",
            show(format)
        ))
    })?;
    let field_tok = next("field")?;
    // `double` is not in the standard but fast_matrix_market and scipy
    // accept it as `real`.
    let field = match_word(field_tok, &[("real", Some(Field::Real)), ("double", Some(Field::Real)), ("integer", Some(Field::Integer)), ("pattern", Some(Field::Pattern)), ("complex", None)])
        .ok_or_else(|| lines.error(format!("unknown field {} in the banner (expected real, integer or pattern)", show(field_tok))))?
        .ok_or_else(|| lines.error("complex values are not supported (banner field `complex`): only real, integer and pattern"))?;
    let sym_tok = next("symmetry")?;
    let symmetry = match_word(sym_tok, &[("general", Some(Symmetry::General)), ("symmetric", Some(Symmetry::Symmetric)), ("skew-symmetric", Some(Symmetry::SkewSymmetric)), ("hermitian", None)])
        .ok_or_else(|| lines.error(format!("unknown symmetry {} in the banner (expected general, symmetric or skew-symmetric)", show(sym_tok))))?
        .ok_or_else(|| lines.error("hermitian matrices are not supported (banner symmetry `hermitian` implies complex values)"))?;
    if let Some(extra) = toks.next() {
        return Err(lines.error(format!(
            "unexpected {} after the banner's symmetry (expected `{BANNER_FORM}`)",
            show(extra)
        )));
    }
    if layout == Layout::Array && field == Field::Pattern {
        return Err(lines.error("`array pattern` is not a valid combination: an array stores every value (use coordinate pattern)"));
    }
    Ok(Banner {
        tensor,
        layout,
        field,
        symmetry,
    })
}

fn match_word<T: Copy>(tok: &[u8], words: &[(&str, T)]) -> Option<T> {
    words
        .iter()
        .find(|(w, _)| tok.eq_ignore_ascii_case(w.as_bytes()))
        .map(|&(_, v)| v)
}

/// The largest dimension a [`crate::coo::CooTensor`] (u32 coordinates) holds.
const MAX_DIM: i64 = u32::MAX as i64;

/// Dimensions and (for coordinate) the announced number of entries.
fn parse_size_line<R>(lines: &Lines<R>, banner: &Banner) -> Result<(Vec<usize>, u64), IoError> {
    let mut ints: Vec<i64> = Vec::new();
    for tok in tokens(lines.current()) {
        let v = parse_int(tok).map_err(|e| match e {
            IntError::Syntax => lines.error(format!("size line: {} is not an integer", show(tok))),
            IntError::Overflow => lines.error(format!("size line: {} is too large", show(tok))),
        })?;
        if v < 0 {
            return Err(lines.error(format!("size line: negative size {v}")));
        }
        ints.push(v);
    }
    let coordinate = banner.layout == Layout::Coordinate;
    let expected = match (banner.tensor, coordinate) {
        (false, true) => "3 (rows, columns, entries)",
        (false, false) => "2 (rows, columns) for an array",
        (true, true) => "the dimensions then the number of entries",
        (true, false) => "at least one dimension",
    };
    let count_ok = if banner.tensor {
        !ints.is_empty()
    } else {
        ints.len() == 2 + usize::from(coordinate)
    };
    if !count_ok {
        return Err(lines.error(format!(
            "size line has {} integers, expected {expected}",
            ints.len()
        )));
    }
    let nnz = if coordinate {
        ints.pop().unwrap_or(0) as u64
    } else {
        0
    };
    let mut dims = Vec::with_capacity(ints.len());
    for d in ints {
        if d > MAX_DIM {
            return Err(lines.error(format!(
                "size line: dimension {d} is too large (at most {MAX_DIM})"
            )));
        }
        dims.push(d as usize);
    }
    Ok((dims, nnz))
}
