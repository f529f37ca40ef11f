//! Watching same-node peer processes, so that a wait on a dead peer ends with an error
//! naming it instead of spinning forever.
//!
//! Each same-node peer is watched through a pidfd (Linux ≥ 5.3), which becomes readable
//! when the process exits, zombie or not. Peers on other nodes are watched by the
//! bootstrap (its connection drops when they die).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Watches a set of peer processes.
#[derive(Debug, Default)]
pub struct PeerWatch {
    /// (PE, pid, pidfd)
    peers: Vec<(usize, u32, OwnedFd)>,
}

impl PeerWatch {
    /// Starts watching `(pe, pid)` pairs. A peer whose pidfd cannot be opened (a kernel
    /// without pidfd, or the process is already gone) is reported by [`Self::first_dead`].
    pub fn new(peers: impl IntoIterator<Item = (usize, u32)>) -> Self {
        let mut watched = Vec::new();
        for (pe, pid) in peers {
            // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
            if fd < 0 {
                let err = std::io::Error::last_os_error();
                tracing::debug!(pe, pid, "cannot watch peer through a pidfd: {err}");
                continue;
            }
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            watched.push((pe, pid, unsafe { OwnedFd::from_raw_fd(fd as i32) }));
        }
        PeerWatch { peers: watched }
    }

    /// Watched peers whose processes have exited, as (PE, pid).
    pub fn dead(&self) -> Vec<(usize, u32)> {
        if self.peers.is_empty() {
            return Vec::new();
        }
        let mut fds: Vec<libc::pollfd> = self
            .peers
            .iter()
            .map(|(_, _, fd)| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs; timeout 0 never blocks.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        if n <= 0 {
            return Vec::new();
        }
        fds.iter()
            .zip(&self.peers)
            .filter(|(p, _)| p.revents != 0)
            .map(|(_, (pe, pid, _))| (*pe, *pid))
            .collect()
    }
}
