//! A PE's team bookkeeping: where each team slot's barrier flags, exchange buffers,
//! collective scratch, argument fingerprints and barrier identity words lie in the team area of the heap, and which
//! slots are free. Plain state: the operations on teams are in `team/`.

use std::sync::Mutex;

use symmem_sync::barrier;

use crate::config::{CHECK_COLLECTIVES, MAX_TEAMS, SYMMETRIC_SIZE};
use crate::error::{Error, Result};

/// The slot of TEAM_WORLD.
pub(crate) const WORLD_SLOT: usize = 0;
/// The slot of TEAM_NODE.
pub(crate) const NODE_SLOT: usize = 1;

/// The allocation id the team area reports in messages (user allocations count up from 0).
pub(crate) const AREA_ID: u64 = u64::MAX;

/// Words of a request before its free-slot mask: tag and three arguments.
pub(crate) const REQUEST_HEAD: usize = 4;

/// Scratch words per team PE in each of the two halves of a slot's collective scratch
/// (see [`collectives`]).
pub(crate) const SCRATCH_WORDS: usize = 64;

/// Words of a host collective's argument fingerprint (see [`collectives`]): the
/// arguments, the entry barrier's epoch and the call's number on the team, and this PE's
/// verdict on its own arguments.
pub(crate) const FINGERPRINT_WORDS: usize = 13;

/// Alert words of a slot, one per fingerprint buffer: a member whose own arguments are
/// bad stores the entry barrier's epoch there on every member (see [`collectives`]).
pub(crate) const ALERT_WORDS: usize = 2;

/// This PE's team bookkeeping.
pub(crate) struct TeamState {
    /// Heap offset of slot 0.
    pub(crate) offset: usize,
    /// `u64` words per slot (a multiple of 8, so slots stay 64-byte aligned).
    pub(crate) slot_words: usize,
    /// Barrier flag words at the start of each slot: enough rounds for a team of every PE.
    pub(crate) rounds: usize,
    /// Words of a free-slot mask.
    pub(crate) mask_words: usize,
    /// `SYMMEM_MAX_TEAMS`.
    pub(crate) max_teams: usize,
    /// The job's PE count (the largest team, so the size of an exchange buffer).
    pub(crate) n_pes: usize,
    pub(crate) table: Mutex<Table>,
}

/// What changes: free slots and per-slot counters, behind one lock.
pub(crate) struct Table {
    /// Bit `s` set: slot `s` is free on this PE.
    pub(crate) free: Vec<u64>,
    pub(crate) slots: Vec<SlotCounters>,
    /// A split is under way on this PE (see [`Team::creating`]).
    pub(crate) creating: bool,
}

/// A slot's counters on this PE, the same on every member (collectives on a team are
/// called in the same order by all of its members).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SlotCounters {
    /// Exchanges (creations and destroys) started in this slot.
    pub(crate) exchanges: u64,
    /// Host collectives called on the team in this slot, counted under
    /// `SYMMEM_CHECK_COLLECTIVES` (their fingerprints carry it).
    pub(crate) collectives: u64,
}

impl TeamState {
    /// Bytes of the team area for `max_teams` slots in a job of `n_pes` PEs: the slots,
    /// then the arrival barrier's flags and epoch word (see [`Self::arrival_slot`]).
    pub(crate) fn area_bytes(max_teams: usize, n_pes: usize) -> usize {
        let (slot_words, rounds, _) = Self::layout(max_teams, n_pes);
        (max_teams * slot_words + Self::arrival_words(rounds)) * 8
    }

    /// Words after the slots for the arrival barrier: its flags and epoch word, rounded
    /// up to keep the area 64-byte aligned.
    fn arrival_words(rounds: usize) -> usize {
        (rounds + 1).div_ceil(8) * 8
    }

    /// Words of the whole team area.
    pub(crate) fn area_words(&self) -> usize {
        self.max_teams * self.slot_words + Self::arrival_words(self.rounds)
    }

    /// The pseudo-slot of the arrival barrier, the runtime's own barrier over every PE
    /// that `alloc`, `free` and `finalize` pass before their bootstrap collective: only
    /// its flags and epoch word exist ([`Self::flag`] and [`Self::epoch`] of it lie after
    /// the last slot), it is never free, and no team exchange or collective uses it.
    pub(crate) fn arrival_slot(&self) -> usize {
        self.max_teams
    }

    /// `(slot_words, rounds, mask_words)`.
    pub(crate) fn layout(max_teams: usize, n_pes: usize) -> (usize, usize, usize) {
        let rounds = barrier::rounds(0, n_pes).count().max(1);
        let mask_words = max_teams.div_ceil(64);
        let exchange = 2 * n_pes * (REQUEST_HEAD + mask_words);
        let scratch = 2 * n_pes * SCRATCH_WORDS;
        let fingerprints = 2 * n_pes * FINGERPRINT_WORDS + ALERT_WORDS;
        let identities = 2 * rounds;
        (
            (rounds + 1 + exchange + scratch + fingerprints + identities).div_ceil(8) * 8,
            rounds,
            mask_words,
        )
    }

    /// Init's check: every PE must use the same `SYMMEM_MAX_TEAMS` (the team area's size
    /// decides where allocations start, so PEs that differ would disagree on every
    /// symmetric offset) and the same `SYMMEM_CHECK_COLLECTIVES`, and the heap of
    /// `heap_len` bytes must hold the runtime's reserve and the team area. A mismatch is
    /// an [`Error::Inconsistent`] naming the variable and every PE's value.
    pub(crate) fn check(
        bootstrap: &dyn symmem_bootstrap::Bootstrap,
        max_teams: usize,
        check_collectives: bool,
        heap_len: usize,
    ) -> Result<()> {
        let mut mine = (max_teams as u64).to_le_bytes().to_vec();
        mine.push(u8::from(check_collectives));
        let all = bootstrap.allgather(&mine)?;
        let field = |v: &[u8], at: std::ops::Range<usize>| -> Option<u64> {
            let mut b = [0u8; 8];
            b[..at.len()].copy_from_slice(v.get(at)?);
            Some(u64::from_le_bytes(b))
        };
        for (what, at) in [
            (MAX_TEAMS.name(), 0..8),
            // The host collectives compare their arguments only where every member does:
            // PEs set differently would wait for fingerprints never sent, or read stale
            // ones, and the default path would take another's check for its alert.
            (CHECK_COLLECTIVES.name(), 8..9),
        ] {
            let values: Vec<Option<u64>> = all.iter().map(|v| field(v, at.clone())).collect();
            if values.iter().any(|v| *v != values[0]) {
                let detail = values
                    .iter()
                    .enumerate()
                    .map(|(pe, v)| match v {
                        Some(v) => format!("PE {pe}: {v}"),
                        None => format!("PE {pe}: ({} bytes)", all[pe].len()),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Error::Inconsistent { what, detail });
            }
        }
        let need = crate::heap::RESERVED + Self::area_bytes(max_teams, bootstrap.size());
        if heap_len < need {
            return Err(Error::Config {
                var: SYMMETRIC_SIZE.name(),
                value: heap_len.to_string(),
                reason: format!(
                    "the heap must hold the runtime's reserve and the team area ({need} bytes for SYMMEM_MAX_TEAMS = {max_teams} on {} PEs)",
                    bootstrap.size()
                ),
            });
        }
        Ok(())
    }

    /// The state of a new runtime whose team area starts at heap offset `offset` (zeroed,
    /// [`Self::area_bytes`] long).
    pub(crate) fn new(offset: usize, max_teams: usize, n_pes: usize) -> Self {
        let (slot_words, rounds, mask_words) = Self::layout(max_teams, n_pes);
        let mut free = vec![0u64; mask_words];
        for s in (NODE_SLOT + 1)..max_teams {
            free[s / 64] |= 1 << (s % 64);
        }
        TeamState {
            offset,
            slot_words,
            rounds,
            mask_words,
            max_teams,
            n_pes,
            table: Mutex::new(Table {
                free,
                slots: vec![SlotCounters::default(); max_teams],
                creating: false,
            }),
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Word index, in the team area, of flag `round` of `slot`.
    pub(crate) fn flag(&self, slot: usize, round: usize) -> usize {
        slot * self.slot_words + round
    }

    /// Word index of this PE's barrier epoch word of `slot` (after the flags).
    pub(crate) fn epoch(&self, slot: usize) -> usize {
        slot * self.slot_words + self.rounds
    }

    /// Word index of the identity word of barrier round `round` for epochs of parity
    /// `parity` in `slot` (see `team/identity.rs`): right after the epoch word, so that
    /// in small teams a round's flag and identity word share a cache line.
    pub(crate) fn identity(&self, slot: usize, round: usize, parity: usize) -> usize {
        self.epoch(slot) + 1 + parity * self.rounds + round
    }

    /// Word index of team PE `index`'s request in exchange buffer `parity` of `slot`
    /// (after the identity words).
    pub(crate) fn request(&self, slot: usize, parity: usize, index: usize) -> usize {
        self.identity(slot, 0, 2) + (parity * self.n_pes + index) * self.request_words()
    }

    pub(crate) fn request_words(&self) -> usize {
        REQUEST_HEAD + self.mask_words
    }

    /// Word index of team PE `index`'s part of scratch half `half` of `slot` (after the
    /// exchange buffers; `SCRATCH_WORDS` words).
    pub(crate) fn scratch(&self, slot: usize, half: usize, index: usize) -> usize {
        self.request(slot, 2, 0) + (half * self.n_pes + index) * SCRATCH_WORDS
    }

    /// Word index of team PE `index`'s argument fingerprint in buffer `parity` of `slot`
    /// (after the scratch, which device collectives also use; `FINGERPRINT_WORDS` words).
    pub(crate) fn fingerprint(&self, slot: usize, parity: usize, index: usize) -> usize {
        self.scratch(slot, 2, 0) + (parity * self.n_pes + index) * FINGERPRINT_WORDS
    }

    /// Word index of alert word `parity` of `slot` (after the fingerprint buffers).
    pub(crate) fn alert(&self, slot: usize, parity: usize) -> usize {
        self.fingerprint(slot, 2, 0) + parity
    }
}
