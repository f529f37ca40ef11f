//! The bounce buffer's slots: which one an operation takes next, and which operation it
//! must wait for first.
//!
//! Operations whose local buffer must be registered (puts copied out of the caller's
//! buffer, gets read through a slot, messages sent rather than injected) take slots in
//! turn. A slot is free again once the operation that last used it completed, whether or
//! not earlier operations did.

/// Slots taken in turn, with the operation that last used each (0: none yet).
#[derive(Debug)]
pub(in crate::ofi) struct Slots {
    last_op: Vec<u64>,
    next: usize,
}

impl Slots {
    /// `n` slots, none used.
    pub(in crate::ofi) fn new(n: usize) -> Self {
        assert!(n > 0, "at least one slot");
        Slots {
            last_op: vec![0; n],
            next: 0,
        }
    }

    /// The next slot, and the operation to wait for before reusing it (0: none).
    pub(in crate::ofi) fn take(&mut self) -> (usize, u64) {
        let i = self.next;
        self.next = (i + 1) % self.last_op.len();
        (i, self.last_op[i])
    }

    /// Operation `op` was posted from slot `i`.
    pub(in crate::ofi) fn used(&mut self, i: usize, op: u64) {
        self.last_op[i] = op;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_go_round_and_each_waits_for_its_own_last_operation() {
        let mut slots = Slots::new(3);
        for op in 1..=3 {
            let (i, wait) = slots.take();
            assert_eq!(
                (i, wait),
                (op as usize - 1, 0),
                "unused slots wait for nothing"
            );
            slots.used(i, op);
        }
        assert_eq!(slots.take(), (0, 1));
        slots.used(0, 7);
        assert_eq!(slots.take(), (1, 2));
        // Slot 2 was taken but its operation never posted: it still waits for op 3.
        assert_eq!(slots.take(), (2, 3));
        assert_eq!(slots.take(), (0, 7));
    }
}
