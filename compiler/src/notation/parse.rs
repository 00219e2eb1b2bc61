//! Parser for the command-line form of index notation:
//! `y(i) = A(i,j) * x(j)`, `a = B(i,j) * C(i,j)`, `y(i) += 2 * -x(i)`.
//! Errors carry the 1-based column of the offending character.
//! The same parser reads the statements of a `.tensor` kernel's body
//! (`parse_kernel_body_at`), so that a file's syntax errors there say what
//! the command line says of the same text.

use super::ast::*;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
#[error("column {col}: {message}")]
pub struct ParseError {
    pub col: usize,
    /// Byte offsets of the offending text (`end` == `offset` where it is
    /// the end of the input).
    pub offset: usize,
    pub end: usize,
    pub message: String,
}

/// What the lexer reads: one expression (the command line), or a
/// kernel's body in a `.tensor` file, which also has comments and `;`
/// between statements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Text {
    Expression,
    KernelBody,
    /// A kernel's body up to the next item, where its `}` is missing.
    UnclosedKernelBody,
}

impl Text {
    /// How an error names the end of the text.
    fn end(self) -> &'static str {
        match self {
            Text::Expression => "end of input",
            Text::KernelBody => "the end of the kernel",
            Text::UnclosedKernelBody => "the next item (the kernel's `}` is missing)",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(f64),
    Sym(&'static str),
    End,
    /// Text that is no token, last of the list: its error is reported
    /// when the parser reaches it, after any error in the text before.
    Bad(Box<ParseError>),
}

struct Lexer {
    toks: Vec<(Tok, Span)>,
}

impl Lexer {
    /// The tokens of `src`, ending at `End` or at the first `Bad`.
    fn run(src: &str, base: usize, text: Text) -> Vec<(Tok, Span)> {
        let mut lx = Lexer { toks: Vec::new() };
        match lx.tokens(src, base, text) {
            Ok(()) => lx.push(Tok::End, src.len() + base, src.len() + base),
            Err(e) => {
                let (s, end) = (e.offset, e.end);
                lx.push(Tok::Bad(Box::new(e)), s, end);
            }
        }
        lx.toks
    }

    fn tokens(&mut self, src: &str, base: usize, text: Text) -> Result<(), ParseError> {
        let lx = self;
        let b = src.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            let start = i;
            if text != Text::Expression && src[i..].starts_with("//") {
                i = src[i..].find('\n').map_or(b.len(), |n| i + n);
                continue;
            }
            if text != Text::Expression && src[i..].starts_with("/*") {
                let Some(n) = src[i + 2..].find("*/") else {
                    let at = Span::new(i + base, i + 2 + base);
                    return Err(err(
                        at,
                        src,
                        base,
                        "a comment `/*` is not closed by `*/`".into(),
                    ));
                };
                i += n + 4;
                continue;
            }
            if c.is_ascii_alphabetic() || c == b'_' {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                lx.push(
                    Tok::Ident(src[start..i].to_string()),
                    start + base,
                    i + base,
                );
            } else if c.is_ascii_digit()
                || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
            {
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    i += 1;
                }
                if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                    let mut j = i + 1;
                    if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                        j += 1;
                    }
                    if j < b.len() && b[j].is_ascii_digit() {
                        i = j;
                        while i < b.len() && b[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
                let v: f64 = src[start..i].parse().map_err(|_| {
                    err(
                        Span::new(start + base, i + base),
                        src,
                        base,
                        format!("bad number `{}`", &src[start..i]),
                    )
                })?;
                lx.push(Tok::Num(v), start + base, i + base);
            } else {
                let sym = match (c, b.get(i + 1)) {
                    (b'+', Some(b'=')) => "+=",
                    (b'+', _) => "+",
                    (b'-', _) => "-",
                    (b'*', _) => "*",
                    (b'=', _) => "=",
                    (b'(', _) => "(",
                    (b')', _) => ")",
                    (b',', _) => ",",
                    (b';', _) if text != Text::Expression => ";",
                    _ => {
                        let ch = src[i..].chars().next().unwrap_or('?');
                        return Err(err(
                            Span::new(i + base, i + ch.len_utf8() + base),
                            src,
                            base,
                            format!("unexpected character `{ch}`"),
                        ));
                    }
                };
                i += sym.len();
                lx.push(Tok::Sym(sym), start + base, i + base);
            }
        }
        Ok(())
    }

    fn push(&mut self, t: Tok, s: usize, e: usize) {
        self.toks.push((t, Span::new(s, e)));
    }
}

/// An error at `at` (absolute byte offsets) of `src`, which starts at
/// `base` of its text.
fn err(at: Span, src: &str, base: usize, message: String) -> ParseError {
    let local = at.start.saturating_sub(base).min(src.len());
    let col = src.get(..local).map_or(local, |s| s.chars().count()) + 1;
    ParseError {
        col,
        offset: at.start,
        end: at.end.max(at.start),
        message,
    }
}

struct Parser<'a> {
    src: &'a str,
    base: usize,
    text: Text,
    toks: Vec<(Tok, Span)>,
    at: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> &Tok {
        &self.toks[self.at].0
    }
    fn span(&self) -> Span {
        self.toks[self.at].1
    }
    fn bump(&mut self) -> (Tok, Span) {
        let t = self.toks[self.at].clone();
        if self.at + 1 < self.toks.len() {
            self.at += 1;
        }
        t
    }
    fn fail<T>(&self, what: &str) -> Result<T, ParseError> {
        let found = match self.peek() {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Num(v) => format!("`{v}`"),
            Tok::Sym(s) => format!("`{s}`"),
            Tok::End => self.text.end().to_string(),
            Tok::Bad(e) => return Err((**e).clone()),
        };
        Err(err(
            self.span(),
            self.src,
            self.base,
            format!("expected {what}, found {found}"),
        ))
    }
    fn expect(&mut self, sym: &'static str) -> Result<Span, ParseError> {
        if *self.peek() == Tok::Sym(sym) {
            Ok(self.bump().1)
        } else {
            self.fail(&format!("`{sym}`"))
        }
    }

    fn access(&mut self) -> Result<Access, ParseError> {
        let (name, span) = match self.peek() {
            Tok::Ident(n) => (n.clone(), self.span()),
            _ => return self.fail("a tensor name"),
        };
        self.bump();
        let mut indices = Vec::new();
        let mut end = span.end;
        if *self.peek() == Tok::Sym("(") {
            self.bump();
            if *self.peek() != Tok::Sym(")") {
                loop {
                    match self.peek() {
                        Tok::Ident(n) => indices.push(Index {
                            name: n.clone(),
                            span: self.span(),
                        }),
                        _ => return self.fail("an index variable"),
                    }
                    self.bump();
                    // `sqrt(A(i,j))`: an access inside an access reads as
                    // a function call, which index notation here has not.
                    if *self.peek() == Tok::Sym("(") {
                        let inner = &indices[indices.len() - 1].name;
                        return Err(err(
                            span,
                            self.src,
                            self.base,
                            format!("`{name}(...)` holds `{inner}(...)`: a tensor's indices are index variables, and there are no functions (only +, - and * of tensors and numbers)"),
                        ));
                    }
                    if *self.peek() == Tok::Sym(",") {
                        self.bump();
                    } else {
                        break;
                    }
                }
            }
            end = self.expect(")")?.end; // ok: the parser's own `expect`, which returns a Result
        }
        Ok(Access {
            tensor: name,
            indices,
            span: Span::new(span.start, end),
        })
    }

    /// Refuse a tree deeper than [`MAX_EXPR_DEPTH`], at the token that
    /// would make it so.
    fn check_depth(&self, depth: usize) -> Result<(), ParseError> {
        if depth > MAX_EXPR_DEPTH {
            return Err(err(
                self.span(),
                self.src,
                self.base,
                format!("expression nested too deeply: more than {MAX_EXPR_DEPTH} levels of operators, signs and parentheses"),
            ));
        }
        Ok(())
    }

    /// An expression and the depth of its tree; `nest` counts the
    /// parentheses and signs around it (the parser's own recursion).
    fn expr(&mut self, nest: usize) -> Result<(Expr, usize), ParseError> {
        let (mut lhs, mut depth) = self.term(nest)?;
        loop {
            let op = match self.peek() {
                Tok::Sym("+") => BinOp::Add,
                Tok::Sym("-") => BinOp::Sub,
                _ => return Ok((lhs, depth)),
            };
            self.check_depth(depth + 1)?;
            self.bump();
            let (rhs, d) = self.term(nest)?;
            depth = depth.max(d) + 1;
            self.check_depth(depth)?;
            let span = lhs.span().join(rhs.span());
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs), span);
        }
    }

    fn term(&mut self, nest: usize) -> Result<(Expr, usize), ParseError> {
        let (mut lhs, mut depth) = self.unary(nest)?;
        while *self.peek() == Tok::Sym("*") {
            self.check_depth(depth + 1)?;
            self.bump();
            let (rhs, d) = self.unary(nest)?;
            depth = depth.max(d) + 1;
            self.check_depth(depth)?;
            let span = lhs.span().join(rhs.span());
            lhs = Expr::Bin(BinOp::Mul, Box::new(lhs), Box::new(rhs), span);
        }
        Ok((lhs, depth))
    }

    fn unary(&mut self, nest: usize) -> Result<(Expr, usize), ParseError> {
        match self.peek().clone() {
            Tok::Sym("-") => {
                self.check_depth(nest + 1)?;
                let s = self.bump().1;
                let (inner, d) = self.unary(nest + 1)?;
                let span = s.join(inner.span());
                Ok((Expr::Neg(Box::new(inner), span), d + 1))
            }
            Tok::Sym("(") => {
                self.check_depth(nest + 1)?;
                let s = self.bump().1;
                let (inner, d) = self.expr(nest + 1)?;
                let e = self.expect(")")?; // ok: the parser's own `expect`, which returns a Result
                Ok((
                    match inner {
                        Expr::Bin(op, a, b, _) => Expr::Bin(op, a, b, s.join(e)),
                        other => other,
                    },
                    d,
                ))
            }
            Tok::Num(v) => {
                let s = self.bump().1;
                Ok((Expr::Const(v, s), 1))
            }
            Tok::Ident(_) => Ok((Expr::Access(self.access()?), 1)),
            _ => self.fail("an operand"),
        }
    }
}

/// Parse `lhs = rhs` or `lhs += rhs`. `base` is the byte offset of `src` in a
/// larger text (spans are reported relative to that text).
pub fn parse_assignment_at(src: &str, base: usize) -> Result<Assignment, ParseError> {
    let mut p = Parser::new(src, base, Text::Expression);
    let a = p.assignment()?;
    if *p.peek() != Tok::End {
        return p.fail("an operator or the end of the expression");
    }
    Ok(a)
}

/// A kernel's body as `parse_kernel_body_at` reads it.
pub struct KernelBody {
    pub statements: Result<Vec<Assignment>, ParseError>,
    /// Where the body ends: at the end of the text, or where the next item
    /// of the file begins inside it (its `}` is missing).
    pub end: usize,
}

/// Parse the statements of a `.tensor` kernel's body (the text between its
/// braces, at byte `base` of the file): assignments, each ended by `;` or
/// by the start of the next, with comments between tokens. One of
/// `item_keywords` followed by a name (`kernel b`), which no statement
/// can hold, begins the next item: the body was not closed and ends there.
pub fn parse_kernel_body_at(src: &str, base: usize, item_keywords: &[&str]) -> KernelBody {
    let mut p = Parser::new(src, base, Text::KernelBody);
    let item = p.toks.windows(2).position(|w| match (&w[0].0, &w[1].0) {
        (Tok::Ident(k), Tok::Ident(_)) => item_keywords.contains(&k.as_str()),
        _ => false,
    });
    let mut end = src.len() + base;
    if let Some(k) = item {
        end = p.toks[k].1.start;
        // Where the `}` belongs: after the body's last token.
        let close = k.checked_sub(1).map_or(base, |b| p.toks[b].1.end);
        p.toks.truncate(k);
        p.toks.push((Tok::End, Span::new(close, close)));
        p.text = Text::UnclosedKernelBody;
    }
    KernelBody {
        statements: p.statements(),
        end,
    }
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, base: usize, text: Text) -> Parser<'a> {
        Parser {
            src,
            base,
            text,
            toks: Lexer::run(src, base, text),
            at: 0,
        }
    }

    /// A kernel body's statements, up to `End`.
    fn statements(&mut self) -> Result<Vec<Assignment>, ParseError> {
        let mut statements = Vec::new();
        loop {
            while *self.peek() == Tok::Sym(";") {
                self.bump();
            }
            if *self.peek() == Tok::End {
                return match self.text {
                    Text::UnclosedKernelBody => Err(err(
                        self.span(),
                        self.src,
                        self.base,
                        "missing `}`: the kernel's body runs into the next item".into(),
                    )),
                    _ => Ok(statements),
                };
            }
            statements.push(self.assignment()?);
            if !matches!(self.peek(), Tok::Sym(";") | Tok::Ident(_) | Tok::End) {
                return self.fail("an operator, `;` or the next statement");
            }
        }
    }

    /// `lhs = rhs` or `lhs += rhs`, up to the first token that continues
    /// neither.
    fn assignment(&mut self) -> Result<Assignment, ParseError> {
        let lhs = self.access()?;
        let accumulate = match self.peek() {
            Tok::Sym("=") => false,
            Tok::Sym("+=") => true,
            _ => return self.fail("`=` or `+=`"),
        };
        self.bump();
        let (rhs, _) = self.expr(0)?;
        let span = lhs.span.join(rhs.span());
        check_indices(self.src, self.base, &lhs, &rhs)?;
        Ok(Assignment {
            lhs,
            accumulate,
            rhs,
            span,
        })
    }
}

pub fn parse_assignment(src: &str) -> Result<Assignment, ParseError> {
    parse_assignment_at(src, 0)
}

/// An output index used twice (`A(i,i)`) has no meaning in this notation.
fn check_indices(src: &str, base: usize, lhs: &Access, _rhs: &Expr) -> Result<(), ParseError> {
    for (n, i) in lhs.indices.iter().enumerate() {
        if lhs.indices[..n].iter().any(|j| j.name == i.name) {
            return Err(err(
                i.span,
                src,
                base,
                format!("index variable `{}` appears twice in the result", i.name),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spmv_and_prints_back() {
        let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap(); // ok: test code, a panic is a failed test
        assert_eq!(a.to_string(), "y(i) = A(i,j) * x(j)");
        assert_eq!(a.reduction_vars(), vec!["j".to_string()]);
    }

    #[test]
    fn precedence_and_unary() {
        let a = parse_assignment("a = -B(i) * 2 + C(i) - (D(i) - E(i))").unwrap(); // ok: test code, a panic is a failed test
        assert_eq!(a.to_string(), "a = -B(i) * 2 + C(i) - (D(i) - E(i))");
        let b = parse_assignment("y(i) += 1.5e2*x(i)").unwrap(); // ok: test code, a panic is a failed test
        assert!(b.accumulate);
    }

    #[test]
    fn errors_point_at_column() {
        let e = parse_assignment("y(i) = A(i,j) * * x(j)").unwrap_err();
        assert_eq!(e.col, 17);
        let e = parse_assignment("y(i) = A(i,j").unwrap_err();
        assert!(e.message.contains("`)`"), "{e}");
        let e = parse_assignment("y(i) A(i)").unwrap_err();
        assert_eq!(e.col, 6);
        let e = parse_assignment("A(i,i) = B(i)").unwrap_err();
        assert!(e.message.contains("twice"));
        let e = parse_assignment("y(i) = x(i) $").unwrap_err();
        assert_eq!(e.col, 13);
        let e = parse_assignment("").unwrap_err();
        assert!(e.message.contains("a tensor name"), "{e}");
        // A function call is named as one, at the function.
        let e = parse_assignment("y(i) = sqrt(A(i,j))").unwrap_err();
        assert_eq!(e.col, 8);
        assert!(e.message.contains("`sqrt(...)` holds `A(...)`"), "{e}");
        assert!(e.message.contains("no functions"), "{e}");
    }

    /// A `.tensor` kernel's body: statements ended by `;` or by the next,
    /// comments between tokens, spans at the body's place in its file.
    #[test]
    fn kernel_bodies_parse_as_statements() {
        let src = "y(i) = A(i,j) * x(j); // sum\n z(i) = /* twice */ 2 * y(i) w(i) += z(i)";
        let body = parse_kernel_body_at(src, 100, &["kernel"]);
        let statements = body.statements.unwrap(); // ok: test code, a panic is a failed test
        let text: Vec<String> = statements.iter().map(|a| a.to_string()).collect();
        assert_eq!(
            text,
            ["y(i) = A(i,j) * x(j)", "z(i) = 2 * y(i)", "w(i) += z(i)"]
        );
        assert_eq!(statements[1].span.start, 100 + src.find("z(i)").unwrap()); // ok: test code
        assert_eq!(body.end, 100 + src.len());
        // The command line has neither comments nor `;`.
        assert!(parse_assignment("y(i) = x(i); ").is_err());
        assert!(parse_assignment("y(i) = x(i) // c").is_err());
    }

    #[test]
    fn kernel_body_errors_name_the_problem() {
        let fails = |src: &str| {
            let e = parse_kernel_body_at(src, 10, &["kernel"])
                .statements
                .unwrap_err();
            (e.offset - 10, e.end - 10, e.message)
        };
        let (at, end, m) = fails("y(i) = sqrt(A(i,j))");
        assert_eq!((at, end), (7, 11));
        assert!(m.contains("`sqrt(...)` holds `A(...)`"), "{m}");
        let (at, _, m) = fails("y(i) = A(i,j) * x(j,");
        assert_eq!(at, 20);
        assert_eq!(m, "expected an index variable, found the end of the kernel");
        // Without `;`, `A(i,j) x(j)` is a statement and the start of the next.
        let (at, _, m) = fails("y(i) = A(i,j) x(j)");
        assert_eq!(at, 18);
        assert_eq!(m, "expected `=` or `+=`, found the end of the kernel");
        let (at, end, m) = fails("y(i) = A(i,j) / x(j)");
        assert_eq!((at, end, m.as_str()), (14, 15, "unexpected character `/`"));
        assert!(fails("y(i) = x(i) /* open").2.contains("not closed"));
        // An error before a character that is no token is the one reported.
        assert!(fails("y(i) = * x(i) $")
            .2
            .contains("expected an operand, found `*`"));
        assert!(parse_assignment("y(i) = * x(i) $")
            .unwrap_err()
            .message
            .contains("found `*`"));
    }

    /// `kernel b` inside a body begins the next item: the body ends there,
    /// and its `}` is missing after its last token.
    #[test]
    fn a_body_running_into_the_next_item_is_unclosed() {
        let src = "y(i) = x(i)\nkernel b { z(i) = x(i) }";
        let body = parse_kernel_body_at(src, 0, &["kernel", "tensor"]);
        assert_eq!(body.end, src.find("kernel").unwrap()); // ok: test code
        let e = body.statements.unwrap_err();
        assert_eq!(e.offset, "y(i) = x(i)".len());
        assert!(e.message.starts_with("missing `}`"), "{}", e.message);
        let e = parse_kernel_body_at("y(i) = x(i) *\ntensor t", 0, &["tensor"]);
        let m = e.statements.unwrap_err().message;
        assert!(
            m.contains("expected an operand, found the next item"),
            "{m}"
        );
        // A tensor named like a keyword is no item.
        let ok = parse_kernel_body_at("kernel(i) = x(i)", 0, &["kernel"]);
        assert!(ok.statements.is_ok());
    }

    #[test]
    fn depth_is_bounded() {
        let deep = |open: &str, close: &str, n: usize| {
            format!("y(i) = {}x(i){}", open.repeat(n), close.repeat(n))
        };
        for src in [
            deep("(", ")", 100_000),
            deep("-", "", 100_000),
            format!("y(i) = x(i){}", " + x(i)".repeat(100_000)),
        ] {
            let e = parse_assignment(&src).unwrap_err();
            assert!(e.message.contains("more than 200 levels"), "{e}");
        }
        assert!(parse_assignment(&deep("(", ")", 150)).is_ok());
        assert!(parse_assignment(&format!("y(i) = x(i){}", " * x(i)".repeat(150))).is_ok());
    }
}
