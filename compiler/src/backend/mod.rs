//! Choosing a kernel's backend. Two tiers run the same loop IR: Cranelift
//! (`jit`), which compiles in about a millisecond, and the system C compiler
//! (`cc`), which takes a fraction of a second but makes faster loops. The
//! command line and the language server both choose through this module.

pub mod cc;

use crate::ir::Function;
use crate::jit::{self, CompiledKernel, Tier};

/// The backend a user asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Choice {
    /// Always Cranelift.
    Cranelift,
    /// Always the C compiler; an error when there is none.
    Cc,
    /// The C compiler when there is one (built in the background while
    /// Cranelift serves), else Cranelift.
    #[default]
    Auto,
}

impl Choice {
    pub fn parse(s: &str) -> Option<Choice> {
        match s.to_ascii_lowercase().as_str() {
            "cranelift" | "jit" => Some(Choice::Cranelift),
            "cc" | "c" => Some(Choice::Cc),
            "auto" => Some(Choice::Auto),
            _ => None,
        }
    }
}

/// The tier that will serve a choice, with a note when `auto` falls back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub tier: Tier,
    /// One line for the user (without `note: `), e.g. why there is no cc tier.
    pub note: Option<String>,
}

/// Which tier serves `choice` on this machine.
pub fn resolve(choice: Choice) -> Result<Resolved, String> {
    match choice {
        Choice::Cranelift => Ok(Resolved {
            tier: Tier::Cranelift,
            note: None,
        }),
        Choice::Cc => cc::compiler().map(|_| Resolved {
            tier: Tier::Cc,
            note: None,
        }),
        Choice::Auto => Ok(match cc::compiler() {
            Ok(_) => Resolved {
                tier: Tier::Cc,
                note: None,
            },
            Err(e) => Resolved {
                tier: Tier::Cranelift,
                note: Some(format!("{e}: using the Cranelift tier only")),
            },
        }),
    }
}

/// How timing runs of a `.tensor` kernel choose their tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierPolicy {
    pub choice: Choice,
    /// Whether `auto` may wait for the C compiler (a command-line run),
    /// or takes the cc tier only where a build is cached and runs the
    /// Cranelift tier meanwhile (the editor, which builds in the
    /// background).
    pub wait: bool,
}

impl TierPolicy {
    /// The cc tier's code for `f` when this policy runs it now, else None
    /// (Cranelift). `cc` without a C compiler is an error.
    pub fn cc_code(self, f: &Function) -> Result<Option<CompiledKernel>, String> {
        match self.choice {
            Choice::Cranelift => Ok(None),
            Choice::Cc => cc::compile(f).map(Some),
            Choice::Auto => match cc::compiler() {
                Ok(_) if self.wait || cc::is_cached(f) => cc::compile(f).map(Some),
                _ => Ok(None),
            },
        }
    }

    /// Whether building `f`'s cc tier in the background would serve later
    /// runs: `auto` without waiting, a C compiler present, no build cached.
    pub fn worth_building(self, f: &Function) -> bool {
        self.choice == Choice::Auto && !self.wait && cc::compiler().is_ok() && !cc::is_cached(f)
    }
}

/// Compile `f` for `tier`, blocking until it is ready.
pub fn compile(f: &Function, tier: Tier) -> Result<CompiledKernel, String> {
    match tier {
        Tier::Cranelift => jit::compile(f),
        Tier::Cc => cc::compile(f),
    }
}
