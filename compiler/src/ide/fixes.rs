//! Fixes for kernels the compiler refuses (a missing capability, no loop
//! order, a result format that cannot be assembled): another format or
//! mode order for one of the kernel's tensors, found by compiling the
//! kernel with each candidate, so only a change that works is offered.
//!
//! A tensor other kernels share is changed in place only if those kernels
//! still compile; otherwise the fix declares a copy in the new format for
//! this kernel (the runtime converts when it packs the data).

use super::Analysis;
use crate::format::alternatives::alternatives;
use crate::format::TensorFormat;
use crate::language::ast::{ItemKind, KernelDecl};
use crate::language::db::{self, Db, Name, SourceFile};
use crate::notation::Span;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
pub struct QuickFix {
    pub title: String,
    pub span: Span,
    pub replacement: String,
}

/// A format that makes a refused kernel compile, as data.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Suggestion {
    pub kernel: String,
    pub tensor: String,
    /// The format in `.tensor` syntax: `CSC`, `(dense, compressed) order (1, 0)`.
    pub format: String,
    /// Set when other kernels share the tensor and would break: the name
    /// of a new tensor, a copy in `format`, for this kernel only.
    pub copy: Option<String>,
}

impl Suggestion {
    /// What the diagnostic adds after the compiler's reason.
    pub fn sentence(&self) -> String {
        match &self.copy {
            None => format!("it compiles with `{}` stored as `{}` (quick fix)", self.tensor, self.format),
            Some(c) => format!(
                "it compiles with a copy `{c}` of `{}` stored as `{}` (quick fix; other kernels keep `{}` as it is)",
                self.tensor, self.format, self.tensor
            ),
        }
    }
}

/// `dense,compressed:1,0` → `(dense, compressed) order (1, 0)`; presets as
/// they are.
fn source_syntax(candidate: &str) -> String {
    let (levels, order) = match candidate.rsplit_once(':') {
        Some((l, o)) => (l, Some(o)),
        None => (candidate, None),
    };
    if !levels.contains(',') && order.is_none() {
        return candidate.to_string();
    }
    let mut out = format!("({})", split_levels(levels).join(", "));
    if let Some(o) = order {
        out.push_str(&format!(
            " order ({})",
            o.split(',').collect::<Vec<_>>().join(", ")
        ));
    }
    out
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

/// Every statement compiles reading its operands as stored (no run-time
/// conversion it needs; one that only makes it faster is fine).
fn compiles(
    k: &KernelDecl,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
) -> bool {
    k.statements.iter().enumerate().all(|(n, st)| {
        crate::lower::compile(&format!("{}_{n}", k.name.name), st, formats, dims)
            .is_ok_and(|c| c.conversions.iter().all(|v| !v.needed))
    })
}

/// The tensors of a kernel in the order their formats are tried: those
/// whose accesses a problem points at first; then, since a problem about a
/// whole statement usually blames a later operand against an earlier one,
/// the inputs from last to first, and the result last.
fn tensors_by_blame(k: &KernelDecl, problems: &[Span]) -> Vec<String> {
    let mut order: Vec<(bool, &crate::notation::Access)> = Vec::new();
    for st in &k.statements {
        let mut inputs: Vec<_> = st.rhs.accesses().into_iter().map(|a| (false, a)).collect();
        inputs.reverse();
        order.extend(inputs);
        order.push((true, &st.lhs));
    }
    let mut out: Vec<String> = Vec::new();
    let pointed = |a: &crate::notation::Access| {
        problems
            .iter()
            .any(|p| a.span.start <= p.start && p.end <= a.span.end)
    };
    for (_, a) in order
        .iter()
        .filter(|(_, a)| pointed(a))
        .chain(order.iter().filter(|(_, a)| !pointed(a)))
    {
        if !out.contains(&a.tensor) {
            out.push(a.tensor.clone());
        }
    }
    out
}

/// A format change that makes the kernel `name` compile with every
/// operand read as stored (when it is refused, or compiles only through a
/// run-time conversion), checked by compiling it and every other kernel
/// sharing the tensor.
#[salsa::tracked(returns(clone))]
pub fn suggestion<'db>(db: &'db dyn Db, file: SourceFile, name: Name<'db>) -> Option<Suggestion> {
    let Ok(resolved) = db::resolve_kernel(db, file, name) else {
        return None;
    };
    let spans: Vec<Span> = match db::compile_kernel(db, file, name) {
        Err(problems) => problems
            .iter()
            .filter(|p| p.in_kernel)
            .map(|p| p.span)
            .collect(),
        Ok(c) => c
            .statements
            .iter()
            .flat_map(|k| k.conversions.iter().filter(|c| c.needed).map(|c| c.span))
            .collect(),
    };
    if spans.is_empty() && db::compile_kernel(db, file, name).is_ok() {
        return None;
    }
    let kernel = db::kernel_decl(db, file, name).as_ref()?;
    let others: Vec<String> = db::kernel_names(db, file)
        .iter()
        .filter(|k| **k != kernel.name.name)
        .cloned()
        .collect();
    for tensor in tensors_by_blame(kernel, &spans) {
        let Some(current) = resolved.formats.get(&tensor) else {
            continue;
        };
        let elements = resolved.dims.get(&tensor).map_or(0, |d| d.iter().product());
        for alt in alternatives(current, current.order(), elements) {
            let (cand, fmt) = (alt.text, alt.format);
            let mut formats = resolved.formats.clone();
            formats.insert(tensor.clone(), fmt.clone());
            if !compiles(kernel, &formats, &resolved.dims) {
                continue;
            }
            let breaks_another = others.iter().any(|o| {
                let other = Name::new(db, o.clone());
                let (Ok(r), Ok(c), Some(k)) = (
                    db::resolve_kernel(db, file, other),
                    db::compile_kernel(db, file, other),
                    db::kernel_decl(db, file, other),
                ) else {
                    return false;
                };
                // A kernel that already converts an operand is no worse off.
                if !r.formats.contains_key(&tensor)
                    || c.statements
                        .iter()
                        .any(|s| s.conversions.iter().any(|v| v.needed))
                {
                    return false;
                }
                let mut f = r.formats.clone();
                f.insert(tensor.clone(), fmt.clone());
                !compiles(k, &f, &r.dims)
            });
            let copy = breaks_another.then(|| fresh_name(db, file, &tensor, &cand));
            return Some(Suggestion {
                kernel: kernel.name.name.clone(),
                tensor,
                format: source_syntax(&cand),
                copy,
            });
        }
    }
    None
}

/// `A` in CSC → `A_csc`, made unique among the file's declarations.
fn fresh_name(db: &dyn Db, file: SourceFile, tensor: &str, candidate: &str) -> String {
    let tag: String = candidate
        .split(['(', ':'])
        .next()
        .unwrap_or("copy")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let tag = if candidate.contains(':') {
        "t".to_string()
    } else {
        tag
    };
    let taken: Vec<String> = db::parse_file(db, file)
        .items
        .iter()
        .map(|it| match &it.kind {
            ItemKind::Format(f) => f.name.name.clone(),
            ItemKind::Tensor(t) => t.name.name.clone(),
            ItemKind::Kernel(k) => k.name.name.clone(),
        })
        .collect();
    let base = format!("{tensor}_{tag}");
    let mut name = base.clone();
    let mut n = 1;
    while taken.contains(&name) {
        n += 1;
        name = format!("{base}{n}");
    }
    name
}

impl Analysis {
    /// The suggestion for a kernel the compiler refuses, if one compiles.
    pub fn suggestion(&self, file: SourceFile, kernel: &str) -> Option<Suggestion> {
        suggestion(&self.db, file, Name::new(&self.db, kernel.to_string()))
    }

    /// The edit that applies a suggestion.
    pub fn fix(&self, file: SourceFile, s: &Suggestion) -> Option<QuickFix> {
        let text = self.text(file);
        let parsed = db::parse_file(&self.db, file);
        let (decl, at) = parsed.items.iter().find_map(|it| match &it.kind {
            ItemKind::Tensor(t) if t.name.name == s.tensor => Some((t, it.span.start)),
            _ => None,
        })?;
        let mut fspan = decl.format.span();
        // A preset's arguments (`BCSR(2)`) are part of what is replaced.
        if let crate::language::ast::FormatRef::Named { args, .. } = &decl.format {
            let rest = text.get(at + fspan.end..).unwrap_or("");
            if !args.is_empty() && rest.trim_start().starts_with('(') {
                if let Some(close) = rest.find(')') {
                    fspan = Span::new(fspan.start, fspan.end + close + 1);
                }
            }
        }
        match &s.copy {
            None => Some(QuickFix {
                title: format!("Store `{}` as {}", s.tensor, s.format),
                span: Span::new(at + fspan.start, at + fspan.end),
                replacement: s.format.clone(),
            }),
            Some(copy) => {
                // One edit over the kernel: the copy's declaration, then the
                // kernel with its uses of the tensor renamed.
                let (kernel, kat, kspan) = parsed.items.iter().find_map(|it| match &it.kind {
                    ItemKind::Kernel(k) if k.name.name == s.kernel => {
                        Some((k, it.span.start, it.span))
                    }
                    _ => None,
                })?;
                let decl_item = parsed.items.iter().find(|it| it.span.start == at)?;
                let mut copy_decl = text
                    .get(decl_item.span.start..decl_item.span.end)?
                    .to_string();
                copy_decl.replace_range(fspan.start..fspan.end, &s.format);
                let nspan = decl.name.span;
                copy_decl.replace_range(nspan.start..nspan.end, copy);
                let mut body = text.get(kspan.start..kspan.end)?.to_string();
                let mut uses: Vec<usize> = kernel
                    .statements
                    .iter()
                    .flat_map(|st| std::iter::once(&st.lhs).chain(st.rhs.accesses()))
                    .filter(|a| a.tensor == s.tensor)
                    .map(|a| a.span.start)
                    .collect();
                uses.sort_unstable_by(|a, b| b.cmp(a));
                for u in uses {
                    body.replace_range(u..u + s.tensor.len(), copy);
                }
                let _ = kat;
                Some(QuickFix {
                    title: format!(
                        "Declare `{copy}`, a copy of `{}` stored as {}, for kernel `{}`",
                        s.tensor, s.format, s.kernel
                    ),
                    span: kspan,
                    replacement: format!("{copy_decl}\n{body}"),
                })
            }
        }
    }

    /// Fixes for the diagnostic `message` reported at `offset`.
    pub fn quick_fixes(&self, file: SourceFile, offset: usize, message: &str) -> Vec<QuickFix> {
        self.diagnostics(file)
            .into_iter()
            .filter(|d| d.span.start == offset && d.message == message)
            .filter_map(|d| d.fix)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_syntax() {
        assert_eq!(
            source_syntax("dense,compressed:1,0"),
            "(dense, compressed) order (1, 0)"
        );
        assert_eq!(
            source_syntax("compressed(nonunique),singleton"),
            "(compressed(nonunique), singleton)"
        );
        assert_eq!(source_syntax("CSC"), "CSC");
    }
}
