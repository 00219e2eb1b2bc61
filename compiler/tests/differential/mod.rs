//! Differential testing at scale: seeded cases from templates (unions of
//! products, nonunique operands, results on the right-hand side, SpGEMM,
//! transposes, conversions, 3rd-order kernels, 0- and 1-size dimensions,
//! duplicate and unsorted input), each compiled and run through the public
//! API (`execute::prepare`, the JIT) and compared with the dense oracle,
//! and a sparse result's stored positions with the expression's structure
//! (`pattern`: no explicit zero where no term has an entry).
//!
//! Every case ends in one of four classes: pass, refused (a clean error,
//! counted by its normalised message), wrong (exit 0 with a wrong answer,
//! reported with a `tensorc` command line that reproduces it) or crash (a
//! panic, an internal error, a dead or frozen process). Cases run in child
//! processes so that a crash inside a kernel is reported, not fatal.

#![allow(dead_code)]

pub mod case;
pub mod data;
pub mod formats;
pub mod isolate;
pub mod pattern;
pub mod report;
pub mod rng;
pub mod run;
pub mod templates;

pub use report::Summary;
pub use run::Class;
