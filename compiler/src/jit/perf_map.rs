//! Names for the JIT's kernels in a profiler. With `TENSOR_PERF_MAP=1` in
//! the environment, each kernel the Cranelift tier compiles is appended
//! to `/tmp/perf-<pid>.map` as `address length name`: the file Linux
//! `perf report` reads to name code that no ELF file holds, so that a
//! profile of `tensorc --backend cranelift --time N` shows the kernel's
//! share instead of an unknown address. Off by default: most runs are not
//! profiled, and the file is never cleaned up.

use std::io::Write;

/// Append the kernel `name` at `address`, `len` bytes long, where
/// `TENSOR_PERF_MAP=1`. A write that fails leaves the kernel as it is: the
/// map only helps a profiler.
pub(super) fn record(address: usize, len: usize, name: &str) {
    if std::env::var_os("TENSOR_PERF_MAP").is_none_or(|v| v != "1") {
        return;
    }
    let path = format!("/tmp/perf-{}.map", std::process::id());
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{address:x} {len:x} tensor_kernel_{name}");
    }
}
