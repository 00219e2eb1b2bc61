//! Symbols, go to definition, completion, semantic tokens and formatting.

use super::Analysis;
use crate::format::tensor_format::PRESETS;
use crate::language::ast::*;
use crate::language::db::{self, SourceFile};
use crate::notation::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    Format,
    Tensor,
    Kernel,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Symbol {
    pub name: String,
    pub kind: SymbolKind,
    pub span: Span,
    pub selection: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionKind {
    Level,
    Property,
    Preset,
    Tensor,
    Index,
    Keyword,
    Source,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub label: String,
    pub kind: CompletionKind,
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TokenKind {
    Keyword,
    Type,
    Tensor,
    Index,
    Kernel,
    Format,
    Number,
}

fn shifted(s: Span, base: usize) -> Span {
    Span::new(s.start + base, s.end + base)
}

impl Analysis {
    pub fn symbols(&self, file: SourceFile) -> Vec<Symbol> {
        db::parse_file(&self.db, file)
            .items
            .iter()
            .map(|it| {
                let (kind, name) = match &it.kind {
                    ItemKind::Format(f) => (SymbolKind::Format, &f.name),
                    ItemKind::Tensor(t) => (SymbolKind::Tensor, &t.name),
                    ItemKind::Kernel(k) => (SymbolKind::Kernel, &k.name),
                };
                Symbol {
                    name: name.name.clone(),
                    kind,
                    span: it.span,
                    selection: shifted(name.span, it.span.start),
                }
            })
            .collect()
    }

    /// Where the tensor or format named at `offset` is declared.
    pub fn definition(&self, file: SourceFile, offset: usize) -> Option<Span> {
        let parsed = db::parse_file(&self.db, file);
        let word = word_at(self.text(file), offset)?;
        let item = parsed
            .items
            .iter()
            .find(|it| it.span.start <= offset && offset <= it.span.end)?;
        let wants_format = matches!(&item.kind, ItemKind::Tensor(t) if { let s = shifted(t.format.span(), item.span.start); s.start <= offset && offset <= s.end });
        // Formats and tensors have names of their own: on a tensor's format
        // the format of that name comes first, elsewhere the tensor.
        let wanted = if wants_format {
            SymbolKind::Format
        } else {
            SymbolKind::Tensor
        };
        let named: Vec<Symbol> = self
            .symbols(file)
            .into_iter()
            .filter(|s| s.name == word && matches!(s.kind, SymbolKind::Tensor | SymbolKind::Format))
            .collect();
        named
            .iter()
            .find(|s| s.kind == wanted)
            .or(named.first())
            .map(|s| s.selection)
    }

    pub fn completions(&self, file: SourceFile, offset: usize) -> Vec<Completion> {
        let text = self.text(file);
        let before = &text[..offset.min(text.len())];
        let line = before.rsplit('\n').next().unwrap_or("");
        let mut out = Vec::new();
        let in_format = line.contains('@') || line.trim_start().starts_with("format");
        if in_format {
            for l in crate::format::Registry::builtin().names() {
                out.push(Completion {
                    label: l.to_string(),
                    kind: CompletionKind::Level,
                    detail: "level format".into(),
                });
            }
            for p in ["nonunique", "unordered", "full", "aos", "W="] {
                out.push(Completion {
                    label: p.to_string(),
                    kind: CompletionKind::Property,
                    detail: "level property".into(),
                });
            }
            for p in PRESETS {
                out.push(Completion {
                    label: p.to_string(),
                    kind: CompletionKind::Preset,
                    detail: "format preset".into(),
                });
            }
            for s in self
                .symbols(file)
                .into_iter()
                .filter(|s| s.kind == SymbolKind::Format)
            {
                out.push(Completion {
                    label: s.name,
                    kind: CompletionKind::Preset,
                    detail: "declared format".into(),
                });
            }
        }
        if line.contains('=') && line.contains('@') {
            for (name, usage) in crate::language::sources::GENERATORS {
                out.push(Completion {
                    label: name.to_string(),
                    kind: CompletionKind::Source,
                    detail: usage.to_string(),
                });
            }
        }
        if !in_format {
            for s in self
                .symbols(file)
                .into_iter()
                .filter(|s| s.kind == SymbolKind::Tensor)
            {
                out.push(Completion {
                    label: s.name,
                    kind: CompletionKind::Tensor,
                    detail: "tensor".into(),
                });
            }
            if let Some(k) = self.kernel_at(file, offset) {
                let parsed = db::parse_file(&self.db, file);
                let mut seen: Vec<String> = Vec::new();
                for it in &parsed.items {
                    if let ItemKind::Kernel(kd) = &it.kind {
                        if kd.name.name == k {
                            for st in &kd.statements {
                                for v in std::iter::once(&st.lhs)
                                    .chain(st.rhs.accesses())
                                    .flat_map(|a| a.indices.iter())
                                {
                                    if !seen.contains(&v.name) {
                                        seen.push(v.name.clone());
                                        out.push(Completion {
                                            label: v.name.clone(),
                                            kind: CompletionKind::Index,
                                            detail: "index variable".into(),
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
            for kw in ["format", "tensor", "kernel", "order"] {
                out.push(Completion {
                    label: kw.into(),
                    kind: CompletionKind::Keyword,
                    detail: "keyword".into(),
                });
            }
        }
        out
    }

    /// Semantic tokens in source order (absolute spans).
    pub fn semantic_tokens(&self, file: SourceFile) -> Vec<(Span, TokenKind)> {
        let mut out = Vec::new();
        for it in &db::parse_file(&self.db, file).items {
            let b = it.span.start;
            match &it.kind {
                ItemKind::Format(f) => {
                    out.push((shifted(f.name.span, b), TokenKind::Format));
                    format_tokens(&f.format, b, &mut out);
                }
                ItemKind::Tensor(t) => {
                    out.push((shifted(t.name.span, b), TokenKind::Tensor));
                    out.push((shifted(t.elem.span, b), TokenKind::Type));
                    format_tokens(&t.format, b, &mut out);
                }
                ItemKind::Kernel(k) => {
                    out.push((shifted(k.name.span, b), TokenKind::Kernel));
                    for st in &k.statements {
                        for acc in std::iter::once(&st.lhs).chain(st.rhs.accesses()) {
                            out.push((
                                Span::new(
                                    acc.span.start + b,
                                    acc.span.start + b + acc.tensor.len(),
                                ),
                                TokenKind::Tensor,
                            ));
                            for i in &acc.indices {
                                out.push((shifted(i.span, b), TokenKind::Index));
                            }
                        }
                    }
                }
            }
        }
        out.sort_by_key(|(s, _)| (s.start, s.end));
        out
    }

    /// The file re-indented: items separated by one blank line, kernel
    /// statements on their own lines, indented two spaces.
    pub fn format(&self, file: SourceFile) -> Option<String> {
        let parsed = db::parse_file(&self.db, file);
        if !parsed.errors.is_empty() {
            return None;
        }
        let text = self.text(file);
        let mut out = String::new();
        let mut prev_kind: Option<std::mem::Discriminant<ItemKind>> = None;
        let mut cursor = 0;
        for it in &parsed.items {
            // Keep comments between items as they are.
            let between = text[cursor..it.span.start].trim();
            let kind = std::mem::discriminant(&it.kind);
            if !out.is_empty()
                && (prev_kind != Some(kind) || matches!(it.kind, ItemKind::Kernel(_)))
            {
                out.push('\n');
            }
            if !between.is_empty() {
                out.push_str(between);
                out.push('\n');
            }
            match &it.kind {
                ItemKind::Kernel(k) => {
                    out.push_str(&format!("kernel {} {{\n", k.name.name));
                    for st in &k.statements {
                        out.push_str(&format!("  {st}\n"));
                    }
                    out.push_str("}\n");
                }
                _ => {
                    let src = text[it.span.start..it.span.end]
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ");
                    out.push_str(&src);
                    out.push('\n');
                }
            }
            prev_kind = Some(kind);
            cursor = it.span.end;
        }
        let tail = text[cursor..].trim();
        if !tail.is_empty() {
            out.push_str(tail);
            out.push('\n');
        }
        Some(out)
    }
}

fn format_tokens(f: &FormatRef, b: usize, out: &mut Vec<(Span, TokenKind)>) {
    match f {
        FormatRef::Named { name, .. } => out.push((shifted(name.span, b), TokenKind::Format)),
        FormatRef::Levels { levels, .. } => {
            for l in levels {
                out.push((shifted(l.name.span, b), TokenKind::Type));
            }
        }
    }
}

/// The identifier around `offset`.
pub fn word_at(text: &str, offset: usize) -> Option<String> {
    let b = text.as_bytes();
    let is_id = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut s = offset.min(b.len());
    while s > 0 && is_id(b[s - 1]) {
        s -= 1;
    }
    let mut e = offset.min(b.len());
    while e < b.len() && is_id(b[e]) {
        e += 1;
    }
    (s < e).then(|| text[s..e].to_string())
}
