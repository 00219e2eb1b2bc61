//! Constants of the machine a kernel's code is built for, where the same
//! loops measured best with different choices on different machines
//! (`ir::tile`'s row count). The IR names them (`ParamRef::target`); each
//! backend gives them their value: the C through a macro that its
//! compiler's target picks (`-march=native` in the cc tier; a user's
//! `-D` overrides it), the Cranelift tier and the interpreter through the
//! host this process runs on (`value`).

use super::{passes::Backend, Expr, ParamRef};
use std::sync::OnceLock;

/// The constant `name` as `backend` reads it: the C's macro, or the
/// host's value written in.
pub fn constant(name: &'static str, backend: Backend) -> Expr {
    match backend {
        Backend::C => Expr::Param(ParamRef::target(name)),
        Backend::Cranelift => Expr::Int(value(name)),
    }
}

/// The host's value of the constant `name`.
pub fn value(name: &str) -> i64 {
    match name {
        super::tile::FROM_ROWS => super::tile::from_rows(host_is_zen()),
        _ => unreachable!("no target constant {name}"),
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
