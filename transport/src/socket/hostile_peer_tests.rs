//! Tests of what an authenticated but misbehaving peer can do: answer a request with the
//! wrong kind of answer, or send requests and never read their answers. Neither may
//! crash the PE or grow its memory without bound.

use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use symmem_bootstrap::wire::HEADER_LEN;
use symmem_device::{AmoKind, Request};

use super::protocol::frame::{self, Kind, MAX_CHUNK, REQUEST_LEN};
use super::protocol::window::REPLY_WINDOW;
use super::tests::{collect, read_frame, request_frame, tcp_pair, transport, with_client};
use super::{lock, Conn, SocketTransport};
use crate::interface::{Io, Pending, Transport};

/// A transport for PE 0 whose connection to PE 1 is `client`'s other end, with no
/// service thread: the threads waiting for answers read the socket themselves.
fn fake_peer(heap: &mut [u64]) -> (SocketTransport, TcpStream) {
    let (sh, client) = with_client(heap);
    let t = SocketTransport {
        shared: Arc::new(sh),
        service: Mutex::new(None),
    };
    (t, client)
}

/// Reads frames from PE 0 until one of `kind`; returns its id (the first u64 of the body
/// for FLUSH, the request's tag for REQUEST).
fn next_id(client: &mut TcpStream, kind: Kind) -> u64 {
    loop {
        let (k, body) = read_frame(client);
        if k != kind {
            continue;
        }
        return match kind {
            Kind::Request => bytemuck::pod_read_unaligned::<Request>(&body[..REQUEST_LEN]).tag,
            _ => u64::from_le_bytes(body[..8].try_into().unwrap()),
        };
    }
}

fn flushed(id: u64) -> Vec<u8> {
    let mut f = frame::header(Kind::Flushed, 8).to_vec();
    f.extend_from_slice(&id.to_le_bytes());
    f
}

fn response(id: u64, value: u64, data: &[u8]) -> Vec<u8> {
    let mut f = frame::header(Kind::Response, 16 + data.len()).to_vec();
    f.extend_from_slice(&frame::two_u64(id, value));
    f.extend_from_slice(data);
    f
}

/// A FLUSHED carrying a blocking get's id: the get fails naming PE 1 and what was
/// expected (before the fix it completed with no data and panicked copying it).
#[test]
fn a_flushed_answering_a_get_fails_the_get_naming_the_peer() {
    let mut heap = [0u64; 8];
    let (t, mut client) = fake_peer(&mut heap);
    let why = std::thread::scope(|s| {
        let get = s.spawn(|| {
            let mut dst = [0u8; 64];
            t.submit(&Request::get(1, 0, 0, 64), Io::Dst(&mut dst))
        });
        let id = next_id(&mut client, Kind::Request);
        client.write_all(&flushed(id)).unwrap();
        get.join()
            .expect("the PE must not panic")
            .expect_err("the get must fail")
            .to_string()
    });
    assert!(why.contains("PE 1"), "{why}");
    assert!(
        why.contains("a FLUSHED for request") && why.contains("64 bytes of get data"),
        "{why}"
    );
    let (kind, body) = read_frame(&mut client);
    assert_eq!(kind, Kind::Refused, "the peer is told why");
    assert!(String::from_utf8_lossy(&body).contains("FLUSHED"));
}

/// A FLUSHED carrying a fetching AMO's id: the AMO fails instead of returning a made-up
/// old value of 0.
#[test]
fn a_flushed_answering_a_fetching_amo_fails_it_naming_the_peer() {
    let mut heap = [0u64; 8];
    let (t, mut client) = fake_peer(&mut heap);
    let req = Request::amo(1, AmoKind::FetchAdd, 8, 0, 1, 0, 1);
    let Pending::Reply(mut reply) = t.submit_nowait(&req, Io::None).unwrap() else {
        panic!("a fetching AMO waits for its reply");
    };
    let id = next_id(&mut client, Kind::Request);
    client.write_all(&flushed(id)).unwrap();
    let why = collect(&t, reply.as_mut(), &mut [])
        .expect_err("a FLUSHED is no fetched value")
        .to_string();
    assert!(
        why.contains("malformed frame from PE 1") && why.contains("fetched value"),
        "{why}"
    );
}

/// A RESPONSE carrying a flush's id does not end `quiet` before the peer has applied
/// the puts: `quiet` fails naming PE 1.
#[test]
fn a_response_answering_a_flush_fails_quiet_naming_the_peer() {
    let mut heap = [0u64; 8];
    let (t, mut client) = fake_peer(&mut heap);
    t.submit(&Request::put(1, 0, 0, 8), Io::Src(&[1; 8]))
        .unwrap();
    let result = std::thread::scope(|s| {
        let quiet = s.spawn(|| t.quiet());
        let id = next_id(&mut client, Kind::Flush);
        client.write_all(&response(id, 0, &[])).unwrap();
        quiet.join().expect("the PE must not panic")
    });
    let why = result.expect_err("quiet must not end early").to_string();
    assert!(
        why.contains("malformed frame from PE 1")
            && why.contains("a RESPONSE")
            && why.contains("awaits a FLUSHED"),
        "{why}"
    );
}

/// A RESPONSE whose length is not the get's: refused, naming both lengths.
#[test]
fn a_response_of_the_wrong_length_fails_the_get_naming_both_lengths() {
    let mut heap = [0u64; 8];
    let (t, mut client) = fake_peer(&mut heap);
    let why = std::thread::scope(|s| {
        let get = s.spawn(|| {
            let mut dst = [0u8; 64];
            t.submit(&Request::get(1, 0, 0, 64), Io::Dst(&mut dst))
        });
        let id = next_id(&mut client, Kind::Request);
        client.write_all(&response(id, 0, &[9; 32])).unwrap();
        get.join().unwrap().unwrap_err().to_string()
    });
    assert!(
        why.contains("PE 1") && why.contains("32 bytes") && why.contains("64 bytes of get data"),
        "{why}"
    );
}

/// Bytes of answers PE 0 holds for `c` that the socket has not taken yet.
fn queued(c: &Conn) -> usize {
    let q = lock(&c.out);
    q.frames.iter().map(Vec::len).sum::<usize>() - q.sent
}

/// A peer that sends 64 gets of 1 MiB and reads nothing: PE 0 stops reading it once its
/// queue of answers passes [`REPLY_WINDOW`] (so holds at most one more answer), goes on
/// serving PE 2 meanwhile, and answers the rest once the peer reads.
#[test]
fn a_peer_that_never_reads_its_answers_cannot_grow_the_queue_past_the_window() {
    const GETS: u64 = 64;
    let mut h0 = vec![0u64; MAX_CHUNK / 8];
    let mut h2 = vec![0u64; 8];
    let (a1, mut b1) = tcp_pair();
    let (a2, b2) = tcp_pair();
    b1.set_nonblocking(false).unwrap();
    b1.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let pe0 = transport(
        0,
        vec![None, Some(Conn::new(1, a1)), Some(Conn::new(2, a2))],
        &mut h0,
    );
    let pe2 = transport(2, vec![Some(Conn::new(0, b2)), None, None], &mut h2);
    for i in 0..GETS {
        let mut get = Request::get(0, 0, 0, MAX_CHUNK as u64);
        get.tag = 1000 + i;
        b1.write_all(&request_frame(&get, &[])).unwrap();
    }
    let c1 = pe0.shared.conn(1).unwrap();
    let one_answer = HEADER_LEN + 16 + MAX_CHUNK;
    let mut most = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(500) {
        most = most.max(queued(c1));
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(most > 0, "PE 0 answered nothing");
    assert!(
        most <= REPLY_WINDOW + one_answer,
        "PE 0 queued {most} bytes of answers for a peer that reads nothing"
    );
    // PE 0's service thread still serves PE 2.
    pe2.submit(&Request::put(0, 8, 0, 8), Io::Src(&7u64.to_le_bytes()))
        .unwrap();
    let mut got = [0u8; 8];
    pe2.submit(&Request::get(0, 0, 8, 8), Io::Dst(&mut got))
        .unwrap();
    assert_eq!(u64::from_le_bytes(got), 7);
    // Once PE 1 reads, every get is answered, in order.
    for i in 0..GETS {
        let (kind, body) = read_frame(&mut b1);
        assert_eq!(kind, Kind::Response);
        assert_eq!(u64::from_le_bytes(body[..8].try_into().unwrap()), 1000 + i);
        assert_eq!(body.len(), 16 + MAX_CHUNK);
    }
    assert!(c1.failed().is_none(), "{:?}", c1.failed());
    assert_eq!(queued(c1), 0);
    pe2.shutdown();
    pe0.shutdown();
}

/// Two PEs that each send 32 gets of 1 MiB to the other before collecting any answer:
/// both complete (each keeps its answers outstanding within the window the other will
/// queue, so neither ever stops reading the other).
#[test]
fn two_pes_getting_megabytes_from_each_other_at_once_do_not_deadlock() {
    const GETS: usize = 32;
    let mut h0: Vec<u64> = (0..MAX_CHUNK as u64 / 8).collect();
    let mut h1: Vec<u64> = (0..MAX_CHUNK as u64 / 8).map(|x| !x).collect();
    let (want0, want1) = (h1.clone(), h0.clone());
    let (a, b) = tcp_pair();
    let pe0 = transport(0, vec![None, Some(Conn::new(1, a))], &mut h0);
    let pe1 = transport(1, vec![Some(Conn::new(0, b)), None], &mut h1);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for (t, peer, want) in [(&pe0, 1u32, &want0), (&pe1, 0, &want1)] {
            s.spawn(move || {
                let mut dsts = vec![vec![0u8; MAX_CHUNK]; GETS];
                let mut replies = Vec::new();
                for d in &mut dsts {
                    let get = Request::get(peer, 0, 0, MAX_CHUNK as u64);
                    match t.submit_nowait(&get, Io::Dst(d)).unwrap() {
                        Pending::Reply(r) => replies.push(r),
                        Pending::Done(_) => panic!("a 1 MiB get waited for its reply"),
                    }
                }
                for (r, d) in replies.iter_mut().zip(&mut dsts) {
                    collect(t, r.as_mut(), d).unwrap();
                    assert_eq!(&d[..], bytemuck::cast_slice::<u64, u8>(want));
                }
            });
        }
    });
    assert!(t0.elapsed() < Duration::from_secs(10));
    let sh = &pe0.shared;
    assert!(
        sh.conn(1).unwrap().flow.try_reserve(REPLY_WINDOW),
        "answers still awaited"
    );
    pe0.shutdown();
    pe1.shutdown();
}
