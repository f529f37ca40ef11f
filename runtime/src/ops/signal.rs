//! Put-with-signal and signal operations (OpenSHMEM 1.5 §9.8, NVSHMEM
//! `nvshmem_put_signal`, `nvshmem_signal_op`, `nvshmem_signal_wait_until`).
//!
//! A signal is a `u64` element of a symmetric allocation. The target never sees the
//! signal before the data: on a mapped peer the data is copied with plain stores, then
//! the signal is updated with a Release store or RMW, and the waiter reads it with an
//! Acquire load, so every data byte happens-before the waiter's return.
//!
//! On a GPU heap the data goes by copy and the signal by the `host_signal` helper kernel
//! on the same (null) stream, after a system-scope fence, so the order holds there too;
//! waits and fetches read the signal with small device-to-host copies.

use std::sync::atomic::Ordering;

use crate::counters::Op;
use crate::error::Result;
use crate::route::{Located, Word};
use crate::runtime::Runtime;
use crate::sym::SymRef;
use symmem_device::Request;
use symmem_transport::int::{apply_signal, Cmp, SignalOp};
use symmem_transport::Io;

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
        self.put_then_signal("put_signal", dst, src, sig, signal, op, pe, false)
    }

    /// The body of both put_signal forms; `name` names the public operation in errors,
    /// and `nbi` tells the remote transport that the caller does not wait for it.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn put_then_signal<T: bytemuck::Pod>(
        &self,
        name: &'static str,
        dst: SymRef<'_, T>,
        src: &[T],
        sig: SymRef<'_, u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
        nbi: bool,
    ) -> Result<()> {
        // Check the signal first so that a bad signal address leaves the target untouched.
        let s = self.path.word(name, sig, pe)?;
        if let Word::Remote { off: sig_off, .. } = s {
            // One request: the transport applies the data, then the signal.
            let Located::Remote { off, .. } = self.path.locate(name, dst, src.len(), pe)? else {
                unreachable!("a PE's words and data share its route")
            };
            let data: &[u8] = bytemuck::cast_slice(src);
            let req =
                Request::put_signal(pe as u32, off, 0, data.len() as u64, sig_off, op, signal);
            self.path.remote().submit(&req, Io::Src(data))?;
            if nbi {
                // The weak-ordering transport checks a source in this PE's heap at quiet
                // (see `put_nbi`); the submitted request keeps `local` 0, as the payload
                // travels in `data`.
                let issued = Request {
                    local: data.as_ptr() as u64,
                    ..req
                };
                self.path.remote().nbi_issued(&issued);
            }
            return Ok(());
        }
        self.path.write(name, dst, src, pe)?;
        self.update_signal(name, &s, signal, op, pe)
    }

    /// Non-blocking [`put_signal`](Self::put_signal) (`nvshmem_put_signal_nbi`): data and
    /// signal are complete after `quiet` (on a mapped peer, already on return). As for
    /// [`put_nbi`](Self::put_nbi), `src` is copied by the time the call returns, and
    /// weak-ordering mode reports a source in this PE's symmetric heap that changes
    /// before the next quiet.
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
        self.put_then_signal("put_signal_nbi", dst, src, sig, signal, op, pe, true)
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
        let s = self.path.word("signal_op", sig, pe)?;
        self.update_signal("signal_op", &s, signal, op, pe)
    }

    /// Reads this PE's signal `sig` (`nvshmem_signal_fetch`).
    #[inline]
    pub fn signal_fetch(&self, sig: SymRef<'_, u64>) -> Result<u64> {
        let s = self.path.word("signal_fetch", sig, self.my_pe())?;
        self.path.load_word("signal_fetch", &s)
    }

    /// Waits until this PE's signal `sig` satisfies `cmp value` and returns its value
    /// (`nvshmem_signal_wait_until`). Fails, naming the peer, if a peer dies meanwhile,
    /// and after `SYMMEM_TIMEOUT` if one is set.
    #[inline]
    pub fn signal_wait_until(&self, sig: SymRef<'_, u64>, cmp: Cmp, value: u64) -> Result<u64> {
        let word = match self.path.word("signal_wait_until", sig, self.my_pe())? {
            Word::Host(w) => w,
            #[allow(unreachable_patterns)] // only with the cuda feature
            w => {
                return self.wait_word(
                    "signal_wait_until",
                    &w,
                    || format!("signal #{}[{}]", sig.buf.id, sig.index),
                    cmp,
                    value,
                )
            }
        };
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

    /// A team barrier's signal: adds 1 to `flag` on `pe`, as `signal_op` would, after
    /// storing `identity`'s word (if given) at its place on `pe`, so that the barrier's
    /// call is known when the flag is seen (see `team/identity.rs`). A remote one is one
    /// `put_signal`, not left for the next quiet to complete (the barrier waits for it at
    /// `pe`; a quiet that only had it to flush would cost a round trip per barrier).
    pub(crate) fn barrier_signal(
        &self,
        op: &'static str,
        flag: SymRef<'_, u64>,
        identity: Option<(SymRef<'_, u64>, u64)>,
        pe: usize,
    ) -> Result<()> {
        let s = self.path.word(op, flag, pe)?;
        let Some((at, value)) = identity else {
            return match s {
                Word::Remote { pe, off } => {
                    let req = Request::signal(pe as u32, off, SignalOp::Add, 1);
                    Ok(self.path.remote().barrier_signal(&req, Io::None)?)
                }
                s => self.update_signal(op, &s, 1, SignalOp::Add, pe),
            };
        };
        match (s, self.path.word(op, at, pe)?) {
            (Word::Remote { pe, off: sig }, Word::Remote { off, .. }) => {
                // One request: the transport applies the word, then the signal.
                let req = Request::put_signal(pe as u32, off, 0, 8, sig, SignalOp::Add, 1);
                let data = value.to_ne_bytes();
                Ok(self.path.remote().barrier_signal(&req, Io::Src(&data))?)
            }
            // The flag's add (a Release) publishes the word stored before it.
            (s, Word::Host(w)) => {
                w.store(value, Ordering::Relaxed);
                self.update_signal(op, &s, 1, SignalOp::Add, pe)
            }
            (s, w) => {
                self.update_signal(op, &w, value, SignalOp::Set, pe)?;
                self.update_signal(op, &s, 1, SignalOp::Add, pe)
            }
        }
    }

    /// Applies `op(signal)` to a signal word by its route.
    #[inline(always)]
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // `name`, `pe`: GPU words
    fn update_signal(
        &self,
        name: &'static str,
        s: &Word<'_, u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        match s {
            Word::Host(w) => {
                apply_signal(w, signal, op);
                self.path.counters().direct(Op::Signal, 0);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Word::Device { sym, .. } => {
                self.gpu_signal(name, *sym, pe, signal, op)?;
                self.path.counters().direct(Op::Signal, 0);
                Ok(())
            }
            Word::Remote { pe, off } => {
                let req = Request::signal(*pe as u32, *off, op, signal);
                self.path.remote().submit(&req, Io::None)?;
                Ok(())
            }
        }
    }
}
