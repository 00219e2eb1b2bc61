//! Hovers: an index variable shows its merge lattice and how each level is
//! accessed; a tensor its format, levels, shape and data; a format its
//! per-level table and the arrays it builds for a small example.

use super::kernel_facts::{var_facts, VarFacts};
use super::markdown::escape;
use super::Analysis;
use crate::coo::CooTensor;
use crate::format::level::{Assembly, Iteration};
use crate::format::{Registry, TensorFormat};
use crate::language::ast::*;
use crate::language::db::{self, Db, Name, SourceFile};
use crate::language::resolve::{tensor_format, Scope};
use crate::notation::Span;
use std::fmt::Write;

#[derive(Clone, Debug, PartialEq)]
pub struct HoverResult {
    pub markdown: String,
    pub span: Span,
}

fn inside(s: Span, base: usize, offset: usize) -> bool {
    s.start + base <= offset && offset <= s.end + base
}

fn shifted(s: Span, base: usize) -> Span {
    Span::new(s.start + base, s.end + base)
}

impl Analysis {
    pub fn hover(&self, file: SourceFile, offset: usize) -> Option<HoverResult> {
        let parsed = db::parse_file(&self.db, file);
        let decls = db::declarations(&self.db, file);
        let scope = Scope::new(&decls.items);
        let item = parsed
            .items
            .iter()
            .find(|it| it.span.start <= offset && offset <= it.span.end)?;
        let base = item.span.start;
        match &item.kind {
            ItemKind::Kernel(k) => {
                for (n, st) in k.statements.iter().enumerate() {
                    for acc in std::iter::once(&st.lhs).chain(st.rhs.accesses()) {
                        for idx in &acc.indices {
                            if inside(idx.span, base, offset) {
                                let md = self.var_hover(file, &k.name.name, n, &idx.name, st)?;
                                return Some(HoverResult {
                                    markdown: md,
                                    span: shifted(idx.span, base),
                                });
                            }
                        }
                        let name_span =
                            Span::new(acc.span.start, acc.span.start + acc.tensor.len());
                        if inside(name_span, base, offset) {
                            let (decl, at) = scope.tensors.get(&acc.tensor)?;
                            return Some(HoverResult {
                                markdown: self.tensor_hover(file, decl, *at, &scope),
                                span: shifted(name_span, base),
                            });
                        }
                    }
                }
                None
            }
            ItemKind::Tensor(t) => {
                if inside(t.format.span(), base, offset) {
                    return Some(HoverResult {
                        markdown: format_hover(&t.format, t.shape.len(), &scope, base),
                        span: shifted(t.format.span(), base),
                    });
                }
                Some(HoverResult {
                    markdown: self.tensor_hover(file, t, base, &scope),
                    span: shifted(t.name.span, base),
                })
            }
            ItemKind::Format(f) => {
                let order = match &f.format {
                    FormatRef::Levels { levels, .. } => levels.len(),
                    FormatRef::Named { .. } => 2,
                };
                Some(HoverResult {
                    markdown: format_hover(&f.format, order, &scope, base),
                    span: shifted(f.name.span, base),
                })
            }
        }
    }

    fn var_hover(
        &self,
        file: SourceFile,
        kernel: &str,
        statement: usize,
        var: &str,
        st: &crate::notation::Assignment,
    ) -> Option<String> {
        let name = Name::new(&self.db, kernel.to_string());
        let mut md = format!("**index `{var}`** of `{st}`\n\n");
        match db::compile_kernel(&self.db, file, name) {
            Err(ps) => {
                let _ = writeln!(
                    md,
                    "not compiled: {}",
                    escape(
                        &ps.iter()
                            .map(|p| p.message.clone())
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                );
            }
            Ok(c) => {
                let kernel = c.statements.get(statement)?;
                for conv in &kernel.conversions {
                    let _ = writeln!(
                        md,
                        "reads `{}` from a copy converted to {} before each run\n",
                        conv.source,
                        escape(&conv.format_text)
                    );
                }
                if let Some((_, row)) = kernel.workspace().filter(|(v, _)| v == var) {
                    let _ = writeln!(md, "{}\n", escape(&row));
                }
                md.push_str(&var_markdown(var, &var_facts(kernel, var)));
            }
        }
        Some(md)
    }

    fn tensor_hover(&self, file: SourceFile, t: &TensorDecl, base: usize, scope: &Scope) -> String {
        let dims: Vec<String> = t
            .shape
            .iter()
            .map(|d| match d {
                Dim::Num(n, _) => n.to_string(),
                Dim::Sym(s) => s.name.clone(),
            })
            .collect();
        // Code spans: `f64[N, N]` outside one reads as a markdown link.
        let mut md = format!(
            "**tensor `{}`** : `{}[{}]`\n\n",
            t.name.name,
            t.elem.name,
            dims.join(", ")
        );
        // The data and its picture first (what people look at), then the
        // format's level table.
        if let Some(src) = &t.source {
            if let Some(path) = crate::language::sources::file_argument(src) {
                let _ = write!(md, "data: `{}({path:?})`", src.kind.name);
                let dir = file
                    .path(&self.db)
                    .parent()
                    .map(std::path::Path::to_path_buf)
                    .unwrap_or_default();
                match crate::language::sources::load_file(
                    &self.db,
                    self.db.data_file(&dir.join(path)),
                ) {
                    Ok(data) => {
                        let dims: Vec<String> = data.dims.iter().map(|d| d.to_string()).collect();
                        let _ = writeln!(
                            md,
                            ": {}, {} stored entries\n",
                            dims.join(" × "),
                            data.nnz()
                        );
                        if let Some(img) = super::picture::sparsity_markdown(&t.name.name, &data) {
                            // A paragraph of its own: clients that cannot
                            // draw images drop the line.
                            let _ = writeln!(md, "{img}\n");
                        }
                    }
                    Err(e) => {
                        let _ = writeln!(md, ": {}\n", escape(&e));
                    }
                }
            } else {
                let _ = writeln!(md, "data: generated by `{}(...)`\n", src.kind.name);
            }
        }
        match tensor_format(t, scope, base, &Registry::builtin()) {
            Ok(f) => md.push_str(&level_table(&f)),
            Err(p) => {
                let _ = writeln!(md, "format error: {}", escape(&p.message));
            }
        }
        md
    }
}

/// An index variable's loop order, the hidden variables doing its work,
/// their lattices and strategies, and the loops that visit them.
fn var_markdown(var: &str, f: &VarFacts) -> String {
    let mut md = String::new();
    for order in &f.orders {
        let _ = writeln!(md, "loop order: `{}`\n", order.join(" → "));
    }
    if !f.related.is_empty() {
        let _ = writeln!(md, "the loops of `{var}` run over hidden variables:\n");
        for r in &f.related {
            let _ = writeln!(md, "- `{}`: {}", r.name, r.why);
        }
        md.push('\n');
    }
    for p in &f.plans {
        let _ = writeln!(md, "```text\n{p}```");
    }
    if !f.loops.is_empty() {
        let names: Vec<String> = std::iter::once(var.to_string())
            .chain(f.related.iter().map(|r| r.name.clone()))
            .map(|n| format!("`{n}`"))
            .collect();
        let _ = writeln!(md, "\nloops over {}:\n```c", names.join(", "));
        for l in &f.loops {
            let _ = writeln!(md, "{}{}", "  ".repeat(l.depth), l.header);
        }
        md.push_str("```\n");
    }
    if let Some(shared) = &f.shared {
        let _ = writeln!(md, "\n{shared}");
    }
    md
}

/// Capabilities and properties of each level, as a markdown table.
pub fn level_table(f: &TensorFormat) -> String {
    let mut md = format!("format **{}** (`{}`)\n\n| level | format | iteration | locate | assembly | properties |\n|---|---|---|---|---|---|\n", escape(&f.display_name()), f.spec());
    for (k, l) in f.levels.iter().enumerate() {
        let it = match l.iteration() {
            Iteration::CoordValue(_) => "coordinate value",
            Iteration::CoordPosition(_) => "coordinate position",
        };
        let asm = match l.assembly() {
            Assembly::Insert(_) => "insert",
            Assembly::Append(_) => "append",
            Assembly::None => "—",
        };
        let var = match f.map.level_var(k) {
            crate::format::LevelVar::Dim(d) => format!("dim {d}"),
            crate::format::LevelVar::Hidden(h) => format!("hidden `{h}`"),
        };
        let _ = writeln!(
            md,
            "| {} ({var}) | `{}` | {it} | {} | {asm} | {} |",
            k + 1,
            l.spec(),
            if l.locate().is_some() { "yes" } else { "no" },
            escape(&l.properties().to_string())
        );
    }
    md
}

/// A format's levels and the arrays it builds for a small example.
fn format_hover(f: &FormatRef, order: usize, scope: &Scope, base: usize) -> String {
    let text = match crate::language::resolve::format_text(f, scope, base, 0) {
        Ok(t) => t,
        Err(p) => return escape(&p.message),
    };
    let fmt = match crate::format::parse_format(&text, order, &Registry::builtin()) {
        Ok(f) => f,
        Err(e) => return format!("format error: {}", escape(&e.to_string())),
    };
    let mut md = level_table(&fmt);
    md.push_str(&example(&fmt));
    md
}

/// The coordinate hierarchy of a small example tensor in this format.
fn example(f: &TensorFormat) -> String {
    let order = f.order();
    let dims = vec![4usize; order];
    let mut t = CooTensor::new(dims.clone());
    let pts: &[&[u32]] = match order {
        1 => &[&[0], &[2], &[3]],
        2 => &[&[0, 0], &[0, 2], &[1, 1], &[3, 0], &[3, 3]],
        _ => &[],
    };
    for (n, c) in pts.iter().enumerate() {
        t.push(c, (n + 1) as f64);
    }
    if order > 2 {
        let mut c = vec![0u32; order];
        t.push(&c, 1.0);
        c[order - 1] = 2;
        t.push(&c, 2.0);
        c[0] = 3;
        t.push(&c, 3.0);
    }
    let packed = match crate::storage::pack("T", &t, f) {
        Ok(p) => p,
        Err(e) => return format!("\n(example: {e})\n"),
    };
    let mut md = String::from("\nexample (entries ");
    let ents: Vec<String> = (0..t.nnz())
        .map(|e| format!("{:?}={}", t.coord(e), t.vals[e]))
        .collect();
    let _ = write!(md, "{}):\n```text\n", ents.join(" "));
    for (k, l) in packed.levels.iter().enumerate() {
        let mut parts: Vec<String> = l.params.iter().map(|(n, v)| format!("{n}={v}")).collect();
        parts.extend(l.arrays.iter().map(|(n, v)| format!("{n}={v:?}")));
        let _ = writeln!(
            md,
            "level {} {}: {}",
            k + 1,
            f.levels[k].spec(),
            if parts.is_empty() {
                "(implicit)".into()
            } else {
                parts.join("  ")
            }
        );
    }
    let _ = writeln!(md, "vals = {:?}\n```", packed.vals);
    md
}
