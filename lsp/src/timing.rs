//! Timing runs: each in a child process (`worker`), shown as cancellable
//! work-done progress. `window/workDoneProgress/cancel`, `$/cancelRequest`
//! (which drops the request's future) and a newer run of the same kernel
//! kill the child at once; every progress `begin` gets its `end`.

use crate::host::internal;
use crate::worker::{self, Request};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::oneshot;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::request::WorkDoneProgressCreate;
use tower_lsp_server::ls_types::{NumberOrString, WorkDoneProgressCreateParams};
use tower_lsp_server::Client;

/// How often the waiting thread looks whether the child has ended.
const POLL: Duration = Duration::from_millis(5);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The runs going on, by progress token, each with the way to stop it.
#[derive(Default)]
pub struct Runs {
    /// The client said it shows server-initiated progress.
    pub progress: AtomicBool,
    /// The `threads` setting: at most this many threads per kernel run (0:
    /// the default, every core for kernels big enough to gain).
    pub threads: AtomicUsize,
    /// The `backend` setting (`auto`, `cranelift`, `cc`; None: `auto`).
    pub backend: Mutex<Option<String>>,
    /// Kernels whose cc tier is being built in the background.
    building: Mutex<std::collections::HashSet<String>>,
    next: AtomicU64,
    stops: Mutex<HashMap<String, oneshot::Sender<()>>>,
}

/// Stops its run when dropped (the request's future was dropped, or ended).
struct StopOnDrop {
    runs: Arc<Runs>,
    token: String,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.runs.stop(&self.token);
    }
}

impl Runs {
    /// Stop the run with this progress token, if it is still going.
    pub fn stop(&self, token: &str) {
        if let Some(stop) = lock(&self.stops).remove(token) {
            let _ = stop.send(());
        }
    }

    /// Time a kernel in a child process with progress shown to the client;
    /// the answer is the worker's figures.
    pub async fn time(self: &Arc<Self>, client: &Client, mut req: Request) -> Result<Value> {
        req.threads = Some(self.threads.load(Ordering::Relaxed)).filter(|&n| n > 0);
        req.backend = lock(&self.backend).clone();
        let token = format!("tensor-time-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (stop_tx, stop_rx) = oneshot::channel();
        lock(&self.stops).insert(token.clone(), stop_tx);
        let _stop = StopOnDrop {
            runs: self.clone(),
            token: token.clone(),
        };
        // The client must know the token before progress is reported on it;
        // one that cannot show progress still gets its answer.
        let created = self.progress.load(Ordering::Relaxed)
            && client
                .send_request::<WorkDoneProgressCreate>(WorkDoneProgressCreateParams {
                    token: NumberOrString::String(token.clone()),
                })
                .await
                .is_ok();
        let title = format!("Timing kernel {}", req.kernel);
        let client = client.clone();
        // A task of its own, so that the progress ends even when this
        // request's future is dropped.
        let run = tokio::spawn(async move {
            let progress = if created {
                Some(
                    client
                        .progress(NumberOrString::String(token), title)
                        .with_cancel_button()
                        .begin()
                        .await,
                )
            } else {
                None
            };
            let answer = run_child(req, stop_rx).await;
            if let Some(p) = progress {
                p.finish_with_message(if answer.is_ok() { "done" } else { "stopped" })
                    .await;
            }
            answer
        });
        run.await.map_err(internal)?
    }
}

impl Runs {
    /// Build the cc tier of `req`'s kernel in a worker of its own, in the
    /// background and without progress (the answer that asked for it is
    /// already shown); one build per kernel at a time. A later `auto`
    /// timing run finds it in the on-disk cache.
    pub fn build_cc_in_background(self: &Arc<Self>, mut req: Request) {
        if !lock(&self.building).insert(req.kernel.clone()) {
            return;
        }
        req.build_cc = true;
        let runs = self.clone();
        tokio::spawn(async move {
            let kernel = req.kernel.clone();
            // Never stopped: it ends when the build does, or with the server.
            let (_keep, stop) = oneshot::channel::<()>();
            let _ = run_child(req, stop).await;
            lock(&runs.building).remove(&kernel);
        });
    }
}

/// Run the worker on `req` until it answers or `stop` fires (then kill it).
async fn run_child(req: Request, stop: oneshot::Receiver<()>) -> Result<Value> {
    let exe = std::env::current_exe()
        .map_err(|e| internal(format!("cannot find the server's executable: {e}")))?;
    let line = serde_json::to_string(&req).map_err(internal)?;
    let mut child = Command::new(exe)
        .arg(worker::FLAG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| internal(format!("cannot start the timing worker: {e}")))?;
    if let Some(stdin) = child.stdin.as_mut() {
        // The worker reads one line; stdin stays open while the run goes on.
        let _ = writeln!(stdin, "{line}");
    }
    let child = Arc::new(Mutex::new(child));
    let waiting = child.clone();
    let wait = tokio::task::spawn_blocking(move || wait_for(&waiting));
    tokio::select! {
        answer = wait => answer.map_err(internal)?,
        _ = stop => {
            let mut c = lock(&child);
            let _ = c.kill();
            let _ = c.wait();
            Err(Error::request_cancelled())
        }
    }
}

/// Wait for the child to end, then read its answer.
fn wait_for(child: &Mutex<Child>) -> Result<Value> {
    let status = loop {
        {
            let mut c = lock(child);
            match c.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => return Err(internal(format!("timing worker: {e}"))),
            }
        }
        std::thread::sleep(POLL);
    };
    let mut out = String::new();
    if let Some(mut stdout) = lock(child).stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    let answer: Value = match serde_json::from_str(out.trim()) {
        Ok(v) => v,
        Err(_) => return Err(internal(format!("the timing run crashed ({status})"))),
    };
    match (
        answer.get("ok"),
        answer.get("error").and_then(Value::as_str),
    ) {
        (Some(ok), _) => Ok(ok.clone()),
        (None, Some(e)) => Err(internal(e)),
        (None, None) => Err(internal("the timing worker gave no answer")),
    }
}
