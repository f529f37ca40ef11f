//! `barrier_all` and `sync_all`.
//!
//! When every PE's heap is mapped here (one node, P2P on), synchronization is a
//! dissemination barrier over the [`ControlBlock`](crate::heap::ControlBlock) flags:
//! ceil(log2 n) rounds, in round `r` PE `i` signals PE `i + 2^r` and waits for PE `i - 2^r`.
//! Flags hold a monotonically increasing epoch, so they never need resetting and a fast
//! partner that already signalled the next epoch is harmless (`flag >= epoch`). The
//! schedule, the orderings and the epochs are [`symmem_sync::barrier`]'s, model-checked
//! with loom there; this module adds the waits, with their dead-peer, finalize and timeout
//! checks. Otherwise (PEs on other nodes, or P2P off) it is TEAM_WORLD's barrier, which
//! signals over every route and carries the call's identity, so that a PE in another
//! TEAM_WORLD collective fails naming both calls instead of pairing with it (see
//! `team/identity.rs`); the bootstrap's barrier only serves a job with neither.

use std::sync::atomic::Ordering;

use symmem_sync::barrier::{self, Round};

use crate::error::{Error, Result};
use crate::runtime::Runtime;

impl Runtime {
    /// Blocks until every PE has called `barrier_all`, after completing all of this PE's
    /// outstanding operations (`nvshmem_barrier_all`: quiet + sync).
    pub fn barrier_all(&self) -> Result<()> {
        // The quiet completes the transport's operations too: no second quiet in the sync.
        self.quiet()?;
        self.sync_pes("barrier_all")
    }

    /// Blocks until every PE has called `sync_all` (`nvshmem_sync_all`). Orders memory
    /// like a barrier for stores already performed but does not complete nonblocking
    /// operations (except those over the remote transport, which it completes so that
    /// blocking puts and AMOs are visible after it on every route).
    pub fn sync_all(&self) -> Result<()> {
        if let Some(t) = self.path.transport() {
            // Blocking puts and AMOs to mapped peers are visible once they return;
            // completing the transport's too keeps that true on every route (more than
            // sync requires, and free when nothing is outstanding). Whenever a transport
            // exists, not only when some control block is unmapped: every control block
            // can be mapped while data routes are remote (GPU peers without peer access,
            // one GPU per rank), and weak ordering buffers puts to mapped peers in it.
            t.quiet()?;
        }
        self.sync_pes("sync_all")
    }

    /// The synchronization of `sync_all` and `barrier_all` (`op`), after their quiets.
    fn sync_pes(&self, op: &'static str) -> Result<()> {
        let n = self.n_pes();
        let me = self.my_pe();
        if !self.all_mapped {
            if self.path.transport().is_none() {
                return Ok(self.bootstrap.barrier()?);
            }
            // TEAM_WORLD's barrier runs on every route and waits under SYMMEM_TIMEOUT, as
            // the mapped barrier below does; the bootstrap's would fail a PE that reaches
            // it more than SYMMEM_BOOTSTRAP_TIMEOUT after another.
            // Its signals carry `op`, so that a PE in another collective on TEAM_WORLD
            // fails naming both rather than pairing with this barrier (see
            // `team/identity.rs`).
            return self.team_sync(op, &self.team_world());
        }
        let state = &self.barrier;
        let mut turn = state.try_next();
        if turn.is_none() {
            self.wait_for(
                op,
                || "another thread of this PE to leave barrier_all".to_string(),
                || {
                    turn = state.try_next();
                    turn.is_some()
                },
            )?;
        }
        let Some(turn) = turn else {
            unreachable!("wait_for returns Ok only once the turn is taken")
        };
        let epoch = turn.epoch();
        // What a slow wait below publishes for the hang report (only where it is on).
        let _in_collective = self.hang.is_some().then(|| {
            crate::hang::record::in_collective(crate::hang::record::Collective {
                team: "TEAM_WORLD".to_string(),
                members: (0..n).collect(),
                seq: epoch,
            })
        });
        let mine = self.path.heap().control(me).expect("own heap is mapped");
        for Round { index, to, from } in barrier::rounds(me, n) {
            let partner = self.path.heap().control(to).expect("all heaps are mapped");
            barrier::signal(&partner.barrier[index].0, epoch);
            let flag = &mine.barrier[index].0;
            let gone = &self
                .path
                .heap()
                .control(from)
                .expect("all heaps are mapped")
                .finalizing
                .0;
            let (mut polls, mut left) = (0u32, false);
            self.wait_for(
                op,
                || format!("PE {from} (round {index} of the barrier, epoch {epoch})"),
                || {
                    if barrier::arrived(flag, epoch) {
                        return true;
                    }
                    // A partner that entered finalize will never join this barrier; it is
                    // alive (in finalize's own barrier), so only this flag tells. Checked
                    // every 256 polls to keep the spin on one cache line.
                    polls = polls.wrapping_add(1);
                    left = polls % 256 == 0 && gone.load(Ordering::Acquire) != 0;
                    left
                },
            )?;
            if left && !barrier::arrived(flag, epoch) {
                return Err(self.partner_left_in(op, from));
            }
        }
        Ok(())
    }

    /// The error of the barrier of operation `op` (`barrier_all`, `sync_all`, a team's
    /// barrier) whose partner `from` entered finalize (or dropped its
    /// runtime) instead of joining. If `from` recorded that it gave up because another PE
    /// failed, that PE is the root cause and is named; otherwise `from` is. Either way the
    /// PE named is recorded in this PE's control block, like `check_health` does, so that
    /// peers that find this PE gone (it exits on this error, usually) blame it too.
    #[cold]
    pub(crate) fn partner_left_in(&self, op: &'static str, from: usize) -> Error {
        let me = self.my_pe();
        // The Acquire load of `from`'s finalizing flag that got us here synchronizes with
        // `from`'s Release store of it, which follows its store of the cause, so a cause
        // recorded before finalize is visible here.
        let cause = self
            .path
            .heap()
            .control(from)
            .map(|cb| cb.failure_cause.0.load(Ordering::Acquire))
            .and_then(|c| c.checked_sub(1))
            .map(|c| c as usize)
            .filter(|&c| c != me && c != from && c < self.n_pes());
        let (pe, reason) = match cause {
            Some(root) => (
                root,
                format!(
                    "PE {from} entered finalize (or dropped its runtime) instead of this barrier after it detected the failure of PE {root}"
                ),
            ),
            None => (
                from,
                "it entered finalize (or dropped its runtime) instead of this barrier".into(),
            ),
        };
        if let Some(mine) = self.path.heap().control(me) {
            mine.failure_cause.0.store(pe as u64 + 1, Ordering::Release);
        }
        Error::PeerFailed { pe, me, op, reason }
    }
}
