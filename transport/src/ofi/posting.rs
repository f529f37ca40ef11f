//! Posting operations through the shim: each admitted by the per-peer order
//! ([`super::protocol::ordering`]), through a bounce slot, injected, or straight from the
//! caller's buffer; puts and gets in pieces, atomics, and signals as messages.

use super::*;

impl State {
    /// Whether a signal with `len` bytes of data to `pe` goes as a message.
    pub(in crate::ofi) fn by_message(&self, pe: usize, len: usize) -> bool {
        self.heap.addr != 0
            && len <= MAX_DATA
            && self
                .peers
                .get(pe)
                .copied()
                .flatten()
                .is_some_and(|p| p.messages)
    }

    /// Sends `data` for heap offset `data_off` of `pe` and the signal `sig_op` of `value`
    /// at heap offset `sig_off` there, as one message (see [`messages`]).
    #[allow(clippy::too_many_arguments)] // the message's own fields
    pub(in crate::ofi) fn message(
        &mut self,
        pe: usize,
        data_off: u64,
        data: &[u8],
        sig_off: u64,
        value: u64,
        sig_op: SignalOp,
        w: &Waiter,
    ) -> std::result::Result<u64, String> {
        self.target(pe, data_off, data.len() as u64)?;
        self.word(pe, sig_off, 8)?;
        let me = self.me;
        let signal = |op, acked| Signal {
            from: me,
            op,
            data_off,
            data_len: data.len(),
            sig_off,
            value,
            sig_op,
            acked,
        };
        // Injected from the stack where it fits the inject size, else sent from a slot.
        let mut stack = [0u8; INJECTED_BYTES];
        let injected = HEADER + data.len() <= self.inject.min(INJECTED_BYTES);
        let (buf, slot) = if injected {
            (&mut stack[..HEADER + data.len()], None)
        } else {
            let slot = self.take_slot(w)?;
            let local = self.bounce.slot(slot);
            // SAFETY: the slot holds SLOT_BYTES >= HEADER + MAX_DATA bytes and is free.
            let buf = unsafe { std::slice::from_raw_parts_mut(local, HEADER + data.len()) };
            (buf, Some(slot))
        };
        buf[HEADER..].copy_from_slice(data);
        let (op, _) = self.admit(pe, Access::Message, w)?;
        // Taken once nothing is left to wait for: held through a wait, it could stall the
        // peer's quiet, or two PEs could each hold what the other awaits.
        let acked = self.acks.ride_to(pe);
        let (sealer, seq) = self.auth.next_to(pe);
        let what = if injected { "fi_inject" } else { "fi_send" };
        let posted = self.issue(what, Access::Message, pe, slot, op, w, |ep, op, _| {
            messages::encode_signal(buf, &signal(op, acked));
            sealer.seal(buf, pe, seq);
            let (at, len) = (buf.as_ptr().cast(), buf.len());
            // SAFETY: an open endpoint; an injected message fits the inject size, a sent
            // one lies in the registered slot, untouched until it completes (take_slot).
            unsafe {
                if injected {
                    ffi::symmem_ofi_inject(ep, at, len, pe)
                } else {
                    ffi::symmem_ofi_send(ep, op, at, len, pe)
                }
            }
        });
        if let Err(why) = posted {
            // The acknowledgement did not go: it goes alone, first.
            self.acks.not_carried(pe, acked);
            return Err(why);
        }
        Ok(0)
    }

    /// The next bounce slot, once the operation that last used it completed (whether or
    /// not earlier ones did).
    pub(in crate::ofi) fn take_slot(&mut self, w: &Waiter) -> std::result::Result<usize, String> {
        let (i, last) = self.slots.take();
        self.wait_op(last, w)?;
        Ok(i)
    }

    /// Posts one operation to `pe` with `post` (given the operation's number, and 1 where
    /// it must carry `FI_FENCE`; retried while the provider is busy); returns its number
    /// and records it as the last user of `slot`, if it uses one.
    pub(in crate::ofi) fn post(
        &mut self,
        what: &str,
        access: Access,
        pe: usize,
        slot: Option<usize>,
        w: &Waiter,
        mut post: impl FnMut(*mut ffi::SymmemOfi, u64, c_int) -> isize,
    ) -> std::result::Result<u64, String> {
        let (op, fenced) = self.admit(pe, access, w)?;
        self.issue(what, access, pe, slot, op, w, |ep, op, _| {
            post(ep, op, c_int::from(fenced))
        })
    }

    /// Waits until an operation of `access` to `pe` may be posted: the earlier operations
    /// to `pe` it must not overtake where the provider does not keep that order completed
    /// (and writes that completed at transmit are covered: [`deliveries`](protocol::deliveries)), unless it may
    /// go with `FI_FENCE` instead ([`PeerOrder::admit`]); and there is room in the ring of
    /// operations in flight. Returns the number it gets, to [`Self::issue`] before
    /// anything else is posted, and whether it must carry `FI_FENCE`.
    pub(in crate::ofi) fn admit(
        &mut self,
        pe: usize,
        access: Access,
        w: &Waiter,
    ) -> std::result::Result<(u64, bool), String> {
        let ops = &self.ops;
        let admission = self.order.admit(pe, access, |op| ops.peer_done(pe, op));
        let fenced = match admission {
            Admission::Now => false,
            Admission::Fenced => true,
            Admission::After { op, cover } => {
                let mut after = op;
                if cover {
                    // Writes that completed at transmit are visible only once what covers
                    // them completed: a flush to `pe` where nothing does yet, and every
                    // operation to `pe` up to it.
                    if self.deliveries.uncovered(pe) {
                        self.flush_peer(pe, w)?;
                    }
                    after = self.ops.issued();
                }
                self.wait_peer(pe, after, w)?;
                false
            }
        };
        let (op, room_after) = self.ops.next();
        self.wait(room_after, w)?;
        Ok((op, fenced))
    }

    /// Posts operation `op` (from [`Self::admit`]) to `pe` with `post` (given `op`, and
    /// the `FI_FENCE` flag [`Self::post`] passes; retried while the provider is busy);
    /// returns `op` and records it as the last user of `slot`, if it uses one.
    #[allow(clippy::too_many_arguments)] // post()'s own arguments and the number admitted
    pub(in crate::ofi) fn issue(
        &mut self,
        what: &str,
        access: Access,
        pe: usize,
        slot: Option<usize>,
        op: u64,
        w: &Waiter,
        mut post: impl FnMut(*mut ffi::SymmemOfi, u64, c_int) -> isize,
    ) -> std::result::Result<u64, String> {
        let mut backoff = Backoff::new();
        loop {
            let rc = post(self.ep.0, op, 0);
            if rc == 0 {
                self.refused_since[pe] = None;
                self.ops.posted(pe, access.parts(slot));
                if let Some(slot) = slot {
                    self.slots.used(slot, op);
                }
                self.order.issued(pe, access, op);
                return Ok(op);
            }
            if rc != ffi::EAGAIN {
                let why = format!("{what} to PE {pe} failed: error {}", -rc);
                if self.failure.is_none() {
                    self.failed_pe = Some(pe);
                }
                self.failure = Some(why.clone());
                return Err(why);
            }
            self.poll()?;
            self.refused(pe)?;
            if w.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(format!(
                    "{what}: the provider stayed busy past SYMMEM_TIMEOUT"
                ));
            }
            backoff.snooze();
        }
    }

    /// Records that the provider refused an operation to `pe` (`EAGAIN`); fails, naming
    /// `pe`, once it has refused every one for `SYMMEM_DEAD_PEER_TIMEOUT`: over
    /// `tcp;ofi_rxm` that is how a peer whose process is gone shows (its connection is
    /// down and every post is refused, with no failed completion), where a post retried
    /// until `SYMMEM_TIMEOUT` (unset by default) would wait forever. A peer that said
    /// goodbye is named as having left.
    pub(in crate::ofi) fn refused(&mut self, pe: usize) -> std::result::Result<(), String> {
        let now = Instant::now();
        // Refusals more than two probe rounds apart are not one outage (a connection
        // being set up refuses too, briefly).
        let since = match self.refused_since[pe] {
            Some((since, last)) if now - last <= 2 * PROBE_AFTER => since,
            _ => now,
        };
        self.refused_since[pe] = Some((since, now));
        let Some(limit) = self.dead_peer_timeout else {
            return Ok(());
        };
        if since.elapsed() < limit {
            return Ok(());
        }
        let why = if self.departed[pe] {
            format!("PE {pe} has shut its endpoint down (it finalized)")
        } else {
            format!(
                "PE {pe} has taken no operation for {limit:?} (SYMMEM_DEAD_PEER_TIMEOUT): the provider refuses every one, as for a peer whose process is gone"
            )
        };
        if self.failure.is_none() {
            self.failed_pe = Some(pe);
        }
        self.failure.get_or_insert_with(|| why.clone());
        Err(why)
    }

    /// The peer's heap, with the word of `width` bytes at `off` checked against it and for
    /// alignment (an atomic's or a signal's).
    pub(in crate::ofi) fn word(
        &self,
        pe: usize,
        off: u64,
        width: u8,
    ) -> std::result::Result<PeerHeap, String> {
        if !off.is_multiple_of(u64::from(width)) {
            return Err(format!(
                "an atomic or signal word at heap offset {off}, not aligned to {width} bytes"
            ));
        }
        self.target(pe, off, u64::from(width))
    }

    /// The peer's heap, with `off..off + len` checked against it.
    pub(in crate::ofi) fn target(
        &self,
        pe: usize,
        off: u64,
        len: u64,
    ) -> std::result::Result<PeerHeap, String> {
        let heap = self
            .peers
            .get(pe)
            .copied()
            .flatten()
            .ok_or_else(|| "the ofi transport does not reach this PE".to_string())?;
        if off.checked_add(len).is_none_or(|end| end > heap.len) {
            return Err(format!(
                "bytes {off}..{} are outside the peer's heap of {} bytes",
                off.saturating_add(len),
                heap.len
            ));
        }
        Ok(heap)
    }

    /// Posts a read of `len` bytes at `raddr` of `pe` (memory key `key`) into `local`: in the
    /// registered bounce buffer where `registered` (in bounce slot `slot`, if it is one),
    /// else the caller's own buffer. Records the read for the peer's delivery order and
    /// returns its operation.
    ///
    /// # Safety
    /// `local` is valid for `len` bytes of writes until the read completes, and, where
    /// `registered`, lies in the registered bounce buffer.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::ofi) unsafe fn post_read(
        &mut self,
        what: &str,
        pe: usize,
        slot: Option<usize>,
        registered: bool,
        local: *mut u8,
        len: usize,
        raddr: u64,
        key: u64,
        w: &Waiter,
    ) -> std::result::Result<u64, String> {
        let bounce = c_int::from(registered);
        let op = self.post(
            what,
            Access::Read,
            pe,
            slot,
            w,
            // SAFETY: the caller's contract for `local`; the range at `raddr` is the
            // caller's, checked against the peer's heap.
            |ep, op, fence| unsafe {
                ffi::symmem_ofi_read_ex(ep, op, local.cast(), bounce, len, pe, raddr, key, fence)
            },
        )?;
        self.deliveries.read(pe, op);
        Ok(op)
    }

    /// Puts `src` at heap offset `off` of `pe`: piece by piece through bounce slots, so
    /// that it is locally complete at once; or, from `DIRECT_PUT_BYTES` up (and from
    /// `DIRECT_STREAM_BYTES` for pieces that complete at transmit) where the provider
    /// needs no registered local buffers, straight from `src`, waiting for those pieces
    /// to complete before returning (a copy costs more than that wait there). Pieces
    /// posted from `src` are waited for even when the put fails ([`Self::settle`]).
    pub(in crate::ofi) fn put(
        &mut self,
        pe: usize,
        off: u64,
        src: &[u8],
        w: &Waiter,
    ) -> std::result::Result<(), String> {
        let result = self.put_pieces(pe, off, src, w);
        self.release_caller_buffer(result, w)
    }

    /// [`Self::put`]'s pieces; those posted from `src` are recorded in
    /// `caller_buffer_ops`.
    pub(in crate::ofi) fn put_pieces(
        &mut self,
        pe: usize,
        off: u64,
        src: &[u8],
        w: &Waiter,
    ) -> std::result::Result<(), String> {
        let heap = self.target(pe, off, src.len() as u64)?;
        let piece_len = self.piece;
        let mut last = 0;
        for (i, piece) in src.chunks(piece_len).enumerate() {
            let raddr = heap.base + off + (i * piece_len) as u64;
            let len = piece.len();
            let at_transmit = self.deliveries.at_transmit(pe, self.ops.done_upto());
            let at_delivery = c_int::from(!at_transmit);
            let direct = !self.local_mr
                && (src.len() >= DIRECT_PUT_BYTES
                    || at_transmit && src.len() >= DIRECT_STREAM_BYTES);
            // Injected: the provider copies the bytes before it returns, so the put takes
            // no bounce slot, and it still completes at delivery with an entry of its own,
            // which quiet and ordering count like any other. Not where writes stream at
            // transmit: their slots come back at once anyway, and injected ones measured
            // 2-3x slower there (8 B to 4 KiB put_nbi streams over tcp;ofi_rxm and shm).
            let injected = len <= self.inject && !direct && !at_transmit;
            if injected || direct {
                let what = if injected {
                    "fi_write (inject)"
                } else {
                    "fi_write"
                };
                // SAFETY: an injected write reads `piece` only during the call; a direct
                // one reads `src`, which outlives the write: this call waits for it below.
                let op = self.post(what, Access::Write, pe, None, w, |ep, op, fence| unsafe {
                    ffi::symmem_ofi_write_ex(
                        ep,
                        op,
                        piece.as_ptr().cast(),
                        0,
                        len,
                        pe,
                        raddr,
                        heap.key,
                        at_delivery,
                        c_int::from(injected),
                        fence,
                    )
                })?;
                if direct {
                    self.caller_buffer_ops.push(op);
                    last = op;
                }
                self.deliveries.wrote(pe, op, at_transmit);
                continue;
            }
            let slot = self.take_slot(w)?;
            let local = self.bounce.slot(slot);
            // SAFETY: the slot holds SLOT_BYTES >= piece.len() bytes, free (its last
            // operation completed).
            unsafe { std::ptr::copy_nonoverlapping(piece.as_ptr(), local, len) };
            // SAFETY: the slot stays untouched until this write completes (take_slot).
            let op = self.post(
                "fi_write",
                Access::Write,
                pe,
                Some(slot),
                w,
                |ep, op, fence| unsafe {
                    ffi::symmem_ofi_write_ex(
                        ep,
                        op,
                        local.cast(),
                        1,
                        len,
                        pe,
                        raddr,
                        heap.key,
                        at_delivery,
                        0,
                        fence,
                    )
                },
            )?;
            self.deliveries.wrote(pe, op, at_transmit);
        }
        // The last piece from `src` (and with it every earlier one).
        if last != 0 {
            self.wait_peer(pe, last, w)?;
        }
        Ok(())
    }

    /// Gets `dst.len()` bytes from heap offset `off` of `pe`: straight into `dst` where
    /// the provider needs no registered local buffers, else through bounce slots. Pieces
    /// posted into `dst` are waited for even when the get fails ([`Self::settle`]).
    pub(in crate::ofi) fn get(
        &mut self,
        pe: usize,
        off: u64,
        dst: &mut [u8],
        w: &Waiter,
    ) -> std::result::Result<(), String> {
        let result = self.get_pieces(pe, off, dst, w);
        self.release_caller_buffer(result, w)
    }

    /// [`Self::get`]'s pieces; those posted into `dst` are recorded in
    /// `caller_buffer_ops`.
    pub(in crate::ofi) fn get_pieces(
        &mut self,
        pe: usize,
        off: u64,
        dst: &mut [u8],
        w: &Waiter,
    ) -> std::result::Result<(), String> {
        let heap = self.target(pe, off, dst.len() as u64)?;
        let piece_len = self.piece;
        if !self.local_mr {
            let mut last = 0;
            for (i, piece) in dst.chunks_mut(piece_len).enumerate() {
                let raddr = heap.base + off + (i * piece_len) as u64;
                // SAFETY: `dst` outlives the read: this call waits for it below (and
                // `settle` on failure, through `caller_buffer_ops`).
                last = unsafe {
                    self.post_read(
                        "fi_read",
                        pe,
                        None,
                        false,
                        piece.as_mut_ptr(),
                        piece.len(),
                        raddr,
                        heap.key,
                        w,
                    )
                }?;
                self.caller_buffer_ops.push(last);
            }
            // Every piece (all to `pe`), not the operations to other peers.
            return self.wait_peer(pe, last, w);
        }
        for (i, piece) in dst.chunks_mut(piece_len).enumerate() {
            let slot = self.take_slot(w)?;
            let local = self.bounce.slot(slot);
            let raddr = heap.base + off + (i * piece_len) as u64;
            let len = piece.len();
            // SAFETY: the slot is free and holds `len` bytes; read until the wait below.
            let op = unsafe {
                self.post_read(
                    "fi_read",
                    pe,
                    Some(slot),
                    true,
                    local,
                    len,
                    raddr,
                    heap.key,
                    w,
                )
            }?;
            self.wait_op(op, w)?;
            // SAFETY: the read completed into the slot.
            unsafe { std::ptr::copy_nonoverlapping(local, piece.as_mut_ptr(), len) };
        }
        Ok(())
    }

    /// An atomic of `width` bytes at heap offset `off` of `pe`: `op` with `value` (and
    /// `compare` for a compare-and-swap); waits for and returns the old value when
    /// `fetch`. Never injected: libfabric 1.17's `ofi_rxm` writes no completion for an
    /// atomic posted with `FI_INJECT`, even one that asks for it (`FI_COMPLETION`), so
    /// nothing would tell quiet that it was delivered.
    #[allow(clippy::too_many_arguments)] // the atomic's own operands
    pub(in crate::ofi) fn atomic(
        &mut self,
        pe: usize,
        off: u64,
        width: u8,
        op: Atomic,
        value: u64,
        compare: u64,
        fetch: bool,
        w: &Waiter,
    ) -> std::result::Result<u64, String> {
        if width != 4 && width != 8 {
            return Err(format!("an atomic of {width} bytes (4 or 8 are supported)"));
        }
        let heap = self.word(pe, off, width)?;
        let raddr = heap.base + off;
        let w32 = i32::from(width);
        let slot = self.take_slot(w)?;
        let words = self.bounce.slot(slot).cast::<u64>();
        // SAFETY: the slot is free and 16-byte aligned; words 0..3: operand, compare,
        // result (little-endian: a 4-byte operand is the low half of its word).
        unsafe {
            words.write(value);
            words.add(1).write(compare);
            words.add(2).write(0);
        }
        let (operand, cmp, result) = (
            words.cast::<c_void>(),
            words.wrapping_add(1).cast::<c_void>(),
            words.wrapping_add(2).cast::<c_void>(),
        );
        // The operand, compare and result words lie in the registered slot, which nothing
        // touches until the operation completes (take_slot); the target range was checked
        // against the peer's heap (`target`).
        let id = match op {
            Atomic::Compare => self.post(
                "fi_compare_atomic",
                Access::AtomicReadWrite,
                pe,
                Some(slot),
                w,
                // SAFETY: the slot's words and the checked target range, as above.
                |ep, id, fence| unsafe {
                    ffi::symmem_ofi_compare_atomic_ex(
                        ep, id, operand, cmp, result, w32, pe, raddr, heap.key, fence,
                    )
                },
            )?,
            Atomic::Op(code) if fetch => self.post(
                "fi_fetch_atomic",
                Access::AtomicReadWrite,
                pe,
                Some(slot),
                w,
                // SAFETY: the slot's words and the checked target range, as above.
                |ep, id, fence| unsafe {
                    ffi::symmem_ofi_fetch_atomic_ex(
                        ep, id, operand, result, w32, code, pe, raddr, heap.key, fence,
                    )
                },
            )?,
            Atomic::Op(code) => self.post(
                "fi_atomic",
                Access::AtomicWrite,
                pe,
                Some(slot),
                w,
                // SAFETY: the slot's words and the checked target range, as above.
                |ep, id, fence| unsafe {
                    ffi::symmem_ofi_atomic_ex(
                        ep, id, operand, w32, code, pe, raddr, heap.key, fence,
                    )
                },
            )?,
        };
        if !fetch && !matches!(op, Atomic::Compare) {
            return Ok(0);
        }
        self.wait_op(id, w)?;
        // SAFETY: the operation completed into the result word.
        let old = unsafe { words.add(2).read() };
        Ok(if width == 4 { old & 0xffff_ffff } else { old })
    }
}
