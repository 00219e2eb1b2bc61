//! Line splitting and token parsing over byte slices, without a String per
//! line: fast enough for ten-million-entry files.

use std::io::BufRead;

/// Iterates lines as byte slices (without `\n` / `\r\n`), counting them.
pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    pub number: usize,
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R) -> Self {
        Lines { reader, buf: Vec::with_capacity(256), number: 0 }
    }

    /// Move to the next line; `Ok(false)` at the end. Read errors (and
    /// invalid bytes) become messages.
    pub fn advance(&mut self) -> Result<bool, String> {
        self.buf.clear();
        let n = self.reader.read_until(b'\n', &mut self.buf).map_err(|e| format!("read error: {e}"))?;
        if n == 0 {
            return Ok(false);
        }
        self.number += 1;
        Ok(true)
    }
}

impl<R> Lines<R> {
    /// The line most recently returned by `next_line`.
    pub fn current(&self) -> &[u8] {
        let mut end = self.buf.len();
        while end > 0 && (self.buf[end - 1] == b'\n' || self.buf[end - 1] == b'\r') {
            end -= 1;
        }
        &self.buf[..end]
    }

    /// Whether the current line is blank or a comment starting with `mark`.
    pub fn skippable(&self, mark: u8) -> bool {
        let l = self.current();
        is_blank(l) || l.iter().find(|b| !b.is_ascii_whitespace()) == Some(&mark)
    }
}

/// Whitespace-separated tokens of a line.
pub fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace()).filter(|t| !t.is_empty())
}

pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

/// A non-negative or negative decimal integer; `None` if not an integer or
/// out of i64 range.
pub fn int(tok: &[u8]) -> Option<i64> {
    let (neg, digits) = match tok.first() {
        Some(b'-') => (true, &tok[1..]),
        Some(b'+') => (false, &tok[1..]),
        _ => (false, tok),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}

/// A floating-point number (values beyond f64 read as infinity, as scipy).
pub fn float(tok: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(tok).ok()?;
    let v: f64 = s.parse().ok()?;
    Some(v)
}

pub fn text(tok: &[u8]) -> String {
    String::from_utf8_lossy(tok).into_owned()
}
