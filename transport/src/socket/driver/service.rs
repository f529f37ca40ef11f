//! The service thread: it sleeps in `poll` on every connection of the PE and serves the
//! ones that are readable (reading and acting on their frames) or writable with queued
//! answers, and writes the staged requests each time round.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::socket::{lock, Conn, Shared};

/// How long an accepted connection may take to finish its handshake.
pub(super) const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the service thread checks whether threads spinning on the sockets have
/// stopped, in milliseconds.
pub(in crate::socket) const SPINNER_CHECK_MS: i32 = 1;
/// How long the service thread keeps reading hot after the last bytes it read.
const HOT_WINDOW: Duration = Duration::from_micros(50);
/// While hot, the service thread yields the core once every this many empty rounds: a
/// yield per round (a second syscall) made each round slower, and so every request's
/// wait to be noticed longer.
const HOT_YIELD_EVERY: u32 = 8;

impl Shared {
    /// The service thread: sleeps in `poll` until a connection is readable (or writable
    /// with queued responses) and serves it.
    ///
    /// After serving a frame it keeps reading the connections without sleeping for
    /// [`HOT_WINDOW`] ([`Self::serve_hot`], yielding the core every [`HOT_YIELD_EVERY`]
    /// empty rounds), so that the next request of a burst or a round trip is read as soon
    /// as it lands rather than after a wake-up from `poll`: a PE that stops being asked
    /// spins at most that long (one core's worth, then sleeps in `poll`).
    ///
    /// While some thread of this PE spins reading the sockets ([`Self::spins`] moved since
    /// the last round), the service thread does not poll them for input and only checks
    /// again every [`SPINNER_CHECK_MS`]: otherwise every arriving frame would wake it,
    /// and on a machine with more threads than cores the wake-up preempts the very thread
    /// that is spinning for that frame (measured: a socket ping-pong 3× slower). Once the
    /// spinners stop or go to sleep, it serves the sockets again within that interval.
    pub(in crate::socket) fn serve(&self) {
        let live: Vec<&Conn> = self.conns.iter().flatten().collect();
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(live.len());
        let mut seen_spins = self.spins.load(Ordering::Relaxed);
        // Until when to keep polling without sleeping, after the last frame served.
        let mut hot_until: Option<Instant> = None;
        // Empty polls in a row while hot.
        let mut idle_rounds: u32 = 0;
        while !self.stopping.load(Ordering::Acquire) {
            let spins = self.spins.load(Ordering::Relaxed);
            let spinners = spins != seen_spins;
            seen_spins = spins;
            let hot = !spinners && hot_until.is_some_and(|t| Instant::now() < t);
            if hot {
                self.writes_staged_soon.store(true, Ordering::SeqCst);
                if self.serve_hot(&live) {
                    idle_rounds = 0;
                    hot_until = Some(Instant::now() + HOT_WINDOW);
                } else {
                    idle_rounds = idle_rounds.wrapping_add(1);
                    if idle_rounds.is_multiple_of(HOT_YIELD_EVERY) {
                        // Give the core away if another thread wants it, else read again.
                        std::thread::yield_now();
                    }
                }
                continue;
            }
            fds.clear();
            for c in &live {
                let mut events = 0;
                if c.failed().is_none() {
                    if !spinners && !c.flow.over_window() {
                        events |= libc::POLLIN;
                    }
                    if !lock(&c.out).frames.is_empty() {
                        events |= libc::POLLOUT;
                    }
                }
                fds.push(libc::pollfd {
                    fd: if events == 0 { -1 } else { c.wire.poll_fd() },
                    events,
                    revents: 0,
                });
            }
            let ms = if spinners { SPINNER_CHECK_MS } else { 100 };
            // Published before the staged requests are written: a request staged after
            // this sees the flag and, if it is down, writes itself (see `stage_or_send`).
            let soon = ms <= SPINNER_CHECK_MS;
            self.writes_staged_soon.store(soon, Ordering::SeqCst);
            for c in &live {
                self.write_staged(c, soon);
            }
            // SAFETY: `fds` holds fds.len() valid pollfds.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            if ready <= 0 {
                continue;
            }
            idle_rounds = 0;
            let mut busy = false;
            let mut served = false;
            for (c, p) in live.iter().zip(&fds) {
                if p.revents == 0 {
                    continue;
                }
                if p.revents & libc::POLLOUT != 0 {
                    self.flush_out(c);
                    if c.flow.stalled() && !c.flow.over_window() {
                        // Frames already read ahead raise no POLLIN: read them now.
                        self.receive(c);
                    }
                }
                if p.revents & !libc::POLLOUT != 0 {
                    if self.receive(c) {
                        served = true;
                    } else {
                        busy = true;
                    }
                }
            }
            if served {
                hot_until = Some(Instant::now() + HOT_WINDOW);
            }
            if busy {
                // Another thread is reading; let it finish instead of polling hot.
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    /// One round of the hot loop: reads every connection that may be read, without
    /// asking `poll` first, writes queued answers and staged requests; whether any
    /// bytes came in.
    ///
    /// A `poll` that finds a request costs a second system call (the read) before the
    /// request is served, and one that finds nothing costs as much as a read that finds
    /// nothing: so, while requests keep coming, the read alone is cheaper and notices
    /// each request sooner, as the bare busy-polling TCP ping-pong does.
    fn serve_hot(&self, live: &[&Conn]) -> bool {
        let mut served = false;
        for c in live {
            if c.failed().is_some() {
                continue;
            }
            self.write_staged(c, true);
            if !lock(&c.out).frames.is_empty() {
                self.flush_out(c);
            }
            if !c.flow.over_window() && self.receive_some(c) == Some(true) {
                served = true;
            }
        }
        served
    }
}
