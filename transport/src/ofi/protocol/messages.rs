//! The ofi transport's own messages, for providers that keep no order between a write and
//! an atomic after it (`tcp;ofi_rxm`): there a put_signal's signal, as an atomic, would
//! wait a round trip for its data. Instead a small put_signal (or a signal alone) travels
//! as one message (`fi_send`) carrying its data and its signal; the target's progress
//! copies the data into its heap, then applies the signal with a CPU atomic, and
//! acknowledges it: in the next message it sends to that peer (a ping-pong then sends no
//! acknowledgement of its own), or with a message of its own. The operation completes
//! (for `quiet`, `fence` and the reuse of its bounce slot) once both its send completed
//! and its acknowledgement arrived.
//!
//! A message is a header of [`HEADER`] bytes, then the data:
//! `kind: u32, from: u32, op: u64, seq: u64, tag: [u8; 16], data_off: u64, sig_off: u64,
//! value: u64, sig_op: u32, data_len: u32, acked: u64`, little-endian, where `acked` is an
//! operation of the receiver's that the sender acknowledges with it (0 for none). An
//! acknowledgement alone is the first [`ACK_BYTES`] of a header with kind [`KIND_ACK`]
//! and `op` the acknowledged operation's number at its sender. A goodbye (kind
//! [`KIND_GOODBYE`], [`ACK_BYTES`] long, `op` 0) tells a peer that its sender shuts its
//! endpoint down in order: a peer that stops answering after it has left, not died.
//!
//! Every message is sealed by its sender: `seq` numbers the sender's messages to that
//! receiver (from 1 up) and `tag` is a MAC of the whole message, but for the tag, and of
//! its receiver, under the job's key (`protocol::auth`). The encoders here leave both
//! zero for the sealing; [`decode`] reads neither: the receiver checks them first.

use symmem_device::SignalOp;

/// Bytes of a message's header.
pub(crate) const HEADER: usize = 80;
/// Bytes of an acknowledgement.
pub(crate) const ACK_BYTES: usize = 40;
/// Where a message's sequence number is: a `u64` that numbers its sender's messages to
/// its receiver.
pub(crate) const SEQ_AT: usize = 16;
/// Where a message's tag is (its MAC, [`TAG_BYTES`] long): every byte but these is
/// authenticated.
pub(crate) const TAG_AT: usize = 24;
/// Bytes of a message's tag.
pub(crate) const TAG_BYTES: usize = 16;
/// Bytes of one receive buffer: the largest message.
pub(crate) const RECV_BYTES: usize = 8 << 10;
/// The most data one message carries.
pub(crate) const MAX_DATA: usize = RECV_BYTES - HEADER;
/// Receive buffers each PE keeps posted.
pub(crate) const RECV_SLOTS: usize = 64;
/// A data-and-signal message.
const KIND_SIGNAL: u32 = 1;
/// An acknowledgement.
const KIND_ACK: u32 = 2;
/// A goodbye: the sender shuts its endpoint down.
const KIND_GOODBYE: u32 = 3;

/// A data-and-signal message, as its target applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signal {
    /// The sender's PE.
    pub from: usize,
    /// The sender's number of the operation, for the acknowledgement.
    pub op: u64,
    /// Heap offset of the data.
    pub data_off: u64,
    /// Bytes of data after the header.
    pub data_len: usize,
    /// Heap offset of the 8-byte signal word.
    pub sig_off: u64,
    /// The signal operand.
    pub value: u64,
    /// Set or add.
    pub sig_op: SignalOp,
    /// The receiver's operation (a message to the sender) this one also acknowledges;
    /// 0 for none.
    pub acked: u64,
}

/// A received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Message {
    /// Data and a signal to apply.
    Signal(Signal),
    /// `from` applied the sender's operation `op`.
    Ack { from: usize, op: u64 },
    /// `from` shuts its endpoint down.
    Goodbye { from: usize },
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn half(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Writes the header of `s` into `buf` (at least [`HEADER`] bytes).
pub(crate) fn encode_signal(buf: &mut [u8], s: &Signal) {
    buf[0..4].copy_from_slice(&KIND_SIGNAL.to_le_bytes());
    buf[4..8].copy_from_slice(&(s.from as u32).to_le_bytes());
    buf[8..16].copy_from_slice(&s.op.to_le_bytes());
    buf[SEQ_AT..TAG_AT + TAG_BYTES].fill(0);
    buf[40..48].copy_from_slice(&s.data_off.to_le_bytes());
    buf[48..56].copy_from_slice(&s.sig_off.to_le_bytes());
    buf[56..64].copy_from_slice(&s.value.to_le_bytes());
    let op = match s.sig_op {
        SignalOp::Set => 0u32,
        SignalOp::Add => 1,
    };
    buf[64..68].copy_from_slice(&op.to_le_bytes());
    buf[68..72].copy_from_slice(&(s.data_len as u32).to_le_bytes());
    buf[72..80].copy_from_slice(&s.acked.to_le_bytes());
}

/// The acknowledgement by `from` of operation `op`.
pub(crate) fn encode_ack(from: usize, op: u64) -> [u8; ACK_BYTES] {
    let mut b = [0u8; ACK_BYTES];
    b[0..4].copy_from_slice(&KIND_ACK.to_le_bytes());
    b[4..8].copy_from_slice(&(from as u32).to_le_bytes());
    b[8..16].copy_from_slice(&op.to_le_bytes());
    b
}

/// The goodbye of `from`.
pub(crate) fn encode_goodbye(from: usize) -> [u8; ACK_BYTES] {
    let mut b = [0u8; ACK_BYTES];
    b[0..4].copy_from_slice(&KIND_GOODBYE.to_le_bytes());
    b[4..8].copy_from_slice(&(from as u32).to_le_bytes());
    b
}

/// The claimed sender and the sequence number of the message in `buf`, for checking its
/// tag before anything else is read; `None` where it is shorter than any message.
pub(crate) fn envelope(buf: &[u8]) -> Option<(u32, u64)> {
    (buf.len() >= ACK_BYTES).then(|| (half(buf, 4), word(buf, SEQ_AT)))
}

/// The message in the first bytes of a receive buffer, checked against the job (`n_pes`)
/// and this PE's heap of `heap_len` bytes: a malformed one is named, never applied. Its
/// sequence number and tag are not read (the receiver checked them).
pub(crate) fn decode(buf: &[u8], n_pes: usize, heap_len: u64) -> Result<Message, String> {
    if buf.len() < ACK_BYTES {
        return Err(format!("a message of {} bytes", buf.len()));
    }
    let from = half(buf, 4) as usize;
    if from >= n_pes {
        return Err(format!("a message from PE {from} of a job of {n_pes} PEs"));
    }
    let op = word(buf, 8);
    match half(buf, 0) {
        KIND_ACK => Ok(Message::Ack { from, op }),
        KIND_GOODBYE => Ok(Message::Goodbye { from }),
        KIND_SIGNAL if buf.len() >= HEADER => {
            let data_len = half(buf, 68) as usize;
            let (data_off, sig_off) = (word(buf, 40), word(buf, 48));
            let sig_op = match half(buf, 64) {
                0 => SignalOp::Set,
                1 => SignalOp::Add,
                other => {
                    return Err(format!(
                        "a signal message from PE {from} with signal op {other}"
                    ))
                }
            };
            if data_len > MAX_DATA.min(buf.len() - HEADER) {
                return Err(format!(
                    "a signal message from PE {from} with {data_len} bytes of data in {} bytes",
                    buf.len()
                ));
            }
            if data_off
                .checked_add(data_len as u64)
                .is_none_or(|end| end > heap_len)
            {
                return Err(format!(
                    "a signal message from PE {from} with data at bytes {data_off}..+{data_len}, outside this PE's heap of {heap_len} bytes"
                ));
            }
            if !sig_off.is_multiple_of(8) || sig_off.checked_add(8).is_none_or(|end| end > heap_len)
            {
                return Err(format!(
                    "a signal message from PE {from} with its signal word at heap offset {sig_off} (it must be 8-byte aligned and inside the heap of {heap_len} bytes)"
                ));
            }
            Ok(Message::Signal(Signal {
                from,
                op,
                data_off,
                data_len,
                sig_off,
                value: word(buf, 56),
                sig_op,
                acked: word(buf, 72),
            }))
        }
        kind => Err(format!(
            "a message of kind {kind} and {} bytes from PE {from}",
            buf.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn signal() -> Signal {
        Signal {
            from: 3,
            op: 77,
            data_off: 4096,
            data_len: 100,
            sig_off: 64,
            value: u64::MAX - 1,
            sig_op: SignalOp::Add,
            acked: 5,
        }
    }

    /// Both kinds round-trip through their encoding.
    #[test]
    fn messages_decode_as_encoded() {
        let mut buf = vec![0u8; HEADER + 100];
        encode_signal(&mut buf, &signal());
        assert_eq!(decode(&buf, 4, 1 << 20), Ok(Message::Signal(signal())));
        let ack = encode_ack(2, 9);
        assert_eq!(
            decode(&ack, 4, 1 << 20),
            Ok(Message::Ack { from: 2, op: 9 })
        );
        assert_eq!(
            decode(&encode_goodbye(3), 4, 1 << 20),
            Ok(Message::Goodbye { from: 3 })
        );
    }

    /// Every field a peer could get wrong is checked and named before anything is applied.
    #[test]
    fn malformed_messages_are_named() {
        let mut buf = vec![0u8; HEADER + 100];
        let check = |s: Signal, len: usize, heap: u64, says: &str| {
            let mut buf = vec![0u8; len];
            encode_signal(&mut buf, &s);
            let why = decode(&buf, 4, heap).unwrap_err();
            assert!(why.contains(says), "{why:?} should say {says:?}");
        };
        check(
            Signal {
                from: 4,
                ..signal()
            },
            HEADER + 100,
            1 << 20,
            "from PE 4 of a job of 4",
        );
        check(
            signal(),
            HEADER + 99,
            1 << 20,
            "100 bytes of data in 179 bytes",
        );
        check(
            signal(),
            HEADER + 100,
            4150,
            "outside this PE's heap of 4150 bytes",
        );
        check(
            Signal {
                sig_off: 12,
                ..signal()
            },
            HEADER + 100,
            1 << 20,
            "heap offset 12",
        );
        check(
            Signal {
                sig_off: u64::MAX - 7,
                ..signal()
            },
            HEADER + 100,
            1 << 20,
            "8-byte aligned",
        );
        encode_signal(&mut buf, &signal());
        buf[64] = 5;
        assert!(decode(&buf, 4, 1 << 20)
            .unwrap_err()
            .contains("signal op 5"));
        buf[0] = 9;
        assert!(decode(&buf, 4, 1 << 20).unwrap_err().contains("kind 9"));
        assert!(decode(&buf[..8], 4, 1 << 20)
            .unwrap_err()
            .contains("of 8 bytes"));
    }

    fn any_signal(n_pes: usize, heap: u64) -> impl Strategy<Value = Signal> {
        let offset = prop_oneof![
            0..heap + 16,
            heap.saturating_sub(16)..heap + 16,
            any::<u64>()
        ];
        (
            0..n_pes + 1,
            any::<u64>(),
            offset.clone(),
            0..=MAX_DATA + 1,
            offset,
            any::<u64>(),
            any::<bool>(),
            any::<u64>(),
        )
            .prop_map(
                |(from, op, data_off, data_len, sig_off, value, add, acked)| Signal {
                    from,
                    op,
                    data_off,
                    data_len,
                    sig_off,
                    value,
                    sig_op: if add { SignalOp::Add } else { SignalOp::Set },
                    acked,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// A signal message decodes as encoded exactly when every field fits the job and
        /// the heap; whatever it accepts writes only inside the heap, and its data lies
        /// inside the message.
        #[test]
        fn signals_decode_as_encoded_or_are_refused(
            (heap, s) in (0..1u64 << 16).prop_flat_map(|h| (Just(h), any_signal(4, h))),
            extra in 0..64usize,
        ) {
            let len = (HEADER + s.data_len.min(MAX_DATA) + extra).min(RECV_BYTES);
            let mut buf = vec![0u8; len];
            encode_signal(&mut buf, &s);
            let fits = s.from < 4
                && s.data_len <= len - HEADER
                && s.data_off.checked_add(s.data_len as u64).is_some_and(|e| e <= heap)
                && s.sig_off.is_multiple_of(8)
                && s.sig_off.checked_add(8).is_some_and(|e| e <= heap);
            match decode(&buf, 4, heap) {
                Ok(m) => {
                    prop_assert!(fits);
                    prop_assert_eq!(m, Message::Signal(s));
                }
                Err(_) => prop_assert!(!fits),
            }
            for cut in [0, 1, ACK_BYTES - 1, HEADER - 1] {
                prop_assert!(decode(&buf[..cut], 4, heap).is_err(), "{} bytes", cut);
            }
        }

        /// Acknowledgements and goodbyes decode as encoded, from any PE of the job.
        #[test]
        fn acks_and_goodbyes_decode_as_encoded(from in 0..1024usize, op in any::<u64>()) {
            prop_assert_eq!(decode(&encode_ack(from, op), 1024, 0), Ok(Message::Ack { from, op }));
            prop_assert_eq!(decode(&encode_goodbye(from), 1024, 0), Ok(Message::Goodbye { from }));
            prop_assert!(decode(&encode_ack(from, op), from, 0).is_err());
        }

        /// Whatever bytes arrive, decoding returns (never panics), and a signal it accepts
        /// touches only the heap and data inside the message.
        #[test]
        fn any_bytes_decode_or_are_refused(
            kind in prop_oneof![1..=3u32, any::<u32>()],
            from in prop_oneof![0..5u32, any::<u32>()],
            rest in proptest::collection::vec(any::<u8>(), 0..HEADER + 64),
            heap in 0..256u64,
        ) {
            let buf = [&kind.to_le_bytes()[..], &from.to_le_bytes(), &rest].concat();
            if let Ok(Message::Signal(s)) = decode(&buf, 4, heap) {
                prop_assert!(HEADER + s.data_len <= buf.len());
                prop_assert!(s.data_off + s.data_len as u64 <= heap);
                prop_assert!(s.sig_off + 8 <= heap && s.sig_off.is_multiple_of(8));
            }
        }
    }
}
