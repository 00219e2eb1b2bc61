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

impl MemoryLimit {
    /// `MemAvailable` from /proc/meminfo (read at most every 100 ms), or
    /// 8 GiB when it cannot be read.
    pub fn available() -> Self {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, bytes)) = *last {
            if at.elapsed() < FRESH {
                return MemoryLimit(bytes);
            }
        }
        let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kb = text
            .lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok());
        let bytes = kb.map_or(8 << 30, |kb| kb * 1024);
        *last = Some((Instant::now(), bytes));
        MemoryLimit(bytes)
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
    let limit = MemoryLimit::available().0 as u128;
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
