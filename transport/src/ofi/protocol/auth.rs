//! Authentication of the ofi transport's messages ([`super::super::messages`]): whoever
//! reaches a PE's endpoint could otherwise write its heap with a signal message, or
//! complete its operations with forged acknowledgements.
//!
//! Every message carries a tag: HMAC-SHA256 under the transport's key (the job key's
//! subkey [`KEY_LABEL`]), truncated to [`TAG_BYTES`], over the receiver's PE and every
//! byte of the message but the tag (its kind, sender, operation, sequence number, header
//! and data). The sequence number counts the sender's messages to that receiver from 1
//! up, and the receiver accepts each number once ([`Window`]): a message replayed, or
//! reflected to another PE or back to its sender, fails. A receiver that learns a
//! message's source from the provider (`FI_SOURCE`) also refuses one whose claimed
//! sender is not that source. What fails is dropped before anything in it is read.

use std::fmt;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

// The message codec: the transport's own, or, for the fuzz targets without libfabric,
// the fuzzing module's copy of it.
#[cfg(not(feature = "ofi"))]
use crate::fuzzing::ofi_messages::{envelope, SEQ_AT, TAG_AT, TAG_BYTES};
#[cfg(feature = "ofi")]
use crate::ofi::protocol::messages::{envelope, SEQ_AT, TAG_AT, TAG_BYTES};

/// The label of the transport's key under the job key.
pub(crate) const KEY_LABEL: &str = "ofi transport messages";

/// Sequence numbers a receiver remembers behind the highest it accepted from a sender:
/// one arriving later than this many behind is refused as a replay. Senders whose
/// messages arrive in order (`FI_ORDER_SAS`) never come near it.
pub(crate) const WINDOW: u64 = 1024;

/// The MAC of `msg` (a whole message, tag included, which is skipped) to PE `to`.
fn tag(mac: &Hmac<Sha256>, to: usize, msg: &[u8]) -> Hmac<Sha256> {
    let mut m = mac.clone();
    m.update(&(to as u32).to_le_bytes());
    m.update(&msg[..TAG_AT]);
    m.update(&msg[TAG_AT + TAG_BYTES..]);
    m
}

/// Seals a PE's messages: writes their sequence number and tag.
#[derive(Clone)]
pub(crate) struct Sealer {
    mac: Hmac<Sha256>,
}

impl Sealer {
    /// A sealer keyed with `mac` (the transport's key, [`KEY_LABEL`]).
    pub(crate) fn new(mac: Hmac<Sha256>) -> Self {
        Sealer { mac }
    }

    /// Seals `msg` (an encoded message, at least `ACK_BYTES` long) to PE `to` as that
    /// receiver's message `seq` from this PE.
    pub(crate) fn seal(&self, msg: &mut [u8], to: usize, seq: u64) {
        msg[SEQ_AT..TAG_AT].copy_from_slice(&seq.to_le_bytes());
        let full = tag(&self.mac, to, msg).finalize().into_bytes();
        msg[TAG_AT..TAG_AT + TAG_BYTES].copy_from_slice(&full[..TAG_BYTES]);
    }
}

/// The next sequence number of this PE's messages to each PE.
pub(crate) struct Sequences(Vec<u64>);

impl Sequences {
    /// For a job of `n_pes` PEs: every PE's first message is number 1.
    pub(crate) fn new(n_pes: usize) -> Self {
        Sequences(vec![1; n_pes])
    }

    /// Takes the next number of a message to `to`. A message that is not sent after all
    /// leaves a gap, which receivers accept.
    pub(crate) fn next(&mut self, to: usize) -> u64 {
        let seq = self.0[to];
        self.0[to] += 1;
        seq
    }
}

/// The sequence numbers a receiver accepted from one sender: the highest, and which of
/// the [`WINDOW`] below it.
#[derive(Clone)]
struct Window {
    highest: u64,
    /// Bit `i` of word `i / 64`: whether `highest - i` was accepted.
    seen: [u64; (WINDOW / 64) as usize],
}

impl Window {
    fn new() -> Self {
        Window {
            highest: 0,
            seen: [0; (WINDOW / 64) as usize],
        }
    }

    /// Whether `seq` may be accepted (neither 0, nor seen, nor too old).
    fn fresh(&self, seq: u64) -> bool {
        if seq > self.highest {
            return true;
        }
        let back = self.highest - seq;
        seq != 0 && back < WINDOW && self.seen[(back / 64) as usize] & (1 << (back % 64)) == 0
    }

    /// Records `seq` (which is [`Self::fresh`]) as accepted.
    fn accept(&mut self, seq: u64) {
        if seq > self.highest {
            let shift = seq - self.highest;
            self.highest = seq;
            if shift >= WINDOW {
                self.seen = [0; (WINDOW / 64) as usize];
            } else {
                // Shifts the bitmap `shift` places towards older numbers.
                let (words, bits) = ((shift / 64) as usize, (shift % 64) as u32);
                let old = self.seen;
                for (i, w) in self.seen.iter_mut().enumerate() {
                    let lo = i.checked_sub(words).map_or(0, |j| old[j]);
                    let carry = i
                        .checked_sub(words + 1)
                        .filter(|_| bits != 0)
                        .map_or(0, |j| old[j] >> (64 - bits));
                    *w = if bits == 0 { lo } else { lo << bits | carry };
                }
            }
        }
        let back = self.highest - seq;
        self.seen[(back / 64) as usize] |= 1 << (back % 64);
    }
}

/// Where the provider says a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The endpoint of this PE (in the address vector).
    Pe(usize),
    /// An endpoint outside the job's address vector.
    Stranger,
    /// The provider reports no sources (no `FI_SOURCE`): the MAC alone decides.
    Unreported,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Pe(pe) => write!(f, "the endpoint of PE {pe}"),
            Source::Stranger => f.write_str("an endpoint outside the job's address vector"),
            Source::Unreported => {
                f.write_str("an endpoint the provider does not name (no FI_SOURCE)")
            }
        }
    }
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Shorter than any message.
    Short(usize),
    /// Its claimed sender is no PE of the job.
    NoSuchSender(u32),
    /// It came from another endpoint than its claimed sender's.
    WrongSource(usize),
    /// Its tag is not the MAC of its bytes to this PE under the job's key.
    BadTag(usize),
    /// A sequence number already accepted from its sender, or older than [`WINDOW`].
    Replayed(usize, u64),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Short(len) => write!(f, "a message of {len} bytes"),
            Refusal::NoSuchSender(from) => {
                write!(f, "a message claiming PE {from}, which is not in the job")
            }
            Refusal::WrongSource(from) => write!(
                f,
                "a message claiming PE {from}, which its endpoint did not send,"
            ),
            Refusal::BadTag(from) => write!(
                f,
                "a message claiming PE {from} whose tag is not the job key's"
            ),
            Refusal::Replayed(from, seq) => write!(
                f,
                "a message claiming PE {from} with sequence number {seq}, seen before or too old"
            ),
        }
    }
}

/// Checks the messages that arrive at one PE.
pub(crate) struct Verifier {
    mac: Hmac<Sha256>,
    me: usize,
    /// Per sender.
    windows: Vec<Window>,
}

impl Verifier {
    /// The verifier of PE `me` of a job of `n_pes` PEs, keyed with `mac` (as the senders'
    /// [`Sealer`]).
    pub(crate) fn new(mac: Hmac<Sha256>, me: usize, n_pes: usize) -> Self {
        Verifier {
            mac,
            me,
            windows: vec![Window::new(); n_pes],
        }
    }

    /// Accepts `msg`, which arrived from `source`, as a message of its claimed sender to
    /// this PE, sealed under the job's key, whose sequence number was not accepted
    /// before (and records it); else says why not. Reads nothing of `msg` but its
    /// sender and sequence number before its tag is checked.
    pub(crate) fn check(&mut self, msg: &[u8], source: Source) -> Result<(), Refusal> {
        let (from, seq) = envelope(msg).ok_or(Refusal::Short(msg.len()))?;
        let pe = from as usize;
        if pe >= self.windows.len() {
            return Err(Refusal::NoSuchSender(from));
        }
        if matches!(source, Source::Pe(p) if p != pe) || source == Source::Stranger {
            return Err(Refusal::WrongSource(pe));
        }
        tag(&self.mac, self.me, msg)
            .verify_truncated_left(&msg[TAG_AT..TAG_AT + TAG_BYTES])
            .map_err(|_| Refusal::BadTag(pe))?;
        let window = &mut self.windows[pe];
        if !window.fresh(seq) {
            return Err(Refusal::Replayed(pe, seq));
        }
        window.accept(seq);
        Ok(())
    }
}

/// The messages a PE refused, and when it last said so: the first refusal is logged at
/// once, later ones at most once per [`Refusals::EVERY`], with how many there were.
pub(crate) struct Refusals {
    /// Every message refused.
    pub total: u64,
    /// Refused since the last log line.
    unlogged: u64,
    logged_at: Option<Instant>,
}

impl Refusals {
    /// How often refusals are logged at most.
    pub(crate) const EVERY: Duration = Duration::from_secs(1);

    /// None refused yet.
    pub(crate) fn new() -> Self {
        Refusals {
            total: 0,
            unlogged: 0,
            logged_at: None,
        }
    }

    /// Counts one more refusal at `now`; returns the line to log, if one is due: naming
    /// what was refused (`why`), its `source` and how many went unlogged before it.
    pub(crate) fn count(&mut self, now: Instant, why: &Refusal, source: Source) -> Option<String> {
        self.total += 1;
        self.unlogged += 1;
        if self
            .logged_at
            .is_some_and(|at| now.duration_since(at) < Self::EVERY)
        {
            return None;
        }
        let line = format!(
            "dropped {why} from {source} ({} dropped since the last such line, {} in all)",
            self.unlogged, self.total
        );
        self.unlogged = 0;
        self.logged_at = Some(now);
        Some(line)
    }
}

#[cfg(all(test, feature = "ofi"))]
#[path = "auth/tests.rs"]
mod tests;
