//! `barrier_all` and `sync_all`.
//!
//! When every PE's heap is mapped here (one node, P2P on), synchronization is a
//! dissemination barrier over the [`ControlBlock`](crate::heap::ControlBlock) flags:
//! ceil(log2 n) rounds, in round `r` PE `i` signals PE `i + 2^r` and waits for PE `i - 2^r`.
//! Flags hold a monotonically increasing epoch, so they never need resetting and a fast
//! partner that already signalled the next epoch is harmless (`flag >= epoch`).
//! Otherwise the bootstrap's barrier is used until a remote transport exists.

use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::runtime::Runtime;

impl Runtime {
    /// Blocks until every PE has called `barrier_all`, after completing all of this PE's
    /// outstanding operations (`nvshmem_barrier_all`: quiet + sync).
    pub fn barrier_all(&self) -> Result<()> {
        self.quiet()?;
        self.sync_all()
    }

    /// Blocks until every PE has called `sync_all` (`nvshmem_sync_all`). Orders memory
    /// like a barrier for stores already performed but does not complete nonblocking
    /// operations.
    pub fn sync_all(&self) -> Result<()> {
        let n = self.n_pes();
        let me = self.my_pe();
        let all_mapped = (0..n).all(|pe| self.heap.base(pe).is_some());
        if !all_mapped {
            return Ok(self.bootstrap.barrier()?);
        }
        let mut epoch_guard = self.barrier_epoch.lock().unwrap_or_else(|p| p.into_inner());
        *epoch_guard += 1;
        let epoch = *epoch_guard;
        let mine = self.heap.control(me).expect("own heap is mapped");
        let (mut dist, mut round) = (1, 0);
        while dist < n {
            let to = (me + dist) % n;
            let from = (me + n - dist) % n;
            let partner = self.heap.control(to).expect("all heaps are mapped");
            // Release: everything this PE wrote before the barrier (and everything it
            // learned of through earlier rounds' Acquire loads) is visible to `to` once it
            // sees this epoch. The chain of rounds makes the barrier transitive.
            partner.barrier[round].0.store(epoch, Ordering::Release);
            let flag = &mine.barrier[round].0;
            self.wait_for(
                "barrier_all",
                || format!("PE {from} (round {round} of the barrier, epoch {epoch})"),
                || flag.load(Ordering::Acquire) >= epoch,
            )?;
            dist *= 2;
            round += 1;
        }
        Ok(())
    }
}
