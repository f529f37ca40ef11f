//! The flag protocol of a dissemination barrier: what `barrier_all` runs over the heaps'
//! control words, and what `tests/loom.rs` model-checks. The caller owns the flags and the
//! wait loop (with its dead-peer and deadline checks); this module owns the schedule, the
//! orderings and the epochs.
//!
//! # Rounds
//! Among `n` members, [`rounds`] gives ceil(log2 n) rounds: in round `r`, member `i`
//! signals member `i + 2^r` and waits for member `i - 2^r` (mod `n`). After the last round,
//! every member has heard from every other, directly or through a chain.
//!
//! # Flags
//! Every member owns one flag (an `AtomicU64`) per round, written only by its partner of
//! that round. A flag holds the epoch of the partner's latest barrier. Epochs only grow, so
//! flags are never reset, and a fast partner that has already signalled the next epoch is
//! harmless: [`arrived`] tests `flag >= epoch`.
//!
//! # Ordering
//! [`signal`] is a Release store and [`arrived`] an Acquire load, so once a member sees its
//! partner's epoch it sees everything the partner wrote before the barrier, and everything
//! the partner had seen through its own earlier rounds' Acquire loads. The chain of rounds
//! makes the barrier transitive, so no SeqCst is needed. The same edges order the next
//! barrier's writes after this barrier's reads: a member writes again only after its next
//! barrier, whose rounds carry every other member's reads of this one.
//!
//! # Turns
//! A member's epoch counter ([`Epoch`]) is advanced by one thread at a time. A thread takes
//! the turn with one compare-exchange and gives it back with one Release store.

use crate::primitive::atomic::{AtomicBool, AtomicU64, Ordering};

/// One round of one member's barrier: signal `to`'s flag number `index`, then wait until
/// this member's own flag number `index` shows the epoch (written by `from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// The round, 0-based: which flag of the member is used.
    pub index: usize,
    /// The member signalled in this round.
    pub to: usize,
    /// The member whose signal this round waits for.
    pub from: usize,
}

/// The rounds of member `me`'s barrier among `n` members, in order: ceil(log2 n) of them,
/// none when `n` is 1.
#[inline]
pub fn rounds(me: usize, n: usize) -> impl Iterator<Item = Round> {
    debug_assert!(me < n, "member {me} of a barrier among {n}");
    (0..usize::BITS)
        .map(|index| (index as usize, 1usize << index))
        .take_while(move |&(_, dist)| dist < n)
        .map(move |(index, dist)| Round {
            index,
            to: (me + dist) % n,
            from: (me + n - dist) % n,
        })
}

/// Tells the partner of a round that this member reached `epoch`: stores it into the
/// partner's flag for the round.
#[inline]
pub fn signal(partner_flag: &AtomicU64, epoch: u64) {
    // Release: everything this member wrote before the barrier (and everything it learned
    // of through earlier rounds' Acquire loads) is visible to the partner once it sees
    // this epoch.
    partner_flag.store(epoch, Ordering::Release);
}

/// Whether this member's flag for a round shows `epoch` (or a later one): the round's
/// partner has reached this barrier.
#[inline]
pub fn arrived(own_flag: &AtomicU64, epoch: u64) -> bool {
    own_flag.load(Ordering::Acquire) >= epoch
}

/// One member's barrier epoch, advanced by one thread at a time.
///
/// A `Mutex<u64>` used to hold the epoch in the runtime; its lock and unlock are two locked
/// instructions per barrier, measured at ~15% of a 2-PE `barrier_all` (about 0.02 µs of
/// 0.15 µs in `symmem-perf`). Here one compare-exchange takes the turn and a plain Release
/// store gives it back. Two threads of one member that enter at once (which `barrier_all`'s
/// API forbids) are still serialized, as they were by the Mutex: the second sees
/// [`try_next`](Self::try_next) fail and waits, with the caller's backoff and checks, until
/// the first has left.
#[derive(Debug)]
pub struct Epoch {
    /// True while a thread of this member holds the [`Turn`].
    busy: AtomicBool,
    /// The epoch of the last barrier; only read and written by the thread holding `busy`.
    last: AtomicU64,
}

impl Default for Epoch {
    fn default() -> Self {
        Epoch::new()
    }
}

impl Epoch {
    /// Epoch 0: no barrier yet; the first one is epoch 1, which flags (all 0) do not show.
    pub fn new() -> Self {
        Epoch {
            busy: AtomicBool::new(false),
            last: AtomicU64::new(0),
        }
    }

    /// Takes the turn and advances to the next epoch, or returns `None` while another
    /// thread holds the turn.
    #[inline]
    pub fn try_next(&self) -> Option<Turn<'_>> {
        // Acquire: pairs with the Release in `Turn::drop`, so the previous holder's epoch
        // is visible below.
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // Relaxed: `busy` orders the epoch between the threads of this member; other
        // members never read it.
        let epoch = self.last.load(Ordering::Relaxed) + 1;
        self.last.store(epoch, Ordering::Relaxed);
        Some(Turn {
            busy: &self.busy,
            epoch,
        })
    }
}

/// A thread's turn at its member's barrier, for one epoch; dropping it (also on an early
/// return) lets the member's next barrier begin.
#[derive(Debug)]
#[must_use = "the turn ends when it is dropped"]
pub struct Turn<'a> {
    busy: &'a AtomicBool,
    epoch: u64,
}

impl Turn<'_> {
    /// The epoch of this barrier, to [`signal`] and to wait for.
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

impl Drop for Turn<'_> {
    #[inline]
    fn drop(&mut self) {
        self.busy.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn rounds_follow_the_dissemination_schedule() {
        assert_eq!(rounds(0, 1).count(), 0);
        let r: Vec<_> = rounds(1, 5).collect();
        assert_eq!(
            r,
            [
                Round {
                    index: 0,
                    to: 2,
                    from: 0
                },
                Round {
                    index: 1,
                    to: 3,
                    from: 4
                },
                Round {
                    index: 2,
                    to: 0,
                    from: 2
                },
            ]
        );
        for n in 1..=64usize {
            let expected = n.next_power_of_two().trailing_zeros() as usize;
            assert_eq!(rounds(n - 1, n).count(), expected, "n = {n}");
        }
    }

    #[test]
    fn turns_are_exclusive_and_epochs_grow() {
        let epoch = Epoch::new();
        let first = epoch.try_next().expect("free");
        assert_eq!(first.epoch(), 1);
        assert!(epoch.try_next().is_none(), "the turn is held");
        drop(first);
        assert_eq!(epoch.try_next().map(|t| t.epoch()), Some(2));
        assert_eq!(epoch.try_next().map(|t| t.epoch()), Some(3));
    }
}
