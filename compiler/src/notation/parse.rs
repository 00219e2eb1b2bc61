//! Parser for the command-line form of index notation:
//! `y(i) = A(i,j) * x(j)`, `a = B(i,j) * C(i,j)`, `y(i) += 2 * -x(i)`.
//! Errors carry the 1-based column of the offending character.

use super::ast::*;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
#[error("column {col}: {message}")]
pub struct ParseError {
    pub col: usize,
    pub offset: usize,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(f64),
    Sym(&'static str),
    End,
}

struct Lexer {
    toks: Vec<(Tok, Span)>,
}

impl Lexer {
    fn run(src: &str, base: usize) -> Result<Vec<(Tok, Span)>, ParseError> {
        let mut lx = Lexer { toks: Vec::new() };
        let b = src.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            let start = i;
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
                        start + base,
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
                    _ => {
                        let ch = src[i..].chars().next().unwrap_or('?');
                        return Err(err(
                            i + base,
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
        lx.push(Tok::End, b.len() + base, b.len() + base);
        Ok(lx.toks)
    }

    fn push(&mut self, t: Tok, s: usize, e: usize) {
        self.toks.push((t, Span::new(s, e)));
    }
}

fn err(offset: usize, src: &str, base: usize, message: String) -> ParseError {
    let local = offset.saturating_sub(base).min(src.len());
    let col = src[..local].chars().count() + 1;
    ParseError {
        col,
        offset,
        message,
    }
}

struct Parser<'a> {
    src: &'a str,
    base: usize,
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
            Tok::End => "end of input".to_string(),
        };
        Err(err(
            self.span().start,
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
                            span.start,
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
                self.span().start,
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
    let toks = Lexer::run(src, base)?;
    let mut p = Parser {
        src,
        base,
        toks,
        at: 0,
    };
    let lhs = p.access()?;
    let accumulate = match p.peek() {
        Tok::Sym("=") => false,
        Tok::Sym("+=") => true,
        _ => return p.fail("`=` or `+=`"),
    };
    p.bump();
    let (rhs, _) = p.expr(0)?;
    if *p.peek() != Tok::End {
        return p.fail("an operator or the end of the expression");
    }
    let span = lhs.span.join(rhs.span());
    check_indices(src, base, &lhs, &rhs)?;
    Ok(Assignment {
        lhs,
        accumulate,
        rhs,
        span,
    })
}

pub fn parse_assignment(src: &str) -> Result<Assignment, ParseError> {
    parse_assignment_at(src, 0)
}

/// An output index used twice (`A(i,i)`) has no meaning in this notation.
fn check_indices(src: &str, base: usize, lhs: &Access, _rhs: &Expr) -> Result<(), ParseError> {
    for (n, i) in lhs.indices.iter().enumerate() {
        if lhs.indices[..n].iter().any(|j| j.name == i.name) {
            return Err(err(
                i.span.start,
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
