//! The receive state machine of a connection, with no socket: the caller reads the
//! connection's bytes into the read-ahead buffer ([`Receiver::read_space`]) or, for a
//! payload, straight into where the payload lands, and the receiver turns them into
//! [`Event`]s: a frame's decoded head (checked: a header of an unknown kind or a length
//! its kind cannot have is refused before its body is read), the bytes of its payload,
//! and the payload's end. It keeps its place between reads, so a frame cut anywhere is
//! read the same as a whole one.
//!
//! A REQUEST's or RESPONSE's payload follows its head: the receiver hands out its bytes
//! with their offset and the caller puts them where they belong (the heap for a put, a
//! buffer for a get's answer), then acts once the payload is whole (a put_signal's
//! signal; a get's answer completed). Every REQUEST and RESPONSE ends with
//! [`Event::PayloadDone`], even one with no payload.

use symmem_bootstrap::wire::HEADER_LEN;
use symmem_device::Request;

use super::frame::{self, Kind, REQUEST_LEN};

/// Bytes the receiver reads ahead of the frame it parses.
pub(in crate::socket) const READ_AHEAD: usize = 64 << 10;

/// A frame's head, decoded and checked against its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::socket) enum Frame {
    /// A peer's request, then `payload` bytes (the caller checks them against it).
    Request { req: Request, payload: usize },
    /// An answer to request `id`: its value, then `data` bytes of a get's data.
    Response { id: u64, value: u64, data: usize },
    /// The peer asks for a FLUSHED once everything before has been applied.
    Flush { id: u64 },
    /// Everything this PE sent before its FLUSH `id` has been applied.
    Flushed { id: u64 },
    /// The peer is shutting down cleanly.
    Goodbye,
    /// The peer refused a frame of this PE's, for this reason, and closes.
    Refused(String),
    /// A HELLO after the handshake (always refused).
    Hello,
}

/// What the receiver found in the bytes it has.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::socket) enum Event<'a> {
    /// The head of the next frame.
    Frame(Frame),
    /// Bytes of the current payload, from offset `at` of it.
    Payload { at: usize, bytes: &'a [u8] },
    /// The current payload is whole (every REQUEST and RESPONSE has one, maybe empty).
    PayloadDone,
    /// More bytes are needed. `None`: read into [`Receiver::read_space`], then call
    /// [`Receiver::received`]. `Some((at, left))`: the current payload's bytes from
    /// offset `at` on, `left` of them, are still to come; read them where the payload
    /// lands and call [`Receiver::payload_read`] (or into the read-ahead buffer, as for
    /// `None`).
    Need(Option<(usize, usize)>),
}

/// Where the receiver is in the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a header.
    Header,
    /// Waiting for `len` body bytes of `kind` (all of it for small kinds; the request
    /// or response head for those with payloads).
    Body { kind: Kind, len: usize },
    /// `filled` of a payload's `len` bytes have come.
    Payload { filled: usize, len: usize },
}

/// A connection's receive side: the read-ahead buffer and the frame being parsed.
pub(in crate::socket) struct Receiver {
    buf: Vec<u8>,
    /// The unparsed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    state: State,
    /// Bytes the step that last asked for more needs in the buffer at once.
    want: usize,
}

impl Default for Receiver {
    fn default() -> Self {
        Receiver {
            buf: vec![0; READ_AHEAD],
            start: 0,
            end: 0,
            state: State::Header,
            want: 0,
        }
    }
}

impl Receiver {
    /// The next event the bytes received so far make: a frame, payload bytes, a payload's
    /// end, or a need for more bytes. An error is a malformed header: the connection
    /// must close, and nothing of the frame has been handed out.
    pub(in crate::socket) fn next(&mut self) -> Result<Event<'_>, String> {
        loop {
            let have = self.end - self.start;
            match self.state {
                State::Header => {
                    if have < HEADER_LEN {
                        self.want = HEADER_LEN;
                        return Ok(Event::Need(None));
                    }
                    let h: [u8; HEADER_LEN] = self.buf[self.start..self.start + HEADER_LEN]
                        .try_into()
                        .expect("a header's bytes");
                    let (kind, len) = frame::check_header(&h)?;
                    self.start += HEADER_LEN;
                    self.state = State::Body { kind, len };
                }
                State::Body { kind, len } => {
                    let head = match kind {
                        Kind::Request => REQUEST_LEN,
                        Kind::Response => 16,
                        _ => len,
                    };
                    if have < head {
                        self.want = head;
                        return Ok(Event::Need(None));
                    }
                    let body = &self.buf[self.start..self.start + head];
                    let u64_at =
                        |i: usize| u64::from_le_bytes(body[i..i + 8].try_into().expect("8 bytes"));
                    let (frame, payload) = match kind {
                        Kind::Request => (
                            Frame::Request {
                                req: bytemuck::pod_read_unaligned(body),
                                payload: len - head,
                            },
                            Some(len - head),
                        ),
                        Kind::Response => (
                            Frame::Response {
                                id: u64_at(0),
                                value: u64_at(8),
                                data: len - head,
                            },
                            Some(len - head),
                        ),
                        Kind::Flush => (Frame::Flush { id: u64_at(0) }, None),
                        Kind::Flushed => (Frame::Flushed { id: u64_at(0) }, None),
                        Kind::Goodbye => (Frame::Goodbye, None),
                        Kind::Refused => (
                            Frame::Refused(String::from_utf8_lossy(body).into_owned()),
                            None,
                        ),
                        Kind::Hello => (Frame::Hello, None),
                    };
                    self.start += head;
                    self.state = match payload {
                        Some(len) => State::Payload { filled: 0, len },
                        None => State::Header,
                    };
                    return Ok(Event::Frame(frame));
                }
                State::Payload { filled, len } => {
                    if filled == len {
                        self.state = State::Header;
                        return Ok(Event::PayloadDone);
                    }
                    let take = have.min(len - filled);
                    if take == 0 {
                        return Ok(Event::Need(Some((filled, len - filled))));
                    }
                    let at = self.start;
                    self.start += take;
                    self.state = State::Payload {
                        filled: filled + take,
                        len,
                    };
                    return Ok(Event::Payload {
                        at: filled,
                        bytes: &self.buf[at..at + take],
                    });
                }
            }
        }
    }

    /// Where to read the connection's next bytes: the read-ahead buffer's free tail,
    /// moved down first if the step waiting for them would not fit. Report what was read
    /// with [`Self::received`].
    pub(in crate::socket) fn read_space(&mut self) -> &mut [u8] {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.buf.len() - self.start < self.want {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// `k` bytes were read into [`Self::read_space`].
    pub(in crate::socket) fn received(&mut self, k: usize) {
        debug_assert!(self.end + k <= self.buf.len());
        self.end += k;
    }

    /// `k` bytes of the current payload were read where it lands, after the offset that
    /// [`Event::Need`] named.
    pub(in crate::socket) fn payload_read(&mut self, k: usize) {
        match &mut self.state {
            State::Payload { filled, len } if *filled + k <= *len => *filled += k,
            state => panic!("{k} payload bytes read in state {state:?}"),
        }
    }

    /// Whether the next byte starts a frame (none of its header has been parsed).
    pub(in crate::socket) fn at_frame_start(&self) -> bool {
        self.state == State::Header
    }

    /// Whether the stream stopped inside a frame: part of one has been parsed or read.
    pub(in crate::socket) fn mid_frame(&self) -> bool {
        self.state != State::Header || self.end > self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use symmem_device::SignalOp;

    /// What a receiver makes of `bytes` handed over in pieces of the given sizes (cycled):
    /// frames and each payload whole, or the error that stopped it.
    fn decode(bytes: &[u8], pieces: &[usize]) -> (Vec<(Frame, Vec<u8>)>, Option<String>) {
        let mut rx = Receiver::default();
        let (mut at, mut piece) = (0, 0);
        let mut out: Vec<(Frame, Vec<u8>)> = Vec::new();
        loop {
            match rx.next() {
                Err(why) => return (out, Some(why)),
                Ok(Event::Frame(f)) => out.push((f, Vec::new())),
                Ok(Event::Payload { at: off, bytes }) => {
                    let p = &mut out.last_mut().expect("a payload after its frame").1;
                    assert_eq!(off, p.len(), "payload bytes in order");
                    p.extend_from_slice(bytes);
                }
                Ok(Event::PayloadDone) => {}
                Ok(Event::Need(payload)) => {
                    if at == bytes.len() {
                        return (out, None);
                    }
                    let n = pieces[piece % pieces.len()].clamp(1, bytes.len() - at);
                    piece += 1;
                    match payload {
                        // Straight "into the destination", as a socket read would.
                        Some((off, left)) if piece % 2 == 0 => {
                            let n = n.min(left);
                            let p = &mut out.last_mut().expect("a frame").1;
                            assert_eq!(off, p.len());
                            p.extend_from_slice(&bytes[at..at + n]);
                            rx.payload_read(n);
                            at += n;
                        }
                        _ => {
                            let space = rx.read_space();
                            let n = n.min(space.len());
                            space[..n].copy_from_slice(&bytes[at..at + n]);
                            rx.received(n);
                            at += n;
                        }
                    }
                }
            }
        }
    }

    fn with_header(kind: Kind, body: &[u8]) -> Vec<u8> {
        let mut f = frame::header(kind, body.len()).to_vec();
        f.extend_from_slice(body);
        f
    }

    /// One of each frame a peer sends, back to back.
    fn stream() -> (Vec<u8>, Vec<(Frame, Vec<u8>)>) {
        let put = Request::put_signal(0, 0, 0, 5, 64, SignalOp::Set, 1);
        let mut body = bytemuck::bytes_of(&put).to_vec();
        body.extend_from_slice(b"hello");
        let mut bytes = with_header(Kind::Request, &body);
        bytes.extend(with_header(Kind::Response, &frame::two_u64(7, 9)));
        let mut answer = frame::two_u64(8, 0).to_vec();
        answer.extend_from_slice(&[1, 2, 3]);
        bytes.extend(with_header(Kind::Response, &answer));
        bytes.extend(with_header(Kind::Flush, &3u64.to_le_bytes()));
        bytes.extend(with_header(Kind::Flushed, &4u64.to_le_bytes()));
        bytes.extend(with_header(Kind::Goodbye, &[]));
        bytes.extend(with_header(Kind::Refused, b"no"));
        let want = vec![
            (
                Frame::Request {
                    req: put,
                    payload: 5,
                },
                b"hello".to_vec(),
            ),
            (
                Frame::Response {
                    id: 7,
                    value: 9,
                    data: 0,
                },
                Vec::new(),
            ),
            (
                Frame::Response {
                    id: 8,
                    value: 0,
                    data: 3,
                },
                vec![1, 2, 3],
            ),
            (Frame::Flush { id: 3 }, Vec::new()),
            (Frame::Flushed { id: 4 }, Vec::new()),
            (Frame::Goodbye, Vec::new()),
            (Frame::Refused("no".into()), Vec::new()),
        ];
        (bytes, want)
    }

    #[test]
    fn every_kind_of_frame_decodes_to_its_head_and_payload() {
        let (bytes, want) = stream();
        assert_eq!(decode(&bytes, &[usize::MAX]), (want, None));
    }

    /// A malformed header stops the receiver before any of its body is handed out, after
    /// the frames in front of it.
    #[test]
    fn a_bad_header_is_refused_after_the_frames_before_it() {
        let mut bytes = with_header(Kind::Flush, &1u64.to_le_bytes());
        bytes.extend(frame::header(Kind::Hello, 17));
        bytes.extend([0; 17]);
        let (frames, why) = decode(&bytes, &[usize::MAX]);
        assert_eq!(frames, [(Frame::Flush { id: 1 }, Vec::new())]);
        assert!(why.unwrap().contains("Hello frame cannot be 17"));
    }

    /// Every REQUEST and RESPONSE ends with a payload's end, even with no payload.
    #[test]
    fn every_request_and_response_ends_its_payload() {
        let (bytes, _) = stream();
        let mut rx = Receiver::default();
        let space = rx.read_space();
        space[..bytes.len()].copy_from_slice(&bytes);
        rx.received(bytes.len());
        let mut ends = 0;
        while let Ok(e) = rx.next() {
            match e {
                Event::PayloadDone => ends += 1,
                Event::Need(_) => break,
                _ => {}
            }
        }
        assert_eq!(ends, 3);
        assert!(!rx.mid_frame() && rx.at_frame_start());
    }

    proptest! {
        /// The receiver keeps its place between reads: the stream cut into pieces of any
        /// sizes, read into the buffer or straight into payloads, decodes as it does whole.
        #[test]
        fn a_stream_cut_anywhere_decodes_the_same(pieces in proptest::collection::vec(1..40usize, 1..8)) {
            let (bytes, want) = stream();
            prop_assert_eq!(decode(&bytes, &pieces), (want, None));
        }

        /// Whatever the bytes, the receiver hands out frames or stops with a reason; it
        /// never panics, and never hands out a payload longer than its header said.
        #[test]
        fn any_bytes_decode_or_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..256), cut in 1..64usize) {
            let mut good = stream().0;
            good.extend_from_slice(&bytes);
            let (frames, _) = decode(&good, &[cut]);
            for (f, payload) in frames {
                if let Frame::Request { payload: n, .. } | Frame::Response { data: n, .. } = f {
                    prop_assert!(payload.len() <= n);
                }
            }
        }
    }
}
