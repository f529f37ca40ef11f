//! The types that atomics, waits and signals work on: integers, and for fetch, set and
//! swap `f32` and `f64` too.

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

mod sealed {
    pub trait Sealed {}
}

/// A type whose symmetric words the host's atomic fetch, set and swap work on: the
/// integers of [`SymInt`], and `f32` and `f64` through their bit patterns (on the std
/// atomic of their size: `nvshmem_float_atomic_fetch` and its kin).
///
/// The methods are the runtime's plumbing; users only name the trait in bounds.
pub trait SymWord: bytemuck::Pod + std::fmt::Debug + Send + Sync + sealed::Sealed {
    /// The std atomic type of the same size.
    type Atomic: Send + Sync;

    /// Views `p` as an atomic.
    ///
    /// # Safety
    /// `p` must be valid, aligned, and live for `'a`, and only accessed atomically (or
    /// by other processes) while the reference lives.
    #[doc(hidden)]
    unsafe fn atomic<'a>(p: *mut Self) -> &'a Self::Atomic;
    #[doc(hidden)]
    fn load(a: &Self::Atomic, o: Ordering) -> Self;
    #[doc(hidden)]
    fn store(a: &Self::Atomic, v: Self, o: Ordering);
    #[doc(hidden)]
    fn swap(a: &Self::Atomic, v: Self, o: Ordering) -> Self;
    #[doc(hidden)]
    /// The value's bits, zero-extended to 64 (how GPU helper kernels take operands).
    fn to_bits(self) -> u64;
    #[doc(hidden)]
    /// The value whose bits are the low `size_of::<Self>()` bytes of `bits`.
    fn from_bits(bits: u64) -> Self;
}

/// An integer type with a matching std atomic: `u32`, `u64`, `i32`, `i64`.
///
/// The methods are the runtime's plumbing; users only name the trait in bounds.
pub trait SymInt: SymWord + Ord + Eq {
    /// One.
    const ONE: Self;

    #[doc(hidden)]
    fn compare_swap(a: &Self::Atomic, cond: Self, v: Self, o: Ordering) -> Self;
    #[doc(hidden)]
    fn fetch_add(a: &Self::Atomic, v: Self, o: Ordering) -> Self;
    #[doc(hidden)]
    fn fetch_and(a: &Self::Atomic, v: Self, o: Ordering) -> Self;
    #[doc(hidden)]
    fn fetch_or(a: &Self::Atomic, v: Self, o: Ordering) -> Self;
    #[doc(hidden)]
    fn fetch_xor(a: &Self::Atomic, v: Self, o: Ordering) -> Self;
}

/// [`SymWord`] for a float on the std atomic of its bits.
macro_rules! sym_float {
    ($t:ty, $atomic:ty, $bits:ty) => {
        impl sealed::Sealed for $t {}
        impl SymWord for $t {
            type Atomic = $atomic;
            #[inline]
            unsafe fn atomic<'a>(p: *mut Self) -> &'a Self::Atomic {
                // SAFETY: guaranteed by the caller (valid, aligned, atomic-only access);
                // the atomic of the float's bits has its size and alignment.
                unsafe { <$atomic>::from_ptr(p.cast()) }
            }
            #[inline]
            fn load(a: &Self::Atomic, o: Ordering) -> Self {
                <$t>::from_bits(a.load(o))
            }
            #[inline]
            fn store(a: &Self::Atomic, v: Self, o: Ordering) {
                a.store(v.to_bits(), o)
            }
            #[inline]
            fn swap(a: &Self::Atomic, v: Self, o: Ordering) -> Self {
                <$t>::from_bits(a.swap(v.to_bits(), o))
            }
            #[inline]
            fn to_bits(self) -> u64 {
                <$t>::to_bits(self) as u64
            }
            #[inline]
            fn from_bits(bits: u64) -> Self {
                <$t>::from_bits(bits as $bits)
            }
        }
    };
}

sym_float!(f32, AtomicU32, u32);
sym_float!(f64, AtomicU64, u64);

macro_rules! sym_int {
    ($t:ty, $atomic:ty, $bits:ty) => {
        impl sealed::Sealed for $t {}
        impl SymWord for $t {
            type Atomic = $atomic;
            #[inline]
            unsafe fn atomic<'a>(p: *mut Self) -> &'a Self::Atomic {
                // SAFETY: guaranteed by the caller (valid, aligned, atomic-only access).
                unsafe { <$atomic>::from_ptr(p) }
            }
            #[inline]
            fn load(a: &Self::Atomic, o: Ordering) -> Self {
                a.load(o)
            }
            #[inline]
            fn store(a: &Self::Atomic, v: Self, o: Ordering) {
                a.store(v, o)
            }
            #[inline]
            fn swap(a: &Self::Atomic, v: Self, o: Ordering) -> Self {
                a.swap(v, o)
            }
            #[inline]
            fn to_bits(self) -> u64 {
                self as $bits as u64
            }
            #[inline]
            fn from_bits(bits: u64) -> Self {
                bits as $bits as $t
            }
        }
        impl SymInt for $t {
            const ONE: Self = 1;
            #[inline]
            fn compare_swap(a: &Self::Atomic, cond: Self, v: Self, o: Ordering) -> Self {
                match a.compare_exchange(cond, v, o, Ordering::Acquire) {
                    Ok(prev) | Err(prev) => prev,
                }
            }
            #[inline]
            fn fetch_add(a: &Self::Atomic, v: Self, o: Ordering) -> Self {
                a.fetch_add(v, o)
            }
            #[inline]
            fn fetch_and(a: &Self::Atomic, v: Self, o: Ordering) -> Self {
                a.fetch_and(v, o)
            }
            #[inline]
            fn fetch_or(a: &Self::Atomic, v: Self, o: Ordering) -> Self {
                a.fetch_or(v, o)
            }
            #[inline]
            fn fetch_xor(a: &Self::Atomic, v: Self, o: Ordering) -> Self {
                a.fetch_xor(v, o)
            }
        }
    };
}

/// Performs `kind` on `a` with the host API's orderings (fetch Acquire, set Release, the
/// read-modify-writes SeqCst) and returns the old value (0 for a set): how requests that
/// arrive encoded, from peers over a transport, are applied.
pub fn apply_amo<T: SymInt>(a: &T::Atomic, kind: symmem_device::AmoKind, v: T, cond: T) -> T {
    use symmem_device::AmoKind;
    match kind {
        AmoKind::Fetch => T::load(a, Ordering::Acquire),
        AmoKind::Set => {
            T::store(a, v, Ordering::Release);
            T::from_bits(0)
        }
        AmoKind::Swap => T::swap(a, v, Ordering::SeqCst),
        AmoKind::CompareSwap => T::compare_swap(a, cond, v, Ordering::SeqCst),
        AmoKind::FetchAdd => T::fetch_add(a, v, Ordering::SeqCst),
        AmoKind::FetchAnd => T::fetch_and(a, v, Ordering::SeqCst),
        AmoKind::FetchOr => T::fetch_or(a, v, Ordering::SeqCst),
        AmoKind::FetchXor => T::fetch_xor(a, v, Ordering::SeqCst),
    }
}

/// Updates a signal word. Release: the data stores before it become visible to whoever
/// Acquire-loads the new value.
#[inline]
pub fn apply_signal(word: &AtomicU64, signal: u64, op: SignalOp) {
    match op {
        SignalOp::Set => word.store(signal, Ordering::Release),
        SignalOp::Add => {
            word.fetch_add(signal, Ordering::Release);
        }
    }
}

sym_int!(u32, AtomicU32, u32);
sym_int!(u64, AtomicU64, u64);
sym_int!(i32, AtomicI32, u32);
sym_int!(i64, AtomicI64, u64);

pub use symmem_device::{Cmp, SignalOp};
