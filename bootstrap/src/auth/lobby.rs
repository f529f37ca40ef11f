//! Where a listener's new connections wait until they prove the job's key: one `poll`
//! loop, a few hundred bytes per connection, no thread.
//!
//! Anyone who can reach a listener can connect, so a waiting connection is let go when any
//! of these hold:
//! - its handshake is not done within the lobby's hello timeout of its arrival (one
//!   deadline for the whole handshake, however its bytes trickle in);
//! - the lobby is full and a new connection arrives: the oldest waiting one makes room;
//! - [`Limits::per_address`] connections from its IP address wait and a new one arrives
//!   from there: that address's oldest makes room, so one host cannot crowd out others.
//!
//! New connections are never turned away. The job's own processes start the handshake as
//! soon as they have connected, so they authenticate within a round trip; one that loses
//! its place anyway sees its connection closed before the answer and connects again
//! ([`super::HandshakeError::ClosedEarly`]). The rendezvous and the socket transport's
//! listener both admit through a lobby.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::{JobKey, Progress, Protocol, ServerHandshake, CLAIM_LEN};

/// How often, at most, letting waiting connections go is reported as a warning.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// How many connections may wait, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections waiting at once.
    pub waiting: usize,
    /// Most connections waiting at once from one IP address.
    pub per_address: usize,
    /// How long a connection may take to finish its handshake.
    pub hello_timeout: Duration,
}

/// A connection that proved the key.
#[derive(Debug)]
pub struct Admitted {
    /// The connection, non-blocking.
    pub stream: TcpStream,
    /// Where it came from.
    pub peer: SocketAddr,
    /// What it claimed in its hello (zero-padded).
    pub claim: [u8; CLAIM_LEN],
}

/// A connection that has not yet authenticated.
struct Waiting {
    stream: TcpStream,
    peer: SocketAddr,
    handshake: ServerHandshake,
}

/// The connections waiting to authenticate on one listener.
pub struct Lobby {
    /// Which service the lobby admits to, for messages ("rendezvous", "socket transport").
    what: &'static str,
    protocol: Protocol,
    key: JobKey,
    limits: Limits,
    waiting: Vec<Waiting>,
    fds: Vec<libc::pollfd>,
    /// Connections let go to make room since the last warning, and when that was.
    let_go: usize,
    warned: Option<Instant>,
}

impl Lobby {
    /// An empty lobby admitting connections that prove `key` for `protocol`; `what`
    /// names the service in logs.
    pub fn new(what: &'static str, protocol: Protocol, key: JobKey, limits: Limits) -> Self {
        Lobby {
            what,
            protocol,
            key,
            limits,
            waiting: Vec::new(),
            fds: Vec::new(),
            let_go: 0,
            warned: None,
        }
    }

    /// Waits up to `wait` for activity on `listener` (non-blocking) and the waiting
    /// connections: accepts new connections, moves handshakes on, lets expired ones go,
    /// and returns those that authenticated.
    pub fn poll(&mut self, listener: &TcpListener, wait: Duration) -> Vec<Admitted> {
        let now = Instant::now();
        self.expire(now);
        let wait = self
            .waiting
            .iter()
            .map(|w| w.handshake.deadline().saturating_duration_since(now))
            .fold(wait, Duration::min);
        self.fds.clear();
        self.fds.push(pollfd(listener.as_raw_fd()));
        self.fds
            .extend(self.waiting.iter().map(|w| pollfd(w.stream.as_raw_fd())));
        // SAFETY: `fds` is a valid array of `fds.len()` pollfds for the call.
        let ready = unsafe {
            libc::poll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                wait.as_millis().max(1) as i32,
            )
        };
        let mut admitted = Vec::new();
        if ready <= 0 {
            return admitted;
        }
        // Waiting connections first (fds[1..], in the same order), then new ones.
        for i in (0..self.waiting.len()).rev() {
            if self.fds[i + 1].revents != 0 {
                admitted.extend(self.progress(i));
            }
        }
        if self.fds[0].revents != 0 {
            self.accept_all(listener);
        }
        admitted
    }

    /// Accepts every connection the listener has queued.
    fn accept_all(&mut self, listener: &TcpListener) {
        loop {
            match listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of fds, or the like: the connection stays queued for later.
                    tracing::warn!("{} accept failed: {e}", self.what);
                    return;
                }
            }
        }
    }

    /// Adds a new connection to the waiting ones, letting the oldest go when full.
    fn admit(&mut self, stream: TcpStream, peer: SocketAddr) {
        if let Err(e) = stream.set_nonblocking(true) {
            tracing::debug!(%peer, "cannot configure a {} connection: {e}", self.what);
            return;
        }
        let from_peer = self
            .waiting
            .iter()
            .filter(|w| w.peer.ip() == peer.ip())
            .count();
        if from_peer >= self.limits.per_address {
            self.let_oldest_go(Some(peer.ip()));
        } else if self.waiting.len() >= self.limits.waiting {
            self.let_oldest_go(None);
        }
        let deadline = Instant::now() + self.limits.hello_timeout;
        self.waiting.push(Waiting {
            stream,
            peer,
            handshake: ServerHandshake::new(self.protocol, deadline),
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
        tracing::debug!(peer = %w.peer, "letting a {} connection go before its handshake to make room", self.what);
        self.let_go += 1;
        let now = Instant::now();
        if self.warned.is_none_or(|t| now >= t + WARN_EVERY) {
            tracing::warn!(
                "{} {} connections did not authenticate and were let go to make room for new ones (at most {} wait at once, {} from one address; the latest from {}): a flood of connections from outside the job?",
                self.let_go,
                self.what,
                self.limits.waiting,
                self.limits.per_address,
                w.peer
            );
            self.let_go = 0;
            self.warned = Some(now);
        }
    }

    /// Lets go every waiting connection whose handshake deadline has passed.
    fn expire(&mut self, now: Instant) {
        let (what, timeout) = (self.what, self.limits.hello_timeout);
        self.waiting.retain(|w| {
            let live = now < w.handshake.deadline();
            if !live {
                tracing::debug!(peer = %w.peer, "{what} connection closed: no handshake within {timeout:?}");
            }
            live
        });
    }

    /// Moves waiting connection `i`'s handshake on; returns it once authenticated.
    fn progress(&mut self, i: usize) -> Option<Admitted> {
        let w = &mut self.waiting[i];
        match w.handshake.progress(&mut w.stream, &self.key) {
            Progress::Waiting => None,
            Progress::Failed(why) => {
                let w = self.waiting.swap_remove(i);
                // A client that closes mid-handshake is a stranger probing, or a process
                // of the job that found this is not its rendezvous (an earlier init's).
                if why.starts_with("closed") {
                    tracing::debug!(peer = %w.peer, "{} connection {why}", self.what);
                } else {
                    tracing::warn!(peer = %w.peer, "refused a {} connection from {}: {why}", self.what, w.peer);
                }
                None
            }
            Progress::Authenticated(claim) => {
                let Waiting { stream, peer, .. } = self.waiting.swap_remove(i);
                Some(Admitted {
                    stream,
                    peer,
                    claim,
                })
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        waiting: 64,
        per_address: 32,
        hello_timeout: Duration::from_secs(10),
    };

    fn lobby() -> Lobby {
        Lobby::new(
            "test",
            Protocol::Rendezvous,
            JobKey::derive(b"s", "lobby test"),
            LIMITS,
        )
    }

    /// A real connection, admitted as if it came from `from`.
    fn admit_from(l: &mut Lobby, listener: &TcpListener, keep: &mut Vec<TcpStream>, from: &str) {
        keep.push(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
        let (stream, _) = listener.accept().unwrap();
        l.admit(stream, from.parse().unwrap());
    }

    fn from(l: &Lobby, ip: &str) -> usize {
        l.waiting
            .iter()
            .filter(|w| w.peer.ip().to_string() == ip)
            .count()
    }

    #[test]
    fn one_address_cannot_crowd_out_another() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut clients = Vec::new();
        let mut l = lobby();
        admit_from(&mut l, &listener, &mut clients, "10.0.0.2:1000");
        let flood = 3 * LIMITS.per_address as u16;
        for port in 0..flood {
            admit_from(&mut l, &listener, &mut clients, &format!("10.0.0.1:{port}"));
        }
        assert_eq!(from(&l, "10.0.0.1"), LIMITS.per_address);
        assert_eq!(
            from(&l, "10.0.0.2"),
            1,
            "the flood from 10.0.0.1 let 10.0.0.2's connection go"
        );
        // The newest of the flood are the ones kept.
        let oldest_kept = l
            .waiting
            .iter()
            .filter(|w| w.peer.port() != 1000)
            .map(|w| w.peer.port())
            .min()
            .unwrap();
        assert_eq!(oldest_kept, flood - LIMITS.per_address as u16);
    }

    #[test]
    fn a_full_lobby_lets_the_oldest_go_and_never_refuses_a_newcomer() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut clients = Vec::new();
        let mut l = lobby();
        let n = 2 * LIMITS.waiting;
        for i in 0..n {
            admit_from(
                &mut l,
                &listener,
                &mut clients,
                &format!("10.0.{}.{}:1", i / 250, i % 250 + 1),
            );
        }
        assert_eq!(l.waiting.len(), LIMITS.waiting);
        assert_eq!(
            from(&l, &format!("10.0.{}.{}", (n - 1) / 250, (n - 1) % 250 + 1)),
            1
        );
        assert_eq!(from(&l, "10.0.0.1"), 0);
    }

    #[test]
    fn an_expired_handshake_is_let_go() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut clients = Vec::new();
        let mut l = lobby();
        admit_from(&mut l, &listener, &mut clients, "10.0.0.1:1");
        l.expire(Instant::now() + LIMITS.hello_timeout);
        assert!(l.waiting.is_empty());
    }
}
