//! A result array while a kernel runs (`call::Bound`): the elements the
//! kernel may write, grown when it asks (`call::reserve`).
//!
//! Room is zeros, except for arrays the kernel fills in order
//! (`ir::Function::filled_in_order`): theirs is whatever the allocator
//! hands out, and becomes part of the array only up to the length the
//! kernel reports, every element of which it stored. Zeroing a sparse
//! result's first room (the operands' values together) cost a third of a
//! run of CSR add into a fresh result, and the kernel overwrites it all.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};

/// An element type of result arrays, with the bits unzeroed room is
/// filled with when `poison_unzeroed_room` is on.
pub(super) trait Element: Copy + Default {
    const POISON: Self;
}

impl Element for i32 {
    /// No coordinate or position: an element left unwritten fails
    /// validation or shows in the answer.
    const POISON: i32 = i32::MIN;
}

impl Element for f64 {
    const POISON: f64 = f64::NAN;
}

static POISON: AtomicBool = AtomicBool::new(cfg!(debug_assertions));

/// Fill the room of arrays filled in order with `Element::POISON` instead
/// of leaving it as it comes, so a kernel leaving an element unwritten
/// (a wrong `filled_in_order`) gives a wrong answer the differential tests
/// see, not a right one by chance. On in debug builds.
pub fn poison_unzeroed_room(on: bool) {
    POISON.store(on, Ordering::Relaxed);
}

pub(super) enum Room<T> {
    /// `0..len` is the room: the contents, then zeros.
    Zeroed(Vec<T>),
    /// `0..len` is the room; `0..initialized` held the array's contents
    /// when the kernel was called, the rest is uninitialized until the
    /// kernel stores it.
    Unzeroed {
        v: Vec<MaybeUninit<T>>,
        initialized: usize,
    },
}

impl<T: Element> Room<T> {
    /// The room of array `v`: zeroed, or (`in_order`) as it comes.
    pub(super) fn new(v: Vec<T>, in_order: bool) -> Self {
        if !in_order {
            return Room::Zeroed(v);
        }
        let initialized = v.len();
        let mut v = std::mem::ManuallyDrop::new(v);
        // SAFETY: `MaybeUninit<T>` has `T`'s layout, so the allocation is
        // the same; every `T` is a valid `MaybeUninit<T>`, and so is any
        // byte past the length.
        let mut v = unsafe {
            Vec::from_raw_parts(v.as_mut_ptr() as *mut MaybeUninit<T>, v.len(), v.capacity())
        };
        let old = v.len();
        // SAFETY: `MaybeUninit` needs no initialization.
        unsafe { v.set_len(v.capacity()) };
        poison(&mut v[old..]);
        Room::Unzeroed { v, initialized }
    }

    pub(super) fn ptr(&mut self) -> *mut u8 {
        match self {
            Room::Zeroed(v) => v.as_mut_ptr() as *mut u8,
            Room::Unzeroed { v, .. } => v.as_mut_ptr() as *mut u8,
        }
    }

    /// How many elements the kernel may write.
    pub(super) fn len(&self) -> usize {
        match self {
            Room::Zeroed(v) => v.len(),
            Room::Unzeroed { v, .. } => v.len(),
        }
    }

    /// Up to `extra` more elements of room where the vector's allocation
    /// already has them (no reallocation).
    pub(super) fn spare(&mut self, extra: usize) {
        if let Room::Zeroed(v) = self {
            v.resize(v.len() + (v.capacity() - v.len()).min(extra), T::default());
        }
        // Unzeroed room is the whole allocation already.
    }

    /// At least `want` elements of room, asked for on huge pages before
    /// the kernel writes them (`line_aligned`). An empty zeroed array
    /// becomes one zeroed block (`calloc`: large ones come as pages the
    /// system zeroes when first touched, so room never written costs no
    /// time); resizing writes zeros over all of it.
    pub(super) fn grow(&mut self, want: usize) {
        match self {
            Room::Zeroed(v) if v.is_empty() => {
                *v = vec![T::default(); want];
                crate::line_aligned::advise_huge_pages(v);
            }
            Room::Zeroed(v) => {
                v.reserve(want.saturating_sub(v.len()));
                crate::line_aligned::advise_huge_pages(v.spare_capacity_mut());
                v.resize(want, T::default());
            }
            Room::Unzeroed { v, .. } => {
                let old = v.len();
                // An empty vector allocates uninitialized, which the global
                // allocator puts on huge pages itself; a grown one moves
                // its contents, room included, as `realloc` does.
                v.reserve_exact(want.saturating_sub(old));
                crate::line_aligned::advise_huge_pages(v.spare_capacity_mut());
                // SAFETY: `MaybeUninit` needs no initialization.
                unsafe { v.set_len(v.capacity()) };
                poison(&mut v[old..]);
            }
        }
    }

    /// The array the kernel left, `len` elements long (cut to the room).
    ///
    /// # Safety
    /// For unzeroed room, the kernel stored every element from the length
    /// the array had when it was called up to `len`
    /// (`ir::Function::filled_in_order` proves it of a kernel that returned
    /// success).
    pub(super) unsafe fn into_array(self, len: usize) -> Vec<T> {
        match self {
            Room::Zeroed(mut v) => {
                v.truncate(len);
                v
            }
            Room::Unzeroed { v, .. } => {
                let len = len.min(v.len());
                let mut v = std::mem::ManuallyDrop::new(v);
                // SAFETY: the layouts agree (see `new`), and elements
                // `0..len` are initialized: below `initialized` they were
                // before the call, the rest the kernel stored (the caller's
                // promise).
                Vec::from_raw_parts(v.as_mut_ptr() as *mut T, len, v.capacity())
            }
        }
    }

    /// The array as it was before the call, where the kernel failed
    /// (stopped at a refused allocation, its stores unfinished): zeroed
    /// room keeps what was written, unzeroed room only what was there.
    pub(super) fn into_array_after_failure(self, len: usize) -> Vec<T> {
        let keep = match &self {
            Room::Zeroed(_) => len,
            Room::Unzeroed { initialized, .. } => *initialized,
        };
        // SAFETY: zeroed room is initialized throughout, and unzeroed room
        // below `initialized` was before the call.
        unsafe { self.into_array(keep) }
    }
}

fn poison<T: Element>(room: &mut [MaybeUninit<T>]) {
    if POISON.load(Ordering::Relaxed) {
        room.fill(MaybeUninit::new(T::POISON));
    }
}
