//! Mutual authentication of every TCP connection between the processes of a job.
//!
//! Every process of a job holds a [`JobKey`]: 32 bytes derived with HKDF-SHA256 from the
//! job's secret material (the random bytes symrun or a unique id draws, or
//! `SYMMEM_JOB_SECRET` with the job's identity under launcher variables). The key never
//! crosses a socket. A connection proves it in both directions with a challenge-response:
//!
//! ```text
//! client → server  hello:  magic, version, protocol, client nonce (32), claim (24)
//! server → client  answer: server nonce (32), HMAC(key, "server" ‖ hello ‖ server nonce)
//! client → server  proof:  HMAC(key, "client" ‖ hello ‖ server nonce)
//! ```
//!
//! The server proves first, so a process that only listens on a job's port (and has no
//! key) learns nothing it could use: it gets no client proof. Both nonces are fresh, so a
//! proof recorded on one connection is useless on any other, in this job or another job
//! with the same secret. The claim (a rank, a PE, a group size) is inside both MACs, so
//! nobody can alter it on the way. MACs are compared in constant time.
//!
//! The server side ([`ServerHandshake`]) is a state machine over a non-blocking socket,
//! so one thread can hold many unauthenticated connections at a few hundred bytes each
//! ([`lobby`]); the client side ([`client_handshake`]) blocks until a deadline.

pub mod lobby;

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::BootstrapError;

type HmacSha256 = Hmac<Sha256>;

/// Magic of a handshake hello ("SYMA").
const MAGIC: u32 = 0x5359_4d41;
/// Version of the handshake.
const VERSION: u16 = 1;
/// Bytes of the protocol-specific claim a hello carries (zero-padded).
pub const CLAIM_LEN: usize = 24;
/// Bytes of a nonce.
const NONCE_LEN: usize = 32;
/// Bytes of a MAC (HMAC-SHA256).
const MAC_LEN: usize = 32;
/// Bytes of the client's hello.
pub const HELLO_LEN: usize = 4 + 2 + 2 + NONCE_LEN + CLAIM_LEN;
/// Bytes of the server's answer.
const ANSWER_LEN: usize = NONCE_LEN + MAC_LEN;

/// Which protocol a handshake opens; part of the hello, so a proof for one protocol is
/// refused by the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The bootstrap's rendezvous (symrun, unique id, launcher variables).
    Rendezvous = 1,
    /// The socket transport between PEs.
    SocketTransport = 2,
    /// A PE asking another for its wait record (the runtime's hang report).
    HangReport = 3,
}

impl Protocol {
    fn from_u16(v: u16) -> Option<Self> {
        match v {
            1 => Some(Protocol::Rendezvous),
            2 => Some(Protocol::SocketTransport),
            3 => Some(Protocol::HangReport),
            _ => None,
        }
    }
}

/// Where a job's key comes from when no secret went into it: the launcher and the public
/// job identity it was derived from (the `env` bootstrap without `SYMMEM_JOB_SECRET`).
/// Anyone who can reach rank 0's port and guess that identity can derive the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicJobKey {
    /// The launcher whose variables the identity comes from, e.g. `torchrun`.
    pub launcher: String,
    /// The variables the key is derived from, as `NAME=value, NAME=value`.
    pub derived_from: String,
}

/// A job's 32-byte key. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct JobKey([u8; 32]);

impl JobKey {
    /// Derives a key from secret material `secret` (random bytes, or a user's secret),
    /// bound to `context` (what the secret is for, and which job), with HKDF-SHA256.
    pub fn derive(secret: &[u8], context: &str) -> JobKey {
        let hk = hkdf::Hkdf::<Sha256>::new(Some(b"symmem job key v1"), secret);
        let mut key = [0u8; 32];
        // 32 bytes are far below HKDF-SHA256's limit of 255 * 32, so expand cannot fail.
        hk.expand(context.as_bytes(), &mut key)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        JobKey(key)
    }

    /// A key for a narrower purpose (`label`: "socket transport", a generation), derived
    /// from this one; knowing it tells nothing about this key.
    pub fn subkey(&self, label: &str) -> JobKey {
        JobKey::derive(&self.0, label)
    }

    /// An HMAC-SHA256 keyed with this key, for the MACs of a protocol that authenticates
    /// its own messages (the ofi transport's); the key's bytes stay inside.
    pub fn hmac_sha256(&self) -> Hmac<Sha256> {
        HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length")
    }

    /// 32 random bytes from the OS: the secret material of a new job.
    pub fn random_secret() -> Result<[u8; 32], BootstrapError> {
        let mut buf = [0u8; 32];
        fill_random(&mut buf)?;
        Ok(buf)
    }

    fn mac(&self, role: &[u8], hello: &[u8; HELLO_LEN], server_nonce: &[u8]) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        m.update(b"symmem-auth-v1 ");
        m.update(role);
        m.update(hello);
        m.update(server_nonce);
        m
    }
}

impl fmt::Debug for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JobKey(<redacted>)")
    }
}

/// Fills `buf` from the OS's random source.
pub(crate) fn fill_random(buf: &mut [u8]) -> Result<(), BootstrapError> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: `rest` is valid for writes of `rest.len()` bytes for the call.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(BootstrapError::io("drawing random bytes", &e));
        }
        filled += n as usize;
    }
    Ok(())
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses exactly `N` bytes of hex; `None` for anything else.
pub fn from_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let text = text.as_bytes();
    if text.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; N];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// Why a handshake failed.
#[derive(Debug)]
pub enum HandshakeError {
    /// The server closed the connection before answering: it was busy with other
    /// connections and let this one go. Connecting again may succeed.
    ClosedEarly,
    /// The other side does not hold the job's key (another job, a stranger, or a
    /// different secret), or sent something that is not a symmem handshake.
    Refused(String),
    /// Reading or writing failed, or the deadline passed.
    Io(io::Error),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::ClosedEarly => {
                f.write_str("the server closed the connection before answering the hello")
            }
            HandshakeError::Refused(why) => f.write_str(why),
            HandshakeError::Io(e) => write!(f, "{e}"),
        }
    }
}

fn encode_hello(protocol: Protocol, nonce: &[u8; NONCE_LEN], claim: &[u8]) -> [u8; HELLO_LEN] {
    assert!(
        claim.len() <= CLAIM_LEN,
        "a handshake claim is at most {CLAIM_LEN} bytes"
    );
    let mut h = [0u8; HELLO_LEN];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[6..8].copy_from_slice(&(protocol as u16).to_le_bytes());
    h[8..8 + NONCE_LEN].copy_from_slice(nonce);
    h[8 + NONCE_LEN..8 + NONCE_LEN + claim.len()].copy_from_slice(claim);
    h
}

/// Checks a received hello's fixed fields: the magic, the version and that it opens
/// `protocol`. Returns why not.
fn check_hello(h: &[u8; HELLO_LEN], protocol: Protocol) -> Result<(), String> {
    let magic = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes"));
    if magic != MAGIC {
        return Err(format!(
            "bad handshake magic {magic:#010x} (not a symmem peer?)"
        ));
    }
    let version = u16::from_le_bytes(h[4..6].try_into().expect("2 bytes"));
    if version != VERSION {
        return Err(format!(
            "handshake version {version}, this build speaks {VERSION}"
        ));
    }
    let p = u16::from_le_bytes(h[6..8].try_into().expect("2 bytes"));
    match Protocol::from_u16(p) {
        Some(found) if found == protocol => Ok(()),
        Some(found) => Err(format!(
            "a {found:?} handshake where {protocol:?} was expected"
        )),
        None => Err(format!("unknown handshake protocol {p}")),
    }
}

/// Reads exactly `buf.len()` bytes by `deadline`.
fn read_exact_by(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<usize> {
    let mut have = 0;
    while have < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "deadline passed during the handshake",
            ));
        }
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        match s.read(&mut buf[have..]) {
            Ok(0) => return Ok(have),
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "deadline passed during the handshake",
                ))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(have)
}

/// The client side: sends the hello carrying `claim`, checks that the server proves
/// `key`, and proves it back. Blocks until `deadline` at most; leaves the stream blocking
/// with no read timeout.
pub fn client_handshake(
    s: &mut TcpStream,
    key: &JobKey,
    protocol: Protocol,
    claim: &[u8],
    deadline: Instant,
) -> Result<(), HandshakeError> {
    let mut nonce = [0u8; NONCE_LEN];
    fill_random(&mut nonce).map_err(|e| HandshakeError::Io(io::Error::other(e.to_string())))?;
    let hello = encode_hello(protocol, &nonce, claim);
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    s.set_nonblocking(false).map_err(HandshakeError::Io)?;
    s.set_write_timeout(Some(left))
        .map_err(HandshakeError::Io)?;
    // A server that lets this connection go before answering resets it (it had unread
    // bytes): connecting again may succeed, as after a close.
    let early = |e: io::Error| match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => HandshakeError::ClosedEarly,
        _ => HandshakeError::Io(e),
    };
    s.write_all(&hello).map_err(early)?;
    let mut answer = [0u8; ANSWER_LEN];
    match read_exact_by(s, &mut answer, deadline).map_err(early)? {
        0 => return Err(HandshakeError::ClosedEarly),
        n if n < ANSWER_LEN => {
            return Err(HandshakeError::Refused(format!(
                "the server closed after {n} of the {ANSWER_LEN} bytes of its answer"
            )))
        }
        _ => {}
    }
    let (server_nonce, server_mac) = answer.split_at(NONCE_LEN);
    key.mac(b"server", &hello, server_nonce)
        .verify_slice(server_mac)
        .map_err(|_| {
            HandshakeError::Refused(
                "it did not prove the job's key: another job's or a stranger's process listens there, or the job's secret differs between its processes".into(),
            )
        })?;
    let proof = key
        .mac(b"client", &hello, server_nonce)
        .finalize()
        .into_bytes();
    s.write_all(&proof).map_err(HandshakeError::Io)?;
    s.set_read_timeout(None).map_err(HandshakeError::Io)?;
    s.set_write_timeout(None).map_err(HandshakeError::Io)?;
    Ok(())
}

/// Where a [`ServerHandshake`] stands after [`ServerHandshake::progress`].
#[derive(Debug)]
pub enum Progress {
    /// Waiting for more bytes from the client.
    Waiting,
    /// The client proved the key; its claim (zero-padded to [`CLAIM_LEN`]).
    Authenticated([u8; CLAIM_LEN]),
    /// The connection is to be closed: the client closed, or failed the handshake.
    Failed(String),
}

/// The server side of one connection's handshake, driven by readiness on a non-blocking
/// socket: a few hundred bytes of state and no thread.
pub struct ServerHandshake {
    protocol: Protocol,
    /// The hello, then the client's proof, as they arrive.
    buf: [u8; HELLO_LEN + MAC_LEN],
    have: usize,
    /// The server nonce, once the hello is answered.
    server_nonce: Option<[u8; NONCE_LEN]>,
    /// When the whole handshake must be done.
    deadline: Instant,
}

impl ServerHandshake {
    /// A handshake for a newly accepted connection that must finish by `deadline`.
    pub fn new(protocol: Protocol, deadline: Instant) -> Self {
        ServerHandshake {
            protocol,
            buf: [0; HELLO_LEN + MAC_LEN],
            have: 0,
            server_nonce: None,
            deadline,
        }
    }

    /// When the handshake must be done.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Reads what has arrived on `s` (a non-blocking socket, or any stream that reports
    /// [`io::ErrorKind::WouldBlock`] when it has nothing) and moves the handshake on:
    /// answers a complete hello (proving `key`), checks a complete proof.
    pub fn progress(&mut self, s: &mut (impl Read + Write), key: &JobKey) -> Progress {
        loop {
            let want = if self.server_nonce.is_none() {
                HELLO_LEN
            } else {
                HELLO_LEN + MAC_LEN
            };
            if self.have < want {
                match s.read(&mut self.buf[self.have..want]) {
                    Ok(0) if self.have == 0 => {
                        return Progress::Failed("closed without a hello".into())
                    }
                    Ok(0) => {
                        return Progress::Failed(format!(
                            "closed after {} bytes of the handshake",
                            self.have
                        ))
                    }
                    Ok(n) => self.have += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Waiting,
                    Err(e) => return Progress::Failed(format!("reading the handshake: {e}")),
                }
                continue;
            }
            let hello: [u8; HELLO_LEN] = self.buf[..HELLO_LEN].try_into().expect("HELLO_LEN bytes");
            match self.server_nonce {
                None => {
                    if let Err(why) = check_hello(&hello, self.protocol) {
                        return Progress::Failed(why);
                    }
                    let mut nonce = [0u8; NONCE_LEN];
                    if let Err(e) = fill_random(&mut nonce) {
                        return Progress::Failed(e.to_string());
                    }
                    let mac = key.mac(b"server", &hello, &nonce).finalize().into_bytes();
                    let mut answer = [0u8; ANSWER_LEN];
                    answer[..NONCE_LEN].copy_from_slice(&nonce);
                    answer[NONCE_LEN..].copy_from_slice(&mac);
                    // A fresh connection's send buffer is empty, so 64 bytes go at once; a
                    // peer whose buffer is already full has not followed the protocol.
                    match s.write(&answer) {
                        Ok(n) if n == ANSWER_LEN => {}
                        Ok(_) | Err(_) => {
                            return Progress::Failed(
                                "could not send the answer to its hello".into(),
                            )
                        }
                    }
                    self.server_nonce = Some(nonce);
                }
                Some(nonce) => {
                    let proof = &self.buf[HELLO_LEN..HELLO_LEN + MAC_LEN];
                    return match key.mac(b"client", &hello, &nonce).verify_slice(proof) {
                        Ok(()) => {
                            let mut claim = [0u8; CLAIM_LEN];
                            claim.copy_from_slice(&hello[8 + NONCE_LEN..]);
                            Progress::Authenticated(claim)
                        }
                        Err(_) => Progress::Failed(
                            "its proof does not match the job's key (another job, or a stranger)"
                                .into(),
                        ),
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
