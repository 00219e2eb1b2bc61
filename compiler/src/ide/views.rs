//! Views of a kernel's generated artefacts, for the editor's side panes
//! (in the style of rust-analyzer's view requests).

use super::Analysis;
use crate::language::db::{self, Name, SourceFile};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    C,
    Ir,
    Lattice,
    Graph,
    /// Cranelift's machine code.
    Asm,
}

impl View {
    pub fn parse(s: &str) -> Option<View> {
        match s.to_ascii_lowercase().as_str() {
            "c" => Some(View::C),
            "ir" => Some(View::Ir),
            "lattice" | "lattices" => Some(View::Lattice),
            "graph" | "iteration-graph" => Some(View::Graph),
            "asm" | "assembly" => Some(View::Asm),
            _ => None,
        }
    }
}

impl Analysis {
    pub fn view(&self, file: SourceFile, kernel: &str, view: View) -> Result<String, String> {
        let name = Name::new(&self.db, kernel.to_string());
        if view == View::C {
            return db::emitted_c(&self.db, file, name).clone();
        }
        let c = db::compile_kernel(&self.db, file, name)
            .as_ref()
            .map_err(|ps| {
                ps.iter()
                    .map(|p| p.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ")
            })?;
        let mut out = String::new();
        for k in &c.statements {
            out.push_str(&format!("// {}\n", k.assignment));
            let what = match view {
                View::Ir => crate::cli::Emit::Ir,
                View::Lattice => crate::cli::Emit::Lattice,
                View::Graph => crate::cli::Emit::Graph,
                View::Asm => crate::cli::Emit::Asm,
                View::C => crate::cli::Emit::C,
            };
            out.push_str(&crate::cli::emit_text(k, what));
            out.push('\n');
        }
        Ok(out)
    }
}
