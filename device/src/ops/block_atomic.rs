//! Block-scope atomics (CUDA's `atomicAdd_block` family): atomic among the threads of one
//! block only, for shared memory or for global memory that only this block updates;
//! relaxed (they order nothing: a `sync_threads` publishes what they counted).
//! `atom.relaxed.cta` on the GPU, plain Rust atomics on the CPU executor.

use crate::group_arch as arch;

mod sealed {
    pub trait Sealed {}
}

/// An integer the block-scope atomics update: `u32`, `i32`, `u64`, `i64`.
pub trait BlockAtomic: Copy + sealed::Sealed {
    /// See [`block_fetch_add`].
    ///
    /// # Safety
    /// As [`block_fetch_add`].
    #[doc(hidden)]
    unsafe fn fetch_add(p: *mut Self, v: Self) -> Self;
    /// See [`block_swap`].
    ///
    /// # Safety
    /// As [`block_fetch_add`].
    #[doc(hidden)]
    unsafe fn swap(p: *mut Self, v: Self) -> Self;
    /// See [`block_compare_swap`].
    ///
    /// # Safety
    /// As [`block_fetch_add`].
    #[doc(hidden)]
    unsafe fn compare_swap(p: *mut Self, cond: Self, v: Self) -> Self;
    /// See [`block_fetch_min`].
    ///
    /// # Safety
    /// As [`block_fetch_add`].
    #[doc(hidden)]
    unsafe fn fetch_min(p: *mut Self, v: Self) -> Self;
    /// See [`block_fetch_max`].
    ///
    /// # Safety
    /// As [`block_fetch_add`].
    #[doc(hidden)]
    unsafe fn fetch_max(p: *mut Self, v: Self) -> Self;
}

macro_rules! block_atomic {
    ($t:ty, $add:ident, $exch:ident, $cas:ident, $min:ident, $max:ident) => {
        impl sealed::Sealed for $t {}
        impl BlockAtomic for $t {
            #[inline(always)]
            unsafe fn fetch_add(p: *mut $t, v: $t) -> $t {
                // SAFETY: forwarded from the caller.
                unsafe { arch::$add(p, v) }
            }
            #[inline(always)]
            unsafe fn swap(p: *mut $t, v: $t) -> $t {
                // SAFETY: forwarded from the caller.
                unsafe { arch::$exch(p, v) }
            }
            #[inline(always)]
            unsafe fn compare_swap(p: *mut $t, cond: $t, v: $t) -> $t {
                // SAFETY: forwarded from the caller.
                unsafe { arch::$cas(p, cond, v) }
            }
            #[inline(always)]
            unsafe fn fetch_min(p: *mut $t, v: $t) -> $t {
                // SAFETY: forwarded from the caller.
                unsafe { arch::$min(p, v) }
            }
            #[inline(always)]
            unsafe fn fetch_max(p: *mut $t, v: $t) -> $t {
                // SAFETY: forwarded from the caller.
                unsafe { arch::$max(p, v) }
            }
        }
    };
}

block_atomic!(
    u32,
    cta_add_u32,
    cta_exch_u32,
    cta_cas_u32,
    cta_min_u32,
    cta_max_u32
);
block_atomic!(
    i32,
    cta_add_i32,
    cta_exch_i32,
    cta_cas_i32,
    cta_min_i32,
    cta_max_i32
);
block_atomic!(
    u64,
    cta_add_u64,
    cta_exch_u64,
    cta_cas_u64,
    cta_min_u64,
    cta_max_u64
);
block_atomic!(
    i64,
    cta_add_i64,
    cta_exch_i64,
    cta_cas_i64,
    cta_min_i64,
    cta_max_i64
);

/// Adds `v` to `*p` (wrapping) atomically among this block's threads; returns the old
/// value.
///
/// # Safety
/// `p` must be a valid, aligned address (shared memory, or global memory this block
/// alone updates atomically). For shared memory, [`SharedSlice::fetch_add`](crate::SharedSlice::fetch_add)
/// is the safe form.
#[inline(always)]
pub unsafe fn block_fetch_add<T: BlockAtomic>(p: *mut T, v: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::fetch_add(p, v) }
}

/// Stores `v` in `*p` atomically among this block's threads; returns the old value.
///
/// # Safety
/// As [`block_fetch_add`].
#[inline(always)]
pub unsafe fn block_swap<T: BlockAtomic>(p: *mut T, v: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::swap(p, v) }
}

/// Stores `v` in `*p` if it equals `cond`, atomically among this block's threads; returns
/// the old value.
///
/// # Safety
/// As [`block_fetch_add`].
#[inline(always)]
pub unsafe fn block_compare_swap<T: BlockAtomic>(p: *mut T, cond: T, v: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::compare_swap(p, cond, v) }
}

/// Stores the smaller of `*p` and `v` atomically among this block's threads; returns the
/// old value.
///
/// # Safety
/// As [`block_fetch_add`].
#[inline(always)]
pub unsafe fn block_fetch_min<T: BlockAtomic>(p: *mut T, v: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::fetch_min(p, v) }
}

/// Stores the larger of `*p` and `v` atomically among this block's threads; returns the
/// old value.
///
/// # Safety
/// As [`block_fetch_add`].
#[inline(always)]
pub unsafe fn block_fetch_max<T: BlockAtomic>(p: *mut T, v: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::fetch_max(p, v) }
}
