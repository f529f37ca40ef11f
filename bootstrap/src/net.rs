//! Noticing dead hosts and cut links on TCP connections.
//!
//! A peer whose process dies is noticed at once: its kernel closes or resets the
//! connection. A peer whose host loses power, or whose link is cut or partitioned away,
//! sends nothing at all, and by default Linux leaves a read waiting forever and retries
//! a write for about a quarter of an hour. [`detect_dead_peer`] arms a connection so
//! that the kernel fails it instead, within one *dead-peer time*
//! (`SYMMEM_DEAD_PEER_TIMEOUT`, [`DEFAULT_DEAD_PEER_TIMEOUT`] unless set). Every TCP
//! connection symmem makes gets it: the rendezvous (both ends), the PMI-1 connection and
//! the socket transport.
//!
//! # How the time is spent
//! - `TCP_USER_TIMEOUT` is the dead-peer time: data sent and not acknowledged for that
//!   long fails the connection (`ETIMEDOUT`).
//! - Keepalive covers a connection with nothing to send, which is most of them most of
//!   the time. After half the dead-peer time without a byte received (`TCP_KEEPIDLE`) the
//!   kernel probes the peer every `TCP_KEEPINTVL` (a tenth of the other half, at least one
//!   second); with `TCP_USER_TIMEOUT` set it drops the connection at the first probe that
//!   finds nothing received for the whole dead-peer time. `TCP_KEEPCNT` is set so that the
//!   probes alone would end it then too.
//!
//! A silent peer is therefore declared dead after the dead-peer time plus at most one
//! probe interval. A live peer answers the probes from its kernel, so a PE that computes
//! for an hour without a word is never mistaken for a dead one.

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::error::BootstrapError;
use crate::vars::{process_env, Lookup};

/// The variable that sets the dead-peer time, in seconds.
pub const DEAD_PEER_TIMEOUT_VAR: &str = "SYMMEM_DEAD_PEER_TIMEOUT";

/// The dead-peer time when [`DEAD_PEER_TIMEOUT_VAR`] is not set.
pub const DEFAULT_DEAD_PEER_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest keepalive idle time and interval Linux accepts, in seconds.
const MAX_KEEPALIVE_SECS: u64 = 32767;
/// The most keepalive probes Linux accepts.
const MAX_KEEPALIVE_PROBES: u64 = 127;

/// Parses a value of [`DEAD_PEER_TIMEOUT_VAR`]: seconds, at least 1; `0`, or one year or
/// more (`inf`), turns detection off (`None`). The error says what was expected; the
/// caller names the variable and the value.
pub fn parse_dead_peer_timeout(text: &str) -> Result<Option<Duration>, String> {
    let d = crate::duration::parse_seconds(text)?;
    if d.is_zero() || crate::duration::is_unlimited(d) {
        return Ok(None);
    }
    if d < Duration::from_secs(1) {
        return Err("must be at least 1 second (or 0 to turn dead-peer detection off)".into());
    }
    Ok(Some(d))
}

/// The dead-peer time that `get` sets ([`DEAD_PEER_TIMEOUT_VAR`], else
/// [`DEFAULT_DEAD_PEER_TIMEOUT`]); `None` = detection off.
pub fn dead_peer_timeout(get: Lookup) -> Result<Option<Duration>, BootstrapError> {
    match get(DEAD_PEER_TIMEOUT_VAR) {
        None => Ok(Some(DEFAULT_DEAD_PEER_TIMEOUT)),
        Some(v) => parse_dead_peer_timeout(&v)
            .map_err(|why| BootstrapError::Config(format!("{DEAD_PEER_TIMEOUT_VAR}={v:?}: {why}"))),
    }
}

/// The socket options [`detect_dead_peer`] sets for one dead-peer time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepalivePlan {
    /// `TCP_KEEPIDLE`: seconds without a byte received before the first probe.
    pub idle_s: u32,
    /// `TCP_KEEPINTVL`: seconds between probes.
    pub interval_s: u32,
    /// `TCP_KEEPCNT`: unanswered probes that end the connection.
    pub probes: u32,
    /// `TCP_USER_TIMEOUT`: milliseconds.
    pub user_timeout_ms: u32,
}

impl KeepalivePlan {
    /// The options for `dead_after` (see [the module](self)).
    pub fn new(dead_after: Duration) -> Self {
        let total = dead_after.as_secs_f64().ceil().max(1.0) as u64;
        let idle = (total / 2).clamp(1, MAX_KEEPALIVE_SECS);
        let rest = total.saturating_sub(idle);
        let interval = (rest / 10).clamp(1, MAX_KEEPALIVE_SECS);
        let probes = rest.div_ceil(interval).clamp(1, MAX_KEEPALIVE_PROBES);
        KeepalivePlan {
            idle_s: idle as u32,
            interval_s: interval as u32,
            probes: probes as u32,
            user_timeout_ms: dead_after.as_millis().min(u32::MAX as u128) as u32,
        }
    }
}

/// Arms `stream` so that the kernel fails it within about `dead_after` once its peer
/// falls silent (see [the module](self)); `None` leaves it as it is.
pub fn detect_dead_peer(stream: &TcpStream, dead_after: Option<Duration>) -> io::Result<()> {
    let Some(dead_after) = dead_after else {
        return Ok(());
    };
    let plan = KeepalivePlan::new(dead_after);
    let fd = stream.as_raw_fd();
    for (level, name, value) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, plan.idle_s),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, plan.interval_s),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, plan.probes),
        (
            libc::IPPROTO_TCP,
            libc::TCP_USER_TIMEOUT,
            plan.user_timeout_ms,
        ),
    ] {
        // Every value fits an int: the plan clamps them to the kernel's limits.
        let value = value as libc::c_int;
        // SAFETY: `fd` is the open socket `stream` owns, and `value` is a live c_int whose
        // size is passed along; setsockopt only reads it.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            let err = io::Error::last_os_error();
            return Err(io::Error::new(
                err.kind(),
                format!("setting {} to {value}: {err}", option_name(name)),
            ));
        }
    }
    Ok(())
}

/// The name of a socket option [`detect_dead_peer`] sets, for its errors.
fn option_name(name: libc::c_int) -> &'static str {
    match name {
        libc::SO_KEEPALIVE => "SO_KEEPALIVE",
        libc::TCP_KEEPIDLE => "TCP_KEEPIDLE",
        libc::TCP_KEEPINTVL => "TCP_KEEPINTVL",
        libc::TCP_KEEPCNT => "TCP_KEEPCNT",
        _ => "TCP_USER_TIMEOUT",
    }
}

/// Arms a bootstrap connection with the dead-peer time of this process's environment;
/// `what` names the connection in the error. Returns that time (`None` = off).
pub(crate) fn watch(stream: &TcpStream, what: &str) -> Result<Option<Duration>, BootstrapError> {
    let dead_after = dead_peer_timeout(&process_env)?;
    detect_dead_peer(stream, dead_after)
        .map_err(|e| BootstrapError::io(format!("arming dead-peer detection on {what}"), &e))?;
    Ok(dead_after)
}

/// Arms the rendezvous server's connection to `rank` like [`watch`], and bounds every
/// write to it by the dead-peer time or `timeout` (the bootstrap timeout), whichever is
/// shorter, so that a rank that stops reading cannot stall the server for the others.
/// Failures are logged: the connection still works, only less watched.
pub(crate) fn watch_member(stream: &TcpStream, rank: usize, timeout: Duration) {
    let dead_after = match watch(stream, &format!("the rendezvous connection of rank {rank}")) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(rank, "{e}");
            None
        }
    };
    let bound = dead_after
        .map_or(timeout, |d| d.min(timeout))
        .max(Duration::from_millis(1));
    if let Err(e) = stream.set_write_timeout(Some(bound)) {
        tracing::warn!(rank, "bounding rendezvous writes to rank {rank}: {e}");
    }
}

/// Why [`send_within`] stopped.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The peer accepted no byte for this long (the stream's write timeout).
    Stalled(Duration),
    /// The connection failed.
    Io(io::Error),
}

/// Writes all of `bytes` to `stream`, failing with [`SendError::Stalled`] once the peer
/// has accepted nothing for the stream's write timeout (as [`watch_member`] sets it; no
/// limit without one): the socket did not become writable for that long. Unlike a
/// blocking write under that timeout, which may wait it out once per call, this bounds
/// the time without progress, whatever the frame's size. The stream stays blocking for
/// its other users (a reader thread shares it).
pub(crate) fn send_within(stream: &TcpStream, bytes: &[u8]) -> Result<(), SendError> {
    use std::io::Write as _;
    let Some(bound) = stream.write_timeout().map_err(SendError::Io)? else {
        let mut stream = stream;
        return stream.write_all(bytes).map_err(SendError::Io);
    };
    let fd = stream.as_raw_fd();
    let mut sent = 0;
    let mut progress = Instant::now();
    while sent < bytes.len() {
        let rest = &bytes[sent..];
        // SAFETY: `fd` is the open socket `stream` owns and `rest` a live slice, which
        // send only reads. MSG_DONTWAIT keeps the socket itself blocking.
        let n = unsafe {
            libc::send(
                fd,
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n > 0 {
            sent += n as usize;
            progress = Instant::now();
            continue;
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => {
                let left = bound.saturating_sub(progress.elapsed());
                if left.is_zero() {
                    return Err(SendError::Stalled(bound));
                }
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
                // SAFETY: one valid pollfd.
                if unsafe { libc::poll(&mut p, 1, ms) } == 0 && ms as u128 == left.as_millis() {
                    // Not writable for the whole bound. (A few bytes may have been
                    // acknowledged meanwhile, too few to wake a writer: a peer that does
                    // not read still lets its kernel take a trickle now and then.)
                    return Err(SendError::Stalled(bound));
                }
            }
            _ => return Err(SendError::Io(err)),
        }
    }
    Ok(())
}

/// `err` as text, saying what it means when it is how the kernel reports a peer that
/// fell silent (see [the module](self)) or cannot be reached.
pub fn describe(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ETIMEDOUT) => format!(
            "{err}: nothing heard from its host within the dead-peer time ({DEAD_PEER_TIMEOUT_VAR}): it is down, or the network to it is cut"
        ),
        Some(libc::EHOSTUNREACH | libc::ENETUNREACH) => {
            format!("{err}: its host cannot be reached (a cut link or a network partition)")
        }
        _ => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Reads an int socket option of `stream`.
    fn get(stream: &TcpStream, level: libc::c_int, name: libc::c_int) -> libc::c_int {
        let mut value: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `value` and `len` are live and sized as passed; getsockopt writes at most
        // `len` bytes into `value`.
        let rc = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                level,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "getsockopt: {}", io::Error::last_os_error());
        value
    }

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn both_ends_of_a_connected_pair_carry_the_options() {
        let (a, b) = pair();
        let d = Some(Duration::from_secs(30));
        for s in [&a, &b] {
            detect_dead_peer(s, d).unwrap();
            assert_eq!(get(s, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
            assert_eq!(get(s, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 15);
            assert_eq!(get(s, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), 1);
            assert_eq!(get(s, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 15);
            assert_eq!(get(s, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT), 30_000);
        }
        // Off leaves the kernel's defaults (no keepalive, no user timeout).
        let (c, _d) = pair();
        detect_dead_peer(&c, None).unwrap();
        assert_eq!(get(&c, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 0);
        assert_eq!(get(&c, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT), 0);
    }

    #[test]
    fn the_probes_end_within_one_interval_of_the_dead_peer_time() {
        for secs in [1, 2, 3, 5, 30, 31, 600, 86_400, 40 * 86_400] {
            let p = KeepalivePlan::new(Duration::from_secs(secs));
            let until_last = p.idle_s as u64 + p.interval_s as u64 * p.probes as u64;
            assert!(
                until_last >= secs && until_last < secs.max(2) + p.interval_s as u64,
                "{secs} s: {p:?} ends its probes after {until_last} s"
            );
            assert!(p.idle_s >= 1 && p.interval_s >= 1 && p.probes >= 1, "{p:?}");
            assert!(p.probes as u64 <= MAX_KEEPALIVE_PROBES, "{p:?}");
        }
        assert_eq!(
            KeepalivePlan::new(Duration::from_secs(3)),
            KeepalivePlan {
                idle_s: 1,
                interval_s: 1,
                probes: 2,
                user_timeout_ms: 3000
            }
        );
        assert_eq!(
            KeepalivePlan::new(Duration::from_millis(2500)).user_timeout_ms,
            2500
        );
    }

    #[test]
    fn the_variable_parses_by_the_duration_rule() {
        let get = |v: &'static str| {
            move |name: &str| (name == DEAD_PEER_TIMEOUT_VAR).then(|| v.to_string())
        };
        assert_eq!(
            dead_peer_timeout(&|_: &str| None).unwrap(),
            Some(DEFAULT_DEAD_PEER_TIMEOUT)
        );
        assert_eq!(
            dead_peer_timeout(&get("3")).unwrap(),
            Some(Duration::from_secs(3))
        );
        assert_eq!(dead_peer_timeout(&get("0")).unwrap(), None);
        assert_eq!(dead_peer_timeout(&get("inf")).unwrap(), None);
        for bad in ["0.5", "-1", "soon", "nan"] {
            let err = dead_peer_timeout(&get(bad)).unwrap_err().to_string();
            assert!(
                err.contains(DEAD_PEER_TIMEOUT_VAR) && err.contains(bad),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_timed_out_connection_is_explained() {
        let timed_out = io::Error::from_raw_os_error(libc::ETIMEDOUT);
        let text = describe(&timed_out);
        assert!(
            text.contains(DEAD_PEER_TIMEOUT_VAR) && text.contains("down"),
            "{text}"
        );
        let unreachable = describe(&io::Error::from_raw_os_error(libc::EHOSTUNREACH));
        assert!(unreachable.contains("cannot be reached"), "{unreachable}");
        let reset = io::Error::from_raw_os_error(libc::ECONNRESET);
        assert_eq!(describe(&reset), reset.to_string());
    }
}
