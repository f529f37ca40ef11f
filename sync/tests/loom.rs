//! Loom models of the dissemination barrier's flag protocol ([`symmem_sync::barrier`]), which
//! `barrier_all` runs over the heaps' control words:
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p symmem-sync --release --test loom`
//!
//! Loom runs each model under many interleavings, lets each atomic load return any value the
//! memory model allows, and fails on a data race on an [`UnsafeCell`]. Each member's payload
//! is such a cell, written and read with no atomics, so a model fails unless the barrier
//! alone orders the accesses. Races are judged by happens-before, not by the order loom
//! happened to run the threads in. The members wait with the shared [`Backoff`], through the
//! loom facade, as `barrier_all` does.
//!
//! The models were checked to fail when `signal` stores Relaxed or `arrived` loads Relaxed
//! (a race in every barrier model), when `arrived` tests `==` instead of `>=` (the two- and
//! four-member models hang), and when the turn is taken or given back Relaxed (a race in the
//! turn model).
//!
//! # Bounding the search
//! With two or more members spinning at once, loom's search has no end: it can keep
//! scheduling the spinners, which yield to each other, and never the member they wait for.
//! So while at least two members are inside a wait (after a failed poll), the model follows
//! loom's default schedule instead of exploring alternatives ([`Spinning`]). The spinners
//! only re-read their flags, so the order of their polls adds no behaviour; what is lost is
//! the choice of exactly when a spinner sees a flag that was just set. Apart from that, the
//! two-member model explores every interleaving; the larger ones also bound preemptions, to
//! finish in seconds.
//!
//! Without `--cfg loom` this file is empty.
#![cfg(loom)]

use std::cell::Cell;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use symmem_sync::atomic::AtomicU64;
use symmem_sync::barrier::{self, Epoch};
use symmem_sync::{thread, Backoff, CachePadded};

/// Most members of a model: loom runs at most 5 threads; 4 members need 2 rounds and are
/// the smallest barrier in which a member hears from another only through a third.
const MAX_MEMBERS: usize = 4;
/// Rounds for [`MAX_MEMBERS`]: ceil(log2 4).
const ROUNDS: usize = 2;

/// One member's part of the model: what one PE's control block and heap hold.
struct Member {
    /// Written by this member's partners, one per round (`ControlBlock::barrier`).
    flags: [CachePadded<AtomicU64>; ROUNDS],
    /// This member's epoch (the runtime's `BarrierState`).
    epoch: Epoch,
    /// This member's data: written before a barrier, read by the others after it.
    payload: UnsafeCell<u64>,
}

impl Member {
    fn new() -> Self {
        Member {
            flags: std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))),
            epoch: Epoch::new(),
            payload: UnsafeCell::new(0),
        }
    }
}

std::thread_local! {
    /// Members now inside a wait, after a failed poll. Loom runs a model's threads as
    /// coroutines on the test's own thread, so this counts across the model's threads.
    static SPINNING: Cell<usize> = const { Cell::new(0) };
}

/// A member inside a wait: while two or more are, loom stops exploring alternative
/// schedules (see the module docs).
struct Spinning;

impl Spinning {
    fn enter() -> Self {
        if SPINNING.replace(SPINNING.get() + 1) + 1 == 2 {
            loom::stop_exploring();
        }
        Spinning
    }
}

impl Drop for Spinning {
    fn drop(&mut self) {
        if SPINNING.replace(SPINNING.get() - 1) == 2 {
            loom::explore();
        }
    }
}

/// Member `me`'s barrier, as `barrier_all` runs it: take the turn, then in each round signal
/// the partner and wait for the own flag.
fn barrier_all(members: &[Member], me: usize) {
    let turn = members[me].epoch.try_next().expect("one thread per member");
    let epoch = turn.epoch();
    for round in barrier::rounds(me, members.len()) {
        barrier::signal(&members[round.to].flags[round.index], epoch);
        let own = &members[me].flags[round.index];
        if barrier::arrived(own, epoch) {
            continue;
        }
        let _spinning = Spinning::enter();
        let mut backoff = Backoff::new();
        while !barrier::arrived(own, epoch) {
            backoff.snooze();
        }
    }
}

/// Writes `value` into member `me`'s payload.
fn write(members: &[Member], me: usize, value: u64) {
    // SAFETY: the barriers order every access to a payload; loom fails the model if not.
    members[me].payload.with_mut(|p| unsafe { *p = value });
}

/// Reads member `of`'s payload.
fn read(members: &[Member], of: usize) -> u64 {
    // SAFETY: as in `write`.
    members[of].payload.with(|p| unsafe { *p })
}

/// What each member runs: write, barrier, read everyone's, barrier, write again. The first
/// barrier must order every write before every read; the second, every read before the
/// next writes. In the second, a member's flag may already hold a fast partner's epoch 2
/// while the member still waits for epoch 1 there (two members), which `>=` must accept.
fn member(members: &[Member], me: usize) {
    write(members, me, 10 + me as u64);
    barrier_all(members, me);
    for of in 0..members.len() {
        assert_eq!(read(members, of), 10 + of as u64, "member {me} reads {of}");
    }
    barrier_all(members, me);
    write(members, me, 20 + me as u64);
}

/// Runs [`member`] on `n` threads (the last on the model's main thread), with at most
/// `preemptions` preemptions per execution (`None`: no bound), unless `LOOM_MAX_PREEMPTIONS`
/// says otherwise.
fn model_barrier(n: usize, preemptions: Option<usize>) {
    assert!((2..=MAX_MEMBERS).contains(&n));
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = preemptions;
    }
    builder.check(move || {
        let members: Arc<Vec<Member>> = Arc::new((0..n).map(|_| Member::new()).collect());
        let others: Vec<_> = (0..n - 1)
            .map(|me| {
                let members = Arc::clone(&members);
                thread::spawn(move || member(&members, me))
            })
            .collect();
        member(&members, n - 1);
        for t in others {
            t.join().expect("member thread");
        }
        for of in 0..n {
            assert_eq!(read(&members, of), 20 + of as u64);
        }
    });
}

#[test]
fn two_members_pass_two_barriers() {
    model_barrier(2, None);
}

#[test]
fn three_members_pass_two_barriers() {
    model_barrier(3, Some(4));
}

/// Member 0 hears from member 1 only through member 2, so this checks that the
/// barrier is transitive.
#[test]
fn four_members_pass_two_barriers() {
    model_barrier(4, Some(3));
}

/// Two threads of one member enter its barrier at once (which `barrier_all` forbids, but
/// must survive): the turn serializes them, each gets its own epoch, and the second sees
/// what the first wrote under its turn.
#[test]
fn turns_serialize_one_members_threads() {
    loom::model(|| {
        let member = Arc::new(Member::new());
        let enter = |member: &Member| {
            let mut backoff = Backoff::new();
            let turn = loop {
                match member.epoch.try_next() {
                    Some(turn) => break turn,
                    None => backoff.snooze(),
                }
            };
            // SAFETY: the turn excludes the other thread; loom fails the model if not.
            member.payload.with_mut(|p| unsafe { *p += turn.epoch() });
            turn.epoch()
        };
        let other = {
            let member = Arc::clone(&member);
            thread::spawn(move || enter(&member))
        };
        let mine = enter(&member);
        let theirs = other.join().expect("other thread");
        let mut epochs = [mine, theirs];
        epochs.sort_unstable();
        assert_eq!(epochs, [1, 2]);
        // SAFETY: both threads have been joined.
        assert_eq!(member.payload.with(|p| unsafe { *p }), 3);
        assert_eq!(member.epoch.try_next().map(|t| t.epoch()), Some(3));
    });
}
