//! The `.tensor` language AST: format, tensor and kernel declarations.
//! Spans of an item's inner nodes are relative to the item's start, so an
//! edit elsewhere in the file leaves the item equal (and salsa reuses
//! everything computed from it).

use crate::notation::{Assignment, Span};

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A format as written after `@` or after `format NAME =`.
#[derive(Clone, Debug, PartialEq)]
pub enum FormatRef {
    /// A preset or a declared format: `CSR`, `BCSR(4)`, `myfmt`.
    Named { name: Ident, args: Vec<String> },
    /// An inline level list with an optional mode order.
    Levels {
        levels: Vec<Level>,
        order: Option<Vec<usize>>,
        span: Span,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    pub name: Ident,
    /// Flags and settings as written: `nonunique`, `W=1024`.
    pub props: Vec<String>,
    pub span: Span,
}

impl FormatRef {
    pub fn span(&self) -> Span {
        match self {
            FormatRef::Named { name, .. } => name.span,
            FormatRef::Levels { span, .. } => *span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct FormatDecl {
    pub name: Ident,
    pub format: FormatRef,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Dim {
    Num(usize, Span),
    Sym(Ident),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Str(String),
    Num(f64),
    Name(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: Option<String>,
    pub value: Literal,
    pub span: Span,
}

/// A data source: `mtx("m.mtx")`, `random(seed: 1, density: 0.1)`, ...
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    pub kind: Ident,
    pub args: Vec<Arg>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TensorDecl {
    pub name: Ident,
    pub elem: Ident,
    pub shape: Vec<Dim>,
    pub format: FormatRef,
    pub source: Option<Source>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct KernelDecl {
    pub name: Ident,
    pub statements: Vec<Assignment>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ItemKind {
    Format(FormatDecl),
    Tensor(TensorDecl),
    Kernel(KernelDecl),
}

/// One top-level item; `span` is absolute, everything inside relative to
/// `span.start`.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub span: Span,
    pub kind: ItemKind,
}

impl Item {
    pub fn name(&self) -> &str {
        match &self.kind {
            ItemKind::Format(f) => &f.name.name,
            ItemKind::Tensor(t) => &t.name.name,
            ItemKind::Kernel(k) => &k.name.name,
        }
    }
}

/// A problem found while parsing, with an absolute span.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SyntaxError {
    pub span: Span,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct ParsedFile {
    pub items: Vec<Item>,
    pub errors: Vec<SyntaxError>,
}

// Values hold f64 constants: equality is bitwise-enough for reuse decisions.
impl Eq for ParsedFile {}
impl Eq for Item {}
