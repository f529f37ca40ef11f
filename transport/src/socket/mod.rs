//! The socket transport: one TCP connection per pair of PEs that reach each other remotely.
//!
//! Each PE listens on the IPv4 address of `SYMMEM_SOCKET_IFNAME` (else its first up,
//! non-loopback interface), and the addresses go round through the bootstrap. Of each pair
//! the higher PE connects; both ends prove the transport's key, derived from the job's,
//! in a challenge-response handshake before any frame (`driver/connect.rs`). The listener holds
//! unauthenticated connections in one `poll` loop at a few hundred bytes each, so
//! strangers cost next to nothing.
//!
//! Both directions of a connection carry requests ([`frame`]). A target applies the
//! requests of one source in the order they were sent (one connection, read by one thread
//! at a time), so a put_signal's signal is never visible before its data, and a FLUSH is
//! answered only after everything before it was applied: that is `quiet`. `fence` has
//! nothing to do, since order per target is already kept.
//!
//! Sockets are non-blocking and nobody ever blocks holding a connection's receive side:
//! a sender whose socket is full reads from the same connection while it waits, and
//! responses that cannot be written at once are queued and written by the next writer or
//! by the service thread. Two PEs writing to each other at once therefore cannot deadlock.
//! Incoming frames are read by whichever thread gets there first: the PE's service thread
//! (sleeping in `poll`), a thread waiting for a response, or a host wait that calls
//! [`Transport::progress`] while it spins, which keeps a ping-pong near the cost of a bare
//! busy-polling TCP exchange.
//!
//! Small puts and non-fetching AMOs may be staged: left in the connection's buffer and
//! written in front of the next frame to that peer, so that a put followed by `quiet` is one
//! write (with the FLUSH) instead of two. Staging happens only while the service thread
//! goes round its loop at most every [`SPINNER_CHECK_MS`](driver::service::SPINNER_CHECK_MS) and writes what is staged each
//! round, so a staged request is never held longer than that ([`Shared::stage_or_send`]).
//!
//! A get travels in chunks of at most [`MAX_CHUNK`] bytes, [`GET_CHUNKS_IN_FLIGHT`] asked
//! for at once; a host-heap target writes each answer from the heap itself, copying into
//! its queue only what the socket does not take at once.
//!
//! [`Transport::submit_nowait`] sends a get or fetching AMO and returns at once with the
//! answer's slot ([`InFlight`]); the proxy thread keeps many in flight, and their answers
//! come back in order on each peer's connection, read by the same readers as any other.
//!
//! A connection that fails (the peer died, a malformed frame, `SYMMEM_TIMEOUT`) fails
//! every outstanding and later operation to that peer with an error naming it; a malformed
//! frame is answered with REFUSED and never applied.
//!
//! An authenticated peer cannot crash a PE or exhaust its memory: every pending request
//! records the answer it waits for (get data of its length, a fetched value, FLUSHED),
//! and an answer of another kind or length is such a malformed frame. A PE queues at most
//! [`window::REPLY_WINDOW`] bytes of answers for a peer before it stops reading that
//! peer's requests, and itself keeps no more than that outstanding on a connection, so
//! peers that keep the rule never stall each other ([`window`]).
//!
//! # Files
//! Three parts, as quinn's `quinn-proto` under `quinn`:
//! - `protocol/`, pure: the frames and their encoders (`frame.rs`), the receive state
//!   machine, bytes in and frames out (`receiver.rs`), which request awaits which answer
//!   (`pending.rs`), the answer window (`window.rs`) and flush tickets (`tickets.rs`). No
//!   socket, thread, lock or system call; each file is tested alone.
//! - `driver/`: the sockets and threads. `connect.rs` sets the connections up,
//!   `service.rs` is the service thread that polls them, `wire.rs` is a connection's
//!   byte stream (its socket, or memory in the tests and the fuzzer) and `sys.rs` makes
//!   the system calls behind it.
//! - The glue, here: this file holds the shared state (a connection, its locks, its send
//!   queue and answer slots) and the [`Transport`] operations; `receive.rs` feeds a
//!   connection's bytes to the receive state machine and acts on its frames (applying
//!   requests through the [`Target`]), `send.rs` writes frames under the connection's
//!   lock, stages small ones and waits for answers.
//!
//! `protocol_tests.rs` runs the glue over an in-memory wire, with no socket, and
//! `replay.rs` does the same with a peer's arbitrary bytes for the fuzzer.

mod driver;
mod protocol;
mod receive;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod replay;
mod send;

#[cfg(test)]
mod hostile_peer_tests;
#[cfg(test)]
mod protocol_tests;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use symmem_bootstrap::wire::HEADER_LEN;
use symmem_device::{Opcode, Request};

use self::driver::wire::Wire;
use self::protocol::frame::{self, Answer, Kind, MAX_CHUNK};
use self::protocol::pending::PendingAnswers;
use self::protocol::receiver::Receiver;
use self::protocol::tickets::FlushTickets;
use self::protocol::window::{self, Flow};
use super::target::Target;
use crate::error::{Error, GpuHeapError, Result};
use crate::interface::{DeviceHeap, InFlight, Io, Pending, Transport};
use crate::registry::{counted, Driver, Entry};

/// The socket transport in the registry: it runs wherever TCP does, so `auto` takes it
/// when no faster transport can run, and it is the one that stages GPU heaps through host
/// memory.
pub(crate) const ENTRY: Entry =
    Entry::always("socket", 1, "the TCP socket transport").with_driver(Driver {
        probe: |_| Ok(String::new()),
        auto: None,
        gpu_registration: None,
        connect: |setup| Ok(counted(setup, ENTRY.name, SocketTransport::connect(setup)?)),
    });

/// Chunks of one get asked for before the first answer is awaited: the answers of that
/// many chunks fit in the requester's window ([`window::REPLY_WINDOW`]).
const GET_CHUNKS_IN_FLIGHT: usize = 3;
const _: () = assert!(
    GET_CHUNKS_IN_FLIGHT * (HEADER_LEN + 16 + MAX_CHUNK) <= window::REPLY_WINDOW,
    "a get's chunks in flight must fit in the reply window"
);

/// The socket transport of one PE.
pub(crate) struct SocketTransport {
    shared: Arc<Shared>,
    service: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the service thread and the issuing threads share.
struct Shared {
    me: usize,
    /// `conns[pe]`: the connection to `pe`, if this PE reaches it through sockets.
    conns: Vec<Option<Conn>>,
    target: Target,
    timeout: Option<Duration>,
    next_id: AtomicU64,
    stopping: AtomicBool,
    /// Bumped by every thread that reads the sockets while it spins (host waits through
    /// [`Transport::progress`], threads waiting for a response). While it keeps moving the
    /// service thread leaves the sockets to them: see [`Shared::serve`].
    spins: AtomicU64,
    /// True while the service thread goes round its loop at most
    /// [`SPINNER_CHECK_MS`](driver::service::SPINNER_CHECK_MS)
    /// apart, writing staged requests each time: only then may a request be staged
    /// ([`Shared::stage_or_send`]).
    writes_staged_soon: AtomicBool,
    /// Issuing threads whose wait for an answer is slow, for the hang report.
    blocked: crate::blocked::BlockedCalls,
}

/// One TCP connection to a peer.
struct Conn {
    pe: usize,
    /// The bytes to and from the peer: its socket (or, in the protocol's tests, memory).
    wire: Wire,
    /// Held while a frame is being written, so frames never interleave. Holds the staged
    /// requests: small requests without an answer that wait for the next write to this
    /// peer, which carries them in front of its own frame ([`Shared::stage_or_send`]).
    tx: Mutex<Vec<u8>>,
    /// Whether `tx` holds staged requests (read without taking the lock).
    staged: AtomicBool,
    /// Response frames waiting for the socket (written by whoever holds `tx` next).
    out: Mutex<OutQueue>,
    /// The receive side; only ever `try_lock`ed by readers, who never block holding it.
    rx: Mutex<Rx>,
    /// Requests waiting for a RESPONSE or FLUSHED, by id, with what each awaits.
    pending: Mutex<PendingAnswers<Arc<Slot>>>,
    /// Requests sent that a `quiet` must flush, and how many an answered flush covers.
    tickets: FlushTickets,
    failure: OnceLock<String>,
    said_goodbye: AtomicBool,
    /// Bytes of answers awaited from and queued for the peer ([`window`]).
    flow: Flow,
    /// Buffers for the data of the next gets' answers (at most [`GET_CHUNKS_IN_FLIGHT`]),
    /// kept between gets so that each answer lands in memory already mapped and written
    /// once (a fresh buffer of a MiB costs its zeroing and a page fault per page).
    spare: Mutex<Vec<Vec<u8>>>,
}

/// Whether a request without an answer must be flushed by the next `quiet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// A put, AMO or signal of the program's: `quiet` completes it.
    Needed,
    /// A team barrier's signal, which the barrier waits for at the target itself.
    NotNeeded,
}

#[derive(Default)]
struct OutQueue {
    frames: VecDeque<Vec<u8>>,
    /// Bytes of the front frame already written.
    sent: usize,
}

/// Where a response lands.
struct Slot {
    done: AtomicBool,
    value: AtomicU64,
    /// A get's data, in a buffer from [`Conn::answer_buffer`] that goes back with
    /// [`Conn::recycle`] once copied out.
    data: Mutex<Vec<u8>>,
}

/// Receive-side state: the protocol's receive state machine, and where the payload it
/// is reading lands.
struct Rx {
    core: Receiver,
    /// Where the current payload lands and what follows it; `None` while no payload is
    /// read, or for a request without one.
    landing: Option<(Dest, Then)>,
    /// The last read of this drain returned less than it asked for, so the socket was
    /// empty then: the drain stops instead of paying a read that fails with `EAGAIN`
    /// (a ping-pong's receiver would pay it before seeing each signal). Bytes arriving
    /// later are read by the next drain: spinners call `progress` again, and the service
    /// thread's level-triggered `poll` reports them.
    emptied: bool,
    /// The last drain read some bytes (the service thread keeps polling hot after it).
    read_some: bool,
}

enum Dest {
    /// Straight into this PE's host heap (a checked put).
    Heap(*mut u8),
    /// Into a buffer, then copied to offset `off` of this PE's GPU heap (a checked put).
    Staged { off: u64, buf: Vec<u8> },
    /// Into a buffer (a get's response).
    Buf(Vec<u8>),
}

impl Dest {
    /// Where the payload's first byte lands.
    fn ptr(&mut self) -> *mut u8 {
        match self {
            Dest::Heap(p) => *p,
            Dest::Staged { buf, .. } | Dest::Buf(buf) => buf.as_mut_ptr(),
        }
    }
}

enum Then {
    /// A put: nothing more.
    Put,
    /// A put_signal: update its signal.
    Signal(Request),
    /// A response: complete the slot, and give its answer's bytes back to the window.
    Respond(Arc<Slot>, Answer),
}

// SAFETY: `Dest::Heap` points into the heap mapping, which outlives the transport.
unsafe impl Send for Rx {}

/// Why a receive step stopped.
enum Stop {
    /// No more bytes for now.
    Drained,
    /// The connection failed with this reason.
    Failed(String),
}

impl Conn {
    #[cfg(test)]
    fn new(pe: usize, stream: std::net::TcpStream) -> Self {
        Conn::over(pe, Wire::socket(stream))
    }

    /// A connection to PE `pe` over `wire`.
    fn over(pe: usize, wire: Wire) -> Self {
        Conn {
            pe,
            wire,
            tx: Mutex::new(Vec::new()),
            staged: AtomicBool::new(false),
            out: Mutex::default(),
            rx: Mutex::new(Rx {
                core: Receiver::default(),
                landing: None,
                emptied: false,
                read_some: false,
            }),
            pending: Mutex::default(),
            tickets: FlushTickets::default(),
            failure: OnceLock::new(),
            said_goodbye: AtomicBool::new(false),
            flow: Flow::default(),
            spare: Mutex::default(),
        }
    }

    /// A buffer of `len` bytes for an answer's data: a spare one if there is one.
    fn answer_buffer(&self, len: usize) -> Vec<u8> {
        if len == 0 {
            return Vec::new();
        }
        let mut buf = lock(&self.spare).pop().unwrap_or_default();
        // Zeroes only what the buffer did not hold before: nothing, from one chunk to the next.
        buf.resize(len, 0);
        buf
    }

    /// Keeps `buf` as a spare answer buffer, unless [`GET_CHUNKS_IN_FLIGHT`] are kept.
    fn recycle(&self, buf: Vec<u8>) {
        let mut spare = lock(&self.spare);
        if spare.len() < GET_CHUNKS_IN_FLIGHT {
            spare.push(buf);
        }
    }

    /// Records the first failure and wakes everyone using the connection.
    fn fail(&self, why: String) {
        if self.failure.set(why).is_ok() {
            let why = self.failure.get().map_or("", String::as_str);
            if self.said_goodbye.load(Ordering::Acquire) {
                tracing::debug!(
                    "socket transport: connection to PE {} closed: {why}",
                    self.pe
                );
            } else {
                tracing::warn!(
                    "socket transport: connection to PE {} failed: {why}",
                    self.pe
                );
            }
            self.wire.shut_down();
        }
    }

    fn failed(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn conn(&self, pe: usize) -> Option<&Conn> {
        self.conns.get(pe).and_then(Option::as_ref)
    }

    /// The connection to `pe`, or the error `op` fails with when there is none.
    fn conn_for(&self, op: &'static str, pe: usize) -> Result<&Conn> {
        self.conn(pe)
            .ok_or_else(|| self.error(op, pe, "no socket connection to this PE"))
    }

    fn error(&self, op: &'static str, pe: usize, detail: impl Into<String>) -> Error {
        Error::Transport {
            transport: "socket",
            op,
            me: self.me,
            pe,
            detail: detail.into(),
        }
    }

    fn check(&self, c: &Conn, op: &'static str) -> Result<()> {
        match c.failed() {
            None => Ok(()),
            Some(why) => Err(self.error(op, c.pe, why)),
        }
    }
}

/// How many polls of an [`InFlightReply`] go between checks of `SYMMEM_TIMEOUT` (reading
/// the clock on every poll of every request in flight would cost more than the poll).
const TIMEOUT_CHECK_POLLS: u32 = 64;

/// A get or fetching AMO sent by [`Transport::submit_nowait`]: its answer lands in `slot`
/// when whoever reads the connection (the service thread, a spinning waiter, `progress`)
/// gets to it.
struct InFlightReply {
    shared: Arc<Shared>,
    pe: usize,
    op: &'static str,
    slot: Arc<Slot>,
    sent: Instant,
    polls: u32,
}

impl InFlight for InFlightReply {
    fn poll(&mut self, dst: &mut [u8]) -> Result<Option<u64>> {
        let sh = &*self.shared;
        let c = sh.conn_for(self.op, self.pe)?;
        if self.slot.done.load(Ordering::Acquire) {
            let data = std::mem::take(&mut *lock(&self.slot.data));
            if data.len() != dst.len() {
                return Err(sh.error(
                    self.op,
                    self.pe,
                    format!(
                        "a {}-byte answer collected into a {}-byte destination",
                        data.len(),
                        dst.len()
                    ),
                ));
            }
            dst.copy_from_slice(&data);
            c.recycle(data);
            return Ok(Some(self.slot.value.load(Ordering::Relaxed)));
        }
        sh.check(c, self.op)?;
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(TIMEOUT_CHECK_POLLS) {
            if let Some(limit) = sh.timeout {
                if self.sent.elapsed() >= limit {
                    c.fail(format!(
                        "no answer from PE {} within {limit:?} (SYMMEM_TIMEOUT)",
                        c.pe
                    ));
                    sh.check(c, self.op)?;
                }
            }
        }
        Ok(None)
    }
}

impl Transport for SocketTransport {
    fn name(&self) -> &'static str {
        "socket"
    }

    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64> {
        let sh = &*self.shared;
        let pe = req.pe as usize;
        let op = req.opcode().map_or("request", |o| o.name());
        let c = sh.conn_for(op, pe)?;
        match (req.opcode(), io) {
            (Some(Opcode::Put), Io::Src(data)) => {
                for (i, chunk) in data.chunks(MAX_CHUNK).enumerate() {
                    let mut r = *req;
                    r.remote += (i * MAX_CHUNK) as u64;
                    r.len = chunk.len() as u64;
                    sh.request(c, op, r, chunk)?;
                }
                Ok(0)
            }
            (Some(Opcode::PutSignal), Io::Src(data)) => {
                // Every chunk but the last as a plain put; the last carries the signal.
                let last = data.len().saturating_sub(1) / MAX_CHUNK;
                for (i, chunk) in data.chunks(MAX_CHUNK).enumerate().take(last) {
                    let r = Request::put(
                        req.pe,
                        req.remote + (i * MAX_CHUNK) as u64,
                        0,
                        chunk.len() as u64,
                    );
                    sh.request(c, op, r, chunk)?;
                }
                let tail = &data[(last * MAX_CHUNK).min(data.len())..];
                let mut r = *req;
                r.remote += (last * MAX_CHUNK) as u64;
                r.len = tail.len() as u64;
                sh.request(c, op, r, tail)?;
                Ok(0)
            }
            (Some(Opcode::Get), Io::Dst(out)) => {
                // Chunk by chunk, with up to GET_CHUNKS_IN_FLIGHT asked for at once, so the
                // target prepares and sends the next chunk while this PE copies the last.
                let take = |chunk: &mut [u8], slot: &Slot| -> Result<()> {
                    let (_, data) = sh.answer(c, op, slot)?;
                    chunk.copy_from_slice(&data);
                    c.recycle(data);
                    Ok(())
                };
                let mut in_flight: VecDeque<(&mut [u8], Arc<Slot>)> =
                    VecDeque::with_capacity(GET_CHUNKS_IN_FLIGHT);
                for (i, chunk) in out.chunks_mut(MAX_CHUNK).enumerate() {
                    if in_flight.len() == GET_CHUNKS_IN_FLIGHT {
                        let (oldest, slot) = in_flight.pop_front().expect("full");
                        take(oldest, &slot)?;
                    }
                    let mut r = *req;
                    r.remote += (i * MAX_CHUNK) as u64;
                    r.len = chunk.len() as u64;
                    let slot = sh
                        .send_request(c, op, r, &[], Flush::Needed)?
                        .expect("a get is answered");
                    in_flight.push_back((chunk, slot));
                }
                for (chunk, slot) in in_flight {
                    take(chunk, &slot)?;
                }
                Ok(0)
            }
            (Some(Opcode::Amo | Opcode::Signal), Io::None) => Ok(sh.request(c, op, *req, &[])?.0),
            (Some(Opcode::Fence), _) => self.fence().map(|()| 0),
            (Some(Opcode::Quiet), _) => self.quiet().map(|()| 0),
            (code, _) => Err(sh.error(
                op,
                pe,
                format!("request {code:?} submitted with the wrong kind of buffer"),
            )),
        }
    }

    fn submit_nowait(&self, req: &Request, io: Io<'_>) -> Result<Pending> {
        let fetching = match (req.opcode(), &io) {
            (Some(Opcode::Amo), Io::None) => req.returns_data(),
            // A get of more than one frame's chunk goes through `submit`, chunk by chunk.
            (Some(Opcode::Get), Io::Dst(d)) => {
                !d.is_empty() && d.len() <= MAX_CHUNK && d.len() as u64 == req.len
            }
            _ => false,
        };
        if !fetching {
            return self.submit(req, io).map(Pending::Done);
        }
        let sh = &self.shared;
        let pe = req.pe as usize;
        let op = req.opcode().map_or("request", |o| o.name());
        let c = sh.conn_for(op, pe)?;
        let slot = sh
            .send_request(c, op, *req, &[], Flush::Needed)?
            .expect("a fetching request expects an answer");
        Ok(Pending::Reply(Box::new(InFlightReply {
            shared: Arc::clone(sh),
            pe,
            op,
            slot,
            sent: Instant::now(),
            polls: 0,
        })))
    }

    fn barrier_signal(&self, req: &Request, io: Io<'_>) -> Result<()> {
        let sh = &*self.shared;
        let c = sh.conn_for("barrier", req.pe as usize)?;
        // A put_signal's identity word travels inline, in the same frame as the signal:
        // the target applies it first, on the one connection that orders both.
        let payload = match io {
            Io::Src(data) => data,
            _ => &[],
        };
        sh.send_request(c, "barrier", *req, payload, Flush::NotNeeded)
            .map(drop)
    }

    fn fence(&self) -> Result<()> {
        // One connection per target, applied in order: earlier requests already precede
        // later ones.
        Ok(())
    }

    fn quiet(&self) -> Result<()> {
        // Ticketed flushes: each quiet counts the requests sent to a peer before it sends
        // its flush, and waits until a flush covering that count was answered. A quiet
        // running beside another sends a flush of its own rather than trusting one that
        // is still in flight (with a shared counter reset, the second quiet saw nothing
        // to flush and returned before the first one's flush was answered).
        let sh = &*self.shared;
        let mut waits = Vec::new();
        for c in sh.conns.iter().flatten() {
            let Some(ticket) = c.tickets.ticket() else {
                continue;
            };
            let id = sh.next_id.fetch_add(1, Ordering::Relaxed);
            sh.reserve(c, "quiet", Answer::Flushed.frame_len())?;
            let slot = sh.expect(c, id, Answer::Flushed);
            if let Err(e) = sh.send(c, "quiet", &[&frame::flush_frame(Kind::Flush, id)]) {
                lock(&c.pending).cancel(id);
                c.flow.release(Answer::Flushed.frame_len());
                return Err(e);
            }
            waits.push((c, slot, ticket));
        }
        for (c, slot, ticket) in waits {
            sh.wait(c, "quiet", &slot)?;
            c.tickets.covered(ticket);
        }
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        self.shared.spins.fetch_add(1, Ordering::Relaxed);
        for c in self.shared.conns.iter().flatten() {
            // A spinning wait calls this again at once: it never waits for another writer.
            self.shared.write_staged(c, true);
            self.shared.receive(c);
        }
        Ok(())
    }

    fn blocked(&self) -> Option<crate::blocked::Blocked> {
        self.shared.blocked.oldest()
    }

    fn failed_peer(&self) -> Option<(usize, String)> {
        // A connection closed after the peer's goodbye (or by this PE's shutdown, which
        // marks it so too) is an orderly end, not a lost peer.
        self.shared.conns.iter().flatten().find_map(|c| {
            let why = c.failed()?;
            (!c.said_goodbye.load(Ordering::Acquire)).then(|| (c.pe, why.to_string()))
        })
    }

    fn serve_device_heap(
        &self,
        make: &dyn Fn() -> Result<Arc<dyn DeviceHeap>, GpuHeapError>,
    ) -> Result<(), GpuHeapError> {
        if !self.shared.target.is_host() {
            self.shared.target.attach(make()?);
        }
        Ok(())
    }

    fn shutdown(&self) {
        let sh = &*self.shared;
        for c in sh.conns.iter().flatten() {
            if c.failed().is_none() {
                let _ = sh.send(c, "finalize", &[&frame::header(Kind::Goodbye, 0)]);
            }
        }
        sh.stopping.store(true, Ordering::Release);
        if let Some(t) = lock(&self.service).take() {
            let _ = t.join();
        }
        for c in sh.conns.iter().flatten() {
            c.said_goodbye.store(true, Ordering::Release);
            c.fail("this PE has shut the transport down".into());
        }
    }
}

impl Drop for SocketTransport {
    fn drop(&mut self) {
        if lock(&self.service).is_some() {
            self.shutdown();
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    use super::protocol::frame::REQUEST_LEN;
    use crate::interface::HeapRegion;
    use symmem_device::SignalOp;

    /// A transport state for PE 0 whose connection to "PE 1" is the other end of `client`,
    /// over `heap`.
    pub(super) fn with_client(heap: &mut [u64]) -> (Shared, TcpStream) {
        with_client_on(region_of(heap))
    }

    fn with_client_on(region: HeapRegion) -> (Shared, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let shared = shared_over(0, vec![None, Some(Conn::new(1, server))], region, 5);
        (shared, client)
    }

    /// PE `me`'s state over `region` with `conns`, and a `timeout_s` per wait.
    pub(super) fn shared_over(
        me: usize,
        conns: Vec<Option<Conn>>,
        region: HeapRegion,
        timeout_s: u64,
    ) -> Shared {
        Shared {
            me,
            conns,
            target: Target::new(region),
            timeout: Some(Duration::from_secs(timeout_s)),
            next_id: AtomicU64::new(1),
            stopping: AtomicBool::new(false),
            spins: AtomicU64::new(0),
            blocked: Default::default(),
            writes_staged_soon: AtomicBool::new(false),
        }
    }

    /// A host heap region over `heap`.
    pub(super) fn region_of(heap: &mut [u64]) -> HeapRegion {
        HeapRegion {
            base: heap.as_mut_ptr() as u64,
            len: heap.len() * 8,
            host: true,
        }
    }

    #[test]
    fn a_barrier_signal_is_sent_but_left_out_of_the_next_quiet() {
        let mut heap = [0u64; 4];
        let (sh, mut client) = with_client(&mut heap);
        let c = sh.conn(1).unwrap();
        let signal = Request::signal(1, 8, SignalOp::Add, 1);
        sh.send_request(c, "barrier", signal, &[], Flush::NotNeeded)
            .unwrap();
        assert_eq!(read_frame(&mut client).0, Kind::Request);
        assert_eq!(c.tickets.unflushed(), 0, "quiet would flush it");
        sh.send_request(c, "signal_op", signal, &[], Flush::Needed)
            .unwrap();
        assert_eq!(read_frame(&mut client).0, Kind::Request);
        assert_eq!(c.tickets.unflushed(), 1, "quiet must flush it");
    }

    /// Two quiets at once, as a PE's threads (or its proxy thread beside the application)
    /// call them: the second quiet does not take the first one's flush, still unanswered,
    /// for done. It sends a flush of its own and returns only once a flush covering its
    /// put was answered. (Before ticketed flushes the second quiet found the shared count
    /// zeroed and returned at once, and a third PE told after it could read old data.)
    #[test]
    fn a_quiet_beside_another_waits_for_a_flush_that_covers_its_puts() {
        let mut heap = [0u64; 4];
        let (sh, mut client) = with_client(&mut heap);
        let t = SocketTransport {
            shared: Arc::new(sh),
            service: Mutex::new(None),
        };
        let flush_id = |client: &mut TcpStream| {
            let (kind, body) = read_frame(client);
            assert_eq!(kind, Kind::Flush);
            u64::from_le_bytes(body[..8].try_into().unwrap())
        };
        let answer = |client: &mut TcpStream, id: u64| {
            let mut f = frame::header(Kind::Flushed, 8).to_vec();
            f.extend_from_slice(&id.to_le_bytes());
            client.write_all(&f).unwrap();
        };
        t.submit(&Request::put(1, 0, 0, 8), Io::Src(&[1; 8]))
            .unwrap();
        assert_eq!(read_frame(&mut client).0, Kind::Request);
        std::thread::scope(|s| {
            let first = s.spawn(|| t.quiet());
            let first_id = flush_id(&mut client);
            let second = s.spawn(|| t.quiet());
            // The second quiet's own flush: before the fix it sent none and returned.
            client
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let mut h = [0u8; HEADER_LEN];
            let sent_own = client.read_exact(&mut h).is_ok();
            assert!(
                !second.is_finished(),
                "the second quiet returned while the only flush was unanswered"
            );
            assert!(sent_own, "the second quiet sent no flush of its own");
            let (kind, len) = frame::check_header(&h).unwrap();
            assert_eq!((kind, len), (Kind::Flush, 8));
            let mut body = [0u8; 8];
            client.read_exact(&mut body).unwrap();
            let second_id = u64::from_le_bytes(body);
            answer(&mut client, first_id);
            first.join().unwrap().unwrap();
            answer(&mut client, second_id);
            second.join().unwrap().unwrap();
        });
        // Everything is covered now: a third quiet sends nothing and returns.
        t.quiet().unwrap();
        client.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(
            client.read(&mut byte).map_err(|e| e.kind()).unwrap_err(),
            std::io::ErrorKind::WouldBlock,
            "a quiet with nothing to flush sent a frame"
        );
    }

    /// While the service thread says it writes staged requests soon, a small put waits in
    /// the connection's buffer and goes out in front of the next frame, in order; once the
    /// flag is down, the caller writes at once, staged requests first.
    #[test]
    fn small_puts_are_staged_and_go_out_in_front_of_the_next_frame() {
        let mut heap = [0u64; 4];
        let (sh, mut client) = with_client(&mut heap);
        let c = sh.conn(1).unwrap();
        sh.writes_staged_soon.store(true, Ordering::SeqCst);
        let put = Request::put(1, 0, 0, 8);
        sh.send_request(c, "put", put, &7u64.to_le_bytes(), Flush::Needed)
            .unwrap();
        assert!(c.staged.load(Ordering::SeqCst), "the put was written");
        client.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(
            client.read(&mut byte).map_err(|e| e.kind()).unwrap_err(),
            std::io::ErrorKind::WouldBlock,
            "a staged put is on the wire"
        );
        client.set_nonblocking(false).unwrap();
        assert_eq!(c.tickets.unflushed(), 1, "quiet must flush it");
        // A signal is never staged: it carries the put with it.
        let signal = Request::signal(1, 8, SignalOp::Set, 1);
        sh.send_request(c, "signal_op", signal, &[], Flush::Needed)
            .unwrap();
        assert!(!c.staged.load(Ordering::SeqCst));
        let (kind, body) = read_frame(&mut client);
        assert_eq!(kind, Kind::Request);
        let got: Request = bytemuck::pod_read_unaligned(&body[..REQUEST_LEN]);
        assert_eq!(got.opcode(), Some(Opcode::Put), "the put comes first");
        assert_eq!(&body[REQUEST_LEN..], &7u64.to_le_bytes());
        let (_, body) = read_frame(&mut client);
        let got: Request = bytemuck::pod_read_unaligned(&body[..REQUEST_LEN]);
        assert_eq!(got.opcode(), Some(Opcode::Signal));
        // Staged while the flag is up, then the service thread lowers it: the next small
        // put finds it down and writes both.
        sh.send_request(c, "put", put, &8u64.to_le_bytes(), Flush::Needed)
            .unwrap();
        sh.writes_staged_soon.store(false, Ordering::SeqCst);
        sh.send_request(c, "put", put, &9u64.to_le_bytes(), Flush::Needed)
            .unwrap();
        assert!(!c.staged.load(Ordering::SeqCst));
        for v in [8u64, 9] {
            let (_, body) = read_frame(&mut client);
            assert_eq!(&body[REQUEST_LEN..], &v.to_le_bytes());
        }
    }

    /// A put staged while the service thread was polling fast reaches the peer although
    /// the sending PE makes no further call: the service thread writes it when it next goes
    /// round (here when it lowers the flag before a long sleep).
    #[test]
    fn a_staged_put_reaches_the_peer_without_another_call() {
        let (mut h0, mut h1) = (vec![0u64; 4], vec![0u64; 4]);
        let (a, b) = tcp_pair();
        let pe0 = transport(0, vec![None, Some(Conn::new(1, a))], &mut h0);
        let pe1 = transport(1, vec![Some(Conn::new(0, b)), None], &mut h1);
        pe0.shared.writes_staged_soon.store(true, Ordering::SeqCst);
        pe0.submit(
            &Request::put(1, 8, 0, 8),
            Io::Src(&0x5eed_u64.to_le_bytes()),
        )
        .unwrap();
        // SAFETY: h1[1] is written by PE 1's transport only; read atomically here.
        let word = unsafe { AtomicU64::from_ptr(h1.as_mut_ptr().add(1)) };
        let t0 = Instant::now();
        while word.load(Ordering::Acquire) != 0x5eed {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the staged put never left"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        pe0.shutdown();
        pe1.shutdown();
    }

    /// Serves PE 1's connection until `done` holds or it fails; returns the failure.
    fn serve_until(sh: &Shared, mut done: impl FnMut() -> bool) -> Option<String> {
        let c = sh.conn(1).unwrap();
        let t0 = Instant::now();
        while !done() && c.failed().is_none() {
            assert!(t0.elapsed() < Duration::from_secs(5), "nothing happened");
            sh.receive(c);
            std::thread::sleep(Duration::from_millis(1));
        }
        c.failed().map(str::to_owned)
    }

    pub(super) fn request_frame(req: &Request, payload: &[u8]) -> Vec<u8> {
        let mut f = frame::header(Kind::Request, REQUEST_LEN + payload.len()).to_vec();
        f.extend_from_slice(bytemuck::bytes_of(req));
        f.extend_from_slice(payload);
        f
    }

    /// Reads one frame from the test client's side.
    pub(super) fn read_frame(client: &mut TcpStream) -> (Kind, Vec<u8>) {
        let mut h = [0u8; HEADER_LEN];
        client.read_exact(&mut h).unwrap();
        let (kind, len) = frame::check_header(&h).unwrap();
        let mut body = vec![0; len];
        client.read_exact(&mut body).unwrap();
        (kind, body)
    }

    #[test]
    fn an_oversized_frame_is_refused_naming_the_peer_and_nothing_is_written() {
        let mut heap = [7u64; 16];
        let (sh, mut client) = with_client(&mut heap);
        let mut f = frame::header(Kind::Request, 0).to_vec();
        f[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        client.write_all(&f).unwrap();
        let why = serve_until(&sh, || false).expect("the connection fails");
        assert!(why.contains("malformed frame from PE 1"), "{why}");
        assert!(why.contains("exceeds limit"), "{why}");
        let (kind, body) = read_frame(&mut client);
        assert_eq!(kind, Kind::Refused);
        assert!(String::from_utf8_lossy(&body).contains("exceeds limit"));
        drop(sh);
        assert_eq!(heap, [7u64; 16]);
    }

    #[test]
    fn a_put_outside_the_heap_is_refused_before_its_payload_is_read() {
        let mut heap = [7u64; 16];
        let (sh, mut client) = with_client(&mut heap);
        let req = Request::put(0, 120, 0, 16);
        client.write_all(&request_frame(&req, &[1; 16])).unwrap();
        let why = serve_until(&sh, || false).expect("the connection fails");
        assert!(
            why.contains(
                "malformed frame from PE 1: put bytes 0x78..+16 lie outside the 128-byte heap"
            ),
            "{why}"
        );
        assert_eq!(read_frame(&mut client).0, Kind::Refused);
        drop(sh);
        assert_eq!(heap, [7u64; 16]);
    }

    #[test]
    fn a_frame_cut_short_fails_the_connection_without_applying_it() {
        let mut heap = [7u64; 16];
        let (sh, mut client) = with_client(&mut heap);
        let req = Request::put_signal(0, 0, 0, 64, 64, SignalOp::Set, 1);
        let f = request_frame(&req, &[1; 64]);
        client.write_all(&f[..f.len() - 8]).unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        let why = serve_until(&sh, || false).expect("the connection fails");
        assert!(
            why.contains("connection to PE 1 closed in the middle of a frame"),
            "{why}"
        );
        drop(sh);
        assert_eq!(
            heap[8], 7,
            "the signal of an incomplete put_signal is never set"
        );
    }

    #[test]
    fn put_signal_applies_data_then_signal_and_get_answers_with_data() {
        let mut heap = [0u64; 16];
        let base = heap.as_ptr();
        let (sh, mut client) = with_client(&mut heap);
        let data: Vec<u8> = (0..64u8).collect();
        let req = Request::put_signal(0, 0, 0, 64, 64, SignalOp::Add, 5);
        client.write_all(&request_frame(&req, &data)).unwrap();
        // SAFETY: heap[8] is the signal word, written atomically by the target.
        let sig = unsafe { AtomicU64::from_ptr(base.add(8).cast_mut()) };
        assert_eq!(serve_until(&sh, || sig.load(Ordering::Acquire) == 5), None);
        let mut get = Request::get(0, 0, 0, 64);
        get.tag = 42;
        client.write_all(&request_frame(&get, &[])).unwrap();
        let c = sh.conn(1).unwrap();
        sh.receive(c);
        let (kind, body) = read_frame(&mut client);
        assert_eq!(kind, Kind::Response);
        assert_eq!(u64::from_le_bytes(body[..8].try_into().unwrap()), 42);
        assert_eq!(&body[16..], &data[..]);
        let mut amo = Request::amo(0, symmem_device::AmoKind::FetchAdd, 8, 64, 1, 0, 1);
        amo.tag = 43;
        client.write_all(&request_frame(&amo, &[])).unwrap();
        let t0 = Instant::now();
        while sig.load(Ordering::Acquire) != 6 {
            assert!(t0.elapsed() < Duration::from_secs(5));
            sh.receive(c);
        }
        let (kind, body) = read_frame(&mut client);
        assert_eq!(kind, Kind::Response);
        assert_eq!(&body[..16], &frame::two_u64(43, 5));
        drop(sh);
        assert_eq!(heap[..8], bytemuck::cast_slice::<u8, u64>(&data)[..]);
    }

    /// A connected pair of non-blocking TCP streams.
    pub(super) fn tcp_pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        for s in [&a, &b] {
            s.set_nodelay(true).unwrap();
            s.set_nonblocking(true).unwrap();
        }
        (a, b)
    }

    /// PE `me`'s transport over `heap` with `conns`, its service thread running.
    pub(super) fn transport(
        me: usize,
        conns: Vec<Option<Conn>>,
        heap: &mut [u64],
    ) -> SocketTransport {
        let shared = Arc::new(shared_over(me, conns, region_of(heap), 10));
        let worker = Arc::clone(&shared);
        let service = std::thread::spawn(move || worker.serve());
        SocketTransport {
            shared,
            service: Mutex::new(Some(service)),
        }
    }

    /// Polls `reply` (reading the sockets as the proxy thread does) until it is in.
    pub(super) fn collect(
        t: &SocketTransport,
        reply: &mut dyn InFlight,
        dst: &mut [u8],
    ) -> Result<u64> {
        let t0 = Instant::now();
        loop {
            if let Some(v) = reply.poll(dst)? {
                return Ok(v);
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "no reply");
            t.progress()?;
            std::thread::yield_now();
        }
    }

    /// PE 0 sends 100 fetch-adds to PEs 1 and 2, alternating, plus a put and a get of
    /// the put's word among them, all before collecting any reply: every old value is
    /// exact (each peer applied its requests in the order sent), the get sees the put
    /// sent before it, and the counters end at the sums.
    #[test]
    fn pipelined_fetch_adds_to_two_peers_get_exact_results() {
        let (mut h0, mut h1, mut h2) = (vec![0u64; 8], vec![0u64; 8], vec![0u64; 8]);
        let (a1, b1) = tcp_pair();
        let (a2, b2) = tcp_pair();
        let pe0 = transport(
            0,
            vec![None, Some(Conn::new(1, a1)), Some(Conn::new(2, a2))],
            &mut h0,
        );
        let pe1 = transport(1, vec![Some(Conn::new(0, b1)), None, None], &mut h1);
        let pe2 = transport(2, vec![Some(Conn::new(0, b2)), None, None], &mut h2);
        let mut replies = Vec::new();
        for i in 0..100u64 {
            let (pe, at, add) = if i % 2 == 0 { (1, 8, 1) } else { (2, 16, 5) };
            let req = Request::amo(pe, symmem_device::AmoKind::FetchAdd, 8, at, add, 0, 1);
            match pe0.submit_nowait(&req, Io::None).unwrap() {
                Pending::Reply(r) => replies.push((i, r)),
                Pending::Done(_) => panic!("fetch-add {i} waited for its reply"),
            }
            if i == 10 {
                let put = Request::put(1, 24, 0, 8);
                pe0.submit(&put, Io::Src(&0xabcd_u64.to_le_bytes()))
                    .unwrap();
            }
        }
        let mut got = [0u8; 8];
        let get = Request::get(1, 0, 24, 8);
        let Pending::Reply(mut get_reply) = pe0.submit_nowait(&get, Io::Dst(&mut got)).unwrap()
        else {
            panic!("the get waited for its reply");
        };
        for (i, mut r) in replies {
            let old = collect(&pe0, r.as_mut(), &mut []).unwrap();
            let k = i / 2;
            let want = if i % 2 == 0 { k } else { 5 * k };
            assert_eq!(old, want, "fetch-add {i}");
        }
        assert_eq!(collect(&pe0, get_reply.as_mut(), &mut got).unwrap(), 0);
        assert_eq!(u64::from_le_bytes(got), 0xabcd);
        pe0.shutdown();
        pe1.shutdown();
        pe2.shutdown();
        assert_eq!((h1[1], h2[2], h1[3]), (50, 250, 0xabcd));
    }

    /// A get of several chunks (the last one partial) through a target whose socket
    /// takes only a little at a time: its answers are written straight from the heap and
    /// the rest of each is queued, several chunks are in flight at once, and every byte
    /// arrives in place; the same get twice, alternating with a put, sees the put.
    #[test]
    fn a_get_of_several_chunks_arrives_whole_through_a_small_socket_buffer() {
        let words = (3 * MAX_CHUNK + MAX_CHUNK / 2) / 8 + 4;
        let mut h0 = vec![0u64; 8];
        let mut h1: Vec<u64> = (0..words as u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9))
            .collect();
        let want: Vec<u8> = h1.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (a, b) = tcp_pair();
        // SAFETY: setsockopt on a live socket with a valid c_int option value.
        let rc = unsafe {
            let small: libc::c_int = 64 << 10;
            libc::setsockopt(
                b.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&small as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        let pe0 = transport(0, vec![None, Some(Conn::new(1, a))], &mut h0);
        let pe1 = transport(1, vec![Some(Conn::new(0, b)), None], &mut h1);
        let len = want.len() - 24;
        let mut got = vec![0u8; len];
        pe0.submit(&Request::get(1, 0, 8, len as u64), Io::Dst(&mut got))
            .unwrap();
        assert!(
            got == want[8..8 + len],
            "the get's bytes differ from the heap's"
        );
        pe0.submit(&Request::put(1, 16, 0, 8), Io::Src(&[0xee; 8]))
            .unwrap();
        got.fill(0);
        pe0.submit(&Request::get(1, 0, 8, len as u64), Io::Dst(&mut got))
            .unwrap();
        assert_eq!(got[8..16], [0xee; 8]);
        assert!(got[16..] == want[24..8 + len]);
        pe0.shutdown();
        pe1.shutdown();
    }

    /// A peer that dies with fetch-adds in flight: the one it answered is delivered, the
    /// others fail naming it (no hang), and so does a later request.
    #[test]
    fn a_peer_dying_with_replies_in_flight_fails_them_naming_it() {
        let mut heap = [0u64; 8];
        let (sh, mut client) = with_client(&mut heap);
        let t = SocketTransport {
            shared: Arc::new(sh),
            service: Mutex::new(None),
        };
        let mut replies: Vec<Box<dyn InFlight>> = (0..5u64)
            .map(|i| {
                let req = Request::amo(1, symmem_device::AmoKind::FetchAdd, 8, 0, i, 0, 1);
                match t.submit_nowait(&req, Io::None).unwrap() {
                    Pending::Reply(r) => r,
                    Pending::Done(_) => panic!("fetch-add {i} waited for its reply"),
                }
            })
            .collect();
        let mut ids = Vec::new();
        for _ in 0..5 {
            let (kind, body) = read_frame(&mut client);
            assert_eq!(kind, Kind::Request);
            let req: Request = bytemuck::pod_read_unaligned(&body[..REQUEST_LEN]);
            ids.push(req.tag);
        }
        let mut answer = frame::header(Kind::Response, 16).to_vec();
        answer.extend_from_slice(&frame::two_u64(ids[0], 77));
        client.write_all(&answer).unwrap();
        drop(client);
        assert_eq!(collect(&t, replies[0].as_mut(), &mut []).unwrap(), 77);
        for r in &mut replies[1..] {
            let why = collect(&t, r.as_mut(), &mut []).unwrap_err().to_string();
            assert!(why.contains("PE 1") && why.contains("closed"), "{why}");
        }
        let req = Request::amo(1, symmem_device::AmoKind::FetchAdd, 8, 0, 1, 0, 1);
        let why = t.submit_nowait(&req, Io::None).err().unwrap().to_string();
        assert!(why.contains("PE 1"), "{why}");
    }

    /// A GPU heap stand-in: host memory behind the [`DeviceHeap`] calls,
    /// recording their order.
    struct FakeGpuHeap {
        mem: Mutex<Vec<u8>>,
        log: Mutex<Vec<String>>,
        fail_writes: bool,
    }

    impl DeviceHeap for FakeGpuHeap {
        fn write(&self, off: u64, src: &[u8]) -> std::result::Result<(), GpuHeapError> {
            if self.fail_writes {
                return Err("cuMemcpyHtoD failed: CUDA_ERROR_ILLEGAL_ADDRESS".into());
            }
            let off = off as usize;
            lock(&self.mem)[off..off + src.len()].copy_from_slice(src);
            lock(&self.log).push(format!("write {off} {}", src.len()));
            Ok(())
        }
        fn read(&self, off: u64, dst: &mut [u8]) -> std::result::Result<(), GpuHeapError> {
            let off = off as usize;
            dst.copy_from_slice(&lock(&self.mem)[off..off + dst.len()]);
            lock(&self.log).push(format!("read {off} {}", dst.len()));
            Ok(())
        }
        fn amo(
            &self,
            off: u64,
            width: u8,
            kind: symmem_device::AmoKind,
            value: u64,
            _compare: u64,
        ) -> std::result::Result<u64, GpuHeapError> {
            assert_eq!((width, kind), (8, symmem_device::AmoKind::FetchAdd));
            let off = off as usize;
            let mut m = lock(&self.mem);
            let old = u64::from_le_bytes(m[off..off + 8].try_into().unwrap());
            m[off..off + 8].copy_from_slice(&(old + value).to_le_bytes());
            lock(&self.log).push(format!("amo {off}"));
            Ok(old)
        }
        fn signal(
            &self,
            off: u64,
            op: SignalOp,
            value: u64,
        ) -> std::result::Result<(), GpuHeapError> {
            assert_eq!(op, SignalOp::Set);
            let off = off as usize;
            lock(&self.mem)[off..off + 8].copy_from_slice(&value.to_le_bytes());
            lock(&self.log).push(format!("signal {off}"));
            Ok(())
        }
    }

    fn gpu_region() -> HeapRegion {
        // A device address: never dereferenced by the transport.
        HeapRegion {
            base: 0x7f00_0000_0000,
            len: 128,
            host: false,
        }
    }

    #[test]
    fn a_gpu_heap_gets_staged_puts_then_signals_and_answers_gets_and_amos_in_order() {
        let (sh, mut client) = with_client_on(gpu_region());
        let gpu = Arc::new(FakeGpuHeap {
            mem: Mutex::new(vec![0; 128]),
            log: Mutex::default(),
            fail_writes: false,
        });
        let g = gpu.clone();
        sh.target.attach(g);
        let data: Vec<u8> = (0..64u8).collect();
        let req = Request::put_signal(0, 0, 0, 64, 64, SignalOp::Set, 9);
        client.write_all(&request_frame(&req, &data)).unwrap();
        assert_eq!(
            serve_until(&sh, || lock(&gpu.log).len() == 2),
            None,
            "{:?}",
            lock(&gpu.log)
        );
        let mut get = Request::get(0, 0, 0, 64);
        get.tag = 42;
        client.write_all(&request_frame(&get, &[])).unwrap();
        let mut amo = Request::amo(0, symmem_device::AmoKind::FetchAdd, 8, 64, 1, 0, 1);
        amo.tag = 43;
        client.write_all(&request_frame(&amo, &[])).unwrap();
        assert_eq!(serve_until(&sh, || lock(&gpu.log).len() == 4), None);
        let (kind, body) = read_frame(&mut client);
        assert_eq!(kind, Kind::Response);
        assert_eq!(u64::from_le_bytes(body[..8].try_into().unwrap()), 42);
        assert_eq!(&body[16..], &data[..]);
        let (kind, body) = read_frame(&mut client);
        assert_eq!(kind, Kind::Response);
        assert_eq!(&body[..16], &frame::two_u64(43, 9));
        assert_eq!(
            *lock(&gpu.log),
            ["write 0 64", "signal 64", "read 0 64", "amo 64"],
            "the signal is applied only after its data"
        );
    }

    #[test]
    fn a_gpu_heap_that_cannot_apply_a_put_fails_the_connection_naming_both_pes() {
        let (sh, mut client) = with_client_on(gpu_region());
        let gpu = Arc::new(FakeGpuHeap {
            mem: Mutex::new(vec![0; 128]),
            log: Mutex::default(),
            fail_writes: true,
        });
        let g = gpu.clone();
        sh.target.attach(g);
        let req = Request::put_signal(0, 0, 0, 8, 64, SignalOp::Set, 9);
        client.write_all(&request_frame(&req, &[1; 8])).unwrap();
        let why = serve_until(&sh, || false).expect("the connection fails");
        assert!(
            why.contains("PE 0 could not apply a put from PE 1")
                && why.contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
            "{why}"
        );
        assert!(lock(&gpu.log).is_empty(), "no signal after a lost put");
    }

    #[test]
    fn a_gpu_heap_without_its_access_path_refuses_to_guess() {
        let (sh, mut client) = with_client_on(gpu_region());
        let mut get = Request::get(0, 0, 0, 8);
        get.tag = 1;
        client.write_all(&request_frame(&get, &[])).unwrap();
        let why = serve_until(&sh, || false).expect("the connection fails");
        assert!(why.contains("not ready for remote requests"), "{why}");
    }
}
