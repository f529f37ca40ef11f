//! Admitting ranks to the rendezvous: one thread accepts connections into a
//! [`Lobby`] where they prove the job's key, then checks each rank's claim and hands its
//! connection on (the server gives each a reader thread of its own). Only authenticated
//! ranks get a thread.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::auth::lobby::{Admitted, Limits, Lobby};
use crate::auth::{JobKey, Protocol, CLAIM_LEN};
use crate::error::BootstrapError;
use crate::wire::{self, Msg};

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

/// Accepts connections on `listener` until `stop`, authenticates them, and hands each
/// rank's connection, with its claim and a connection number, to `admitted`.
pub(super) fn accept_loop(
    listener: TcpListener,
    job: Admission,
    stop: Arc<AtomicBool>,
    mut admitted: impl FnMut(u64, Claim, TcpStream),
) {
    let limits = Limits {
        waiting: MAX_UNAUTHENTICATED.max(job.size),
        per_address: MAX_WAITING_PER_ADDRESS,
        hello_timeout: HELLO_TIMEOUT.min(job.timeout),
    };
    let mut lobby = Lobby::new("rendezvous", Protocol::Rendezvous, job.key.clone(), limits);
    let mut next_conn = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for rank in lobby.poll(&listener, POLL_SLICE) {
            if let Some((claim, stream)) = check_claim(rank, job.size) {
                admitted(next_conn, claim, stream);
                next_conn += 1;
            }
        }
    }
}

/// Checks an authenticated rank's claim against the job; a rank that does not fit is
/// told why (it proved the key, so it may know) and dropped.
fn check_claim(rank: Admitted, size: usize) -> Option<(Claim, TcpStream)> {
    let Admitted {
        mut stream,
        peer,
        claim,
    } = rank;
    let claim = Claim::decode(&claim);
    if claim.size as usize == size && (claim.rank as usize) < size {
        return Some((claim, stream));
    }
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
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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
