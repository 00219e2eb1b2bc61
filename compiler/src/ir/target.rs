//! Constants of the machine a kernel's code is built for, where the same
//! loops measured best with different choices on different machines
//! (`ir::tile`'s row count). The IR names them (`ParamRef::target`); each
//! backend gives them their value: the C through a macro that its
//! compiler's target picks (`-march=native` in the cc tier; a user's
//! `-D` overrides it), the Cranelift tier and the interpreter through the
//! host this process runs on (`TargetConstant::host_value`).

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
    /// The macro of the kernel's helpers (`ir::c`) that holds it in the C.
    pub fn c_name(self) -> &'static str {
        match self {
            TargetConstant::TileFromRows => "TENSOR_TILE_FROM_ROWS",
        }
    }

    /// Its value on the host this process runs on.
    pub fn host_value(self) -> i64 {
        match self {
            TargetConstant::TileFromRows => super::tile::from_rows(host_is_zen()),
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

/// Whether this process runs on an AMD Zen core (the vendor AMD or
/// Hygon: every x86-64 core of theirs is a Zen), whose last-level cache
/// measured unlike an Intel Xeon's (`ir::tile`).
pub fn host_is_zen() -> bool {
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
