//! A connection's byte stream, as the protocol (receive, send, flow, frames) reads and
//! writes it: the one place where the protocol meets the driver. A running transport's
//! wire is its TCP socket (non-blocking reads, vectored writes, `poll`: `sys.rs`); the
//! protocol's tests run over [`Wire::Memory`], bytes in a buffer, with no socket, thread or
//! system call.

use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

use super::sys::{poll_one, read_raw, write_raw};

/// Where a connection's bytes come from and go to.
pub(super) enum Wire {
    /// The connection's TCP socket, non-blocking.
    Socket {
        /// The socket, owned (closed with the connection).
        stream: TcpStream,
        /// Its file descriptor.
        fd: RawFd,
    },
    /// Bytes in memory, for the protocol's tests.
    #[cfg(test)]
    Memory(std::sync::Mutex<Memory>),
}

/// An in-memory wire: what the peer sent and this PE has not read yet, and what this PE
/// wrote.
#[cfg(test)]
#[derive(Default)]
pub(super) struct Memory {
    /// Bytes to be read, in order.
    pub incoming: std::collections::VecDeque<u8>,
    /// Bytes written, in order.
    pub outgoing: Vec<u8>,
}

impl Wire {
    /// The wire of a connected socket.
    pub(super) fn socket(stream: TcpStream) -> Wire {
        Wire::Socket {
            fd: stream.as_raw_fd(),
            stream,
        }
    }

    /// Reads up to `len` bytes into `ptr`: how many (0: the peer closed the connection),
    /// or `WouldBlock` when none are there yet.
    pub(super) fn read(&self, ptr: *mut u8, len: usize) -> std::io::Result<usize> {
        match self {
            Wire::Socket { fd, .. } => read_raw(*fd, ptr, len),
            #[cfg(test)]
            Wire::Memory(m) => {
                let mut m = m.lock().unwrap_or_else(|p| p.into_inner());
                if m.incoming.is_empty() {
                    return Err(std::io::ErrorKind::WouldBlock.into());
                }
                let k = len.min(m.incoming.len());
                for (i, b) in m.incoming.drain(..k).enumerate() {
                    // SAFETY: the caller provides `len >= k` writable bytes at `ptr`.
                    unsafe { ptr.add(i).write(b) };
                }
                Ok(k)
            }
        }
    }

    /// Writes the start of `parts` (up to four slices, in order): how many bytes went.
    pub(super) fn write(&self, parts: &[&[u8]]) -> std::io::Result<usize> {
        match self {
            Wire::Socket { fd, .. } => write_raw(*fd, parts),
            #[cfg(test)]
            Wire::Memory(m) => {
                let mut m = m.lock().unwrap_or_else(|p| p.into_inner());
                let mut n = 0;
                for p in parts.iter().take(4) {
                    m.outgoing.extend_from_slice(p);
                    n += p.len();
                }
                Ok(n)
            }
        }
    }

    /// Waits up to `ms` milliseconds until `events` (`POLLIN`, `POLLOUT`) can happen; an
    /// in-memory wire is always ready.
    pub(super) fn wait(&self, events: libc::c_short, ms: i32) {
        match self {
            Wire::Socket { fd, .. } => poll_one(*fd, events, ms),
            #[cfg(test)]
            Wire::Memory(_) => {}
        }
    }

    /// The file descriptor the service thread polls; -1 (which `poll` skips) for an
    /// in-memory wire.
    pub(super) fn poll_fd(&self) -> RawFd {
        match self {
            Wire::Socket { fd, .. } => *fd,
            #[cfg(test)]
            Wire::Memory(_) => -1,
        }
    }

    /// Shuts the connection down both ways, so that the peer sees it end.
    pub(super) fn shut_down(&self) {
        match self {
            Wire::Socket { stream, .. } => {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
            #[cfg(test)]
            Wire::Memory(_) => {}
        }
    }
}
