//! Which of the ofi transport's writes may complete before they are delivered, and which
//! later operation makes them visible at their target.
//!
//! A write at delivery completion costs its target a reply (over `tcp;ofi_rxm` an
//! acknowledgement per write, as many sends at the target as the initiator's writes). A
//! write that completes at transmit needs none. Where the provider keeps a read behind
//! an earlier write and a write behind an earlier write to the same peer
//! (`FI_ORDER_RMA_RAW` and `FI_ORDER_RMA_WAW`) and is known to apply a peer's operations
//! in that order (`applies_in_order` in the transport: the order bits alone promise it
//! for data only at the same address), a later read or delivery-complete write to that
//! peer completes only once the earlier writes are visible there: it *covers* them. So
//! writes that stream to a peer (another write to it is still in flight) complete at
//! transmit, and whoever needs them visible (a quiet, a fence, an operation
//! the provider does not order behind them) waits for the operation that covers them,
//! posting a read of a few bytes (a *flush*) to each peer whose writes nothing covers
//! yet. A write to a peer with nothing in flight keeps delivery completion: a lone put
//! and quiet then pays one round trip, not a write and a flush.

/// Per peer: the writes that completed at transmit and what covers them.
pub(in crate::ofi) struct Deliveries {
    /// Whether writes may complete at transmit (the provider keeps the orders above, and
    /// the endpoint completes at delivery by default).
    enabled: bool,
    /// Per peer: the last write posted to it (its number), 0 for none.
    last_write: Vec<u64>,
    /// Per peer: whether a write posted to it completes at transmit and no later read or
    /// delivery-complete write to it covers it yet.
    uncovered: Vec<bool>,
    /// The peers marked in `uncovered` (and some covered since, dropped when met), so
    /// that finding one costs no scan of every peer.
    pending: Vec<usize>,
    /// The latest operation that covers earlier transmit-complete writes: once every
    /// operation up to it completed, every such write it covers is visible.
    covered_by: u64,
}

impl Deliveries {
    /// Tracking for `peers` peers; `enabled` as the provider allows (see the module docs).
    pub(in crate::ofi) fn new(peers: usize, enabled: bool) -> Self {
        Deliveries {
            enabled,
            last_write: vec![0; peers],
            uncovered: vec![false; peers],
            pending: Vec::new(),
            covered_by: 0,
        }
    }

    /// Whether the next write to `pe` should complete at transmit: it may, and the last
    /// write to `pe` has not completed (`done_upto` is the number up to which every
    /// operation completed), so the writes stream.
    pub(in crate::ofi) fn at_transmit(&self, pe: usize, done_upto: u64) -> bool {
        self.enabled && self.last_write[pe] > done_upto
    }

    /// Records write `op` to `pe`, completing at transmit or at delivery.
    pub(in crate::ofi) fn wrote(&mut self, pe: usize, op: u64, at_transmit: bool) {
        self.last_write[pe] = op;
        if at_transmit {
            if !std::mem::replace(&mut self.uncovered[pe], true) {
                self.pending.push(pe);
            }
        } else {
            self.cover(pe, op);
        }
    }

    /// Records read `op` from `pe` (a get, a flush): it covers the writes before it.
    pub(in crate::ofi) fn read(&mut self, pe: usize, op: u64) {
        self.cover(pe, op);
    }

    fn cover(&mut self, pe: usize, op: u64) {
        if std::mem::take(&mut self.uncovered[pe]) {
            self.covered_by = self.covered_by.max(op);
        }
    }

    /// Whether `pe` has transmit-complete writes that nothing covers yet.
    pub(in crate::ofi) fn uncovered(&self, pe: usize) -> bool {
        self.uncovered[pe]
    }

    /// A peer whose transmit-complete writes nothing covers yet: it needs a flush.
    pub(in crate::ofi) fn next_uncovered(&mut self) -> Option<usize> {
        while let Some(&pe) = self.pending.last() {
            if self.uncovered[pe] {
                return Some(pe);
            }
            self.pending.pop();
        }
        None
    }

    /// The operation to wait for so that every covered write is visible (0 for none).
    pub(in crate::ofi) fn covered_by(&self) -> u64 {
        self.covered_by
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_writes_that_stream_complete_at_transmit() {
        let mut d = Deliveries::new(2, true);
        assert!(
            !d.at_transmit(1, 0),
            "a first write keeps delivery completion"
        );
        d.wrote(1, 1, false);
        assert!(d.at_transmit(1, 0), "a write behind one in flight streams");
        assert!(
            !d.at_transmit(1, 1),
            "once it completed, the next is alone again"
        );
        assert!(!d.at_transmit(0, 0), "another peer has nothing in flight");
        let off = Deliveries::new(2, false);
        assert!(
            !off.at_transmit(1, 0),
            "never where the provider does not allow it"
        );
    }

    #[test]
    fn a_later_read_or_delivered_write_covers_transmitted_writes() {
        let mut d = Deliveries::new(3, true);
        d.wrote(1, 1, false);
        d.wrote(1, 2, true);
        d.wrote(2, 3, true);
        assert_eq!(d.next_uncovered(), Some(2));
        assert!(d.uncovered(1) && d.uncovered(2) && !d.uncovered(0));
        assert_eq!(d.covered_by(), 0);
        d.read(1, 4);
        assert_eq!(d.next_uncovered(), Some(2));
        assert_eq!(d.covered_by(), 4);
        d.wrote(2, 5, false);
        assert_eq!(d.next_uncovered(), None);
        assert_eq!(d.covered_by(), 5);
        // A read that covers nothing leaves the mark where it is.
        d.read(0, 6);
        assert_eq!(d.covered_by(), 5);
    }
}
