//! Refusing allocations that cannot fit, before they are attempted: an
//! oversized dense output must be an error message, not an OOM abort.

use super::StorageError;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most bytes one tensor may claim: what the machine has available.
#[derive(Clone, Copy, Debug)]
pub struct MemoryLimit(pub u64);

/// How long a reading of /proc/meminfo stands: reading it costs about
/// 30 us, more than packing a small result, and packing asks several times.
const FRESH: Duration = Duration::from_millis(100);

static LAST: Mutex<Option<(Instant, u64)>> = Mutex::new(None);

/// Requests from this many bytes on read the machine afresh: the reading
/// costs nothing next to touching them, and one taken by this process a
/// moment before (another share's result) must count.
const LARGE_REQUEST: u128 = 64 << 20;

impl MemoryLimit {
    /// What the machine can still give this process: `MemAvailable` from
    /// /proc/meminfo less the memory this process has claimed and not yet
    /// touched (read at most every 100 ms), or 8 GiB when it cannot be
    /// read.
    pub fn available() -> Self {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, bytes)) = *last {
            if at.elapsed() < FRESH {
                return MemoryLimit(bytes);
            }
        }
        let bytes = read_available();
        *last = Some((Instant::now(), bytes));
        MemoryLimit(bytes)
    }

    /// `available`, read afresh for a request of `bytes` that is large.
    fn for_request(bytes: u128) -> Self {
        if bytes < LARGE_REQUEST {
            return Self::available();
        }
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = read_available();
        *last = Some((Instant::now(), fresh));
        MemoryLimit(fresh)
    }
}

/// `MemAvailable` less this process's untouched claims. The kernel counts
/// memory when it is first touched, not when it is allocated: two shares
/// of a kernel that each reserve a result of half the machine both find it
/// available, and the process is killed when both have written theirs.
fn read_available() -> u64 {
    let machine = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let Some(available) = kb_field(&machine, "MemAvailable:") else {
        return 8 << 30;
    };
    available.saturating_sub(untouched_claims())
}

/// Field `name` of a /proc listing, given in kB, in bytes.
fn kb_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// Bytes this process has allocated but not yet touched: its private
/// writable memory (`VmData`) less what of it is resident (`RssAnon`).
/// Freed memory the allocator keeps counts as claimed: this errs towards
/// refusing.
fn untouched_claims() -> u64 {
    let own = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    match (kb_field(&own, "VmData:"), kb_field(&own, "RssAnon:")) {
        (Some(data), Some(resident)) => data.saturating_sub(resident),
        _ => 0,
    }
}

/// Check that `elements` items of `elem_bytes` each fit in memory.
pub fn check_allocation(
    tensor: &str,
    what: &str,
    elements: u128,
    elem_bytes: u128,
) -> Result<(), StorageError> {
    let bytes = elements.saturating_mul(elem_bytes);
    let limit = MemoryLimit::for_request(bytes).0 as u128;
    if bytes > limit {
        return Err(StorageError::TooLarge {
            tensor: tensor.to_string(),
            what: what.to_string(),
            bytes,
            limit,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory allocated and not yet written counts against what is
    /// available, and stops counting as claimed once written: the
    /// kernel's own accounting would see it only then.
    #[test]
    fn untouched_allocations_count_until_written() {
        if !std::path::Path::new("/proc/self/status").exists() {
            eprintln!("skipped: no /proc/self/status on this system");
            return;
        }
        const BYTES: usize = 512 << 20;
        let before = untouched_claims();
        // black_box: the allocation must happen before the reading, which
        // the optimizer would otherwise be free to move it past.
        let mut claim: Vec<u8> = std::hint::black_box(Vec::with_capacity(BYTES));
        let claimed = untouched_claims();
        assert!(
            claimed >= before + (BYTES as u64) * 3 / 4,
            "{before} -> {claimed}"
        );
        claim.resize(BYTES, 1);
        let written = untouched_claims();
        assert!(
            written + (BYTES as u64) / 2 <= claimed,
            "{claimed} -> {written}"
        );
        // A large request reads afresh, so the claim shows at once.
        drop(claim);
        let big = std::hint::black_box(Vec::<u8>::with_capacity(BYTES));
        let limit = MemoryLimit::for_request(BYTES as u128).0;
        let fresh = read_available();
        assert!(
            limit.abs_diff(fresh) < (BYTES as u64) / 4,
            "{limit} vs {fresh}"
        );
        drop(big);
    }
}
