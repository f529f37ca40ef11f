//! The identity a host team barrier carries, so that a barrier meets only the same
//! collective call on every member (issue 52's mismatched collectives).
//!
//! Every signal of a host dissemination round is a `put_signal`: before the flag's add,
//! one *identity word* lands in the partner's slot, in the word of that round and of the
//! barrier epoch's parity. The word holds the low 32 bits of the epoch (so that a word
//! left by an earlier barrier, or never written because a device barrier ran at that
//! epoch, is not taken for this one), the sender's operation, and a *witness*: an
//! operation of another kind that the sender has heard of, and the world PE that called
//! it. A receiver that finds the sender's operation, or its witness, of another kind
//! than its own keeps it as its own witness and passes it on. Dissemination passes what
//! each PE heard to every PE in `ceil(log2 n)` rounds, so after the last round every
//! member holds a witness if any member called another kind, and none otherwise: all
//! members fail alike, each having passed exactly one barrier, and the team stays usable.
//!
//! Kinds are coarser than operations: `barrier_all`, `sync_all` and a team's `sync` and
//! `barrier` are one synchronization (OpenSHMEM: `sync_all` is `team_sync` on
//! TEAM_WORLD; the barriers only add a quiet on their own PE), the team exchanges (splits
//! and destroy) are one kind whose own check names the differing arguments, and under
//! `SYMMEM_CHECK_COLLECTIVES` the host collectives are one kind, whose fingerprints name
//! which collective each member called, with its arguments.
//!
//! Two parities: a partner writes round `r`'s word for epoch `e + 1` while this PE may
//! still read the word of epoch `e`, but it cannot reach epoch `e + 2` before this PE has
//! entered `e + 1`, after reading every word of `e`.

/// The public operations whose barriers carry an identity, by code (index + 1); code 0
/// is an operation not in the list, which matches every other.
const OPS: [&str; 23] = [
    "barrier_all",
    "sync_all",
    "team_sync",
    "team_barrier",
    "team_sync_on_stream",
    "team_barrier_on_stream",
    "team_split_strided",
    "team_split_2d",
    "team_destroy",
    "team_broadcast",
    "team_fcollect",
    "team_collect",
    "team_alltoall",
    "team_alltoallv",
    "team_reduce",
    "team_reducescatter",
    "team_broadcast_on_stream",
    "team_fcollect_on_stream",
    "team_collect_on_stream",
    "team_alltoall_on_stream",
    "team_alltoallv_on_stream",
    "team_reduce_on_stream",
    "team_reducescatter_on_stream",
];

/// The code of operation `op` (0 for one not listed).
pub(crate) fn code(op: &str) -> u8 {
    OPS.iter().position(|&o| o == op).map_or(0, |i| i as u8 + 1)
}

/// The name of operation `code` (non-zero).
pub(crate) fn name(code: u8) -> &'static str {
    OPS.get(usize::from(code).wrapping_sub(1))
        .copied()
        .unwrap_or("an unknown operation")
}

/// What a barrier of `code` may meet: the codes of one kind share it (see the module
/// docs); 0 for code 0. `checked`: `SYMMEM_CHECK_COLLECTIVES` is on.
fn kind(op_code: u8, checked: bool) -> u8 {
    const SYNC: u8 = 1;
    const EXCHANGE: u8 = 2;
    const CHECKED_COLLECTIVE: u8 = 3;
    match name(op_code).trim_end_matches("_on_stream") {
        _ if op_code == 0 => 0,
        "barrier_all" | "sync_all" | "team_sync" | "team_barrier" => SYNC,
        "team_split_strided" | "team_split_2d" | "team_destroy" => EXCHANGE,
        op if checked && op.starts_with("team_") => CHECKED_COLLECTIVE,
        op => 16 + code(op),
    }
}

/// The witness kept for PEs of this PE's world number or above 65534.
const FAR_PE: u16 = u16::MAX;

/// An operation of another kind than this PE's, heard of in a barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Witness {
    /// Its code.
    pub(crate) op: u8,
    /// The world PE that called it (`None`: a PE numbered above 65534).
    pub(crate) pe: Option<usize>,
}

/// What this PE knows in one barrier: its own operation and, once heard of, a witness.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Identity {
    epoch: u32,
    op: u8,
    checked: bool,
    witness: Option<Witness>,
}

impl Identity {
    /// This PE's identity in the barrier of `epoch` for operation `op`.
    pub(crate) fn new(op: &str, epoch: u64, checked: bool) -> Self {
        Identity {
            epoch: epoch as u32,
            op: code(op),
            checked,
            witness: None,
        }
    }

    /// The word this PE puts to a partner: epoch, operation, witness.
    pub(crate) fn word(&self) -> u64 {
        let (op, pe) = self.witness.map_or((0, 0), |w| {
            (
                w.op,
                w.pe.and_then(|p| u16::try_from(p).ok())
                    .filter(|&p| p != FAR_PE)
                    .unwrap_or(FAR_PE),
            )
        });
        u64::from(self.epoch) | u64::from(self.op) << 32 | u64::from(op) << 40 | u64::from(pe) << 48
    }

    /// Takes in `word`, found in this PE's identity word after world PE `from` signalled
    /// this barrier's round. A word of another epoch is ignored.
    pub(crate) fn hear(&mut self, word: u64, from: usize) {
        if self.witness.is_some() || word as u32 != self.epoch {
            return;
        }
        let (op, w_op, w_pe) = ((word >> 32) as u8, (word >> 40) as u8, (word >> 48) as u16);
        let mine = kind(self.op, self.checked);
        if mine == 0 || op == 0 {
            return;
        }
        if kind(op, self.checked) != mine {
            self.witness = Some(Witness { op, pe: Some(from) });
        } else if w_op != 0 && kind(w_op, self.checked) != mine {
            self.witness = Some(Witness {
                op: w_op,
                pe: (w_pe != FAR_PE).then_some(usize::from(w_pe)),
            });
        }
    }

    /// The operation of another kind heard of, if any.
    pub(crate) fn witness(&self) -> Option<Witness> {
        self.witness
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_of_another_kind_is_witnessed_and_passed_on() {
        let mut a = Identity::new("barrier_all", 4, false);
        let b = Identity::new("team_broadcast", 4, false);
        a.hear(b.word(), 1);
        let w = a.witness().expect("another kind");
        assert_eq!((name(w.op), w.pe), ("team_broadcast", Some(1)));
        // A third PE that called team_broadcast hears of barrier_all from PE 0's word.
        let mut c = Identity::new("team_broadcast", 4, false);
        c.hear(Identity::new("team_broadcast", 4, false).word(), 3);
        assert_eq!(c.witness(), None);
        let mut d = Identity::new("team_broadcast", 4, false);
        let mut relay = Identity::new("team_broadcast", 4, false);
        relay.hear(Identity::new("barrier_all", 4, false).word(), 0);
        d.hear(relay.word(), 2);
        let w = d.witness().expect("relayed");
        assert_eq!((name(w.op), w.pe), ("barrier_all", Some(0)));
    }

    #[test]
    fn one_kind_and_stale_words_pass() {
        let mut a = Identity::new("barrier_all", 7, false);
        a.hear(Identity::new("team_sync", 7, false).word(), 1);
        a.hear(Identity::new("team_reduce", 5, false).word(), 1);
        a.hear(0, 1);
        assert_eq!(a.witness(), None);
        // Under the collectives check their fingerprints name the difference instead.
        let mut r = Identity::new("team_reduce", 7, true);
        r.hear(Identity::new("team_broadcast", 7, true).word(), 1);
        assert_eq!(r.witness(), None);
        r.hear(Identity::new("team_barrier", 7, true).word(), 1);
        assert!(r.witness().is_some());
        // A stream-ordered collective is the same collective.
        let mut s = Identity::new("team_reduce_on_stream", 7, false);
        s.hear(Identity::new("team_reduce", 7, false).word(), 1);
        assert_eq!(s.witness(), None);
    }

    #[test]
    fn far_pes_are_witnessed_without_a_number() {
        let mut a = Identity::new("team_broadcast", 1, false);
        a.hear(Identity::new("team_reduce", 1, false).word(), 70_000);
        let mut b = Identity::new("team_broadcast", 1, false);
        b.hear(a.word(), 0);
        assert_eq!(b.witness().map(|w| w.pe), Some(None));
    }
}
