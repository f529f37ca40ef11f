//! Waiting for operations: until one (or every one to a peer) completed, with the
//! liveness probes that find a dead peer meanwhile, the drain of `fence` and `quiet`, and
//! the flush reads that make writes completed at transmit visible.

use super::*;

impl State {
    /// Ends a put or get: where it failed with pieces still posted from or into the
    /// caller's buffer, waits for them ([`Self::settle`]) before the caller gets its
    /// buffer back.
    pub(in crate::ofi) fn release_caller_buffer<R>(
        &mut self,
        result: std::result::Result<R, String>,
        w: &Waiter,
    ) -> std::result::Result<R, String> {
        let posted = std::mem::take(&mut self.caller_buffer_ops);
        if result.is_err() {
            self.settle(&posted, w);
        }
        result
    }

    /// Waits until every operation in `posted` completed, successfully or not (each
    /// posted operation gets one completion entry), so that the provider no longer reads
    /// or writes the caller's buffer; before, a put or get that failed (a timeout,
    /// another operation's error) returned with pieces still posted, and the NIC could
    /// write into memory the caller had reused (the proxy's inline get reads into its
    /// stack). Where they do not complete within `SYMMEM_TIMEOUT` (or
    /// [`SETTLE_LIMIT`]) more, the endpoint is closed, which ends every operation on it,
    /// and the transport stays failed.
    pub(in crate::ofi) fn settle(&mut self, posted: &[u64], w: &Waiter) {
        let limit = w.timeout.unwrap_or(SETTLE_LIMIT);
        let deadline = Instant::now() + limit;
        let mut backoff = Backoff::new();
        while posted.iter().any(|&op| !self.ops.is_complete(op)) {
            if self.ep.0.is_null() {
                return;
            }
            if Instant::now() >= deadline {
                let why = format!(
                    "operations posted from or into the caller's buffer did not complete within {limit:?} after the call failed; the endpoint is closed so that the provider cannot use that buffer again"
                );
                tracing::error!("PE {}: ofi transport: {why}", self.me);
                self.failure.get_or_insert(why);
                self.close_endpoint();
                return;
            }
            // An error is recorded (the transport fails) and its entry completes the
            // failed operation.
            let _ = self.poll();
            backoff.snooze();
        }
    }

    /// Waits until operation `op` and every earlier one completed.
    ///
    /// Every [`PROBE_AFTER`] without that, it probes the peers ([`Self::probe_peers`]): a
    /// target that died fails the wait, naming it, where the operation itself would never
    /// complete (a message whose acknowledgement will not come) and `SYMMEM_TIMEOUT` is
    /// unset by default.
    pub(in crate::ofi) fn wait(&mut self, op: u64, w: &Waiter) -> std::result::Result<(), String> {
        self.wait_until(w, None, |ops| ops.done_upto() >= op)
    }

    /// Waits until operation `op` and every earlier one to `pe` completed (operations to
    /// other peers may still be in flight), as [`Self::wait`].
    pub(in crate::ofi) fn wait_peer(
        &mut self,
        pe: usize,
        op: u64,
        w: &Waiter,
    ) -> std::result::Result<(), String> {
        self.wait_until(w, Some(pe), |ops| ops.peer_done(pe, op))
    }

    /// Waits until operation `op` completed (earlier ones may still be in flight), as
    /// [`Self::wait`].
    pub(in crate::ofi) fn wait_op(
        &mut self,
        op: u64,
        w: &Waiter,
    ) -> std::result::Result<(), String> {
        self.wait_until(w, None, |ops| ops.is_complete(op))
    }

    /// Waits until `done` says so of the completions, polling; as [`Self::wait`]. `peer`
    /// is the PE whose completions end the wait, when one PE's do; once the wait is slow
    /// it is published for the hang report ([`crate::Transport::blocked`]).
    pub(in crate::ofi) fn wait_until(
        &mut self,
        w: &Waiter,
        peer: Option<usize>,
        done: impl Fn(&Completions) -> bool,
    ) -> std::result::Result<(), String> {
        let mut backoff = Backoff::new();
        let mut probe_at = Instant::now() + PROBE_AFTER;
        let mut shown = None;
        while !done(&self.ops) {
            if backoff.is_slow() && shown.is_none() {
                shown = w.call.as_ref().map(|c| {
                    let peer = peer.or(c.pe);
                    c.blocked.begin(crate::blocked::Blocked {
                        op: c.op,
                        peer,
                        detail: match peer {
                            Some(pe) => format!("the ofi transport's completions of operations to PE {pe}"),
                            None => format!(
                                "the ofi transport's completions: operations up to {} of {} completed",
                                self.ops.done_upto(),
                                self.ops.issued()
                            ),
                        },
                        since: c.started,
                    })
                });
            }
            self.poll()?;
            if done(&self.ops) {
                break;
            }
            if w.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(format!(
                    "no completion within SYMMEM_TIMEOUT ({:?}): operations up to {} of {} completed",
                    w.timeout.unwrap_or_default(),
                    self.ops.done_upto(),
                    self.ops.issued()
                ));
            }
            if Instant::now() >= probe_at {
                self.probe_peers()?;
                probe_at = Instant::now() + PROBE_AFTER;
            }
            backoff.snooze();
        }
        Ok(())
    }

    /// Every [`PROBE_AFTER`], once the previous round completed, posts a read of a few
    /// bytes to every peer: a peer that died fails it, and the failed completion names
    /// it. Called from the runtime's slow waits ([`Transport::failed_peer`]), so that a
    /// PE waiting on a peer it sends nothing to learns of its death where nothing else
    /// reports it (an MPI bootstrap), and from this transport's own waits that see no
    /// completion for a while ([`Self::wait`]). A peer that answers nothing (alive, but serving
    /// nobody: `SYMMEM_OFI_PROGRESS=manual` while it computes) only delays the next round.
    pub(in crate::ofi) fn probe_peers(&mut self) -> std::result::Result<(), String> {
        let (in_flight, at) = &mut self.liveness;
        in_flight.retain(|&op| !self.ops.is_complete(op));
        // The first call only starts the clock: a wait that is slow for less than a
        // round (or finalize's one health check) sends no probe.
        let Some(last) = at else {
            *at = Some(Instant::now());
            return Ok(());
        };
        if !in_flight.is_empty() || last.elapsed() < PROBE_AFTER {
            return Ok(());
        }
        *at = Some(Instant::now());
        let w = Waiter {
            deadline: Some(Instant::now()),
            timeout: None,
            call: None,
        };
        for pe in 0..self.peers.len() {
            let Some(heap) = self.peers[pe] else {
                continue;
            };
            let (op, room_after) = self.ops.next();
            if pe == self.me || self.departed[pe] || !self.ops.is_complete(room_after) {
                continue;
            }
            match self.post_probe("fi_read (liveness probe)", pe, heap, op, &w) {
                Ok(op) => self.liveness.0.push(op),
                // A provider busy right now: the next round tries again.
                Err(_) if self.failure.is_none() => {}
                Err(why) => return Err(why),
            }
        }
        Ok(())
    }

    /// Posts operation `op` (the next number, with room in the ring): a read of a few
    /// bytes from `pe`'s heap into the flush bytes, to learn whether `pe` answers.
    pub(in crate::ofi) fn post_probe(
        &mut self,
        what: &str,
        pe: usize,
        heap: PeerHeap,
        op: u64,
        w: &Waiter,
    ) -> std::result::Result<u64, String> {
        let local = self.bounce.flush();
        let len = heap.len.min(FLUSH_BYTES as u64) as usize;
        // SAFETY: the probe reads into the flush bytes of the registered bounce buffer,
        // which are never read; the peer's heap holds `len` bytes at its base.
        self.issue(what, Access::Read, pe, None, op, w, |ep, op, _| unsafe {
            ffi::symmem_ofi_read(ep, op, local.cast(), 1, len, pe, heap.base, heap.key)
        })
    }

    /// Waits until every operation issued so far completed, and every write is visible
    /// at its target (a flush to each peer whose writes completed at transmit).
    /// Acknowledgements held back go first: a peer's quiet may be waiting for them.
    ///
    /// With nothing outstanding (where the wait below would not poll) it polls once,
    /// unless a poll ran within [`POLL_FRESH`]: a target that waits by `test` + `fence`
    /// (or quiets in a loop) applies its peers' messages here, since its calls keep the
    /// progress thread standing aside.
    pub(in crate::ofi) fn drain(&mut self, w: &Waiter) -> std::result::Result<(), String> {
        let idle = self.ops.done_upto() == self.ops.issued();
        if idle && self.last_poll.elapsed() >= POLL_FRESH {
            self.poll()?;
        }
        self.send_acks()?;
        self.flush(w)?;
        self.wait(self.ops.issued(), w)
    }

    /// Posts a flush (a read of a few bytes, which the provider keeps behind the writes)
    /// to every peer whose writes completed at transmit and nothing covers yet; returns
    /// the operation whose completion makes every write posted so far visible, as far as
    /// completed writes are not visible already (see [`deliveries`](protocol::deliveries)).
    pub(in crate::ofi) fn flush(&mut self, w: &Waiter) -> std::result::Result<u64, String> {
        while let Some(pe) = self.deliveries.next_uncovered() {
            self.flush_peer(pe, w)?;
        }
        Ok(self.deliveries.covered_by())
    }

    /// Posts a flush to `pe` (see [`Self::flush`]) and records that it covers the writes
    /// to `pe` before it.
    pub(in crate::ofi) fn flush_peer(
        &mut self,
        pe: usize,
        w: &Waiter,
    ) -> std::result::Result<(), String> {
        let heap = self.peers[pe].ok_or("a flush to a PE the ofi transport does not reach")?;
        let local = self.bounce.flush();
        let len = heap.len.min(FLUSH_BYTES as u64) as usize;
        // SAFETY: the flush bytes lie in the registered bounce buffer and are never
        // read; the peer's heap holds `len` bytes at its base.
        unsafe {
            self.post_read(
                "fi_read (flush)",
                pe,
                None,
                true,
                local,
                len,
                heap.base,
                heap.key,
                w,
            )
        }?;
        Ok(())
    }
}
