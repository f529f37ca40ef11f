//! A connection's byte stream, as the receive and send sides read and write it: the one
//! place where they meet the sockets. A running transport's wire is its TCP socket
//! (non-blocking reads, vectored writes, `poll`: `sys.rs`); the protocol's tests and the
//! fuzzer run over `Wire::Memory` (tests and fuzzing builds), bytes in a buffer, with no socket, thread or system
//! call. With `SYMMEM_SOCKET_FAULTS` a socket wire injects [`Faults`]: short writes,
//! short reads and sleeps drawn from a seed, which the protocol must ride out unchanged.

use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::sys::{poll_one, read_raw, write_raw};

/// Where a connection's bytes come from and go to.
pub(in crate::socket) enum Wire {
    /// The connection's TCP socket, non-blocking.
    Socket {
        /// The socket, owned (closed with the connection).
        stream: TcpStream,
        /// Its file descriptor.
        fd: RawFd,
        /// Faults to inject (`SYMMEM_SOCKET_FAULTS`), if any.
        faults: Option<Faults>,
    },
    /// Bytes in memory, for the protocol's tests and the fuzzer.
    #[cfg(any(test, feature = "fuzzing"))]
    Memory(std::sync::Mutex<Memory>),
}

/// An in-memory wire: what the peer sent and this PE has not read yet, and what this PE
/// wrote.
#[cfg(any(test, feature = "fuzzing"))]
#[derive(Default)]
pub(in crate::socket) struct Memory {
    /// Bytes to be read, in order.
    pub incoming: std::collections::VecDeque<u8>,
    /// The peer sent its last byte: once `incoming` is read, reads find the end.
    pub closed: bool,
    /// Bytes written, in order.
    pub outgoing: Vec<u8>,
}

impl Wire {
    /// The wire of a connected socket.
    pub(in crate::socket) fn socket(stream: TcpStream) -> Wire {
        Wire::Socket {
            fd: stream.as_raw_fd(),
            stream,
            faults: None,
        }
    }

    /// The wire of a connected socket that injects the faults drawn from `seed`.
    pub(in crate::socket) fn faulty(stream: TcpStream, seed: u64) -> Wire {
        Wire::Socket {
            fd: stream.as_raw_fd(),
            stream,
            faults: Some(Faults::new(seed)),
        }
    }

    /// Reads up to `len` bytes into `ptr`: how many (0: the peer closed the connection),
    /// or `WouldBlock` when none are there yet.
    ///
    /// # Safety
    /// `ptr` must be valid for writes of `len` bytes for the duration of the call, with
    /// no reference to them alive (other processes may share the memory: the bytes are
    /// written as a `read(2)` would).
    pub(in crate::socket) unsafe fn read(
        &self,
        ptr: *mut u8,
        len: usize,
    ) -> std::io::Result<usize> {
        match self {
            Wire::Socket {
                fd,
                faults: Some(f),
                ..
            } => {
                f.maybe_sleep();
                // SAFETY: the caller's `len` writable bytes at `ptr` cover the cut.
                unsafe { read_raw(*fd, ptr, f.cut(len)) }
            }
            // SAFETY: the caller provides `len` writable bytes at `ptr`.
            Wire::Socket { fd, .. } => unsafe { read_raw(*fd, ptr, len) },
            #[cfg(any(test, feature = "fuzzing"))]
            Wire::Memory(m) => {
                let mut m = m.lock().unwrap_or_else(|p| p.into_inner());
                if m.incoming.is_empty() {
                    return if m.closed {
                        Ok(0)
                    } else {
                        Err(std::io::ErrorKind::WouldBlock.into())
                    };
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
    pub(in crate::socket) fn write(&self, parts: &[&[u8]]) -> std::io::Result<usize> {
        match self {
            Wire::Socket {
                fd,
                faults: Some(f),
                ..
            } => {
                f.maybe_sleep();
                let total: usize = parts.iter().take(4).map(|p| p.len()).sum();
                let mut left = f.cut(total);
                let mut cut: [&[u8]; 4] = [&[]; 4];
                let mut k = 0;
                for p in parts.iter().take(4) {
                    if left == 0 {
                        break;
                    }
                    let take = p.len().min(left);
                    cut[k] = &p[..take];
                    left -= take;
                    k += 1;
                }
                write_raw(*fd, &cut[..k])
            }
            Wire::Socket { fd, .. } => write_raw(*fd, parts),
            #[cfg(any(test, feature = "fuzzing"))]
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
    pub(in crate::socket) fn wait(&self, events: libc::c_short, ms: i32) {
        match self {
            Wire::Socket { fd, .. } => poll_one(*fd, events, ms),
            #[cfg(any(test, feature = "fuzzing"))]
            Wire::Memory(_) => {}
        }
    }

    /// The file descriptor the service thread polls; -1 (which `poll` skips) for an
    /// in-memory wire.
    pub(in crate::socket) fn poll_fd(&self) -> RawFd {
        match self {
            Wire::Socket { fd, .. } => *fd,
            #[cfg(any(test, feature = "fuzzing"))]
            Wire::Memory(_) => -1,
        }
    }

    /// Shuts the connection down both ways, so that the peer sees it end.
    pub(in crate::socket) fn shut_down(&self) {
        match self {
            Wire::Socket { stream, .. } => {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
            #[cfg(any(test, feature = "fuzzing"))]
            Wire::Memory(_) => {}
        }
    }
}

/// Faults a socket wire injects (`SYMMEM_SOCKET_FAULTS`): a quarter of the writes and
/// reads are cut short at a point drawn from the seed (a frame then leaves in pieces, as
/// over a congested network), and one in sixteen sleeps up to 200 µs first (a slow peer,
/// or a thread preempted between two writes). The bytes delivered and their order stay
/// the same; what changes is which thread gets where first, so interleavings that need
/// many cores or a slow network show up on 2 cores, and a seed that finds one is printed
/// by the test and finds it again more often than not.
pub(in crate::socket) struct Faults {
    /// The splitmix64 state, advanced by every draw.
    state: AtomicU64,
}

impl Faults {
    /// Faults drawn from `seed`.
    pub(in crate::socket) fn new(seed: u64) -> Self {
        Faults {
            state: AtomicU64::new(seed),
        }
    }

    /// The next number of the seed's stream (splitmix64).
    fn next(&self) -> u64 {
        const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut z = self
            .state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// How many of `len` bytes one write or read may move: all of them, or, one time in
    /// four, from 1 up to `len`.
    fn cut(&self, len: usize) -> usize {
        let r = self.next();
        if len > 1 && r.is_multiple_of(4) {
            1 + (r >> 8) as usize % len
        } else {
            len
        }
    }

    /// One time in sixteen, sleeps up to 200 µs.
    fn maybe_sleep(&self) {
        let r = self.next();
        if r.is_multiple_of(16) {
            std::thread::sleep(Duration::from_micros((r >> 8) % 200));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Faults;

    /// The same seed draws the same faults; cuts stay within the length and move at
    /// least a byte.
    #[test]
    fn faults_are_drawn_from_the_seed_and_cut_within_the_length() {
        let (a, b) = (Faults::new(7), Faults::new(7));
        let draws: Vec<usize> = (0..256).map(|_| a.cut(1000)).collect();
        assert_eq!(draws, (0..256).map(|_| b.cut(1000)).collect::<Vec<_>>());
        assert!(draws.iter().all(|&n| (1..=1000).contains(&n)));
        assert!(draws.iter().any(|&n| n < 1000), "some writes are cut");
        assert!(
            draws.iter().filter(|&&n| n == 1000).count() > 128,
            "most are not"
        );
        assert_eq!(Faults::new(9).cut(1), 1);
    }
}
