//! The socket protocol without a socket: frames handed to a connection over an in-memory
//! [`Wire`], and what the protocol does with them. It applies puts and fetching AMOs to
//! the heap, answers gets and flushes, resumes a frame cut anywhere, completes this PE's
//! own requests from their answers, and refuses a malformed frame without applying it.
//! No socket, thread or system call is involved.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use symmem_bootstrap::wire::HEADER_LEN;
use symmem_device::{AmoKind, Request};

use super::driver::wire::{Memory, Wire};
use super::protocol::frame::{self, Kind};
use super::tests::{region_of, request_frame, shared_over};
use super::{Conn, Shared, SocketTransport};
use crate::interface::{Io, Transport};

/// PE 0 over `heap`, connected to PE 1 by an in-memory wire.
fn pe0_over_memory(heap: &mut [u64]) -> Shared {
    let conns = vec![None, Some(Conn::over(1, Wire::Memory(Mutex::default())))];
    shared_over(0, conns, region_of(heap), 5)
}

fn memory(c: &Conn) -> std::sync::MutexGuard<'_, Memory> {
    match &c.wire {
        Wire::Memory(m) => m.lock().unwrap(),
        Wire::Socket { .. } => panic!("not an in-memory wire"),
    }
}

/// Hands `bytes` to the connection as if PE 1 had sent them.
fn arrive(c: &Conn, bytes: &[u8]) {
    memory(c).incoming.extend(bytes.iter().copied());
}

/// The frames PE 0 has written to PE 1 so far, taken off the wire.
fn sent(c: &Conn) -> Vec<(Kind, Vec<u8>)> {
    let out = std::mem::take(&mut memory(c).outgoing);
    let mut frames = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let h: [u8; HEADER_LEN] = out[at..at + HEADER_LEN].try_into().unwrap();
        let (kind, len) = frame::check_header(&h).unwrap();
        at += HEADER_LEN;
        frames.push((kind, out[at..at + len].to_vec()));
        at += len;
    }
    frames
}

fn u64_at(body: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(body[i..i + 8].try_into().unwrap())
}

fn flush(id: u64) -> Vec<u8> {
    let mut f = frame::header(Kind::Flush, 8).to_vec();
    f.extend_from_slice(&id.to_le_bytes());
    f
}

#[test]
fn a_put_lands_in_the_heap_and_a_flush_is_answered() {
    let mut heap = [0u64; 8];
    let sh = pe0_over_memory(&mut heap);
    let c = sh.conn(1).unwrap();
    let data: Vec<u8> = [11u64, 22].iter().flat_map(|w| w.to_le_bytes()).collect();
    arrive(c, &request_frame(&Request::put(0, 8, 0, 16), &data));
    arrive(c, &flush(7));
    assert!(sh.receive(c));
    assert!(c.failed().is_none(), "{:?}", c.failed());
    let frames = sent(c);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0].0, Kind::Flushed);
    assert_eq!(u64_at(&frames[0].1, 0), 7);
    drop(sh);
    assert_eq!(heap, [0, 11, 22, 0, 0, 0, 0, 0]);
}

#[test]
fn a_get_and_a_fetching_amo_are_answered_from_the_heap() {
    let mut heap = [0u64, 0, 5, 6, 100, 0, 0, 0];
    let sh = pe0_over_memory(&mut heap);
    let c = sh.conn(1).unwrap();
    let mut get = Request::get(0, 0, 16, 16);
    get.tag = 5;
    arrive(c, &request_frame(&get, &[]));
    let mut add = Request::amo(0, AmoKind::FetchAdd, 8, 32, 3, 0, 1);
    add.tag = 9;
    arrive(c, &request_frame(&add, &[]));
    assert!(sh.receive(c));
    let frames = sent(c);
    assert_eq!(frames.len(), 2, "{frames:?}");
    let (kind, body) = &frames[0];
    assert_eq!(*kind, Kind::Response);
    assert_eq!(
        (u64_at(body, 0), u64_at(body, 16), u64_at(body, 24)),
        (5, 5, 6)
    );
    let (kind, body) = &frames[1];
    assert_eq!(*kind, Kind::Response);
    assert_eq!(
        (u64_at(body, 0), u64_at(body, 8)),
        (9, 100),
        "the old value"
    );
    drop(sh);
    assert_eq!(heap[4], 103);
}

/// The receive state machine keeps its place between reads: a frame that arrives a byte
/// at a time is applied once, exactly as a whole one.
#[test]
fn a_frame_cut_anywhere_is_read_the_same() {
    let mut heap = [0u64; 4];
    let sh = pe0_over_memory(&mut heap);
    let c = sh.conn(1).unwrap();
    let data: Vec<u8> = (1..=24u8).collect();
    let f = request_frame(&Request::put(0, 0, 0, 24), &data);
    for b in &f {
        arrive(c, std::slice::from_ref(b));
        assert!(sh.receive(c));
        assert!(c.failed().is_none(), "{:?}", c.failed());
    }
    assert!(sent(c).is_empty());
    drop(sh);
    let got: Vec<u8> = heap.iter().flat_map(|w| w.to_le_bytes()).collect();
    assert_eq!(&got[..24], &data[..]);
    assert_eq!(&got[24..], &[0u8; 8]);
}

/// This PE's own get: its request goes out with a fresh id, and the answer with that id
/// fills the caller's buffer.
#[test]
fn this_pes_get_completes_from_its_answer() {
    let mut heap = [0u64; 4];
    let t = SocketTransport {
        shared: Arc::new(pe0_over_memory(&mut heap)),
        service: Mutex::new(None),
    };
    let c = t.shared.conn(1).unwrap();
    // The first id this PE hands out is 1: its answer can arrive before the request goes.
    let mut answer = frame::header(Kind::Response, 16 + 8).to_vec();
    answer.extend_from_slice(&frame::two_u64(1, 0));
    answer.extend_from_slice(&0xfeed_u64.to_le_bytes());
    arrive(c, &answer);
    let mut dst = [0u8; 8];
    t.submit(&Request::get(1, 0, 24, 8), Io::Dst(&mut dst))
        .unwrap();
    assert_eq!(u64::from_le_bytes(dst), 0xfeed);
    let frames = sent(c);
    assert_eq!(frames.len(), 1, "{frames:?}");
    let req: Request =
        bytemuck::pod_read_unaligned(&frames[0].1[..super::protocol::frame::REQUEST_LEN]);
    assert_eq!(
        (frames[0].0, req.tag, req.remote, req.len),
        (Kind::Request, 1, 24, 8)
    );
    assert!(lock_pending_is_empty(c));
}

fn lock_pending_is_empty(c: &Conn) -> bool {
    super::lock(&c.pending).is_empty()
}

/// A put outside the heap is refused: the connection fails naming the peer, the peer is
/// told why, and not a byte of the heap changes.
#[test]
fn a_put_outside_the_heap_is_refused_and_never_applied() {
    let mut heap = [3u64; 4];
    let sh = pe0_over_memory(&mut heap);
    let c = sh.conn(1).unwrap();
    arrive(c, &request_frame(&Request::put(0, 24, 0, 16), &[9u8; 16]));
    assert!(sh.receive(c));
    let why = c.failed().expect("the connection must fail").to_string();
    assert!(why.contains("malformed frame from PE 1"), "{why}");
    let frames = sent(c);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0].0, Kind::Refused);
    assert!(
        String::from_utf8_lossy(&frames[0].1).contains("PE 1"),
        "{frames:?}"
    );
    assert!(!c.said_goodbye.load(Ordering::Acquire));
    drop(sh);
    assert_eq!(heap, [3; 4]);
}
