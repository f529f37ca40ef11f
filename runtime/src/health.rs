//! The wait loop every host wait shares, and the health check it runs once a wait is slow:
//! dead peers (`liveness`), the bootstrap's failure reports, peers the remote transport
//! lost and `SYMMEM_TIMEOUT`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use symmem_bootstrap::BootstrapError;
use symmem_sync::Backoff;

use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// A wait past its spin phase: since when, how many slow rounds it has made, and when it
/// is to report a hang (`None`: done, one report per wait).
struct SlowWait {
    started: Instant,
    rounds: u32,
    next_report: Option<Instant>,
}

/// Slow rounds between refreshes of a published wait's detail (its value last seen).
const REFRESH_ROUNDS: u32 = 64;

/// The wait loop every host wait shares, and the health check it runs once slow.
impl Runtime {
    /// Waits until `ready()` returns true, backing off, checking for dead peers and
    /// `SYMMEM_TIMEOUT` once the wait is no longer short. `waiting_for` names what the wait
    /// depends on, for the error message.
    ///
    /// The loop is kept small and inlined into each wait: the spin phase is a load, a
    /// compare and a `pause`, so a condition that becomes true is noticed within one
    /// `pause` (see [`Backoff`]). Health and deadline checks, which cost syscalls, live
    /// out of line in [`Self::check_slow_wait`] and run only after the spin phase.
    #[inline]
    pub(crate) fn wait_for(
        &self,
        op: &'static str,
        waiting_for: impl Fn() -> String,
        mut ready: impl FnMut() -> bool,
    ) -> Result<()> {
        if ready() {
            return Ok(());
        }
        let mut backoff = Backoff::new();
        let mut slow: Option<SlowWait> = None;
        let result = loop {
            backoff.snooze();
            if let Some(t) = self.path.transport() {
                if !backoff.is_slow() || !t.serves_while_idle() {
                    // Serve peers while spinning: their requests may be what this waits
                    // for. Once the wait sleeps, the transport's own thread serves them
                    // (it stands aside only while threads spin here), where it has one.
                    if let Err(e) = t.progress() {
                        break Err(e.into());
                    }
                }
            }
            if ready() {
                break Ok(());
            }
            if backoff.is_slow() {
                match self.check_slow_wait(op, &mut slow, &waiting_for) {
                    Ok(None) => {}
                    Ok(Some(after)) => {
                        break Err(Error::Timeout {
                            op,
                            me: self.my_pe(),
                            after,
                            waiting_for: waiting_for(),
                        })
                    }
                    Err(e) => break Err(e),
                }
            }
        };
        if slow.is_some() {
            if let Some(h) = &self.hang {
                h.board.withdraw();
            }
        }
        result
    }

    /// One round of the slow part of [`Self::wait_for`]: fails if a peer died, publishes
    /// the wait for the hang report (and reports once it has lasted `SYMMEM_HANG_REPORT`,
    /// or at `SYMMEM_TIMEOUT` if that comes first), and returns `Some(limit)` once
    /// `SYMMEM_TIMEOUT` has passed since the first slow round.
    #[inline(never)]
    fn check_slow_wait(
        &self,
        op: &'static str,
        slow: &mut Option<SlowWait>,
        waiting_for: &dyn Fn() -> String,
    ) -> Result<Option<std::time::Duration>> {
        self.check_health(op)?;
        if crate::interrupt::requested() {
            return Err(Error::Interrupted {
                op,
                me: self.my_pe(),
            });
        }
        let first = slow.is_none();
        let s = slow.get_or_insert_with(|| {
            let started = Instant::now();
            SlowWait {
                started,
                rounds: 0,
                next_report: self.hang.as_ref().map(|h| started + h.after),
            }
        });
        if let Some(h) = &self.hang {
            s.rounds = s.rounds.wrapping_add(1);
            if first || s.rounds.is_multiple_of(REFRESH_ROUNDS) {
                // The detail carries the value last seen: refreshed now and then.
                h.board.publish(crate::hang::record::Wait {
                    op: op.into(),
                    detail: waiting_for(),
                    peer: None,
                    collective: crate::hang::record::current_collective(),
                    since: s.started,
                });
            }
            if s.next_report.is_some_and(|t| Instant::now() >= t) {
                s.next_report = h.report(self.my_pe());
            }
        }
        let timed_out = self
            .config
            .timeout
            .filter(|&limit| s.started.elapsed() >= limit);
        if let (Some(limit), Some(h)) = (timed_out, &self.hang) {
            // A wait that ends at SYMMEM_TIMEOUT before its report was due reports now: the
            // error names what this PE waited for, the report why. (Where the report was
            // due first, this PE or a lower one made it.)
            if limit < h.after && s.next_report.take().is_some() {
                h.report(self.my_pe());
            }
        }
        Ok(timed_out)
    }

    /// Fails if a peer is known to have died, naming the root cause: a dead peer that
    /// recorded which failure it reacted to points at that PE instead.
    pub(crate) fn check_health(&self, op: &'static str) -> Result<()> {
        let me = self.my_pe();
        let failed = |pe: usize, reason: String| Error::PeerFailed { pe, me, op, reason };
        let dead = self.watch.dead();
        let cause_of = |pe: usize| -> Option<usize> {
            let c = self
                .path
                .heap()
                .control(pe)?
                .failure_cause
                .0
                .load(Ordering::Acquire);
            c.checked_sub(1).map(|c| c as usize).filter(|&c| c != me)
        };
        let err = if let Some(&(pe, pid)) = dead.iter().find(|(pe, _)| cause_of(*pe).is_none()) {
            failed(pe, format!("its process {pid} exited"))
        } else if let Some(&(pe, pid)) = dead.first() {
            let root = cause_of(pe).expect("every dead peer recorded a cause");
            failed(
                root,
                format!(
                    "PE {pe} (process {pid}) exited after it detected the failure of PE {root}"
                ),
            )
        } else {
            match self.bootstrap.failure() {
                None => match self.lost_remote_peer() {
                    Some((pe, reason)) => failed(pe, reason),
                    None => return Ok(()),
                },
                Some(BootstrapError::PeerFailed { rank, reason }) => failed(rank, reason),
                Some(other) => return Err(other.into()),
            }
        };
        self.bootstrap.peer_lost();
        if let (Error::PeerFailed { pe, .. }, Some(cb)) = (&err, self.path.heap().control(me)) {
            // A PE that has announced it is leaving (in finalize's arrival barrier, say)
            // keeps the cause it recorded before, if any: a peer that gave up because
            // this PE left would otherwise be blamed by the others for this PE's exit.
            if cb.finalizing.0.load(Ordering::Acquire) == 0 {
                cb.failure_cause.0.store(*pe as u64 + 1, Ordering::Release);
            }
        }
        Err(err)
    }

    /// A PE on another node that the remote transport has lost (its connection failed
    /// without a goodbye), with the reason. Same-node peers are watched through their
    /// processes and the bootstrap reports what it learns, but neither sees every remote
    /// death: the MPI bootstrap reports none, and a PE's process on another node cannot
    /// be watched. Consulted after them, so that their reports, which can name a root
    /// cause, take precedence.
    fn lost_remote_peer(&self) -> Option<(usize, String)> {
        let t = self.path.transport()?;
        let (pe, why) = t.failed_peer()?;
        Some((pe, format!("the {} transport lost it: {why}", t.name())))
    }

    /// Before this PE announces that it is leaving (the `finalizing` flag, set by finalize
    /// and by a drop), makes sure its control block names the failed PE it is leaving
    /// because of, if one is known: a peer waiting for it in a barrier then names that PE,
    /// the root cause, instead of this one. A wait that found the failure has recorded it
    /// already; this covers the other ways of learning it (a bootstrap collective that
    /// failed in alloc, say) and is a no-op when all is well.
    pub(crate) fn record_failure_cause(&self) {
        let Some(cb) = self.path.heap().control(self.my_pe()) else {
            return;
        };
        if cb.failure_cause.0.load(Ordering::Acquire) == 0 {
            // `check_health` records the PE it blames; its error is only reported by the
            // wait that found it, not by finalize.
            let _ = self.check_health("finalize");
        }
    }
}
