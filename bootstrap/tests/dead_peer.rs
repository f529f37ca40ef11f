//! A rank that stops reading cannot stall the rendezvous: the server's writes to it are
//! bounded, and once one times out the group fails naming that rank.

use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use symmem_bootstrap::auth::{self, JobKey, Protocol};
use symmem_bootstrap::tcp::{Claim, RendezvousServer, TcpBootstrap};
use symmem_bootstrap::wire::{self, CollOp, Msg};
use symmem_bootstrap::{Bootstrap, BootstrapError};

#[test]
fn a_rank_that_stops_reading_is_cut_off_and_named() {
    let key = JobKey::derive(b"dead peer test", "dead_peer");
    // The bootstrap timeout bounds the server's writes when it is shorter than the
    // dead-peer time (30 s by default).
    let timeout = Duration::from_secs(3);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = RendezvousServer::start(listener, key.clone(), 2, timeout).unwrap();
    let addr = server.addr();
    // Rank 1 joins and contributes to an allgather, then never reads a byte.
    let mut stuck = TcpStream::connect(addr).unwrap();
    let claim = Claim {
        session: 0,
        rank: 1,
        size: 2,
        pid: std::process::id(),
    };
    let deadline = Instant::now() + timeout;
    auth::client_handshake(
        &mut stuck,
        &key,
        Protocol::Rendezvous,
        &claim.encode(),
        deadline,
    )
    .unwrap();
    let rank0 = std::thread::spawn(move || {
        let b = TcpBootstrap::connect(&addr.to_string(), &key, 0, 0, 2, timeout).unwrap();
        // Far more than the socket buffers hold, so the copy sent to rank 1 must stall.
        let big = vec![7u8; 64 << 20];
        let all = b.allgather(&big).unwrap();
        assert_eq!(all[0].len(), big.len());
        let start = Instant::now();
        let err = b.barrier().unwrap_err();
        (err, start.elapsed())
    });
    let mine = Msg::Coll {
        seq: 0,
        op: CollOp::Allgather,
        root: 0,
        parts: vec![vec![1]],
    };
    // Rank 1's contribution can only be sent after it was told the group is ready, which
    // it does not read: the server sends that frame whether or not it is read.
    wire::send(&mut stuck, &mine).unwrap();
    let (err, waited) = rank0.join().unwrap();
    match &err {
        BootstrapError::PeerFailed { rank: 1, reason } => assert!(
            reason.contains("accepted nothing") && reason.contains("SYMMEM_DEAD_PEER_TIMEOUT"),
            "{err}"
        ),
        other => panic!("expected rank 1 to be named, got {other}"),
    }
    // The write bound (3 s) plus slack; rank 0's own deadline would only fire later.
    assert!(waited < timeout + Duration::from_secs(2), "took {waited:?}");
    drop(stuck);
}
