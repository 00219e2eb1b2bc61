//! Running cases in child processes: a kernel that dies (a signal) or
//! freezes takes its child down, not the run. The child is this test binary
//! again, running the ignored test `differential_worker`; it writes one JSON
//! line when it starts a case and one when it has judged it.

use super::report::Record;
use super::run::{judge, minimize, Class};
use super::templates::generate;
use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const SEEDS_ENV: &str = "DIFFERENTIAL_SEEDS";
/// Test hooks: the worker aborts, or spins, when it reaches this seed (so
/// that the supervision itself is tested).
pub const ABORT_AT_ENV: &str = "DIFFERENTIAL_ABORT_AT";
pub const SPIN_AT_ENV: &str = "DIFFERENTIAL_SPIN_AT";
pub const OUT_ENV: &str = "DIFFERENTIAL_OUT";
/// The name of the worker test in the test binary.
pub const WORKER_TEST: &str = "differential_worker";

/// Judge one seed in this process; wrong answers are minimised and come
/// with a reproducer.
pub fn judge_seed(seed: u64) -> Record {
    let cpu0 = own_cpu_time();
    let case = generate(seed);
    let mut outcome = judge(&case);
    let mut shown = case.clone();
    if outcome.class == Class::Wrong {
        let small = minimize(&case);
        let again = judge(&small);
        if again.class == Class::Wrong {
            shown = small;
            outcome = again;
        }
    }
    let detail = match outcome.class {
        Class::Pass | Class::Refused => String::new(),
        _ => format!("{}\n{}", shown.command_line(), outcome.detail),
    };
    let cpu_ms = own_cpu_time().saturating_sub(cpu0).as_secs_f64() * 1e3;
    Record {
        seed,
        family: case.family.to_string(),
        class: outcome.class,
        message: outcome.message,
        case: shown.describe(),
        detail,
        cpu_ms,
    }
}

/// The worker: judge the seeds named in the environment, one JSON line per
/// event, flushed so the parent sees how far it got.
pub fn worker_main() {
    let Ok(seeds) = std::env::var(SEEDS_ENV) else {
        return;
    };
    // Room a kernel should fill before it ends is poison, not zeros that
    // could pass for the answer.
    tensor_compiler::jit::poison_unzeroed_room(true);
    let out = std::env::var(OUT_ENV).expect("DIFFERENTIAL_OUT names the output file");
    let (a, b) = seeds
        .split_once("..")
        .expect("DIFFERENTIAL_SEEDS is START..END");
    let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
        .expect("worker output file");
    // Panics are caught and recorded; keep their default report quiet.
    std::panic::set_hook(Box::new(|_| {}));
    for seed in a..b {
        writeln!(file, "{}", serde_json::json!({ "start": seed })).unwrap();
        file.flush().unwrap();
        let hook =
            |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok()) == Some(seed);
        if hook(ABORT_AT_ENV) {
            std::process::abort();
        }
        while hook(SPIN_AT_ENV) {
            std::hint::spin_loop();
        }
        let r = judge_seed(seed);
        writeln!(file, "{}", r.to_json()).unwrap();
        file.flush().unwrap();
    }
}

/// Seeds per child process: small enough that the workers finish together.
const CHUNK: u64 = 250;

/// Judge `seeds` in `workers` child processes, each taking the next chunk
/// of seeds as it finishes one; a case running longer than `timeout` counts
/// as a crash. Records come back in seed order.
pub fn run_isolated(seeds: Range<u64>, workers: usize, timeout: Duration) -> Vec<Record> {
    run_isolated_with(seeds, workers, timeout, &[])
}

/// `run_isolated` with extra environment variables for the workers.
pub fn run_isolated_with(
    seeds: Range<u64>,
    workers: usize,
    timeout: Duration,
    env: &[(&str, &str)],
) -> Vec<Record> {
    let mut chunks = Vec::new();
    let mut s = seeds.start;
    while s < seeds.end {
        chunks.push(s..(s + CHUNK).min(seeds.end));
        s += CHUNK;
    }
    chunks.reverse();
    let queue = std::sync::Mutex::new(chunks);
    let mut records: Vec<Record> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers.max(1))
            .map(|_| {
                let queue = &queue;
                scope.spawn(move || {
                    let mut out = Vec::new();
                    loop {
                        // Take the lock for the pop only.
                        let next = queue.lock().unwrap().pop();
                        let Some(c) = next else { break };
                        out.extend(supervise(c, timeout, env));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("supervisor thread"))
            .collect()
    });
    records.sort_by_key(|r| r.seed);
    records
}

/// Run one chunk, restarting the child after the seed that killed it.
fn supervise(seeds: Range<u64>, timeout: Duration, env: &[(&str, &str)]) -> Vec<Record> {
    let exe = std::env::current_exe().expect("the test binary");
    // One file per supervisor: the tests of this binary run side by side.
    static FILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("differential-{}-{k}.jsonl", std::process::id()));
    let mut records = Vec::new();
    let mut next = seeds.start;
    while next < seeds.end {
        let _ = std::fs::remove_file(&path);
        let mut child = Command::new(&exe)
            .args([
                WORKER_TEST,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
                "-q",
            ])
            .env(SEEDS_ENV, format!("{next}..{}", seeds.end))
            .env(OUT_ENV, &path)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the worker");
        // The seed in progress, and the child's wall and CPU time when this
        // process first saw it. A case is frozen after `timeout` of CPU (so
        // a loaded machine does not make slow cases look frozen), or after
        // ten times that of wall time (a kernel that sleeps or waits).
        let mut current: Option<(u64, Instant, Option<Duration>)> = None;
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait for the worker") {
                break Some(st);
            }
            let started = last_started(&path);
            if started != current.map(|c| c.0) {
                current = started.map(|s| (s, Instant::now(), child_cpu_time(child.id())));
            }
            let frozen =
                current.is_some_and(
                    |(_, wall0, cpu0)| match (cpu0, child_cpu_time(child.id())) {
                        (Some(c0), Some(c)) => {
                            c.saturating_sub(c0) > timeout || wall0.elapsed() > 10 * timeout
                        }
                        _ => wall0.elapsed() > timeout,
                    },
                );
            if frozen {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let (done, started) = read_progress(&path);
        let finished_all = done.last().is_some_and(|r| r.seed + 1 == seeds.end);
        next = done.last().map_or(next, |r| r.seed + 1);
        records.extend(done);
        if finished_all {
            break;
        }
        // The child stopped inside a case: that case crashed.
        let seed = started.unwrap_or(next);
        let message = match status {
            None => format!("no answer within {} s of CPU (frozen)", timeout.as_secs()),
            Some(st) => format!("the process died: {}", describe_exit(st)),
        };
        let case = generate(seed);
        records.push(Record {
            seed,
            family: case.family.to_string(),
            class: Class::Crash,
            message,
            case: case.describe(),
            detail: case.command_line(),
            cpu_ms: 0.0,
        });
        next = seed + 1;
    }
    let _ = std::fs::remove_file(&path);
    records
}

fn describe_exit(st: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = st.signal() {
            return format!("signal {sig}");
        }
    }
    format!("{st}")
}

/// Records written so far, and the seed started but not finished.
fn read_progress(path: &Path) -> (Vec<Record>, Option<u64>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut done = Vec::new();
    let mut open = None;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(s) = v.get("start").and_then(|s| s.as_u64()) {
            open = Some(s);
        } else if let Some(r) = Record::from_json(&v) {
            if open == Some(r.seed) {
                open = None;
            }
            done.push(r);
        }
    }
    (done, open)
}

/// While the child runs: the seed it has started and not finished, read
/// from the file's last line only (the file grows with every case).
fn last_started(path: &Path) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(1 << 16))).ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    let tail = String::from_utf8_lossy(&bytes);
    let line = tail.lines().filter(|l| l.ends_with('}')).last()?;
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    v.get("start").and_then(|s| s.as_u64())
}

/// CPU time (user + system) of this process.
fn own_cpu_time() -> Duration {
    cpu_time("self").unwrap_or_default()
}

/// CPU time (user + system) of process `pid`, where /proc tells it.
fn child_cpu_time(pid: u32) -> Option<Duration> {
    cpu_time(&pid.to_string())
}

/// From /proc/PID/stat: utime and stime, in USER_HZ ticks (100 per second
/// in the Linux ABI), all threads included.
fn cpu_time(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let (utime, stime): (u64, u64) = (fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?);
    Some(Duration::from_millis((utime + stime) * 10))
}
