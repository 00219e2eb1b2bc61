//! Line reading and token parsing over byte slices.
//!
//! Readers see each line as a borrowed `&[u8]` (one buffer reused for the
//! whole file, no `String` per line) and parse numbers straight from the
//! token bytes: this is what makes a ten-million-entry file load in a couple
//! of seconds. Every failure becomes an [`IoError`] naming the file and the
//! 1-based line, so nothing here can panic on bad input.

use super::IoError;
use std::io::{BufRead, Read};

/// The longest line a reader accepts, in bytes. Real data lines are a few
/// dozen bytes; without a cap a file with no newline (or a device) would
/// grow one buffer until memory runs out.
pub const MAX_LINE: usize = 1 << 20;

/// Iterates the lines of a file, tracking the current line number.
pub(super) struct Lines<'f, R> {
    reader: R,
    file: &'f str,
    buf: Vec<u8>,
    /// 1-based number of the line in `buf`; 0 before the first line.
    number: usize,
}

impl<'f, R: BufRead> Lines<'f, R> {
    pub fn new(reader: R, file: &'f str) -> Self {
        Lines {
            reader,
            file,
            buf: Vec::with_capacity(256),
            number: 0,
        }
    }

    /// Move to the next line; `Ok(false)` at the end of the input.
    pub fn advance(&mut self) -> Result<bool, IoError> {
        self.buf.clear();
        match (&mut self.reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut self.buf)
        {
            Ok(0) => Ok(false),
            Ok(_) => {
                self.number += 1;
                if self.buf.len() > MAX_LINE && self.buf.last() != Some(&b'\n') {
                    return Err(IoError::at(
                        self.file,
                        self.number,
                        format!("line longer than {MAX_LINE} bytes"),
                    ));
                }
                Ok(true)
            }
            Err(e) => Err(IoError::at(
                self.file,
                self.number + 1,
                format!("read error: {e}"),
            )),
        }
    }

    /// Move to the next line that is neither blank nor a comment starting
    /// with `mark` (possibly indented); `Ok(false)` at the end.
    pub fn advance_to_content(&mut self, mark: u8) -> Result<bool, IoError> {
        while self.advance()? {
            match self.current().iter().find(|b| !b.is_ascii_whitespace()) {
                None => continue,
                Some(&b) if b == mark => continue,
                Some(_) => return Ok(true),
            }
        }
        Ok(false)
    }
}

impl<R> Lines<'_, R> {
    /// The current line without its `\n` or `\r\n` terminator.
    pub fn current(&self) -> &[u8] {
        let mut end = self.buf.len();
        while end > 0 && (self.buf[end - 1] == b'\n' || self.buf[end - 1] == b'\r') {
            end -= 1;
        }
        &self.buf[..end]
    }

    pub fn number(&self) -> usize {
        self.number
    }

    pub fn file(&self) -> &str {
        self.file
    }

    /// An error on the current line.
    pub fn error(&self, message: impl Into<String>) -> IoError {
        IoError::at(self.file, self.number.max(1), message)
    }

    /// An error found at the end of the input: reported on the last line,
    /// or for the whole file if it has no lines at all.
    pub fn error_at_end(&self, message: impl Into<String>) -> IoError {
        if self.number == 0 {
            IoError::file(self.file, message)
        } else {
            IoError::at(self.file, self.number, message)
        }
    }
}

/// Whitespace-separated tokens of a line (free format: any run of spaces
/// and tabs separates).
pub(super) fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
}

/// Why a token is not an acceptable integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IntError {
    /// Not of the form `[+-]digits`.
    Syntax,
    /// Digits only, but beyond the i64 range.
    Overflow,
}

/// A decimal integer `[+-]digits`, without going through `str`.
pub(super) fn parse_int(tok: &[u8]) -> Result<i64, IntError> {
    let (neg, digits) = match tok.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, tok),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(IntError::Syntax);
    }
    // Accumulate negatively so that i64::MIN parses too.
    let mut v: i64 = 0;
    for &d in digits {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_sub(i64::from(d - b'0')))
            .ok_or(IntError::Overflow)?;
    }
    if neg {
        Ok(v)
    } else {
        v.checked_neg().ok_or(IntError::Overflow)
    }
}

/// Whether a token is written as an integer (any number of digits).
pub(super) fn is_integer(tok: &[u8]) -> bool {
    !matches!(parse_int(tok), Err(IntError::Syntax))
}

/// A floating-point value. Decimal numbers beyond the f64 range read as
/// infinity (as scipy does); `inf` and `nan` are accepted.
pub(super) fn parse_f64(tok: &[u8]) -> Option<f64> {
    std::str::from_utf8(tok).ok()?.parse().ok()
}

/// A token quoted for an error message: printable, one line, and short even
/// when the input is binary garbage.
pub(super) fn show(tok: &[u8]) -> String {
    const MAX: usize = 40;
    let text = String::from_utf8_lossy(tok);
    let mut out: String = text
        .chars()
        .take(MAX)
        .flat_map(char::escape_debug)
        .collect();
    if text.chars().count() > MAX {
        out.push('…');
    }
    format!("`{out}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_int(b"42"), Ok(42));
        assert_eq!(parse_int(b"+7"), Ok(7));
        assert_eq!(parse_int(b"-3"), Ok(-3));
        assert_eq!(parse_int(b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_int(b"9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_int(b"9223372036854775808"), Err(IntError::Overflow));
        assert_eq!(parse_int(b"19223372036854775808"), Err(IntError::Overflow));
        for bad in [
            &b""[..],
            b"-",
            b"+",
            b"1.0",
            b"1e3",
            b"0x10",
            b"12a",
            b"--1",
        ] {
            assert_eq!(parse_int(bad), Err(IntError::Syntax), "{bad:?}");
        }
    }

    #[test]
    fn floats() {
        assert_eq!(parse_f64(b"1.5e-2"), Some(0.015));
        assert_eq!(parse_f64(b"-2.8E2"), Some(-280.0));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"1E310"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert!(parse_f64(b"nan").is_some_and(f64::is_nan));
        assert_eq!(parse_f64(b"forty-two"), None);
        assert_eq!(parse_f64(b"\xff\xfe"), None);
    }

    #[test]
    fn lines_strip_terminators_and_count() {
        let mut l = Lines::new(&b"a\r\n\n  % c\nb"[..], "f");
        assert!(l.advance_to_content(b'%').unwrap()); // ok: test code, a panic is a failed test
        assert_eq!((l.current(), l.number()), (&b"a"[..], 1));
        assert!(l.advance_to_content(b'%').unwrap()); // ok: test code, a panic is a failed test
        assert_eq!((l.current(), l.number()), (&b"b"[..], 4));
        assert!(!l.advance_to_content(b'%').unwrap()); // ok: test code, a panic is a failed test
        assert_eq!(l.error_at_end("x").to_string(), "f:4: x");
    }

    #[test]
    fn long_lines_are_refused() {
        let mut ok = vec![b'1'; MAX_LINE];
        ok.push(b'\n');
        ok.extend_from_slice(b"2\n");
        let mut l = Lines::new(&ok[..], "f");
        assert!(l.advance().unwrap() && l.advance().unwrap()); // ok: test code, a panic is a failed test
        assert_eq!(l.current(), b"2");
        let long = vec![b'0'; MAX_LINE + 10];
        let mut l = Lines::new(&long[..], "f");
        assert_eq!(
            l.advance().unwrap_err().to_string(),
            format!("f:1: line longer than {MAX_LINE} bytes")
        );
    }

    #[test]
    fn shown_tokens_are_short_and_printable() {
        assert_eq!(show(b"abc"), "`abc`");
        assert_eq!(show(b"a\x1bb"), "`a\\u{1b}b`");
        assert!(show(&[b'x'; 1000]).chars().count() < 50);
    }
}
