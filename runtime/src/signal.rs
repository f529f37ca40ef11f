//! Put-with-signal and signal operations (OpenSHMEM 1.5 §9.8, NVSHMEM
//! `nvshmem_put_signal`, `nvshmem_signal_op`, `nvshmem_signal_wait_until`).
//!
//! A signal is a `u64` element of a symmetric allocation. The target never sees the
//! signal before the data: on a mapped peer the data is copied with plain stores, then
//! the signal is updated with a Release store or RMW, and the waiter reads it with an
//! Acquire load, so every data byte happens-before the waiter's return.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::int::{Cmp, SignalOp};
use crate::runtime::Runtime;
use crate::sym::SymRef;

impl Runtime {
    /// Puts `src` to `dst` on `pe`, then updates the signal `sig` on `pe` with
    /// `op(signal)` (`nvshmem_put_signal`). Complete on return.
    #[inline]
    pub fn put_signal<T: bytemuck::Pod>(
        &self,
        dst: SymRef<'_, T>,
        src: &[T],
        sig: SymRef<'_, u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        self.put_then_signal("put_signal", dst, src, sig, signal, op, pe)
    }

    /// The body of both put_signal forms; `name` names the public operation in errors.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn put_then_signal<T: bytemuck::Pod>(
        &self,
        name: &'static str,
        dst: SymRef<'_, T>,
        src: &[T],
        sig: SymRef<'_, u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        // Check the signal first so that a bad signal address leaves the target untouched.
        let s = self.signal_word(name, sig, pe)?;
        self.copy_to(name, dst, src, pe)?;
        apply_signal(s, signal, op);
        Ok(())
    }

    /// Non-blocking [`put_signal`](Self::put_signal) (`nvshmem_put_signal_nbi`): `src`
    /// may be reused on return; data and signal are complete after `quiet` (on a mapped
    /// peer, already on return).
    #[inline]
    pub fn put_signal_nbi<T: bytemuck::Pod>(
        &self,
        dst: SymRef<'_, T>,
        src: &[T],
        sig: SymRef<'_, u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        self.put_then_signal("put_signal_nbi", dst, src, sig, signal, op, pe)
    }

    /// Updates the signal `sig` on `pe` without data (`nvshmem_signal_op`).
    #[inline]
    pub fn signal_op(
        &self,
        sig: SymRef<'_, u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        apply_signal(self.signal_word("signal_op", sig, pe)?, signal, op);
        Ok(())
    }

    /// Reads this PE's signal `sig` (`nvshmem_signal_fetch`).
    #[inline]
    pub fn signal_fetch(&self, sig: SymRef<'_, u64>) -> Result<u64> {
        Ok(self
            .signal_word("signal_fetch", sig, self.my_pe())?
            .load(Ordering::Acquire))
    }

    /// Waits until this PE's signal `sig` satisfies `cmp value` and returns its value
    /// (`nvshmem_signal_wait_until`). Fails, naming the peer, if a peer dies meanwhile,
    /// and after `SYMMEM_TIMEOUT` if one is set.
    #[inline]
    pub fn signal_wait_until(&self, sig: SymRef<'_, u64>, cmp: Cmp, value: u64) -> Result<u64> {
        let word = self.signal_word("signal_wait_until", sig, self.my_pe())?;
        let mut seen = 0;
        self.wait_for(
            "signal_wait_until",
            || {
                format!(
                    "signal #{}[{}] {cmp:?} {value} (last seen {})",
                    sig.buf.id,
                    sig.index,
                    word.load(Ordering::Relaxed)
                )
            },
            || {
                seen = word.load(Ordering::Acquire);
                cmp.holds(seen, value)
            },
        )?;
        Ok(seen)
    }

    #[inline]
    fn signal_word(&self, op: &'static str, sig: SymRef<'_, u64>, pe: usize) -> Result<&AtomicU64> {
        let p = self.target(op, sig, 1, pe)?;
        // SAFETY: in bounds, 8-byte aligned (typed handle, aligned allocation) and mapped
        // while `self` lives; signal words are only accessed atomically.
        Ok(unsafe { AtomicU64::from_ptr(p) })
    }
}

/// Updates a signal word. Release: the data stores before it become visible to whoever
/// Acquire-loads the new value.
#[inline]
fn apply_signal(word: &AtomicU64, signal: u64, op: SignalOp) {
    match op {
        SignalOp::Set => word.store(signal, Ordering::Release),
        SignalOp::Add => {
            word.fetch_add(signal, Ordering::Release);
        }
    }
}
