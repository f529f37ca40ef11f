//! The socket transport: one TCP connection per pair of PEs that reach each other remotely.
//!
//! Each PE listens on the IPv4 address of `SYMMEM_SOCKET_IFNAME` (else its first up,
//! non-loopback interface), and the addresses and a job key go round through the
//! bootstrap. Of each pair the higher PE connects and introduces itself with a HELLO
//! carrying the key; the listener reads at most one fixed-size HELLO from a connection
//! before it is authenticated, one connection at a time, so strangers cost nothing.
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
//! [`Transport::submit_nowait`] sends a get or fetching AMO and returns at once with the
//! answer's slot ([`InFlight`]); the proxy thread keeps many in flight, and their answers
//! come back in order on each peer's connection, read by the same readers as any other.
//!
//! A connection that fails (the peer died, a malformed frame, `SYMMEM_TIMEOUT`) fails
//! every outstanding and later operation to that peer with an error naming it; a malformed
//! frame is answered with REFUSED and never applied.

mod frame;

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use symmem_bootstrap::wire::HEADER_LEN;
use symmem_device::{Opcode, Request};
use symmem_sync::Backoff;

use self::frame::{Kind, MAX_CHUNK, REQUEST_LEN};
use super::target::Target;
use crate::error::{Error, GpuHeapError, Result};
use crate::interface::{DeviceHeap, InFlight, Io, Pending, Setup, Transport};

/// How long the listener waits for an accepted connection's HELLO.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the service thread checks whether threads spinning on the sockets have
/// stopped, in milliseconds.
const SPINNER_CHECK_MS: i32 = 1;
/// How long the service thread keeps polling hot after the last frame it served.
const HOT_WINDOW: Duration = Duration::from_micros(50);
/// While hot, the service thread yields the core once every this many empty polls: a
/// yield per poll (a second syscall) made each poll slower, and so every request's wait
/// to be noticed longer.
const HOT_YIELD_EVERY: u32 = 8;
/// Bytes the receive side reads ahead of the frame it parses.
const READ_AHEAD: usize = 64 << 10;
/// Payloads up to this size are copied next to their request and sent with it in one
/// contiguous write (`p`, signals, small puts).
const INLINE_PAYLOAD: usize = 64;

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
}

/// One TCP connection to a peer.
struct Conn {
    pe: usize,
    stream: TcpStream,
    fd: RawFd,
    /// Held while a frame is being written, so frames never interleave.
    tx: Mutex<()>,
    /// Response frames waiting for the socket (written by whoever holds `tx` next).
    out: Mutex<OutQueue>,
    /// The receive side; only ever `try_lock`ed by readers, who never block holding it.
    rx: Mutex<Rx>,
    /// Requests waiting for a RESPONSE or FLUSHED, by id.
    pending: Mutex<HashMap<u64, Arc<Slot>>>,
    /// Requests sent since the last flush (what `quiet` must wait for).
    unflushed: AtomicU64,
    failure: OnceLock<String>,
    said_goodbye: AtomicBool,
}

#[derive(Default)]
struct OutQueue {
    frames: VecDeque<Vec<u8>>,
    /// Bytes of the front frame already written.
    sent: usize,
}

/// Where a response lands.
#[derive(Default)]
struct Slot {
    done: AtomicBool,
    value: AtomicU64,
    /// A get's expected length, then its data.
    expect: usize,
    data: Mutex<Vec<u8>>,
}

/// Receive-side state: a read-ahead buffer and the frame being parsed.
struct Rx {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    state: RxState,
    /// The last read of this drain returned less than it asked for, so the socket was
    /// empty then: the drain stops instead of paying a read that fails with `EAGAIN`
    /// (a ping-pong's receiver would pay it before seeing each signal). Bytes arriving
    /// later are read by the next drain: spinners call `progress` again, and the service
    /// thread's level-triggered `poll` reports them.
    emptied: bool,
}

enum RxState {
    /// Waiting for a header.
    Header,
    /// Waiting for `len` body bytes of `kind` (all of it for small kinds; the request
    /// or response head for those with payloads).
    Body { kind: Kind, len: usize },
    /// Reading a payload of `len` bytes into `dest`.
    Payload {
        dest: Dest,
        filled: usize,
        len: usize,
        then: Then,
    },
}

enum Dest {
    /// Straight into this PE's host heap (a checked put).
    Heap(*mut u8),
    /// Into a buffer, then copied to offset `off` of this PE's GPU heap (a checked put).
    Staged { off: u64, buf: Vec<u8> },
    /// Into a buffer (a get's response).
    Buf(Vec<u8>),
}

enum Then {
    /// A put: nothing more.
    Put,
    /// A put_signal: update its signal.
    Signal(Request),
    /// A response: complete the slot.
    Respond(Arc<Slot>),
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

impl SocketTransport {
    /// Connects to every PE `setup.remote` names: dials the lower-numbered ones and
    /// accepts the higher-numbered ones, each proving the job's key in its hello.
    /// Collective: every PE calls it.
    pub(crate) fn connect(setup: &Setup<'_>) -> Result<Self> {
        let me = setup.me;
        let n = setup.remote.len();
        let b = setup.bootstrap;
        let key_bytes = b.broadcast(0, &symmem_bootstrap::random_nonce()?.to_le_bytes())?;
        let key =
            u64::from_le_bytes(key_bytes.as_slice().try_into().map_err(|_| {
                init_error(me, 0, "the job key broadcast has the wrong length".into())
            })?);
        let ip = symmem_bootstrap::advertised_ip(setup.config.socket_ifname.as_deref())?;
        let listener = TcpListener::bind((ip, 0))
            .map_err(|e| Error::io(format!("socket transport: binding a listener on {ip}"), e))?;
        let addrs = b.allgather(
            listener
                .local_addr()
                .map_err(|e| Error::io("socket transport: listener address", e))?
                .to_string()
                .as_bytes(),
        )?;
        let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
        dial_lower(setup, key, &addrs, &mut streams)?;
        accept_higher(setup, key, &listener, &mut streams)?;
        let mut conns = Vec::with_capacity(n);
        for (pe, s) in streams.into_iter().enumerate() {
            conns.push(match s {
                None => None,
                Some(s) => {
                    s.set_nodelay(true)
                        .and_then(|()| s.set_nonblocking(true))
                        .and_then(|()| s.set_read_timeout(None))
                        .map_err(|e| init_error(me, pe, format!("configuring its socket: {e}")))?;
                    Some(Conn::new(pe, s))
                }
            });
        }
        let shared = Arc::new(Shared {
            me,
            conns,
            target: Target::new(setup.heap),
            timeout: setup.config.timeout,
            next_id: AtomicU64::new(1),
            stopping: AtomicBool::new(false),
            spins: AtomicU64::new(0),
        });
        let worker = Arc::clone(&shared);
        let service = std::thread::Builder::new()
            .name(format!("symmem-socket-{me}"))
            .spawn(move || worker.serve())
            .map_err(|e| Error::io("socket transport: starting the service thread", e))?;
        Ok(SocketTransport {
            shared,
            service: Mutex::new(Some(service)),
        })
    }
}

/// The error of connecting to `pe`.
fn init_error(me: usize, pe: usize, detail: String) -> Error {
    Error::Transport {
        transport: "socket",
        op: "init",
        me,
        pe,
        detail,
    }
}

/// Dials every remote PE below this one at its address in `addrs` and sends the hello
/// that names this PE and proves `key`; the streams go into `streams`.
fn dial_lower(
    setup: &Setup<'_>,
    key: u64,
    addrs: &[Vec<u8>],
    streams: &mut [Option<TcpStream>],
) -> Result<()> {
    let (me, n) = (setup.me, setup.remote.len());
    for pe in (0..me).filter(|&p| setup.remote[p]) {
        let text = String::from_utf8_lossy(&addrs[pe]).into_owned();
        let peer: SocketAddr = text
            .parse()
            .map_err(|_| init_error(me, pe, format!("its address {text:?} does not parse")))?;
        let mut s = connect_until(peer, setup.deadline)
            .map_err(|e| init_error(me, pe, format!("connecting to {peer}: {e}")))?;
        let mut hello = frame::header(Kind::Hello, 16).to_vec();
        hello.extend_from_slice(&frame::hello(key, me as u32, n as u32));
        s.write_all(&hello)
            .map_err(|e| init_error(me, pe, format!("sending HELLO to {peer}: {e}")))?;
        streams[pe] = Some(s);
    }
    Ok(())
}

/// Accepts a connection from every remote PE above this one, by the deadline; a
/// connection whose hello does not prove `key`, or names a PE not expected, is logged
/// and closed. The streams go into `streams`.
fn accept_higher(
    setup: &Setup<'_>,
    key: u64,
    listener: &TcpListener,
    streams: &mut [Option<TcpStream>],
) -> Result<()> {
    let (me, n) = (setup.me, setup.remote.len());
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("socket transport: listener address", e))?;
    let mut expected: Vec<usize> = (me + 1..n).filter(|&p| setup.remote[p]).collect();
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("socket transport: listener", e))?;
    while !expected.is_empty() {
        if Instant::now() >= setup.deadline {
            let missing = expected.iter().map(|p| p.to_string()).collect::<Vec<_>>();
            return Err(init_error(
                me,
                expected[0],
                format!(
                    "PEs {} did not connect to {addr} within the bootstrap timeout",
                    missing.join(", ")
                ),
            ));
        }
        match listener.accept() {
            Ok((s, from)) => match read_hello(s, key, n) {
                Ok((pe, s)) if expected.contains(&pe) => {
                    expected.retain(|&p| p != pe);
                    streams[pe] = Some(s);
                }
                Ok((pe, _)) => tracing::warn!(
                    target: "init::transport",
                    "socket transport: connection from {from} claims PE {pe}, which is not expected to connect to PE {me}; closed"
                ),
                Err(why) => tracing::warn!(
                    target: "init::transport",
                    "socket transport: refused a connection from {from}: {why}"
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                poll_one(listener.as_raw_fd(), libc::POLLIN, 20)
            }
            Err(e) => return Err(Error::io("socket transport: accept", e)),
        }
    }
    Ok(())
}

/// Connects to `peer`, retrying refusals until `deadline`.
fn connect_until(peer: SocketAddr, deadline: Instant) -> std::io::Result<TcpStream> {
    let mut backoff = Backoff::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(&peer, left.max(Duration::from_millis(1))) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => backoff.snooze(),
        }
    }
}

/// Reads and checks the HELLO of an accepted connection: exactly one header and a 16-byte
/// body, with a timeout; returns the peer's PE.
fn read_hello(
    mut s: TcpStream,
    key: u64,
    n: usize,
) -> std::result::Result<(usize, TcpStream), String> {
    s.set_nonblocking(false)
        .and_then(|()| s.set_read_timeout(Some(HELLO_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let mut h = [0u8; HEADER_LEN];
    s.read_exact(&mut h)
        .map_err(|e| format!("reading HELLO: {e}"))?;
    match frame::check_header(&h)? {
        (Kind::Hello, _) => {}
        (k, _) => return Err(format!("first frame is {k:?}, not HELLO")),
    }
    let mut body = [0u8; 16];
    s.read_exact(&mut body)
        .map_err(|e| format!("reading HELLO: {e}"))?;
    let (their_key, pe, their_n) = frame::parse_hello(&body);
    if their_key != key {
        return Err("wrong job key (another job, or not a symmem PE)".into());
    }
    if their_n as usize != n || pe as usize >= n {
        return Err(format!("claims PE {pe} of {their_n}, this job has {n} PEs"));
    }
    Ok((pe as usize, s))
}

/// Waits up to `ms` milliseconds for `events` on `fd`.
fn poll_one(fd: RawFd, events: libc::c_short, ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) };
}

impl Conn {
    fn new(pe: usize, stream: TcpStream) -> Self {
        Conn {
            pe,
            fd: stream.as_raw_fd(),
            stream,
            tx: Mutex::new(()),
            out: Mutex::default(),
            rx: Mutex::new(Rx {
                buf: vec![0; READ_AHEAD],
                start: 0,
                end: 0,
                state: RxState::Header,
                emptied: false,
            }),
            pending: Mutex::default(),
            unflushed: AtomicU64::new(0),
            failure: OnceLock::new(),
            said_goodbye: AtomicBool::new(false),
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
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
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

    /// The service thread: sleeps in `poll` until a connection is readable (or writable
    /// with queued responses) and serves it.
    ///
    /// After serving a frame it keeps polling without sleeping for [`HOT_WINDOW`] (yielding
    /// the core between polls), so that the next request of a burst or a ping-pong is
    /// read as soon as it lands rather than after a wake-up from `poll`.
    ///
    /// While some thread of this PE spins reading the sockets ([`Self::spins`] moved since
    /// the last round), the service thread does not poll them for input and only checks
    /// again every [`SPINNER_CHECK_MS`]: otherwise every arriving frame would wake it,
    /// and on a machine with more threads than cores the wake-up preempts the very thread
    /// that is spinning for that frame (measured: a socket ping-pong 3× slower). Once the
    /// spinners stop or go to sleep, it serves the sockets again within that interval.
    fn serve(&self) {
        let live: Vec<&Conn> = self.conns.iter().flatten().collect();
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(live.len());
        let mut seen_spins = self.spins.load(Ordering::Relaxed);
        // Until when to keep polling without sleeping, after the last frame served.
        let mut hot_until: Option<Instant> = None;
        // Empty polls in a row while hot.
        let mut idle_rounds: u32 = 0;
        while !self.stopping.load(Ordering::Acquire) {
            let spins = self.spins.load(Ordering::Relaxed);
            let spinners = spins != seen_spins;
            seen_spins = spins;
            let hot = !spinners && hot_until.is_some_and(|t| Instant::now() < t);
            fds.clear();
            for c in &live {
                let mut events = 0;
                if c.failed().is_none() {
                    if !spinners {
                        events |= libc::POLLIN;
                    }
                    if !lock(&c.out).frames.is_empty() {
                        events |= libc::POLLOUT;
                    }
                }
                fds.push(libc::pollfd {
                    fd: if events == 0 { -1 } else { c.fd },
                    events,
                    revents: 0,
                });
            }
            let ms = match (hot, spinners) {
                (true, _) => 0,
                (false, true) => SPINNER_CHECK_MS,
                (false, false) => 100,
            };
            // SAFETY: `fds` holds fds.len() valid pollfds.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            if ready <= 0 {
                idle_rounds = idle_rounds.wrapping_add(1);
                if hot && idle_rounds.is_multiple_of(HOT_YIELD_EVERY) {
                    // Give the core away if another thread wants it, else poll again.
                    std::thread::yield_now();
                }
                continue;
            }
            idle_rounds = 0;
            let mut busy = false;
            let mut served = false;
            for (c, p) in live.iter().zip(&fds) {
                if p.revents == 0 {
                    continue;
                }
                if p.revents & libc::POLLOUT != 0 {
                    self.flush_out(c);
                }
                if p.revents & !libc::POLLOUT != 0 {
                    if self.receive(c) {
                        served = true;
                    } else {
                        busy = true;
                    }
                }
            }
            if served {
                hot_until = Some(Instant::now() + HOT_WINDOW);
            }
            if busy {
                // Another thread is reading; let it finish instead of polling hot.
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    /// Reads and applies whatever `c` has; returns false if another thread holds the
    /// receive side.
    fn receive(&self, c: &Conn) -> bool {
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
    fn drain(&self, c: &Conn, rx: &mut Rx) -> Stop {
        rx.emptied = false;
        loop {
            let step = match std::mem::replace(&mut rx.state, RxState::Header) {
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
    fn fill(&self, c: &Conn, rx: &mut Rx, want: usize) -> std::result::Result<bool, Stop> {
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
            match read_raw(c.fd, unsafe { rx.buf.as_mut_ptr().add(rx.end) }, free) {
                Ok(0) => return Err(Stop::Failed(self.eof_reason(c, rx))),
                Ok(k) => {
                    rx.end += k;
                    rx.emptied = k < free;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(Stop::Failed(format!("reading from PE {}: {e}", c.pe))),
            }
        }
        Ok(true)
    }

    fn eof_reason(&self, c: &Conn, rx: &Rx) -> String {
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

    fn on_header(&self, c: &Conn, rx: &mut Rx) -> std::result::Result<bool, Stop> {
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

    fn on_body(
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
                if data != slot.expect {
                    return Err(self.refuse(
                        c,
                        format!(
                            "a {data}-byte response to request {id}, which asked for {}",
                            slot.expect
                        ),
                    ));
                }
                slot.value.store(value, Ordering::Relaxed);
                rx.state = RxState::Payload {
                    dest: Dest::Buf(vec![0; data]),
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
    fn on_request(
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
                let mut f = Vec::with_capacity(HEADER_LEN + 16 + len);
                f.extend_from_slice(&frame::header(Kind::Response, 16 + len));
                f.extend_from_slice(&frame::two_u64(req.tag, 0));
                let at = f.len();
                f.resize(at + len, 0);
                self.target
                    .read(req.remote, &mut f[at..])
                    .map_err(|why| self.apply_failed(c, "get", why))?;
                self.respond(c, f);
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
    fn on_payload(
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
            match read_raw(c.fd, unsafe { ptr.add(filled) }, len - filled) {
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
                Err(e) => return Err(Stop::Failed(format!("reading from PE {}: {e}", c.pe))),
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
                slot.done.store(true, Ordering::Release);
            }
        }
        Ok(true)
    }

    /// A well-formed request from `c` that this PE could not apply to its heap (a GPU
    /// heap's copy or helper kernel failed): the failure that closes `c`, so the peer's
    /// operations fail naming this PE instead of being lost.
    fn apply_failed(&self, c: &Conn, what: &str, why: String) -> Stop {
        Stop::Failed(format!(
            "PE {} could not apply a {what} from PE {} to its heap: {why}",
            self.me, c.pe
        ))
    }

    /// Sends REFUSED with `why` (best effort) and returns the failure that closes `c`.
    fn refuse(&self, c: &Conn, why: String) -> Stop {
        let why = format!("malformed frame from PE {}: {why}", c.pe);
        let text = &why.as_bytes()[..why.len().min(frame::MAX_REASON)];
        let mut f = frame::header(Kind::Refused, text.len()).to_vec();
        f.extend_from_slice(text);
        self.respond(c, f);
        Stop::Failed(why)
    }

    /// Queues a response frame and writes it if the socket is free.
    fn respond(&self, c: &Conn, f: Vec<u8>) {
        lock(&c.out).frames.push_back(f);
        self.flush_out(c);
    }

    /// Writes queued responses if no one is writing to `c`; whoever releases `tx` next
    /// (or the service thread, on POLLOUT) writes the rest.
    fn flush_out(&self, c: &Conn) {
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
    fn write_queued(&self, c: &Conn) -> bool {
        let mut q = lock(&c.out);
        while let Some(front) = q.frames.front() {
            let rest = &front[q.sent..];
            match write_raw(c.fd, &[rest]) {
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
                    c.fail(format!("writing to PE {}: {e}", c.pe));
                    return true;
                }
            }
        }
        false
    }

    /// Writes one whole frame made of `parts`, waiting (and reading, so the peer can
    /// make progress too) while the socket is full.
    fn send(&self, c: &Conn, op: &'static str, parts: &[&[u8]]) -> Result<()> {
        self.check(c, op)?;
        let tx = lock(&c.tx);
        // When the first wait for room began: read only if the socket fills.
        let mut started = None;
        // Queued responses first: they may be the rest of a partly written frame.
        while self.write_queued(c) {
            self.wait_writable(c, op, &mut started)?;
        }
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut done = 0;
        while done < total {
            let mut skip = done;
            let mut iov: [&[u8]; 3] = [&[]; 3];
            let mut k = 0;
            for p in parts {
                if skip >= p.len() {
                    skip -= p.len();
                    continue;
                }
                iov[k] = &p[skip..];
                skip = 0;
                k += 1;
            }
            match write_raw(c.fd, &iov[..k]) {
                Ok(w) => done += w,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.wait_writable(c, op, &mut started)?
                }
                Err(e) => {
                    c.fail(format!("writing to PE {}: {e}", c.pe));
                    return self.check(c, op);
                }
            }
        }
        self.write_queued(c);
        drop(tx);
        if !lock(&c.out).frames.is_empty() {
            self.flush_out(c);
        }
        Ok(())
    }

    /// While a write waits for room: serve incoming frames, then sleep in `poll` briefly.
    fn wait_writable(
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
        poll_one(c.fd, libc::POLLOUT | libc::POLLIN, 1);
        Ok(())
    }

    /// Waits for `slot`, serving the connection meanwhile.
    fn wait(&self, c: &Conn, op: &'static str, slot: &Slot) -> Result<()> {
        let mut backoff = Backoff::new();
        let started = Instant::now();
        loop {
            if slot.done.load(Ordering::Acquire) {
                return Ok(());
            }
            self.check(c, op)?;
            if !backoff.is_slow() {
                self.spins.fetch_add(1, Ordering::Relaxed);
            }
            self.receive(c);
            if slot.done.load(Ordering::Acquire) {
                return Ok(());
            }
            if backoff.is_slow() {
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

    /// Registers a slot for a response to request `id`.
    fn expect(&self, c: &Conn, id: u64, len: usize) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            expect: len,
            ..Slot::default()
        });
        lock(&c.pending).insert(id, Arc::clone(&slot));
        slot
    }

    /// Sends one request (with its payload) and, for gets and fetching AMOs, waits for
    /// the answer.
    fn request(
        &self,
        c: &Conn,
        op: &'static str,
        req: Request,
        payload: &[u8],
    ) -> Result<(u64, Vec<u8>)> {
        let Some(slot) = self.send_request(c, op, req, payload)? else {
            return Ok((0, Vec::new()));
        };
        self.wait(c, op, &slot)?;
        let data = std::mem::take(&mut *lock(&slot.data));
        Ok((slot.value.load(Ordering::Relaxed), data))
    }

    /// Sends one request (with its payload); for gets and fetching AMOs returns the slot
    /// its answer lands in.
    fn send_request(
        &self,
        c: &Conn,
        op: &'static str,
        mut req: Request,
        payload: &[u8],
    ) -> Result<Option<Arc<Slot>>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        req.tag = id;
        // Addresses of this process mean nothing to the peer: only whether a value is
        // wanted back crosses the wire.
        req.local = req.returns_data() as u64;
        // A small payload travels in the same buffer as the header and request: one
        // contiguous `send` instead of a two-part `sendmsg`.
        let inline = if payload.len() <= INLINE_PAYLOAD {
            payload.len()
        } else {
            0
        };
        let mut head = [0u8; HEADER_LEN + REQUEST_LEN + INLINE_PAYLOAD];
        head[..HEADER_LEN]
            .copy_from_slice(&frame::header(Kind::Request, REQUEST_LEN + payload.len()));
        head[HEADER_LEN..HEADER_LEN + REQUEST_LEN].copy_from_slice(bytemuck::bytes_of(&req));
        head[HEADER_LEN + REQUEST_LEN..][..inline].copy_from_slice(&payload[..inline]);
        let head = &head[..HEADER_LEN + REQUEST_LEN + inline];
        let payload = &payload[inline..];
        if !req.returns_data() {
            self.send(c, op, &[head, payload])?;
            c.unflushed.fetch_add(1, Ordering::Release);
            return Ok(None);
        }
        let expect = if req.opcode() == Some(Opcode::Get) {
            req.len as usize
        } else {
            0
        };
        let slot = self.expect(c, id, expect);
        if let Err(e) = self.send(c, op, &[head, payload]) {
            lock(&c.pending).remove(&id);
            return Err(e);
        }
        Ok(Some(slot))
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
                for (i, chunk) in out.chunks_mut(MAX_CHUNK).enumerate() {
                    let mut r = *req;
                    r.remote += (i * MAX_CHUNK) as u64;
                    r.len = chunk.len() as u64;
                    let (_, data) = sh.request(c, op, r, &[])?;
                    chunk.copy_from_slice(&data);
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
            .send_request(c, op, *req, &[])?
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

    fn fence(&self) -> Result<()> {
        // One connection per target, applied in order: earlier requests already precede
        // later ones.
        Ok(())
    }

    fn quiet(&self) -> Result<()> {
        let sh = &*self.shared;
        let mut waits = Vec::new();
        for c in sh.conns.iter().flatten() {
            if c.unflushed.swap(0, Ordering::AcqRel) == 0 {
                continue;
            }
            let id = sh.next_id.fetch_add(1, Ordering::Relaxed);
            let slot = sh.expect(c, id, 0);
            let mut f = [0u8; HEADER_LEN + 8];
            f[..HEADER_LEN].copy_from_slice(&frame::header(Kind::Flush, 8));
            f[HEADER_LEN..].copy_from_slice(&id.to_le_bytes());
            sh.send(c, "quiet", &[&f])?;
            waits.push((c, slot));
        }
        for (c, slot) in waits {
            sh.wait(c, "quiet", &slot)?;
        }
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        self.shared.spins.fetch_add(1, Ordering::Relaxed);
        for c in self.shared.conns.iter().flatten() {
            self.shared.receive(c);
        }
        Ok(())
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

/// Runs a syscall wrapper again while it fails with `EINTR`: its byte count, or the error.
fn retry_interrupted(mut call: impl FnMut() -> isize) -> std::io::Result<usize> {
    loop {
        let r = call();
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `read(2)` into raw memory (which may be shared with other processes).
fn read_raw(fd: RawFd, ptr: *mut u8, len: usize) -> std::io::Result<usize> {
    // SAFETY: the caller provides `len` writable bytes at `ptr`.
    retry_interrupted(|| unsafe { libc::read(fd, ptr.cast(), len) })
}

/// `send(2)` of one slice, or `sendmsg(2)` of up to three, without SIGPIPE on a closed
/// connection.
fn write_raw(fd: RawFd, parts: &[&[u8]]) -> std::io::Result<usize> {
    if let [one] = parts {
        // SAFETY: `one` is a live slice, which send only reads.
        return retry_interrupted(|| unsafe {
            libc::send(fd, one.as_ptr().cast(), one.len(), libc::MSG_NOSIGNAL)
        });
    }
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 3];
    for (v, p) in iov.iter_mut().zip(parts) {
        v.iov_base = p.as_ptr() as *mut libc::c_void;
        v.iov_len = p.len();
    }
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = parts.len().min(3) as _;
    // SAFETY: `msg` describes live slices, which sendmsg only reads.
    retry_interrupted(|| unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interface::HeapRegion;
    use symmem_device::SignalOp;

    /// A transport state for PE 0 whose connection to "PE 1" is the other end of `client`,
    /// over `heap`.
    fn with_client(heap: &mut [u64]) -> (Shared, TcpStream) {
        with_client_on(HeapRegion {
            base: heap.as_mut_ptr() as u64,
            len: heap.len() * 8,
            host: true,
        })
    }

    fn with_client_on(region: HeapRegion) -> (Shared, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let shared = Shared {
            me: 0,
            conns: vec![None, Some(Conn::new(1, server))],
            target: Target::new(region),
            timeout: Some(Duration::from_secs(5)),
            next_id: AtomicU64::new(1),
            stopping: AtomicBool::new(false),
            spins: AtomicU64::new(0),
        };
        (shared, client)
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

    fn request_frame(req: &Request, payload: &[u8]) -> Vec<u8> {
        let mut f = frame::header(Kind::Request, REQUEST_LEN + payload.len()).to_vec();
        f.extend_from_slice(bytemuck::bytes_of(req));
        f.extend_from_slice(payload);
        f
    }

    /// Reads one frame from the test client's side.
    fn read_frame(client: &mut TcpStream) -> (Kind, Vec<u8>) {
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
    fn tcp_pair() -> (TcpStream, TcpStream) {
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
    fn transport(me: usize, conns: Vec<Option<Conn>>, heap: &mut [u64]) -> SocketTransport {
        let shared = Arc::new(Shared {
            me,
            conns,
            target: Target::new(HeapRegion {
                base: heap.as_mut_ptr() as u64,
                len: heap.len() * 8,
                host: true,
            }),
            timeout: Some(Duration::from_secs(10)),
            next_id: AtomicU64::new(1),
            stopping: AtomicBool::new(false),
            spins: AtomicU64::new(0),
        });
        let worker = Arc::clone(&shared);
        let service = std::thread::spawn(move || worker.serve());
        SocketTransport {
            shared,
            service: Mutex::new(Some(service)),
        }
    }

    /// Polls `reply` (reading the sockets as the proxy thread does) until it is in.
    fn collect(t: &SocketTransport, reply: &mut dyn InFlight, dst: &mut [u8]) -> Result<u64> {
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
