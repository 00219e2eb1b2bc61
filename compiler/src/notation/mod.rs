//! Tensor index notation: the AST shared by the command line and the
//! `.tensor` language, its parser for the command-line form, and the
//! placement of implicit reductions, and products multiplied out so sums
//! can be hoisted.

pub mod ast;
pub mod expand;
pub mod parse;
pub mod reduce;

pub use ast::*;
pub use parse::{parse_assignment, parse_kernel_body_at, ParseError};
