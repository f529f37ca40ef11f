//! Which of the ofi transport's operations have completed. Every operation is numbered
//! (1, 2, …) and posted with its number as its context; completions come back in any
//! order (providers promise no completion order), so "operation 7 completed" says nothing
//! about operation 6. This ring records each completion and keeps the highest number up
//! to which every operation completed, which is what waits need: a get's bytes, a
//! reused bounce slot and a quiet all wait until that number reaches theirs. An operation
//! may need more than one completion (a message: its send's, and its target's
//! acknowledgement); it is complete after the last.

/// Operations in flight at most: posting one more waits for the oldest.
pub(in crate::ofi) const IN_FLIGHT: usize = 1024;

/// The ring of in-flight operations.
pub(in crate::ofi) struct Completions {
    /// Per ring entry: the target PE of the operation numbered there, and how many of
    /// its completions are still to come.
    entries: Box<[(usize, u8)]>,
    /// Operations posted so far (the number of the last one).
    issued: u64,
    /// Every operation up to this number completed.
    done_upto: u64,
}

impl Completions {
    pub(in crate::ofi) fn new() -> Self {
        Completions {
            entries: vec![(0, 0); IN_FLIGHT].into_boxed_slice(),
            issued: 0,
            done_upto: 0,
        }
    }

    /// Operations posted so far.
    pub(in crate::ofi) fn issued(&self) -> u64 {
        self.issued
    }

    /// Every operation up to this number completed.
    pub(in crate::ofi) fn done_upto(&self) -> u64 {
        self.done_upto
    }

    /// The number the next operation gets, and the operation that must complete before
    /// it may be posted (0 when there is room).
    pub(in crate::ofi) fn next(&self) -> (u64, u64) {
        let next = self.issued + 1;
        (next, next.saturating_sub(IN_FLIGHT as u64))
    }

    /// Records that operation `next().0`, to `pe`, was posted, and completes after
    /// `parts` completions (at least 1).
    pub(in crate::ofi) fn posted(&mut self, pe: usize, parts: u8) {
        debug_assert!(self.issued - self.done_upto < IN_FLIGHT as u64, "ring full");
        debug_assert!(parts > 0);
        self.issued += 1;
        self.entries[self.slot(self.issued)] = (pe, parts);
    }

    /// Records one completion of operation `op`; an operation that is not in flight is an
    /// error naming it.
    pub(in crate::ofi) fn complete(&mut self, op: u64) -> Result<(), String> {
        if op <= self.done_upto || op > self.issued {
            return Err(format!(
                "the provider completed operation {op}, which is not in flight (operations {}..={} are)",
                self.done_upto + 1,
                self.issued
            ));
        }
        let i = self.slot(op);
        if self.entries[i].1 == 0 {
            return Err(format!("the provider completed operation {op} twice"));
        }
        self.entries[i].1 -= 1;
        while self.done_upto < self.issued && self.entries[self.slot(self.done_upto + 1)].1 == 0 {
            self.done_upto += 1;
        }
        Ok(())
    }

    /// Whether operation `op` (posted) completed, whether or not every earlier one did.
    pub(in crate::ofi) fn is_complete(&self, op: u64) -> bool {
        op <= self.done_upto || (op <= self.issued && self.entries[self.slot(op)].1 == 0)
    }

    /// Whether operation `op` and every earlier one to `pe` completed (earlier ones to
    /// other peers may still be in flight).
    pub(in crate::ofi) fn peer_done(&self, pe: usize, op: u64) -> bool {
        (self.done_upto + 1..=op.min(self.issued)).all(|o| {
            let (target, left) = self.entries[self.slot(o)];
            target != pe || left == 0
        })
    }

    /// The target PE of in-flight operation `op`.
    pub(in crate::ofi) fn target(&self, op: u64) -> Option<usize> {
        (op > self.done_upto && op <= self.issued).then(|| self.entries[self.slot(op)].0)
    }

    fn slot(&self, op: u64) -> usize {
        (op % IN_FLIGHT as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Out-of-order completions advance `done_upto` only over a gapless prefix.
    #[test]
    fn done_upto_waits_for_the_oldest() {
        let mut c = Completions::new();
        for pe in [3, 1, 2] {
            c.posted(pe, 1);
        }
        c.complete(2).unwrap();
        c.complete(3).unwrap();
        assert_eq!(c.done_upto(), 0, "operation 1 is still in flight");
        assert_eq!(c.target(1), Some(3));
        c.complete(1).unwrap();
        assert_eq!(c.done_upto(), 3);
        assert_eq!(c.target(1), None);
    }

    #[test]
    fn unknown_and_repeated_completions_are_errors() {
        let mut c = Completions::new();
        c.posted(0, 1);
        c.posted(0, 1);
        assert!(c
            .complete(3)
            .unwrap_err()
            .contains("operation 3, which is not in flight"));
        c.complete(2).unwrap();
        assert!(c.complete(2).unwrap_err().contains("twice"));
        c.complete(1).unwrap();
        assert!(c.complete(1).unwrap_err().contains("not in flight"));
    }

    /// An operation of two parts completes after the second, in either order.
    /// A failed put or get waits for its own pieces, not for every earlier operation
    /// (one may wait for an acknowledgement that never comes).
    #[test]
    fn an_operation_is_complete_before_the_ones_ahead_of_it() {
        let mut c = Completions::new();
        c.posted(1, 2);
        c.posted(1, 1);
        assert!(!c.is_complete(2));
        c.complete(2).unwrap();
        assert!(c.is_complete(2) && !c.is_complete(1));
        assert_eq!(c.done_upto(), 0);
        c.complete(1).unwrap();
        c.complete(1).unwrap();
        assert!(c.is_complete(1) && c.is_complete(2));
    }

    #[test]
    fn an_operation_of_two_parts_waits_for_both() {
        let mut c = Completions::new();
        c.posted(1, 2);
        c.posted(1, 1);
        c.complete(2).unwrap();
        c.complete(1).unwrap();
        assert_eq!(c.done_upto(), 0, "operation 1 has one part to come");
        c.complete(1).unwrap();
        assert_eq!(c.done_upto(), 2);
        assert!(c.complete(1).unwrap_err().contains("not in flight"));
    }

    /// A peer's operations complete without waiting for another peer's.
    #[test]
    fn a_peer_is_done_whatever_other_peers_have_in_flight() {
        let mut c = Completions::new();
        for pe in [1, 2, 1, 2] {
            c.posted(pe, 1);
        }
        c.complete(1).unwrap();
        c.complete(3).unwrap();
        assert!(c.peer_done(1, 4), "PE 2's 2 and 4 are still in flight");
        assert!(!c.peer_done(2, 2) && !c.peer_done(2, 4));
        c.complete(4).unwrap();
        assert!(
            c.peer_done(2, 1) && !c.peer_done(2, 4),
            "2 is still in flight"
        );
        c.complete(2).unwrap();
        assert!(c.peer_done(2, 4));
    }

    /// A full ring names the operation to wait for; numbers wrap around the ring.
    #[test]
    fn a_full_ring_waits_for_its_oldest_operation() {
        let mut c = Completions::new();
        assert_eq!(c.next(), (1, 0));
        for op in 1..=IN_FLIGHT as u64 {
            c.posted(op as usize % 4, 1);
        }
        let (next, after) = c.next();
        assert_eq!((next, after), (IN_FLIGHT as u64 + 1, 1));
        c.complete(1).unwrap();
        c.posted(7, 1);
        assert_eq!(c.target(next), Some(7));
        for op in 2..=next {
            c.complete(op).unwrap();
        }
        assert_eq!(c.done_upto(), next);
    }
}
