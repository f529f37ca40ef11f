//! The send side of a connection: writing frames without blocking the connection's
//! receive side (a full socket makes the sender read while it waits), queuing responses
//! that cannot be written at once, and waiting for the slot of a response.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use symmem_bootstrap::net::describe;
use symmem_device::{Opcode, Request};
use symmem_sync::Backoff;

use super::protocol::frame::{Answer, RequestHead};
use super::{lock, Conn, Flush, Shared, Slot};
use crate::error::Result;

/// Requests (header, request and payload) of at most this many bytes that want no answer
/// may be staged ([`Shared::stage_or_send`]).
pub(super) const STAGE_FRAME_MAX: usize = 1024;
/// The most bytes staged for one connection; a request that would exceed it is written
/// at once, with what is staged.
pub(super) const STAGE_MAX: usize = 4096;

impl Shared {
    /// Queues a response frame and writes it if the socket is free.
    pub(super) fn respond(&self, c: &Conn, f: Vec<u8>) {
        let mut q = lock(&c.out);
        c.flow.queue(f.len());
        q.frames.push_back(f);
        drop(q);
        self.flush_out(c);
    }

    /// Sends a response frame made of `head` and `data` (a get's answer, `data` still in
    /// the heap): written from where it lies when no one else is writing to `c` and no
    /// response is queued before it, so a large answer is not copied into a buffer first.
    /// Whatever the socket does not take at once is copied into the queue before anyone
    /// else may write, and so is the whole frame when another writer holds the socket.
    pub(super) fn respond_parts(&self, c: &Conn, head: &[u8], data: &[u8]) {
        let total = head.len() + data.len();
        if let Ok(tx) = c.tx.try_lock() {
            let mut q = lock(&c.out);
            if q.frames.is_empty() {
                let sent = match c.wire.write(&[head, data]) {
                    Ok(k) => k,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                    Err(e) => {
                        drop(q);
                        drop(tx);
                        c.fail(format!("writing to PE {}: {}", c.pe, describe(&e)));
                        return;
                    }
                };
                if sent < total {
                    // The rest of a partly written frame goes first in the queue, while
                    // `tx` still keeps every other writer out.
                    let mut rest = Vec::with_capacity(total - sent);
                    if sent < head.len() {
                        rest.extend_from_slice(&head[sent..]);
                        rest.extend_from_slice(data);
                    } else {
                        rest.extend_from_slice(&data[sent - head.len()..]);
                    }
                    c.flow.queue(rest.len());
                    q.frames.push_back(rest);
                    drop(q);
                    drop(tx);
                    self.flush_out(c);
                }
                return;
            }
        }
        let mut f = Vec::with_capacity(total);
        f.extend_from_slice(head);
        f.extend_from_slice(data);
        self.respond(c, f);
    }

    /// Writes queued responses if no one is writing to `c`; whoever releases `tx` next
    /// (or the service thread, on POLLOUT) writes the rest.
    pub(super) fn flush_out(&self, c: &Conn) {
        loop {
            let Ok(tx) = c.tx.try_lock() else { return };
            let blocked = self.write_queued(c);
            drop(tx);
            if blocked || lock(&c.out).frames.is_empty() {
                return;
            }
        }
    }

    /// With `tx` held: writes queued responses until done or the socket is full (true).
    pub(super) fn write_queued(&self, c: &Conn) -> bool {
        let mut q = lock(&c.out);
        while let Some(front) = q.frames.front() {
            let rest = &front[q.sent..];
            let wrote = c.wire.write(&[rest]);
            if let Ok(k) = wrote {
                c.flow.wrote(k);
            }
            match wrote {
                Ok(k) if k == rest.len() => {
                    q.frames.pop_front();
                    q.sent = 0;
                }
                Ok(k) => {
                    q.sent += k;
                    return true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) => {
                    drop(q);
                    c.fail(format!("writing to PE {}: {}", c.pe, describe(&e)));
                    return true;
                }
            }
        }
        false
    }

    /// Writes one whole frame made of `parts` (at most three), preceded by the staged
    /// requests, waiting (and reading, so the peer can make progress too) while the
    /// socket is full.
    pub(super) fn send(&self, c: &Conn, op: &'static str, parts: &[&[u8]]) -> Result<()> {
        self.check(c, op)?;
        let mut tx = lock(&c.tx);
        // When the first wait for room began: read only if the socket fills.
        let mut started = None;
        // Queued responses first: they may be the rest of a partly written frame.
        while self.write_queued(c) {
            self.wait_writable(c, op, &mut started)?;
        }
        let staged = std::mem::take(&mut *tx);
        if !staged.is_empty() {
            c.staged.store(false, Ordering::SeqCst);
        }
        let mut all: [&[u8]; 4] = [&staged, &[], &[], &[]];
        all[1..=parts.len()].copy_from_slice(parts);
        let all = &all[..=parts.len()];
        let total: usize = all.iter().map(|p| p.len()).sum();
        let mut done = 0;
        while done < total {
            let mut skip = done;
            let mut iov: [&[u8]; 4] = [&[]; 4];
            let mut k = 0;
            for p in all {
                if skip >= p.len() {
                    skip -= p.len();
                    continue;
                }
                iov[k] = &p[skip..];
                skip = 0;
                k += 1;
            }
            match c.wire.write(&iov[..k]) {
                Ok(w) => done += w,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.wait_writable(c, op, &mut started)?
                }
                Err(e) => {
                    c.fail(format!("writing to PE {}: {}", c.pe, describe(&e)));
                    return self.check(c, op);
                }
            }
        }
        // The buffer goes back empty, keeping its capacity for the next staged requests.
        *tx = staged;
        tx.clear();
        self.write_queued(c);
        drop(tx);
        if !lock(&c.out).frames.is_empty() {
            self.flush_out(c);
        }
        Ok(())
    }

    /// Sends a small request that wants no answer (`parts`, at most [`STAGE_FRAME_MAX`]
    /// bytes), or stages it: leaves it in the connection's buffer for the next write to
    /// this peer, which carries it in front of its own frame. A put followed by `quiet`
    /// then costs one write, not two (on loopback each write also pays for the peer's
    /// receive processing).
    ///
    /// A request is staged only while the service thread goes round its loop at most
    /// [`SPINNER_CHECK_MS`](super::driver::service::SPINNER_CHECK_MS) apart: it writes what is staged each
    /// round, so a staged request waits at most that long, even if this PE makes no further
    /// call. Host waits write it at once ([`Transport::progress`](crate::interface::Transport::progress)).
    /// The flag is read again after staging: the service thread lowers it before its last
    /// round of writes, so either it sees this request or this call sees the flag down and
    /// writes the request itself.
    pub(super) fn stage_or_send(&self, c: &Conn, op: &'static str, parts: &[&[u8]]) -> Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > STAGE_FRAME_MAX || !self.writes_staged_soon.load(Ordering::SeqCst) {
            return self.send(c, op, parts);
        }
        self.check(c, op)?;
        {
            let mut tx = lock(&c.tx);
            if tx.len() + len > STAGE_MAX {
                drop(tx);
                return self.send(c, op, parts);
            }
            for p in parts {
                tx.extend_from_slice(p);
            }
            c.staged.store(true, Ordering::SeqCst);
        }
        if self.writes_staged_soon.load(Ordering::SeqCst) {
            Ok(())
        } else {
            self.send(c, op, &[])
        }
    }

    /// Writes the requests staged for `c`, if any. With `only_if_free`, leaves them when
    /// another thread is writing to `c`: that writer or the next round writes them.
    pub(super) fn write_staged(&self, c: &Conn, only_if_free: bool) {
        if !c.staged.load(Ordering::SeqCst) || c.failed().is_some() {
            return;
        }
        if only_if_free && c.tx.try_lock().is_err() {
            return;
        }
        // A failure is recorded on the connection and reported by the next operation.
        let _ = self.send(c, "writing staged requests", &[]);
    }

    /// While a write waits for room: serve incoming frames, then sleep in `poll` briefly.
    pub(super) fn wait_writable(
        &self,
        c: &Conn,
        op: &'static str,
        started: &mut Option<Instant>,
    ) -> Result<()> {
        self.receive(c);
        self.check(c, op)?;
        if let Some(limit) = self.timeout {
            if started.get_or_insert_with(Instant::now).elapsed() >= limit {
                c.fail(format!(
                    "PE {} has not read what PE {} sent for {limit:?} (SYMMEM_TIMEOUT)",
                    c.pe, self.me
                ));
                return self.check(c, op);
            }
        }
        // Input that is not read (the peer is over its window) must not end the wait.
        let events = if c.flow.over_window() {
            libc::POLLOUT
        } else {
            libc::POLLOUT | libc::POLLIN
        };
        c.wire.wait(events, 1);
        Ok(())
    }

    /// Waits for `slot`, serving the connection meanwhile.
    pub(super) fn wait(&self, c: &Conn, op: &'static str, slot: &Slot) -> Result<()> {
        self.wait_for(c, op, || slot.done.load(Ordering::Acquire))
    }

    /// Waits until `ready` holds (an answer from `c` makes it so), serving the connection
    /// meanwhile; fails if `c` fails or nothing comes within `SYMMEM_TIMEOUT`.
    pub(super) fn wait_for(
        &self,
        c: &Conn,
        op: &'static str,
        mut ready: impl FnMut() -> bool,
    ) -> Result<()> {
        let mut backoff = Backoff::new();
        let started = Instant::now();
        let mut shown = None;
        loop {
            if ready() {
                return Ok(());
            }
            self.check(c, op)?;
            if !backoff.is_slow() {
                self.spins.fetch_add(1, Ordering::Relaxed);
            }
            self.receive(c);
            if ready() {
                return Ok(());
            }
            if backoff.is_slow() {
                shown.get_or_insert_with(|| {
                    self.blocked.begin(crate::blocked::Blocked {
                        op,
                        peer: Some(c.pe),
                        detail: format!("the socket transport's answer from PE {}", c.pe),
                        since: started,
                    })
                });
                if let Some(limit) = self.timeout {
                    if started.elapsed() >= limit {
                        c.fail(format!(
                            "no answer from PE {} within {limit:?} (SYMMEM_TIMEOUT)",
                            c.pe
                        ));
                        return self.check(c, op);
                    }
                }
            }
            backoff.snooze();
        }
    }

    /// Registers a slot for request `id`'s answer, which must be `awaits`.
    pub(super) fn expect(&self, c: &Conn, id: u64, awaits: Answer) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            done: AtomicBool::new(false),
            value: AtomicU64::new(0),
            data: Mutex::default(),
        });
        lock(&c.pending).expect(id, awaits, Arc::clone(&slot));
        slot
    }

    /// Reserves `bytes` of `c`'s answer window for an answer, waiting (and reading `c`)
    /// while the window is full ([`window`](super::protocol::window)).
    pub(super) fn reserve(&self, c: &Conn, op: &'static str, bytes: usize) -> Result<()> {
        if c.flow.try_reserve(bytes) {
            return Ok(());
        }
        self.wait_for(c, op, || c.flow.try_reserve(bytes))
    }

    /// Sends one request (with its payload) and, for gets and fetching AMOs, waits for
    /// the answer.
    pub(super) fn request(
        &self,
        c: &Conn,
        op: &'static str,
        req: Request,
        payload: &[u8],
    ) -> Result<(u64, Vec<u8>)> {
        let Some(slot) = self.send_request(c, op, req, payload, Flush::Needed)? else {
            return Ok((0, Vec::new()));
        };
        self.answer(c, op, &slot)
    }

    /// Waits for the answer in `slot`: the value and the data it carries.
    pub(super) fn answer(&self, c: &Conn, op: &'static str, slot: &Slot) -> Result<(u64, Vec<u8>)> {
        self.wait(c, op, slot)?;
        let data = std::mem::take(&mut *lock(&slot.data));
        Ok((slot.value.load(Ordering::Relaxed), data))
    }

    /// Sends one request (with its payload); for gets and fetching AMOs returns the slot
    /// its answer lands in. A request without an answer is left for the next quiet to
    /// flush unless `flush` says it need not be.
    pub(super) fn send_request(
        &self,
        c: &Conn,
        op: &'static str,
        req: Request,
        payload: &[u8],
        flush: Flush,
    ) -> Result<Option<Arc<Slot>>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (head, payload) = RequestHead::new(req, id, payload);
        let head = head.bytes();
        let Some(awaits) = Answer::to(&req) else {
            let stageable =
                flush == Flush::Needed && matches!(req.opcode(), Some(Opcode::Put | Opcode::Amo));
            if stageable {
                self.stage_or_send(c, op, &[head, payload])?;
            } else {
                self.send(c, op, &[head, payload])?;
            }
            if flush == Flush::Needed {
                c.tickets.sent_one();
            }
            return Ok(None);
        };
        // Within the window before the request leaves: see `window`.
        self.reserve(c, op, awaits.frame_len())?;
        let slot = self.expect(c, id, awaits);
        if let Err(e) = self.send(c, op, &[head, payload]) {
            lock(&c.pending).cancel(id);
            c.flow.release(awaits.frame_len());
            return Err(e);
        }
        Ok(Some(slot))
    }
}
