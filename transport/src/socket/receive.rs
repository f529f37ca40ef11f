//! The receive side of a connection: reading frames off its socket (header, then body:
//! a request, a payload, a response) and acting on them: applying a peer's request to
//! this PE's heap through the [`Target`](crate::target::Target), answering it, or filling
//! the slot of a response this PE waits for. A malformed frame (an answer of another kind
//! or length than its request awaits among them) is refused, never applied; a peer whose
//! answers are over the window is not read until it reads them ([`super::flow`]).

use std::sync::atomic::Ordering;

use symmem_bootstrap::net::describe;
use symmem_bootstrap::wire::HEADER_LEN;
use symmem_device::{Opcode, Request};

use super::frame::{self, Kind, REQUEST_LEN};
use super::{lock, Conn, Dest, Rx, RxState, Shared, Stop, Then};

impl Shared {
    /// Reads and applies whatever `c` has; returns false if another thread holds the
    /// receive side.
    pub(super) fn receive(&self, c: &Conn) -> bool {
        let Ok(mut rx) = c.rx.try_lock() else {
            return false;
        };
        if c.failed().is_some() {
            return true;
        }
        if let Stop::Failed(why) = self.drain(c, &mut rx) {
            c.fail(why);
        }
        true
    }

    /// Runs the receive state machine until the socket has no more bytes.
    pub(super) fn drain(&self, c: &Conn, rx: &mut Rx) -> Stop {
        rx.emptied = false;
        loop {
            let step = match std::mem::replace(&mut rx.state, RxState::Header) {
                // A peer that does not read its answers is not read either: see `flow`.
                RxState::Header if !self.may_read(c) => Ok(false),
                RxState::Header => self.on_header(c, rx),
                RxState::Body { kind, len } => self.on_body(c, rx, kind, len),
                RxState::Payload {
                    dest,
                    filled,
                    len,
                    then,
                } => self.on_payload(c, rx, dest, filled, len, then),
            };
            match step {
                Ok(true) => {}
                Ok(false) => return Stop::Drained,
                Err(stop) => return stop,
            }
        }
    }

    /// Makes `want` bytes available at `rx.buf[rx.start..]`, reading more if needed.
    /// `Ok(false)`: not yet (the state is left for the caller to restore).
    pub(super) fn fill(
        &self,
        c: &Conn,
        rx: &mut Rx,
        want: usize,
    ) -> std::result::Result<bool, Stop> {
        while rx.end - rx.start < want {
            if rx.buf.len() - rx.start < want {
                rx.buf.copy_within(rx.start..rx.end, 0);
                rx.end -= rx.start;
                rx.start = 0;
            }
            if rx.emptied {
                return Ok(false);
            }
            let free = rx.buf.len() - rx.end;
            // SAFETY: the buffer has `free` writable bytes from `end`.
            match c
                .wire
                .read(unsafe { rx.buf.as_mut_ptr().add(rx.end) }, free)
            {
                Ok(0) => return Err(Stop::Failed(self.eof_reason(c, rx))),
                Ok(k) => {
                    rx.end += k;
                    rx.emptied = k < free;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => {
                    return Err(Stop::Failed(format!(
                        "reading from PE {}: {}",
                        c.pe,
                        describe(&e)
                    )))
                }
            }
        }
        Ok(true)
    }

    pub(super) fn eof_reason(&self, c: &Conn, rx: &Rx) -> String {
        let mid = !matches!(rx.state, RxState::Header) || rx.end > rx.start;
        if c.said_goodbye.load(Ordering::Acquire) && !mid {
            format!("PE {} has shut down", c.pe)
        } else {
            format!(
                "connection to PE {} closed{} (the peer exited or crashed)",
                c.pe,
                if mid { " in the middle of a frame" } else { "" }
            )
        }
    }

    pub(super) fn on_header(&self, c: &Conn, rx: &mut Rx) -> std::result::Result<bool, Stop> {
        if !self.fill(c, rx, HEADER_LEN)? {
            rx.state = RxState::Header;
            return Ok(false);
        }
        let h: [u8; HEADER_LEN] = rx.buf[rx.start..rx.start + HEADER_LEN].try_into().unwrap();
        let (kind, len) = frame::check_header(&h).map_err(|why| self.refuse(c, why))?;
        rx.start += HEADER_LEN;
        rx.state = RxState::Body { kind, len };
        Ok(true)
    }

    pub(super) fn on_body(
        &self,
        c: &Conn,
        rx: &mut Rx,
        kind: Kind,
        len: usize,
    ) -> std::result::Result<bool, Stop> {
        let head = match kind {
            Kind::Request => REQUEST_LEN,
            Kind::Response => 16,
            _ => len,
        };
        if !self.fill(c, rx, head)? {
            rx.state = RxState::Body { kind, len };
            return Ok(false);
        }
        let body = &rx.buf[rx.start..rx.start + head];
        let u64_at = |i: usize| u64::from_le_bytes(body[i..i + 8].try_into().unwrap());
        match kind {
            Kind::Request => {
                let req: Request = bytemuck::pod_read_unaligned(body);
                rx.start += head;
                self.on_request(c, rx, req, len)?;
            }
            Kind::Response => {
                let (id, value) = (u64_at(0), u64_at(8));
                rx.start += head;
                let slot = lock(&c.pending).remove(&id).ok_or_else(|| {
                    self.refuse(
                        c,
                        format!("a response to request {id}, which is not outstanding"),
                    )
                })?;
                let data = len - 16;
                slot.awaits
                    .check_response(id, data)
                    .map_err(|why| self.refuse(c, why))?;
                slot.value.store(value, Ordering::Relaxed);
                rx.state = RxState::Payload {
                    dest: Dest::Buf(c.answer_buffer(data)),
                    filled: 0,
                    len: data,
                    then: Then::Respond(slot),
                };
            }
            Kind::Flush => {
                let id = u64_at(0);
                rx.start += head;
                let mut f = frame::header(Kind::Flushed, 8).to_vec();
                f.extend_from_slice(&id.to_le_bytes());
                self.respond(c, f);
            }
            Kind::Flushed => {
                let id = u64_at(0);
                rx.start += head;
                let slot = lock(&c.pending).remove(&id).ok_or_else(|| {
                    self.refuse(c, format!("FLUSHED {id}, which is not outstanding"))
                })?;
                slot.awaits
                    .check_flushed(id)
                    .map_err(|why| self.refuse(c, why))?;
                c.flow.release(slot.awaits.frame_len());
                slot.done.store(true, Ordering::Release);
            }
            Kind::Goodbye => c.said_goodbye.store(true, Ordering::Release),
            Kind::Refused => {
                let why = String::from_utf8_lossy(body).into_owned();
                rx.start += head;
                return Err(Stop::Failed(format!("PE {} refused a frame: {why}", c.pe)));
            }
            Kind::Hello => {
                return Err(self.refuse(c, "a second HELLO".into()));
            }
        }
        Ok(true)
    }

    /// Checks and applies a request whose 64-byte head has been read.
    pub(super) fn on_request(
        &self,
        c: &Conn,
        rx: &mut Rx,
        req: Request,
        body: usize,
    ) -> std::result::Result<(), Stop> {
        let op = self
            .target
            .check(&req)
            .and_then(|op| frame::check_request_len(&req, body).map(|()| op))
            .map_err(|why| self.refuse(c, why))?;
        match op {
            Opcode::Put | Opcode::PutSignal => {
                let dest = if self.target.is_host() {
                    Dest::Heap(self.target.at(req.remote))
                } else {
                    Dest::Staged {
                        off: req.remote,
                        buf: vec![0; req.len as usize],
                    }
                };
                rx.state = RxState::Payload {
                    dest,
                    filled: 0,
                    len: req.len as usize,
                    then: if op == Opcode::Put {
                        Then::Put
                    } else {
                        Then::Signal(req)
                    },
                };
            }
            Opcode::Get => {
                let len = req.len as usize;
                let mut head = [0u8; HEADER_LEN + 16];
                head[..HEADER_LEN].copy_from_slice(&frame::header(Kind::Response, 16 + len));
                head[HEADER_LEN..].copy_from_slice(&frame::two_u64(req.tag, 0));
                if self.target.is_host() {
                    // Written from the heap itself: no copy into a buffer first.
                    // SAFETY: the range was checked to lie within the host heap, which
                    // stays mapped while the transport lives; the slice only goes to the
                    // kernel (or is copied), and peers may write it meanwhile, as with any
                    // get.
                    let data =
                        unsafe { std::slice::from_raw_parts(self.target.at(req.remote), len) };
                    self.respond_parts(c, &head, data);
                } else {
                    let mut f = Vec::with_capacity(head.len() + len);
                    f.extend_from_slice(&head);
                    f.resize(head.len() + len, 0);
                    self.target
                        .read(req.remote, &mut f[head.len()..])
                        .map_err(|why| self.apply_failed(c, "get", why))?;
                    self.respond(c, f);
                }
            }
            Opcode::Amo => {
                // SAFETY: checked as an AMO.
                let old = unsafe { self.target.amo(&req) }
                    .map_err(|why| self.apply_failed(c, "AMO", why))?;
                if req.returns_data() {
                    let mut f = frame::header(Kind::Response, 16).to_vec();
                    f.extend_from_slice(&frame::two_u64(req.tag, old));
                    self.respond(c, f);
                }
            }
            Opcode::Signal => {
                let sig = req.signal_kind().expect("checked");
                // SAFETY: checked as a signal.
                unsafe { self.target.signal(req.remote, sig, req.value) }
                    .map_err(|why| self.apply_failed(c, "signal", why))?;
            }
            Opcode::Fence | Opcode::Quiet => unreachable!("refused by Target::check"),
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_payload(
        &self,
        c: &Conn,
        rx: &mut Rx,
        mut dest: Dest,
        mut filled: usize,
        len: usize,
        then: Then,
    ) -> std::result::Result<bool, Stop> {
        let ptr = match &mut dest {
            Dest::Heap(p) => *p,
            Dest::Staged { buf, .. } | Dest::Buf(buf) => buf.as_mut_ptr(),
        };
        // What the read-ahead buffer already holds, then straight from the socket.
        let have = (rx.end - rx.start).min(len - filled);
        // SAFETY: `ptr` has `len` bytes (a checked heap range, or a buffer of `len`).
        unsafe {
            std::ptr::copy_nonoverlapping(rx.buf[rx.start..].as_ptr(), ptr.add(filled), have)
        };
        rx.start += have;
        filled += have;
        while filled < len {
            // SAFETY: as above.
            match c.wire.read(unsafe { ptr.add(filled) }, len - filled) {
                Ok(0) => {
                    rx.state = RxState::Payload {
                        dest,
                        filled,
                        len,
                        then,
                    };
                    return Err(Stop::Failed(self.eof_reason(c, rx)));
                }
                Ok(k) => filled += k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    rx.state = RxState::Payload {
                        dest,
                        filled,
                        len,
                        then,
                    };
                    return Ok(false);
                }
                Err(e) => {
                    return Err(Stop::Failed(format!(
                        "reading from PE {}: {}",
                        c.pe,
                        describe(&e)
                    )))
                }
            }
        }
        if let Dest::Staged { off, buf } = &dest {
            self.target
                .write_device(*off, buf)
                .map_err(|why| self.apply_failed(c, "put", why))?;
        }
        match then {
            Then::Put => {}
            Then::Signal(req) => {
                let op = req.signal_kind().expect("checked");
                // SAFETY: checked with the request.
                unsafe { self.target.signal(req.signal, op, req.value) }
                    .map_err(|why| self.apply_failed(c, "put_signal's signal", why))?;
            }
            Then::Respond(slot) => {
                if let Dest::Buf(v) = dest {
                    *lock(&slot.data) = v;
                }
                // The whole answer has been read: its bytes leave the window.
                c.flow.release(slot.awaits.frame_len());
                slot.done.store(true, Ordering::Release);
            }
        }
        Ok(true)
    }

    /// A well-formed request from `c` that this PE could not apply to its heap (a GPU
    /// heap's copy or helper kernel failed): the failure that closes `c`, so the peer's
    /// operations fail naming this PE instead of being lost.
    pub(super) fn apply_failed(&self, c: &Conn, what: &str, why: String) -> Stop {
        Stop::Failed(format!(
            "PE {} could not apply a {what} from PE {} to its heap: {why}",
            self.me, c.pe
        ))
    }

    /// Sends REFUSED with `why` (best effort) and returns the failure that closes `c`.
    pub(super) fn refuse(&self, c: &Conn, why: String) -> Stop {
        let why = format!("malformed frame from PE {}: {why}", c.pe);
        let text = &why.as_bytes()[..why.len().min(frame::MAX_REASON)];
        let mut f = frame::header(Kind::Refused, text.len()).to_vec();
        f.extend_from_slice(text);
        self.respond(c, f);
        Stop::Failed(why)
    }
}
