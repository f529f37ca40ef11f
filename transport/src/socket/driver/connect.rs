//! Connecting the socket transport: every PE's listener address goes round through the
//! bootstrap; each PE dials the lower PEs and accepts the higher ones by the bootstrap
//! deadline. Every connection proves the transport's key both ways ([`auth`]) before it
//! carries a frame: the key is derived from the bootstrap's job key, so it never crosses
//! a socket (under MPI, whose bootstrap holds no key, rank 0 draws one and MPI carries it).
//!
//! The listener holds connections that have not yet authenticated in a [`Lobby`], a few
//! hundred bytes each, each under its own deadline; when [`MAX_WAITING`] wait, the oldest
//! makes room. A dialer whose connection was let go before the answer dials again.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use symmem_bootstrap::auth::lobby::{Limits, Lobby};
use symmem_bootstrap::auth::{self, HandshakeError, JobKey, Protocol};
use symmem_bootstrap::detect_dead_peer;
use symmem_sync::Backoff;

use super::service::HELLO_TIMEOUT;
use crate::error::{Error, Result};
use crate::interface::Setup;
use crate::socket::driver::wire::Wire;
use crate::socket::{Conn, Shared, SocketTransport};
use crate::target::Target;

impl SocketTransport {
    /// Connects to every PE `setup.remote` names: dials the lower-numbered ones and
    /// accepts the higher-numbered ones, each proving the job's key in its hello.
    /// Collective: every PE calls it.
    pub(crate) fn connect(setup: &Setup<'_>) -> Result<Self> {
        let me = setup.me;
        let n = setup.remote.len();
        let b = setup.bootstrap;
        let key = transport_key(b)?;
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
        dial_lower(setup, &key, &addrs, &mut streams)?;
        accept_higher(setup, &key, &listener, &mut streams)?;
        let mut conns = Vec::with_capacity(n);
        for (pe, s) in streams.into_iter().enumerate() {
            conns.push(match s {
                None => None,
                Some(s) => {
                    s.set_nodelay(true)
                        .and_then(|()| s.set_nonblocking(true))
                        .and_then(|()| s.set_read_timeout(None))
                        .and_then(|()| detect_dead_peer(&s, setup.config.dead_peer_timeout))
                        .map_err(|e| init_error(me, pe, format!("configuring its socket: {e}")))?;
                    let wire = match setup.config.socket_faults {
                        // Each PE and connection draws its own stream from the seed.
                        Some(seed) => Wire::faulty(s, seed ^ ((me as u64) << 32 | pe as u64)),
                        None => Wire::socket(s),
                    };
                    Some(Conn::over(pe, wire))
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
            blocked: Default::default(),
            writes_staged_soon: AtomicBool::new(false),
        });
        let worker = Arc::clone(&shared);
        let service = std::thread::Builder::new()
            .name(format!("symmem-socket-{me}"))
            .spawn(move || {
                symmem_bootstrap::affinity::place_helper_thread(
                    "the socket transport's service thread",
                );
                worker.serve()
            })
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

/// The socket transport's key: derived from the bootstrap's job key, or, under a
/// bootstrap that holds none (MPI, one PE), drawn by rank 0 and carried by the bootstrap.
fn transport_key(b: &dyn symmem_bootstrap::Bootstrap) -> Result<JobKey> {
    if let Some(job) = b.job_key() {
        return Ok(job.subkey("socket transport"));
    }
    let drawn = b.broadcast(0, &JobKey::random_secret()?)?;
    Ok(JobKey::derive(&drawn, "socket transport, drawn"))
}

/// What a dialer claims in its handshake: its PE and the job's number of PEs.
fn claim(pe: usize, n: usize) -> [u8; 8] {
    let mut c = [0u8; 8];
    c[..4].copy_from_slice(&(pe as u32).to_le_bytes());
    c[4..].copy_from_slice(&(n as u32).to_le_bytes());
    c
}

/// Dials every remote PE below this one at its address in `addrs` and proves `key` in a
/// handshake that names this PE; the streams go into `streams`. A connection the peer
/// let go before answering (it was busy with strangers) is dialled again.
pub(super) fn dial_lower(
    setup: &Setup<'_>,
    key: &JobKey,
    addrs: &[Vec<u8>],
    streams: &mut [Option<TcpStream>],
) -> Result<()> {
    let (me, n) = (setup.me, setup.remote.len());
    for pe in (0..me).filter(|&p| setup.remote[p]) {
        let text = String::from_utf8_lossy(&addrs[pe]).into_owned();
        let peer: SocketAddr = text
            .parse()
            .map_err(|_| init_error(me, pe, format!("its address {text:?} does not parse")))?;
        let mut backoff = Backoff::new();
        let s = loop {
            let mut s = connect_until(peer, setup.deadline)
                .map_err(|e| init_error(me, pe, format!("connecting to {peer}: {e}")))?;
            match auth::client_handshake(
                &mut s,
                key,
                Protocol::SocketTransport,
                &claim(me, n),
                setup.deadline,
            ) {
                Ok(()) => break s,
                Err(HandshakeError::ClosedEarly) if Instant::now() < setup.deadline => {
                    backoff.snooze()
                }
                Err(e) => {
                    return Err(init_error(
                        me,
                        pe,
                        format!("authenticating with {peer}: {e}"),
                    ))
                }
            }
        };
        streams[pe] = Some(s);
    }
    Ok(())
}

/// At least this many accepted connections may wait to authenticate at once (or the
/// number of PEs expected, if larger); beyond, the oldest is let go.
const MAX_WAITING: usize = 64;
/// At most this many waiting connections come from one IP address.
const MAX_WAITING_PER_ADDRESS: usize = 32;

/// Accepts a connection from every remote PE above this one, by the deadline. Handshakes
/// go on side by side in a [`Lobby`], each bounded by [`HELLO_TIMEOUT`]; a connection
/// that does not prove `key`, or names a PE not expected, is logged and closed. The
/// streams go into `streams`.
pub(super) fn accept_higher(
    setup: &Setup<'_>,
    key: &JobKey,
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
    let limits = Limits {
        waiting: MAX_WAITING.max(expected.len()),
        per_address: MAX_WAITING_PER_ADDRESS.max(expected.len()),
        hello_timeout: HELLO_TIMEOUT,
    };
    let mut lobby = Lobby::new(
        "socket transport",
        Protocol::SocketTransport,
        key.clone(),
        limits,
    );
    while !expected.is_empty() {
        let left = setup.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
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
        for peer in lobby.poll(listener, left.min(Duration::from_millis(50))) {
            let pe = u32::from_le_bytes(peer.claim[..4].try_into().expect("4 bytes")) as usize;
            let their_n =
                u32::from_le_bytes(peer.claim[4..8].try_into().expect("4 bytes")) as usize;
            if their_n != n || !expected.contains(&pe) {
                tracing::warn!(
                    target: "init::transport",
                    "socket transport: connection from {} claims PE {pe} of {their_n}, but PE {me} of {n} expects PEs {expected:?}; closed",
                    peer.peer
                );
                continue;
            }
            expected.retain(|&p| p != pe);
            streams[pe] = Some(peer.stream);
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

#[cfg(test)]
mod tests;
