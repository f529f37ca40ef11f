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

// Likewise the ofi transport's message and exchange codecs, without libfabric.
#[cfg(not(feature = "ofi"))]
#[path = "ofi/messages.rs"]
#[allow(dead_code)] // Constants the transport's buffers are sized by.
mod ofi_messages;
#[cfg(feature = "ofi")]
use crate::ofi::messages as ofi_messages;
#[cfg(not(feature = "ofi"))]
#[path = "ofi/exchange.rs"]
#[allow(dead_code)] // `encode_failure` serves the ofi transport only.
mod ofi_exchange;
#[cfg(feature = "ofi")]
use crate::ofi::exchange as ofi_exchange;

/// Bytes of an ofi signal message's header, before its data.
pub const OFI_HEADER: usize = ofi_messages::HEADER;
/// The most bytes an ofi message has: one receive buffer.
pub const OFI_RECV_BYTES: usize = ofi_messages::RECV_BYTES;

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

/// What the ofi transport's decoder accepted of a message: its encoding again, and the
/// heap bytes applying it writes.
#[derive(Debug)]
pub struct OfiMessage {
    /// The accepted message encoded again: a signal's header (without its data), or an
    /// acknowledgement or goodbye (a goodbye's `op` as zero).
    pub reencoded: Vec<u8>,
    /// The heap ranges (start, end) a signal message writes: its data, then its signal
    /// word; none for the others.
    pub writes: Vec<(u64, u64)>,
}

/// Decodes `b` as a message a peer sent to a PE of a job of `n_pes` PEs whose heap has
/// `heap_len` bytes, as that PE's progress would before applying it.
pub fn ofi_message_decode(b: &[u8], n_pes: usize, heap_len: u64) -> Result<OfiMessage, String> {
    use ofi_messages::Message;
    Ok(match ofi_messages::decode(b, n_pes, heap_len)? {
        Message::Signal(s) => {
            let mut header = vec![0u8; OFI_HEADER];
            ofi_messages::encode_signal(&mut header, &s);
            OfiMessage {
                reencoded: header,
                writes: vec![
                    (s.data_off, s.data_off + s.data_len as u64),
                    (s.sig_off, s.sig_off + 8),
                ],
            }
        }
        Message::Ack { from, op } => OfiMessage {
            reencoded: ofi_messages::encode_ack(from, op).to_vec(),
            writes: Vec::new(),
        },
        Message::Goodbye { from } => OfiMessage {
            reencoded: ofi_messages::encode_goodbye(from).to_vec(),
            writes: Vec::new(),
        },
    })
}

/// Decodes `b` as a PE's entry in the ofi transport's exchange, and encodes what was
/// decoded again: equal to `b`.
pub fn ofi_exchange_reencode(b: &[u8]) -> Result<Vec<u8>, String> {
    ofi_exchange::decode(b).map(|(name, heap)| ofi_exchange::encode(name, &heap))
}
