//! The `.tensor` language: files of format, tensor and kernel declarations,
//! parsed with the tree-sitter grammar (tree-sitter-tensor), resolved and
//! compiled through a salsa database so that an edit recomputes only what
//! it touches.

pub mod ast;
pub mod background;
pub mod commands;
pub mod cst;
pub mod db;
pub mod resolve;
pub mod run;
pub mod sources;

pub use commands::{check_files, run_file};
