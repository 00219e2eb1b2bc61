//! Freed blocks too large for the system allocator's heap, kept for the
//! next allocation of about their size (`line_aligned` asks here first).
//!
//! Why: glibc maps every block above its largest `mmap` threshold (32 MiB)
//! afresh and unmaps it when freed, so a sparse result built from empty in
//! each run (`--fresh-result`) found its values' room as new pages the
//! system faulted in and zeroed again, every run: CSR add on the
//! 4-diagonal matrix of `bench/run.py` (48 MB of values) spent a quarter
//! of its time clearing pages. `heap_policy` already keeps smaller freed
//! blocks on the heap for the same reason; this does it for large ones,
//! as jemalloc and mimalloc keep freed pages for reuse.
//!
//! Only blocks handed out uninitialized are taken from here (a zeroed one
//! would need its zeros written again), only when a program turns it on
//! (`heap_policy::keep_freed_memory`, for `tensorc`), and never more than
//! `LIMIT` bytes in all: a long-lived process holds no more than that of
//! memory it freed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Blocks of at least this many bytes are kept: glibc's largest `mmap`
/// threshold, above which it maps and unmaps per block.
pub const FROM: usize = 32 << 20;
/// Bytes kept in all, at most.
pub const LIMIT: usize = 1 << 30;
/// Blocks kept, at most.
const BLOCKS: usize = 4;

static ON: AtomicBool = AtomicBool::new(false);

/// Kept blocks as (address, usable bytes); 0 marks a free entry.
static KEPT: Mutex<[(usize, usize); BLOCKS]> = Mutex::new([(0, 0); BLOCKS]);

/// Keep freed large blocks from now on (`heap_policy`).
pub fn turn_on() {
    ON.store(true, Ordering::Relaxed);
}

/// A kept system block of at least `size` usable bytes and at most twice
/// that (a larger one would hold memory its owner never uses), if any.
pub fn take(size: usize) -> Option<*mut u8> {
    if size < FROM || !ON.load(Ordering::Relaxed) {
        return None;
    }
    // A poisoned lock only means a panic elsewhere while it was held; the
    // table is consistent after every statement.
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let best = kept
        .iter_mut()
        .filter(|(p, usable)| *p != 0 && *usable >= size && *usable / 2 <= size)
        .min_by_key(|(_, usable)| *usable)?;
    let p = best.0 as *mut u8;
    *best = (0, 0);
    Some(p)
}

/// Keep system block `raw` instead of freeing it; false when it is too
/// small, keeping is off, or there is no room (the caller frees it).
///
/// # Safety
/// `raw` is a live block of the system allocator that its owner gives up.
pub unsafe fn keep(raw: *mut u8) -> bool {
    if !ON.load(Ordering::Relaxed) {
        return false;
    }
    let usable = usable_size(raw);
    if usable < FROM {
        return false;
    }
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let total: usize = kept.iter().map(|(_, n)| n).sum();
    if total + usable > LIMIT {
        return false;
    }
    match kept.iter_mut().find(|(p, _)| *p == 0) {
        Some(entry) => {
            *entry = (raw as usize, usable);
            true
        }
        None => false,
    }
}

/// The bytes system block `raw` can hold (at least what was asked).
///
/// # Safety
/// `raw` is a live block of the system allocator.
unsafe fn usable_size(raw: *mut u8) -> usize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        libc::malloc_usable_size(raw as *mut libc::c_void)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        // Unknown: never kept.
        let _ = raw;
        0
    }
}
