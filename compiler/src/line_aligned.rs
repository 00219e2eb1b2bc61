//! A global allocator that puts every large block on a cache-line
//! boundary, and asks for huge pages for very large ones it hands out
//! uninitialized (`advise_huge_pages`); the binaries (`tensorc`,
//! `tensor-lsp`) install it.
//!
//! Why: a tensor's arrays are `Vec`s, and the system allocator returns
//! large blocks 16 bytes past a page boundary (glibc's header of an
//! `mmap`ed chunk). A row of 32 doubles then spans five cache lines instead
//! of four, and every 512-bit load or store of it that gcc's vector loops
//! make splits across two lines. Aligned to 64 bytes, the cc tier runs
//! SpDM from COO with 32 dense columns 13% faster on the 3-D stencil and
//! 17-20% on the power-law matrix of `bench/run.py`, DIA SpMV on the 3-D
//! stencil 2-14% faster (noisy); other kernels are unchanged.
//!
//! Blocks under `LARGE` bytes keep the alignment they ask for: most are
//! small, and a line apiece would waste memory for nothing. A large block
//! is a system block `HEADER` bytes longer than asked, used from its first
//! line boundary at least 8 bytes in; the 8 bytes before that boundary
//! hold how far in it is. So large blocks keep what the system allocator
//! does for them: `calloc`'s lazily zeroed pages, and `realloc` growing a
//! block in place or by remapping it (glibc's `mremap`), never with a
//! second copy alive. An allocator asking the system for 64-byte alignment
//! instead zeroes with `memset` and reallocates by copying, which doubled
//! the peak memory of packing a large ELL matrix (13.7 -> 24 GB).

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes start on a cache line.
pub const LARGE: usize = 1 << 16;
/// A cache line.
pub const LINE: usize = 64;
/// Extra bytes of a large block: room for the offset and to reach a line.
const HEADER: usize = LINE + 8;

pub struct LineAligned;

/// Whether a block of layout `l` is placed on a line here.
fn large(l: Layout) -> bool {
    l.size() >= LARGE && l.align() <= 16
}

/// The system block under a large block of `size` bytes.
fn system_layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, 16).ok()
}

/// The first line boundary at least 8 bytes into the system block at `raw`,
/// with the distance recorded just before it.
///
/// # Safety
/// `raw` is a system block of at least `HEADER` bytes.
unsafe fn place(raw: *mut u8) -> *mut u8 {
    let off = boundary(raw);
    let p = raw.add(off);
    (p.sub(8) as *mut usize).write_unaligned(off);
    p
}

/// How far into the system block at `raw` its first line boundary at least
/// 8 bytes in lies: 8 to 71 bytes.
fn boundary(raw: *mut u8) -> usize {
    8 + (LINE - (raw as usize + 8) % LINE) % LINE
}

/// How far into its system block the large block at `p` starts.
///
/// # Safety
/// `p` came from `place`.
unsafe fn offset(p: *mut u8) -> usize {
    (p.sub(8) as *const usize).read_unaligned()
}

// SAFETY: a small block is the system's, allocated and freed with the
// caller's layout. A large block `p` lies `offset(p)` bytes (8 to 71) into
// a system block of at least `size + HEADER` bytes and alignment 16
// (exactly that, or one `retained` kept of up to twice that, which glibc's
// `free` and `realloc` handle by its own size whatever layout `dealloc`
// and `realloc` recompute from the caller's); its first `size` bytes are
// the caller's.
unsafe impl GlobalAlloc for LineAligned {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = allocate(l, Zeros::AsTheyCome, |l| System.alloc(l));
        if !p.is_null() {
            advise_range(p, l.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // The header is written before the block: the block stays zero.
        allocate(l, Zeros::Needed, |l| System.alloc_zeroed(l))
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if !large(l) {
            return System.dealloc(p, l);
        }
        // `alloc` made this layout for the same size.
        let sys = system_layout(l.size()).expect("the layout alloc used"); // ok: alloc made it
        let raw = p.sub(offset(p));
        if !crate::retained::keep(raw) {
            System.dealloc(raw, sys)
        }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        // The caller guarantees `new_size` with `l`'s alignment is a layout.
        let new = Layout::from_size_align_unchecked(new_size, l.align());
        match (large(l), large(new)) {
            (false, false) => System.realloc(p, l, new_size),
            (true, true) => {
                let (Some(old_sys), Some(_)) = (system_layout(l.size()), system_layout(new_size))
                else {
                    return std::ptr::null_mut();
                };
                let off = offset(p);
                let raw = System.realloc(p.sub(off), old_sys, new_size + HEADER);
                if raw.is_null() {
                    return raw;
                }
                // Grown to be written (a growing result).
                advise_range(raw, new_size + HEADER);
                // The contents now start `off` bytes into the new system
                // block (kept up to `new_size + HEADER` bytes, past
                // `off + min(size, new_size)`); move them to its boundary.
                place_after_move(raw, off, l.size().min(new_size))
            }
            // Across `LARGE`: a fresh block of the other kind.
            _ => {
                let q = self.alloc(new);
                if !q.is_null() {
                    std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
                    self.dealloc(p, l);
                }
                q
            }
        }
    }
}

/// Whether a block must come zeroed.
#[derive(Clone, Copy, PartialEq)]
enum Zeros {
    Needed,
    AsTheyCome,
}

/// A block of layout `l` from `system` (the system allocator's `alloc` or
/// `alloc_zeroed`, as `zeros` says): the system's own when small, else
/// placed on a line, in a block kept from an earlier free (`retained`)
/// where one fits and zeros are not needed.
///
/// # Safety
/// `system` returns null or a block of the layout it is given.
unsafe fn allocate(l: Layout, zeros: Zeros, system: impl FnOnce(Layout) -> *mut u8) -> *mut u8 {
    if !large(l) {
        return system(l);
    }
    let Some(sys) = system_layout(l.size()) else {
        return std::ptr::null_mut();
    };
    let kept = match zeros {
        Zeros::AsTheyCome => crate::retained::take(sys.size()),
        Zeros::Needed => None,
    };
    let raw = kept.unwrap_or_else(|| system(sys));
    if raw.is_null() {
        return raw;
    }
    place(raw)
}

/// Blocks of at least this many bytes may ask for transparent huge pages.
pub const HUGE: usize = 4 << 20;

/// Ask the kernel to back `v`'s pages with huge pages where it offers them
/// only on request (`madvise` mode), best before they are first touched.
/// On 4 KiB pages, kernels reading rows of a large operand at random miss
/// the TLB at nearly every row, and hardware prefetchers stop at every
/// page boundary: SpDM from COO on the power-law matrix of `bench/run.py`
/// ran 17% faster with its dense operand on huge pages, SpMV 5-10%. NumPy
/// asks the same for its large arrays.
///
/// Only for arrays that will be written nearly whole: a huge page is
/// resident once any byte of it is touched, so a large zeroed array
/// written sparsely (padded ELL values) would take memory that 4 KiB pages
/// leave untouched (packing ELL of the power-law matrix: 13.8 -> 22 GB
/// peak, and twice the time). The allocator asks for the blocks it is
/// asked for uninitialized, which are written before they are read, and
/// leaves zeroed blocks to their owners.
pub fn advise_huge_pages<T>(v: &mut [T]) {
    advise_range(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v));
}

/// `advise_huge_pages` for a zeroed array that `written` of its elements
/// will be written into: only when that is at least half of them (a dense
/// operand's values, not the padding of ELL or DIA over scattered rows).
pub fn advise_huge_pages_if_mostly_written<T>(v: &mut [T], written: usize) {
    if written.saturating_mul(2) >= v.len() {
        advise_huge_pages(v);
    }
}

fn advise_range(p: *mut u8, len: usize) {
    if len < HUGE {
        return;
    }
    const PAGE: usize = 4096;
    let start = (p as usize).div_ceil(PAGE) * PAGE;
    let end = (p as usize).saturating_add(len) / PAGE * PAGE;
    if end > start {
        // SAFETY: advice about whole pages inside a block this process
        // owns; it changes no contents, and a refusal is ignored.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// The large block in system block `raw`, whose `len` bytes of contents
/// start `off` bytes in: moved to the block's line boundary (`place`) when
/// that is elsewhere, the offset recorded after the move.
///
/// # Safety
/// `raw` is a system block of at least `off + len` and `HEADER` bytes.
unsafe fn place_after_move(raw: *mut u8, off: usize, len: usize) -> *mut u8 {
    let to = boundary(raw);
    if to != off {
        std::ptr::copy(raw.add(off), raw.add(to), len);
    }
    place(raw)
}

/// Whether the mapping holding `p` was advised to use huge pages (its
/// `VmFlags` in `/proc/self/smaps` carry `hg`); `None` where that file
/// cannot tell, or the kernel has no transparent huge pages (it then
/// refuses the advice). Advice covers whole pages: ask about one inside a
/// block.
#[cfg(test)]
pub(crate) fn advised_huge(p: *const u8) -> Option<bool> {
    std::fs::metadata("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let at = p as usize;
    let mut inside = false;
    for line in smaps.lines() {
        let range = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = range.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = lo <= at && at < hi;
                continue;
            }
        }
        if let (true, Some(flags)) = (inside, line.strip_prefix("VmFlags:")) {
            return Some(flags.split_whitespace().any(|f| f == "hg"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unaligned_large_array_is_advised_whole_pages() {
        let mut big = vec![7u8; 3 * HUGE];
        advise_huge_pages(&mut big[1..]);
        match advised_huge(big[big.len() / 2..].as_ptr()) {
            Some(advised) => assert!(advised),
            None => eprintln!("skipped: /proc/self/smaps does not tell"),
        }
        // Advice changes no contents.
        assert!(big.iter().all(|&x| x == 7));
    }

    #[test]
    fn uninitialized_large_blocks_are_advised_and_zeroed_ones_left_alone() {
        // 64 MiB, above glibc's largest mmap threshold: fresh mappings,
        // never memory an earlier block (of another test thread) had advised.
        let size = 64 << 20;
        let l = layout(size);
        unsafe {
            let written = LineAligned.alloc(l);
            let zeroed = LineAligned.alloc_zeroed(l);
            let grown = LineAligned.realloc(LineAligned.alloc(layout(LARGE)), layout(LARGE), size);
            let middle = |p: *mut u8| p.add(size / 2) as *const u8;
            match (
                advised_huge(middle(written)),
                advised_huge(middle(zeroed)),
                advised_huge(middle(grown)),
            ) {
                (Some(w), Some(z), Some(g)) => {
                    assert!(w && !z && g, "written {w}, zeroed {z}, grown {g}")
                }
                _ => eprintln!("skipped: /proc/self/smaps does not tell"),
            }
            LineAligned.dealloc(written, l);
            LineAligned.dealloc(zeroed, l);
            LineAligned.dealloc(grown, l);
        }
    }

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).unwrap() // ok: test code
    }

    fn fill(p: *mut u8, n: usize) {
        for k in 0..n {
            unsafe { *p.add(k) = (k % 251) as u8 };
        }
    }

    fn holds(p: *mut u8, n: usize) -> bool {
        (0..n).all(|k| unsafe { *p.add(k) } == (k % 251) as u8)
    }

    #[test]
    fn large_blocks_start_on_a_line_and_small_ones_are_left_alone() {
        let a = LineAligned;
        for size in [LARGE, LARGE + 8, 3 << 20, 40 << 20] {
            let p = unsafe { a.alloc(layout(size)) };
            assert_eq!(p as usize % LINE, 0, "{size} bytes");
            let z = unsafe { a.alloc_zeroed(layout(size)) };
            assert_eq!(z as usize % LINE, 0, "{size} bytes, zeroed");
            assert!((0..size).step_by(4093).all(|k| unsafe { *z.add(k) } == 0));
            unsafe {
                a.dealloc(p, layout(size));
                a.dealloc(z, layout(size));
            }
        }
        // Small blocks and blocks asking for more than 16 are the system's.
        assert!(!large(layout(LARGE - 8)));
        let page = Layout::from_size_align(LARGE, 4096).unwrap(); // ok: test code
        assert!(!large(page));
        let p = unsafe { a.alloc(page) };
        assert_eq!(p as usize % 4096, 0);
        unsafe { a.dealloc(p, page) };
    }

    /// Growing and shrinking across `LARGE` keeps the contents, and every
    /// large block stays aligned.
    #[test]
    fn realloc_keeps_contents_across_the_threshold() {
        let a = LineAligned;
        let sizes = [
            100,
            LARGE - 8,
            LARGE,
            5 * LARGE + 24,
            40 << 20,
            LARGE + 8,
            64,
            8,
        ];
        let mut p = unsafe { a.alloc(layout(sizes[0])) };
        fill(p, sizes[0]);
        for w in sizes.windows(2) {
            let (from, to) = (w[0], w[1]);
            p = unsafe { a.realloc(p, layout(from), to) };
            assert!(!p.is_null());
            assert!(holds(p, from.min(to)), "{from} -> {to} bytes");
            if to >= LARGE {
                assert_eq!(p as usize % LINE, 0, "{from} -> {to} bytes");
            }
            fill(p, to);
        }
        unsafe { a.dealloc(p, layout(*sizes.last().unwrap())) }; // ok: test code
    }

    /// Contents found at another offset of a system block (as `realloc`
    /// may leave them) move to its line boundary, the offset recorded.
    #[test]
    fn moved_contents_land_on_the_boundary() {
        let sys = system_layout(4096).unwrap(); // ok: test code
        for from in [8, 20, 40, 71] {
            unsafe {
                let raw = System.alloc(sys);
                fill(raw.add(from), 4096);
                let p = place_after_move(raw, from, 4096);
                assert_eq!(p as usize % LINE, 0);
                assert_eq!(offset(p), p as usize - raw as usize);
                assert!(holds(p, 4096), "from offset {from}");
                System.dealloc(raw, sys);
            }
        }
    }

    /// Blocks kept when freed (`retained`) come back for allocations of
    /// about their size, uninitialized ones only, and keep the contents of
    /// whoever holds them through growth and shrinking.
    #[test]
    fn kept_blocks_serve_later_allocations_and_keep_contents() {
        crate::retained::turn_on();
        let a = LineAligned;
        let size = crate::retained::FROM + (3 << 20);
        unsafe {
            let p = a.alloc(layout(size));
            fill(p, size);
            a.dealloc(p, layout(size));
            // Other tests may take it first; whichever block comes, it is
            // aligned, and writable and readable throughout.
            let q = a.alloc(layout(size - 4096));
            assert_eq!(q as usize % LINE, 0);
            fill(q, size - 4096);
            let r = a.realloc(q, layout(size - 4096), 2 * size);
            assert!(holds(r, size - 4096));
            fill(r, 2 * size);
            let s = a.realloc(r, layout(2 * size), LARGE + 8);
            assert!(holds(s, LARGE + 8));
            a.dealloc(s, layout(LARGE + 8));
            // A zeroed block never comes from the kept ones.
            let z = a.alloc_zeroed(layout(size));
            assert!((0..size).step_by(4093).all(|k| *z.add(k) == 0));
            a.dealloc(z, layout(size));
        }
    }

    /// Random allocations, growths, shrinks and frees, small and large,
    /// several alive at once: every block keeps its contents.
    #[test]
    fn random_traffic_keeps_every_block() {
        let a = LineAligned;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut live: Vec<(*mut u8, usize)> = Vec::new();
        for _ in 0..400 {
            let size = match next() % 4 {
                0 => 1 + (next() % 4096) as usize,
                1 => LARGE - 64 + (next() % 128) as usize,
                _ => LARGE + (next() % (4 << 20)) as usize,
            };
            match next() % 3 {
                0 if !live.is_empty() => {
                    let (p, n) = live.swap_remove((next() % live.len() as u64) as usize);
                    assert!(holds(p, n));
                    unsafe { a.dealloc(p, layout(n)) };
                }
                1 if !live.is_empty() => {
                    let k = (next() % live.len() as u64) as usize;
                    let (p, n) = live[k];
                    let q = unsafe { a.realloc(p, layout(n), size) };
                    assert!(holds(q, n.min(size)), "{n} -> {size} bytes");
                    fill(q, size);
                    live[k] = (q, size);
                }
                _ => {
                    let p = unsafe { a.alloc(layout(size)) };
                    fill(p, size);
                    live.push((p, size));
                }
            }
            for &(p, n) in &live {
                if n >= LARGE {
                    assert_eq!(p as usize % LINE, 0);
                }
            }
        }
        for (p, n) in live {
            assert!(holds(p, n));
            unsafe { a.dealloc(p, layout(n)) };
        }
    }
}
