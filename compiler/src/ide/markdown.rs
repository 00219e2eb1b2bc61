//! Markdown for hovers: text from the user or from error messages goes
//! through `escape`, so that `f64[N, N]` is not read as a link or `A*B*C`
//! as emphasis. Code spans (messages quote names in backticks) are left as
//! they are: markdown reads nothing inside them.

/// Escape the characters markdown would read as links, emphasis, HTML or
/// table cells.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        if c == '`' {
            in_code = !in_code;
        }
        if !in_code && matches!(c, '\\' | '[' | ']' | '*' | '<' | '>' | '|') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn brackets_and_stars_are_escaped_code_spans_kept() {
        assert_eq!(
            super::escape("`A` : f64[N, N] * 2 <x> a|b"),
            "`A` : f64\\[N, N\\] \\* 2 \\<x\\> a\\|b"
        );
        assert_eq!(
            super::escape("in `y(i) = A(i,j) * x[j]`, no"),
            "in `y(i) = A(i,j) * x[j]`, no"
        );
    }
}
