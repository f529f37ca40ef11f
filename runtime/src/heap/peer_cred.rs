//! Who is at the other end of a heap-exchange socket: the credentials the kernel records
//! for a Unix socket (SO_PEERCRED), and the rule that decides whether they belong to an
//! expected same-node PE.
//!
//! The abstract socket names carry no permissions and every local user can see them in
//! `/proc/net/unix`, so both ends check. The connecting side checks that the listener it
//! reached was created by the expected peer's process (the kernel records the listener's
//! credentials when it calls `listen`); the serving side checks that a connection comes
//! from one of the expected peers' processes. Both require the peer's effective uid to be
//! this process's: a process of another user gets no heap and gives none.

use std::os::fd::{AsRawFd, BorrowedFd};

use crate::error::{Error, Result};

/// Credentials of the process at the other end of a Unix socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// Its process id (in this PID namespace).
    pub pid: u32,
    /// Its effective user id.
    pub uid: u32,
}

impl PeerCred {
    /// The credentials of the peer of a connected Unix socket `fd`: for a connecting
    /// socket, those of the process that called `listen` on the other end; for an
    /// accepted one, those of the process that connected.
    pub fn of(fd: BorrowedFd<'_>) -> Result<Self> {
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `cred` and `len` are valid out-parameters of the sizes given.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(Error::last_os(
                "reading the peer credentials of a heap socket",
            ));
        }
        Ok(PeerCred {
            pid: cred.pid as u32,
            uid: cred.uid,
        })
    }

    /// This process's effective uid: the uid every peer must have.
    pub fn own_uid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }
}

/// Why `found` is not an acceptable peer, or `None` if it is: it must be one of
/// `expected_pids` and run as `own_uid`. The reason names the pid and uid found and
/// those expected.
pub fn refusal(found: PeerCred, expected_pids: &[u32], own_uid: u32) -> Option<String> {
    if expected_pids.contains(&found.pid) && found.uid == own_uid {
        return None;
    }
    let pids = match expected_pids {
        [one] => format!("pid {one}"),
        many => format!("one of pids {many:?}"),
    };
    Some(format!(
        "process {} (uid {}) is at the other end; expected {pids} with uid {own_uid}",
        found.pid, found.uid
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_expected_pid_of_our_own_uid_is_accepted() {
        let me = PeerCred { pid: 10, uid: 1000 };
        assert_eq!(refusal(me, &[10], 1000), None);
        assert_eq!(refusal(me, &[7, 10, 12], 1000), None);

        let why = refusal(me, &[11], 1000).unwrap();
        assert!(
            why.contains("process 10 (uid 1000)") && why.contains("expected pid 11 with uid 1000"),
            "{why}"
        );
        let why = refusal(me, &[7, 12], 1000).unwrap();
        assert!(why.contains("one of pids [7, 12]"), "{why}");

        // The expected process, but another user: refused, naming both uids.
        let why = refusal(me, &[10], 0).unwrap();
        assert!(
            why.contains("process 10 (uid 1000)") && why.contains("expected pid 10 with uid 0"),
            "{why}"
        );
        let root = PeerCred { pid: 10, uid: 0 };
        assert!(refusal(root, &[10], 1000).is_some());
    }

    #[test]
    fn own_credentials_are_read_back_from_a_socket_pair() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsFd;
        let cred = PeerCred::of(a.as_fd()).unwrap();
        assert_eq!(cred.pid, std::process::id());
        assert_eq!(cred.uid, PeerCred::own_uid());
    }
}
