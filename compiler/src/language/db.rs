//! The salsa database: the incremental compiler the command line and the
//! language server share. Inputs are source files and the data files they
//! read; every arrow of the pipeline (parse, resolve, compile, emit) is a
//! tracked function keyed by the item it works on.

use super::ast::*;
use super::resolve::{tensor_format, Problem, Scope};
use crate::coo::CooTensor;
use crate::format::{Registry, TensorFormat};
use crate::lower::{compile, Kernel};
use crate::notation::Span;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[salsa::input(debug)]
pub struct SourceFile {
    #[returns(ref)]
    pub path: PathBuf,
    #[returns(ref)]
    pub text: String,
}

/// A file a tensor reads; `stamp` changes when its content does.
#[salsa::input(debug)]
pub struct DataFile {
    #[returns(ref)]
    pub path: PathBuf,
    pub stamp: u64,
}

#[salsa::interned(debug)]
pub struct Name<'db> {
    #[returns(ref)]
    pub text: String,
}

/// A diagnostic with an absolute byte range.
#[salsa::accumulator]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    pub span: Span,
    pub message: String,
    pub severity: Severity,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    Error,
    Warning,
}

#[salsa::db]
pub trait Db: salsa::Database {
    /// The input for a data file, created on first use.
    fn data_file(&self, path: &Path) -> DataFile;
}

#[salsa::db]
#[derive(Clone)]
pub struct Database {
    storage: salsa::Storage<Self>,
    data: Arc<Mutex<BTreeMap<PathBuf, DataFile>>>,
    /// Names of the tracked functions that ran, when logging is on.
    pub log: Arc<Mutex<Option<Vec<String>>>>,
}

impl Default for Database {
    fn default() -> Self {
        let log: Arc<Mutex<Option<Vec<String>>>> = Arc::default();
        let sink = log.clone();
        let storage = salsa::Storage::new(Some(Box::new(move |event: salsa::Event| {
            if let salsa::EventKind::WillExecute { database_key } = event.kind {
                if let Ok(mut guard) = sink.lock() {
                    if let Some(v) = guard.as_mut() {
                        v.push(format!("{database_key:?}"));
                    }
                }
            }
        })));
        Database { storage, data: Arc::default(), log }
    }
}

#[salsa::db]
impl salsa::Database for Database {}

fn stamp_of(path: &Path) -> u64 {
    match std::fs::metadata(path) {
        Ok(m) => {
            let t = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as u64);
            t ^ m.len().rotate_left(32)
        }
        Err(_) => 0,
    }
}

#[salsa::db]
impl Db for Database {
    fn data_file(&self, path: &Path) -> DataFile {
        let mut map = match self.data.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(f) = map.get(path) {
            return *f;
        }
        let f = DataFile::new(self, path.to_path_buf(), stamp_of(path));
        map.insert(path.to_path_buf(), f);
        f
    }
}

impl Database {
    /// Re-read the stamps of known data files; changed ones invalidate
    /// exactly the kernels that read them.
    pub fn refresh_data_files(&mut self) {
        use salsa::Setter;
        let files: Vec<(PathBuf, DataFile)> = self.data.lock().map(|m| m.iter().map(|(p, f)| (p.clone(), *f)).collect()).unwrap_or_default();
        for (path, f) in files {
            let s = stamp_of(&path);
            if *f.stamp(self) != s {
                f.set_stamp(self).to(s);
            }
        }
    }

    pub fn start_logging(&self) {
        if let Ok(mut l) = self.log.lock() {
            *l = Some(Vec::new());
        }
    }

    pub fn take_log(&self) -> Vec<String> {
        self.log.lock().ok().and_then(|mut l| l.as_mut().map(std::mem::take)).unwrap_or_default()
    }
}

// ---------------------------------------------------------------- parsing

#[salsa::tracked(returns(ref))]
pub fn parse_file(db: &dyn Db, file: SourceFile) -> ParsedFile {
    super::cst::parse(file.text(db))
}

/// A kernel's declaration (relative spans) and where it starts.
#[salsa::tracked(returns(ref))]
pub fn kernel_decl<'db>(db: &'db dyn Db, file: SourceFile, name: Name<'db>) -> Option<KernelDecl> {
    parse_file(db, file).items.iter().find_map(|it| match &it.kind {
        ItemKind::Kernel(k) if k.name.name == *name.text(db) => Some(k.clone()),
        _ => None,
    })
}

/// Every declaration except kernels' bodies: what resolution reads. An
/// edit inside a kernel leaves it equal.
#[salsa::tracked(returns(ref))]
pub fn declarations(db: &dyn Db, file: SourceFile) -> Declarations {
    let items = parse_file(db, file).items.iter().filter(|i| !matches!(i.kind, ItemKind::Kernel(_))).cloned().collect();
    Declarations { items }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Declarations {
    pub items: Vec<Item>,
}
impl Eq for Declarations {}

/// Names of the kernels, in order.
#[salsa::tracked(returns(ref))]
pub fn kernel_names(db: &dyn Db, file: SourceFile) -> Vec<String> {
    parse_file(db, file).items.iter().filter_map(|i| if let ItemKind::Kernel(k) = &i.kind { Some(k.name.name.clone()) } else { None }).collect()
}

// ------------------------------------------------------------- resolution

/// What a kernel needs to compile and run, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub formats: BTreeMap<String, TensorFormat>,
    pub dims: BTreeMap<String, Vec<usize>>,
    pub sources: BTreeMap<String, Option<Source>>,
    pub data_paths: BTreeMap<String, PathBuf>,
}
impl Eq for Resolved {}

/// Resolve the tensors a kernel's statements use. Problems are spans in
/// the declarations (absolute) or in the kernel (relative to its start).
#[salsa::tracked(returns(ref))]
pub fn resolve_kernel<'db>(db: &'db dyn Db, file: SourceFile, name: Name<'db>) -> Result<Resolved, Vec<Problem>> {
    let Some(kernel) = kernel_decl(db, file, name) else {
        return Err(vec![Problem::in_kernel(Span::default(), format!("no kernel `{}`", name.text(db)))]);
    };
    let decls = declarations(db, file);
    let scope = Scope::new(&decls.items);
    let registry = Registry::builtin();
    let dir = file.path(db).parent().map(Path::to_path_buf).unwrap_or_default();
    let mut out = Resolved { formats: BTreeMap::new(), dims: BTreeMap::new(), sources: BTreeMap::new(), data_paths: BTreeMap::new() };
    let mut problems = Vec::new();
    let mut symbols: BTreeMap<String, usize> = BTreeMap::new();
    // Tensors this kernel uses.
    let mut used: Vec<(String, Span)> = Vec::new();
    for st in &kernel.statements {
        for acc in std::iter::once(&st.lhs).chain(st.rhs.accesses()) {
            if !used.iter().any(|(n, _)| *n == acc.tensor) {
                used.push((acc.tensor.clone(), acc.span));
            }
        }
    }
    for (tname, use_span) in &used {
        let Some((decl, at)) = scope.tensors.get(tname) else {
            problems.push(Problem::in_kernel(*use_span, format!("unknown tensor `{tname}` (declare it: tensor {tname} : f64[...] @ FORMAT)")));
            continue;
        };
        let at = *at;
        if decl.elem.name != "f64" {
            problems.push(Problem::at_decl(shift(decl.elem.span, at), format!("element type `{}` is not supported (only f64)", decl.elem.name)));
        }
        match tensor_format(decl, &scope, at, &registry) {
            Ok(f) => {
                out.formats.insert(tname.clone(), f);
            }
            Err(p) => problems.push(p),
        }
        out.sources.insert(tname.clone(), decl.source.clone());
        if let Some(src) = &decl.source {
            if let Some(path) = super::sources::file_argument(src) {
                let full = dir.join(path);
                let data = db.data_file(&full);
                match super::sources::load_file(db, data) {
                    Ok(t) => {
                        if t.order() != decl.shape.len() {
                            problems.push(Problem::at_decl(shift(src.span, at), format!("{} holds an order-{} tensor but `{tname}` has {} dimensions", full.display(), t.order(), decl.shape.len())));
                        }
                        for (d, n) in decl.shape.iter().zip(&t.dims) {
                            bind(&mut symbols, d, *n, at, &mut problems);
                        }
                    }
                    Err(e) => problems.push(Problem::at_decl(shift(src.span, at), e.clone())),
                }
                out.data_paths.insert(tname.clone(), full);
            }
        }
    }
    // Sizes still unknown may be bound by a file other tensors read.
    let wanted: Vec<String> = used
        .iter()
        .filter_map(|(t, _)| scope.tensors.get(t))
        .flat_map(|(d, _)| d.shape.iter())
        .filter_map(|d| if let Dim::Sym(s) = d { Some(s.name.clone()) } else { None })
        .filter(|s| !symbols.contains_key(s))
        .collect();
    for (tname, (decl, at)) in &scope.tensors {
        let binds = decl.shape.iter().any(|d| matches!(d, Dim::Sym(s) if wanted.contains(&s.name) && !symbols.contains_key(&s.name)));
        let Some(path) = decl.source.as_ref().and_then(super::sources::file_argument) else { continue };
        if !binds || used.iter().any(|(u, _)| u == tname) {
            continue;
        }
        if let Ok(t) = super::sources::load_file(db, db.data_file(&dir.join(path))) {
            for (d, n) in decl.shape.iter().zip(&t.dims) {
                bind(&mut symbols, d, *n, *at, &mut problems);
            }
        }
    }
    for (tname, _) in &used {
        if let Some((decl, at)) = scope.tensors.get(tname) {
            let mut dims = Vec::new();
            for d in &decl.shape {
                match d {
                    Dim::Num(n, _) => dims.push(*n),
                    Dim::Sym(s) => match symbols.get(&s.name) {
                        Some(n) => dims.push(*n),
                        None => {
                            problems.push(Problem::at_decl(shift(s.span, *at), format!("the size `{}` is not known: give a number or read `{tname}` (or another tensor using `{}`) from a file", s.name, s.name)));
                            dims.push(0);
                        }
                    },
                }
            }
            out.dims.insert(tname.clone(), dims);
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn shift(s: Span, base: usize) -> Span {
    Span::new(s.start + base, s.end + base)
}

fn bind(symbols: &mut BTreeMap<String, usize>, d: &Dim, n: usize, at: usize, problems: &mut Vec<Problem>) {
    match d {
        Dim::Num(m, span) if *m != n => problems.push(Problem::at_decl(shift(*span, at), format!("declared size {m} but the file has {n}"))),
        Dim::Num(..) => {}
        Dim::Sym(s) => match symbols.get(&s.name) {
            Some(&m) if m != n => problems.push(Problem::at_decl(shift(s.span, at), format!("`{}` is {m} elsewhere but {n} here", s.name))),
            Some(_) => {}
            None => {
                symbols.insert(s.name.clone(), n);
            }
        },
    }
}

// ------------------------------------------------------------ compilation

/// A compiled kernel: one loop nest per statement.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub statements: Vec<Kernel>,
}
impl PartialEq for Compiled {
    fn eq(&self, other: &Self) -> bool {
        self.statements.len() == other.statements.len() && self.statements.iter().zip(&other.statements).all(|(a, b)| a.function == b.function)
    }
}
impl Eq for Compiled {}

/// Compile every statement of a kernel (iteration graphs, lattices, loop
/// IR). Errors carry spans relative to the kernel's start.
#[salsa::tracked(returns(ref))]
pub fn compile_kernel<'db>(db: &'db dyn Db, file: SourceFile, name: Name<'db>) -> Result<Compiled, Vec<Problem>> {
    let resolved = resolve_kernel(db, file, name).clone()?;
    let Some(kernel) = kernel_decl(db, file, name) else { return Err(Vec::new()) };
    let mut statements = Vec::new();
    let mut problems = Vec::new();
    for (n, st) in kernel.statements.iter().enumerate() {
        let fname = format!("{}_{n}", name.text(db));
        match compile(&fname, st, &resolved.formats, &resolved.dims) {
            Ok(k) => statements.push(k),
            Err(e) => problems.push(Problem::in_kernel(e.span().unwrap_or(st.span), e.to_string())),
        }
    }
    if problems.is_empty() {
        Ok(Compiled { statements })
    } else {
        Err(problems)
    }
}

/// The kernel's emitted C, every statement in order.
#[salsa::tracked(returns(ref))]
pub fn emitted_c<'db>(db: &'db dyn Db, file: SourceFile, name: Name<'db>) -> Result<String, String> {
    match compile_kernel(db, file, name) {
        Ok(c) => Ok(c.statements.iter().map(|k| crate::ir::c::function(&k.function)).collect::<Vec<_>>().join("\n")),
        Err(p) => Err(p.iter().map(|p| p.message.clone()).collect::<Vec<_>>().join("; ")),
    }
}

/// Every problem in a file, with absolute spans, in source order.
pub fn diagnostics(db: &dyn Db, file: SourceFile) -> Vec<Diagnostic> {
    let parsed = parse_file(db, file);
    let mut out: Vec<Diagnostic> = parsed.errors.iter().map(|e| Diagnostic { span: e.span, message: e.message.clone(), severity: Severity::Error }).collect();
    let mut kernels_seen: Vec<&str> = Vec::new();
    for it in &parsed.items {
        let ItemKind::Kernel(k) = &it.kind else { continue };
        let base = it.span.start;
        // Queries are keyed by name and answer for the first kernel of that
        // name; a second one is an error of its own (and its relative spans
        // must not be shifted by the wrong base).
        if kernels_seen.contains(&k.name.name.as_str()) {
            out.push(Diagnostic { span: shift(k.name.span, base), message: format!("kernel `{}` is declared twice (rename one)", k.name.name), severity: Severity::Error });
            continue;
        }
        kernels_seen.push(&k.name.name);
        let name = Name::new(db, k.name.name.clone());
        let abs = |p: &Problem| Diagnostic { span: if p.in_kernel { shift(p.span, base) } else { p.span }, message: p.message.clone(), severity: Severity::Error };
        match resolve_kernel(db, file, name) {
            Err(ps) => out.extend(ps.iter().map(abs)),
            Ok(_) => {
                if let Err(ps) = compile_kernel(db, file, name) {
                    out.extend(ps.iter().map(abs));
                }
            }
        }
    }
    out.sort_by_key(|d| (d.span.start, d.span.end));
    out.dedup();
    out
}

/// Load a data file (cached until its stamp changes).
#[salsa::tracked(returns(ref))]
pub fn load_data(db: &dyn Db, file: DataFile) -> Result<LoadedData, String> {
    let _ = file.stamp(db);
    crate::io::read_tensor(file.path(db)).map(|t| LoadedData(Arc::new(t))).map_err(|e| e.to_string())
}

/// Loaded tensor data, compared by identity (a re-read is a change).
#[derive(Clone, Debug)]
pub struct LoadedData(pub Arc<CooTensor>);
impl PartialEq for LoadedData {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for LoadedData {}
