//! The salsa database: the incremental compiler the command line and the
//! language server share. Inputs are source files and the data files they
//! read; every arrow of the pipeline (parse, resolve, compile, emit) is a
//! tracked function keyed by the item it works on.

use super::ast::*;
use super::background::Background;
use super::resolve::{tensor_format, Cause, Problem, Scope};
use crate::coo::CooTensor;
use crate::format::{Registry, TensorFormat};
use crate::lower::{compile, Kernel};
use crate::notation::Span;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::panic::{catch_unwind, AssertUnwindSafe};
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
    /// Work the queries hand to other threads, and the last syntax trees.
    fn work(&self) -> &Work;
}

/// What the queries keep outside salsa: slow work running on threads of its
/// own (see `background`), and each file's last syntax tree with the text
/// it was parsed from, for incremental reparsing.
#[derive(Default)]
pub struct Work {
    compiles: Arc<Background<Result<Compiled, Vec<Problem>>>>,
    loads: Arc<Background<Result<LoadedData, String>>>,
    trees: Mutex<HashMap<SourceFile, (Arc<str>, tree_sitter::Tree)>>,
}

#[salsa::db]
#[derive(Clone)]
pub struct Database {
    storage: salsa::Storage<Self>,
    /// Data files by the path as written (not `PathBuf`'s normalised
    /// comparison: `a.mtx/` is not `a.mtx`).
    data: Arc<Mutex<BTreeMap<OsString, DataFile>>>,
    work: Arc<Work>,
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
        Database {
            storage,
            data: Arc::default(),
            work: Arc::default(),
            log,
        }
    }
}

#[salsa::db]
impl salsa::Database for Database {}

/// A digest of a data file's metadata (kind, identity, size, time): it
/// changes when the file does.
fn stamp_of(path: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match std::fs::metadata(path) {
        Ok(m) => (
            m.is_file(),
            m.dev(),
            m.ino(),
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
            .hash(&mut h),
        Err(e) => e.kind().hash(&mut h),
    }
    h.finish()
}

#[salsa::db]
impl Db for Database {
    fn data_file(&self, path: &Path) -> DataFile {
        let mut map = match self.data.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(f) = map.get(path.as_os_str()) {
            return *f;
        }
        let f = DataFile::new(self, path.to_path_buf(), stamp_of(path));
        map.insert(path.as_os_str().to_owned(), f);
        f
    }

    fn work(&self) -> &Work {
        &self.work
    }
}

impl Database {
    /// Re-read the stamps of known data files; changed ones invalidate
    /// exactly the kernels that read them.
    pub fn refresh_data_files(&mut self) {
        use salsa::Setter;
        let files: Vec<(OsString, DataFile)> = self
            .data
            .lock()
            .map(|m| m.iter().map(|(p, f)| (p.clone(), *f)).collect())
            .unwrap_or_default();
        for (path, f) in files {
            let s = stamp_of(Path::new(&path));
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
        self.log
            .lock()
            .ok()
            .and_then(|mut l| l.as_mut().map(std::mem::take))
            .unwrap_or_default()
    }
}

// ---------------------------------------------------------------- parsing

/// Parse a file, reusing its last tree. A pending edit stops the parse
/// (pathological text can take long) and unwinds the query.
#[salsa::tracked(returns(ref))]
pub fn parse_file(db: &dyn Db, file: SourceFile) -> ParsedFile {
    let text = file.text(db);
    let old = db
        .work()
        .trees
        .lock()
        .ok()
        .and_then(|t| t.get(&file).cloned());
    let mut stop = || catch_unwind(AssertUnwindSafe(|| db.unwind_if_revision_cancelled())).is_err();
    let Some((parsed, tree)) =
        super::cst::parse_incremental(text, old.as_ref().map(|(t, tree)| (&**t, tree)), &mut stop)
    else {
        db.unwind_if_revision_cancelled();
        return ParsedFile {
            errors: vec![super::ast::SyntaxError {
                span: Span::default(),
                message: "the parser gave up".into(),
            }],
            ..Default::default()
        };
    };
    if let Ok(mut trees) = db.work().trees.lock() {
        trees.insert(file, (Arc::from(text.as_str()), tree));
    }
    parsed
}

/// A kernel's declaration (relative spans) and where it starts.
#[salsa::tracked(returns(ref))]
pub fn kernel_decl<'db>(db: &'db dyn Db, file: SourceFile, name: Name<'db>) -> Option<KernelDecl> {
    let items = &parse_file(db, file).items;
    let at = *kernel_index(db, file).get(name.text(db))?;
    match &items.get(at)?.kind {
        ItemKind::Kernel(k) => Some(k.clone()),
        _ => None,
    }
}

/// Where each kernel is among the items (the first of a name), so that
/// finding every kernel of a big file stays linear.
#[salsa::tracked(returns(ref))]
pub fn kernel_index(db: &dyn Db, file: SourceFile) -> HashMap<String, usize> {
    let mut index = HashMap::new();
    for (n, it) in parse_file(db, file).items.iter().enumerate() {
        if let ItemKind::Kernel(k) = &it.kind {
            index.entry(k.name.name.clone()).or_insert(n);
        }
    }
    index
}

/// Every declaration except kernels' bodies: what resolution reads. An
/// edit inside a kernel leaves it equal.
#[salsa::tracked(returns(ref))]
pub fn declarations(db: &dyn Db, file: SourceFile) -> Declarations {
    let items = parse_file(db, file)
        .items
        .iter()
        .filter(|i| !matches!(i.kind, ItemKind::Kernel(_)))
        .cloned()
        .collect();
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
    parse_file(db, file)
        .items
        .iter()
        .filter_map(|i| {
            if let ItemKind::Kernel(k) = &i.kind {
                Some(k.name.name.clone())
            } else {
                None
            }
        })
        .collect()
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
pub fn resolve_kernel<'db>(
    db: &'db dyn Db,
    file: SourceFile,
    name: Name<'db>,
) -> Result<Resolved, Vec<Problem>> {
    let Some(kernel) = kernel_decl(db, file, name) else {
        return Err(vec![Problem::in_kernel(
            Span::default(),
            format!("no kernel `{}`", name.text(db)),
        )]);
    };
    let decls = declarations(db, file);
    let scope = Scope::new(&decls.items);
    let registry = Registry::builtin();
    let dir = file
        .path(db)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut out = Resolved {
        formats: BTreeMap::new(),
        dims: BTreeMap::new(),
        sources: BTreeMap::new(),
        data_paths: BTreeMap::new(),
    };
    let mut problems = Vec::new();
    let mut symbols: BTreeMap<String, usize> = BTreeMap::new();
    // Sizes a data file would give but that file could not be read: not
    // reported again as unknown (the file is the cause).
    let mut blocked: Vec<String> = Vec::new();
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
            problems.push(Problem::in_kernel(
                *use_span,
                format!(
                    "unknown tensor `{tname}` (declare it: tensor {tname} : f64[...] @ FORMAT)"
                ),
            ));
            continue;
        };
        let at = *at;
        if decl.elem.name != "f64" {
            problems.push(Problem::at_decl(
                shift(decl.elem.span, at),
                format!(
                    "element type `{}` is not supported (only f64)",
                    decl.elem.name
                ),
            ));
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
                            problems.push(Problem::at_decl(
                                shift(src.span, at),
                                format!(
                                    "{} holds an order-{} tensor but `{tname}` has {} dimensions",
                                    full.display(),
                                    t.order(),
                                    decl.shape.len()
                                ),
                            ));
                        }
                        for (d, n) in decl.shape.iter().zip(&t.dims) {
                            bind(&mut symbols, d, *n, at, &mut problems);
                        }
                    }
                    Err(e) => {
                        problems.push(
                            Problem::at_decl(shift(src.span, at), e.clone())
                                .because(Cause::DataFile(full.clone())),
                        );
                        blocked.extend(decl.shape.iter().filter_map(|d| {
                            if let Dim::Sym(s) = d {
                                Some(s.name.clone())
                            } else {
                                None
                            }
                        }));
                    }
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
        .filter_map(|d| {
            if let Dim::Sym(s) = d {
                Some(s.name.clone())
            } else {
                None
            }
        })
        .filter(|s| !symbols.contains_key(s))
        .collect();
    for (tname, (decl, at)) in &scope.tensors {
        let binds = decl.shape.iter().any(|d| matches!(d, Dim::Sym(s) if wanted.contains(&s.name) && !symbols.contains_key(&s.name)));
        let Some(path) = decl.source.as_ref().and_then(super::sources::file_argument) else {
            continue;
        };
        if !binds || used.iter().any(|(u, _)| u == tname) {
            continue;
        }
        if let Ok(t) = super::sources::load_file(db, db.data_file(&dir.join(path))) {
            for (d, n) in decl.shape.iter().zip(&t.dims) {
                bind(&mut symbols, d, *n, *at, &mut problems);
            }
        }
    }
    // One problem per unknown size, at its first use in the file.
    let mut unknown: BTreeMap<String, (Span, String)> = BTreeMap::new();
    for (tname, _) in &used {
        if let Some((decl, at)) = scope.tensors.get(tname) {
            let mut dims = Vec::new();
            for d in &decl.shape {
                match d {
                    Dim::Num(n, _) => dims.push(*n),
                    Dim::Sym(s) => match symbols.get(&s.name) {
                        Some(n) => dims.push(*n),
                        None => {
                            let span = shift(s.span, *at);
                            let first = unknown
                                .get(&s.name)
                                .is_none_or(|(other, _)| span.start < other.start);
                            if first && !blocked.contains(&s.name) {
                                unknown.insert(s.name.clone(), (span, tname.clone()));
                            }
                            dims.push(0);
                        }
                    },
                }
            }
            out.dims.insert(tname.clone(), dims);
        }
    }
    for (sym, (span, tname)) in unknown {
        problems.push(
            Problem::at_decl(span, format!("the size `{sym}` is not known: give a number or read `{tname}` (or another tensor using `{sym}`) from a file"))
                .because(Cause::UnknownSize(sym)),
        );
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// Items that repeat the name of an earlier item of their kind (format,
/// tensor, kernel), by index, each with an error at its name: names are
/// looked up as the first declaration, so a second would be ignored
/// without a word.
fn declared_twice(items: &[Item]) -> Vec<(usize, Diagnostic)> {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    let mut repeated = Vec::new();
    for (at, it) in items.iter().enumerate() {
        let (kind, name) = match &it.kind {
            ItemKind::Format(f) => ("format", &f.name),
            ItemKind::Tensor(t) => ("tensor", &t.name),
            ItemKind::Kernel(k) => ("kernel", &k.name),
        };
        if seen.contains(&(kind, name.name.as_str())) {
            repeated.push((
                at,
                Diagnostic {
                    span: shift(name.span, it.span.start),
                    message: format!("{kind} `{}` is declared twice (rename one)", name.name),
                    severity: Severity::Error,
                },
            ));
        } else {
            seen.push((kind, &name.name));
        }
    }
    repeated
}

fn shift(s: Span, base: usize) -> Span {
    Span::new(s.start + base, s.end + base)
}

fn bind(
    symbols: &mut BTreeMap<String, usize>,
    d: &Dim,
    n: usize,
    at: usize,
    problems: &mut Vec<Problem>,
) {
    match d {
        Dim::Num(m, span) if *m != n => problems.push(Problem::at_decl(
            shift(*span, at),
            format!("declared size {m} but the file has {n}"),
        )),
        Dim::Num(..) => {}
        Dim::Sym(s) => match symbols.get(&s.name) {
            Some(&m) if m != n => problems.push(Problem::at_decl(
                shift(s.span, at),
                format!("`{}` is {m} elsewhere but {n} here", s.name),
            )),
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
        self.statements.len() == other.statements.len()
            && self
                .statements
                .iter()
                .zip(&other.statements)
                .all(|(a, b)| a.function == b.function)
    }
}
impl Eq for Compiled {}

/// Compile every statement of a kernel (iteration graphs, lattices, loop
/// IR). Errors carry spans relative to the kernel's start.
#[salsa::tracked(returns(ref))]
pub fn compile_kernel<'db>(
    db: &'db dyn Db,
    file: SourceFile,
    name: Name<'db>,
) -> Result<Compiled, Vec<Problem>> {
    let resolved = resolve_kernel(db, file, name).clone()?;
    let Some(kernel) = kernel_decl(db, file, name) else {
        return Err(Vec::new());
    };
    // Compiling can take long: on a thread of its own, so an edit meanwhile
    // cancels this query instead of waiting (see `background`).
    let key = format!(
        "{:?}\n{:?}\n{:?}\n{:?}",
        name.text(db),
        kernel.statements,
        resolved.formats,
        resolved.dims
    );
    let (kname, statements) = (name.text(db).clone(), kernel.statements.clone());
    let work = move || compile_statements(&kname, &statements, &resolved);
    db.work()
        .compiles
        .clone()
        .run(db, key, work)
        .unwrap_or_else(|e| Err(vec![Problem::in_kernel(Span::default(), e)]))
}

fn compile_statements(
    kernel: &str,
    statements: &[crate::notation::Assignment],
    resolved: &Resolved,
) -> Result<Compiled, Vec<Problem>> {
    let mut compiled = Vec::new();
    let mut problems = Vec::new();
    for (n, st) in statements.iter().enumerate() {
        match compile(
            &format!("{kernel}_{n}"),
            st,
            &resolved.formats,
            &resolved.dims,
        ) {
            Ok(k) => compiled.push(k),
            Err(e) => problems.push(Problem::in_kernel(
                e.span().unwrap_or(st.span),
                e.to_string(),
            )),
        }
    }
    if problems.is_empty() {
        Ok(Compiled {
            statements: compiled,
        })
    } else {
        Err(problems)
    }
}

/// The kernel's emitted C, every statement in order.
#[salsa::tracked(returns(ref))]
pub fn emitted_c<'db>(
    db: &'db dyn Db,
    file: SourceFile,
    name: Name<'db>,
) -> Result<String, String> {
    match compile_kernel(db, file, name) {
        Ok(c) => Ok(c
            .statements
            .iter()
            .map(|k| crate::ir::c::function(&k.function))
            .collect::<Vec<_>>()
            .join("\n")),
        Err(p) => Err(p
            .iter()
            .map(|p| p.message.clone())
            .collect::<Vec<_>>()
            .join("; ")),
    }
}

/// Every problem in a file, with absolute spans, in source order: one per
/// root cause (an unknown size or a bad data file is reported once, not by
/// every kernel and tensor it reaches).
pub fn diagnostics(db: &dyn Db, file: SourceFile) -> Vec<Diagnostic> {
    diagnostics_with(db, file, true)
}

/// Syntax and resolution problems only: what is known before any kernel
/// compiles (a kernel can take long to compile).
pub fn diagnostics_before_compiling(db: &dyn Db, file: SourceFile) -> Vec<Diagnostic> {
    diagnostics_with(db, file, false)
}

fn diagnostics_with(db: &dyn Db, file: SourceFile, compiling: bool) -> Vec<Diagnostic> {
    let parsed = parse_file(db, file);
    let mut found: Vec<(Diagnostic, Option<Cause>)> = parsed
        .errors
        .iter()
        .map(|e| {
            (
                Diagnostic {
                    span: e.span,
                    message: e.message.clone(),
                    severity: Severity::Error,
                },
                None,
            )
        })
        .collect();
    let repeated = declared_twice(&parsed.items);
    found.extend(repeated.iter().map(|(_, d)| (d.clone(), None)));
    for (at, it) in parsed.items.iter().enumerate() {
        let ItemKind::Kernel(k) = &it.kind else {
            continue;
        };
        let base = it.span.start;
        // Queries are keyed by name and answer for the first kernel of that
        // name; a second one is only its error (and its relative spans
        // must not be shifted by the wrong base).
        if repeated.iter().any(|(i, _)| *i == at) {
            continue;
        }
        let name = Name::new(db, k.name.name.clone());
        let abs = |p: &Problem| {
            (
                Diagnostic {
                    span: if p.in_kernel {
                        shift(p.span, base)
                    } else {
                        p.span
                    },
                    message: p.message.clone(),
                    severity: Severity::Error,
                },
                p.cause.clone(),
            )
        };
        match resolve_kernel(db, file, name) {
            Err(ps) => found.extend(ps.iter().map(abs)),
            Ok(_) if compiling => {
                match compile_kernel(db, file, name) {
                    Err(ps) => found.extend(ps.iter().map(abs)),
                    // A kernel that runs only by converting an operand
                    // first says so, at the access.
                    Ok(c) => found.extend(
                        c.statements
                            .iter()
                            .flat_map(|s| &s.conversions)
                            .filter(|conv| conv.needed)
                            .map(|conv| {
                                (
                                    Diagnostic {
                                        span: shift(conv.span, base),
                                        message: conv.describe(),
                                        severity: Severity::Warning,
                                    },
                                    None,
                                )
                            }),
                    ),
                }
            }
            Ok(_) => {}
        }
    }
    found.sort_by_key(|(d, _)| (d.span.start, d.span.end));
    let mut causes = std::collections::BTreeSet::new();
    let mut out: Vec<Diagnostic> = Vec::new();
    for (d, cause) in found {
        if cause.is_some_and(|c| !causes.insert(c)) || out.contains(&d) {
            continue;
        }
        out.push(d);
    }
    out
}

/// Load a data file (cached until its stamp changes), on a thread of its
/// own so that a big file does not hold up edits.
#[salsa::tracked(returns(ref))]
pub fn load_data(db: &dyn Db, file: DataFile) -> Result<LoadedData, String> {
    let stamp = file.stamp(db);
    let path = file.path(db).clone();
    let key = format!("{:?}\n{stamp}", path.as_os_str());
    db.work()
        .loads
        .clone()
        .run(db, key, move || read_data_file(&path))
        .and_then(|r| r)
}

/// Read a data file, refusing anything but a regular file first: opening a
/// FIFO waits for a writer, and a device can stream without end.
fn read_data_file(path: &Path) -> Result<LoadedData, String> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Err(e) => return Err(format!("{shown}: cannot open: {e}")),
        Ok(m) if !m.is_file() => return Err(format!("{shown}: cannot open: not a regular file")),
        Ok(m) => crate::execute::warm_up_while_reading(m.len()),
    }
    crate::io::read_tensor(path)
        .map(|t| LoadedData(Arc::new(t)))
        .map_err(|e| e.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn load(db: &Database, path: &Path) -> Result<LoadedData, String> {
        load_data(db, db.data_file(path)).clone()
    }

    /// `a.mtx/` is another path than `a.mtx`, whatever was loaded before.
    #[test]
    fn a_trailing_slash_is_another_data_file() {
        let db = Database::default();
        let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/data/west0479.mtx");
        assert!(load(&db, &good).is_ok());
        let mut slash = good.clone().into_os_string();
        slash.push("/");
        let e = load(&db, Path::new(&slash)).unwrap_err();
        assert!(e.contains("Not a directory"), "{e}");
    }

    /// A FIFO would block the reader until someone writes to it.
    #[test]
    fn only_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("tensor-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap(); // ok: test code, a panic is a failed test
        let fifo = dir.join("pipe.mtx");
        let _ = std::fs::remove_file(&fifo);
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap() // ok: test code
            .success()); // ok: test code, a panic is a failed test
        let db = Database::default();
        let e = load(&db, &fifo).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(load(&db, Path::new("/dev/zero"))
            .unwrap_err()
            .contains("not a regular file"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
