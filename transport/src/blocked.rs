//! What callers blocked inside a transport wait for ([`Blocked`]), published by the
//! transport's slow waits in a [`BlockedCalls`] so that the runtime's hang report can show
//! them ([`crate::Transport::blocked`]); a quiet that waits for a peer's acknowledgements
//! then reads as "quiet, waiting for PE 3", not as user code.
//!
//! A wait publishes only once it is slow (past its spin phase, when it already sleeps), so
//! a call that ends quickly costs nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// One caller blocked inside a transport.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocked {
    /// The transport call (`quiet`, `get`, `fetch_add`, `put`).
    pub op: &'static str,
    /// The PE whose answer ends the wait, when one PE's does.
    pub peer: Option<usize>,
    /// What it waits for, in words (naming the transport).
    pub detail: String,
    /// When the call began.
    pub since: Instant,
}

/// The callers blocked in one transport now.
#[derive(Debug, Default)]
pub(crate) struct BlockedCalls {
    calls: Mutex<Vec<(u64, Blocked)>>,
    next: AtomicU64,
}

/// Withdraws a call from its [`BlockedCalls`] when dropped (the wait ended).
pub(crate) struct BlockedGuard<'a> {
    calls: &'a BlockedCalls,
    id: u64,
}

impl Drop for BlockedGuard<'_> {
    fn drop(&mut self) {
        self.calls
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(id, _)| *id != self.id);
    }
}

impl BlockedCalls {
    /// Publishes `b` until the guard drops.
    pub fn begin(&self, b: Blocked) -> BlockedGuard<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, b));
        BlockedGuard { calls: self, id }
    }

    /// The call blocked longest, if any.
    pub fn oldest(&self) -> Option<Blocked> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(_, b)| b)
            .min_by_key(|b| b.since)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn blocked(op: &'static str, peer: usize, since: Instant) -> Blocked {
        Blocked {
            op,
            peer: Some(peer),
            detail: format!("an answer from PE {peer}"),
            since,
        }
    }

    #[test]
    fn the_oldest_call_shows_until_its_guard_drops() {
        let calls = BlockedCalls::default();
        assert_eq!(calls.oldest(), None);
        let now = Instant::now();
        let older = now - Duration::from_secs(3);
        let a = calls.begin(blocked("get", 1, now));
        let b = calls.begin(blocked("quiet", 2, older));
        assert_eq!(
            calls.oldest().map(|b| (b.op, b.peer)),
            Some(("quiet", Some(2)))
        );
        drop(b);
        assert_eq!(
            calls.oldest().map(|b| (b.op, b.peer)),
            Some(("get", Some(1)))
        );
        drop(a);
        assert_eq!(calls.oldest(), None);
    }
}
