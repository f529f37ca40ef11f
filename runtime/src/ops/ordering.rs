//! `fence` and `quiet` (OpenSHMEM 1.5 §9.11, NVSHMEM `nvshmem_fence`/`nvshmem_quiet`).
//!
//! To a mapped peer every put, get and AMO is performed by this thread's own loads,
//! stores and atomics before the call returns, so nothing is ever outstanding. What is
//! left is ordering as seen from other processes: plain stores of a put may become visible
//! to a peer in any order relative to a later put unless a fence separates them on weakly
//! ordered CPUs. Both return `Result` because on remote transports they wait for, and can
//! learn of the failure of, operations in flight.

use std::sync::atomic::{fence, Ordering};

use crate::counters::Op;
use crate::error::Result;
use crate::runtime::Runtime;

impl Runtime {
    /// Orders this PE's puts, AMOs and signals to each target PE: all issued before the
    /// fence are delivered before any issued after it to the same PE (`nvshmem_fence`).
    /// Does not wait for completion.
    ///
    /// A Release fence: a peer that observes any atomic update issued after the fence
    /// (through an Acquire load such as `wait_until`) observes every store issued before
    /// it. `p` of a 4- or 8-byte value, AMOs and signals are such updates, so "put data;
    /// fence; p(flag)" publishes the data; a flag written by a multi-element `put` is not
    /// one (use `p`, `atomic_set` or `put_signal` for flags).
    #[inline]
    pub fn fence(&self) -> Result<()> {
        fence(Ordering::Release);
        self.path.counters().direct(Op::Fence, 0);
        match self.path.transport() {
            Some(t) => Ok(t.fence()?),
            None => Ok(()),
        }
    }

    /// Returns when every put, get, AMO and signal this PE issued earlier is complete and
    /// visible at its target (`nvshmem_quiet`).
    ///
    /// On mapped peers the operations completed when they returned; the SeqCst fence
    /// additionally orders them before everything this PE does afterwards, including
    /// loads, as `quiet` requires.
    ///
    /// On a GPU PE it also waits for the runtime's work on the GPU's default stream
    /// (host copies and helper kernels; each already completes before its call returns,
    /// so this is a formality that keeps the contract explicit). Streams of the
    /// program's own are not waited for: use `quiet_on_stream` for those.
    #[inline]
    pub fn quiet(&self) -> Result<()> {
        fence(Ordering::SeqCst);
        self.path.counters().direct(Op::Quiet, 0);
        if self.path.transport().is_none() && self.device.is_none() {
            return Ok(());
        }
        self.quiet_outstanding()
    }

    /// The part of [`Self::quiet`] that waits for the remote transport and the GPU: out
    /// of line, so that `quiet` between mapped CPU PEs stays small enough to inline.
    #[inline(never)]
    fn quiet_outstanding(&self) -> Result<()> {
        if let Some(t) = self.path.transport() {
            // Device requests a finished kernel left in the proxy ring (`_nbi`) first.
            if let Some(p) = &self.proxy {
                p.drain(self.my_pe(), t.name(), self.config.timeout)?;
            }
            t.quiet()?;
        }
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            d.gpu.synchronize("quiet")?;
        }
        Ok(())
    }
}
