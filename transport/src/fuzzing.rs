//! The crate-private decoders, for the fuzz targets in `fuzz/` (feature `fuzzing`).

use crate::interface::HeapRegion;

// The ib transport's endpoint encoding has no dependencies of its own, so its decoder
// is fuzzed without the `ib` feature (sideway and libibverbs) from the same file; with
// the feature, it is the transport's own module.
#[cfg(not(feature = "ib"))]
#[path = "ib/endpoint.rs"]
#[allow(dead_code)] // `Endpoint::qp_for` serves the ib transport only.
mod ib_endpoint;
#[cfg(feature = "ib")]
use crate::ib::endpoint as ib_endpoint;

/// Feeds `bytes` to the socket transport's receive state machine as a peer's traffic
/// to a PE whose host heap is `heap`; returns why the PE closed the connection. See
/// `socket::replay`.
pub fn socket_replay(heap: HeapRegion, bytes: &[u8]) -> String {
    crate::socket::replay::replay(heap, bytes)
}

/// Decodes `b` as a peer's ib endpoint in a job of `n_pes` PEs with `qps_per_peer`
/// queue pairs per peer, and encodes what was decoded again: equal to `b` but for its
/// reserved bytes, which read as zero.
pub fn ib_endpoint_reencode(
    b: &[u8],
    n_pes: usize,
    qps_per_peer: usize,
) -> Result<Vec<u8>, String> {
    ib_endpoint::Endpoint::decode(b, n_pes, qps_per_peer).map(|e| e.encode())
}
