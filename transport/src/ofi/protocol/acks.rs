//! Acknowledgements this PE owes for the messages it applied: which go alone and when,
//! and which ride on a message to the same peer.
//!
//! A message ([`super::messages`]) completes at its sender only with the target's
//! acknowledgement. They are held briefly, so that the thread that waits for a signal sees
//! it before an acknowledgement goes out, and one going the same way rides on the next
//! message (its `acked` field) instead of a send of its own.

use std::collections::VecDeque;

/// Acknowledgements held back at most before they go out alone.
pub(in crate::ofi) const HELD: usize = 8;

/// The acknowledgements due, oldest first: (to PE, its operation).
#[derive(Debug, Default)]
pub(in crate::ofi) struct DueAcks(VecDeque<(usize, u64)>);

impl DueAcks {
    /// How many are due.
    pub(in crate::ofi) fn len(&self) -> usize {
        self.0.len()
    }

    /// Owes `pe` an acknowledgement of its operation `op`.
    pub(in crate::ofi) fn owe(&mut self, pe: usize, op: u64) {
        self.0.push_back((pe, op));
    }

    /// Whether those due go out alone now, given how many were due before a poll: once a
    /// poll brought no new message (the waiting thread has seen what came), or once
    /// [`HELD`] are due.
    pub(in crate::ofi) fn send_now(&self, due_before_poll: usize) -> bool {
        self.0.len() == due_before_poll || self.0.len() >= HELD
    }

    /// The oldest acknowledgement due, to go alone.
    pub(in crate::ofi) fn oldest(&self) -> Option<(usize, u64)> {
        self.0.front().copied()
    }

    /// The oldest one went (or failed and is given up).
    pub(in crate::ofi) fn sent_oldest(&mut self) {
        self.0.pop_front();
    }

    /// Takes the oldest acknowledgement due to `pe`, to ride on a message to it (0 for
    /// none).
    pub(in crate::ofi) fn ride_to(&mut self, pe: usize) -> u64 {
        match self.0.iter().position(|&(to, _)| to == pe) {
            Some(i) => self.0.remove(i).map_or(0, |(_, op)| op),
            None => 0,
        }
    }

    /// The message that was to carry `op`'s acknowledgement to `pe` did not go: it goes
    /// alone, first.
    pub(in crate::ofi) fn not_carried(&mut self, pe: usize, op: u64) {
        if op != 0 {
            self.0.push_front((pe, op));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acknowledgement_rides_on_a_message_to_its_peer_oldest_first() {
        let mut acks = DueAcks::default();
        acks.owe(1, 10);
        acks.owe(2, 20);
        acks.owe(1, 11);
        assert_eq!(acks.ride_to(1), 10);
        assert_eq!(acks.ride_to(3), 0, "none due to PE 3");
        assert_eq!(acks.ride_to(1), 11);
        assert_eq!(acks.oldest(), Some((2, 20)));
        assert_eq!(acks.len(), 1);
    }

    #[test]
    fn one_not_carried_goes_alone_first() {
        let mut acks = DueAcks::default();
        acks.owe(2, 20);
        let op = acks.ride_to(2);
        acks.owe(3, 30);
        acks.not_carried(2, op);
        assert_eq!(acks.oldest(), Some((2, 20)));
        acks.sent_oldest();
        assert_eq!(acks.oldest(), Some((3, 30)));
        acks.not_carried(1, 0);
        assert_eq!(acks.len(), 1, "nothing to give back for 0");
    }

    #[test]
    fn they_go_alone_once_a_poll_brings_nothing_new_or_many_are_held() {
        let mut acks = DueAcks::default();
        assert!(acks.send_now(0));
        acks.owe(1, 1);
        assert!(
            !acks.send_now(0),
            "a message just came: its waiter goes first"
        );
        assert!(acks.send_now(1), "the poll brought nothing new");
        for op in 2..=HELD as u64 {
            acks.owe(1, op);
        }
        assert!(acks.send_now(0), "{HELD} held");
    }
}
