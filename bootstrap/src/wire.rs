//! Frames of the TCP rendezvous protocol.
//!
//! Every frame starts with a checked 12-byte header:
//!
//! ```text
//! 0       4         6      8        12
//! | magic | version | kind | length | payload (length bytes, little-endian fields) ...
//! ```
//!
//! A frame with a wrong magic, version, kind or an oversized length is rejected with an
//! error that names the peer; it is never interpreted.
//!
//! Frames flow only after the connection's handshake ([`crate::auth`]) has proved the
//! job's key both ways; the rank's claim (rank, size, session) travels in that handshake.
//!
//! # Memory
//! A frame's length is checked against the caller's limit ([`MAX_PAYLOAD`] by default)
//! before anything is allocated. Even within the limit, the payload is read 64 KiB at a
//! time, so a length that lies reserves memory only as fast as data actually arrives.

use std::io::{Read, Write};
use std::time::Duration;

use crate::error::BootstrapError;

/// Magic of the rendezvous protocol's frames ("SYMB").
pub const MAGIC: u32 = 0x5359_4d42;
/// Version of this wire format; peers with another version are refused. (Version 2:
/// the hello moved into the authenticating handshake.)
pub const VERSION: u16 = 2;
/// Bytes of a [`Header`].
pub const HEADER_LEN: usize = 12;
/// Largest payload accepted in one frame from an authenticated peer.
pub const MAX_PAYLOAD: usize = 1 << 30;
/// A frame's payload is read at most this many bytes at a time (see [Memory](self#memory)).
const READ_CHUNK: usize = 64 << 10;

/// The checked 12-byte header every symmem frame starts with (the rendezvous here, the
/// socket transport's frames in the runtime, each with its own magic and version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Identifies the protocol.
    pub magic: u32,
    /// Version of the protocol.
    pub version: u16,
    /// Frame kind, protocol-defined.
    pub kind: u16,
    /// Payload bytes that follow the header.
    pub len: u32,
}

impl Header {
    /// The header's wire form (little-endian fields).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.magic.to_le_bytes());
        b[4..6].copy_from_slice(&self.version.to_le_bytes());
        b[6..8].copy_from_slice(&self.kind.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Parses and checks a header: the magic must be `magic` (else the peer speaks another
    /// protocol, named `what` in the message), the version `version`, and the length at
    /// most `max_len`. The kind is the caller's to check.
    pub fn decode(
        b: &[u8; HEADER_LEN],
        magic: u32,
        version: u16,
        max_len: usize,
        what: &str,
    ) -> Result<Header, String> {
        let h = Header {
            magic: u32::from_le_bytes(b[0..4].try_into().unwrap()),
            version: u16::from_le_bytes(b[4..6].try_into().unwrap()),
            kind: u16::from_le_bytes(b[6..8].try_into().unwrap()),
            len: u32::from_le_bytes(b[8..12].try_into().unwrap()),
        };
        if h.magic != magic {
            return Err(format!("bad magic {:#010x} (not a {what} peer?)", h.magic));
        }
        if h.version != version {
            return Err(format!(
                "wire version {}, this build speaks {version}",
                h.version
            ));
        }
        if h.len as usize > max_len {
            return Err(format!("frame length {} exceeds limit {max_len}", h.len));
        }
        Ok(h)
    }
}

/// Collective operations, as carried in a [`Msg::Coll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollOp {
    /// Every rank gets every contribution.
    Allgather = 1,
    /// Personalized exchange.
    Alltoall = 2,
    /// The root's payload goes to all.
    Broadcast = 3,
    /// No payload.
    Barrier = 4,
}

impl CollOp {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => CollOp::Allgather,
            2 => CollOp::Alltoall,
            3 => CollOp::Broadcast,
            4 => CollOp::Barrier,
            _ => return None,
        })
    }

    /// Lower-case name used in errors.
    pub fn name(self) -> &'static str {
        match self {
            CollOp::Allgather => "allgather",
            CollOp::Alltoall => "alltoall",
            CollOp::Broadcast => "broadcast",
            CollOp::Barrier => "barrier",
        }
    }
}

/// One protocol message.
#[derive(Debug, Clone)]
pub enum Msg {
    /// Server → client: every rank of the group has joined.
    Ready,
    /// Client → server: a contribution to collective number `seq`.
    Coll {
        /// Sequence number, counting from 0 per group.
        seq: u64,
        /// Which collective.
        op: CollOp,
        /// Root rank (broadcast only).
        root: u32,
        /// Payload parts: one for allgather/broadcast, `size` for alltoall, none for barrier.
        parts: Vec<Vec<u8>>,
    },
    /// Server → client: the result of collective `seq`.
    Result {
        /// Sequence number.
        seq: u64,
        /// Result parts.
        parts: Vec<Vec<u8>>,
    },
    /// Server → client: the group failed.
    Error(BootstrapError),
    /// Client → server: clean leave.
    Goodbye,
    /// Client → server: this rank gives up.
    Abort {
        /// Why.
        reason: String,
    },
}

const K_READY: u16 = 2;
const K_COLL: u16 = 3;
const K_RESULT: u16 = 4;
const K_ERROR: u16 = 5;
const K_GOODBYE: u16 = 6;
const K_ABORT: u16 = 7;

#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.0.extend_from_slice(v);
    }
    fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }
    fn parts(&mut self, parts: &[Vec<u8>]) {
        self.u32(parts.len() as u32);
        for p in parts {
            self.bytes(p);
        }
    }
}

struct Dec<'a>(&'a [u8]);

impl<'a> Dec<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!(
                "payload truncated: needed {n} more bytes, {} left",
                self.0.len()
            ));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| format!("length {n} too large"))?;
        Ok(self.take(n)?.to_vec())
    }
    fn str(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?).map_err(|e| format!("invalid UTF-8 string: {e}"))
    }
    fn parts(&mut self) -> Result<Vec<Vec<u8>>, String> {
        let n = self.u32()? as usize;
        // Each part needs at least its 8-byte length; reject counts the payload cannot hold.
        if n > self.0.len() / 8 {
            return Err(format!("part count {n} exceeds payload"));
        }
        (0..n).map(|_| self.bytes()).collect()
    }
    fn finish(self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("{} trailing bytes", self.0.len()))
        }
    }
}

fn encode_error(e: &mut Enc, err: &BootstrapError) {
    match err {
        BootstrapError::Timeout { op, missing, after } => {
            e.u8(0);
            e.str(op);
            e.u32(missing.len() as u32);
            for r in missing {
                e.u32(*r as u32);
            }
            e.u64(after.as_millis() as u64);
        }
        BootstrapError::PeerFailed { rank, reason } => {
            e.u8(1);
            e.u32(*rank as u32);
            e.str(reason);
        }
        BootstrapError::Mismatch { seq, detail } => {
            e.u8(2);
            e.u64(*seq);
            e.str(detail);
        }
        other => {
            e.u8(3);
            e.str(&other.to_string());
        }
    }
}

fn decode_error(d: &mut Dec<'_>, peer: &str) -> Result<BootstrapError, String> {
    Ok(match d.u8()? {
        0 => {
            let op = d.str()?;
            let n = d.u32()? as usize;
            if n > d.0.len() / 4 {
                return Err(format!("missing-rank count {n} exceeds payload"));
            }
            let missing = (0..n)
                .map(|_| d.u32().map(|r| r as usize))
                .collect::<Result<_, _>>()?;
            let after = Duration::from_millis(d.u64()?);
            BootstrapError::Timeout { op, missing, after }
        }
        1 => BootstrapError::PeerFailed {
            rank: d.u32()? as usize,
            reason: d.str()?,
        },
        2 => BootstrapError::Mismatch {
            seq: d.u64()?,
            detail: d.str()?,
        },
        3 => BootstrapError::Protocol {
            peer: peer.to_string(),
            detail: d.str()?,
        },
        t => return Err(format!("unknown error tag {t}")),
    })
}

/// Serializes `msg` into one frame.
pub fn encode(msg: &Msg) -> Vec<u8> {
    let mut e = Enc::default();
    let kind = match msg {
        Msg::Ready => K_READY,
        Msg::Coll {
            seq,
            op,
            root,
            parts,
        } => {
            e.u64(*seq);
            e.u8(*op as u8);
            e.u32(*root);
            e.parts(parts);
            K_COLL
        }
        Msg::Result { seq, parts } => {
            e.u64(*seq);
            e.parts(parts);
            K_RESULT
        }
        Msg::Error(err) => {
            encode_error(&mut e, err);
            K_ERROR
        }
        Msg::Goodbye => K_GOODBYE,
        Msg::Abort { reason } => {
            e.str(reason);
            K_ABORT
        }
    };
    let payload = e.0;
    let header = Header {
        magic: MAGIC,
        version: VERSION,
        kind,
        len: payload.len() as u32,
    };
    let mut frame = Vec::with_capacity(HEADER_LEN + payload.len());
    frame.extend_from_slice(&header.encode());
    frame.extend_from_slice(&payload);
    frame
}

/// Parses a frame's payload given its header fields.
fn decode_payload(kind: u16, payload: &[u8], peer: &str) -> Result<Msg, String> {
    let mut d = Dec(payload);
    let msg = match kind {
        K_READY => Msg::Ready,
        K_COLL => {
            let seq = d.u64()?;
            let op_raw = d.u8()?;
            let op =
                CollOp::from_u8(op_raw).ok_or_else(|| format!("unknown collective {op_raw}"))?;
            Msg::Coll {
                seq,
                op,
                root: d.u32()?,
                parts: d.parts()?,
            }
        }
        K_RESULT => Msg::Result {
            seq: d.u64()?,
            parts: d.parts()?,
        },
        K_ERROR => Msg::Error(decode_error(&mut d, peer)?),
        K_GOODBYE => Msg::Goodbye,
        K_ABORT => Msg::Abort { reason: d.str()? },
        other => return Err(format!("unknown frame kind {other}")),
    };
    d.finish()?;
    Ok(msg)
}

/// Writes one message.
pub fn send(stream: &mut impl Write, msg: &Msg) -> std::io::Result<()> {
    stream.write_all(&encode(msg))
}

/// Outcome of reading one frame.
pub enum Recv {
    /// A well-formed message.
    Msg(Msg),
    /// The peer closed the connection cleanly between frames.
    Closed,
}

/// Reads one frame from `stream` whose payload may be up to [`MAX_PAYLOAD`] bytes.
/// `peer` names the other side in errors.
pub fn recv(stream: &mut impl Read, peer: &str) -> Result<Recv, BootstrapError> {
    recv_limited(stream, peer, MAX_PAYLOAD)
}

/// Reads one frame from `stream`, refusing a header that claims more than `max_len`
/// payload bytes before allocating anything. `peer` names the other side in errors.
pub fn recv_limited(
    stream: &mut impl Read,
    peer: &str,
    max_len: usize,
) -> Result<Recv, BootstrapError> {
    let mut header = [0u8; HEADER_LEN];
    let mut filled = 0;
    while filled < HEADER_LEN {
        match stream.read(&mut header[filled..]) {
            Ok(0) if filled == 0 => return Ok(Recv::Closed),
            Ok(0) => {
                return Err(BootstrapError::Protocol {
                    peer: peer.to_string(),
                    detail: "connection closed in the middle of a frame header".into(),
                })
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(BootstrapError::Io {
                    context: format!("reading from {peer}"),
                    message: crate::net::describe(&e),
                })
            }
        }
    }
    let proto = |detail: String| BootstrapError::Protocol {
        peer: peer.to_string(),
        detail,
    };
    let h = Header::decode(&header, MAGIC, VERSION, max_len, "symmem bootstrap").map_err(&proto)?;
    let (kind, len) = (h.kind, h.len as usize);
    let payload = read_payload(stream, len)
        .map_err(|e| proto(format!("connection lost inside a {len}-byte frame: {e}")))?;
    decode_payload(kind, &payload, peer)
        .map(Recv::Msg)
        .map_err(proto)
}

/// Reads exactly `len` bytes, growing the buffer `READ_CHUNK` at a time as data arrives.
fn read_payload(stream: &mut impl Read, len: usize) -> std::io::Result<Vec<u8>> {
    let mut payload = Vec::with_capacity(len.min(READ_CHUNK));
    while payload.len() < len {
        let start = payload.len();
        payload.resize(start + (len - start).min(READ_CHUNK), 0);
        stream.read_exact(&mut payload[start..])?;
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(msg: Msg) {
        let frame = encode(&msg);
        match recv(&mut frame.as_slice(), "test").unwrap() {
            Recv::Msg(m) => assert_eq!(format!("{m:?}"), format!("{msg:?}")),
            Recv::Closed => panic!("closed"),
        }
    }

    #[test]
    fn messages_roundtrip() {
        roundtrip(Msg::Ready);
        roundtrip(Msg::Coll {
            seq: 5,
            op: CollOp::Alltoall,
            root: 0,
            parts: vec![vec![1, 2], vec![], vec![3]],
        });
        roundtrip(Msg::Result {
            seq: 5,
            parts: vec![vec![9; 100]],
        });
        roundtrip(Msg::Error(BootstrapError::Timeout {
            op: "barrier #2".into(),
            missing: vec![1, 3],
            after: Duration::from_millis(1500),
        }));
        roundtrip(Msg::Error(BootstrapError::PeerFailed {
            rank: 2,
            reason: "killed".into(),
        }));
        roundtrip(Msg::Goodbye);
        roundtrip(Msg::Abort {
            reason: "bye".into(),
        });
    }

    #[test]
    fn malformed_frames_are_rejected_with_the_peer_named() {
        let mut frame = encode(&Msg::Ready);
        frame[0] ^= 0xff;
        let err = recv(&mut frame.as_slice(), "rank 2").err().unwrap();
        assert!(err.to_string().contains("rank 2") && err.to_string().contains("magic"));

        let mut frame = encode(&Msg::Ready);
        frame[4] = 9;
        let err = recv(&mut frame.as_slice(), "rank 1").err().unwrap();
        assert!(err.to_string().contains("wire version 9"), "{err}");

        let mut frame = encode(&Msg::Coll {
            seq: 1,
            op: CollOp::Allgather,
            root: 0,
            parts: vec![vec![1, 2, 3]],
        });
        frame.truncate(frame.len() - 1);
        // Fix the header length so the payload itself is short: the decoder must notice.
        let len = (frame.len() - HEADER_LEN) as u32;
        frame[8..12].copy_from_slice(&len.to_le_bytes());
        let err = recv(&mut frame.as_slice(), "rank 0").err().unwrap();
        assert!(err.to_string().contains("truncated"), "{err}");

        let mut frame = encode(&Msg::Ready);
        frame[6] = 200;
        let err = recv(&mut frame.as_slice(), "rank 0").err().unwrap();
        assert!(err.to_string().contains("unknown frame kind"), "{err}");

        let mut frame = encode(&Msg::Ready);
        frame[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = recv(&mut frame.as_slice(), "rank 0").err().unwrap();
        assert!(err.to_string().contains("exceeds limit"), "{err}");
    }

    #[test]
    fn a_caller_limit_refuses_a_big_header_before_reading_it() {
        let mut frame = encode(&Msg::Ready);
        frame[8..12].copy_from_slice(&(1u32 << 30).to_le_bytes());
        let err = recv_limited(&mut frame.as_slice(), "peer 10.0.0.9:4000", 256)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("10.0.0.9:4000") && err.contains("exceeds limit 256"),
            "{err}"
        );
    }

    /// A reader that hands out `left` bytes, then reports end of stream, and remembers the
    /// largest buffer it was asked to fill.
    struct Trickle {
        header: Vec<u8>,
        left: usize,
        largest_ask: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if !self.header.is_empty() {
                let n = buf.len().min(self.header.len());
                buf[..n].copy_from_slice(&self.header[..n]);
                self.header.drain(..n);
                return Ok(n);
            }
            self.largest_ask = self.largest_ask.max(buf.len());
            let n = buf.len().min(self.left);
            self.left -= n;
            buf[..n].fill(0);
            Ok(n)
        }
    }

    #[test]
    fn a_lying_length_is_read_in_chunks() {
        let mut header = encode(&Msg::Ready);
        header[8..12].copy_from_slice(&((1u32 << 30) - 1).to_le_bytes());
        let mut r = Trickle {
            header,
            left: 100_000,
            largest_ask: 0,
        };
        let err = recv(&mut r, "rank 3").err().unwrap().to_string();
        assert!(
            err.contains("rank 3") && err.contains("inside a 1073741823-byte frame"),
            "{err}"
        );
        // Never more than one chunk asked for beyond the data that came.
        assert!(r.largest_ask <= READ_CHUNK, "{}", r.largest_ask);
    }

    mod properties {
        use super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        fn parts() -> impl Strategy<Value = Vec<Vec<u8>>> {
            vec(vec(any::<u8>(), 0..40), 0..6)
        }

        /// The errors a server sends that the wire carries field by field (any other
        /// travels as its text and reads back as a protocol error).
        fn error() -> impl Strategy<Value = BootstrapError> {
            prop_oneof![
                (".{0,20}", vec(0..=u32::MAX as usize, 0..8), any::<u64>()).prop_map(
                    |(op, missing, ms)| BootstrapError::Timeout {
                        op,
                        missing,
                        after: Duration::from_millis(ms),
                    }
                ),
                (0..=u32::MAX as usize, ".{0,20}")
                    .prop_map(|(rank, reason)| BootstrapError::PeerFailed { rank, reason }),
                (any::<u64>(), ".{0,20}")
                    .prop_map(|(seq, detail)| BootstrapError::Mismatch { seq, detail }),
            ]
        }

        fn msg() -> impl Strategy<Value = Msg> {
            let op = prop_oneof![
                Just(CollOp::Allgather),
                Just(CollOp::Alltoall),
                Just(CollOp::Broadcast),
                Just(CollOp::Barrier),
            ];
            prop_oneof![
                Just(Msg::Ready),
                (any::<u64>(), op, any::<u32>(), parts()).prop_map(|(seq, op, root, parts)| {
                    Msg::Coll {
                        seq,
                        op,
                        root,
                        parts,
                    }
                }),
                (any::<u64>(), parts()).prop_map(|(seq, parts)| Msg::Result { seq, parts }),
                error().prop_map(Msg::Error),
                Just(Msg::Goodbye),
                ".{0,40}".prop_map(|reason| Msg::Abort { reason }),
            ]
        }

        /// Hands out at most `step` bytes per read, as a socket may.
        struct Pieces<'a> {
            data: &'a [u8],
            step: usize,
        }

        impl Read for Pieces<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.step).min(self.data.len());
                buf[..n].copy_from_slice(&self.data[..n]);
                self.data = &self.data[n..];
                Ok(n)
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Every frame type reads back as what was encoded, also when the bytes
            /// arrive a few at a time.
            #[test]
            fn decode_of_encode_is_the_message(m in msg(), step in 1..64usize) {
                let frame = encode(&m);
                let mut r = Pieces { data: &frame, step };
                match recv(&mut r, "peer").unwrap() {
                    Recv::Msg(got) => prop_assert_eq!(format!("{got:?}"), format!("{m:?}")),
                    Recv::Closed => prop_assert!(false, "an encoded {m:?} read as closed"),
                }
                prop_assert!(matches!(recv(&mut r, "peer"), Ok(Recv::Closed)));
            }

            /// Arbitrary bytes, and frames with arbitrary payloads behind a valid header,
            /// are read as messages or refused, never a panic or an allocation past the
            /// limit.
            #[test]
            fn arbitrary_bytes_never_panic(
                bytes in vec(any::<u8>(), 0..200),
                kind in 0..9u16,
                payload in vec(any::<u8>(), 0..200),
            ) {
                let mut r = bytes.as_slice();
                while let Ok(Recv::Msg(_)) = recv_limited(&mut r, "peer", 1 << 16) {}
                let mut frame = Header { magic: MAGIC, version: VERSION, kind, len: payload.len() as u32 }
                    .encode()
                    .to_vec();
                frame.extend_from_slice(&payload);
                let _ = recv_limited(&mut frame.as_slice(), "peer", 1 << 16);
            }
        }
    }
}
