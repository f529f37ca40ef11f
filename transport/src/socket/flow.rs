//! Flow control of answers: how many bytes of RESPONSE and FLUSHED frames one PE may
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
use super::{Conn, Shared};
use crate::error::Result;

/// Bytes of answers a PE keeps outstanding on one connection, and bytes of answers it
/// queues for one peer before it stops reading that peer. Four 1 MiB gets' worth: enough
/// to keep a connection busy (a few of the largest gets in flight, thousands of small
/// ones), small enough that a peer that never reads costs at most this plus one answer
/// of memory per connection.
pub(super) const REPLY_WINDOW: usize = 4 << 20;

// The largest answer must fit in the window, or its request could never be sent.
const _: () = assert!(REPLY_WINDOW >= HEADER_LEN + 16 + MAX_CHUNK);

/// A connection's answer accounting.
#[derive(Default)]
pub(super) struct Flow {
    /// Bytes of answers this PE waits for on the connection (reserved before sending).
    pub(super) awaited: AtomicUsize,
    /// Bytes of answers to the peer queued and not yet written to the socket.
    pub(super) queued: AtomicUsize,
    /// The receive side stopped reading because `queued` was over the window.
    pub(super) stalled: AtomicBool,
}

impl Flow {
    /// Whether the queue of answers for the peer is over [`REPLY_WINDOW`], so the
    /// connection must not be read.
    pub(super) fn over_window(&self) -> bool {
        self.queued.load(Ordering::Acquire) > REPLY_WINDOW
    }

    /// Takes `bytes` of the window if they fit.
    fn try_reserve(&self, bytes: usize) -> bool {
        self.awaited
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |a| {
                (a + bytes <= REPLY_WINDOW).then_some(a + bytes)
            })
            .is_ok()
    }

    /// Gives back `bytes` of the window: their answer has been read (or will never be).
    pub(super) fn release(&self, bytes: usize) {
        self.awaited.fetch_sub(bytes, Ordering::AcqRel);
    }
}

impl Shared {
    /// Reserves `bytes` of `c`'s window for an answer, waiting (and reading `c`) while
    /// the window is full.
    pub(super) fn reserve(&self, c: &Conn, op: &'static str, bytes: usize) -> Result<()> {
        if c.flow.try_reserve(bytes) {
            return Ok(());
        }
        self.wait_for(c, op, || c.flow.try_reserve(bytes))
    }

    /// Whether the receive side of `c` may read its next frame; records (and logs) when
    /// it stops and starts again.
    pub(super) fn may_read(&self, c: &Conn) -> bool {
        let over = c.flow.over_window();
        // A load first: the swap, an atomic write per frame, only when the state changes.
        if c.flow.stalled.load(Ordering::Relaxed) != over
            && c.flow.stalled.swap(over, Ordering::AcqRel) != over
        {
            if over {
                tracing::warn!(
                    "socket transport: PE {} has not read {} bytes of answers (window \
                     {REPLY_WINDOW}); PE {} stops reading its requests until it does",
                    c.pe,
                    c.flow.queued.load(Ordering::Relaxed),
                    self.me
                );
            } else {
                tracing::debug!(
                    "socket transport: PE {} read its answers; reading it again",
                    c.pe
                );
            }
        }
        !over
    }
}
