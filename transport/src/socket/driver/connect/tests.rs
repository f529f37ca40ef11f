use std::io::Write;
use std::sync::Arc;
use std::thread;

use symmem_bootstrap::single::SingleBootstrap;

use super::*;
use crate::config::TransportConfig;
use crate::interface::{HeapRegion, OpCounter};

/// Runs `f` with PE `me`'s setup of a job of `n` PEs that all reach each other remotely.
fn with_setup<T>(me: usize, n: usize, deadline: Instant, f: impl FnOnce(&Setup<'_>) -> T) -> T {
    let bootstrap = SingleBootstrap::new(Duration::from_secs(10));
    let config = TransportConfig::unset();
    let remote = vec![true; n];
    let bases = vec![0u64; n];
    let counter =
        |_: &'static str| -> Arc<dyn OpCounter> { unreachable!("connecting counts nothing") };
    let setup = Setup {
        bootstrap: &bootstrap,
        config: &config,
        me,
        remote: &remote,
        heap: HeapRegion {
            base: 0,
            len: 0,
            host: true,
        },
        gpu_ordinal: None,
        gpu_pci_bus_id: None,
        peer_bases: &bases,
        deadline,
        counter: &counter,
        export_gpu_heap: None,
    };
    f(&setup)
}

fn key() -> JobKey {
    JobKey::derive(b"transport test", "socket connect")
}

/// PE 0 accepts PE 1 after `strangers` have connected to its listener; returns how long
/// PE 1 took to be connected, from its first dial.
fn accept_among(strangers: impl FnOnce(SocketAddr) -> Vec<TcpStream>) -> Duration {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let acceptor = thread::spawn(move || {
        let mut streams = vec![None, None];
        with_setup(0, 2, deadline, |setup| {
            accept_higher(setup, &key(), &listener, &mut streams)
        })
        .map(|()| streams[1].is_some())
    });
    let held = strangers(addr);
    let start = Instant::now();
    let dialed = with_setup(1, 2, deadline, |setup| {
        let mut streams = vec![None, None];
        dial_lower(
            setup,
            &key(),
            &[addr.to_string().into_bytes(), Vec::new()],
            &mut streams,
        )
        .map(|()| streams[0].is_some())
    });
    assert!(acceptor.join().unwrap().unwrap());
    let took = start.elapsed();
    assert!(dialed.unwrap());
    drop(held);
    took
}

#[test]
fn strangers_idle_trickling_or_with_another_key_do_not_hold_up_the_peers() {
    let quiet = accept_among(|_| Vec::new());
    let crowded = accept_among(|addr| {
        let mut held: Vec<TcpStream> = (0..1000)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        // Some trickle the first bytes of a hello, which old listeners read one at a time
        // with a timeout per read.
        for s in held.iter_mut().step_by(3) {
            s.write_all(&[0x41, 0x4d]).unwrap();
        }
        // One has another key; it is refused, never hangs the listener.
        let mut wrong = TcpStream::connect(addr).unwrap();
        let other = JobKey::derive(b"another job", "socket connect");
        thread::spawn(move || {
            let r = auth::client_handshake(
                &mut wrong,
                &other,
                Protocol::SocketTransport,
                &claim(1, 2),
                Instant::now() + Duration::from_secs(5),
            );
            assert!(
                r.is_err(),
                "a dialer with another key was answered as the job's"
            );
        });
        held
    });
    assert!(
        crowded <= quiet + Duration::from_secs(1),
        "PE 1 took {crowded:?} to connect among 1000 strangers, {quiet:?} without"
    );
}

#[test]
fn a_peer_claiming_an_unexpected_pe_is_closed_and_the_deadline_names_the_missing_one() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let deadline = Instant::now() + Duration::from_millis(800);
    let impostor = thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        // Claims PE 5 of a 2-PE job, with the right key: authenticated, but not expected.
        auth::client_handshake(
            &mut s,
            &key(),
            Protocol::SocketTransport,
            &claim(5, 2),
            deadline,
        )
        .unwrap();
        s
    });
    let mut streams = vec![None, None];
    let err = with_setup(0, 2, deadline, |setup| {
        accept_higher(setup, &key(), &listener, &mut streams)
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("PEs 1 did not connect"), "{err}");
    drop(impostor.join().unwrap());
}
