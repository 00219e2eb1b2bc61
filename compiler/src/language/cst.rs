//! From the tree-sitter tree to the AST. Parsing never fails: whatever
//! parses becomes items, every ERROR or MISSING node a syntax error, and a
//! broken item is dropped while its neighbours survive.

use super::ast::*;
use crate::notation::{Access, Assignment, BinOp, Expr, Index, Span, MAX_EXPR_DEPTH};
use std::cell::RefCell;
use tree_sitter::{InputEdit, Node, ParseOptions, Parser, Point, Tree};

/// Parse `text` from scratch.
pub fn parse(text: &str) -> ParsedFile {
    match parse_incremental(text, None, &mut || false) {
        Some((parsed, _)) => parsed,
        None => ParsedFile {
            errors: vec![SyntaxError {
                span: Span::default(),
                message: "the parser gave up".into(),
            }],
            ..Default::default()
        },
    }
}

/// Parse `text`, reusing the tree of an earlier text where they agree: the
/// change between the two is found as the differing middle part, applied to
/// the old tree with `Tree::edit`, and tree-sitter reparses only around it.
/// `stop` is asked now and then during the parse; when it says yes the parse
/// ends with `None`.
pub fn parse_incremental(
    text: &str,
    old: Option<(&str, &Tree)>,
    stop: &mut dyn FnMut() -> bool,
) -> Option<(ParsedFile, Tree)> {
    let mut parser = Parser::new();
    if parser
        .set_language(&tree_sitter_tensor::LANGUAGE.into())
        .is_err()
    {
        let errors = vec![SyntaxError {
            span: Span::default(),
            message: "the tensor grammar failed to load".into(),
        }];
        return Some((
            ParsedFile {
                errors,
                ..Default::default()
            },
            parser.parse("", None)?,
        ));
    }
    let edited = old.map(|(old_text, tree)| {
        let mut tree = tree.clone();
        tree.edit(&edit_between(old_text, text));
        tree
    });
    let bytes = text.as_bytes();
    let mut progress = |_: &tree_sitter::ParseState| stop();
    let tree = parser.parse_with_options(
        &mut |at: usize, _: Point| bytes.get(at..).unwrap_or_default(),
        edited.as_ref(),
        Some(ParseOptions::new().progress_callback(&mut progress)),
    )?;
    let parsed = lower(text, &tree, stop)?;
    Some((parsed, tree))
}

/// The single edit that turns `old` into `new`: everything between their
/// common prefix and common suffix.
fn edit_between(old: &str, new: &str) -> InputEdit {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let mut start = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    while !old.is_char_boundary(start) || !new.is_char_boundary(start) {
        start -= 1;
    }
    let max_suffix = a.len().min(b.len()) - start;
    let mut suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    while !old.is_char_boundary(a.len() - suffix) || !new.is_char_boundary(b.len() - suffix) {
        suffix -= 1;
    }
    InputEdit {
        start_byte: start,
        old_end_byte: a.len() - suffix,
        new_end_byte: b.len() - suffix,
        start_position: point_at(a, start),
        old_end_position: point_at(a, a.len() - suffix),
        new_end_position: point_at(b, b.len() - suffix),
    }
}

/// Tree-sitter's point of a byte offset: rows end at `\n`, columns in bytes.
fn point_at(text: &[u8], at: usize) -> Point {
    let before = &text[..at];
    let row = before.iter().filter(|&&c| c == b'\n').count();
    let column = before.iter().rev().take_while(|&&c| c != b'\n').count();
    Point { row, column }
}

/// The AST and syntax errors of a parsed tree (`None` when `stop` says so:
/// a big file takes a while).
fn lower(text: &str, tree: &Tree, stop: &mut dyn FnMut() -> bool) -> Option<ParsedFile> {
    let mut out = ParsedFile::default();
    let root = tree.root_node();
    collect_errors(root, text, &mut out.errors);
    let mut cursor = root.walk();
    for (n, child) in root.named_children(&mut cursor).enumerate() {
        if n % 256 == 255 && stop() {
            return None;
        }
        if child.has_error() && child.kind() != "kernel_declaration" {
            continue;
        }
        if child.has_error() {
            explain_kernel_body(child, text, &mut out.errors);
        }
        let l = Lower {
            text,
            base: child.start_byte(),
            errors: RefCell::default(),
        };
        let kind = match child.kind() {
            "format_declaration" => l.format_decl(child).map(ItemKind::Format),
            "tensor_declaration" => l.tensor_decl(child).map(ItemKind::Tensor),
            "kernel_declaration" => l.kernel_decl(child).map(ItemKind::Kernel),
            _ => None,
        };
        out.errors.extend(l.errors.into_inner());
        if let Some(kind) = kind {
            out.items.push(Item {
                span: Span::new(child.start_byte(), child.end_byte()),
                kind,
            });
        }
    }
    Some(out)
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
            let mut snippet: String = first
                .chars()
                .take(30)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            if snippet.len() < bad.len() {
                snippet.push('…');
            }
            let message = if snippet.is_empty() {
                "syntax error".to_string()
            } else {
                format!("syntax error: unexpected `{snippet}`")
            };
            out.push(SyntaxError {
                span: Span::new(n.start_byte(), n.end_byte()),
                message,
            });
            continue;
        }
        if n.is_missing() {
            out.push(SyntaxError {
                span: Span::new(n.start_byte(), n.end_byte()),
                message: format!("syntax error: missing `{}`", n.kind()),
            });
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

/// The words that begin an item of a file (`grammar.js`).
const ITEM_KEYWORDS: &[&str] = &["format", "tensor", "kernel"];

/// Tree-sitter's errors in a kernel's body say only what text it could not
/// place (`unexpected `A(``); the command line's parser, which reads the
/// same statements, says why (a function call, an index that is a number,
/// an operator the notation has not). Where it finds an error, its first
/// stands for the body's errors, which are mostly that one's echoes.
fn explain_kernel_body(kernel: Node, text: &str, errors: &mut Vec<SyntaxError>) {
    let mut c = kernel.walk();
    let children: Vec<Node> = kernel.children(&mut c).collect();
    let brace = |n: &Node, kind: &str| n.kind() == kind && !n.is_missing();
    let Some(open) = children.iter().find(|n| brace(n, "{")) else {
        return;
    };
    let start = open.end_byte();
    let end = children
        .iter()
        .rev()
        .find(|n| brace(n, "}"))
        .map_or(kernel.end_byte(), |n| n.start_byte());
    let Some(body) = text.get(start..end) else {
        return;
    };
    let parsed = crate::notation::parse_kernel_body_at(body, start, ITEM_KEYWORDS);
    let Err(e) = parsed.statements else {
        return;
    };
    // Tree-sitter's errors from the next item on (a body not closed) are
    // that item's: kept.
    let inside = |s: &SyntaxError| s.span.start >= start && s.span.start <= parsed.end;
    let Some(first) = errors.iter().position(inside) else {
        return;
    };
    errors.retain(|s| !inside(s));
    errors.insert(
        first,
        SyntaxError {
            span: Span::new(e.offset, e.end),
            message: format!("syntax error: {}", e.message),
        },
    );
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
        Ident {
            name: self.text(n).to_string(),
            span: self.span(n),
        }
    }
    fn field(&self, n: Node<'t>, name: &str) -> Option<Node<'t>> {
        n.child_by_field_name(name)
    }
    fn fields(&self, n: Node<'t>, name: &str) -> Vec<Node<'t>> {
        let mut c = n.walk();
        n.children_by_field_name(name, &mut c).collect()
    }

    fn format_decl(&self, n: Node) -> Option<FormatDecl> {
        Some(FormatDecl {
            name: self.ident(self.field(n, "name")?),
            format: self.format(self.field(n, "format")?)?,
        })
    }

    fn format(&self, n: Node) -> Option<FormatRef> {
        match n.kind() {
            "format_ref" => Some(FormatRef::Named {
                name: self.ident(self.field(n, "name")?),
                args: self
                    .fields(n, "argument")
                    .into_iter()
                    .map(|a| self.text(a).to_string())
                    .collect(),
            }),
            "level_list" => {
                let levels = self
                    .fields(n, "level")
                    .into_iter()
                    .filter_map(|l| {
                        Some(Level {
                            name: self.ident(self.field(l, "name")?),
                            props: self
                                .fields(l, "property")
                                .into_iter()
                                .map(|p| self.text(p).split_whitespace().collect::<String>())
                                .collect(),
                            span: self.span(l),
                        })
                    })
                    .collect();
                let order = self.field(n, "order").map(|o| {
                    self.fields(o, "mode")
                        .into_iter()
                        .filter_map(|m| self.text(m).parse().ok())
                        .collect()
                });
                Some(FormatRef::Levels {
                    levels,
                    order,
                    span: self.span(n),
                })
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
                        Literal::Str(
                            t.get(1..t.len().saturating_sub(1))
                                .unwrap_or("")
                                .replace("\\\"", "\""),
                        )
                    }
                    "number" => Literal::Num(self.text(v).parse().unwrap_or(0.0)),
                    _ => Literal::Name(self.text(v).to_string()),
                };
                Some(Arg {
                    name: self.field(a, "name").map(|k| self.text(k).to_string()),
                    value,
                    span: self.span(a),
                })
            })
            .collect();
        Some(Source {
            kind: self.ident(self.field(n, "function")?),
            args,
            span: self.span(n),
        })
    }

    fn kernel_decl(&self, n: Node) -> Option<KernelDecl> {
        let name = self.ident(self.field(n, "name")?);
        let statements = self
            .fields(n, "statement")
            .into_iter()
            .filter(|s| !s.has_error())
            .filter_map(|s| self.assignment(s))
            .collect();
        Some(KernelDecl { name, statements })
    }

    fn assignment(&self, n: Node) -> Option<Assignment> {
        let lhs = self.access(self.field(n, "lhs")?)?;
        let accumulate = self
            .field(n, "operator")
            .is_some_and(|o| self.text(o) == "+=");
        let rhs = self.expr(self.field(n, "rhs")?, 0)?;
        Some(Assignment {
            lhs,
            accumulate,
            rhs,
            span: self.span(n),
        })
    }

    fn access(&self, n: Node) -> Option<Access> {
        let tensor = self.text(self.field(n, "tensor")?).to_string();
        let indices = self
            .fields(n, "index")
            .into_iter()
            .map(|i| Index {
                name: self.text(i).to_string(),
                span: self.span(i),
            })
            .collect();
        Some(Access {
            tensor,
            indices,
            span: self.span(n),
        })
    }

    /// The expression of node `n`, `depth` nodes below the statement's
    /// right-hand side; too deep a tree is a syntax error (and the
    /// statement is dropped) rather than a stack overflow.
    fn expr(&self, n: Node, depth: usize) -> Option<Expr> {
        if depth >= MAX_EXPR_DEPTH {
            let message = format!("expression nested too deeply: more than {MAX_EXPR_DEPTH} levels of operators, signs and parentheses");
            self.errors.borrow_mut().push(SyntaxError {
                span: Span::new(n.start_byte(), n.end_byte()),
                message,
            });
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
                Expr::Bin(
                    op,
                    Box::new(sub("left")?),
                    Box::new(sub("right")?),
                    self.span(n),
                )
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
        let f = parse(include_str!(
            "../../../tree-sitter-tensor/test/example.tensor"
        ));
        assert!(f.errors.is_empty(), "{:?}", f.errors);
        let names: Vec<&str> = f.items.iter().map(|i| i.name()).collect();
        assert!(names.contains(&"spmv") && names.contains(&"many") && names.contains(&"A"));
        let many = f.items.iter().find(|i| i.name() == "many").unwrap(); // ok: test code, a panic is a failed test
        let ItemKind::Kernel(k) = &many.kind else {
            panic!()
        };
        assert_eq!(k.statements.len(), 3);
        assert_eq!(
            k.statements[2].to_string(),
            "a = B(i,j) * C(i,j) - 2.5 * -D(i,j) + E(i,j)"
        );
    }

    #[test]
    fn broken_text_still_yields_items() {
        let f = parse("kernel a { y(i) = A(i,j) * \n}\nkernel b { z(i) = x(i) }\ntensor q : f64[3] @ sparse\n\u{0}\u{1}garbage @@@");
        assert!(!f.errors.is_empty());
        assert!(
            f.errors.iter().all(|e| !e.message.contains('\n')),
            "one line each: {:?}",
            f.errors
        );
        assert!(f.items.iter().any(|i| i.name() == "b"));
        assert!(f.items.iter().any(|i| i.name() == "q"));
    }

    /// Errors in a kernel's body say what the command line says of the
    /// same statement, once, where tree-sitter named only the text it
    /// could not place (`unexpected `A(``, then its echo at `)`).
    #[test]
    fn body_errors_are_explained_by_the_notation_parser() {
        let errors = |text: &str| -> Vec<(usize, String)> {
            let f = parse(text);
            f.errors
                .iter()
                .map(|e| (e.span.start, e.message.clone()))
                .collect()
        };
        let text =
            "tensor y : f64[3] @ dense\nkernel k {\n  // a comment\n  y(i) = sqrt(A(i,j))\n}\n";
        let got = errors(text);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, text.find("sqrt").unwrap()); // ok: test code
        assert!(
            got[0].1.starts_with("syntax error: `sqrt(...)` holds"),
            "{got:?}"
        );
        let text = "kernel k { y(i) = A(i,2) * x(j); z(i) = y(i) }";
        let got = errors(text);
        let index_error = "syntax error: expected an index variable, found `2`";
        let at = text.find('2').unwrap(); // ok: test code
        assert_eq!(got, [(at, index_error.to_string())]);
        // A body that runs into the next item: its `}` is missing where it
        // ends, and the next item's own error is still reported.
        let text =
            "kernel a { y(i) = x(i)\nkernel b { z(i) = x(i) w(i) }\ntensor q : f64[3] @ dense";
        let got = errors(text);
        assert_eq!(got[0].0, "kernel a { y(i) = x(i)".len(), "{got:?}");
        assert!(got[0].1.contains("missing `}`"), "{got:?}");
        assert!(got.len() >= 2, "{got:?}");
        let next = text.find("kernel b").unwrap(); // ok: test code
        assert!(got[1..].iter().all(|(at, _)| *at > next), "{got:?}");
        // Errors outside bodies are tree-sitter's, as before.
        let got = errors("tensor y : f64[3] @ \nkernel k { y(i) = x(i) }");
        let tree_sitter = |m: &str| m.starts_with("syntax error: unexpected `");
        assert!(
            !got.is_empty() && got.iter().all(|(_, m)| tree_sitter(m)),
            "{got:?}"
        );
    }

    #[test]
    fn deep_expressions_are_errors_not_overflows() {
        for body in [
            format!("{}x(i){}", "(".repeat(20_000), ")".repeat(20_000)),
            format!("{}x(i)", "-".repeat(20_000)),
            format!("x(i){}", " + x(i)".repeat(20_000)),
        ] {
            let f = parse(&format!(
                "kernel k {{ y(i) = {body} }}\nkernel ok {{ z(i) = x(i) }}"
            ));
            assert!(
                f.errors
                    .iter()
                    .any(|e| e.message.contains("more than 200 levels")),
                "{:?}",
                f.errors
            );
            assert!(f.items.iter().any(|i| i.name() == "ok"));
        }
    }

    /// Reparsing with the old tree gives what a fresh parse gives, for
    /// insertions, deletions and replacements, multi-byte text included.
    #[test]
    fn incremental_parse_equals_fresh_parse() {
        let texts = [
            "tensor x : f64[3] @ dense\nkernel a { y(i) = x(i) }\n",
            "tensor x : f64[3] @ dense\nkernel ab { y(i) = x(i) + z(i) }\n",
            "tensor x : f64[3] @ dense\n// é\u{2028}𝄞\nkernel ab { y(i) = x(i) + z(i) }\n",
            "tensor x : f64[3] @ dense\n// é\u{2028}𝄞\nkernel ab { y(i) = x(i) +  }\n",
            "kernel ab { y(i) = x(i) }",
            "",
            "@@@ kernel q { y(i) = x(i) }",
        ];
        let (mut old_text, mut old_tree) = (
            String::new(),
            parse_incremental("", None, &mut || false).unwrap().1, // ok: test code
        ); // ok: test code, a panic is a failed test
        for t in texts.iter().chain(texts.iter().rev()) {
            let (inc, tree) =
                parse_incremental(t, Some((&old_text, &old_tree)), &mut || false).unwrap(); // ok: test code, a panic is a failed test
            assert_eq!(inc, parse(t), "{t:?}");
            assert_eq!(
                tree.root_node().to_sexp(),
                parse_incremental(t, None, &mut || false)
                    .unwrap() // ok: test code
                    .1
                    .root_node()
                    .to_sexp()
            ); // ok: test code, a panic is a failed test
            (old_text, old_tree) = (t.to_string(), tree);
        }
    }

    #[test]
    fn a_parse_can_be_stopped() {
        let text = "kernel a { y(i) = x(i) }\n".repeat(20_000);
        assert!(parse_incremental(&text, None, &mut || true).is_none());
    }
}
