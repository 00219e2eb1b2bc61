//! C emission: a kernel as C a user can ship. `function` prints one complete
//! translation unit (includes, the argument types, the runtime helpers, the
//! kernel); `header` and `source` print the same as a `.h` / `.c` pair.
//! The loops are printed by the shared printer; this file adds the calling
//! convention around them.
//!
//! The calling convention is the JIT's (`jit/call.rs`): one argument, a
//! `tensor_args_t` holding a table of arrays (`tensor_array_t`: data, len,
//! cap), a table of integer parameters, and a callback that grows result
//! arrays. The struct layouts here match the runtime's `#[repr(C)]` ones, so
//! the optimizing tier (`backend::cc`) runs this very text.

use super::c_copies;
use super::passes;
use super::print::{Dialect, Printer};
use super::*;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

pub fn c_elem(t: ElemTy) -> &'static str {
    match t {
        ElemTy::I32 => "int32_t",
        ElemTy::F64 => "double",
    }
}

const C_KEYWORDS: &[&str] = &[
    "auto", "bool", "break", "case", "char", "const", "continue", "default", "do", "double",
    "else", "enum", "extern", "false", "float", "for", "goto", "if", "inline", "int", "long",
    "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch",
    "true", "typedef", "union", "unsigned", "void", "volatile", "while", "main", "args", "fmin",
    "fmax", "INFINITY", "NAN",
];

/// The C name of a kernel: `f.name` made a valid identifier that no
/// keyword or library name takes.
pub fn symbol(f: &Function) -> String {
    let mut s: String = f
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert_str(0, "kernel_");
    }
    if C_KEYWORDS.contains(&s.as_str()) || s.starts_with("tensor_") {
        s.push_str("_kernel");
    }
    s
}

/// A result array above this size has its zero fills stream past the
/// caches (`tensor_zero_f64` in the C, `jit::call::zero_f64` in the
/// Cranelift tier); `HELPERS` writes the same number.
pub const STREAM_MIN_BYTES: i64 = 64 << 20;

/// Types and macros every kernel shares; guarded so several kernels'
/// headers can be included in one file.
const TYPES: &str = r#"#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef TENSOR_KERNEL_TYPES
#define TENSOR_KERNEL_TYPES
/* One array of a tensor: int32_t elements for index arrays (pos, crd, ...),
   double for values. */
typedef struct tensor_array {
  void *data;
  int64_t len; /* elements in use; a kernel updates it for arrays it grows */
  int64_t cap; /* elements allocated */
} tensor_array_t;

/* Grows array `slot` of `args->arrays` to at least `len` elements, new
   elements zeroed; stores the new data and cap in the table and returns the
   data, or NULL when memory runs out or `len` passes the most elements the
   array's level format can index (the kernel's `max_len`, in its
   realloc_reserve). `runtime` is `args->runtime`. */
typedef void *(*tensor_reserve_fn)(void *runtime, int64_t slot, int64_t len);

/* A kernel's only argument. */
typedef struct tensor_args {
  tensor_array_t *arrays;    /* one entry per array, indexed by the kernel's enum */
  const int64_t *params;     /* one entry per parameter, likewise */
  void *runtime;             /* handed back to `reserve` */
  tensor_reserve_fn reserve; /* called only for arrays the kernel grows */
} tensor_args_t;
#endif
"#;

/// Helpers the kernels call; `static` so each source file has its own.
const HELPERS: &str = r#"#ifndef TENSOR_KERNEL_HELPERS
#define TENSOR_KERNEL_HELPERS
#define TACO_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TACO_MAX(a, b) ((a) > (b) ? (a) : (b))

/* A kernel whose loops ask for what they gather where coordinates are
   scattered is compiled twice, with and without the asks, each copy a
   function of its own (see the kernel's entry point): inlining is forced
   into each copy and kept out of their callers. */
#if defined(__GNUC__) || defined(__clang__)
#define TENSOR_INLINE static inline __attribute__((always_inline))
#define TENSOR_NOINLINE static __attribute__((noinline))
#else
#define TENSOR_INLINE static inline
#define TENSOR_NOINLINE static
#endif

/* A select whose arms are both evaluated, as in the loop IR. Written as a
   mask on the bits, not `c ? a : b`, which gcc may turn into a branch that
   mispredicts where the values test every which way (DIA SpMV on a
   scattered matrix, AMD Zen 3: 3.4 ms against 1.0); the mask keeps it a
   blend and lets the loop vectorize. The same double either way. */
static inline double tensor_select_f64(int c, double a, double b) {
  uint64_t ua, ub, keep = (uint64_t)0 - (uint64_t)(c != 0);
  double r;
  memcpy(&ua, &a, sizeof ua);
  memcpy(&ub, &b, sizeof ub);
  ua = (ua & keep) | (ub & ~keep);
  memcpy(&r, &ua, sizeof r);
  return r;
}
static inline int64_t tensor_select_i64(int c, int64_t a, int64_t b) { return c ? a : b; }

/* Ask the caches for `bytes` bytes at `p`, read a few iterations later
   (a dense row chosen by a stored coordinate). A prefetch changes no value
   and never faults; compilers without the builtin skip it. Kernels ask
   only when the array is larger than this: an array a core's L2 cache
   holds gains nothing and pays for the instructions (MTTKRP with factor
   matrices of 1 MB ran 15% slower). */
#define TENSOR_PREFETCH_MIN_BYTES ((int64_t)4 << 20)
static inline void tensor_prefetch(const void *p, int64_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
  for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch((const char *)p + at);
#else
  (void)p;
  (void)bytes;
#endif
}

/* Ask for `bytes` bytes from element `at` of the array at `base` on, which
   a loop reads in order soon (`ir::streams`). The address is reckoned as
   an integer: for the last rows `at` lies past the array's end, where
   pointer arithmetic would be undefined, and a prefetch never faults. */
#define tensor_prefetch_from(base, at, bytes) \
  tensor_prefetch((const void *)((uintptr_t)(base) + (uintptr_t)(at) * sizeof *(base)), (bytes))

/* The fewest rows from which a nest that revisits its rows (DIA's
   diagonals, ELL's slots) runs them in tiles that stay in the L1 cache.
   On AMD Zen 3 and later, whose last-level cache serves a core fast,
   untiled passes over a result that cache holds cost less than the tiles'
   restarted streams (the value below assumes 32 MiB of L3, 16 bytes a
   row); on an Intel Xeon or an AMD Zen 1 the tiles pay from tens of
   thousands of rows (DIA SpMV on 1M rows: 0.61x-0.7x the time). The
   target the C is compiled for picks; define it to override (tensorc's
   cc tier defines the value its host measures). */
#ifndef TENSOR_TILE_FROM_ROWS
#if defined(__znver3__) || defined(__znver4__) || defined(__znver5__) || \
    defined(__tune_znver3__) || defined(__tune_znver4__) || defined(__tune_znver5__)
#define TENSOR_TILE_FROM_ROWS ((int64_t)1 << 21)
#else
#define TENSOR_TILE_FROM_ROWS ((int64_t)2048)
#endif
#endif

/* Zero `n` doubles from `p`, part of an array of `len` elements. The
   kernel calls it only for a result it never reads back (it stores each
   value it computes, at most once a position), so where that array is
   larger than a last-level cache the zeros go out with stores that bypass
   the caches: a cached store first reads the line it writes from memory,
   twice the traffic. TTM into a dense result of 444 MB (the bench's
   NELL-2-like tensor, 14% of its positions computed): 0.73x the time. */
#define TENSOR_STREAM_MIN_BYTES ((int64_t)64 << 20)
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
static inline void tensor_zero_f64(double *p, int64_t n, int64_t len) {
  int64_t i = 0;
#if defined(__SSE2__)
  if (len > TENSOR_STREAM_MIN_BYTES / (int64_t)sizeof *p && n >= 64) {
    for (; i < n && ((uintptr_t)(p + i) & 15); i++) p[i] = 0.0;
    for (; i + 2 <= n; i += 2) _mm_stream_pd(p + i, _mm_setzero_pd());
    _mm_sfence();
  }
#else
  (void)len;
#endif
  for (; i < n; i++) p[i] = 0.0;
}

/* Of the coordinates in field `field` of the records of `stride` at `crd`
   (`n` elements; `stride` 1: an array of one level's coordinates), how
   many of 8 windows of 64 positions spread over them fall on cache lines
   of `double` elements that no other coordinate of their window falls on;
   -1 for fewer than 65,536 positions (not sampled: their loops are short,
   and the sample would cost more than it could save). Coordinates that
   follow each other (stencils, banded and FEM matrices) share lines: 5-40%
   of the samples are lines of their own there, 99% on power-law and
   uniform random matrices. */
enum { TENSOR_SAMPLE_WINDOW = 64, TENSOR_SAMPLE_WINDOWS = 8 };
static inline int64_t tensor_sampled_lines(const int32_t *crd, int64_t n, int64_t stride, int64_t field) {
  enum { WINDOW = TENSOR_SAMPLE_WINDOW, WINDOWS = TENSOR_SAMPLE_WINDOWS };
  int64_t positions = n / stride;
  if (positions < 65536 || field >= stride) return -1;
  int64_t lines = 0;
  for (int64_t k = 0; k < WINDOWS; k++) {
    const int32_t *c = crd + (positions - WINDOW) / (WINDOWS - 1) * k * stride + field;
    int32_t line[WINDOW];
    for (int a = 0; a < WINDOW; a++) { /* insertion sort of the lines */
      int32_t v = c[a * stride] >> 3;
      int b = a;
      for (; b > 0 && line[b - 1] > v; b--) line[b] = line[b - 1];
      line[b] = v;
    }
    lines++;
    for (int a = 1; a < WINDOW; a++) lines += line[a] != line[a - 1];
  }
  return lines;
}

/* Whether the coordinates in field `field` of the records of `stride` at
   `crd` (`stride` 1: the whole array) are scattered (`ir::gathers`): more
   than 3 in 4 samples on lines of their own. */
static inline int tensor_scattered(const int32_t *crd, int64_t n, int64_t stride, int64_t field) {
  return tensor_sampled_lines(crd, n, stride, field) * 4 > 3 * TENSOR_SAMPLE_WINDOW * TENSOR_SAMPLE_WINDOWS;
}

/* Whether those coordinates follow each other (`ir::prefetch`): at most 1
   in 4 samples on lines of their own. The rows they choose come in an
   order the hardware fetches in time, and asking for them only costs. */
static inline int tensor_coordinates_follow(const int32_t *crd, int64_t n, int64_t stride, int64_t field) {
  int64_t lines = tensor_sampled_lines(crd, n, stride, field);
  return lines >= 0 && lines * 4 <= TENSOR_SAMPLE_WINDOW * TENSOR_SAMPLE_WINDOWS;
}

/* Make room for `want` elements of array `slot` ahead of a loop that
   appends at most that many: the runtime grows the storage when it is too
   small; the logical length is left as it is. */
static inline void *tensor_reserve_ahead(tensor_args_t *args, int64_t slot, int64_t want, void *data, int64_t *cap) {
  if (want <= *cap) return data;
  data = args->reserve(args->runtime, slot, want);
  if (data) *cap = args->arrays[slot].cap;
  return data;
}

/* Make array `slot` hold `want` elements: the logical length becomes at
   least `want`, and the runtime grows the storage when it is too small. */
static inline void *tensor_reserve(tensor_args_t *args, int64_t slot, int64_t want, void *data, int64_t *len, int64_t *cap) {
  if (want > *len) *len = want;
  return tensor_reserve_ahead(args, slot, want, data, cap);
}
#endif
"#;

/// The tensors' arrays and parameters in slot order, as the runtime passes
/// them (`Function::arrays` / `Function::params` of `passes::for_codegen`).
struct Layout {
    arrays: Vec<(ArrayRef, bool)>,
    params: Vec<ParamRef>,
    grown: BTreeSet<ArrayRef>,
    /// Grown value arrays the kernel never loads from: their zero fills
    /// may stream past the caches (`tensor_zero_f64`).
    streamed: BTreeSet<ArrayRef>,
    /// Arrays of `prefetch` statements and stream hints, whose loops test
    /// their size (see `tensor_prefetch`), and the coordinate arrays that
    /// prefetches read.
    prefetched: BTreeSet<ArrayRef>,
    coords: BTreeSet<ArrayRef>,
    /// Coordinates of `prefetch_gather` statements, each with the
    /// arrays gathered at them (`ir::gathers`).
    gathered: BTreeMap<Coordinates, BTreeSet<ArrayRef>>,
    /// Coordinate arrays of `prefetch` statements, each with the arrays
    /// whose rows they choose (`ir::prefetch`).
    rows_chosen: BTreeMap<Coordinates, BTreeSet<ArrayRef>>,
}

impl Layout {
    fn of(f: &Function) -> Layout {
        let (mut grown, mut prefetched, mut coords) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        let mut gathered: BTreeMap<Coordinates, BTreeSet<ArrayRef>> = BTreeMap::new();
        let mut rows_chosen: BTreeMap<Coordinates, BTreeSet<ArrayRef>> = BTreeMap::new();
        walk_block(&f.body, &mut |s| match s {
            Stmt::Reserve { array, .. } => {
                grown.insert(array.clone());
            }
            Stmt::Prefetch {
                array, coords: c, ..
            } => {
                prefetched.insert(array.clone());
                coords.insert(c.clone());
                rows_chosen
                    .entry(Coordinates::whole(c.clone()))
                    .or_default()
                    .insert(array.clone());
            }
            Stmt::PrefetchStream { array, .. } => {
                prefetched.insert(array.clone());
            }
            Stmt::PrefetchGather {
                array, coords: c, ..
            } => {
                coords.insert(c.array.clone());
                gathered.entry(c.clone()).or_default().insert(array.clone());
            }
            _ => {}
        });
        Layout {
            arrays: f.arrays(),
            params: f.params(),
            grown,
            streamed: f.never_read_results(),
            prefetched,
            coords,
            gathered,
            rows_chosen,
        }
    }
}

fn describe(a: &ArrayRef) -> String {
    match &a.slot {
        Slot::Level(k, name) => format!("level {} `{name}` of {}", k + 1, a.tensor),
        Slot::Vals => format!("values of {}", a.tensor),
        Slot::Scratch(name, _) => format!("scratch `{name}` of {}", a.tensor),
    }
}

/// The part of the header specific to `f`: the calling convention, the
/// slot constants and the prototypes.
fn declarations(f: &Function, l: &Layout) -> String {
    let sym = symbol(f);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "/* {sym}: called as `{sym}(&args)`; returns 0, or 1 when `args.reserve`"
    );
    let _ = writeln!(
        out,
        "   returned NULL (out of memory, or an array past the most elements its\n   \
         level format can index: its `max_len` in {sym}_realloc_reserve)."
    );
    let _ = writeln!(
        out,
        "   args.arrays[{sym}_X] must describe array X (below). Arrays marked `in` are"
    );
    let _ = writeln!(
        out,
        "   only read. Arrays marked `out` are written in place; those also marked"
    );
    let _ = writeln!(
        out,
        "   `grown` may be reallocated through args.reserve, and on return their len"
    );
    let _ = writeln!(
        out,
        "   is the number of elements the kernel produced. For arrays from malloc (or"
    );
    let _ = writeln!(
        out,
        "   NULL with cap 0), set args.reserve = {sym}_realloc_reserve and"
    );
    let _ = writeln!(
        out,
        "   args.runtime = &args. args.params[{sym}_P] holds parameter P."
    );
    let _ = writeln!(
        out,
        "   Every array's len is its number of elements, an input's included."
    );
    let _ = writeln!(
        out,
        "   Input arrays must be well formed for their level formats (pos"
    );
    match f.parallel {
        None => {
            let _ = writeln!(
                out,
                "   nondecreasing, coordinates in range): the kernel does not check them. */"
            );
        }
        Some(mode) => {
            let _ = writeln!(
                out,
                "   nondecreasing, coordinates in range): the kernel does not check them."
            );
            let _ = writeln!(
                out,
                "   The outermost loop runs in shares: a call runs share tensor_thread of"
            );
            let _ = writeln!(
                out,
                "   tensor_threads (0 and 1, or both 0, for the whole loop), computing its"
            );
            let _ = writeln!(
                out,
                "   bounds itself, so calls of different shares may run at the same time."
            );
            match mode {
                Parallel::Rows => {
                    let _ = writeln!(
                        out,
                        "   Shares write disjoint parts of one result: with tensor_phase 0 a call"
                    );
                    let _ = writeln!(out, "   does everything; otherwise call once with phase 1 (sets the result up),");
                    let _ = writeln!(
                        out,
                        "   then each share with phase 2, each with its own copy of args.arrays."
                    );
                }
                Parallel::Partials => {
                    let _ = writeln!(
                        out,
                        "   Shares add into the same positions: give share 0 the result and every"
                    );
                    let _ = writeln!(out, "   other share a result of its own with empty arrays (len and cap 0), then");
                    let _ = writeln!(
                        out,
                        "   add the other results' values into the first, in share order."
                    );
                }
                Parallel::Stitch => {
                    let _ = writeln!(
                        out,
                        "   Shares are rows of a sparse result: give every share a result of its"
                    );
                    let _ = writeln!(
                        out,
                        "   own with empty arrays (len and cap 0); then, in share order, add the"
                    );
                    let _ = writeln!(
                        out,
                        "   shares' pos arrays element by element and concatenate their first"
                    );
                    let _ = writeln!(out, "   pos[last] crd and vals entries.");
                }
            }
            let _ = writeln!(out, "*/");
        }
    }
    let _ = writeln!(out, "enum {sym}_array {{");
    for (a, writes) in &l.arrays {
        let how = match (writes, l.grown.contains(a)) {
            (false, _) => "in",
            (true, false) => "out",
            (true, true) => "out, grown",
        };
        let _ = writeln!(
            out,
            "  {sym}_{}, /* {} {}, {how} */",
            a.c_name(),
            c_elem(a.elem()),
            describe(a)
        );
    }
    let _ = writeln!(out, "  {sym}_array_count\n}};");
    let _ = writeln!(out, "enum {sym}_param {{");
    for p in &l.params {
        let what = match (&p.slot, p.call_name()) {
            (_, Some(CALL_THREAD)) => "the share of the outermost loop this call runs".to_string(),
            (_, Some(CALL_THREADS)) => {
                "the number of shares the outermost loop is split into".to_string()
            }
            (_, Some(_)) => {
                "0: run everything; 1: only the set-up; 2: only this share of the loop".to_string()
            }
            _ => match &p.slot {
                ParamSlot::Level(k, name) => {
                    format!("parameter {name} of level {} of {}", k + 1, p.tensor)
                }
                ParamSlot::Dim(d) => format!("dimension {} of {}", d + 1, p.tensor),
                // (`Function::params` leaves them out: no caller supplies one)
                ParamSlot::Target(t) => format!("the target's {}", t.c_name()),
            },
        };
        let _ = writeln!(out, "  {sym}_{}, /* {what} */", p.c_name());
    }
    let _ = writeln!(out, "  {sym}_param_count\n}};");
    let _ = writeln!(out, "int64_t {sym}(tensor_args_t *args);");
    let _ = writeln!(
        out,
        "void *{sym}_realloc_reserve(void *runtime, int64_t slot, int64_t len);"
    );
    out
}

/// Names a C compiler would confuse with a variable of the loops.
fn taken_names(l: &Layout, sym: &str) -> BTreeSet<String> {
    let mut taken: BTreeSet<String> = C_KEYWORDS.iter().map(|s| s.to_string()).collect();
    taken.insert(sym.to_string());
    for (a, _) in &l.arrays {
        let n = a.c_name();
        taken.insert(format!("{n}_len"));
        taken.insert(format!("{n}_cap"));
        taken.insert(format!("{n}_large"));
        taken.insert(format!("{n}_count"));
        taken.insert(format!("{n}_scattered"));
        taken.insert(n);
    }
    for c in l.gathered.keys() {
        taken.insert(c.c_flag("scattered"));
    }
    taken.extend(c_copies::function_names(sym));
    for p in &l.params {
        taken.insert(p.c_name());
    }
    taken
}

/// The kernel's variables, renamed where a name is taken.
fn c_vars(f: &Function, taken: &BTreeSet<String>) -> Vec<VarInfo> {
    let mut used: BTreeSet<String> = taken.clone();
    f.vars
        .iter()
        .map(|v| {
            let mut name = v.name.clone();
            while used.contains(&name) || name.starts_with("tensor_") {
                name.push('_');
            }
            used.insert(name.clone());
            VarInfo { name, ty: v.ty }
        })
        .collect()
}

/// The line declaring array `a`'s data in a kernel's function (`writes`:
/// the kernel stores to it).
pub(super) fn data_line(sym: &str, a: &ArrayRef, writes: bool) -> String {
    let (n, t) = (a.c_name(), c_elem(a.elem()));
    let constness = if writes { "" } else { "const " };
    format!("  {constness}{t}* restrict {n} = ({constness}{t}*)args->arrays[{sym}_{n}].data;\n")
}

/// The line declaring `a`'s length as `{a}_count`, for the coordinate
/// arrays that prefetches and samples read.
pub(super) fn count_line(sym: &str, a: &ArrayRef) -> String {
    format!(
        "  const int64_t {0}_count = args->arrays[{sym}_{0}].len;\n",
        a.c_name()
    )
}

/// The line declaring whether `a` is large enough to ask for ahead.
pub(super) fn large_line(sym: &str, a: &ArrayRef) -> String {
    format!(
        "  const int {0}_large = args->arrays[{sym}_{0}].len * (int64_t)sizeof *{0} > TENSOR_PREFETCH_MIN_BYTES;\n",
        a.c_name()
    )
}

/// The line sampling coordinates `c` for `flag` with C function `test`,
/// where one of `arrays` (gathered at them, or with rows they choose) is
/// large enough to ask for.
pub(super) fn sample_line(
    flag: &str,
    test: &str,
    c: &Coordinates,
    arrays: &BTreeSet<ArrayRef>,
) -> String {
    let large: Vec<String> = arrays
        .iter()
        .map(|a| format!("{}_large", a.c_name()))
        .collect();
    format!(
        "  const int {} = ({}) && {test}({n}, {n}_count, {}, {});\n",
        c.c_flag(flag),
        large.join(" || "),
        c.stride,
        c.field,
        n = c.array.c_name(),
    )
}

/// The kernel's definition and its realloc-based reserve function.
fn definitions(f: &Function, l: &Layout) -> String {
    let sym = symbol(f);
    let body = f;
    let mut out = String::new();
    // With gathers that ask, the loops are a function of the flags that
    // say where coordinates are scattered, and the kernel samples them
    // and calls one of two copies (`c_copies`).
    let copies = !l.gathered.is_empty();
    match copies {
        true => out += &c_copies::loops_head(&sym, &l.gathered),
        false => out += &format!("int64_t {sym}(tensor_args_t *args) {{\n"),
    }
    for p in &l.params {
        let _ = writeln!(
            out,
            "  const int64_t {0} = args->params[{sym}_{0}];",
            p.c_name()
        );
    }
    for (a, writes) in &l.arrays {
        out += &data_line(&sym, a, *writes);
        let n = a.c_name();
        if l.grown.contains(a) {
            let _ = writeln!(out, "  int64_t {n}_len = args->arrays[{sym}_{n}].len;");
            let _ = writeln!(out, "  int64_t {n}_cap = args->arrays[{sym}_{n}].cap;");
        }
        if l.coords.contains(a) {
            out += &count_line(&sym, a);
        }
        if l.prefetched.contains(a) {
            out += &large_line(&sym, a);
        }
    }
    // Whether the coordinates that choose rows follow each other (the
    // rows they choose are not asked for), sampled only where an array
    // with rows chosen by them is large. Whether gathers' coordinates are
    // scattered is sampled by the copies' caller (`c_copies`).
    for (c, arrays) in &l.rows_chosen {
        out += &sample_line("follows", "tensor_coordinates_follow", c, arrays);
    }
    let vars = c_vars(&body, &taken_names(l, &sym));
    let mut p = Printer::new(&vars, Dialect::C)
        .for_kernel(&sym)
        .streaming(&l.streamed);
    p.block(&body.body, 1);
    out.push_str(&p.finish());
    let write_back = |out: &mut String| {
        for a in &l.grown {
            let _ = writeln!(out, "  args->arrays[{sym}_{0}].len = {0}_len;", a.c_name());
        }
    };
    write_back(&mut out);
    out.push_str("  return 0;\n");
    if !l.grown.is_empty() {
        out.push_str("out_of_memory:\n");
        write_back(&mut out);
        out.push_str("  return 1;\n");
    }
    out.push_str("}\n\n");
    if copies {
        out += &c_copies::entry_point(&sym, &l.gathered);
    }
    let sizes: Vec<String> = l
        .arrays
        .iter()
        .map(|(a, _)| format!("sizeof({})", c_elem(a.elem())))
        .collect();
    // The bounds of `Function::index_limits`, which the runtime's reserve
    // must keep as the JIT's does.
    let max_len: Vec<String> = l
        .arrays
        .iter()
        .map(|(a, _)| match f.index_limits.iter().find(|(b, _)| b == a) {
            Some((_, n)) => n.to_string(),
            None => "INT64_MAX".to_string(),
        })
        .collect();
    let _ = write!(
        out,
        "/* A `tensor_reserve_fn` for arrays allocated with malloc: `runtime` is the\n   \
         tensor_args_t. Grows geometrically and zeroes the new elements. */\n\
         void *{sym}_realloc_reserve(void *runtime, int64_t slot, int64_t len) {{\n  \
         static const size_t elem_size[] = {{{sizes}}};\n  \
         static const int64_t max_len[] = {{{max_len}}};\n  \
         if (slot < 0 || slot >= {sym}_array_count || len > max_len[slot]) return NULL;\n  \
         tensor_array_t *a = &((tensor_args_t *)runtime)->arrays[slot];\n  \
         int64_t cap = a->cap * 2 > len ? a->cap * 2 : len;\n  \
         if (cap < 16) cap = 16;\n  \
         if (cap > max_len[slot]) cap = max_len[slot];\n  \
         if ((uint64_t)cap > SIZE_MAX / elem_size[slot]) return NULL;\n  \
         char *data = (char *)realloc(a->data, (size_t)cap * elem_size[slot]);\n  \
         if (!data) return NULL;\n  \
         memset(data + (size_t)a->cap * elem_size[slot], 0, (size_t)(cap - a->cap) * elem_size[slot]);\n  \
         a->data = data;\n  \
         a->cap = cap;\n  \
         return data;\n}}\n",
        sizes = if sizes.is_empty() { "1".to_string() } else { sizes.join(", ") },
        max_len = if max_len.is_empty() { "0".to_string() } else { max_len.join(", ") },
    );
    out
}

fn banner(f: &Function) -> String {
    let comment = f.body.iter().find_map(|s| {
        if let Stmt::Comment(c) = s {
            Some(c.clone())
        } else {
            None
        }
    });
    let what = comment
        .map(|c| format!(": {}", c.replace("*/", "* /")))
        .unwrap_or_default();
    format!(
        "/* Generated by tensorc: kernel `{}`{what}. */\n",
        symbol(f)
    )
}

/// The kernel as one complete C translation unit: compiles as printed
/// (`cc -std=c99 -c`), and is what the optimizing tier builds.
pub fn function(f: &Function) -> String {
    let f = &passes::for_codegen(f, passes::Backend::C);
    let l = Layout::of(f);
    format!(
        "{}{TYPES}\n{}\n{HELPERS}\n{}",
        banner(f),
        declarations(f, &l),
        definitions(f, &l)
    )
}

/// The header of a `.h` / `.c` pair (`--write-source`).
pub fn header(f: &Function) -> String {
    let f = &passes::for_codegen(f, passes::Backend::C);
    let l = Layout::of(f);
    let guard = format!("{}_H", symbol(f).to_ascii_uppercase());
    format!("{}#ifndef {guard}\n#define {guard}\n\n{TYPES}\n#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n{}\n#ifdef __cplusplus\n}}\n#endif\n\n#endif\n", banner(f), declarations(f, &l))
}

/// The source of a `.h` / `.c` pair; `header_name` is the header's file name.
pub fn source(f: &Function, header_name: &str) -> String {
    let f = &passes::for_codegen(f, passes::Backend::C);
    let l = Layout::of(f);
    format!(
        "{}#include \"{header_name}\"\n\n{HELPERS}\n{}",
        banner(f),
        definitions(f, &l)
    )
}

#[cfg(test)]
mod tests {
    /// The C streams its zero fills above the size the Cranelift tier's
    /// `jit::call::zero_f64` does.
    #[test]
    fn both_tiers_stream_zeros_above_one_size() {
        let line = format!(
            "#define TENSOR_STREAM_MIN_BYTES ((int64_t){} << 20)",
            super::STREAM_MIN_BYTES >> 20
        );
        assert!(super::HELPERS.contains(&line), "{line}");
        assert_eq!(super::STREAM_MIN_BYTES % (1 << 20), 0);
    }

    /// The C's `TENSOR_TILE_FROM_ROWS` (`TargetConstant::TileFromRows`)
    /// holds the row counts the Cranelift tier takes on each host.
    #[test]
    fn both_tiers_tile_from_the_same_rows() {
        use crate::ir::{ParamRef, TargetConstant};
        let name = ParamRef::target(TargetConstant::TileFromRows).c_name();
        assert_eq!(name, "TENSOR_TILE_FROM_ROWS");
        let zen = crate::ir::tile::from_rows(true, None);
        assert_eq!(zen.count_ones(), 1);
        let zen_line = format!("#define {name} ((int64_t)1 << {})", zen.trailing_zeros());
        let other_line = format!(
            "#define {name} ((int64_t){})",
            crate::ir::tile::from_rows(false, None)
        );
        for line in [zen_line, other_line] {
            assert!(super::HELPERS.contains(&line), "{line}");
        }
    }

    /// The C's `tensor_scattered` and `tensor_coordinates_follow` (run
    /// time) and `gathers::lines_of_their_own` (the data a Cranelift kernel
    /// is made for) sample alike: the C calls scattered exactly what has
    /// more than 3 in 4 samples on lines of their own, and following each
    /// other what has at most `gathers::FOLLOWING_LINES`. Skipped without
    /// a C compiler.
    #[test]
    fn the_c_samples_coordinates_as_the_compiler_does() {
        let Ok(cc) = crate::backend::cc::compiler() else {
            eprintln!("skipped: no C compiler");
            return;
        };
        let mut x = 99u64;
        let mut random = |bound: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % bound) as i32
        };
        // Near each other, at random, mixtures about the 3 in 4 line, and
        // too few to sample.
        let arrays: Vec<Vec<i32>> = vec![
            (0..70_000).map(|i| i / 3).collect(),
            (0..100_000).map(|_| random(1 << 20)).collect(),
            (0..80_000)
                .map(|i| if i % 4 == 0 { i } else { random(1 << 24) })
                .collect(),
            (0..80_000)
                .map(|i| if i % 5 == 0 { i } else { random(1 << 24) })
                .collect(),
            // About half: neither scattered nor following each other.
            (0..80_000)
                .map(|i| if i % 2 == 0 { i / 2 } else { random(1 << 24) })
                .collect(),
            (0..65_000).map(|_| random(1 << 20)).collect(),
            // AoS records (row, column): the rows follow each other, the
            // columns are scattered, the whole array is neither.
            (0..160_000)
                .map(|i| if i % 2 == 0 { i / 6 } else { random(1 << 20) })
                .collect(),
        ];
        let dir = std::env::temp_dir().join(format!("tensor_sample_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap(); // ok: test code
        let mut main = String::from("#include <stdio.h>\n#include <stdlib.h>\n");
        main += super::TYPES;
        main += super::HELPERS;
        main += "int main(int argc, char **argv) {\n  for (int a = 1; a < argc; a++) {\n    FILE *f = fopen(argv[a], \"rb\");\n    static int32_t crd[1 << 20];\n    int64_t n = (int64_t)fread(crd, sizeof *crd, 1 << 20, f);\n    fclose(f);\n    for (int k = 0; k < 3; k++) {\n      int64_t stride = k ? 2 : 1, field = k ? k - 1 : 0;\n      printf(\"%d %d \", tensor_scattered(crd, n, stride, field), tensor_coordinates_follow(crd, n, stride, field));\n    }\n    printf(\"\\n\");\n  }\n  return 0;\n}\n";
        std::fs::write(dir.join("sample.c"), main).unwrap(); // ok: test code
        let exe = dir.join("sample");
        let built = std::process::Command::new(&cc.command[0])
            .args(&cc.command[1..])
            .args(["-std=c99", "-O1", "-o"])
            .arg(&exe)
            .arg(dir.join("sample.c"))
            .output()
            .unwrap(); // ok: test code
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
        let files: Vec<_> = (0..arrays.len())
            .map(|k| dir.join(format!("crd{k}")))
            .collect();
        for (a, file) in arrays.iter().zip(&files) {
            let bytes: Vec<u8> = a.iter().flat_map(|c| c.to_le_bytes()).collect();
            std::fs::write(file, bytes).unwrap(); // ok: test code
        }
        let out = std::process::Command::new(&exe)
            .args(&files)
            .output()
            .unwrap(); // ok: test code
        let by_c: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        let by_rust: Vec<String> = arrays
            .iter()
            .map(|a| {
                let mut line = String::new();
                for (stride, field) in [(1, 0), (2, 0), (2, 1)] {
                    let share = super::super::gathers::field_lines_of_their_own(a, stride, field);
                    let scattered =
                        share.is_some_and(|s| s > super::super::gathers::SCATTERED_LINES);
                    let follows =
                        share.is_some_and(|s| s <= super::super::gathers::FOLLOWING_LINES);
                    line += &format!("{} {} ", u8::from(scattered), u8::from(follows));
                }
                line
            })
            .collect();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(by_c, by_rust);
        let whole: Vec<&str> = by_rust.iter().map(|l| &l[..3]).collect();
        assert_eq!(whole, ["0 1", "1 0", "1 0", "1 0", "0 0", "0 0", "0 0"]);
        assert_eq!(by_rust[6], "0 0 0 1 1 0 ");
    }
}
