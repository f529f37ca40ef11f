//! The receive side of a connection: reading its bytes into the protocol's receive state
//! machine ([`Receiver`]) and acting on the frames it finds: applying a peer's request to
//! this PE's heap through the [`Target`](crate::target::Target), answering it, or filling
//! the slot of an answer this PE waits for. A malformed frame (an answer of another kind
//! or length than its request awaits among them) is refused, never applied; a peer whose
//! answers are over the window is not read until it reads them
//! ([`window`](super::protocol::window)).

use std::sync::atomic::Ordering;

use symmem_bootstrap::net::describe;
use symmem_device::{Opcode, Request};

use super::protocol::frame::{self, Kind};
use super::protocol::receiver::{Event, Frame, Receiver};
use super::protocol::window::REPLY_WINDOW;
use super::{lock, Conn, Dest, Rx, Shared, Stop, Then};

impl Shared {
    /// Reads and applies whatever `c` has; returns false if another thread holds the
    /// receive side.
    pub(super) fn receive(&self, c: &Conn) -> bool {
        self.receive_some(c).is_some()
    }

    /// As [`Self::receive`]: `None` if another thread holds the receive side, else
    /// whether any bytes were read.
    pub(super) fn receive_some(&self, c: &Conn) -> Option<bool> {
        let mut rx = c.rx.try_lock().ok()?;
        if c.failed().is_some() {
            return Some(false);
        }
        if let Stop::Failed(why) = self.drain(c, &mut rx) {
            c.fail(why);
        }
        Some(rx.read_some)
    }

    /// Runs the receive state machine until the socket has no more bytes.
    pub(super) fn drain(&self, c: &Conn, rx: &mut Rx) -> Stop {
        let Rx {
            core,
            landing,
            emptied,
            read_some,
        } = rx;
        *emptied = false;
        *read_some = false;
        loop {
            // A peer that does not read its answers is not read either: see `window`.
            if core.at_frame_start() && !self.may_read(c) {
                return Stop::Drained;
            }
            let event = match core.next() {
                Ok(e) => e,
                Err(why) => return self.refuse(c, why),
            };
            let step = match event {
                Event::Frame(f) => self.on_frame(c, landing, f),
                Event::Payload { at, bytes } => {
                    let (dest, _) = landing.as_mut().expect("a payload has a landing");
                    // SAFETY: the destination has room for the whole payload (a checked
                    // heap range or a buffer of its length), and the receiver hands out
                    // bytes at offsets within it.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            bytes.as_ptr(),
                            dest.ptr().add(at),
                            bytes.len(),
                        )
                    };
                    Ok(())
                }
                Event::PayloadDone => match landing.take() {
                    Some((dest, then)) => self.on_payload(c, dest, then),
                    // A request without a payload: acted on with its head.
                    None => Ok(()),
                },
                Event::Need(Some((at, left))) => {
                    let (dest, _) = landing.as_mut().expect("a payload has a landing");
                    // SAFETY: as above: `left` bytes from `at` lie within the destination.
                    match unsafe { c.wire.read(dest.ptr().add(at), left) } {
                        Ok(0) => return Stop::Failed(self.eof_reason(c, core)),
                        Ok(k) => {
                            *read_some = true;
                            core.payload_read(k);
                            Ok(())
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            return Stop::Drained
                        }
                        Err(e) => return self.read_failed(c, &e),
                    }
                }
                Event::Need(None) => {
                    if *emptied {
                        return Stop::Drained;
                    }
                    let space = core.read_space();
                    let free = space.len();
                    // SAFETY: `space` is `free` writable bytes.
                    match unsafe { c.wire.read(space.as_mut_ptr(), free) } {
                        Ok(0) => return Stop::Failed(self.eof_reason(c, core)),
                        Ok(k) => {
                            *read_some = true;
                            core.received(k);
                            *emptied = k < free;
                            Ok(())
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            return Stop::Drained
                        }
                        Err(e) => return self.read_failed(c, &e),
                    }
                }
            };
            if let Err(stop) = step {
                return stop;
            }
        }
    }

    /// The failure of a read from `c` that failed with `e`.
    fn read_failed(&self, c: &Conn, e: &std::io::Error) -> Stop {
        Stop::Failed(format!("reading from PE {}: {}", c.pe, describe(e)))
    }

    /// Why `c` closed: the peer's goodbye, or an end in the middle of things.
    pub(super) fn eof_reason(&self, c: &Conn, core: &Receiver) -> String {
        let mid = core.mid_frame();
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

    /// Whether the receive side of `c` may read its next frame; logs when it stops and
    /// starts again.
    pub(super) fn may_read(&self, c: &Conn) -> bool {
        let (may, changed) = c.flow.may_read();
        match changed {
            Some(true) => tracing::warn!(
                "socket transport: PE {} has not read {} bytes of answers (window \
                 {REPLY_WINDOW}); PE {} stops reading its requests until it does",
                c.pe,
                c.flow.queued(),
                self.me
            ),
            Some(false) => tracing::debug!(
                "socket transport: PE {} read its answers; reading it again",
                c.pe
            ),
            None => {}
        }
        may
    }

    /// Acts on a frame's head: a request's check and (without payload) its application,
    /// an answer's slot, a flush's answer. A payload to come lands in `landing`.
    fn on_frame(
        &self,
        c: &Conn,
        landing: &mut Option<(Dest, Then)>,
        frame: Frame,
    ) -> std::result::Result<(), Stop> {
        match frame {
            Frame::Request { req, payload } => {
                *landing = self.on_request(c, req, payload)?;
            }
            Frame::Response { id, value, data } => {
                let (awaits, slot) = lock(&c.pending)
                    .response(id, data)
                    .map_err(|why| self.refuse(c, why))?;
                slot.value.store(value, Ordering::Relaxed);
                *landing = Some((
                    Dest::Buf(c.answer_buffer(data)),
                    Then::Respond(slot, awaits),
                ));
            }
            Frame::Flush { id } => self.respond(c, frame::flush_frame(Kind::Flushed, id).to_vec()),
            Frame::Flushed { id } => {
                let (awaits, slot) = lock(&c.pending)
                    .flushed(id)
                    .map_err(|why| self.refuse(c, why))?;
                c.flow.release(awaits.frame_len());
                slot.done.store(true, Ordering::Release);
            }
            Frame::Goodbye => c.said_goodbye.store(true, Ordering::Release),
            Frame::Refused(why) => {
                return Err(Stop::Failed(format!("PE {} refused a frame: {why}", c.pe)));
            }
            Frame::Hello => return Err(self.refuse(c, "a second HELLO".into())),
        }
        Ok(())
    }

    /// Checks a request whose head has been read, with `payload` bytes to come, and
    /// applies it, or for a put says where its payload lands.
    fn on_request(
        &self,
        c: &Conn,
        req: Request,
        payload: usize,
    ) -> std::result::Result<Option<(Dest, Then)>, Stop> {
        let op = self
            .target
            .check(&req)
            .and_then(|op| {
                frame::check_request_len(&req, frame::REQUEST_LEN + payload).map(|()| op)
            })
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
                let then = if op == Opcode::Put {
                    Then::Put
                } else {
                    Then::Signal(req)
                };
                return Ok(Some((dest, then)));
            }
            Opcode::Get => {
                let len = req.len as usize;
                let head = frame::response_head(req.tag, 0, len);
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
                    self.respond(c, frame::response_head(req.tag, old, 0).to_vec());
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
        Ok(None)
    }

    /// Acts on a payload that has landed whole in `dest`: a GPU heap's put is copied
    /// over, a put_signal's signal set, an answer's slot completed.
    fn on_payload(&self, c: &Conn, dest: Dest, then: Then) -> std::result::Result<(), Stop> {
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
            Then::Respond(slot, awaits) => {
                if let Dest::Buf(v) = dest {
                    *lock(&slot.data) = v;
                }
                // The whole answer has been read: its bytes leave the window.
                c.flow.release(awaits.frame_len());
                slot.done.store(true, Ordering::Release);
            }
        }
        Ok(())
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
        self.respond(c, frame::refused(&why));
        Stop::Failed(why)
    }
}
