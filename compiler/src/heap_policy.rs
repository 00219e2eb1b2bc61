//! How the system allocator under `line_aligned` (glibc's malloc) keeps
//! freed memory between runs of a kernel. `tensorc` sets it at start.
//!
//! Why: a sparse result built from empty in each run (`--fresh-result`,
//! as SciPy's `A + B` builds one) frees its arrays after the run and asks
//! for them again in the next. glibc gives the compiler's worker thread an
//! arena of its own, whose heaps it unmaps as soon as the blocks in them
//! are freed, and trims any heap whose free top passes a threshold it
//! raises only after large blocks come and go. Either way the next run's
//! arrays came back as pages the system had to fault in and zero again:
//! CSR add into a fresh result spent more time in page faults than in the
//! kernel (6,400 faults per run on the 4-diagonal matrix of `bench/run.py`,
//! 2.2 ms against a 0.3 ms kernel on bcsstk13), where a one-thread
//! program such as SciPy's reuses the blocks it freed.
//!
//! So: one arena for every thread (the kernels allocate a few large
//! blocks per run, never from many threads in a tight loop), blocks up to
//! glibc's largest `mmap` threshold from the heap, and no trimming below
//! a gigabyte of free top. Blocks above 32 MiB are mapped per allocation,
//! on huge pages (`line_aligned`), and kept when freed for the next
//! allocation of about their size, up to a gigabyte (`retained`).

/// Keep freed memory for the next run (see the module comment). Call
/// before any thread starts: the arena limit counts threads' arenas as
/// they are made.
pub fn keep_freed_memory() {
    crate::retained::turn_on();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        /// glibc's ceiling for `M_MMAP_THRESHOLD` on 64-bit targets.
        const MMAP_THRESHOLD: libc::c_int = 32 << 20;
        const TRIM_THRESHOLD: libc::c_int = 1 << 30;
        // SAFETY: `mallopt` only changes the allocator's parameters; each
        // value is in the range glibc documents for it.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        }
    }
}
