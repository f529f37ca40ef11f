//! Which earlier operation a new one must not overtake, per peer.
//!
//! The ordering contract asks for order only between operations to the same PE (a put
//! then its signal, a put then a get of the same bytes); `fence` and `quiet` wait for
//! everything. So an operation to PE A never waits for one to PE B: on a provider that
//! keeps only send order (efa), a put to A and a put to B are both in flight, where one
//! tracker for the whole endpoint made every RMA wait for every earlier operation.
//!
//! Per peer, the tracker keeps the last operation that read and the last that wrote, of
//! each kind (RMA, atomic, message). A new operation must not overtake an earlier one to
//! the same peer where the provider does not keep their order ([`Kept`]: a kind's own
//! `FI_ORDER_*` bits, the generic ones across RMA and atomics, send order among
//! messages). Then, where the earlier one has not completed, it either waits for it, or
//! goes at once with `FI_FENCE` where the provider offers that flag (the provider holds
//! a fenced operation until every earlier one to its peer completed).
//!
//! No FFI and no threads: the driver says which operations completed (a closure) and
//! acts on the [`Admission`].

/// What an operation is, for ordering: its kind and what it does at its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// `fi_read`.
    Read,
    /// `fi_write`.
    Write,
    /// A non-fetching atomic.
    AtomicWrite,
    /// A fetching or compare atomic: reads and writes.
    AtomicReadWrite,
    /// A message (the transport's own: data and a signal its target applies).
    Message,
}

/// [`Access::kind`] of RMA.
const RMA: usize = 0;
/// [`Access::kind`] of messages.
const MESSAGE: usize = 2;

impl Access {
    /// Every access, for tables.
    #[cfg(test)]
    pub(crate) const ALL: [Access; 5] = [
        Access::Read,
        Access::Write,
        Access::AtomicWrite,
        Access::AtomicReadWrite,
        Access::Message,
    ];

    /// 0 for RMA, 1 for atomics, 2 for messages.
    fn kind(self) -> usize {
        match self {
            Access::Read | Access::Write => RMA,
            Access::AtomicWrite | Access::AtomicReadWrite => 1,
            Access::Message => MESSAGE,
        }
    }

    /// Whether it reads at its target.
    pub(crate) fn reads(self) -> bool {
        matches!(self, Access::Read | Access::AtomicReadWrite)
    }

    /// Whether it writes at its target.
    pub(crate) fn writes(self) -> bool {
        self != Access::Read
    }
}

/// `FI_ORDER_RMA_RAR`; `RAW`, `WAR`, `WAW` follow it, then the same four for atomics.
const ORDER_RMA_RAR: u64 = 1 << 32;
/// `FI_ORDER_ATOMIC_RAR`.
const ORDER_ATOMIC_RAR: u64 = 1 << 36;
/// Offsets from a kind's `RAR` bit: read after write, write after read, write after write.
const RAW: u32 = 1;
/// See [`RAW`].
const WAR: u32 = 2;
/// See [`RAW`].
const WAW: u32 = 3;
/// `FI_ORDER_RAW`, the generic read-after-write bit (RMA and atomics alike).
const ORDER_RAW: u64 = 1 << 1;
/// `FI_ORDER_WAR`.
const ORDER_WAR: u64 = 1 << 3;
/// `FI_ORDER_WAW`.
const ORDER_WAW: u64 = 1 << 4;

/// Whether `order` keeps an operation behind an earlier one of the same kind: `base` is
/// the kind's `RAR` bit, `offset` picks `RAR`, `RAW`, `WAR` or `WAW` after it, `generic`
/// is the matching `FI_ORDER_*` bit.
fn order_kept(order: u64, base: u64, offset: u32, generic: u64) -> bool {
    order & generic != 0 || order & (base << offset) != 0
}

/// The orders the provider keeps between two operations to the same peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The `FI_ORDER_RMA_*`, `FI_ORDER_ATOMIC_*` and generic bits the transport may rely
    /// on (the generic ones only up to the pieces' sizes: `kept_order` in the driver).
    pub(crate) order: u64,
    /// Whether sends to a peer are received in order (`FI_ORDER_SAS`).
    pub(crate) sends_in_order: bool,
}

impl Kept {
    /// Whether an operation of `later` posted after one of kind `earlier_kind` (its read,
    /// or its write when `earlier_writes`) to the same peer stays behind it.
    fn keeps(self, earlier_kind: usize, earlier_writes: bool, later: Access) -> bool {
        let k = later.kind();
        // Messages keep their order only among themselves, where sends do (the target
        // applies them as its CQ reports them, in order for eager sends).
        if earlier_kind == MESSAGE || k == MESSAGE {
            return earlier_kind == k && self.sends_in_order;
        }
        let kept = |offset: u32, generic: u64| {
            if earlier_kind == k {
                let base = [ORDER_RMA_RAR, ORDER_ATOMIC_RAR][k];
                order_kept(self.order, base, offset, generic)
            } else {
                self.order & generic != 0
            }
        };
        // A read never needs to stay behind a read: neither changes what the other sees.
        let after_read = earlier_writes.then_some((RAW, ORDER_RAW));
        let after_write = if earlier_writes {
            (WAW, ORDER_WAW)
        } else {
            (WAR, ORDER_WAR)
        };
        (!later.reads() || after_read.is_none_or(|(offset, generic)| kept(offset, generic)))
            && (!later.writes() || kept(after_write.0, after_write.1))
    }
}

/// How a new operation may be posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// At once: the provider keeps it behind every earlier operation to its peer, or
    /// those it must follow completed.
    Now,
    /// At once with `FI_FENCE`: the provider holds it until every earlier operation to
    /// its peer completed.
    Fenced,
    /// After operation `op` and every earlier one to the same peer completed. With
    /// `cover`, it follows RMA writes that may have completed at transmit: they are
    /// visible only once a later read (or delivery-complete write) to the peer completed,
    /// so the driver covers them first (a flush) and waits for that too.
    After {
        /// The operation to wait for.
        op: u64,
        /// Whether transmit-complete writes must be covered first.
        cover: bool,
    },
}

/// Per peer: the last operations of each kind, and what a new one must wait for.
pub(crate) struct PeerOrder {
    kept: Kept,
    /// Whether the provider takes `FI_FENCE` (never together with `transmit_writes`).
    fence: bool,
    /// Whether RMA writes may complete at transmit (see [`Admission::After`]).
    transmit_writes: bool,
    /// Per peer, per kind (RMA, atomic, message): the last operation that read and the
    /// last that wrote (0: none).
    last: Vec<[[u64; 2]; 3]>,
}

impl PeerOrder {
    /// Tracking for `peers` peers on a provider that keeps `kept`, offers `FI_FENCE`
    /// (`fence`), and whose RMA writes may complete at transmit (`transmit_writes`; a
    /// fence would not wait for their delivery, so then no operation is fenced).
    pub(crate) fn new(peers: usize, kept: Kept, fence: bool, transmit_writes: bool) -> Self {
        PeerOrder {
            kept,
            fence: fence && !transmit_writes,
            transmit_writes,
            last: vec![[[0; 2]; 3]; peers],
        }
    }

    /// How an operation of `access` to `pe` may be posted, given `done(op)`: whether
    /// operation `op` and every earlier one to `pe` completed.
    pub(crate) fn admit(&self, pe: usize, access: Access, done: impl Fn(u64) -> bool) -> Admission {
        let mut after = 0;
        let mut after_rma_writes = false;
        let mut after_messages = false;
        for (kind, &[last_read, last_write]) in self.last[pe].iter().enumerate() {
            if last_read > 0 && !self.kept.keeps(kind, false, access) {
                after = after.max(last_read);
                after_messages |= kind == MESSAGE;
            }
            if last_write > 0 && !self.kept.keeps(kind, true, access) {
                after = after.max(last_write);
                after_rma_writes |= kind == RMA;
                after_messages |= kind == MESSAGE;
            }
        }
        if after == 0 {
            return Admission::Now;
        }
        if after_rma_writes && self.transmit_writes {
            return Admission::After {
                op: after,
                cover: true,
            };
        }
        if done(after) {
            return Admission::Now;
        }
        // A message completes with its target's acknowledgement, which a fence does not
        // wait for; and messages are sent, not fenced.
        if self.fence && !after_messages && access != Access::Message {
            return Admission::Fenced;
        }
        Admission::After {
            op: after,
            cover: false,
        }
    }

    /// Records operation `op` of `access`, posted to `pe`.
    pub(crate) fn issued(&mut self, pe: usize, access: Access, op: u64) {
        let last = &mut self.last[pe][access.kind()];
        if access.reads() {
            last[0] = op;
        }
        if access.writes() {
            last[1] = op;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// tcp;ofi_rxm's order: RMA and atomics each in order, nothing across them.
    const TCP: Kept = Kept {
        order: (0xf * ORDER_RMA_RAR) | (0xf * ORDER_ATOMIC_RAR),
        sends_in_order: true,
    };
    /// shm's: everything, across kinds too.
    const SHM: Kept = Kept {
        order: (0xf * ORDER_RMA_RAR)
            | (0xf * ORDER_ATOMIC_RAR)
            | 1 // FI_ORDER_RAR
            | ORDER_RAW
            | ORDER_WAR
            | ORDER_WAW,
        sends_in_order: true,
    };

    /// The weakest order a provider of RMA and atomics keeps (efa's: sends after sends,
    /// nothing among RMA and atomics; `SYMMEM_OFI_ASSUME_ORDER=weakest`).
    const WEAKEST: Kept = Kept {
        order: 0,
        sends_in_order: true,
    };

    const NOTHING_DONE: fn(u64) -> bool = |_| false;

    fn after(op: u64) -> Admission {
        Admission::After { op, cover: false }
    }

    #[test]
    fn the_weakest_order_keeps_only_messages_behind_messages() {
        let mut o = PeerOrder::new(2, WEAKEST, false, false);
        o.issued(1, Access::Write, 1);
        assert_eq!(o.admit(1, Access::Write, NOTHING_DONE), after(1), "WAW");
        assert_eq!(o.admit(1, Access::AtomicWrite, NOTHING_DONE), after(1));
        assert_eq!(o.admit(1, Access::Read, NOTHING_DONE), after(1), "RAW");
        assert_eq!(o.admit(1, Access::Message, NOTHING_DONE), after(1));
        o.issued(1, Access::Message, 2);
        o.issued(1, Access::Write, 3);
        let mut reads = PeerOrder::new(1, WEAKEST, false, false);
        reads.issued(0, Access::Read, 1);
        assert_eq!(
            reads.admit(0, Access::Read, NOTHING_DONE),
            Admission::Now,
            "reads never wait for reads"
        );
        assert_eq!(reads.admit(0, Access::Write, NOTHING_DONE), after(1), "WAR");
        let mut messages_only = PeerOrder::new(2, WEAKEST, false, false);
        messages_only.issued(1, Access::Message, 2);
        assert_eq!(
            messages_only.admit(1, Access::Message, NOTHING_DONE),
            Admission::Now,
            "sends stay in order"
        );
        assert_eq!(o.admit(1, Access::Message, NOTHING_DONE), after(3));
    }

    #[test]
    fn kept_orders_post_at_once() {
        let mut tcp = PeerOrder::new(2, TCP, false, false);
        tcp.issued(0, Access::Write, 1);
        assert_eq!(tcp.admit(0, Access::Write, NOTHING_DONE), Admission::Now);
        assert_eq!(tcp.admit(0, Access::Read, NOTHING_DONE), Admission::Now);
        assert_eq!(
            tcp.admit(0, Access::AtomicWrite, NOTHING_DONE),
            after(1),
            "tcp keeps no order across RMA and atomics"
        );
        let mut shm = PeerOrder::new(2, SHM, false, false);
        shm.issued(0, Access::Write, 1);
        shm.issued(0, Access::AtomicReadWrite, 2);
        for access in [Access::Write, Access::AtomicWrite, Access::Read] {
            assert_eq!(shm.admit(0, access, NOTHING_DONE), Admission::Now);
        }
    }

    #[test]
    fn a_completed_dependency_waits_for_nothing() {
        let mut o = PeerOrder::new(1, WEAKEST, false, false);
        o.issued(0, Access::Write, 5);
        assert_eq!(o.admit(0, Access::Write, |op| op <= 5), Admission::Now);
        assert_eq!(o.admit(0, Access::Write, |op| op < 5), after(5));
    }

    #[test]
    fn fence_replaces_the_wait_except_behind_messages() {
        let mut o = PeerOrder::new(1, WEAKEST, true, false);
        o.issued(0, Access::Write, 1);
        assert_eq!(
            o.admit(0, Access::AtomicWrite, NOTHING_DONE),
            Admission::Fenced
        );
        assert_eq!(o.admit(0, Access::Read, NOTHING_DONE), Admission::Fenced);
        assert_eq!(
            o.admit(0, Access::Message, NOTHING_DONE),
            after(1),
            "messages are not fenced"
        );
        o.issued(0, Access::Message, 2);
        assert_eq!(
            o.admit(0, Access::Write, NOTHING_DONE),
            after(2),
            "a fence does not wait for an acknowledgement"
        );
    }

    #[test]
    fn writes_that_may_complete_at_transmit_are_covered_and_never_fenced() {
        let mut o = PeerOrder::new(1, TCP, true, true);
        o.issued(0, Access::Write, 4);
        let covered = Admission::After { op: 4, cover: true };
        assert_eq!(o.admit(0, Access::AtomicWrite, NOTHING_DONE), covered);
        assert_eq!(
            o.admit(0, Access::AtomicWrite, |_| true),
            covered,
            "completed at transmit is not yet visible"
        );
        assert_eq!(o.admit(0, Access::Write, NOTHING_DONE), Admission::Now);
    }

    fn access() -> impl Strategy<Value = Access> {
        prop::sample::select(Access::ALL.to_vec())
    }

    fn kept() -> impl Strategy<Value = Kept> {
        (any::<u64>(), any::<bool>()).prop_map(|(order, sends_in_order)| Kept {
            order,
            sends_in_order,
        })
    }

    proptest! {
        /// Whatever the provider keeps, an operation to one peer never waits for (nor is
        /// fenced behind) operations to another.
        #[test]
        fn a_peer_never_waits_for_another(
            kept in kept(),
            fence in any::<bool>(),
            transmit in any::<bool>(),
            others in prop::collection::vec(access(), 1..20),
            next in access(),
        ) {
            let mut o = PeerOrder::new(3, kept, fence, transmit);
            for (i, &a) in others.iter().enumerate() {
                o.issued(1 + i % 2, a, i as u64 + 1);
            }
            prop_assert_eq!(o.admit(0, next, NOTHING_DONE), Admission::Now);
        }

        /// Same-peer write after write, and atomic after write, keep their order exactly
        /// where the provider does not: the later one waits (or is fenced) behind the
        /// write unless the provider keeps that order; it goes at once where it does.
        #[test]
        fn same_peer_writes_wait_exactly_where_the_order_is_not_kept(
            kept in kept(),
            fence in any::<bool>(),
            later in prop::sample::select(vec![Access::Write, Access::AtomicWrite, Access::AtomicReadWrite]),
        ) {
            let mut o = PeerOrder::new(2, kept, fence, false);
            o.issued(1, Access::Write, 7);
            let (offset, generic) = (WAW, ORDER_WAW);
            let mut provider_keeps = if later == Access::Write {
                order_kept(kept.order, ORDER_RMA_RAR, offset, generic)
            } else {
                kept.order & generic != 0
            };
            if later.reads() {
                // A fetching atomic also reads after the write.
                provider_keeps &= kept.order & ORDER_RAW != 0;
            }
            let got = o.admit(1, later, NOTHING_DONE);
            if provider_keeps {
                prop_assert_eq!(got, Admission::Now);
            } else if fence {
                prop_assert_eq!(got, Admission::Fenced);
            } else {
                prop_assert_eq!(got, after(7));
            }
            // Once the write completed, nothing is left to keep.
            prop_assert_eq!(o.admit(1, later, |op| op <= 7), Admission::Now);
        }
    }
}
