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
#[path = "ofi/protocol/messages.rs"]
#[allow(dead_code)] // Constants the transport's buffers are sized by.
mod ofi_messages;
#[cfg(feature = "ofi")]
use crate::ofi::protocol::messages as ofi_messages;
#[cfg(not(feature = "ofi"))]
#[path = "ofi/protocol/auth.rs"]
#[allow(dead_code)] // The sending side's sequences and the refusals' log serve the transport.
mod ofi_auth;
#[cfg(feature = "ofi")]
use crate::ofi::protocol::auth as ofi_auth;
#[cfg(not(feature = "ofi"))]
#[path = "ofi/protocol/exchange.rs"]
#[allow(dead_code)] // `encode_failure` serves the ofi transport only.
mod ofi_exchange;
#[cfg(feature = "ofi")]
use crate::ofi::protocol::exchange as ofi_exchange;

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

/// What the ofi transport's message check ([`ofi_message_check`]) did with a message.
#[derive(Debug)]
pub struct OfiCheck {
    /// The message as it came, checked by PE 0 under a fixed key: accepted only where its
    /// tag is that key's (then sealing it again changes nothing).
    pub as_sent: bool,
    /// Whether sealing the message again changes it.
    pub resealing_changes_it: bool,
    /// The message sealed under that key by its claimed sender, as its sequence number
    /// says: accepted where its sender is in the job and the number is not 0.
    pub sealed: bool,
    /// The sealed message again: a replay, always refused.
    pub replayed: bool,
    /// The sealed message with one bit flipped (at the offset the message's last byte
    /// names): always refused.
    pub flipped: bool,
    /// The claimed sender and sequence number, where the message is long enough.
    pub envelope: Option<(u32, u64)>,
}

/// Checks `b` as a message to PE 0 of a job of `n_pes` PEs as that PE would before
/// decoding it (its tag, its sequence number, no source named); then seals it under
/// the same key, as its claimed sender would, and checks that, its replay, and a
/// changed bit.
pub fn ofi_message_check(b: &[u8], n_pes: usize) -> OfiCheck {
    let key = symmem_bootstrap::auth::JobKey::derive(b"fuzz", ofi_auth::KEY_LABEL);
    let mut verifier = ofi_auth::Verifier::new(key.hmac_sha256(), 0, n_pes);
    let as_sent = verifier.check(b, ofi_auth::Source::Unreported).is_ok();
    let envelope = ofi_messages::envelope(b);
    let mut sealed = b.to_vec();
    let mut verifier = ofi_auth::Verifier::new(key.hmac_sha256(), 0, n_pes);
    if let Some((_, seq)) = envelope {
        ofi_auth::Sealer::new(key.hmac_sha256()).seal(&mut sealed, 0, seq);
    }
    let resealing_changes_it = sealed != b;
    let accepted = verifier
        .check(&sealed, ofi_auth::Source::Unreported)
        .is_ok();
    let replayed = verifier
        .check(&sealed, ofi_auth::Source::Unreported)
        .is_ok();
    let mut flipped = sealed.clone();
    if let Some(&last) = b.last() {
        let at = usize::from(last) % flipped.len();
        flipped[at] ^= 1;
    }
    let flipped = !b.is_empty()
        && ofi_auth::Verifier::new(key.hmac_sha256(), 0, n_pes)
            .check(&flipped, ofi_auth::Source::Unreported)
            .is_ok();
    OfiCheck {
        as_sent,
        resealing_changes_it,
        sealed: accepted,
        replayed,
        flipped,
        envelope,
    }
}

/// Decodes `b` as a PE's entry in the ofi transport's exchange, and encodes what was
/// decoded again: equal to `b`.
pub fn ofi_exchange_reencode(b: &[u8]) -> Result<Vec<u8>, String> {
    ofi_exchange::decode(b).map(|(name, heap)| ofi_exchange::encode(name, &heap))
}
