//! Constants of the machine a kernel's code is built for, where the same
//! loops measured best with different choices on different machines
//! (`ir::tile`'s row count). The IR names them (`ParamRef::target`); each
//! backend gives them their value: the C through a macro that its
//! compiler's target picks (a user's `-D` overrides it; the cc tier
//! defines the host's value, `host_defines`), the Cranelift tier and the
//! interpreter through the host this process runs on
//! (`TargetConstant::host_value`).

use super::{passes::Backend, Expr, ParamRef};
use std::sync::OnceLock;

/// A constant of the target (`ParamSlot::Target`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetConstant {
    /// The fewest rows from which a nest that revisits its rows runs them
    /// in tiles (`ir::tile::from_rows`).
    TileFromRows,
}

impl TargetConstant {
    pub const ALL: [TargetConstant; 1] = [TargetConstant::TileFromRows];

    /// The macro of the kernel's helpers (`ir::c`) that holds it in the C.
    pub fn c_name(self) -> &'static str {
        match self {
            TargetConstant::TileFromRows => "TENSOR_TILE_FROM_ROWS",
        }
    }

    /// Its value on the host this process runs on.
    pub fn host_value(self) -> i64 {
        match self {
            TargetConstant::TileFromRows => {
                super::tile::from_rows(host_is_zen3_or_later(), host_last_level_cache())
            }
        }
    }

    /// The constant as `backend` reads it: the C's macro, or the host's
    /// value written in.
    pub fn for_backend(self, backend: Backend) -> Expr {
        match backend {
            Backend::C => Expr::Param(ParamRef::target(self)),
            Backend::Cranelift => Expr::Int(self.host_value()),
        }
    }
}

/// The C compiler's `-D` of every constant at the host's value, so that
/// the cc tier's code makes the choices the Cranelift tier's does here.
pub fn host_defines() -> Vec<String> {
    TargetConstant::ALL
        .iter()
        .map(|c| format!("-D{}={}", c.c_name(), c.host_value()))
        .collect()
}

/// Bytes of the largest data cache of the core this process runs on (its
/// last level, shared or not), from `cpuid`'s deterministic cache
/// parameters: leaf 4 on Intel, 0x8000001D on AMD and Hygon, alike in
/// layout. What the core reaches, not the whole package: an EPYC of
/// several core complexes lists the L3 of its own complex there (8 MiB on
/// a Zen 1, where glibc's `sysconf` adds up the package's 64 MiB). `None`
/// where `cpuid` does not say.
pub fn host_last_level_cache() -> Option<u64> {
    static BYTES: OnceLock<Option<u64>> = OnceLock::new();
    *BYTES.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__cpuid, __cpuid_count};
            #[allow(unused_unsafe)]
            let (max_basic, max_extended) = unsafe { (__cpuid(0).eax, __cpuid(0x8000_0000).eax) };
            let leaf = if host_is_zen() {
                (max_extended >= 0x8000_001D).then_some(0x8000_001D)
            } else {
                (max_basic >= 4).then_some(4)
            }?;
            let mut largest = None;
            for sub in 0..16 {
                #[allow(unused_unsafe)]
                let r = unsafe { __cpuid_count(leaf, sub) };
                // EAX bits 0-4: 0 no more caches, 1 data, 2 instruction, 3 unified.
                match r.eax & 0x1f {
                    0 => break,
                    2 => continue,
                    _ => {}
                }
                let line = (r.ebx & 0xfff) as u64 + 1;
                let partitions = ((r.ebx >> 12) & 0x3ff) as u64 + 1;
                let ways = ((r.ebx >> 22) & 0x3ff) as u64 + 1;
                let sets = r.ecx as u64 + 1;
                largest = largest.max(Some(line * partitions * ways * sets));
            }
            largest
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    })
}

/// Whether this process runs on an AMD Zen 3 or later core (family 0x19
/// and up), whose last-level cache measured unlike a Zen 1's or an Intel
/// Xeon's (`ir::tile`). Zen 2 (family 0x17, as Zen 1) is counted with
/// Zen 1, unmeasured.
pub fn host_is_zen3_or_later() -> bool {
    host_is_zen() && host_family().is_some_and(|f| f >= 0x19)
}

/// The x86 family of this process's core (`cpuid` leaf 1, with its
/// extended family added where the base says 0xF). Asked once: in a
/// virtual machine each `cpuid` traps to the hypervisor (1.4 us on the
/// Zen 1 guest), and every compile's tiling asks.
fn host_family() -> Option<u32> {
    static FAMILY: OnceLock<Option<u32>> = OnceLock::new();
    *FAMILY.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            #[allow(unused_unsafe)]
            let eax = unsafe { std::arch::x86_64::__cpuid(1).eax };
            let base = (eax >> 8) & 0xf;
            Some(if base == 0xf {
                base + ((eax >> 20) & 0xff)
            } else {
                base
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    })
}

/// Whether this process runs on an AMD Zen core (the vendor AMD or
/// Hygon: every x86-64 core of theirs is a Zen).
fn host_is_zen() -> bool {
    static ZEN: OnceLock<bool> = OnceLock::new();
    *ZEN.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            // Leaf 0 of `cpuid`, which every x86-64 core has: the vendor,
            // in EBX, EDX, ECX.
            #[allow(unused_unsafe)]
            let r = unsafe { std::arch::x86_64::__cpuid(0) };
            let vendor: Vec<u8> = [r.ebx, r.edx, r.ecx]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            vendor == b"AuthenticAMD" || vendor == b"HygonGenuine"
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}
