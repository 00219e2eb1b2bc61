//! The boundary between Rust and JIT'd code: the crate's `unsafe` lives here,
//! in `line_aligned` (the global allocator) and in `heap_policy` (`mallopt`).
//!
//! Safety argument: a kernel reads arrays only at positions the level
//! functions compute from validated storage (every tensor is validated before
//! the call: pos monotone and within crd, coordinates in range, hash tables
//! consistent), writes only arrays of the result, and grows those through
//! `reserve` before writing past their capacity. The argument block and
//! array slots live on this stack frame for the duration of the call; the
//! buffers they point to are owned here or borrowed immutably.

use super::room::Room;
use crate::ir::{ArrayRef, ElemTy, ParamRef, ParamSlot, Slot};
use crate::storage::{check_allocation, Tensor, Validated};
use cranelift_jit::JITModule;
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum RunError {
    #[error("kernel reads `{0}`, which no tensor provides")]
    Missing(String),
    #[error("kernel writes `{0}`, which is not part of the result")]
    WritesInput(String),
    #[error("the result grew beyond the memory available")]
    OutOfMemory,
    #[error(
        "the result `{tensor}` would hold more than {limit} elements in `{array}`, the most \
         its level format can index"
    )]
    PastIndexLimit {
        tensor: String,
        array: String,
        limit: u64,
    },
    #[error("threads disagree: {0}")]
    Shares(String),
    #[error("kernel compiled for {param} = {compiled}, called with {given}")]
    CompiledFor {
        param: String,
        compiled: i64,
        given: i64,
    },
}

/// Native code and what owns its memory: a Cranelift module, or a shared
/// object built by the system C compiler from `ir::c::function`.
pub(crate) struct Code {
    module: Option<JITModule>,
    /// Kept open while `entry` may be called.
    _library: Option<libloading::Library>,
    /// A copy of the module's code at an offset of `jit::placement`'s
    /// choosing, which `entry` points into; unmapped on drop.
    placed: Option<Mapping>,
    entry: extern "C" fn(*mut Args) -> i64,
}

/// Pages mapped for `Code::placed`.
struct Mapping {
    base: *mut libc::c_void,
    len: usize,
}

impl Code {
    pub(super) fn new(module: JITModule, ptr: *const u8) -> Self {
        // SAFETY: `ptr` is the finalized address of a function compiled with
        // the signature `fn(*mut Args) -> i64` in `jit::compile`.
        let entry =
            unsafe { std::mem::transmute::<*const u8, extern "C" fn(*mut Args) -> i64>(ptr) };
        Code {
            module: Some(module),
            _library: None,
            placed: None,
            entry,
        }
    }

    /// `new`, but with the `len` bytes of code at `ptr` copied to `offset`
    /// bytes past a page boundary (then the module's own copy is freed).
    /// The code must be position-independent but for absolute addresses of
    /// other functions (`jit::compile` checks its relocations). Falls back
    /// to `new` where pages cannot be mapped.
    pub(super) fn placed(module: JITModule, ptr: *const u8, len: usize, offset: usize) -> Self {
        let size = (offset + len).next_multiple_of(4096);
        // SAFETY: a fresh private anonymous mapping, written before it is
        // made executable and never written again; `ptr..ptr + len` is the
        // finalized code of `module`, alive until `free_memory` below.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Code::new(module, ptr);
            }
            let at = (base as *mut u8).add(offset);
            std::ptr::copy_nonoverlapping(ptr, at, len);
            if libc::mprotect(base, size, libc::PROT_READ | libc::PROT_EXEC) != 0 {
                libc::munmap(base, size);
                return Code::new(module, ptr);
            }
            module.free_memory();
            Code {
                module: None,
                _library: None,
                placed: Some(Mapping { base, len: size }),
                // SAFETY: as in `new`, a copy of the same function.
                entry: std::mem::transmute::<*const u8, extern "C" fn(*mut Args) -> i64>(at),
            }
        }
    }

    /// Where the kernel's code starts (for a profiler's map).
    pub(super) fn address(&self) -> usize {
        self.entry as usize
    }

    /// Load `symbol` from the shared object at `path`.
    ///
    /// The object must come from `backend::cc`, which compiles the text of
    /// `ir::c::function` with this very layout (`tensor_args_t` is `Args`,
    /// `tensor_array_t` is `Slot_`) and the signature
    /// `int64_t symbol(tensor_args_t *)`; its kernel obeys the same safety
    /// argument as the JIT's, being the same loop IR.
    pub(crate) fn load_shared_object(path: &std::path::Path, symbol: &str) -> Result<Self, String> {
        // SAFETY: loading runs the object's initialisers; a C translation
        // unit from `ir::c` defines none.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("loading {}: {e}", path.display()))?;
        // SAFETY: the symbol is the kernel defined with exactly this
        // signature (see above); the pointer lives as long as `lib`, which
        // `Code` keeps.
        let entry = unsafe {
            let f: libloading::Symbol<extern "C" fn(*mut Args) -> i64> = lib
                .get(symbol.as_bytes())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            *f
        };
        Ok(Code {
            module: None,
            _library: Some(lib),
            placed: None,
            entry,
        })
    }
}

// SAFETY: through a shared reference only `entry`, a plain function
// pointer, is read (the module, library and mapping are touched only when
// dropped, which takes ownership); the code it points to is immutable once
// finalized and keeps no state between calls, so threads may call it at
// the same time.
unsafe impl Sync for Code {}

impl Drop for Code {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the only pointer into this module's memory is `entry`,
            // which dies with `self`.
            unsafe { m.free_memory() };
        }
        if let Some(m) = self.placed.take() {
            // SAFETY: as above, `entry` dies with `self`.
            unsafe { libc::munmap(m.base, m.len) };
        }
    }
}

/// One array as the kernel sees it; `tensor_array_t` in the emitted C.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Slot_ {
    ptr: *mut u8,
    len: i64,
    cap: i64,
}

/// The kernel's only argument; `tensor_args_t` in the emitted C.
#[repr(C)]
pub struct Args {
    arrays: *mut Slot_,
    params: *const i64,
    runtime: *mut Growable,
    reserve: extern "C" fn(*mut Growable, i64, i64) -> *mut u8,
    /// `reserve` for up to `GROUP_SLOTS` slots at once, packed as
    /// `GROUP_BITS`-bit fields of slot + 1 (the JIT's; the emitted C calls
    /// `reserve` and ignores this field, which comes last for that reason).
    /// A refused allocation leaves that slot's capacity short.
    reserve_group: extern "C" fn(*mut Growable, i64, i64),
}

/// Offsets the translated code loads from, computed from the structures
/// above so the two can never disagree.
pub(super) const ARGS_ARRAYS: i32 = offset_of!(Args, arrays) as i32;
pub(super) const ARGS_PARAMS: i32 = offset_of!(Args, params) as i32;
pub(super) const ARGS_RUNTIME: i32 = offset_of!(Args, runtime) as i32;
pub(super) const ARGS_RESERVE_GROUP: i32 = offset_of!(Args, reserve_group) as i32;
/// How `reserve_group` packs its slots.
pub(super) const GROUP_SLOTS: usize = 4;
pub(super) const GROUP_BITS: u32 = 16;
pub(super) const SLOT_SIZE: i64 = size_of::<Slot_>() as i64;
pub(super) const SLOT_PTR: i32 = offset_of!(Slot_, ptr) as i32;
pub(super) const SLOT_LEN: i32 = offset_of!(Slot_, len) as i32;
pub(super) const SLOT_CAP: i32 = offset_of!(Slot_, cap) as i32;
/// The kernel loads parameters as consecutive i64 and slot fields as the
/// target's pointer type and i64: the layout must match that reading.
const _: () = assert!(
    size_of::<*mut u8>() == size_of::<i64>()
        && SLOT_LEN == SLOT_PTR + 8
        && SLOT_CAP == SLOT_LEN + 8
        && SLOT_SIZE == 24
);

/// A result array while the kernel runs (`room`).
enum Buf {
    I32(Room<i32>),
    F64(Room<f64>),
}

impl Buf {
    fn ptr(&mut self) -> *mut u8 {
        match self {
            Buf::I32(r) => r.ptr(),
            Buf::F64(r) => r.ptr(),
        }
    }
    /// The room: how many elements the kernel may write.
    fn len(&self) -> usize {
        match self {
            Buf::I32(r) => r.len(),
            Buf::F64(r) => r.len(),
        }
    }
    fn spare(&mut self, extra: usize) {
        match self {
            Buf::I32(r) => r.spare(extra),
            Buf::F64(r) => r.spare(extra),
        }
    }
    fn grow(&mut self, want: usize) {
        match self {
            Buf::I32(r) => r.grow(want),
            Buf::F64(r) => r.grow(want),
        }
    }
}

/// The result's arrays while a kernel runs: owned here so they can grow.
pub struct Growable {
    slots: *mut Slot_,
    bufs: BTreeMap<i64, Buf>,
    tensor: String,
    /// Room an empty array that appends grow takes at once: as many
    /// elements as the operands hold values (`first_room`).
    first_room: usize,
    /// The slots of the arrays appends grow (`Function::grown_by_appends`).
    appended: std::collections::BTreeSet<i64>,
    /// The bounded arrays, by slot (`Function::index_limits`): the kernel
    /// is never given room past a bound, so it asks, and is refused.
    limits: BTreeMap<i64, Limit>,
    /// The bound that refused a growth, if one did.
    past_limit: Option<Limit>,
}

/// The most elements a result array may hold, and its name.
#[derive(Clone)]
struct Limit {
    elements: u64,
    array: String,
}

impl Growable {
    /// Why a call whose growth was refused failed.
    fn refusal(&self) -> RunError {
        match &self.past_limit {
            Some(limit) => RunError::PastIndexLimit {
                tensor: self.tensor.clone(),
                array: limit.array.clone(),
                limit: limit.elements,
            },
            None => RunError::OutOfMemory,
        }
    }

    /// The most elements slot `slot`'s array may hold.
    fn limit(&self, slot: i64) -> u64 {
        self.limits.get(&slot).map_or(u64::MAX, |l| l.elements)
    }
}

/// The capacity the kernel is told an array of `room` elements has: at
/// most `limit`, so that it asks for more and is refused.
fn capacity(room: usize, limit: u64) -> i64 {
    (room as u64).min(limit).min(i64::MAX as u64) as i64
}

/// The room an empty result array is first given: the operands' stored
/// values together, the bound of a sum (SciPy's first allocation for `A +
/// B`). A fresh result then takes one zeroed block whose untouched pages
/// cost nothing, where growing by doubling from 16 elements copied the
/// entries over and over and touched twice the memory the kernel writes
/// (CSR add on the 2-D stencil into a fresh result, 5M entries: 100-136 ->
/// 44-49 ms, SciPy 51-54). Only for arrays grown by appends
/// (`Function::grown_by_appends`): one reserved once at its known length
/// gets that length, where a compressed level's `pos` once took the room
/// of all the values.
fn first_room(inputs: &[Validated<'_>]) -> usize {
    inputs.iter().map(|v| v.tensor().vals.len()).sum()
}

/// `reserve` for each slot packed in `slots` (see `Args::reserve_group`):
/// one call where an append grows several arrays. It stops at the first
/// refusal; the kernel finds it by comparing capacities.
extern "C" fn reserve_group(rt: *mut Growable, slots: i64, len: i64) {
    let mut packed = slots as u64;
    while packed != 0 {
        let slot = (packed & ((1 << GROUP_BITS) - 1)) as i64 - 1;
        if reserve(rt, slot, len).is_null() {
            return;
        }
        packed >>= GROUP_BITS;
    }
}

/// The prefetch of `ir::Stmt::Prefetch` for the Cranelift tier, which has
/// no such instruction (through the `preserve_all` trampoline
/// `helper_calls::prefetch_body`): for each position `q` of the coordinate
/// array in slot `slots >> 32`, from `at` up to `at + positions` and below
/// its length, ask the caches for elements `coords[q] * stride ..+ len` of
/// the `f64` array in slot `slots & 0xffff_ffff`.
pub(super) extern "C" fn prefetch_rows(
    table: *const Slot_,
    slots: i64,
    at: i64,
    positions: i64,
    stride: i64,
    len: i64,
) {
    // SAFETY: the kernel passes its own argument table and two of its
    // slots (`translate`), valid for the whole call.
    let (rows, coords) = unsafe {
        (
            *table.add((slots & 0xffff_ffff) as usize),
            *table.add((slots >> 32) as usize),
        )
    };
    if rows.len.saturating_mul(8) <= crate::ir::prefetch::MIN_BYTES {
        return;
    }
    let bytes = len.saturating_mul(8);
    for q in at.max(0)..at.saturating_add(positions).min(coords.len) {
        // SAFETY: `q` is a position below the coordinate array's length.
        let c = unsafe { *(coords.ptr as *const i32).add(q as usize) } as i64;
        // Addresses only: a prefetch reads nothing and never faults,
        // whatever it names.
        let row = (rows.ptr as usize).wrapping_add(c.wrapping_mul(stride).wrapping_mul(8) as usize);
        let mut off = 0;
        while off < bytes {
            prefetch_line(row.wrapping_add(off as usize));
            off += 64;
        }
    }
}

/// The zero fill of a result the kernel never reads back, for the
/// Cranelift tier, which has no stores that bypass the caches (through
/// the `preserve_all` trampoline `helper_calls::zero_body`): the C's
/// `tensor_zero_f64` (`ir::c`), with the same rule. Zeroes `n` doubles
/// from `p`, part of an array of `len` elements; where that array is
/// larger than `ir::c::STREAM_MIN_BYTES`, with streaming stores, since a
/// cached store first reads the line it writes from memory.
pub(super) extern "C" fn zero_f64(p: *mut f64, n: i64, len: i64) {
    let Ok(n) = usize::try_from(n) else { return };
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if len > crate::ir::c::STREAM_MIN_BYTES / 8 && n >= 64 {
        use std::arch::x86_64::{_mm_setzero_pd, _mm_sfence, _mm_stream_pd};
        // SAFETY: the kernel passes `n` elements from `p` inside one of its
        // arrays (the positions its own fill loop would store); SSE2 is
        // part of x86-64.
        unsafe {
            while i < n && (p.add(i) as usize) % 16 != 0 {
                *p.add(i) = 0.0;
                i += 1;
            }
            while i + 2 <= n {
                _mm_stream_pd(p.add(i), _mm_setzero_pd());
                i += 2;
            }
            _mm_sfence();
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = len;
    // SAFETY: as above; all-zero bytes are the double +0.0.
    unsafe { std::ptr::write_bytes(p.add(i), 0, n - i) };
}

/// `prefetch_rows` for x86-64 as the kernels call it, clobbering no
/// register (Cranelift's `preserve_all`), so a call needs no trampoline
/// saving every register around a call into Rust. SpDM from COO into 32
/// columns, Cranelift tier, one call per run of a row: 227-236 -> 194-203
/// ms on the power-law matrix, 152-155 -> 144-148 on the 3-D stencil.
/// It saves the registers it uses and restores them.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
pub(super) extern "C" fn prefetch_rows_preserving(
    table: *const Slot_,
    slots: i64,
    at: i64,
    positions: i64,
    stride: i64,
    len: i64,
) {
    // rdi table, rsi slots, rdx at, rcx positions, r8 stride, r9 len.
    core::arch::naked_asm!(
        "push rax",
        "push rbx",
        "push rcx",
        "push rdx",
        "push rsi",
        "push r10",
        "push r11",
        // r10 = &table[slots & 0xffff_ffff], the rows.
        "mov eax, esi",
        "lea rax, [rax + rax * 2]",
        "lea r10, [rdi + rax * 8]",
        // Nothing to ask for in an array a core's L2 cache holds.
        "mov rax, {min_len}",
        "cmp qword ptr [r10 + {len}], rax",
        "jle 3f",
        "mov r10, qword ptr [r10 + {ptr}]",
        // r11 = &table[slots >> 32], the coordinates.
        "mov rax, rsi",
        "shr rax, 32",
        "lea rax, [rax + rax * 2]",
        "lea r11, [rdi + rax * 8]",
        // rcx = min(at + positions, coords.len), rdx = max(at, 0).
        "add rcx, rdx",
        "mov rax, qword ptr [r11 + {len}]",
        "cmp rcx, rax",
        "cmovg rcx, rax",
        "mov r11, qword ptr [r11 + {ptr}]",
        "xor eax, eax",
        "test rdx, rdx",
        "cmovs rdx, rax",
        // rbx = the bytes of a row.
        "mov rbx, r9",
        "shl rbx, 3",
        "test rbx, rbx",
        "jle 3f",
        "jmp 2f",
        // Each position: its row's lines, `rows + coords[q] * stride * 8`.
        "1:",
        "movsxd rax, dword ptr [r11 + rdx * 4]",
        "imul rax, r8",
        "lea rax, [r10 + rax * 8]",
        "mov rsi, rbx",
        "4:",
        "prefetcht0 byte ptr [rax]",
        "add rax, 64",
        "sub rsi, 64",
        "jg 4b",
        "inc rdx",
        "2:",
        "cmp rdx, rcx",
        "jl 1b",
        "3:",
        "pop r11",
        "pop r10",
        "pop rsi",
        "pop rdx",
        "pop rcx",
        "pop rbx",
        "pop rax",
        "ret",
        min_len = const crate::ir::prefetch::MIN_BYTES / 8,
        ptr = const std::mem::offset_of!(Slot_, ptr),
        len = const std::mem::offset_of!(Slot_, len),
    )
}

fn prefetch_line(address: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint has no effect on memory and never faults.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Grow buffer `slot` to hold at least `len` elements (geometric growth so
/// appends stay amortised O(1)); null when memory would run out.
extern "C" fn reserve(rt: *mut Growable, slot: i64, len: i64) -> *mut u8 {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `rt` points to the `Growable` on `run_kernel`'s frame,
        // alive and not otherwise borrowed during the call.
        let g = unsafe { &mut *rt };
        let limit = g.limit(slot);
        if len.max(0) as u64 > limit {
            g.past_limit = g.limits.get(&slot).cloned();
            return std::ptr::null_mut();
        }
        let Some(buf) = g.bufs.get_mut(&slot) else {
            return std::ptr::null_mut();
        };
        // A group of arrays is grown together when one of them is full
        // (`translate::reserve`); the others may have room already.
        if len.max(0) as usize <= buf.len() {
            return buf.ptr();
        }
        let at_most = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut want = (len.max(0) as usize)
            .max(buf.len() * 2)
            .max(16)
            .min(at_most);
        let bytes = match buf {
            Buf::I32(_) => 4,
            Buf::F64(_) => 8,
        };
        // One growth at a time in the process: the shares of a kernel on
        // several threads would each find the same memory available.
        static GROWING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = GROWING.lock().unwrap_or_else(|e| e.into_inner());
        if check_allocation(&g.tensor, "an output array", want as u128, bytes).is_err() {
            return std::ptr::null_mut();
        }
        // A room the machine cannot give is only not taken.
        let room = g.first_room.min(at_most);
        if buf.len() == 0
            && g.appended.contains(&slot)
            && room > want
            && check_allocation(&g.tensor, "an output array", room as u128, bytes).is_ok()
        {
            want = room;
        }
        buf.grow(want);
        // SAFETY: `slots` has one entry per slot index handed to the kernel.
        let s = unsafe { &mut *g.slots.add(slot as usize) };
        s.ptr = buf.ptr();
        s.cap = capacity(buf.len(), limit);
        s.ptr
    }));
    result.unwrap_or(std::ptr::null_mut())
}

/// The length of result array `a` of `t` (0 for one it lacks).
fn output_len(t: &Tensor, a: &ArrayRef) -> usize {
    match &a.slot {
        Slot::Vals => t.vals.len(),
        Slot::Level(k, name) => t
            .levels
            .get(*k)
            .and_then(|l| l.arrays.get(name))
            .map_or(0, |v| v.len()),
        Slot::Scratch(..) => 0,
    }
}

/// Result array `a` of `t`, moved out for the kernel to write: its room
/// as it comes where the kernel fills it in order (`in_order`), else zeroed.
fn take_array(t: &mut Tensor, a: &ArrayRef, in_order: bool) -> Option<Buf> {
    Some(match &a.slot {
        Slot::Vals => Buf::F64(Room::new(std::mem::take(&mut t.vals), in_order)),
        Slot::Level(k, name) => {
            let v = t
                .levels
                .get_mut(*k)?
                .arrays
                .get_mut(name)
                .map(std::mem::take);
            Buf::I32(Room::new(v.unwrap_or_default(), in_order))
        }
        Slot::Scratch(..) => match a.elem() {
            ElemTy::I32 => Buf::I32(Room::new(Vec::new(), in_order)),
            ElemTy::F64 => Buf::F64(Room::new(Vec::new(), in_order)),
        },
    })
}

/// Put result array `a` back into `t`, `len` elements long, after a call
/// that succeeded (`ok`) or failed.
///
/// # Safety
/// After a successful call, the kernel filled every element of room it
/// was given as it came, up to `len` (`Room::into_array`).
unsafe fn put_array(t: &mut Tensor, a: &ArrayRef, buf: Buf, len: usize, ok: bool) {
    fn cut<T: super::room::Element>(r: Room<T>, len: usize, ok: bool) -> Vec<T> {
        match ok {
            // SAFETY: the caller's promise.
            true => unsafe { r.into_array(len) },
            false => r.into_array_after_failure(len),
        }
    }
    match (&a.slot, buf) {
        (Slot::Vals, Buf::F64(r)) => t.vals = cut(r, len, ok),
        (Slot::Level(k, name), Buf::I32(r)) => {
            let v = cut(r, len, ok);
            if let Some(l) = t.levels.get_mut(*k) {
                l.arrays.insert(name, v);
            }
        }
        // Scratch arrays live for one call.
        _ => {}
    }
}

/// Which part of a kernel one call runs: its call parameters
/// (`ir::CALL_THREAD`, `CALL_THREADS`, `CALL_PHASE`), read only by kernels
/// whose outermost loop runs in shares (`ir::Function::parallel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    pub thread: i64,
    pub threads: i64,
    pub phase: i64,
}

impl Share {
    /// The whole kernel in one call.
    pub const WHOLE: Share = Share {
        thread: 0,
        threads: 1,
        phase: 0,
    };
}

/// A kernel's argument block in the making: parameters, array slots, and
/// the result's arrays, owned here while the kernel runs.
struct Bound {
    params: Vec<i64>,
    slots: Vec<Slot_>,
    growable: Growable,
}

/// The tensor named `name`: the result, or one of `inputs`.
pub fn find_tensor<'t>(
    inputs: impl Iterator<Item = &'t Tensor> + Clone,
    output: &'t Tensor,
) -> impl Fn(&str) -> Option<&'t Tensor> {
    move |name: &str| {
        if name == &*output.name {
            return Some(output);
        }
        inputs.clone().find(|t| &*t.name == name)
    }
}

/// The value the tensors `find` names give parameter `p` (a dimension or
/// a level parameter).
pub fn param_value<'t>(
    p: &ParamRef,
    find: impl Fn(&str) -> Option<&'t Tensor>,
) -> Result<i64, RunError> {
    let t = find(&p.tensor).ok_or_else(|| RunError::Missing(p.c_name()))?;
    let v = match &p.slot {
        ParamSlot::Dim(d) => t.dims.get(*d).map(|&n| n as i64),
        ParamSlot::Level(l, name) => t.levels.get(*l).and_then(|s| s.params.get(name).copied()),
        ParamSlot::Target(_) => None,
    };
    v.ok_or_else(|| RunError::Missing(p.c_name()))
}

impl Bound {
    fn new(
        k: &super::CompiledKernel,
        inputs: &[Validated<'_>],
        output: &mut Tensor,
    ) -> Result<Bound, RunError> {
        let find = |name: &str| inputs.iter().map(|v| v.tensor()).find(|t| t.name == name);
        let tensors = || find_tensor(inputs.iter().map(|v| v.tensor()), output);
        let mut params = Vec::with_capacity(k.params.len());
        for p in &k.params {
            if p.call_name().is_some() {
                params.push(0); // set per call (`with_share`)
                continue;
            }
            params.push(param_value(p, tensors())?);
        }
        for (p, compiled) in &k.fixed_params {
            let given = param_value(p, tensors())?;
            if given != *compiled {
                return Err(RunError::CompiledFor {
                    param: p.c_name(),
                    compiled: *compiled,
                    given,
                });
            }
        }
        let mut slots: Vec<Slot_> = Vec::with_capacity(k.arrays.len());
        let mut growable = Growable {
            slots: std::ptr::null_mut(),
            bufs: BTreeMap::new(),
            tensor: output.name.clone(),
            first_room: first_room(inputs),
            appended: Default::default(),
            limits: BTreeMap::new(),
            past_limit: None,
        };
        for (n, (a, writes)) in k.arrays.iter().enumerate() {
            if *a.tensor == *output.name || matches!(a.slot, Slot::Scratch(..)) {
                let len = output_len(output, a) as i64;
                let in_order = k.filled_in_order.contains(a);
                let mut buf =
                    take_array(output, a, in_order).ok_or_else(|| RunError::Missing(a.c_name()))?;
                // A result reused from an earlier run keeps a little of the
                // room it grew into: a kernel reserving ahead of a row's
                // appends (`lower/ahead.rs`) may ask for a few entries more
                // than the row makes, and an exact fit would then be grown
                // (copied) again at the last row of every run.
                buf.spare(buf.len() / 16 + 1024);
                let slot = n as i64;
                if let Some((_, elements)) = k.index_limits.iter().find(|(b, _)| b == a) {
                    let array = a.c_name();
                    let elements = *elements;
                    growable.limits.insert(slot, Limit { elements, array });
                }
                slots.push(Slot_ {
                    ptr: buf.ptr(),
                    len,
                    cap: capacity(buf.len(), growable.limit(slot)),
                });
                growable.bufs.insert(n as i64, buf);
                if k.grown_by_appends.contains(a) {
                    growable.appended.insert(n as i64);
                }
            } else {
                if *writes {
                    return Err(RunError::WritesInput(a.c_name()));
                }
                let t = find(&a.tensor).ok_or_else(|| RunError::Missing(a.c_name()))?;
                let (ptr, len) = match &a.slot {
                    Slot::Vals => (t.vals.as_ptr() as *mut u8, t.vals.len()),
                    Slot::Level(l, name) => {
                        let v = t
                            .levels
                            .get(*l)
                            .and_then(|s| s.arrays.get(name))
                            .ok_or_else(|| RunError::Missing(a.c_name()))?;
                        (v.as_ptr() as *mut u8, v.len())
                    }
                    Slot::Scratch(..) => unreachable!("scratch arrays are owned above"), // ok: handled by the first branch
                };
                slots.push(Slot_ {
                    ptr,
                    len: len as i64,
                    cap: len as i64,
                });
            }
        }
        Ok(Bound {
            params,
            slots,
            growable,
        })
    }

    /// One call of `k` on this frame's arrays, which the kernel may grow.
    fn call(&mut self, k: &super::CompiledKernel, share: Share) -> Result<i64, RunError> {
        let params = with_share(k, &self.params, &self.slots, share)?;
        self.growable.slots = self.slots.as_mut_ptr();
        let mut args = Args {
            arrays: self.slots.as_mut_ptr(),
            params: params.as_ptr(),
            runtime: &mut self.growable,
            reserve,
            reserve_group,
        };
        Ok((k.code.entry)(&mut args))
    }

    /// Hand the result's arrays back to `output`, cut to the lengths the
    /// kernel produced, after calls that all succeeded (`ok`) or not.
    fn finish(mut self, k: &super::CompiledKernel, output: &mut Tensor, ok: bool) {
        let bufs = std::mem::take(&mut self.growable.bufs);
        for (n, buf) in bufs {
            let a = &k.arrays[n as usize].0;
            let len = self.slots[n as usize].len.max(0) as usize;
            // SAFETY: arrays get room as it comes only where
            // `filled_in_order` proved the kernel stores every element
            // below the length it leaves, which a call that succeeded
            // reports in `len`.
            unsafe { put_array(output, a, buf, len, ok) };
        }
    }
}

/// `params` with the call parameters of `share`; for a kernel compiled
/// without its share search (`jit::shares`), also the bounds of the share,
/// searched here on the call's arrays `slots`.
fn with_share(
    k: &super::CompiledKernel,
    params: &[i64],
    slots: &[Slot_],
    share: Share,
) -> Result<Vec<i64>, RunError> {
    use crate::ir::{CALL_PHASE, CALL_SHARE_BEGIN, CALL_SHARE_END, CALL_THREAD, CALL_THREADS};
    let mut out = params.to_vec();
    for (v, p) in out.iter_mut().zip(&k.params) {
        match p.call_name() {
            Some(CALL_THREAD) => *v = share.thread,
            Some(CALL_THREADS) => *v = share.threads,
            Some(CALL_PHASE) => *v = share.phase,
            _ => {}
        }
    }
    let Some(search) = k.shares.as_ref().filter(|_| share.threads > 1) else {
        return Ok(out);
    };
    let mut memory = CallMemory {
        k,
        params: &out,
        slots,
        reads: Default::default(),
    };
    let bounds = search.bounds(&mut memory).map_err(|e| {
        RunError::Shares(format!(
            "searching the share of thread {}: {e}",
            share.thread
        ))
    })?;
    if let Some((begin, end)) = bounds {
        for (v, p) in out.iter_mut().zip(&k.params) {
            match p.call_name() {
                Some(CALL_SHARE_BEGIN) => *v = begin,
                Some(CALL_SHARE_END) => *v = end,
                _ => {}
            }
        }
    }
    Ok(out)
}

/// A call's arguments as the IR interpreter reads them (`jit::shares`):
/// its parameters, and its arrays with every read checked against their
/// lengths and noted. Nothing is written.
struct CallMemory<'a> {
    k: &'a super::CompiledKernel,
    params: &'a [i64],
    slots: &'a [Slot_],
    reads: std::cell::RefCell<Vec<super::shares::Read>>,
}

impl CallMemory<'_> {
    fn param_named(&self, found: impl Fn(&ParamRef) -> bool) -> Option<i64> {
        let n = self.k.params.iter().position(found)?;
        self.params.get(n).copied()
    }

    /// The bits of element `at` of array number `array`, if it has one.
    fn element(&self, array: usize, at: i64) -> Option<u64> {
        let slot = self.slots.get(array)?;
        let elem = self.k.arrays.get(array)?.0.elem();
        if at < 0 || at >= slot.len {
            return None;
        }
        // SAFETY: `slot` describes a live array of at least `slot.len`
        // elements of its array's element type (`Bound::new` made it from
        // the tensor's vector, which outlives the call), and
        // `0 <= at < len`.
        Some(unsafe {
            match elem {
                ElemTy::I32 => *(slot.ptr as *const i32).add(at as usize) as i64 as u64,
                ElemTy::F64 => (*(slot.ptr as *const f64).add(at as usize)).to_bits(),
            }
        })
    }
}

impl crate::ir::interp::Memory for CallMemory<'_> {
    fn param(&self, p: &ParamRef) -> Result<i64, String> {
        self.param_named(|x| x == p)
            .ok_or_else(|| format!("no parameter {}", p.c_name()))
    }
    fn call_param(&self, name: &str) -> i64 {
        self.param_named(|x| x.call_name() == Some(name))
            .unwrap_or((name == crate::ir::CALL_THREADS) as i64)
    }
    fn load(&self, a: &ArrayRef, at: i64) -> Result<crate::ir::interp::Value, String> {
        use crate::ir::interp::Value;
        let array = self
            .k
            .arrays
            .iter()
            .position(|(x, _)| x == a)
            .ok_or_else(|| format!("no array {}", a.c_name()))?;
        let bits = self
            .element(array, at)
            .ok_or_else(|| format!("{}[{at}] is outside the array", a.c_name()))?;
        self.reads
            .borrow_mut()
            .push(super::shares::Read { array, at, bits });
        Ok(match a.elem() {
            ElemTy::I32 => Value::I(bits as i64),
            ElemTy::F64 => Value::F(f64::from_bits(bits)),
        })
    }
    fn store(&mut self, a: &ArrayRef, _: i64, _: crate::ir::interp::Value) -> Result<(), String> {
        Err(format!(
            "a share search writes no array, here {}",
            a.c_name()
        ))
    }
    fn reserve(&mut self, a: &ArrayRef, _: i64) -> Result<(), String> {
        Err(format!(
            "a share search grows no array, here {}",
            a.c_name()
        ))
    }
    fn reserve_ahead(&mut self, a: &ArrayRef, _: i64) -> Result<(), String> {
        Err(format!(
            "a share search grows no array, here {}",
            a.c_name()
        ))
    }
}

impl super::shares::CallArguments for CallMemory<'_> {
    fn params(&self) -> &[i64] {
        self.params
    }
    fn take_reads(&mut self) -> Vec<super::shares::Read> {
        std::mem::take(self.reads.get_mut())
    }
    fn holds(&self, read: &super::shares::Read) -> bool {
        self.element(read.array, read.at) == Some(read.bits)
    }
}

/// Run a compiled kernel. Inputs carry proof that `storage::validate`
/// accepted them (the kernel reads them without bounds checks); `output` is
/// updated in place (its arrays may be reallocated).
pub fn run_kernel(
    k: &super::CompiledKernel,
    inputs: &[Validated<'_>],
    output: &mut Tensor,
) -> Result<(), RunError> {
    run_share(k, inputs, output, Share::WHOLE)
}

/// `run_kernel` for one share of the kernel's outermost loop.
pub fn run_share(
    k: &super::CompiledKernel,
    inputs: &[Validated<'_>],
    output: &mut Tensor,
    share: Share,
) -> Result<(), RunError> {
    let mut bound = Bound::new(k, inputs, output)?;
    let status = bound.call(k, share);
    let refusal = bound.growable.refusal();
    bound.finish(k, output, matches!(status, Ok(0)));
    if status? != 0 {
        return Err(refusal);
    }
    Ok(())
}

/// The slots of a set-up result, shared by the threads of `run_rows`.
struct SharedSlots(Vec<Slot_>);

// SAFETY: the slots point at the inputs (only read) and at the result's
// arrays, which `run_rows` keeps alive and unmoved until every thread has
// joined; what the threads write through them is argued at `run_rows`.
unsafe impl Sync for SharedSlots {}

impl SharedSlots {
    /// A thread's own copy (a method, so closures capture the whole
    /// `SharedSlots` and not its non-`Sync` field).
    fn copy(&self) -> Vec<Slot_> {
        self.0.clone()
    }
}

/// A runtime with no arrays: `reserve` refuses every request, so a call
/// given it can never move an array other threads are using.
fn frozen(tensor: &str) -> Growable {
    Growable {
        slots: std::ptr::null_mut(),
        bufs: BTreeMap::new(),
        tensor: tensor.to_string(),
        first_room: 0,
        appended: Default::default(),
        limits: BTreeMap::new(),
        past_limit: None,
    }
}

/// Run a `Parallel::Rows` kernel on `threads` threads sharing `output`: a
/// phase-1 call sets the result up (allocates; zero fills, unless each
/// share zeroes its own rows, `lower::parallel::fill`), then each thread
/// runs its share of the loop (phase 2) on a copy of the slots.
///
/// Race freedom: the lowerer marks a kernel `Rows` only when every
/// iteration of the shared loop binds a different coordinate of a result
/// variable, the result is dense (so those coordinates own disjoint
/// positions), and the loop writes nothing but the result's values and
/// reads them only at the position it writes (`lower::parallel`). The
/// shares partition the loop's iterations, so no position is touched by
/// two threads; the rows a share zeroes are those from its first
/// coordinate to the next share's, which partition the rows too. No share can grow an array: the loop holds no `reserve`,
/// and its runtime (`frozen`) would refuse one.
pub fn run_rows(
    k: &super::CompiledKernel,
    inputs: &[Validated<'_>],
    output: &mut Tensor,
    threads: usize,
) -> Result<(), RunError> {
    let mut bound = Bound::new(k, inputs, output)?;
    let set_up = bound.call(
        k,
        Share {
            thread: 0,
            threads: 1,
            phase: 1,
        },
    );
    // Every share's parameters, found before any thread starts.
    let shares = set_up.and_then(|status| match status {
        0 => (0..threads)
            .map(|thread| {
                let share = Share {
                    thread: thread as i64,
                    threads: threads as i64,
                    phase: 2,
                };
                with_share(k, &bound.params, &bound.slots, share)
            })
            .collect::<Result<Vec<_>, _>>(),
        _ => Err(bound.growable.refusal()),
    });
    let status = match &shares {
        Ok(shares) => {
            let shared = SharedSlots(bound.slots.clone());
            let name = output.name.as_str();
            let share = |params: &Vec<i64>| -> i64 {
                let mut slots = shared.copy();
                let mut runtime = frozen(name);
                let mut args = Args {
                    arrays: slots.as_mut_ptr(),
                    params: params.as_ptr(),
                    runtime: &mut runtime,
                    reserve,
                    reserve_group,
                };
                (k.code.entry)(&mut args)
            };
            let share = &share;
            std::thread::scope(|scope| {
                let others: Vec<_> = shares[1..]
                    .iter()
                    .map(|params| scope.spawn(move || share(params)))
                    .collect();
                let mut status = shares.first().map_or(0, share);
                for h in others {
                    // A share that panicked (it cannot: kernels do not unwind)
                    // counts as failed.
                    status |= h.join().unwrap_or(1);
                }
                status
            })
        }
        Err(_) => 1,
    };
    bound.finish(k, output, shares.is_ok() && status == 0);
    shares?;
    if status != 0 {
        return Err(RunError::OutOfMemory);
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The native prefetch reads the table and the coordinates only where
    /// `prefetch_rows` does: positions from `max(at, 0)` below `at +
    /// positions` and the coordinates' length, nothing for small arrays.
    /// A read out of place shows as a crash. The registers it must keep
    /// are checked by the Cranelift kernels that prefetch
    /// (`jit_prefetch::prefetching_kernels_keep_their_registers`).
    #[test]
    fn native_prefetch_reads_only_valid_positions() {
        let rows = vec![0.0f64; (crate::ir::prefetch::MIN_BYTES / 8 + 64) as usize];
        let coords: Vec<i32> = vec![0, 5, 1, 7];
        let slot = |ptr: *const u8, len: usize| Slot_ {
            ptr: ptr as *mut u8,
            len: len as i64,
            cap: len as i64,
        };
        let small = [0.0f64; 8];
        let table = [
            slot(rows.as_ptr() as *const u8, rows.len()),
            slot(coords.as_ptr() as *const u8, coords.len()),
            slot(small.as_ptr() as *const u8, small.len()),
        ];
        let slots = |rows: i64, coords: i64| rows | (coords << 32);
        for (at, positions, len) in [(0, 4, 8), (-3, 8, 8), (2, 100, 1), (4, 8, 8), (0, 4, 0)] {
            prefetch_rows_preserving(table.as_ptr(), slots(0, 1), at, positions, 8, len);
            prefetch_rows(table.as_ptr(), slots(0, 1), at, positions, 8, len);
        }
        prefetch_rows_preserving(table.as_ptr(), slots(2, 1), 0, 4, 8, 8);
    }

    /// `zero_f64` zeroes its range and nothing else, with streaming stores
    /// (an array said to be over `ir::c::STREAM_MIN_BYTES`) and without,
    /// from every alignment, for short ranges (the plain way) and long
    /// ones of odd and even lengths; nothing for an empty or negative one.
    #[test]
    fn zero_fills_cover_their_range_and_nothing_else() {
        let large = crate::ir::c::STREAM_MIN_BYTES / 8 + 1;
        let mut a = vec![1.5f64; 4096];
        for len in [large, 100] {
            for start in [0usize, 1, 2, 3, 7, 1001] {
                for n in [-1i64, 0, 1, 63, 64, 65, 128, 1001] {
                    a.fill(1.5);
                    zero_f64(a[start..].as_mut_ptr(), n, len);
                    let end = start + n.max(0) as usize;
                    for (q, x) in a.iter().enumerate() {
                        let want = if (start..end).contains(&q) { 0.0 } else { 1.5 };
                        assert_eq!(*x, want, "len {len} start {start} n {n}: element {q}");
                    }
                }
            }
        }
    }
}
