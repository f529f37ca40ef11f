//! Atomic memory operations on `u32`, `u64`, `i32`, `i64` (OpenSHMEM 1.5 §9.7,
//! NVSHMEM `nvshmem_*_atomic_*`).
//!
//! On a mapped peer each operation is one hardware atomic on the peer's heap. Read-modify-
//! writes are `SeqCst` (on x86 a locked instruction either way); `atomic_fetch` is an
//! Acquire load and `atomic_set` a Release store, so an AMO can publish data written
//! before it, as NVSHMEM's ordering guarantees for AMOs after `fence` require. Alignment
//! holds by construction: handles are typed and allocations at least 64-byte aligned.

use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::int::SymInt;
use crate::runtime::Runtime;
use crate::sym::SymRef;

impl Runtime {
    /// Runs `f` on the atomic at `r` on `pe`.
    #[inline]
    fn amo<T: SymInt, R>(
        &self,
        op: &'static str,
        r: SymRef<'_, T>,
        pe: usize,
        f: impl FnOnce(&T::Atomic) -> R,
    ) -> Result<R> {
        let p = self.target(op, r, 1, pe)?;
        // SAFETY: `p` is in bounds, aligned for T (typed handle in an aligned allocation)
        // and mapped for the life of `self`; the element is only accessed atomically here.
        Ok(f(unsafe { T::atomic(p) }))
    }

    /// Atomically reads the element (`nvshmem_atomic_fetch`).
    pub fn atomic_fetch<T: SymInt>(&self, r: SymRef<'_, T>, pe: usize) -> Result<T> {
        self.amo("atomic_fetch", r, pe, |a| T::load(a, Ordering::Acquire))
    }

    /// Atomically writes the element (`nvshmem_atomic_set`).
    pub fn atomic_set<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo("atomic_set", r, pe, |a| {
            T::store(a, value, Ordering::Release)
        })
    }

    /// Atomically replaces the element, returning the old value (`nvshmem_atomic_swap`).
    pub fn atomic_swap<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo("atomic_swap", r, pe, |a| {
            T::swap(a, value, Ordering::SeqCst)
        })
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
        self.amo("atomic_compare_swap", r, pe, |a| {
            T::compare_swap(a, cond, value, Ordering::SeqCst)
        })
    }

    /// Adds `value` (wrapping), returning the old value (`nvshmem_atomic_fetch_add`).
    pub fn atomic_fetch_add<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo("atomic_fetch_add", r, pe, |a| {
            T::fetch_add(a, value, Ordering::SeqCst)
        })
    }

    /// Adds `value` (wrapping) (`nvshmem_atomic_add`).
    pub fn atomic_add<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo("atomic_add", r, pe, |a| {
            T::fetch_add(a, value, Ordering::SeqCst);
        })
    }

    /// Adds one, returning the old value (`nvshmem_atomic_fetch_inc`).
    pub fn atomic_fetch_inc<T: SymInt>(&self, r: SymRef<'_, T>, pe: usize) -> Result<T> {
        self.amo("atomic_fetch_inc", r, pe, |a| {
            T::fetch_add(a, T::ONE, Ordering::SeqCst)
        })
    }

    /// Adds one (`nvshmem_atomic_inc`).
    pub fn atomic_inc<T: SymInt>(&self, r: SymRef<'_, T>, pe: usize) -> Result<()> {
        self.amo("atomic_inc", r, pe, |a| {
            T::fetch_add(a, T::ONE, Ordering::SeqCst);
        })
    }

    /// Bitwise AND, returning the old value (`nvshmem_atomic_fetch_and`).
    pub fn atomic_fetch_and<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo("atomic_fetch_and", r, pe, |a| {
            T::fetch_and(a, value, Ordering::SeqCst)
        })
    }

    /// Bitwise AND (`nvshmem_atomic_and`).
    pub fn atomic_and<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo("atomic_and", r, pe, |a| {
            T::fetch_and(a, value, Ordering::SeqCst);
        })
    }

    /// Bitwise OR, returning the old value (`nvshmem_atomic_fetch_or`).
    pub fn atomic_fetch_or<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo("atomic_fetch_or", r, pe, |a| {
            T::fetch_or(a, value, Ordering::SeqCst)
        })
    }

    /// Bitwise OR (`nvshmem_atomic_or`).
    pub fn atomic_or<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo("atomic_or", r, pe, |a| {
            T::fetch_or(a, value, Ordering::SeqCst);
        })
    }

    /// Bitwise XOR, returning the old value (`nvshmem_atomic_fetch_xor`).
    pub fn atomic_fetch_xor<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<T> {
        self.amo("atomic_fetch_xor", r, pe, |a| {
            T::fetch_xor(a, value, Ordering::SeqCst)
        })
    }

    /// Bitwise XOR (`nvshmem_atomic_xor`).
    pub fn atomic_xor<T: SymInt>(&self, r: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.amo("atomic_xor", r, pe, |a| {
            T::fetch_xor(a, value, Ordering::SeqCst);
        })
    }
}
