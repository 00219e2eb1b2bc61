//! From the tree-sitter tree to the AST. Parsing never fails: whatever
//! parses becomes items, every ERROR or MISSING node a syntax error, and a
//! broken item is dropped while its neighbours survive.

use super::ast::*;
use crate::notation::{Access, Assignment, BinOp, Expr, Index, Span, MAX_EXPR_DEPTH};
use std::cell::RefCell;
use tree_sitter::{Node, Parser};

pub fn parse(text: &str) -> ParsedFile {
    let mut parser = Parser::new();
    let mut out = ParsedFile::default();
    if parser.set_language(&tree_sitter_tensor::LANGUAGE.into()).is_err() {
        out.errors.push(SyntaxError { span: Span::default(), message: "the tensor grammar failed to load".into() });
        return out;
    }
    let Some(tree) = parser.parse(text, None) else {
        out.errors.push(SyntaxError { span: Span::default(), message: "the parser gave up".into() });
        return out;
    };
    let root = tree.root_node();
    collect_errors(root, text, &mut out.errors);
    let mut cursor = root.walk();
    for child in root.named_children(&mut cursor) {
        if child.has_error() && child.kind() != "kernel_declaration" {
            continue;
        }
        let l = Lower { text, base: child.start_byte(), errors: RefCell::default() };
        let kind = match child.kind() {
            "format_declaration" => l.format_decl(child).map(ItemKind::Format),
            "tensor_declaration" => l.tensor_decl(child).map(ItemKind::Tensor),
            "kernel_declaration" => l.kernel_decl(child).map(ItemKind::Kernel),
            _ => None,
        };
        out.errors.extend(l.errors.into_inner());
        if let Some(kind) = kind {
            out.items.push(Item { span: Span::new(child.start_byte(), child.end_byte()), kind });
        }
    }
    out
}

/// Every ERROR and MISSING node, in source order. An explicit stack rather
/// than recursion: a pathological text nests nodes thousands deep.
fn collect_errors(root: Node, text: &str, out: &mut Vec<SyntaxError>) {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.is_error() {
            // The first line of the text at fault, shortened: a message
            // stays on one line.
            let bad = text.get(n.start_byte()..n.end_byte()).unwrap_or("").trim();
            let first = bad.lines().next().unwrap_or("").trim();
            let mut snippet: String = first.chars().take(30).map(|c| if c.is_control() { ' ' } else { c }).collect();
            if snippet.len() < bad.len() {
                snippet.push('…');
            }
            let message = if snippet.is_empty() { "syntax error".to_string() } else { format!("syntax error: unexpected `{snippet}`") };
            out.push(SyntaxError { span: Span::new(n.start_byte(), n.end_byte()), message });
            continue;
        }
        if n.is_missing() {
            out.push(SyntaxError { span: Span::new(n.start_byte(), n.end_byte()), message: format!("syntax error: missing `{}`", n.kind()) });
            continue;
        }
        if !n.has_error() {
            continue;
        }
        let mut c = n.walk();
        let children: Vec<Node> = n.children(&mut c).collect();
        stack.extend(children.into_iter().rev());
    }
}

/// Lowering of one item; spans relative to the item's start.
struct Lower<'t> {
    text: &'t str,
    base: usize,
    /// Problems found while lowering (absolute spans).
    errors: RefCell<Vec<SyntaxError>>,
}

impl<'t> Lower<'t> {
    fn span(&self, n: Node) -> Span {
        Span::new(n.start_byte() - self.base, n.end_byte() - self.base)
    }
    fn text(&self, n: Node) -> &'t str {
        self.text.get(n.start_byte()..n.end_byte()).unwrap_or("")
    }
    fn ident(&self, n: Node) -> Ident {
        Ident { name: self.text(n).to_string(), span: self.span(n) }
    }
    fn field(&self, n: Node<'t>, name: &str) -> Option<Node<'t>> {
        n.child_by_field_name(name)
    }
    fn fields(&self, n: Node<'t>, name: &str) -> Vec<Node<'t>> {
        let mut c = n.walk();
        n.children_by_field_name(name, &mut c).collect()
    }

    fn format_decl(&self, n: Node) -> Option<FormatDecl> {
        Some(FormatDecl { name: self.ident(self.field(n, "name")?), format: self.format(self.field(n, "format")?)? })
    }

    fn format(&self, n: Node) -> Option<FormatRef> {
        match n.kind() {
            "format_ref" => Some(FormatRef::Named {
                name: self.ident(self.field(n, "name")?),
                args: self.fields(n, "argument").into_iter().map(|a| self.text(a).to_string()).collect(),
            }),
            "level_list" => {
                let levels = self
                    .fields(n, "level")
                    .into_iter()
                    .filter_map(|l| {
                        Some(Level {
                            name: self.ident(self.field(l, "name")?),
                            props: self.fields(l, "property").into_iter().map(|p| self.text(p).split_whitespace().collect::<String>()).collect(),
                            span: self.span(l),
                        })
                    })
                    .collect();
                let order = self.field(n, "order").map(|o| self.fields(o, "mode").into_iter().filter_map(|m| self.text(m).parse().ok()).collect());
                Some(FormatRef::Levels { levels, order, span: self.span(n) })
            }
            _ => None,
        }
    }

    fn tensor_decl(&self, n: Node) -> Option<TensorDecl> {
        let shape = self.field(n, "shape")?;
        let dims = self
            .fields(shape, "dimension")
            .into_iter()
            .map(|d| match d.kind() {
                "number" => Dim::Num(self.text(d).parse().unwrap_or(0), self.span(d)),
                _ => Dim::Sym(self.ident(d)),
            })
            .collect();
        let source = self.field(n, "source").map(|s| self.source(s));
        Some(TensorDecl {
            name: self.ident(self.field(n, "name")?),
            elem: self.ident(self.field(n, "type")?),
            shape: dims,
            format: self.format(self.field(n, "format")?)?,
            source: source.flatten(),
        })
    }

    fn source(&self, n: Node) -> Option<Source> {
        let args = self
            .fields(n, "argument")
            .into_iter()
            .filter_map(|a| {
                let v = self.field(a, "value")?;
                let value = match v.kind() {
                    "string" => {
                        let t = self.text(v);
                        Literal::Str(t.get(1..t.len().saturating_sub(1)).unwrap_or("").replace("\\\"", "\""))
                    }
                    "number" => Literal::Num(self.text(v).parse().unwrap_or(0.0)),
                    _ => Literal::Name(self.text(v).to_string()),
                };
                Some(Arg { name: self.field(a, "name").map(|k| self.text(k).to_string()), value, span: self.span(a) })
            })
            .collect();
        Some(Source { kind: self.ident(self.field(n, "function")?), args, span: self.span(n) })
    }

    fn kernel_decl(&self, n: Node) -> Option<KernelDecl> {
        let name = self.ident(self.field(n, "name")?);
        let statements = self.fields(n, "statement").into_iter().filter(|s| !s.has_error()).filter_map(|s| self.assignment(s)).collect();
        Some(KernelDecl { name, statements })
    }

    fn assignment(&self, n: Node) -> Option<Assignment> {
        let lhs = self.access(self.field(n, "lhs")?)?;
        let accumulate = self.field(n, "operator").is_some_and(|o| self.text(o) == "+=");
        let rhs = self.expr(self.field(n, "rhs")?, 0)?;
        Some(Assignment { lhs, accumulate, rhs, span: self.span(n) })
    }

    fn access(&self, n: Node) -> Option<Access> {
        let tensor = self.text(self.field(n, "tensor")?).to_string();
        let indices = self.fields(n, "index").into_iter().map(|i| Index { name: self.text(i).to_string(), span: self.span(i) }).collect();
        Some(Access { tensor, indices, span: self.span(n) })
    }

    /// The expression of node `n`, `depth` nodes below the statement's
    /// right-hand side; too deep a tree is a syntax error (and the
    /// statement is dropped) rather than a stack overflow.
    fn expr(&self, n: Node, depth: usize) -> Option<Expr> {
        if depth >= MAX_EXPR_DEPTH {
            let message = format!("expression nested too deeply: more than {MAX_EXPR_DEPTH} levels of operators, signs and parentheses");
            self.errors.borrow_mut().push(SyntaxError { span: Span::new(n.start_byte(), n.end_byte()), message });
            return None;
        }
        let sub = |field: &str| self.expr(self.field(n, field)?, depth + 1);
        Some(match n.kind() {
            "access" => Expr::Access(self.access(n)?),
            "number" => Expr::Const(self.text(n).parse().ok()?, self.span(n)),
            "parenthesized_expression" => sub("expression")?,
            "unary_expression" => Expr::Neg(Box::new(sub("operand")?), self.span(n)),
            "binary_expression" => {
                let op = match self.text(self.field(n, "operator")?) {
                    "+" => BinOp::Add,
                    "-" => BinOp::Sub,
                    _ => BinOp::Mul,
                };
                Expr::Bin(op, Box::new(sub("left")?), Box::new(sub("right")?), self.span(n))
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_file_lowers() {
        let f = parse(include_str!("../../../tree-sitter-tensor/test/example.tensor"));
        assert!(f.errors.is_empty(), "{:?}", f.errors);
        let names: Vec<&str> = f.items.iter().map(|i| i.name()).collect();
        assert!(names.contains(&"spmv") && names.contains(&"many") && names.contains(&"A"));
        let many = f.items.iter().find(|i| i.name() == "many").unwrap();
        let ItemKind::Kernel(k) = &many.kind else { panic!() };
        assert_eq!(k.statements.len(), 3);
        assert_eq!(k.statements[2].to_string(), "a = B(i,j) * C(i,j) - 2.5 * -D(i,j) + E(i,j)");
    }

    #[test]
    fn broken_text_still_yields_items() {
        let f = parse("kernel a { y(i) = A(i,j) * \n}\nkernel b { z(i) = x(i) }\ntensor q : f64[3] @ sparse\n\u{0}\u{1}garbage @@@");
        assert!(!f.errors.is_empty());
        assert!(f.errors.iter().all(|e| !e.message.contains('\n')), "one line each: {:?}", f.errors);
        assert!(f.items.iter().any(|i| i.name() == "b"));
        assert!(f.items.iter().any(|i| i.name() == "q"));
    }

    #[test]
    fn deep_expressions_are_errors_not_overflows() {
        for body in [format!("{}x(i){}", "(".repeat(20_000), ")".repeat(20_000)), format!("{}x(i)", "-".repeat(20_000)), format!("x(i){}", " + x(i)".repeat(20_000))] {
            let f = parse(&format!("kernel k {{ y(i) = {body} }}\nkernel ok {{ z(i) = x(i) }}"));
            assert!(f.errors.iter().any(|e| e.message.contains("more than 200 levels")), "{:?}", f.errors);
            assert!(f.items.iter().any(|i| i.name() == "ok"));
        }
    }
}
