//! Frames of the socket transport.
//!
//! Every frame is the bootstrap's checked 12-byte header
//! ([`symmem_bootstrap::wire::Header`]) with this protocol's magic and version, then a
//! body whose size the header states and whose layout the kind fixes:
//!
//! ```text
//! kind          body
//! HELLO    1    job key u64 | sender PE u32 | n_pes u32                   (16 bytes)
//! REQUEST  2    Request (64 bytes, `local` zeroed, `tag` = request id) | payload
//!               (req.len bytes for Put and PutSignal, none otherwise)
//! RESPONSE 3    request id u64 | value u64 | payload (a Get's data)
//! FLUSH    4    flush id u64
//! FLUSHED  5    flush id u64: every request before the FLUSH has been applied
//! GOODBYE  6    (empty) the sender is shutting down cleanly
//! REFUSED  7    UTF-8 reason (at most MAX_REASON bytes); the connection closes
//! ```
//!
//! Lengths are checked against the kind before a body is read: a frame whose length
//! does not fit its kind, or whose payload exceeds [`MAX_CHUNK`], closes the connection
//! and nothing of it reaches memory. An answer (RESPONSE or FLUSHED) must be the
//! [`Answer`] its request waits for, kind and length, or the connection closes.

use symmem_bootstrap::wire::{Header, HEADER_LEN};
use symmem_device::{Opcode, Request};

/// "SYMT".
pub(in crate::socket) const MAGIC: u32 = 0x5359_4d54;
/// Version of these frames; a peer with another version is refused.
pub(in crate::socket) const VERSION: u16 = 1;
/// Largest payload of one frame; longer puts and gets are split into chunks.
pub(in crate::socket) const MAX_CHUNK: usize = 1 << 20;
/// Largest REFUSED reason.
pub(in crate::socket) const MAX_REASON: usize = 4096;
/// Bytes of a [`Request`] on the wire.
pub(in crate::socket) const REQUEST_LEN: usize = std::mem::size_of::<Request>();
/// Largest frame body.
pub(in crate::socket) const MAX_BODY: usize = REQUEST_LEN + MAX_CHUNK;

/// Frame kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub(in crate::socket) enum Kind {
    Hello = 1,
    Request = 2,
    Response = 3,
    Flush = 4,
    Flushed = 5,
    Goodbye = 6,
    Refused = 7,
}

impl Kind {
    fn from_u16(k: u16) -> Option<Kind> {
        Some(match k {
            1 => Kind::Hello,
            2 => Kind::Request,
            3 => Kind::Response,
            4 => Kind::Flush,
            5 => Kind::Flushed,
            6 => Kind::Goodbye,
            7 => Kind::Refused,
            _ => return None,
        })
    }
}

/// A frame header's wire form.
pub(in crate::socket) fn header(kind: Kind, body: usize) -> [u8; HEADER_LEN] {
    Header {
        magic: MAGIC,
        version: VERSION,
        kind: kind as u16,
        len: body as u32,
    }
    .encode()
}

/// Checks a received header: magic, version, a known kind, and a body length that kind
/// can have.
pub(in crate::socket) fn check_header(b: &[u8; HEADER_LEN]) -> Result<(Kind, usize), String> {
    let h = Header::decode(b, MAGIC, VERSION, MAX_BODY, "symmem socket transport")?;
    let kind = Kind::from_u16(h.kind).ok_or_else(|| format!("unknown frame kind {}", h.kind))?;
    let len = h.len as usize;
    let ok = match kind {
        Kind::Hello => len == 16,
        Kind::Request => len >= REQUEST_LEN,
        Kind::Response => (16..=16 + MAX_CHUNK).contains(&len),
        Kind::Flush | Kind::Flushed => len == 8,
        Kind::Goodbye => len == 0,
        Kind::Refused => len <= MAX_REASON,
    };
    if !ok {
        return Err(format!("a {kind:?} frame cannot be {len} bytes long"));
    }
    Ok((kind, len))
}

/// Checks that a REQUEST frame's body length matches its request: the payload is the
/// request's data for puts, nothing otherwise.
pub(in crate::socket) fn check_request_len(req: &Request, body: usize) -> Result<(), String> {
    let payload = body - REQUEST_LEN;
    let want = match req.opcode() {
        Some(Opcode::Put | Opcode::PutSignal) => req.len,
        _ => 0,
    };
    if payload as u64 != want {
        return Err(format!(
            "request frame carries {payload} payload bytes, its {} request says {want}",
            req.opcode().map_or("unknown", Opcode::name)
        ));
    }
    if req.opcode() == Some(Opcode::Get) && req.len > MAX_CHUNK as u64 {
        return Err(format!(
            "get of {} bytes exceeds the {MAX_CHUNK}-byte chunk",
            req.len
        ));
    }
    Ok(())
}

/// The answer a request waits for, recorded with its response slot: an answer of
/// another kind or length is a protocol error, never delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::socket) enum Answer {
    /// A RESPONSE carrying a get's data, this many bytes of it.
    Data(usize),
    /// A RESPONSE carrying a fetching AMO's old value and no data.
    Value,
    /// A FLUSHED: everything sent before the FLUSH has been applied.
    Flushed,
}

impl Answer {
    /// The answer `req` waits for: none for puts, signals and non-fetching AMOs.
    pub(in crate::socket) fn to(req: &Request) -> Option<Answer> {
        match req.opcode() {
            Some(Opcode::Get) => Some(Answer::Data(req.len as usize)),
            Some(Opcode::Amo) if req.returns_data() => Some(Answer::Value),
            _ => None,
        }
    }

    /// Bytes of this answer's frame on the wire, header included.
    pub(in crate::socket) fn frame_len(self) -> usize {
        HEADER_LEN
            + match self {
                Answer::Data(len) => 16 + len,
                Answer::Value => 16,
                Answer::Flushed => 8,
            }
    }

    /// Checks a RESPONSE to request `id` carrying `data` bytes against this answer.
    pub(in crate::socket) fn check_response(self, id: u64, data: usize) -> Result<(), String> {
        match self {
            Answer::Data(len) if len == data => Ok(()),
            Answer::Value if data == 0 => Ok(()),
            _ => Err(format!(
                "a RESPONSE with {data} bytes of data for request {id}, which awaits {self}"
            )),
        }
    }

    /// Checks a FLUSHED for request `id` against this answer.
    pub(in crate::socket) fn check_flushed(self, id: u64) -> Result<(), String> {
        match self {
            Answer::Flushed => Ok(()),
            _ => Err(format!("a FLUSHED for request {id}, which awaits {self}")),
        }
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Data(len) => write!(f, "a RESPONSE with {len} bytes of get data"),
            Answer::Value => f.write_str("a RESPONSE with a fetched value and no data"),
            Answer::Flushed => f.write_str("a FLUSHED"),
        }
    }
}

/// Two little-endian u64s.
pub(in crate::socket) fn two_u64(a: u64, b: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&a.to_le_bytes());
    out[8..].copy_from_slice(&b.to_le_bytes());
    out
}

/// A FLUSH or FLUSHED frame (`kind`) for flush `id`.
pub(in crate::socket) fn flush_frame(kind: Kind, id: u64) -> [u8; HEADER_LEN + 8] {
    debug_assert!(matches!(kind, Kind::Flush | Kind::Flushed));
    let mut f = [0u8; HEADER_LEN + 8];
    f[..HEADER_LEN].copy_from_slice(&header(kind, 8));
    f[HEADER_LEN..].copy_from_slice(&id.to_le_bytes());
    f
}

/// The head of a RESPONSE to request `id`: its header (for `data` bytes of data after
/// the head), the id and `value`.
pub(in crate::socket) fn response_head(id: u64, value: u64, data: usize) -> [u8; HEADER_LEN + 16] {
    let mut f = [0u8; HEADER_LEN + 16];
    f[..HEADER_LEN].copy_from_slice(&header(Kind::Response, 16 + data));
    f[HEADER_LEN..].copy_from_slice(&two_u64(id, value));
    f
}

/// A REFUSED frame giving `why`, cut to [`MAX_REASON`] bytes.
pub(in crate::socket) fn refused(why: &str) -> Vec<u8> {
    let text = &why.as_bytes()[..why.len().min(MAX_REASON)];
    let mut f = header(Kind::Refused, text.len()).to_vec();
    f.extend_from_slice(text);
    f
}

/// Payloads up to this size are copied next to their request and sent with it in one
/// contiguous write (`p`, signals, small puts).
pub(in crate::socket) const INLINE_PAYLOAD: usize = 64;

/// A REQUEST frame's head: header and request, with the payload too when it is at most
/// [`INLINE_PAYLOAD`] bytes.
pub(in crate::socket) struct RequestHead {
    bytes: [u8; HEADER_LEN + REQUEST_LEN + INLINE_PAYLOAD],
    len: usize,
}

impl RequestHead {
    /// The head of request `req` sent as request `id` with `payload`, and the rest of the
    /// payload to send after it. Addresses of this process mean nothing to the peer: the
    /// id travels in `tag`, and only whether a value is wanted back in `local`.
    pub(in crate::socket) fn new(mut req: Request, id: u64, payload: &[u8]) -> (Self, &[u8]) {
        req.tag = id;
        req.local = u64::from(req.returns_data());
        let inline = if payload.len() <= INLINE_PAYLOAD {
            payload.len()
        } else {
            0
        };
        let mut bytes = [0u8; HEADER_LEN + REQUEST_LEN + INLINE_PAYLOAD];
        bytes[..HEADER_LEN].copy_from_slice(&header(Kind::Request, REQUEST_LEN + payload.len()));
        bytes[HEADER_LEN..HEADER_LEN + REQUEST_LEN].copy_from_slice(bytemuck::bytes_of(&req));
        bytes[HEADER_LEN + REQUEST_LEN..][..inline].copy_from_slice(&payload[..inline]);
        let head = RequestHead {
            bytes,
            len: HEADER_LEN + REQUEST_LEN + inline,
        };
        (head, &payload[inline..])
    }

    /// The head's bytes.
    pub(in crate::socket) fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[cfg(test)]
pub(in crate::socket) mod tests {
    use super::*;
    use symmem_device::SignalOp;

    #[test]
    fn headers_are_checked_before_any_body_is_read() {
        let h = header(Kind::Request, REQUEST_LEN + 8);
        assert_eq!(check_header(&h), Ok((Kind::Request, REQUEST_LEN + 8)));
        let e = check_header(&header(Kind::Request, MAX_BODY + 1)).unwrap_err();
        assert!(e.contains("exceeds limit"), "{e}");
        let e = check_header(&header(Kind::Hello, 17)).unwrap_err();
        assert!(e.contains("Hello frame cannot be 17"), "{e}");
        let e = check_header(&header(Kind::Request, 3)).unwrap_err();
        assert!(e.contains("cannot be 3"), "{e}");
        let mut bad = header(Kind::Flush, 8);
        bad[6] = 99;
        assert!(check_header(&bad)
            .unwrap_err()
            .contains("unknown frame kind 99"));
        let mut other = header(Kind::Flush, 8);
        other[0] ^= 1;
        assert!(check_header(&other).unwrap_err().contains("bad magic"));
        let mut old = header(Kind::Flush, 8);
        old[4] = 0;
        assert!(check_header(&old).unwrap_err().contains("wire version 0"));
    }

    #[test]
    fn request_payloads_must_match_their_request() {
        let put = Request::put(1, 0, 0, 100);
        assert!(check_request_len(&put, REQUEST_LEN + 100).is_ok());
        let e = check_request_len(&put, REQUEST_LEN + 99).unwrap_err();
        assert!(
            e.contains("carries 99 payload bytes, its put request says 100"),
            "{e}"
        );
        let ps = Request::put_signal(1, 0, 0, 8, 64, SignalOp::Set, 1);
        assert!(check_request_len(&ps, REQUEST_LEN + 8).is_ok());
        let sig = Request::signal(1, 0, SignalOp::Add, 1);
        assert!(check_request_len(&sig, REQUEST_LEN + 1).is_err());
        let big_get = Request::get(1, 0, 0, MAX_CHUNK as u64 + 1);
        assert!(check_request_len(&big_get, REQUEST_LEN).is_err());
    }

    #[test]
    fn answers_must_be_of_the_kind_and_length_their_request_waits_for() {
        let get = Answer::to(&Request::get(1, 0, 0, 64)).unwrap();
        assert_eq!(get, Answer::Data(64));
        assert_eq!(get.frame_len(), HEADER_LEN + 16 + 64);
        assert!(get.check_response(3, 64).is_ok());
        let e = get.check_response(3, 32).unwrap_err();
        assert_eq!(
            e,
            "a RESPONSE with 32 bytes of data for request 3, which awaits a RESPONSE with 64 bytes of get data"
        );
        let e = get.check_flushed(3).unwrap_err();
        assert!(
            e.contains("a FLUSHED for request 3, which awaits a RESPONSE"),
            "{e}"
        );
        let fetch = Request::amo(1, symmem_device::AmoKind::FetchAdd, 8, 0, 1, 0, 1);
        assert_eq!(Answer::to(&fetch), Some(Answer::Value));
        assert!(Answer::Value.check_response(4, 0).is_ok());
        assert!(Answer::Value.check_response(4, 8).is_err());
        assert!(Answer::Value.check_flushed(4).is_err());
        assert!(Answer::Flushed.check_flushed(5).is_ok());
        let e = Answer::Flushed.check_response(5, 0).unwrap_err();
        assert!(e.ends_with("which awaits a FLUSHED"), "{e}");
        assert_eq!(Answer::to(&Request::put(1, 0, 0, 8)), None);
    }

    /// The encoders write what the checks read back: a small payload inline in a
    /// request's head, a large one after it; flushes, responses and reasons.
    #[test]
    fn encoded_frames_read_back_as_written() {
        let put = Request::put(1, 8, 0x1234, 3);
        let (head, rest) = RequestHead::new(put, 9, &[1, 2, 3]);
        assert!(rest.is_empty());
        let b = head.bytes();
        let h: [u8; HEADER_LEN] = b[..HEADER_LEN].try_into().unwrap();
        assert_eq!(check_header(&h), Ok((Kind::Request, REQUEST_LEN + 3)));
        let sent: Request = bytemuck::pod_read_unaligned(&b[HEADER_LEN..][..REQUEST_LEN]);
        assert_eq!(
            (sent.tag, sent.local),
            (9, 0),
            "the id, and no local address"
        );
        assert_eq!(&b[HEADER_LEN + REQUEST_LEN..], &[1, 2, 3]);
        let big = [5u8; INLINE_PAYLOAD + 1];
        let (head, rest) = RequestHead::new(Request::put(1, 0, 0, big.len() as u64), 2, &big);
        assert_eq!(
            (head.bytes().len(), rest.len()),
            (HEADER_LEN + REQUEST_LEN, big.len())
        );
        let f = flush_frame(Kind::Flushed, 77);
        assert_eq!(
            check_header(f[..HEADER_LEN].try_into().unwrap()),
            Ok((Kind::Flushed, 8))
        );
        assert_eq!(f[HEADER_LEN..], 77u64.to_le_bytes());
        let r = response_head(3, 4, 100);
        assert_eq!(
            check_header(r[..HEADER_LEN].try_into().unwrap()),
            Ok((Kind::Response, 116))
        );
        assert_eq!(r[HEADER_LEN..], two_u64(3, 4));
        let long = "x".repeat(MAX_REASON + 10);
        assert_eq!(refused(&long).len(), HEADER_LEN + MAX_REASON);
    }

    /// Property tests: what the checks let through, and frames read back as written.
    pub(in crate::socket) mod properties {
        use super::*;
        use crate::interface::HeapRegion;
        use crate::socket::tests::{read_frame, with_client};
        use crate::socket::Flush;
        use crate::target::Target;
        use proptest::prelude::*;

        /// A heap offset near `heap`'s bounds, or anywhere.
        fn offset(heap: u64) -> impl Strategy<Value = u64> {
            prop_oneof![
                0..heap + 16,
                heap.saturating_sub(16)..heap + 16,
                u64::MAX - 16..=u64::MAX,
                any::<u64>(),
            ]
        }

        /// A request as a peer may send it to a PE with a `heap`-byte heap: mostly
        /// near-valid fields, some anything.
        pub(in crate::socket) fn request(heap: u64) -> impl Strategy<Value = Request> {
            (
                prop_oneof![4 => 1..=5u8, 1 => any::<u8>()],
                prop_oneof![Just(4u8), Just(8), any::<u8>()],
                prop_oneof![4 => 0..=7u8, 1 => any::<u8>()],
                prop_oneof![4 => 0..=1u8, 1 => any::<u8>()],
                prop_oneof![0..=heap + 16, any::<u64>()],
                offset(heap),
                offset(heap),
                any::<u64>(),
                any::<u64>(),
                1..=3u64,
                0..=1u64,
            )
                .prop_map(
                    |(
                        opcode,
                        width,
                        amo,
                        signal_op,
                        len,
                        remote,
                        signal,
                        value,
                        compare,
                        tag,
                        local,
                    )| {
                        Request {
                            opcode,
                            width,
                            amo,
                            signal_op,
                            pe: 0,
                            len,
                            remote,
                            local,
                            signal,
                            value,
                            compare,
                            tag,
                        }
                    },
                )
        }

        const KINDS: [Kind; 7] = [
            Kind::Hello,
            Kind::Request,
            Kind::Response,
            Kind::Flush,
            Kind::Flushed,
            Kind::Goodbye,
            Kind::Refused,
        ];

        /// A frame kind and a body length that kind may have.
        fn kind_and_len() -> impl Strategy<Value = (Kind, usize)> {
            proptest::sample::select(KINDS.to_vec()).prop_flat_map(|kind| {
                let len = match kind {
                    Kind::Hello => Just(16).boxed(),
                    Kind::Request => (REQUEST_LEN..=MAX_BODY).boxed(),
                    Kind::Response => (16..=16 + MAX_CHUNK).boxed(),
                    Kind::Flush | Kind::Flushed => Just(8).boxed(),
                    Kind::Goodbye => Just(0).boxed(),
                    Kind::Refused => (0..=MAX_REASON).boxed(),
                };
                (Just(kind), len)
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4096))]

            /// A request that passes `Target::check` and `check_request_len` (its body
            /// length as a checked header allows) touches only bytes inside the heap:
            /// its data range, its AMO or signal word (aligned), and a put's payload is
            /// exactly its data.
            #[test]
            fn a_checked_request_touches_only_the_heap(
                (heap, req) in (0..4096u64).prop_flat_map(|h| (Just(h), request(h))),
                payload in prop_oneof![Just(None), (0..=MAX_CHUNK).prop_map(Some)],
            ) {
                let target = Target::new(HeapRegion { base: 0x10_0000, len: heap as usize, host: true });
                let body = REQUEST_LEN + payload.unwrap_or(usize::try_from(req.len).unwrap_or(MAX_BODY).min(MAX_CHUNK));
                let Ok(op) = target.check(&req) else { return Ok(()) };
                if check_request_len(&req, body).is_err() {
                    return Ok(());
                }
                let inside = |off: u64, len: u64| off.checked_add(len).is_some_and(|end| end <= heap);
                match op {
                    Opcode::Put | Opcode::Get => prop_assert!(inside(req.remote, req.len)),
                    Opcode::PutSignal => {
                        prop_assert!(inside(req.remote, req.len));
                        prop_assert!(inside(req.signal, 8) && req.signal % 8 == 0);
                    }
                    Opcode::Amo => {
                        prop_assert!(req.width == 4 || req.width == 8);
                        let width = u64::from(req.width);
                        prop_assert!(inside(req.remote, width) && req.remote % width == 0);
                    }
                    Opcode::Signal => prop_assert!(inside(req.remote, 8) && req.remote % 8 == 0),
                    Opcode::Fence | Opcode::Quiet => prop_assert!(false, "{op:?} passed the check"),
                }
                let want = if matches!(op, Opcode::Put | Opcode::PutSignal) { req.len } else { 0 };
                prop_assert_eq!((body - REQUEST_LEN) as u64, want);
                if op == Opcode::Get {
                    prop_assert!(req.len <= MAX_CHUNK as u64);
                }
            }

            /// A header reads back as the kind and length it was written with, for every
            /// length its kind may have; any 12 bytes are a header or refused.
            #[test]
            fn headers_read_back_as_written((kind, len) in kind_and_len(), junk in any::<[u8; HEADER_LEN]>()) {
                prop_assert_eq!(check_header(&header(kind, len)), Ok((kind, len)));
                if let Ok((_, len)) = check_header(&junk) {
                    prop_assert!(len <= MAX_BODY);
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// A request sent by the transport's encoder reads back from the socket as
            /// that request (its id in `tag`, only whether a value is wanted in `local`)
            /// followed by its payload.
            #[test]
            fn a_sent_request_reads_back_as_sent(
                mut req in request(1 << 16),
                payload in proptest::collection::vec(any::<u8>(), 0..200),
            ) {
                req.opcode = req.opcode % 5 + 1;
                // The issuing side splits gets into chunks: one never waits for more.
                if req.opcode() == Some(Opcode::Get) {
                    req.len %= MAX_CHUNK as u64 + 1;
                }
                let payload = if matches!(req.opcode(), Some(Opcode::Put | Opcode::PutSignal)) {
                    req.len = payload.len() as u64;
                    payload
                } else {
                    Vec::new()
                };
                let mut heap = [0u64; 1];
                let (sh, mut client) = with_client(&mut heap);
                let c = sh.conn(1).unwrap();
                sh.send_request(c, "test", req, &payload, Flush::Needed).unwrap();
                let (kind, body) = read_frame(&mut client);
                prop_assert_eq!(kind, Kind::Request);
                let got: Request = bytemuck::pod_read_unaligned(&body[..REQUEST_LEN]);
                let want = Request { tag: got.tag, local: req.returns_data() as u64, ..req };
                prop_assert_eq!(got, want);
                prop_assert_eq!(&body[REQUEST_LEN..], &payload[..]);
            }
        }
    }
}
