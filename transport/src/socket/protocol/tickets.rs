//! Flush tickets: how a `quiet` knows that a flush covers the requests it must complete.
//!
//! Each connection counts the requests sent that a `quiet` must flush (a running count,
//! bumped once a request is written or staged, so in front of any later FLUSH), and the
//! most of them that an answered flush covers. A `quiet` takes the count as its ticket
//! before it sends its own FLUSH, and once that is answered records the ticket as
//! covered. It returns once the covered count reaches its ticket, whichever thread's
//! flush covered it; it never takes another thread's flush still in flight for a finished
//! one (with a shared counter reset instead, a second `quiet` saw nothing to flush and
//! returned before the first one's flush was answered).

use std::sync::atomic::{AtomicU64, Ordering};

/// A connection's flush tickets. Atomic counters, shared by the threads that send on it
/// without a lock.
#[derive(Default)]
pub(in crate::socket) struct FlushTickets {
    /// Requests sent so far that a `quiet` must flush.
    sent: AtomicU64,
    /// How many of those a completed flush covers.
    covered: AtomicU64,
}

impl FlushTickets {
    /// Counts one more request sent that the next `quiet` must flush.
    pub(in crate::socket) fn sent_one(&self) {
        self.sent.fetch_add(1, Ordering::Release);
    }

    /// The ticket a `quiet` sends a FLUSH for: the requests sent so far, or `None` when
    /// an answered flush already covers them all.
    pub(in crate::socket) fn ticket(&self) -> Option<u64> {
        let sent = self.sent.load(Ordering::Acquire);
        (self.covered.load(Ordering::Acquire) < sent).then_some(sent)
    }

    /// Records that the flush sent for `ticket` was answered.
    pub(in crate::socket) fn covered(&self, ticket: u64) {
        self.covered.fetch_max(ticket, Ordering::AcqRel);
    }

    /// How many requests sent so far no completed flush covers.
    #[cfg(test)]
    pub(in crate::socket) fn unflushed(&self) -> u64 {
        let covered = self.covered.load(Ordering::Acquire);
        self.sent.load(Ordering::Acquire).saturating_sub(covered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two quiets, the second taking its ticket while the first one's flush is in flight:
    /// the first one's answer does not cover the second one's request, and answers
    /// arriving out of order never lower what is covered.
    #[test]
    fn a_flush_covers_only_the_requests_sent_before_its_ticket() {
        let t = FlushTickets::default();
        assert_eq!(t.ticket(), None, "nothing sent, nothing to flush");
        t.sent_one();
        let first = t.ticket().unwrap();
        t.sent_one();
        let second = t.ticket().unwrap();
        assert_eq!((first, second), (1, 2));
        t.covered(first);
        assert_eq!(t.ticket(), Some(2), "the second request is not covered yet");
        assert_eq!(t.unflushed(), 1);
        t.covered(second);
        t.covered(first);
        assert_eq!(t.ticket(), None);
        assert_eq!(t.unflushed(), 0);
    }
}
