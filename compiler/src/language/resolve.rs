//! Name and shape resolution for one kernel: which tensors it uses, their
//! formats (presets, declared formats or inline level lists), dimensions
//! (numbers, or symbols bound by data files) and data sources.

use super::ast::*;
use crate::format::{parse_format, Registry, TensorFormat};
use crate::notation::Span;
use std::collections::BTreeMap;

/// A problem found resolving or compiling a kernel. Spans inside the
/// kernel are relative to its start (so they survive edits elsewhere);
/// spans in declarations are absolute.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Problem {
    pub span: Span,
    pub message: String,
    pub in_kernel: bool,
    /// The root cause this problem reports, when several kernels or
    /// tensors can report the same one (an unknown size, a bad data file):
    /// a file's diagnostics keep one problem per cause.
    pub cause: Option<Cause>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    UnknownSize(String),
    DataFile(std::path::PathBuf),
}

impl Problem {
    pub fn at_decl(span: Span, message: String) -> Self {
        Problem {
            span,
            message,
            in_kernel: false,
            cause: None,
        }
    }
    pub fn in_kernel(span: Span, message: String) -> Self {
        Problem {
            span,
            message,
            in_kernel: true,
            cause: None,
        }
    }
    pub fn because(mut self, cause: Cause) -> Self {
        self.cause = Some(cause);
        self
    }
}

/// Declarations visible in a file, by name, with absolute spans.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scope {
    pub formats: BTreeMap<String, (FormatDecl, usize)>,
    pub tensors: BTreeMap<String, (TensorDecl, usize)>,
}

impl Scope {
    pub fn new(items: &[Item]) -> Scope {
        let mut s = Scope::default();
        for it in items {
            match &it.kind {
                ItemKind::Format(f) => {
                    s.formats
                        .entry(f.name.name.clone())
                        .or_insert((f.clone(), it.span.start));
                }
                ItemKind::Tensor(t) => {
                    s.tensors
                        .entry(t.name.name.clone())
                        .or_insert((t.clone(), it.span.start));
                }
                ItemKind::Kernel(_) => {}
            }
        }
        s
    }
}

fn shift(s: Span, base: usize) -> Span {
    Span::new(s.start + base, s.end + base)
}

/// The text `parse_format` understands for a format reference, following
/// declared formats.
pub fn format_text(
    f: &FormatRef,
    scope: &Scope,
    base: usize,
    depth: usize,
) -> Result<String, Problem> {
    match f {
        FormatRef::Levels { levels, order, .. } => {
            let list: Vec<String> = levels
                .iter()
                .map(|l| {
                    if l.props.is_empty() {
                        l.name.name.clone()
                    } else {
                        format!("{}({})", l.name.name, l.props.join(","))
                    }
                })
                .collect();
            let mut text = list.join(",");
            if let Some(o) = order {
                text.push(':');
                text.push_str(
                    &o.iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                );
            }
            Ok(text)
        }
        FormatRef::Named { name, args } => {
            if let Some((decl, at)) = scope.formats.get(&name.name) {
                if depth > 8 {
                    return Err(Problem::at_decl(
                        shift(name.span, base),
                        format!("format `{}` refers to itself", name.name),
                    ));
                }
                return format_text(&decl.format, scope, *at, depth + 1);
            }
            Ok(if args.is_empty() {
                name.name.clone()
            } else {
                format!("{}({})", name.name, args.join(","))
            })
        }
    }
}

/// Resolve a tensor's format for its order.
pub fn tensor_format(
    t: &TensorDecl,
    scope: &Scope,
    base: usize,
    registry: &Registry,
) -> Result<TensorFormat, Problem> {
    let text = format_text(&t.format, scope, base, 0)?;
    parse_format(&text, t.shape.len(), registry).map_err(|e| {
        Problem::at_decl(
            shift(t.format.span(), base),
            format!("format of `{}`: {e}", t.name.name),
        )
    })
}
