//! The crate-private decoders, for the fuzz targets in `fuzz/` (feature `fuzzing`).
//! The public ones ([`crate::wire::recv_limited`], [`crate::auth::ServerHandshake`],
//! `UniqueId`'s `FromStr`, [`crate::env::hostlist::expand`]) are fuzzed where they are.

use crate::error::BootstrapError;

/// Runs a PMI-1 client session against `server`, the bytes a server sends: see
/// `pmi::replay`.
pub fn pmi_replay(server: &[u8]) -> Result<(), BootstrapError> {
    crate::pmi::replay(server)
}
