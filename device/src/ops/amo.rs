//! Atomic memory operations on `u32`, `u64`, `i32`, `i64` at system scope
//! (`nvshmem_*_atomic_*`). Every operation is one `atom.acq_rel.sys` (GPU) or AcqRel
//! atomic (CPU) on the target PE's word; fetch is an acquire load and set a release store.

use super::peer;
use crate::arch;

mod sealed {
    pub trait Sealed {}
}

/// Integer types with device atomics: `u32`, `u64`, `i32`, `i64`.
pub trait DeviceInt: Copy + PartialOrd + sealed::Sealed {
    /// One.
    const ONE: Self;
    #[doc(hidden)]
    unsafe fn load_acquire(p: *const Self) -> Self;
    #[doc(hidden)]
    unsafe fn store_release(p: *mut Self, v: Self);
    #[doc(hidden)]
    unsafe fn fetch_add(p: *mut Self, v: Self) -> Self;
    #[doc(hidden)]
    unsafe fn swap(p: *mut Self, v: Self) -> Self;
    #[doc(hidden)]
    unsafe fn compare_swap(p: *mut Self, cond: Self, v: Self) -> Self;
    #[doc(hidden)]
    unsafe fn fetch_and(p: *mut Self, v: Self) -> Self;
    #[doc(hidden)]
    unsafe fn fetch_or(p: *mut Self, v: Self) -> Self;
    #[doc(hidden)]
    unsafe fn fetch_xor(p: *mut Self, v: Self) -> Self;
}

macro_rules! device_int {
    ($t:ty, $bits:ty, $ld:ident, $st:ident, $add:ident, $exch:ident, $cas:ident, $and:ident, $or:ident, $xor:ident) => {
        impl sealed::Sealed for $t {}
        // Signed types share the unsigned instructions: two's complement makes add, exch,
        // cas and the bitwise ops identical bit for bit.
        impl DeviceInt for $t {
            const ONE: Self = 1;
            #[inline(always)]
            unsafe fn load_acquire(p: *const Self) -> Self {
                // SAFETY: forwarded caller contract (valid, aligned).
                unsafe { arch::$ld(p as *const $bits) as $t }
            }
            #[inline(always)]
            unsafe fn store_release(p: *mut Self, v: Self) {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$st(p as *mut $bits, v as $bits) }
            }
            #[inline(always)]
            unsafe fn fetch_add(p: *mut Self, v: Self) -> Self {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$add(p as *mut $bits, v as $bits) as $t }
            }
            #[inline(always)]
            unsafe fn swap(p: *mut Self, v: Self) -> Self {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$exch(p as *mut $bits, v as $bits) as $t }
            }
            #[inline(always)]
            unsafe fn compare_swap(p: *mut Self, cond: Self, v: Self) -> Self {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$cas(p as *mut $bits, cond as $bits, v as $bits) as $t }
            }
            #[inline(always)]
            unsafe fn fetch_and(p: *mut Self, v: Self) -> Self {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$and(p as *mut $bits, v as $bits) as $t }
            }
            #[inline(always)]
            unsafe fn fetch_or(p: *mut Self, v: Self) -> Self {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$or(p as *mut $bits, v as $bits) as $t }
            }
            #[inline(always)]
            unsafe fn fetch_xor(p: *mut Self, v: Self) -> Self {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$xor(p as *mut $bits, v as $bits) as $t }
            }
        }
    };
}

device_int!(
    u32,
    u32,
    load_acquire_u32,
    store_release_u32,
    atom_add_u32,
    atom_exch_u32,
    atom_cas_u32,
    atom_and_u32,
    atom_or_u32,
    atom_xor_u32
);
device_int!(
    i32,
    u32,
    load_acquire_u32,
    store_release_u32,
    atom_add_u32,
    atom_exch_u32,
    atom_cas_u32,
    atom_and_u32,
    atom_or_u32,
    atom_xor_u32
);
device_int!(
    u64,
    u64,
    load_acquire_u64,
    store_release_u64,
    atom_add_u64,
    atom_exch_u64,
    atom_cas_u64,
    atom_and_u64,
    atom_or_u64,
    atom_xor_u64
);
device_int!(
    i64,
    u64,
    load_acquire_u64,
    store_release_u64,
    atom_add_u64,
    atom_exch_u64,
    atom_cas_u64,
    atom_and_u64,
    atom_or_u64,
    atom_xor_u64
);

/// Atomically reads `dest` on `pe` (`nvshmem_atomic_fetch`).
///
/// # Safety
/// `dest` must be an aligned symmetric address of a `T`.
#[inline(always)]
pub unsafe fn atomic_fetch<T: DeviceInt>(dest: *const T, pe: u32) -> T {
    // SAFETY: caller contract.
    unsafe { T::load_acquire(peer(dest, pe)) }
}

/// Atomically writes `dest` on `pe` (`nvshmem_atomic_set`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_set<T: DeviceInt>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract.
    unsafe { T::store_release(peer(dest, pe), value) }
}

/// Atomically replaces `dest` on `pe`; returns the old value (`nvshmem_atomic_swap`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_swap<T: DeviceInt>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract.
    unsafe { T::swap(peer(dest, pe), value) }
}

/// Stores `value` if `dest` on `pe` equals `cond`; returns the old value
/// (`nvshmem_atomic_compare_swap`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_compare_swap<T: DeviceInt>(dest: *mut T, cond: T, value: T, pe: u32) -> T {
    // SAFETY: caller contract.
    unsafe { T::compare_swap(peer(dest, pe), cond, value) }
}

/// Adds `value` (wrapping); returns the old value (`nvshmem_atomic_fetch_add`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_add<T: DeviceInt>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract.
    unsafe { T::fetch_add(peer(dest, pe), value) }
}

/// Adds `value` (wrapping) (`nvshmem_atomic_add`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_add<T: DeviceInt>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract.
    unsafe { T::fetch_add(peer(dest, pe), value) };
}

/// Adds one; returns the old value (`nvshmem_atomic_fetch_inc`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_inc<T: DeviceInt>(dest: *mut T, pe: u32) -> T {
    // SAFETY: caller contract.
    unsafe { T::fetch_add(peer(dest, pe), T::ONE) }
}

/// Adds one (`nvshmem_atomic_inc`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_inc<T: DeviceInt>(dest: *mut T, pe: u32) {
    // SAFETY: caller contract.
    unsafe { T::fetch_add(peer(dest, pe), T::ONE) };
}

/// Bitwise AND; returns the old value (`nvshmem_atomic_fetch_and`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_and<T: DeviceInt>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract.
    unsafe { T::fetch_and(peer(dest, pe), value) }
}

/// Bitwise AND (`nvshmem_atomic_and`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_and<T: DeviceInt>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract.
    unsafe { T::fetch_and(peer(dest, pe), value) };
}

/// Bitwise OR; returns the old value (`nvshmem_atomic_fetch_or`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_or<T: DeviceInt>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract.
    unsafe { T::fetch_or(peer(dest, pe), value) }
}

/// Bitwise OR (`nvshmem_atomic_or`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_or<T: DeviceInt>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract.
    unsafe { T::fetch_or(peer(dest, pe), value) };
}

/// Bitwise XOR; returns the old value (`nvshmem_atomic_fetch_xor`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_xor<T: DeviceInt>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract.
    unsafe { T::fetch_xor(peer(dest, pe), value) }
}

/// Bitwise XOR (`nvshmem_atomic_xor`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_xor<T: DeviceInt>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract.
    unsafe { T::fetch_xor(peer(dest, pe), value) };
}
