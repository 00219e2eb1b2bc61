//! Editor-neutral answers over the salsa database: diagnostics, hovers,
//! inlay hints, code lenses, views of generated code, symbols, completion,
//! go to definition, semantic tokens and formatting. The language server
//! only converts these to protocol types (ARCHITECTURE.md, invariant 6).
//! Positions are byte offsets into the file's text.

mod fixes;
mod hover;
mod kernel_facts;
mod markdown;
mod navigate;
mod picture;
mod views;

pub use fixes::{QuickFix, Suggestion};
pub use hover::HoverResult;
pub use navigate::{Completion, CompletionKind, Symbol, SymbolKind, TokenKind};
pub use views::View;

use crate::language::ast::ItemKind;
use crate::language::db::{self, Database, SourceFile};
use crate::notation::Span;
use salsa::Setter;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub span: Span,
    pub message: String,
    pub is_error: bool,
    /// A change that makes the kernel compile (checked by compiling it).
    pub fix: Option<QuickFix>,
}

impl From<db::Diagnostic> for Diagnostic {
    fn from(d: db::Diagnostic) -> Self {
        Diagnostic {
            span: d.span,
            message: d.message,
            is_error: d.severity == db::Severity::Error,
            fix: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct InlayHint {
    pub offset: usize,
    /// Short enough for VS Code, which cuts labels at about 43 characters.
    pub label: String,
    /// The full loop order and strategy of every variable.
    pub tooltip: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum LensKind {
    Time,
    ShowC,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CodeLens {
    pub span: Span,
    pub kernel: String,
    pub kind: LensKind,
}

/// The analysis host: owns the database and the open files.
#[derive(Default, Clone)]
pub struct Analysis {
    pub db: Database,
    files: BTreeMap<PathBuf, SourceFile>,
}

impl Analysis {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set (or replace) a file's text; only what the change touches is
    /// recomputed by later queries.
    pub fn set_file(&mut self, path: &Path, text: String) -> SourceFile {
        match self.files.get(path) {
            Some(f) => {
                let f = *f;
                if f.text(&self.db) != &text {
                    f.set_text(&mut self.db).to(text);
                }
                f
            }
            None => {
                let f = SourceFile::new(&self.db, path.to_path_buf(), text);
                self.files.insert(path.to_path_buf(), f);
                f
            }
        }
    }

    pub fn file(&self, path: &Path) -> Option<SourceFile> {
        self.files.get(path).copied()
    }

    pub fn remove_file(&mut self, path: &Path) {
        self.files.remove(path);
    }

    pub fn refresh_data_files(&mut self) {
        self.db.refresh_data_files();
    }

    pub fn text(&self, file: SourceFile) -> &str {
        file.text(&self.db)
    }

    /// One diagnostic per root cause; a kernel the compiler refuses, or
    /// runs only by converting an operand first, says which format change
    /// makes it compile as stored, and carries that fix.
    pub fn diagnostics(&self, file: SourceFile) -> Vec<Diagnostic> {
        let kernels: Vec<(Span, String)> = db::parse_file(&self.db, file)
            .items
            .iter()
            .filter_map(|it| {
                if let ItemKind::Kernel(k) = &it.kind {
                    Some((it.span, k.name.name.clone()))
                } else {
                    None
                }
            })
            .collect();
        db::diagnostics(&self.db, file)
            .into_iter()
            .map(|d| {
                let mut out = Diagnostic {
                    span: d.span,
                    message: d.message,
                    is_error: d.severity == db::Severity::Error,
                    fix: None,
                };
                // Only the compiler's refusals get a suggestion (not parse
                // or name errors inside the kernel).
                let refused = |k: &String| {
                    let name = db::Name::new(&self.db, k.clone());
                    match db::compile_kernel(&self.db, file, name) {
                        Err(ps) => ps.iter().any(|p| p.message == out.message),
                        Ok(c) => c
                            .statements
                            .iter()
                            .flat_map(|s| &s.conversions)
                            .any(|conv| conv.describe() == out.message),
                    }
                };
                let owner = kernels
                    .iter()
                    .find(|(s, k)| s.start <= d.span.start && d.span.end <= s.end && refused(k));
                if let Some(s) = owner.and_then(|(_, k)| self.suggestion(file, k)) {
                    if let Some(fix) = self.fix(file, &s) {
                        out.message = format!("{}; {}", out.message, s.sentence());
                        out.fix = Some(fix);
                    }
                }
                out
            })
            .collect()
    }

    /// Syntax and resolution problems, before any kernel compiles: what an
    /// editor can show while a slow kernel compiles.
    pub fn diagnostics_before_compiling(&self, file: SourceFile) -> Vec<Diagnostic> {
        db::diagnostics_before_compiling(&self.db, file)
            .into_iter()
            .map(Diagnostic::from)
            .collect()
    }

    /// The kernel whose item contains `offset`.
    pub fn kernel_at(&self, file: SourceFile, offset: usize) -> Option<String> {
        db::parse_file(&self.db, file)
            .items
            .iter()
            .find_map(|it| match &it.kind {
                ItemKind::Kernel(k) if it.span.start <= offset && offset <= it.span.end => {
                    Some(k.name.name.clone())
                }
                _ => None,
            })
    }

    /// Loop order and merge strategy after each statement of each kernel.
    pub fn inlay_hints(&self, file: SourceFile) -> Vec<InlayHint> {
        let mut out = Vec::new();
        for it in &db::parse_file(&self.db, file).items {
            let ItemKind::Kernel(k) = &it.kind else {
                continue;
            };
            let name = db::Name::new(&self.db, k.name.name.clone());
            let Ok(c) = db::compile_kernel(&self.db, file, name) else {
                continue;
            };
            for (st, kernel) in k.statements.iter().zip(&c.statements) {
                let (label, full) = kernel_facts::statement_hint(kernel);
                out.push(InlayHint {
                    offset: it.span.start + st.span.end,
                    label,
                    tooltip: Some(full),
                });
            }
        }
        out
    }

    /// "time" and "show C" above every kernel.
    pub fn code_lenses(&self, file: SourceFile) -> Vec<CodeLens> {
        let mut out = Vec::new();
        for it in &db::parse_file(&self.db, file).items {
            if let ItemKind::Kernel(k) = &it.kind {
                for kind in [LensKind::Time, LensKind::ShowC] {
                    out.push(CodeLens {
                        span: it.span,
                        kernel: k.name.name.clone(),
                        kind,
                    });
                }
            }
        }
        out
    }

    /// Compile and time a kernel on its tensors' data.
    pub fn time_kernel(
        &self,
        file: SourceFile,
        kernel: &str,
        runs: usize,
        cancel: &std::sync::atomic::AtomicBool,
    ) -> Result<crate::language::run::KernelRun, String> {
        let tiers = crate::backend::TierPolicy {
            choice: crate::backend::Choice::Cranelift,
            wait: false,
        };
        self.time_kernel_on(
            file,
            kernel,
            runs,
            crate::threads::Threads::default(),
            tiers,
            cancel,
        )
    }

    /// `time_kernel` with the kernels' outermost loops on up to `threads`,
    /// on the backend tier `tiers` picks.
    pub fn time_kernel_on(
        &self,
        file: SourceFile,
        kernel: &str,
        runs: usize,
        threads: crate::threads::Threads,
        tiers: crate::backend::TierPolicy,
        cancel: &std::sync::atomic::AtomicBool,
    ) -> Result<crate::language::run::KernelRun, String> {
        crate::language::run::run_kernel(&self.db, file, kernel, runs, threads, tiers, cancel)
    }

    /// Build the cc tier of a kernel's statements into the on-disk cache
    /// (what `auto` timing runs then use); how many were built.
    pub fn build_cc_tier(
        &self,
        file: SourceFile,
        kernel: &str,
        cancel: &std::sync::atomic::AtomicBool,
    ) -> Result<usize, String> {
        crate::language::run::build_cc_tier(&self.db, file, kernel, cancel)
    }
}
