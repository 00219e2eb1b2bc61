//! Quick fixes for diagnostics that carry a suggestion: a loop-order
//! conflict suggests storing an operand with another mode order.

use super::Analysis;
use crate::language::ast::ItemKind;
use crate::language::db::{self, SourceFile};
use crate::notation::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct QuickFix {
    pub title: String,
    pub span: Span,
    pub replacement: String,
}

impl Analysis {
    /// Fixes for the diagnostic `message` (reported at `offset`).
    pub fn quick_fixes(&self, file: SourceFile, _offset: usize, message: &str) -> Vec<QuickFix> {
        // "... store C with mode order 1,0 (-f C:dense,compressed:1,0)"
        let Some(rest) = message.split("(-f ").nth(1) else { return Vec::new() };
        let spec = rest.trim_end_matches(')');
        let mut parts = spec.splitn(2, ':');
        let (Some(tensor), Some(format)) = (parts.next(), parts.next()) else { return Vec::new() };
        let Some((levels, order)) = format.rsplit_once(':') else { return Vec::new() };
        let levels: Vec<&str> = split_levels(levels);
        let replacement = format!("({}) order ({})", levels.join(", "), order.split(',').collect::<Vec<_>>().join(", "));
        let parsed = db::parse_file(&self.db, file);
        parsed
            .items
            .iter()
            .filter_map(|it| match &it.kind {
                ItemKind::Tensor(t) if t.name.name == tensor => {
                    let s = t.format.span();
                    Some(QuickFix {
                        title: format!("Store {tensor} as {replacement}"),
                        span: Span::new(s.start + it.span.start, s.end + it.span.start),
                        replacement: replacement.clone(),
                    })
                }
                _ => None,
            })
            .collect()
    }
}

/// Split a level list at top-level commas (not those inside parentheses).
fn split_levels(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}
