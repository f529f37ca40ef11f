//! A block's shared memory: arrays declared with [`shared!`](crate::shared) (CUDA's
//! `__shared__`) and the dynamic shared memory a launch sizes (`shared_bytes`; CUDA's
//! `extern __shared__`).
//!
//! Each block has its own copy, which every thread of the block reads and writes and no
//! other block sees; it lives as long as the block, and starts with unspecified contents
//! (on the CPU executor, filled with `0xA5` bytes, so a kernel that forgets to initialise
//! it fails there too). On the GPU it is `.shared` memory; on the CPU executor, memory the
//! block's fibers share.
//!
//! Access is safe where the hardware allows: elements are [`Pod`] (any bits are a valid
//! value, so even unspecified contents are), every index is checked (a bad one panics,
//! naming it and the length), and [`SharedSlice::get`]/[`SharedSlice::set`] access one
//! element, which a racing access of another thread can make stale or torn but never
//! invalid (the compiler keeps no element across a barrier, an asm memory clobber). As in CUDA, threads order their accesses with [`sync_threads`] or the
//! block-scope atomics. Only borrowing the memory as a Rust slice is `unsafe`: the caller
//! then promises that no other thread writes it meanwhile.

use core::marker::PhantomData;

use bytemuck::Pod;

use super::block_atomic::BlockAtomic;
use super::{block_dim, sync_threads, thread_rank};
use crate::geometry::MAX_SHARED_BYTES;
use crate::group_arch as arch;

/// A block's shared array of `N` `T`s, declared with [`shared!`](crate::shared).
pub struct SharedArray<T, const N: usize> {
    /// This block's copy: a `cvta.shared` of the array's symbol on the GPU, the executor's
    /// block memory on the CPU.
    base: fn() -> *mut T,
}

impl<T: Pod, const N: usize> SharedArray<T, N> {
    /// Bytes of the array; refuses (at compile time) an empty array or one larger than
    /// [`MAX_SHARED_BYTES`].
    #[doc(hidden)]
    pub const BYTES: usize = {
        let bytes = core::mem::size_of::<T>() * N;
        assert!(bytes > 0, "a shared! array must not be empty");
        assert!(
            bytes <= MAX_SHARED_BYTES as usize,
            "a shared! array is larger than MAX_SHARED_BYTES (48 KiB)"
        );
        bytes
    };

    /// Alignment of the array; refuses (at compile time) an element aligned to more than
    /// 16 bytes.
    #[doc(hidden)]
    pub const ALIGN: usize = {
        let align = core::mem::align_of::<T>();
        assert!(
            align <= 16,
            "a shared! element must be aligned to at most 16 bytes"
        );
        align
    };

    /// The array whose block copy `base` returns; used by [`shared!`](crate::shared).
    #[doc(hidden)]
    pub const fn __new(base: fn() -> *mut T) -> Self {
        SharedArray { base }
    }

    /// This block's copy of `array`, on the CPU executor: the block memory keyed by the
    /// array's address; used by [`shared!`](crate::shared).
    #[doc(hidden)]
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn __host_base(array: &'static Self) -> *mut T {
        arch::block_shared(array as *const Self as usize, Self::BYTES, Self::ALIGN).cast()
    }

    /// This block's copy, as a slice handle.
    #[inline(always)]
    pub fn slice(&self) -> SharedSlice<T> {
        SharedSlice {
            ptr: (self.base)(),
            len: N,
            _elem: PhantomData,
        }
    }

    /// `N`.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        N
    }

    /// Whether `N` is 0 (never: [`shared!`](crate::shared) refuses empty arrays).
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        N == 0
    }
}

/// A run of `T`s in this block's shared memory: a [`SharedArray`]'s
/// [`slice`](SharedArray::slice), [`dynamic_shared`], or part of one
/// ([`sub`](Self::sub)). A copyable handle: every copy names the same memory.
pub struct SharedSlice<T> {
    ptr: *mut T,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T> Clone for SharedSlice<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedSlice<T> {}

impl<T: Pod> SharedSlice<T> {
    /// Elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first element's address (generic on the GPU), for the unsafe operations.
    #[inline(always)]
    pub const fn as_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The address of element `i`, checked.
    #[inline(always)]
    #[track_caller]
    fn at(&self, i: usize) -> *mut T {
        if i >= self.len {
            out_of_bounds(i, self.len);
        }
        // SAFETY: `i < len`, inside the run.
        unsafe { self.ptr.add(i) }
    }

    /// Element `i`. Panics if `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, i: usize) -> T {
        // SAFETY: `at` checked the index; the memory is the block's for its whole life
        // and holds a valid `T` whatever its bits (`Pod`).
        unsafe { self.at(i).read() }
    }

    /// Stores `v` in element `i`. Panics if `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn set(&self, i: usize, v: T) {
        // SAFETY: as in `get`.
        unsafe { self.at(i).write(v) }
    }

    /// The `len` elements from `start`. Panics if they do not fit.
    #[inline(always)]
    #[track_caller]
    pub fn sub(&self, start: usize, len: usize) -> SharedSlice<T> {
        match start.checked_add(len) {
            Some(end) if end <= self.len => SharedSlice {
                // SAFETY: `start <= len`, inside or one past the run.
                ptr: unsafe { self.ptr.add(start) },
                len,
                _elem: PhantomData,
            },
            _ => out_of_range(start, len, self.len),
        }
    }

    /// Stores `v` in every element, the block's threads sharing the work, then
    /// [`sync_threads`]: every thread of the block must call it.
    #[inline(always)]
    pub fn fill_block(&self, v: T) {
        let step = block_dim().volume() as usize;
        let mut i = thread_rank() as usize;
        while i < self.len {
            self.set(i, v);
            i += step;
        }
        sync_threads();
    }

    /// The elements as a slice.
    ///
    /// # Safety
    /// No thread may write them while the slice lives.
    #[inline(always)]
    pub unsafe fn as_slice<'a>(self) -> &'a [T] {
        // SAFETY: the run is valid for the block's life; the caller excludes writers.
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The elements as a mutable slice.
    ///
    /// # Safety
    /// No other thread may read or write them while the slice lives.
    #[inline(always)]
    pub unsafe fn as_mut_slice<'a>(self) -> &'a mut [T] {
        // SAFETY: the run is valid for the block's life; the caller excludes other users.
        unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: Pod + BlockAtomic> SharedSlice<T> {
    /// Adds `v` to element `i` (wrapping), atomically among the block's threads; returns
    /// the old value. Panics if `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn fetch_add(&self, i: usize, v: T) -> T {
        // SAFETY: a checked, aligned element of the block's shared memory.
        unsafe { T::fetch_add(self.at(i), v) }
    }

    /// Stores `v` in element `i` atomically; returns the old value. Panics if `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn swap(&self, i: usize, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::swap(self.at(i), v) }
    }

    /// Stores `v` in element `i` if it equals `cond`, atomically; returns the old value.
    /// Panics if `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn compare_swap(&self, i: usize, cond: T, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::compare_swap(self.at(i), cond, v) }
    }

    /// Stores the smaller of element `i` and `v` atomically; returns the old value.
    /// Panics if `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn fetch_min(&self, i: usize, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::fetch_min(self.at(i), v) }
    }

    /// Stores the larger of element `i` and `v` atomically; returns the old value.
    /// Panics if `i >= len`.
    #[inline(always)]
    #[track_caller]
    pub fn fetch_max(&self, i: usize, v: T) -> T {
        // SAFETY: as in `fetch_add`.
        unsafe { T::fetch_max(self.at(i), v) }
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn out_of_bounds(i: usize, len: usize) -> ! {
    panic!("shared memory index {i} is out of bounds: the shared slice has {len} elements")
}

#[cold]
#[inline(never)]
#[track_caller]
fn out_of_range(start: usize, len: usize, have: usize) -> ! {
    panic!("shared memory range {start}..{start}+{len} is out of bounds: the shared slice has {have} elements")
}

/// This block's dynamic shared memory as `T`s: the launch's `shared_bytes` (16-byte
/// aligned), of which the whole `T`s. Empty when the launch gave none.
#[inline(always)]
pub fn dynamic_shared<T: Pod>() -> SharedSlice<T> {
    const {
        assert!(
            core::mem::align_of::<T>() <= 16,
            "dynamic shared memory is 16-byte aligned"
        )
    };
    let (ptr, bytes) = arch::dynamic_shared();
    SharedSlice {
        ptr: ptr.cast(),
        len: bytes / core::mem::size_of::<T>().max(1),
        _elem: PhantomData,
    }
}

/// Declares block shared arrays (CUDA's `__shared__`), at module level:
///
/// ```ignore
/// symmem_device::shared! {
///     /// Per-expert token counts of this block.
///     static COUNTS: [u32; 256];
/// }
/// // in a kernel:
/// let counts = COUNTS.slice();
/// counts.fill_block(0);
/// counts.fetch_add(expert as usize, 1);
/// ```
/// Each block has its own copy (see [`SharedArray`]); the element type is [`Pod`], at most
/// 16-byte aligned, and an array is at most [`MAX_SHARED_BYTES`] (both checked at compile
/// time). On nvptx64 each array is a `.shared` variable named after the static and the
/// line and column of the `shared!` call, so two arrays of one crate never share a name
/// unless the same name is declared at the same line and column of two files (which the
/// PTX assembler refuses).
#[macro_export]
#[cfg_attr(
    target_arch = "nvptx64",
    allow_internal_unstable(asm_experimental_arch)
)]
macro_rules! shared {
    ($($(#[$meta:meta])* $vis:vis static $name:ident : [$t:ty; $n:expr];)*) => {$(
        #[cfg(target_arch = "nvptx64")]
        ::core::arch::global_asm!(
            concat!(
                ".shared .align {align} .b8 symmem_shared_", stringify!($name),
                "_L", line!(), "C", column!(), "[{bytes}];"
            ),
            align = const $crate::SharedArray::<$t, { $n }>::ALIGN,
            bytes = const $crate::SharedArray::<$t, { $n }>::BYTES,
        );

        $(#[$meta])*
        $vis static $name: $crate::SharedArray<$t, { $n }> = {
            #[inline(always)]
            fn base() -> *mut $t {
                #[cfg(target_arch = "nvptx64")]
                {
                    let p: u64;
                    // SAFETY: the generic address of the array declared above; no memory
                    // access.
                    unsafe {
                        ::core::arch::asm!(
                            concat!(
                                "cvta.shared.u64 {p}, symmem_shared_", stringify!($name),
                                "_L", line!(), "C", column!(), ";"
                            ),
                            p = out(reg64) p,
                            options(pure, nomem, nostack)
                        )
                    };
                    p as *mut $t
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    $crate::SharedArray::<$t, { $n }>::__host_base(&$name)
                }
            }
            $crate::SharedArray::__new(base)
        };
    )*};
}
