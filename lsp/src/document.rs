//! Open documents as ropes, with incremental edits and conversion between
//! byte offsets (the compiler's) and LSP positions (UTF-16 code units).

use ropey::Rope;
use tower_lsp_server::ls_types::{Position, Range, TextDocumentContentChangeEvent};

#[derive(Clone)]
pub struct Document {
    pub rope: Rope,
    pub version: i32,
}

impl Document {
    pub fn new(text: &str, version: i32) -> Self {
        Document {
            rope: Rope::from_str(text),
            version,
        }
    }

    pub fn text(&self) -> String {
        self.rope.to_string()
    }

    /// Char index of an LSP position, clamped into its line (a column past
    /// the end is the end of the line, before its break) and the document.
    fn char_of(&self, p: Position) -> usize {
        let line = p.line as usize;
        if line >= self.rope.len_lines() {
            return self.rope.len_chars();
        }
        let start = self.rope.line_to_char(line);
        let text = self.rope.line(line);
        let mut len = text.len_chars();
        // Lines end at \n, \r\n or \r only (ropey built with `cr_lines`).
        if len > 0 && text.char(len - 1) == '\n' {
            len -= 1;
        }
        if len > 0 && text.char(len - 1) == '\r' {
            len -= 1;
        }
        let line_utf16 = self.rope.char_to_utf16_cu(start);
        let end_utf16 = self.rope.char_to_utf16_cu(start + len);
        let cu = (line_utf16 + p.character as usize).min(end_utf16);
        self.rope.utf16_cu_to_char(cu)
    }

    pub fn apply(&mut self, change: &TextDocumentContentChangeEvent) {
        match change.range {
            None => self.rope = Rope::from_str(&change.text),
            Some(r) => {
                let (a, b) = (self.char_of(r.start), self.char_of(r.end));
                let (a, b) = (a.min(b), a.max(b));
                self.rope.remove(a..b);
                self.rope.insert(a, &change.text);
            }
        }
    }

    pub fn offset(&self, p: Position) -> usize {
        self.rope.char_to_byte(self.char_of(p))
    }

    pub fn position(&self, byte: usize) -> Position {
        let byte = byte.min(self.rope.len_bytes());
        let ch = self.rope.byte_to_char(byte);
        let line = self.rope.char_to_line(ch);
        let col = self.rope.char_to_utf16_cu(ch)
            - self.rope.char_to_utf16_cu(self.rope.line_to_char(line));
        Position {
            line: line as u32,
            character: col as u32,
        }
    }

    pub fn range(&self, start: usize, end: usize) -> Range {
        Range {
            start: self.position(start),
            end: self.position(end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_positions_round_trip() {
        let mut d = Document::new("// é𝄞\nkernel k { y(i) = x(i) }\n", 1);
        let off = d.text().find("kernel").unwrap(); // ok: test code, a panic is a failed test
        let p = d.position(off);
        assert_eq!((p.line, p.character), (1, 0));
        assert_eq!(d.offset(p), off);
        let end_of_comment = d.position("// é𝄞".len());
        assert_eq!(end_of_comment.character, 6); // é is 1 unit, 𝄞 is 2
        d.apply(&TextDocumentContentChangeEvent {
            range: Some(Range {
                start: Position::new(1, 7),
                end: Position::new(1, 8),
            }),
            range_length: None,
            text: "spmv".into(),
        });
        assert!(d.text().contains("kernel spmv {"));
    }

    /// Only \n, \r\n and \r end lines: U+2028, U+2029, U+0085, FF and VT
    /// are ordinary characters, as LSP counts.
    #[test]
    fn only_lsp_line_breaks_count() {
        let text = "// a\u{2028}b\u{2029}c\u{85}d\u{c}e\u{b}f\nx\r\ny\rz";
        let d = Document::new(text, 1);
        assert_eq!(d.rope.len_lines(), 4);
        let x = d.position(text.find('x').unwrap()); // ok: test code, a panic is a failed test
        assert_eq!((x.line, x.character), (1, 0));
        let f = d.position(text.find('f').unwrap()); // ok: test code, a panic is a failed test
        assert_eq!((f.line, f.character), (0, 13));
        let z = text.find('z').unwrap(); // ok: test code
        assert_eq!(d.position(z), Position::new(3, 0));
        // A column past the end of a line stops before its break.
        let x = text.find('x').unwrap(); // ok: test code
        assert_eq!(d.offset(Position::new(1, 99)), x + 1);
    }
}
