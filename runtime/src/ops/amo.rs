//! Atomic memory operations on `u32`, `u64`, `i32`, `i64` (OpenSHMEM 1.5 §9.7,
//! NVSHMEM `nvshmem_*_atomic_*`); fetch, set and swap also on `f32` and `f64`, through
//! their bit patterns (the same word operations, so every route handles them alike).
//!
//! On a mapped peer each operation is one hardware atomic on the peer's heap. Read-modify-
//! writes are `SeqCst` (on x86 a locked instruction either way); `atomic_fetch` is an
//! Acquire load and `atomic_set` a Release store, so an AMO can publish data written
//! before it, as NVSHMEM's ordering guarantees for AMOs after `fence` require. Alignment
//! holds by construction: handles are typed and allocations at least 64-byte aligned.
//!
//! On a GPU heap (the copy route) each operation is one launch of the runtime's
//! `host_amo` helper kernel, whose single thread performs the same system-scope atomic
//! with the device API and returns the old value through host-mapped memory: a kernel
//! launch and a synchronization, ~10 µs, instead of ~10 ns.

use std::sync::atomic::Ordering;

use symmem_device::{AmoKind, Request};

use crate::counters::Op;
use crate::error::Result;
use crate::route::Located;
use crate::runtime::Runtime;
use crate::sym::SymRef;
use symmem_transport::int::{SymInt, SymWord};
use symmem_transport::Io;

/// The operands of an AMO as a [`Request`] (and the `host_amo` helper kernel) carry them,
/// from the host form's `(a, b)`: `(cond, value)` for a compare-and-swap, `(value, _)`
/// otherwise. A request's `compare` is the value the word must hold to be replaced.
fn request_operands<T: SymWord>(kind: AmoKind, a: T, b: T) -> (u64, u64) {
    match kind {
        AmoKind::CompareSwap => (b.to_bits(), a.to_bits()),
        _ => (a.to_bits(), 0),
    }
}

impl Runtime {
    /// Runs `host` on the atomic at `r` on `pe` when it is host memory; on a GPU heap runs
    /// `kind` with operands `a`, `b` in the helper kernel and turns the old value into the
    /// result with `from_old`.
    #[inline]
    #[allow(clippy::too_many_arguments)] // the host form and the encoded form of one op
    fn amo<T: SymWord, R>(
        &self,
        op: &'static str,
        r: SymRef<'_, T>,
        pe: usize,
        kind: AmoKind,
        (a, b): (T, T),
        host: impl FnOnce(&T::Atomic) -> R,
        from_old: impl FnOnce(T) -> R,
    ) -> Result<R> {
        match self.path.locate(op, r, 1, pe)? {
            Located::Host(p) => {
                // SAFETY: `p` is in bounds, aligned for T (typed handle in an aligned
                // allocation) and mapped for the life of `self`; the element is only
                // accessed atomically here.
                let out = host(unsafe { T::atomic(p) });
                self.path.counters().direct(Op::Amo, 0);
                Ok(out)
            }
            #[cfg(feature = "cuda")]
            Located::Device(_) => {
                let (value, compare) = request_operands(kind, a, b);
                let old = self.gpu_amo(
                    op,
                    self.path.sym_addr(r),
                    pe,
                    std::mem::size_of::<T>(),
                    kind,
                    value,
                    compare,
                )?;
                self.path.counters().direct(Op::Amo, 0);
                Ok(from_old(T::from_bits(old)))
            }
            Located::Remote { pe, off } => {
                // A zero-sized result (`()`) means the caller wants no value back: the
                // AMO is then non-fetching, complete at the target after `quiet`.
                let fetch = std::mem::size_of::<R>() != 0;
                let (value, compare) = request_operands(kind, a, b);
                let width = std::mem::size_of::<T>() as u8;
                let req = Request::amo(pe as u32, kind, width, off, value, compare, fetch as u64);
                let old = self.path.remote().submit(&req, Io::None)?;
                Ok(from_old(T::from_bits(old)))
            }
        }
    }

    /// Atomically reads the element (`nvshmem_atomic_fetch`).
    pub fn atomic_fetch<T: SymWord>(&self, r: SymRef<'_, T>, pe: usize) -> Result<T> {
        self.amo(
            "atomic_fetch",
            r,
            pe,
            AmoKind::Fetch,
            (T::from_bits(0), T::from_bits(0)),
            |a| T::load(a, Ordering::Acquire),
            |old| old,
        )
    }

    /// Atomically writes the element (`nvshmem_atomic_set`).
    pub fn atomic_set<T: SymWord>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo(
            "atomic_set",
            r,
            pe,
            AmoKind::Set,
            (value, T::from_bits(0)),
            |a| T::store(a, value, Ordering::Release),
            |_| (),
        )
    }

    /// Atomically replaces the element, returning the old value (`nvshmem_atomic_swap`).
    pub fn atomic_swap<T: SymWord>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo(
            "atomic_swap",
            r,
            pe,
            AmoKind::Swap,
            (value, T::from_bits(0)),
            |a| T::swap(a, value, Ordering::SeqCst),
            |old| old,
        )
    }

    /// Writes `value` if the element equals `cond`; returns the old value either way
    /// (`nvshmem_atomic_compare_swap`).
    pub fn atomic_compare_swap<T: SymInt>(
        &self,
        r: SymRef<'_, T>,
        cond: T,
        value: T,
        pe: usize,
    ) -> Result<T> {
        self.amo(
            "atomic_compare_swap",
            r,
            pe,
            AmoKind::CompareSwap,
            (cond, value),
            |a| T::compare_swap(a, cond, value, Ordering::SeqCst),
            |old| old,
        )
    }

    /// Adds `value` (wrapping), returning the old value (`nvshmem_atomic_fetch_add`).
    pub fn atomic_fetch_add<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo(
            "atomic_fetch_add",
            r,
            pe,
            AmoKind::FetchAdd,
            (value, T::from_bits(0)),
            |a| T::fetch_add(a, value, Ordering::SeqCst),
            |old| old,
        )
    }

    /// Adds `value` (wrapping) (`nvshmem_atomic_add`).
    pub fn atomic_add<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo(
            "atomic_add",
            r,
            pe,
            AmoKind::FetchAdd,
            (value, T::from_bits(0)),
            |a| {
                T::fetch_add(a, value, Ordering::SeqCst);
            },
            |_| (),
        )
    }

    /// Adds one, returning the old value (`nvshmem_atomic_fetch_inc`).
    pub fn atomic_fetch_inc<T: SymInt>(&self, r: SymRef<'_, T>, pe: usize) -> Result<T> {
        self.amo(
            "atomic_fetch_inc",
            r,
            pe,
            AmoKind::FetchAdd,
            (T::ONE, T::from_bits(0)),
            |a| T::fetch_add(a, T::ONE, Ordering::SeqCst),
            |old| old,
        )
    }

    /// Adds one (`nvshmem_atomic_inc`).
    pub fn atomic_inc<T: SymInt>(&self, r: SymRef<'_, T>, pe: usize) -> Result<()> {
        self.amo(
            "atomic_inc",
            r,
            pe,
            AmoKind::FetchAdd,
            (T::ONE, T::from_bits(0)),
            |a| {
                T::fetch_add(a, T::ONE, Ordering::SeqCst);
            },
            |_| (),
        )
    }

    /// Bitwise AND, returning the old value (`nvshmem_atomic_fetch_and`).
    pub fn atomic_fetch_and<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo(
            "atomic_fetch_and",
            r,
            pe,
            AmoKind::FetchAnd,
            (value, T::from_bits(0)),
            |a| T::fetch_and(a, value, Ordering::SeqCst),
            |old| old,
        )
    }

    /// Bitwise AND (`nvshmem_atomic_and`).
    pub fn atomic_and<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo(
            "atomic_and",
            r,
            pe,
            AmoKind::FetchAnd,
            (value, T::from_bits(0)),
            |a| {
                T::fetch_and(a, value, Ordering::SeqCst);
            },
            |_| (),
        )
    }

    /// Bitwise OR, returning the old value (`nvshmem_atomic_fetch_or`).
    pub fn atomic_fetch_or<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo(
            "atomic_fetch_or",
            r,
            pe,
            AmoKind::FetchOr,
            (value, T::from_bits(0)),
            |a| T::fetch_or(a, value, Ordering::SeqCst),
            |old| old,
        )
    }

    /// Bitwise OR (`nvshmem_atomic_or`).
    pub fn atomic_or<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo(
            "atomic_or",
            r,
            pe,
            AmoKind::FetchOr,
            (value, T::from_bits(0)),
            |a| {
                T::fetch_or(a, value, Ordering::SeqCst);
            },
            |_| (),
        )
    }

    /// Bitwise XOR, returning the old value (`nvshmem_atomic_fetch_xor`).
    pub fn atomic_fetch_xor<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo(
            "atomic_fetch_xor",
            r,
            pe,
            AmoKind::FetchXor,
            (value, T::from_bits(0)),
            |a| T::fetch_xor(a, value, Ordering::SeqCst),
            |old| old,
        )
    }

    /// Bitwise XOR (`nvshmem_atomic_xor`).
    pub fn atomic_xor<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo(
            "atomic_xor",
            r,
            pe,
            AmoKind::FetchXor,
            (value, T::from_bits(0)),
            |a| {
                T::fetch_xor(a, value, Ordering::SeqCst);
            },
            |_| (),
        )
    }
}
