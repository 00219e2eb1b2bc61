//! The C of a kernel whose loops ask for what they gather at scattered
//! coordinates (`ir::gathers`), as two copies of its loops, each a
//! function of its own.
//!
//! Those loops are printed twice, with and without the asks, behind a test
//! of whether the coordinates are scattered (`Printer::gathering_nest`).
//! In one function, gcc 13 treats one arm of that test as the cold path:
//! it lays it out of line and keeps its values on the stack. CSR SpMV on
//! the 3-D stencil, whose coordinates follow each other, ran the plain arm
//! 1.14-1.18x as long as a kernel without the asking one (in-process A/B
//! of the C, `examples/ab_kernels.rs`, AMD Zen 1), and hinting the plain
//! arm as the likely one made the power-law matrix's asking arm 1.18x as
//! slow. So the loops become an always-inlined function of the
//! `scattered` flags, called by two functions that are never inlined:
//! the plain copy, with every flag 0, and the asking copy. The kernel's
//! entry point samples the coordinates and calls one of them; each copy
//! is compiled as a kernel of its own (the 3-D stencil's plain copy
//! 0.85x the time of the one-function kernel, the power-law matrix's
//! asking copy 0.98x).

use super::c::{count_line, data_line, large_line, sample_line};
use super::{ArrayRef, Coordinates};
use std::collections::{BTreeMap, BTreeSet};

/// Coordinates sampled for whether they are scattered, each with the
/// arrays gathered at them.
type Gathered = BTreeMap<Coordinates, BTreeSet<ArrayRef>>;

/// The names, besides the kernel's own, this module gives functions.
pub(super) fn function_names(sym: &str) -> [String; 3] {
    [
        format!("{sym}_loops"),
        format!("{sym}_plain"),
        format!("{sym}_asking"),
    ]
}

/// The head of the function that holds the kernel's loops, taking each of
/// `gathered`'s flags as a parameter.
pub(super) fn loops_head(sym: &str, gathered: &Gathered) -> String {
    let flags: Vec<String> = gathered
        .keys()
        .map(|c| format!("const int {}", c.c_flag("scattered")))
        .collect();
    format!(
        "TENSOR_INLINE int64_t {sym}_loops(tensor_args_t *args, {}) {{\n",
        flags.join(", ")
    )
}

/// The two copies and the kernel's entry point, which samples the
/// coordinates and runs the copy that asks where any are scattered.
pub(super) fn entry_point(sym: &str, gathered: &Gathered) -> String {
    let flags: Vec<String> = gathered.keys().map(|c| c.c_flag("scattered")).collect();
    let zeros = vec!["0"; flags.len()].join(", ");
    // One flag: the asking copy knows it is set. More: it takes them all,
    // and tests each where the flags differ.
    let (asking_params, asking_flags, asking_args) = match flags.len() {
        1 => (String::new(), "1".to_string(), String::new()),
        _ => (
            flags.iter().map(|f| format!(", const int {f}")).collect(),
            flags.join(", "),
            flags.iter().map(|f| format!(", {f}")).collect(),
        ),
    };
    let mut out = format!(
        "/* The kernel's loops without asks for the elements they gather, and with
   them: each compiled as a function of its own, so that the C compiler
   treats neither as the cold path. */
TENSOR_NOINLINE int64_t {sym}_plain(tensor_args_t *args) {{
  return {sym}_loops(args, {zeros});
}}

TENSOR_NOINLINE int64_t {sym}_asking(tensor_args_t *args{asking_params}) {{
  return {sym}_loops(args, {asking_flags});
}}

int64_t {sym}(tensor_args_t *args) {{
"
    );
    let coords: BTreeSet<&ArrayRef> = gathered.keys().map(|c| &c.array).collect();
    let large: BTreeSet<&ArrayRef> = gathered.values().flatten().collect();
    for a in coords.union(&large) {
        out += &data_line(sym, a, false);
        if coords.contains(a) {
            out += &count_line(sym, a);
        }
        if large.contains(a) {
            out += &large_line(sym, a);
        }
    }
    for (c, arrays) in gathered {
        out += &sample_line("scattered", "tensor_scattered", c, arrays);
    }
    out += &format!(
        "  if ({}) return {sym}_asking(args{asking_args});\n  return {sym}_plain(args);\n}}\n\n",
        flags.join(" || ")
    );
    out
}
