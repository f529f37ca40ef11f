//! Flow control of answers (the accounting; the send side waits for room, the receive
//! side stops reading): how many bytes of RESPONSE and FLUSHED frames one PE may
//! have outstanding on a connection, and how many a PE queues for a peer before it stops
//! reading that peer's requests.
//!
//! Each 76-byte get request can make its target queue a 1 MiB answer, so a peer that
//! sends gets and never reads the answers could otherwise grow the target's memory
//! without bound. Two rules, with the same [`REPLY_WINDOW`], close that:
//!
//! - A requester keeps at most [`REPLY_WINDOW`] bytes of answers outstanding per
//!   connection: it reserves an answer's bytes before sending its request and waits
//!   (reading the connection, so the peer can progress) while the window is full; the
//!   bytes come back once the whole answer has been read.
//! - A target stops reading a connection (at a frame boundary, and stops polling it for
//!   input) while its queue of unwritten answers for it holds more than
//!   [`REPLY_WINDOW`] bytes, and resumes once the queue drains; meanwhile it keeps
//!   writing that queue and serving its other connections.
//!
//! Queued answers are answers not yet read by the requester, so a requester that keeps
//! the first rule never makes its target stop reading: two PEs that send big gets to
//! each other never both stop reading each other, which would deadlock them (each
//! waiting for the other to read before it reads). Only a peer that breaks the rule
//! stalls, and only its own connection.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use symmem_bootstrap::wire::HEADER_LEN;

use super::frame::MAX_CHUNK;

/// Bytes of answers a PE keeps outstanding on one connection, and bytes of answers it
/// queues for one peer before it stops reading that peer. Four 1 MiB gets' worth: enough
/// to keep a connection busy (a few of the largest gets in flight, thousands of small
/// ones), small enough that a peer that never reads costs at most this plus one answer
/// of memory per connection.
pub(in crate::socket) const REPLY_WINDOW: usize = 4 << 20;

// The largest answer must fit in the window, or its request could never be sent.
const _: () = assert!(REPLY_WINDOW >= HEADER_LEN + 16 + MAX_CHUNK);

/// A connection's answer accounting. Atomic counters, so that the threads sending on a
/// connection and the one reading it share it without a lock.
#[derive(Default)]
pub(in crate::socket) struct Flow {
    /// Bytes of answers this PE waits for on the connection (reserved before sending).
    awaited: AtomicUsize,
    /// Bytes of answers to the peer queued and not yet written to the socket.
    queued: AtomicUsize,
    /// The receive side stopped reading because `queued` was over the window.
    stalled: AtomicBool,
}

impl Flow {
    /// Whether the queue of answers for the peer is over [`REPLY_WINDOW`], so the
    /// connection must not be read.
    pub(in crate::socket) fn over_window(&self) -> bool {
        self.queued.load(Ordering::Acquire) > REPLY_WINDOW
    }

    /// Takes `bytes` of the window if they fit.
    pub(in crate::socket) fn try_reserve(&self, bytes: usize) -> bool {
        self.awaited
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |a| {
                (a + bytes <= REPLY_WINDOW).then_some(a + bytes)
            })
            .is_ok()
    }

    /// Gives back `bytes` of the window: their answer has been read (or will never be).
    pub(in crate::socket) fn release(&self, bytes: usize) {
        self.awaited.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Counts `bytes` of answers queued for the peer.
    pub(in crate::socket) fn queue(&self, bytes: usize) {
        self.queued.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Counts `bytes` of queued answers written to the peer.
    pub(in crate::socket) fn wrote(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Bytes of answers queued for the peer and not yet written.
    pub(in crate::socket) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Whether the receive side stopped reading (the last [`Self::may_read`] said no).
    pub(in crate::socket) fn stalled(&self) -> bool {
        self.stalled.load(Ordering::Acquire)
    }

    /// Whether the receive side may read its next frame, and whether that changed since
    /// the last call (`Some(over)`: it stopped, or with `false` started again).
    pub(in crate::socket) fn may_read(&self) -> (bool, Option<bool>) {
        let over = self.over_window();
        // A load first: the swap, an atomic write per frame, only when the state changes.
        let changed = self.stalled.load(Ordering::Relaxed) != over
            && self.stalled.swap(over, Ordering::AcqRel) != over;
        (!over, changed.then_some(over))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window holds answers up to its size; released bytes make room again.
    #[test]
    fn reservations_fit_in_the_window_until_released() {
        let f = Flow::default();
        assert!(f.try_reserve(REPLY_WINDOW - 10));
        assert!(!f.try_reserve(11), "over the window");
        assert!(f.try_reserve(10));
        f.release(REPLY_WINDOW / 2);
        assert!(f.try_reserve(REPLY_WINDOW / 2));
        assert!(!f.try_reserve(1));
    }

    /// Reading stops once the queue of answers is over the window, each change is
    /// reported once, and reading resumes once the queue is written.
    #[test]
    fn reading_stops_over_the_window_and_resumes_once_written() {
        let f = Flow::default();
        assert_eq!(f.may_read(), (true, None));
        f.queue(REPLY_WINDOW);
        assert_eq!(f.may_read(), (true, None), "at the window, not over it");
        f.queue(1);
        assert_eq!(f.may_read(), (false, Some(true)));
        assert_eq!(f.may_read(), (false, None), "reported once");
        assert!(f.stalled());
        f.wrote(REPLY_WINDOW);
        assert_eq!(f.queued(), 1);
        assert_eq!(f.may_read(), (true, Some(false)));
        assert!(!f.stalled());
    }
}
