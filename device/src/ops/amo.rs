//! Atomic memory operations on `u32`, `u64`, `i32`, `i64` at system scope
//! (`nvshmem_*_atomic_*`), and fetch, set and swap on `f32` and `f64` too
//! (`nvshmem_float_atomic_fetch`, `_set`, `_swap`), on their bits.
//!
//! AMOs are relaxed, as OpenSHMEM and NVSHMEM define them: atomic on their word, ordered
//! with other operations only by [`fence`](super::fence) and [`quiet`](super::quiet) (and,
//! for a fetching AMO, by the return of its value). On a P2P path a fetching AMO is one
//! `atom.relaxed.sys` (GPU) or Relaxed RMW (CPU), a non-fetching one a `red.relaxed.sys`,
//! `atomic_fetch` an `ld.relaxed.sys` and `atomic_set` an `st.relaxed.sys`: no system
//! barrier per AMO. An AMO that must also publish this thread's earlier writes, or make
//! the peer's visible, takes an [`AmoOrder`] through [`ordered`].
//!
//! To a PE without a P2P path each is one proxy request ([`super::remote`]); fetching
//! forms wait for the old value, the others return once the request is in the ring.

use super::{remote, route, Route};
use crate::arch;
use crate::op_kinds::AmoKind;

mod sealed {
    pub trait Sealed {}
}

/// Types whose words device atomics read, write and swap ([`atomic_fetch`],
/// [`atomic_set`], [`atomic_swap`]): the integers of [`DeviceInt`], and `f32` and `f64`
/// through their bit patterns (the same `ld`/`st`/`atom.exch` instructions on the bits,
/// as CUDA's `atomicExch(float*)`).
pub trait DeviceWord: Copy + sealed::Sealed {
    #[doc(hidden)]
    const WIDTH: u8;
    #[doc(hidden)]
    fn to_bits(self) -> u64;
    #[doc(hidden)]
    fn from_bits(bits: u64) -> Self;
    #[doc(hidden)]
    unsafe fn load_acquire(p: *const Self) -> Self;
    #[doc(hidden)]
    unsafe fn load_relaxed(p: *const Self) -> Self;
    #[doc(hidden)]
    unsafe fn store_relaxed(p: *mut Self, v: Self);
    #[doc(hidden)]
    unsafe fn swap(p: *mut Self, v: Self) -> Self;
}

/// Integer types with device atomics: `u32`, `u64`, `i32`, `i64`.
pub trait DeviceInt: DeviceWord + PartialOrd {
    /// One.
    const ONE: Self;
    #[doc(hidden)]
    unsafe fn add(p: *mut Self, v: Self);
    #[doc(hidden)]
    unsafe fn and(p: *mut Self, v: Self);
    #[doc(hidden)]
    unsafe fn or(p: *mut Self, v: Self);
    #[doc(hidden)]
    unsafe fn xor(p: *mut Self, v: Self);
    #[doc(hidden)]
    unsafe fn fetch_add(p: *mut Self, v: Self) -> Self;
    #[doc(hidden)]
    unsafe fn compare_swap(p: *mut Self, cond: Self, v: Self) -> Self;
    #[doc(hidden)]
    unsafe fn fetch_and(p: *mut Self, v: Self) -> Self;
    #[doc(hidden)]
    unsafe fn fetch_or(p: *mut Self, v: Self) -> Self;
    #[doc(hidden)]
    unsafe fn fetch_xor(p: *mut Self, v: Self) -> Self;
}

/// [`DeviceWord`] for `$t`, a word of `$bits` that `$raw` turns into its bits and `$val`
/// back.
macro_rules! device_word {
    ($t:ty, $bits:ty, $ld:ident, $ldr:ident, $st:ident, $exch:ident,
     |$x:ident| $raw:expr, |$b:ident| $val:expr) => {
        impl sealed::Sealed for $t {}
        impl DeviceWord for $t {
            const WIDTH: u8 = core::mem::size_of::<$t>() as u8;
            #[inline(always)]
            fn to_bits(self) -> u64 {
                let $x = self;
                $raw as u64
            }
            #[inline(always)]
            fn from_bits(bits: u64) -> Self {
                let $b = bits as $bits;
                $val
            }
            #[inline(always)]
            unsafe fn load_acquire(p: *const Self) -> Self {
                // SAFETY: forwarded caller contract (valid, aligned).
                let $b = unsafe { arch::$ld(p as *const $bits) };
                $val
            }
            #[inline(always)]
            unsafe fn load_relaxed(p: *const Self) -> Self {
                // SAFETY: forwarded caller contract (valid, aligned).
                let $b = unsafe { arch::$ldr(p as *const $bits) };
                $val
            }
            #[inline(always)]
            unsafe fn store_relaxed(p: *mut Self, v: Self) {
                let $x = v;
                // SAFETY: forwarded caller contract.
                unsafe { arch::$st(p as *mut $bits, $raw) }
            }
            #[inline(always)]
            unsafe fn swap(p: *mut Self, v: Self) -> Self {
                let $x = v;
                // SAFETY: forwarded caller contract.
                let $b = unsafe { arch::$exch(p as *mut $bits, $raw) };
                $val
            }
        }
    };
}

device_word!(
    u32,
    u32,
    load_acquire_u32,
    load_relaxed_u32,
    store_relaxed_u32,
    atom_exch_u32,
    |x| x,
    |b| b
);
device_word!(
    i32,
    u32,
    load_acquire_u32,
    load_relaxed_u32,
    store_relaxed_u32,
    atom_exch_u32,
    |x| x as u32,
    |b| b as i32
);
device_word!(
    u64,
    u64,
    load_acquire_u64,
    load_relaxed_u64,
    store_relaxed_u64,
    atom_exch_u64,
    |x| x,
    |b| b
);
device_word!(
    i64,
    u64,
    load_acquire_u64,
    load_relaxed_u64,
    store_relaxed_u64,
    atom_exch_u64,
    |x| x as u64,
    |b| b as i64
);
device_word!(
    f32,
    u32,
    load_acquire_u32,
    load_relaxed_u32,
    store_relaxed_u32,
    atom_exch_u32,
    |x| x.to_bits(),
    |b| f32::from_bits(b)
);
device_word!(
    f64,
    u64,
    load_acquire_u64,
    load_relaxed_u64,
    store_relaxed_u64,
    atom_exch_u64,
    |x| x.to_bits(),
    |b| f64::from_bits(b)
);

macro_rules! device_int {
    ($t:ty, $bits:ty, $add:ident, $cas:ident, $and:ident, $or:ident, $xor:ident,
     $radd:ident, $rand:ident, $ror:ident, $rxor:ident) => {
        // Signed types share the unsigned instructions: two's complement makes add, exch,
        // cas and the bitwise ops identical bit for bit.
        impl DeviceInt for $t {
            const ONE: Self = 1;
            #[inline(always)]
            unsafe fn add(p: *mut Self, v: Self) {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$radd(p as *mut $bits, v as $bits) }
            }
            #[inline(always)]
            unsafe fn and(p: *mut Self, v: Self) {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$rand(p as *mut $bits, v as $bits) }
            }
            #[inline(always)]
            unsafe fn or(p: *mut Self, v: Self) {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$ror(p as *mut $bits, v as $bits) }
            }
            #[inline(always)]
            unsafe fn xor(p: *mut Self, v: Self) {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$rxor(p as *mut $bits, v as $bits) }
            }
            #[inline(always)]
            unsafe fn fetch_add(p: *mut Self, v: Self) -> Self {
                // SAFETY: forwarded caller contract.
                unsafe { arch::$add(p as *mut $bits, v as $bits) as $t }
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
    atom_add_u32,
    atom_cas_u32,
    atom_and_u32,
    atom_or_u32,
    atom_xor_u32,
    red_add_u32,
    red_and_u32,
    red_or_u32,
    red_xor_u32
);
device_int!(
    i32,
    u32,
    atom_add_u32,
    atom_cas_u32,
    atom_and_u32,
    atom_or_u32,
    atom_xor_u32,
    red_add_u32,
    red_and_u32,
    red_or_u32,
    red_xor_u32
);
device_int!(
    u64,
    u64,
    atom_add_u64,
    atom_cas_u64,
    atom_and_u64,
    atom_or_u64,
    atom_xor_u64,
    red_add_u64,
    red_and_u64,
    red_or_u64,
    red_xor_u64
);
device_int!(
    i64,
    u64,
    atom_add_u64,
    atom_cas_u64,
    atom_and_u64,
    atom_or_u64,
    atom_xor_u64,
    red_add_u64,
    red_and_u64,
    red_or_u64,
    red_xor_u64
);

/// One AMO on `dest` of `pe`: `direct` on the P2P pointer, or a proxy request of `kind`
/// (waited for when `fetch`).
#[inline(always)]
unsafe fn amo<T: DeviceWord>(
    dest: *const T,
    pe: u32,
    kind: AmoKind,
    (value, compare): (T, T),
    fetch: bool,
    direct: impl FnOnce(*mut T) -> T,
) -> T {
    // SAFETY: caller contract: `dest` is an aligned symmetric address of a `T`.
    match unsafe { route(dest, pe) } {
        Route::Direct(d) => direct(d),
        Route::Proxy(off) => T::from_bits(remote::amo(
            pe,
            kind,
            T::WIDTH,
            off,
            value.to_bits(),
            compare.to_bits(),
            fetch,
        )),
    }
}

/// Atomically reads `dest` on `pe` (`nvshmem_atomic_fetch`).
///
/// # Safety
/// `dest` must be an aligned symmetric address of a `T`.
#[inline(always)]
pub unsafe fn atomic_fetch<T: DeviceWord>(dest: *const T, pe: u32) -> T {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(
            dest,
            pe,
            AmoKind::Fetch,
            (T::from_bits(0), T::from_bits(0)),
            true,
            |d| T::load_relaxed(d),
        )
    }
}

/// Atomically writes `dest` on `pe` (`nvshmem_atomic_set`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_set<T: DeviceWord>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::Set, (value, value), false, |d| {
            T::store_relaxed(d, value);
            value
        })
    };
}

/// Atomically replaces `dest` on `pe`; returns the old value (`nvshmem_atomic_swap`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_swap<T: DeviceWord>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::Swap, (value, value), true, |d| {
            T::swap(d, value)
        })
    }
}

/// Stores `value` if `dest` on `pe` equals `cond`; returns the old value
/// (`nvshmem_atomic_compare_swap`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_compare_swap<T: DeviceInt>(dest: *mut T, cond: T, value: T, pe: u32) -> T {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::CompareSwap, (value, cond), true, |d| {
            T::compare_swap(d, cond, value)
        })
    }
}

/// Adds `value` (wrapping); returns the old value (`nvshmem_atomic_fetch_add`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_add<T: DeviceInt>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchAdd, (value, value), true, |d| {
            T::fetch_add(d, value)
        })
    }
}

/// Adds `value` (wrapping) (`nvshmem_atomic_add`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_add<T: DeviceInt>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchAdd, (value, value), false, |d| {
            T::add(d, value);
            value
        })
    };
}

/// Adds one; returns the old value (`nvshmem_atomic_fetch_inc`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_inc<T: DeviceInt>(dest: *mut T, pe: u32) -> T {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchAdd, (T::ONE, T::ONE), true, |d| {
            T::fetch_add(d, T::ONE)
        })
    }
}

/// Adds one (`nvshmem_atomic_inc`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_inc<T: DeviceInt>(dest: *mut T, pe: u32) {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchAdd, (T::ONE, T::ONE), false, |d| {
            T::add(d, T::ONE);
            T::ONE
        })
    };
}

/// Bitwise AND; returns the old value (`nvshmem_atomic_fetch_and`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_and<T: DeviceInt>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchAnd, (value, value), true, |d| {
            T::fetch_and(d, value)
        })
    }
}

/// Bitwise AND (`nvshmem_atomic_and`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_and<T: DeviceInt>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchAnd, (value, value), false, |d| {
            T::and(d, value);
            value
        })
    };
}

/// Bitwise OR; returns the old value (`nvshmem_atomic_fetch_or`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_or<T: DeviceInt>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchOr, (value, value), true, |d| {
            T::fetch_or(d, value)
        })
    }
}

/// Bitwise OR (`nvshmem_atomic_or`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_or<T: DeviceInt>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchOr, (value, value), false, |d| {
            T::or(d, value);
            value
        })
    };
}

/// Bitwise XOR; returns the old value (`nvshmem_atomic_fetch_xor`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_fetch_xor<T: DeviceInt>(dest: *mut T, value: T, pe: u32) -> T {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchXor, (value, value), true, |d| {
            T::fetch_xor(d, value)
        })
    }
}

/// Bitwise XOR (`nvshmem_atomic_xor`).
///
/// # Safety
/// As [`atomic_fetch`].
#[inline(always)]
pub unsafe fn atomic_xor<T: DeviceInt>(dest: *mut T, value: T, pe: u32) {
    // SAFETY: caller contract; the closure gets `dest`'s valid, aligned P2P address.
    unsafe {
        amo(dest, pe, AmoKind::FetchXor, (value, value), false, |d| {
            T::xor(d, value);
            value
        })
    };
}

/// The ordering an AMO run through [`ordered`] adds to its relaxed default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmoOrder {
    /// Atomic only (what every AMO is on its own).
    Relaxed,
    /// Makes what the peer published before the value this AMO read visible to this
    /// thread's later reads: a fence after it.
    Acquire,
    /// Publishes this thread's earlier writes to the AMO's target before the AMO: a
    /// [`fence`](super::fence) before it.
    Release,
    /// Both.
    AcqRel,
}

/// Runs the AMO `amo` (one of this module's functions, to one PE) with `order` added:
/// for `Release`/`AcqRel` a [`fence`](super::fence) before it, so a peer that sees the
/// AMO's effect (with an acquire: a wait, or an `Acquire` AMO) also sees this thread's
/// earlier puts and stores to that PE; for `Acquire`/`AcqRel` a system-scope fence after
/// it. NCCL's device API takes a `cuda::memory_order` for the same purpose.
///
/// ```ignore
/// // Producer: write a row into the consumer's buffer, then take a ticket that
/// // publishes it (without `Release` the consumer could see the ticket first).
/// put(rows.add(slot * h), row, h, consumer);
/// let ticket = ordered(AmoOrder::Release, || atomic_fetch_add(tail, 1u64, consumer));
/// ```
///
/// # Safety
/// As the AMO's own contract.
#[inline(always)]
pub unsafe fn ordered<R>(order: AmoOrder, amo: impl FnOnce() -> R) -> R {
    if matches!(order, AmoOrder::Release | AmoOrder::AcqRel) {
        super::fence();
    }
    let out = amo();
    if matches!(order, AmoOrder::Acquire | AmoOrder::AcqRel) {
        arch::fence_sys();
    }
    out
}
