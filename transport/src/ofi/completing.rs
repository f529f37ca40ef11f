//! The endpoint's completing side: polling the provider's completion queue, completing
//! operations, applying the messages peers sent (after their check) and acknowledging
//! them, and serving the healthy peers after a failure.

use super::*;

impl State {
    /// Drives progress, records the completions and applies the messages received
    /// (acknowledging them); records a failure.
    ///
    /// Acknowledgements go out once a poll finds no new message (or many are due): the
    /// thread that waits for a signal sees it first, and a ping-pong's answer is not
    /// queued behind the acknowledgement. The transport's own thread sends them at once.
    pub(in crate::ofi) fn poll(&mut self) -> std::result::Result<(), String> {
        self.polls += 1;
        self.last_poll = Instant::now();
        let due = self.acks.len();
        let result = self.poll_completions().and_then(|()| {
            if self.acks.send_now(due) {
                self.send_acks()
            } else {
                Ok(())
            }
        });
        if let Err(why) = &result {
            self.failure.get_or_insert_with(|| why.clone());
        }
        result
    }

    /// [`Self::poll`] but for the acknowledgements: posts the receive buffers still to
    /// post, then reads every completion.
    pub(in crate::ofi) fn poll_completions(&mut self) -> std::result::Result<(), String> {
        let mut err = [0 as c_char; 512];
        let mut done = [0u64; 64];
        let mut lens = [0usize; 64];
        let mut sources = [0u64; 64];
        while let Some(i) = self.unposted.pop() {
            if !self.repost(i)? {
                break;
            }
        }
        loop {
            let mut failed_op = 0u64;
            // SAFETY: an open endpoint; valid out-parameters of the given sizes.
            let n = unsafe {
                ffi::symmem_ofi_completed_from(
                    self.ep.0,
                    done.as_mut_ptr(),
                    lens.as_mut_ptr(),
                    sources.as_mut_ptr(),
                    done.len(),
                    &mut failed_op,
                    err.as_mut_ptr(),
                    err.len(),
                )
            };
            if n < 0 {
                let why = ffi::text(&err);
                if failed_op & RECEIVE == 0 {
                    // The first failure names its peer; later ones (after it, while this
                    // PE keeps serving its healthy peers) do not rename it.
                    if self.failure.is_none() {
                        self.failed_pe = self.ops.target(failed_op);
                    }
                    // Then the failed operation is over for the provider: it no longer
                    // uses its buffers ([`Self::settle`] waits for exactly that).
                    let _ = self.ops.complete(failed_op);
                }
                return Err(why);
            }
            for ((&op, &len), &source) in done.iter().zip(&lens).zip(&sources).take(n as usize) {
                if op & RECEIVE != 0 {
                    self.received((op & !RECEIVE) as usize, len, source)?;
                } else {
                    self.ops.complete(op)?;
                }
            }
            if (n as usize) < done.len() {
                return Ok(());
            }
        }
    }

    /// Applies the message of `len` bytes in receive buffer `i` and posts the buffer again:
    /// a signal's data, then its signal (a CPU atomic, after the data), to be acknowledged;
    /// or an acknowledgement, completing the operation it names. A message that is not
    /// its claimed sender's under the job's key, or came from another endpoint (`source`:
    /// the shim's), is dropped ([`driver::auth::Auth::admits`]).
    pub(in crate::ofi) fn received(
        &mut self,
        i: usize,
        len: usize,
        source: u64,
    ) -> std::result::Result<(), String> {
        if i >= RECV_SLOTS {
            return Err(format!("a completion of unknown receive buffer {i}"));
        }
        let buf = self.bounce.receive(i);
        // SAFETY: the provider received `len` bytes (at most RECV_BYTES) into the buffer,
        // which nothing else touches until it is posted again below.
        let bytes = unsafe { std::slice::from_raw_parts(buf, len.min(RECV_BYTES)) };
        if !self.auth.admits(bytes, source) {
            return self.repost(i).map(drop);
        }
        let message = messages::decode(bytes, self.peers.len(), self.heap.len)
            .and_then(|m| match m {
                Message::Signal(_) if self.heap.addr == 0 => {
                    Err("a signal message, which this PE does not take".to_string())
                }
                m => Ok(m),
            })
            .map_err(|why| format!("PE {} received {why}", self.me))?;
        match message {
            Message::Signal(s) => {
                if s.acked != 0 {
                    self.acknowledged(s.from, s.acked)?;
                }
                self.apply(&s, &bytes[HEADER..HEADER + s.data_len]);
                self.acks.owe(s.from, s.op);
            }
            Message::Ack { from, op } => self.acknowledged(from, op)?,
            Message::Goodbye { from } => self.departed[from] = true,
        }
        self.repost(i).map(drop)
    }

    /// Completes this PE's message `op`, which `from` acknowledged.
    pub(in crate::ofi) fn acknowledged(
        &mut self,
        from: usize,
        op: u64,
    ) -> std::result::Result<(), String> {
        if self.ops.target(op) != Some(from) {
            return Err(format!(
                "PE {from} acknowledged operation {op}, which is not a message to it in flight"
            ));
        }
        self.ops.complete(op)
    }

    /// Posts receive buffer `i` again: true when posted, false when the provider was busy
    /// (it is retried at the next poll).
    pub(in crate::ofi) fn repost(&mut self, i: usize) -> std::result::Result<bool, String> {
        match post_receive(&self.ep, &mut self.bounce, i) {
            0 => Ok(true),
            ffi::EAGAIN => {
                self.unposted.push(i);
                Ok(false)
            }
            rc => Err(format!(
                "posting receive buffer {i} again failed: error {}",
                -rc
            )),
        }
    }

    /// Applies signal message `s` with its `data` to this PE's heap: the data, then the
    /// signal.
    pub(in crate::ofi) fn apply(&self, s: &Signal, data: &[u8]) {
        let base = self.heap.addr as *mut u8;
        // SAFETY: `decode` checked both ranges against the heap, which is host memory of
        // this process (`heap.addr` is 0 otherwise, and such messages were refused) and
        // stays mapped while the endpoint is open. The signal word is 8-byte aligned
        // (checked) in a page-aligned heap, and peers' RMA and this PE's own code update
        // it only atomically.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(s.data_off as usize), data.len());
            let word = AtomicU64::from_ptr(base.add(s.sig_off as usize).cast::<u64>());
            match s.sig_op {
                SignalOp::Set => word.store(s.value, Ordering::Release),
                SignalOp::Add => {
                    word.fetch_add(s.value, Ordering::Release);
                }
            }
        }
    }

    /// Sends the acknowledgements due (injected: no completion to wait for).
    pub(in crate::ofi) fn send_acks(&mut self) -> std::result::Result<(), String> {
        while let Some((pe, op)) = self.acks.oldest() {
            let mut ack = messages::encode_ack(self.me, op);
            self.auth.seal(&mut ack, pe);
            // SAFETY: an open endpoint; ACK_BYTES fit its inject size (`wants_messages`).
            let rc =
                unsafe { ffi::symmem_ofi_inject(self.ep.0, ack.as_ptr().cast(), ack.len(), pe) };
            if rc == ffi::EAGAIN {
                return Ok(());
            }
            if rc != 0 {
                let why = format!("acknowledging a message to PE {pe} failed: error {}", -rc);
                if self.failure.is_none() {
                    self.failed_pe = Some(pe);
                }
                self.failure.get_or_insert_with(|| why.clone());
                return Err(why);
            }
            self.acks.sent_oldest();
        }
        Ok(())
    }

    /// Closes the endpoint (and its registrations) at once: every operation on it ends,
    /// and nothing uses it again (the transport has failed: only shutdown follows).
    pub(in crate::ofi) fn close_endpoint(&mut self) {
        drop(std::mem::replace(
            &mut self.ep,
            Endpoint(std::ptr::null_mut()),
        ));
    }

    /// After a failure, which fails this PE's own operations, keeps serving the peers that
    /// are still healthy until shutdown: reads the completion queue (the errors of
    /// operations to the failed peer are read and dropped), applies their messages and
    /// acknowledges them (an acknowledgement that cannot go is dropped: its peer is
    /// gone). Without it a PE whose transport failed stopped reading its queue, and a
    /// healthy peer's put_signal or quiet waited for it until SYMMEM_TIMEOUT, or forever.
    pub(in crate::ofi) fn serve_after_failure(&mut self) {
        if self.ep.0.is_null() {
            return;
        }
        // Each error ends one read of the queue; a bounded number per call.
        for _ in 0..64 {
            if self.poll_completions().is_ok() {
                break;
            }
        }
        // An acknowledgement that fails stays at the front: drop it and go on.
        while self.send_acks().is_err() {
            self.acks.sent_oldest();
        }
    }
}
