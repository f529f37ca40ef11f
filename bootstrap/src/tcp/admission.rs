//! Admitting connections to the rendezvous: one thread polls the listener and every
//! connection that has not yet proved the job's key ([`crate::auth`]).
//!
//! Anyone who can reach the port can connect, so a connection that has not authenticated
//! costs a few hundred bytes of state and no thread, and it is let go when any of these
//! hold:
//! - its handshake is not done within [`HELLO_TIMEOUT`] of its arrival (one deadline for
//!   the whole handshake, however the bytes trickle in);
//! - [`MAX_WAITING`] connections (or the job size, if larger) are waiting and a new one
//!   arrives: the oldest waiting one makes room;
//! - [`MAX_WAITING_PER_ADDRESS`] connections from its IP address are waiting and a new one
//!   arrives from there: that address's oldest makes room, so one host cannot crowd out
//!   the others.
//!
//! New connections are never turned away, and a rank sends its hello as soon as it has
//! connected, so it authenticates within a round trip; a rank that loses its place anyway
//! sees its connection closed before the answer and connects again
//! ([`crate::auth::HandshakeError::ClosedEarly`]). An authenticated connection gets a
//! reader thread of its own (see [`super::server`]).

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::server::{serve_member, Event};
use crate::auth::{JobKey, Progress, Protocol, ServerHandshake, CLAIM_LEN};
use crate::wire::{self, Msg};
use crate::BootstrapError;

/// How long the admission thread sleeps in `poll` at most, so that it notices a stop.
const POLL_SLICE: Duration = Duration::from_millis(20);
/// At least this many connections may wait to authenticate at once; the limit is the job
/// size when that is larger, so that every rank of a job can join at the same moment.
pub const MAX_UNAUTHENTICATED: usize = 64;
/// At most this many waiting connections come from one IP address.
pub const MAX_WAITING_PER_ADDRESS: usize = 32;
/// How long a new connection may take to finish its handshake (a rank starts it right
/// after connecting), or the bootstrap timeout if that is shorter.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How often, at most, letting waiting connections go is reported as a warning.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What a new connection is checked against.
pub(super) struct Admission {
    /// The job's rendezvous key.
    pub key: JobKey,
    /// The job's number of ranks.
    pub size: usize,
    /// The bootstrap timeout.
    pub timeout: Duration,
}

/// What a rank claims in its rendezvous handshake (inside its MACs, so nobody can alter it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// Init number within the client process (re-init joins a fresh group).
    pub session: u64,
    /// The rank it claims.
    pub rank: u32,
    /// The job size it believes in.
    pub size: u32,
    /// Its process id (for messages).
    pub pid: u32,
}

impl Claim {
    /// The claim's bytes in a handshake hello.
    pub fn encode(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[0..8].copy_from_slice(&self.session.to_le_bytes());
        b[8..12].copy_from_slice(&self.rank.to_le_bytes());
        b[12..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..20].copy_from_slice(&self.pid.to_le_bytes());
        b
    }

    /// The claim from a handshake's claim bytes.
    pub fn decode(b: &[u8; CLAIM_LEN]) -> Claim {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Claim {
            session: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
            rank: u32_at(8),
            size: u32_at(12),
            pid: u32_at(16),
        }
    }
}

/// A connection that has not yet authenticated.
struct Waiting {
    stream: TcpStream,
    peer: SocketAddr,
    handshake: ServerHandshake,
}

/// The admission thread's state.
struct Admitter {
    job: Admission,
    limit: usize,
    waiting: Vec<Waiting>,
    next_conn: u64,
    /// Connections let go to make room since the last warning, and when that was.
    let_go: usize,
    warned: Option<Instant>,
}

/// Accepts connections on `listener` until `stop`, authenticates them, and hands each
/// rank's connection to a reader thread that sends [`Event`]s on `tx`.
pub(super) fn accept_loop(
    listener: TcpListener,
    job: Admission,
    tx: Sender<Event>,
    stop: Arc<AtomicBool>,
) {
    let mut a = Admitter {
        limit: MAX_UNAUTHENTICATED.max(job.size),
        job,
        waiting: Vec::new(),
        next_conn: 0,
        let_go: 0,
        warned: None,
    };
    let mut fds: Vec<libc::pollfd> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        a.expire(now);
        let wait = a
            .waiting
            .iter()
            .map(|w| w.handshake.deadline().saturating_duration_since(now))
            .min()
            .map_or(POLL_SLICE, |d| d.min(POLL_SLICE));
        fds.clear();
        fds.push(pollfd(listener.as_raw_fd()));
        fds.extend(a.waiting.iter().map(|w| pollfd(w.stream.as_raw_fd())));
        // SAFETY: `fds` is a valid array of `fds.len()` pollfds for the call.
        let n = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                wait.as_millis().max(1) as i32,
            )
        };
        if n <= 0 {
            continue;
        }
        // Waiting connections first (their indices are fds[1..]), then new ones.
        for i in (0..a.waiting.len()).rev() {
            if fds[i + 1].revents != 0 {
                a.progress(i, &tx);
            }
        }
        if fds[0].revents != 0 {
            a.accept_all(&listener);
        }
    }
}

fn pollfd(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

impl Admitter {
    /// Accepts every connection the listener has queued.
    fn accept_all(&mut self, listener: &TcpListener) {
        loop {
            match listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of fds, or the like: the connection stays queued for later.
                    tracing::warn!("rendezvous accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Adds a new connection to the waiting ones, letting the oldest go when full.
    fn admit(&mut self, stream: TcpStream, peer: SocketAddr) {
        if let Err(e) = stream.set_nonblocking(true) {
            tracing::debug!(%peer, "cannot configure a rendezvous connection: {e}");
            return;
        }
        let _ = stream.set_nodelay(true);
        let from_peer = self
            .waiting
            .iter()
            .filter(|w| w.peer.ip() == peer.ip())
            .count();
        if from_peer >= MAX_WAITING_PER_ADDRESS {
            self.let_oldest_go(Some(peer.ip()));
        } else if self.waiting.len() >= self.limit {
            self.let_oldest_go(None);
        }
        let deadline = Instant::now() + HELLO_TIMEOUT.min(self.job.timeout);
        self.waiting.push(Waiting {
            stream,
            peer,
            handshake: ServerHandshake::new(Protocol::Rendezvous, deadline),
        });
    }

    /// Closes the oldest waiting connection (from `ip`, if given) to make room.
    fn let_oldest_go(&mut self, ip: Option<IpAddr>) {
        let Some(i) = self
            .waiting
            .iter()
            .position(|w| ip.is_none_or(|ip| w.peer.ip() == ip))
        else {
            return;
        };
        let w = self.waiting.remove(i);
        tracing::debug!(peer = %w.peer, "letting a rendezvous connection go before its handshake to make room");
        self.let_go += 1;
        let now = Instant::now();
        if self.warned.is_none_or(|t| now >= t + WARN_EVERY) {
            tracing::warn!(
                "{} rendezvous connections did not authenticate and were let go to make room for new ones (at most {} wait at once, {MAX_WAITING_PER_ADDRESS} from one address; the latest from {}): a flood of connections from outside the job?",
                self.let_go,
                self.limit,
                w.peer
            );
            self.let_go = 0;
            self.warned = Some(now);
        }
    }

    /// Lets go every waiting connection whose handshake deadline has passed.
    fn expire(&mut self, now: Instant) {
        self.waiting.retain(|w| {
            let live = now < w.handshake.deadline();
            if !live {
                tracing::debug!(peer = %w.peer, "rendezvous connection closed: no handshake within {HELLO_TIMEOUT:?}");
            }
            live
        });
    }

    /// Moves waiting connection `i`'s handshake on; an authenticated rank goes to its
    /// reader thread.
    fn progress(&mut self, i: usize, tx: &Sender<Event>) {
        let w = &mut self.waiting[i];
        let claim = match w.handshake.progress(&mut w.stream, &self.job.key) {
            Progress::Waiting => return,
            Progress::Failed(why) => {
                let w = self.waiting.swap_remove(i);
                if why.starts_with("closed without") {
                    tracing::debug!(peer = %w.peer, "rendezvous connection {why}");
                } else {
                    tracing::warn!(peer = %w.peer, "refused a rendezvous connection from {}: {why}", w.peer);
                }
                return;
            }
            Progress::Authenticated(claim) => Claim::decode(&claim),
        };
        let Waiting {
            mut stream, peer, ..
        } = self.waiting.swap_remove(i);
        let size = self.job.size;
        if claim.size as usize != size || claim.rank as usize >= size {
            let detail = format!(
                "pid {} claims rank {} of {}, but this job has {size} ranks",
                claim.pid, claim.rank, claim.size
            );
            tracing::warn!(%peer, "rejecting connection from {peer}: {detail}");
            let err = BootstrapError::Protocol {
                peer: "rendezvous server".into(),
                detail: format!("connection from {peer} rejected: {detail}"),
            };
            // A rank that does not read its error must not stall admission.
            let _ = stream
                .set_nonblocking(false)
                .and_then(|()| stream.set_write_timeout(Some(Duration::from_millis(200))));
            let _ = wire::send(&mut stream, &Msg::Error(err));
            return;
        }
        let conn = self.next_conn;
        self.next_conn += 1;
        let tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("symmem-rdv-conn{conn}"))
            .spawn(move || serve_member(conn, stream, claim, tx));
        if let Err(e) = spawned {
            tracing::error!(%peer, "cannot spawn a rendezvous reader for rank {}: {e}", claim.rank);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitter(size: usize) -> Admitter {
        Admitter {
            limit: MAX_UNAUTHENTICATED.max(size),
            job: Admission {
                key: JobKey::derive(b"s", "admission test"),
                size,
                timeout: Duration::from_secs(20),
            },
            waiting: Vec::new(),
            next_conn: 0,
            let_go: 0,
            warned: None,
        }
    }

    /// A real connection, admitted as if it came from `from`.
    fn admit_from(a: &mut Admitter, listener: &TcpListener, keep: &mut Vec<TcpStream>, from: &str) {
        keep.push(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
        let (stream, _) = listener.accept().unwrap();
        a.admit(stream, from.parse().unwrap());
    }

    #[test]
    fn one_address_cannot_crowd_out_another() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut clients = Vec::new();
        let mut a = admitter(2);
        admit_from(&mut a, &listener, &mut clients, "10.0.0.2:1000");
        for port in 0..3 * MAX_WAITING_PER_ADDRESS as u16 {
            admit_from(&mut a, &listener, &mut clients, &format!("10.0.0.1:{port}"));
        }
        let from = |ip: &str| {
            a.waiting
                .iter()
                .filter(|w| w.peer.ip().to_string() == ip)
                .count()
        };
        assert_eq!(from("10.0.0.1"), MAX_WAITING_PER_ADDRESS);
        assert_eq!(
            from("10.0.0.2"),
            1,
            "the flood from 10.0.0.1 let 10.0.0.2's connection go"
        );
        // The newest of the flood are the ones kept.
        let newest = a
            .waiting
            .iter()
            .filter(|w| w.peer.port() != 1000)
            .map(|w| w.peer.port())
            .max()
            .unwrap();
        assert_eq!(newest, 3 * MAX_WAITING_PER_ADDRESS as u16 - 1);
    }

    #[test]
    fn a_full_house_lets_the_oldest_go_and_never_refuses_a_newcomer() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut clients = Vec::new();
        let mut a = admitter(2);
        for i in 0..2 * MAX_UNAUTHENTICATED {
            admit_from(
                &mut a,
                &listener,
                &mut clients,
                &format!("10.0.{}.{}:1", i / 250, i % 250 + 1),
            );
        }
        assert_eq!(a.waiting.len(), MAX_UNAUTHENTICATED);
        let last = format!(
            "10.0.{}.{}",
            (2 * MAX_UNAUTHENTICATED - 1) / 250,
            (2 * MAX_UNAUTHENTICATED - 1) % 250 + 1
        );
        assert!(a.waiting.iter().any(|w| w.peer.ip().to_string() == last));
        assert!(a
            .waiting
            .iter()
            .all(|w| w.peer.ip().to_string() != "10.0.0.1"));
    }

    #[test]
    fn a_claim_round_trips() {
        let c = Claim {
            session: 1 << 40,
            rank: 7,
            size: 9,
            pid: 1234,
        };
        let mut bytes = [0u8; CLAIM_LEN];
        bytes[..20].copy_from_slice(&c.encode());
        assert_eq!(Claim::decode(&bytes), c);
    }
}
