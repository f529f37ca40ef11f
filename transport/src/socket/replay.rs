//! A fake peer that feeds PE 0's receive side whatever bytes it is given, as "PE 1" would,
//! over an in-memory wire: the protocol's receive state machine and the heap it applies
//! requests to, with no socket and no thread. For fuzzing and property tests of
//! everything the socket transport reads from a peer.
//!
//! PE 0 waits for three answers when the bytes start arriving, so that answers reach
//! their checks too: request 1 awaits 64 bytes of get data, request 2 a fetched value,
//! request 3 a FLUSHED.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;
use std::time::Duration;

use super::driver::wire::{Memory, Wire};
use super::protocol::frame::Answer;
use super::{Conn, Shared};
use crate::interface::HeapRegion;
use crate::target::Target;

/// Feeds `bytes` to a PE 0 with the host heap `heap`, then ends the stream; returns why
/// PE 0 closed the connection (a malformed frame, or the end of the bytes). What PE 0
/// answers is dropped. Panics if PE 0 stops before the end of the bytes.
pub(crate) fn replay(heap: HeapRegion, bytes: &[u8]) -> String {
    let wire = Memory {
        incoming: bytes.iter().copied().collect(),
        closed: true,
        outgoing: Vec::new(),
    };
    let sh = Shared {
        me: 0,
        conns: vec![None, Some(Conn::over(1, Wire::Memory(Mutex::new(wire))))],
        target: Target::new(heap),
        timeout: Some(Duration::from_secs(10)),
        next_id: AtomicU64::new(4),
        stopping: AtomicBool::new(false),
        spins: AtomicU64::new(0),
        blocked: Default::default(),
        writes_staged_soon: AtomicBool::new(false),
    };
    let c = sh.conn(1).expect("PE 1's connection");
    for (id, awaits) in [
        (1, Answer::Data(64)),
        (2, Answer::Value),
        (3, Answer::Flushed),
    ] {
        sh.reserve(c, "replay", awaits.frame_len())
            .expect("an empty window has room for three answers");
        sh.expect(c, id, awaits);
    }
    // An in-memory wire takes every answer at once, so the answers never fill the
    // window and every drain reads on: each round reads at least a byte, or ends.
    for _ in 0..=bytes.len() {
        if let Some(why) = c.failed() {
            return why.to_string();
        }
        sh.receive(c);
        sh.flush_out(c);
        if let Wire::Memory(m) = &c.wire {
            m.lock().unwrap_or_else(|p| p.into_inner()).outgoing.clear();
        }
    }
    c.failed()
        .map(str::to_string)
        .expect("PE 0 stopped reading its peer before the end of the bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::protocol::frame::tests::properties::request;
    use crate::socket::protocol::frame::{self, Kind, REQUEST_LEN};
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// Bytes of heap under test, and of the canaries on each side of it.
    const HEAP: usize = 256;
    const PAD: usize = 64;
    const CANARY: u8 = 0xa5;

    /// One frame a peer may send: a request (with a payload of its length, or of some
    /// other), an answer to one of the three awaited requests, a flush or goodbye, or
    /// junk.
    fn frame() -> impl Strategy<Value = Vec<u8>> {
        let with_header = |kind: Kind, body: Vec<u8>| {
            let mut f = frame::header(kind, body.len()).to_vec();
            f.extend_from_slice(&body);
            f
        };
        prop_oneof![
            4 => (request(HEAP as u64), any::<bool>(), vec(any::<u8>(), 0..48)).prop_map(
                move |(req, exact, other)| {
                    let mut body = bytemuck::bytes_of(&req).to_vec();
                    match usize::try_from(req.len) {
                        Ok(len) if exact && len <= 2 * HEAP => body.resize(REQUEST_LEN + len, 7),
                        _ => body.extend_from_slice(&other),
                    }
                    with_header(Kind::Request, body)
                }
            ),
            1 => (1..=4u64, any::<u64>(), prop_oneof![Just(0usize), Just(64), 0..80usize]).prop_map(
                move |(id, value, data)| {
                    let mut body = frame::two_u64(id, value).to_vec();
                    body.resize(16 + data, 3);
                    with_header(Kind::Response, body)
                }
            ),
            1 => (prop_oneof![Just(Kind::Flush), Just(Kind::Flushed)], 1..=4u64)
                .prop_map(move |(kind, id)| with_header(kind, id.to_le_bytes().to_vec())),
            1 => Just(with_header(Kind::Goodbye, Vec::new())),
            1 => vec(any::<u8>(), 0..24),
        ]
    }

    /// A put lands in the heap, and the end of the bytes closes the connection.
    #[test]
    fn a_put_lands_then_the_end_of_the_bytes_closes() {
        let mut mem = [0u64; 4];
        let heap = HeapRegion {
            base: mem.as_mut_ptr() as u64,
            len: 32,
            host: true,
        };
        let mut f = frame::header(Kind::Request, REQUEST_LEN + 8).to_vec();
        f.extend_from_slice(bytemuck::bytes_of(&symmem_device::Request::put(0, 8, 0, 8)));
        f.extend_from_slice(&7u64.to_le_bytes());
        let why = replay(heap, &f);
        assert_eq!(mem, [0, 7, 0, 0]);
        assert!(why.contains("connection to PE 1 closed"), "{why}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever a peer sends, the receive side refuses it or applies it within the
        /// heap: the bytes on either side of it are never written, and it never panics.
        #[test]
        fn a_peers_frames_never_write_outside_the_heap(frames in vec(frame(), 1..12)) {
            // Words, so that the heap is aligned for its atomics.
            let mut mem = vec![u64::from_ne_bytes([CANARY; 8]); (PAD + HEAP + PAD) / 8];
            let heap = HeapRegion {
                base: mem[PAD / 8..].as_mut_ptr() as u64,
                len: HEAP,
                host: true,
            };
            let why = replay(heap, &frames.concat());
            prop_assert!(why.contains("PE 1"), "{}", why);
            let bytes: &[u8] = bytemuck::cast_slice(&mem);
            prop_assert!(bytes[..PAD].iter().all(|&b| b == CANARY), "written below the heap");
            prop_assert!(bytes[PAD + HEAP..].iter().all(|&b| b == CANARY), "written above the heap");
        }
    }
}
