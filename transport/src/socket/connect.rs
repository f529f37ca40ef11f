//! Connecting the socket transport: the job key and every PE's listener address go round
//! through the bootstrap; each PE dials the lower PEs and introduces itself with a hello
//! that proves the key, and accepts the higher ones by the bootstrap deadline.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use symmem_bootstrap::wire::HEADER_LEN;
use symmem_sync::Backoff;

use super::frame::{self, Kind};
use super::sys::poll_one;
use super::{Conn, Shared, SocketTransport, HELLO_TIMEOUT};
use crate::error::{Error, Result};
use crate::interface::Setup;
use crate::target::Target;

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
pub(super) fn init_error(me: usize, pe: usize, detail: String) -> Error {
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
pub(super) fn dial_lower(
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
pub(super) fn accept_higher(
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
pub(super) fn connect_until(peer: SocketAddr, deadline: Instant) -> std::io::Result<TcpStream> {
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
pub(super) fn read_hello(
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
