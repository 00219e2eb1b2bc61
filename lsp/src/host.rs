//! The analysis host: where edits go in and where requests read, so that
//! no request waits behind another's work (DESIGN.md, the request model).
//!
//! - The client's text lives in `latest` and is updated at once, in the
//!   order notifications arrive.
//! - A writer thread then sets the text as an input of the master database.
//!   Setting an input cancels every query still running on an older
//!   snapshot (salsa unwinds them at their next query boundary; slow work
//!   inside one query waits in slices that look for it, see
//!   `tensor_compiler::language::background`), and waits only for that.
//! - Every request first waits until the edits it came after are written,
//!   then runs on a snapshot (a clone of the database plus the documents it
//!   was written from) on a blocking thread, off every lock. A request
//!   cancelled by a newer edit answers `ContentModified`.

use crate::document::Document;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use tensor_compiler::ide::Analysis;
use tensor_compiler::language::db::SourceFile;
use tokio::sync::watch;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::Uri;

pub fn path_of(uri: &Uri) -> PathBuf {
    uri.to_file_path()
        .map(|p| p.into_owned())
        .unwrap_or_else(|| PathBuf::from(uri.as_str()))
}

pub fn internal(e: impl std::fmt::Display) -> Error {
    let mut err = Error::internal_error();
    err.message = e.to_string().into();
    err
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A consistent view: the database and the documents whose text it holds.
pub struct Snapshot {
    pub analysis: Analysis,
    docs: HashMap<Uri, Document>,
}

impl Snapshot {
    /// An open document and its file in the database.
    pub fn doc(&self, uri: &Uri) -> Option<(&Document, SourceFile)> {
        Some((self.docs.get(uri)?, self.analysis.file(&path_of(uri))?))
    }
}

/// The documents as the client sent them, and how many edits that is.
#[derive(Default)]
struct Latest {
    docs: HashMap<Uri, Document>,
    edits: u64,
}

/// What the writer keeps: the master database and the documents written.
#[derive(Default)]
struct Master {
    analysis: Analysis,
    docs: HashMap<Uri, Document>,
}

pub struct Host {
    latest: Mutex<Latest>,
    master: Mutex<Master>,
    /// How many edits the master holds.
    written: watch::Sender<u64>,
}

impl Default for Host {
    fn default() -> Self {
        Host {
            latest: Mutex::default(),
            master: Mutex::default(),
            written: watch::Sender::new(0),
        }
    }
}

impl Host {
    /// Change the client's documents, at once (call before awaiting
    /// anything, so changes apply in the order they came). Requests from
    /// now on wait until a `write` has put this change in the database.
    pub fn change(&self, change: impl FnOnce(&mut HashMap<Uri, Document>)) {
        let mut latest = lock(&self.latest);
        change(&mut latest.docs);
        latest.edits += 1;
    }

    /// The client's current text of a document.
    pub fn text(&self, uri: &Uri) -> Option<String> {
        lock(&self.latest).docs.get(uri).map(Document::text)
    }

    /// Bring the master up to date with the client's documents, running
    /// `also` on the master database as part of the same write, on a
    /// blocking thread. Resolves when written.
    pub async fn write(self: &Arc<Self>, also: impl FnOnce(&mut Analysis) + Send + 'static) {
        let host = self.clone();
        let _ = tokio::task::spawn_blocking(move || host.write_now(also)).await;
    }

    fn write_now(&self, also: impl FnOnce(&mut Analysis)) {
        let mut master = lock(&self.master);
        let (docs, edits) = {
            let latest = lock(&self.latest);
            (latest.docs.clone(), latest.edits)
        };
        let master = &mut *master;
        // Every call below that changes an input waits until running
        // queries on snapshots have unwound.
        for (uri, doc) in &docs {
            let changed = master.docs.get(uri).is_none_or(|old| old.rope != doc.rope);
            if changed {
                master.analysis.set_file(&path_of(uri), doc.text());
            }
        }
        for uri in master.docs.keys().filter(|u| !docs.contains_key(*u)) {
            master.analysis.remove_file(&path_of(uri));
        }
        also(&mut master.analysis);
        master.docs = docs;
        self.written.send_if_modified(|w| {
            let newer = edits > *w;
            *w = (*w).max(edits);
            newer
        });
    }

    /// The client's current version of a document.
    pub fn version(&self, uri: &Uri) -> Option<i32> {
        lock(&self.latest).docs.get(uri).map(|d| d.version)
    }

    /// Run `f` on a snapshot that holds every edit received so far, on a
    /// blocking thread. Cancelled by a newer edit: `ContentModified`; a
    /// panic: an internal error naming it.
    pub async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Snapshot) -> T + Send + 'static,
    ) -> Result<T> {
        let wanted = lock(&self.latest).edits;
        let mut written = self.written.subscribe();
        let _ = written.wait_for(|w| *w >= wanted).await;
        let host = self.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let snapshot = host.snapshot();
            catch_unwind(AssertUnwindSafe(|| f(&snapshot)))
        })
        .await
        .map_err(internal)?;
        answer.map_err(|payload| {
            if payload.is::<salsa::Cancelled>() {
                Error::content_modified()
            } else {
                let what = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                internal(format!("internal error: {what}"))
            }
        })
    }

    fn snapshot(&self) -> Snapshot {
        let master = lock(&self.master);
        Snapshot {
            analysis: master.analysis.clone(),
            docs: master.docs.clone(),
        }
    }
}
