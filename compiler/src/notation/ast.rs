//! The index-notation AST. Spans are byte ranges into the source text, so
//! the language server can point at any node.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
    pub fn join(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Index {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub tensor: String,
    pub indices: Vec<Index>,
    pub span: Span,
}

impl Access {
    pub fn vars(&self) -> Vec<&str> {
        self.indices.iter().map(|i| i.name.as_str()).collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
}

/// The deepest expression tree either parser builds (operators, unary
/// minus and parentheses each add a level). Every walk over an [`Expr`] is
/// recursive, and so is dropping one: bounding the depth where trees are
/// built keeps hostile input (`((((...` or `- - - ...` or a sum of
/// thousands of terms) from overflowing the stack anywhere downstream.
pub const MAX_EXPR_DEPTH: usize = 200;

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Access(Access),
    Const(f64, Span),
    Neg(Box<Expr>, Span),
    Bin(BinOp, Box<Expr>, Box<Expr>, Span),
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Access(a) => a.span,
            Expr::Const(_, s) | Expr::Neg(_, s) | Expr::Bin(_, _, _, s) => *s,
        }
    }

    /// Every access, left to right.
    pub fn accesses(&self) -> Vec<&Access> {
        let mut out = Vec::new();
        fn go<'a>(e: &'a Expr, out: &mut Vec<&'a Access>) {
            match e {
                Expr::Access(a) => out.push(a),
                Expr::Const(..) => {}
                Expr::Neg(x, _) => go(x, out),
                Expr::Bin(_, a, b, _) => {
                    go(a, out);
                    go(b, out);
                }
            }
        }
        go(self, &mut out);
        out
    }

    /// Index variables in order of first appearance.
    pub fn vars(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in self.accesses() {
            for i in &a.indices {
                if !out.contains(&i.name) {
                    out.push(i.name.clone());
                }
            }
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub lhs: Access,
    /// `+=` rather than `=`.
    pub accumulate: bool,
    pub rhs: Expr,
    pub span: Span,
}

impl Assignment {
    /// Index variables that appear only on the right: summed over.
    pub fn reduction_vars(&self) -> Vec<String> {
        let free = self.lhs.vars();
        self.rhs
            .vars()
            .into_iter()
            .filter(|v| !free.contains(&v.as_str()))
            .collect()
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.indices.is_empty() {
            return write!(f, "{}", self.tensor);
        }
        write!(f, "{}({})", self.tensor, self.vars().join(","))
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn prec(e: &Expr) -> u8 {
            match e {
                Expr::Bin(BinOp::Add | BinOp::Sub, ..) => 1,
                Expr::Bin(BinOp::Mul, ..) => 2,
                _ => 3,
            }
        }
        match self {
            Expr::Access(a) => write!(f, "{a}"),
            Expr::Const(v, _) => write!(f, "{v}"),
            Expr::Neg(x, _) => {
                if prec(x) < 3 {
                    write!(f, "-({x})")
                } else {
                    write!(f, "-{x}")
                }
            }
            Expr::Bin(op, a, b, _) => {
                let (p, sym) = match op {
                    BinOp::Add => (1, "+"),
                    BinOp::Sub => (1, "-"),
                    BinOp::Mul => (2, "*"),
                };
                let wrap = |e: &Expr, right: bool| {
                    if prec(e) < p || (right && prec(e) == p && *op != BinOp::Mul) {
                        format!("({e})")
                    } else {
                        format!("{e}")
                    }
                };
                write!(f, "{} {sym} {}", wrap(a, false), wrap(b, true))
            }
        }
    }
}

impl fmt::Display for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.lhs,
            if self.accumulate { "+=" } else { "=" },
            self.rhs
        )
    }
}
