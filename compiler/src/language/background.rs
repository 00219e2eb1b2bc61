//! Work that a query waits for without holding up edits.
//!
//! Salsa notices cancellation only at query boundaries: a long computation
//! inside one query (compiling a big kernel, reading a big data file) would
//! make the next edit wait until it ends, because setting an input waits for
//! every outstanding query to unwind. Such work therefore runs on a thread
//! of its own; the query waits for it in short slices and unwinds as soon as
//! a newer revision is pending. The thread runs to its end (a thread cannot
//! be stopped), and its result is kept for a while under the work's key, so
//! the re-executed query picks it up instead of starting the work again.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How many finished results are kept for queries that come back for them.
const KEEP_FINISHED: usize = 64;
/// How often a waiting query looks for cancellation.
const POLL: Duration = Duration::from_millis(2);
/// Compiling and reading recurse on big inputs: give the threads room.
const STACK: usize = 64 << 20;

struct Job<T> {
    result: Mutex<Option<Result<T, String>>>,
    done: Condvar,
}

/// Jobs by key: running ones, and the last finished ones.
pub struct Background<T> {
    jobs: Mutex<HashMap<String, Arc<Job<T>>>>,
    finished: Mutex<VecDeque<String>>,
}

impl<T> Default for Background<T> {
    fn default() -> Self {
        Background {
            jobs: Mutex::default(),
            finished: Mutex::default(),
        }
    }
}

fn lock<U>(m: &Mutex<U>) -> MutexGuard<'_, U> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}

impl<T: Clone + Send + 'static> Background<T> {
    /// The result of `work` for `key`: started on its own thread unless a
    /// job with this key is running or finished; waited for while `db`'s
    /// revision stays current. Unwinds with salsa's `Cancelled` when an edit
    /// is pending. A panic in `work` becomes an `Err` naming it.
    pub fn run(
        self: &Arc<Self>,
        db: &dyn salsa::Database,
        key: String,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let job = {
            let mut jobs = lock(&self.jobs);
            match jobs.get(&key) {
                Some(job) => job.clone(),
                None => {
                    let job = Arc::new(Job {
                        result: Mutex::new(None),
                        done: Condvar::new(),
                    });
                    jobs.insert(key.clone(), job.clone());
                    self.start(key, job.clone(), work)?;
                    job
                }
            }
        };
        loop {
            {
                let guard = lock(&job.result);
                let (guard, _) = job
                    .done
                    .wait_timeout_while(guard, POLL, |r| r.is_none())
                    .unwrap_or_else(|p| p.into_inner());
                if let Some(r) = guard.as_ref() {
                    return r.clone();
                }
            }
            // Outside the lock: unwinding must not poison it.
            db.unwind_if_revision_cancelled();
        }
    }

    fn start(
        self: &Arc<Self>,
        key: String,
        job: Arc<Job<T>>,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<(), String> {
        let this = self.clone();
        POOL.submit(Box::new(move || {
            let r = catch_unwind(AssertUnwindSafe(work))
                .map_err(|p| format!("internal error: {}", panic_message(p.as_ref())));
            *lock(&job.result) = Some(r);
            job.done.notify_all();
            this.finished(key);
        }))
    }

    /// Keep the last finished jobs; forget older ones.
    fn finished(&self, key: String) {
        let mut order = lock(&self.finished);
        order.push_back(key);
        while order.len() > KEEP_FINISHED {
            if let Some(old) = order.pop_front() {
                // The same key may have finished again since: keep the newest.
                if !order.contains(&old) {
                    lock(&self.jobs).remove(&old);
                }
            }
        }
    }
}

type Task = Box<dyn FnOnce() + Send>;

/// Threads for background work: an idle one takes the next task, and a new
/// one starts whenever none is idle, so a task that runs for minutes never
/// holds up the others. Idle threads end after a while.
struct Pool {
    queue: Mutex<(VecDeque<Task>, usize)>,
    wake: Condvar,
}

static POOL: Pool = Pool {
    queue: Mutex::new((VecDeque::new(), 0)),
    wake: Condvar::new(),
};

/// How long an idle thread waits for work before it ends.
const IDLE: Duration = Duration::from_secs(10);

impl Pool {
    fn submit(&'static self, task: Task) -> Result<(), String> {
        let mut q = lock(&self.queue);
        q.0.push_back(task);
        // Every queued task needs an idle thread of its own.
        if q.0.len() > q.1 {
            std::thread::Builder::new()
                .name("tensor-background".into())
                .stack_size(STACK)
                .spawn(move || self.work())
                .map_err(|e| format!("cannot start a thread: {e}"))?;
        } else {
            self.wake.notify_one();
        }
        Ok(())
    }

    fn work(&'static self) {
        loop {
            let task = {
                let mut q = lock(&self.queue);
                loop {
                    if let Some(t) = q.0.pop_front() {
                        break t;
                    }
                    q.1 += 1;
                    let (guard, waited) = self
                        .wake
                        .wait_timeout(q, IDLE)
                        .unwrap_or_else(|p| p.into_inner());
                    q = guard;
                    q.1 -= 1;
                    if waited.timed_out() && q.0.is_empty() {
                        return;
                    }
                }
            };
            task();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::db::Database;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn same_key_runs_once_and_panics_become_errors() {
        let db = Database::default();
        let bg: Arc<Background<usize>> = Arc::default();
        let runs = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let r = runs.clone();
            assert_eq!(
                bg.run(&db, "k".into(), move || r.fetch_add(1, Ordering::SeqCst)
                    + 41),
                Ok(41)
            );
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let e = bg
            .run(&db, "boom".into(), || panic!("exploded"))
            .unwrap_err();
        assert!(e.contains("exploded"), "{e}");
    }

    /// Work that runs long does not hold up other work.
    #[test]
    fn a_long_job_does_not_hold_up_others() {
        let db = Database::default();
        let bg: Arc<Background<u32>> = Arc::default();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        bg.start(
            "long".into(),
            Arc::new(Job {
                result: Mutex::new(None),
                done: Condvar::new(),
            }),
            move || {
                let _ = started_tx.send(());
                std::thread::sleep(Duration::from_secs(2));
                1
            },
        )
        .unwrap(); // ok: test code, a panic is a failed test
        started_rx.recv().unwrap(); // ok: test code, a panic is a failed test
        let t0 = std::time::Instant::now();
        assert_eq!(bg.run(&db, "short".into(), || 2), Ok(2));
        assert!(t0.elapsed() < Duration::from_secs(1));
    }

    /// Setting an input does not wait for slow work a snapshot is waiting
    /// on: the snapshot unwinds with `Cancelled`, the work goes on.
    #[test]
    fn an_edit_cancels_a_wait_at_once() {
        use salsa::Setter;
        use std::time::Instant;
        let mut db = Database::default();
        let file = crate::language::db::SourceFile::new(&db, "a.tensor".into(), String::new());
        let bg: Arc<Background<u32>> = Arc::default();
        let (snapshot, waiting) = (db.clone(), bg.clone());
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            salsa::Cancelled::catch(AssertUnwindSafe(|| {
                waiting.run(&snapshot, "slow".into(), move || {
                    let _ = started_tx.send(());
                    std::thread::sleep(Duration::from_secs(3));
                    7
                })
            }))
        });
        started_rx.recv().unwrap(); // ok: test code, a panic is a failed test
        let t0 = Instant::now();
        file.set_text(&mut db).to("kernel k { y(i) = x(i) }".into());
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "the edit waited {:?}",
            t0.elapsed()
        );
        assert!(
            reader.join().unwrap().is_err(), // ok: test code
            "the snapshot was cancelled"
        ); // ok: test code, a panic is a failed test
           // The work finished meanwhile is picked up, not started again.
        assert_eq!(bg.run(&db, "slow".into(), || 0), Ok(7));
    }
}
