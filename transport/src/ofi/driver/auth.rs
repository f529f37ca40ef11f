//! The transport's message authentication at work ([`crate::ofi::protocol::auth`]): its
//! key, from the job's; the sealing of every message this PE sends and the check of every
//! message it receives, with refusals counted and logged; and the heap's random memory
//! key.

use std::time::Instant;

use symmem_bootstrap::auth::JobKey;
use symmem_bootstrap::Bootstrap;

use crate::error::Result;
use crate::ofi::ffi;
use crate::ofi::protocol::auth::{Refusals, Sealer, Sequences, Source, Verifier, KEY_LABEL};

/// The transport's key: the job key's subkey [`KEY_LABEL`], or, under a bootstrap that
/// holds no job key (MPI, one PE), one drawn by rank 0 and carried by the bootstrap (as
/// the socket transport's). Collective.
pub(in crate::ofi) fn transport_key(b: &dyn Bootstrap) -> Result<JobKey> {
    if let Some(job) = b.job_key() {
        return Ok(job.subkey(KEY_LABEL));
    }
    let drawn = b.broadcast(0, &JobKey::random_secret()?)?;
    Ok(JobKey::derive(&drawn, "ofi transport messages, drawn"))
}

/// A memory key for the heap, from the OS's random source: where the provider lets the
/// application choose keys (no `FI_MR_PROV_KEY`), a stranger who reaches the endpoint
/// cannot guess it (of its `mr_key_size` bytes; the shim keeps those).
pub(in crate::ofi) fn random_heap_key() -> Result<u64> {
    let bytes = JobKey::random_secret()?;
    Ok(u64::from_le_bytes(
        bytes[..8].try_into().expect("8 of 32 bytes"),
    ))
}

/// How the heap's memory key was chosen, for the init log (never the key itself).
pub(in crate::ofi) fn heap_key_origin(attrs: &ffi::Attrs) -> String {
    if attrs.mr_mode & ffi::FI_MR_PROV_KEY != 0 {
        "heap key chosen by the provider (FI_MR_PROV_KEY)".to_string()
    } else {
        format!(
            "heap key drawn at random ({} bits)",
            8 * attrs.mr_key_size.clamp(1, 8)
        )
    }
}

/// One PE's authentication of its messages: sealing what it sends, checking what it
/// receives.
pub(in crate::ofi) struct Auth {
    me: usize,
    sealer: Sealer,
    sequences: Sequences,
    verifier: Verifier,
    /// Whether the provider names each message's source (`FI_SOURCE`).
    sources: bool,
    /// The messages refused.
    pub refusals: Refusals,
}

impl Auth {
    /// PE `me`'s of a job of `n_pes` PEs under the transport's `key`; `sources`: whether
    /// the provider names each message's source.
    pub(in crate::ofi) fn new(key: &JobKey, me: usize, n_pes: usize, sources: bool) -> Self {
        Auth {
            me,
            sealer: Sealer::new(key.hmac_sha256()),
            sequences: Sequences::new(n_pes),
            verifier: Verifier::new(key.hmac_sha256(), me, n_pes),
            sources,
            refusals: Refusals::new(),
        }
    }

    /// What the init log says of it.
    pub(in crate::ofi) fn describe(&self) -> &'static str {
        if self.sources {
            "messages authenticated (HMAC-SHA256 under the job key), their senders checked against the provider's source (FI_SOURCE)"
        } else {
            "messages authenticated (HMAC-SHA256 under the job key); the provider names no sources (no FI_SOURCE): the MAC alone decides"
        }
    }

    /// A sealer and the sequence number of the next message to `to`, for sealing it
    /// where `self` is borrowed otherwise.
    pub(in crate::ofi) fn next_to(&mut self, to: usize) -> (Sealer, u64) {
        (self.sealer.clone(), self.sequences.next(to))
    }

    /// Seals `msg` as the next message to `to`.
    pub(in crate::ofi) fn seal(&mut self, msg: &mut [u8], to: usize) {
        let seq = self.sequences.next(to);
        self.sealer.seal(msg, to, seq);
    }

    /// Whether `msg`, received with `source` as the shim reported it (a PE, or
    /// `u64::MAX` for none), is to be applied; a refusal is counted and logged (a warning
    /// at most once a second), naming the claimed sender and the source.
    pub(in crate::ofi) fn admits(&mut self, msg: &[u8], source: u64) -> bool {
        let source = match source {
            _ if !self.sources => Source::Unreported,
            u64::MAX => Source::Stranger,
            pe => Source::Pe(pe as usize),
        };
        match self.verifier.check(msg, source) {
            Ok(()) => true,
            Err(why) => {
                if let Some(line) = self.refusals.count(Instant::now(), &why, source) {
                    tracing::warn!(target: "symmem::ofi", "PE {}: {line}", self.me);
                }
                false
            }
        }
    }
}
