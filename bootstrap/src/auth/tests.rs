use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use super::*;

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

/// Drives the server side of one connection to its end.
fn serve_one(mut s: TcpStream, key: &JobKey, protocol: Protocol) -> Progress {
    s.set_nonblocking(true).unwrap();
    let mut hs = ServerHandshake::new(protocol, soon());
    loop {
        match hs.progress(&mut s, key) {
            Progress::Waiting => {
                assert!(Instant::now() < hs.deadline(), "handshake never ended");
                thread::sleep(Duration::from_millis(1));
            }
            done => return done,
        }
    }
}

fn pair() -> (TcpListener, std::net::SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

#[test]
fn both_sides_prove_the_key_and_the_claim_arrives() {
    let key = JobKey::derive(b"secret", "test job");
    let (l, addr) = pair();
    let k = key.clone();
    let server = thread::spawn(move || serve_one(l.accept().unwrap().0, &k, Protocol::Rendezvous));
    let mut c = TcpStream::connect(addr).unwrap();
    client_handshake(&mut c, &key, Protocol::Rendezvous, b"rank 3", soon()).unwrap();
    match server.join().unwrap() {
        Progress::Authenticated(claim) => assert_eq!(&claim[..6], b"rank 3"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_client_with_another_key_learns_the_server_is_not_its_job_and_sends_no_proof() {
    let (l, addr) = pair();
    let server = thread::spawn(move || {
        serve_one(
            l.accept().unwrap().0,
            &JobKey::derive(b"one", "job"),
            Protocol::Rendezvous,
        )
    });
    let mut c = TcpStream::connect(addr).unwrap();
    let err = client_handshake(
        &mut c,
        &JobKey::derive(b"two", "job"),
        Protocol::Rendezvous,
        b"",
        soon(),
    )
    .unwrap_err();
    assert!(matches!(err, HandshakeError::Refused(_)), "{err}");
    assert!(
        err.to_string().contains("did not prove the job's key"),
        "{err}"
    );
    drop(c);
    let Progress::Failed(why) = server.join().unwrap() else {
        panic!("server accepted")
    };
    assert!(why.contains("closed after 64 bytes"), "{why}");
}

#[test]
fn a_hello_and_proof_recorded_in_one_job_are_refused_by_another_with_the_same_secret() {
    let key = JobKey::derive(b"shared secret", "job");
    // Job A: a real client, with everything it sends recorded by a relay.
    let (la, addr_a) = pair();
    let ka = key.clone();
    let server_a =
        thread::spawn(move || serve_one(la.accept().unwrap().0, &ka, Protocol::Rendezvous));
    let (relay, relay_addr) = pair();
    let recorder = thread::spawn(move || {
        let (mut from_client, _) = relay.accept().unwrap();
        let mut to_server = TcpStream::connect(addr_a).unwrap();
        let mut hello = [0u8; HELLO_LEN];
        from_client.read_exact(&mut hello).unwrap();
        to_server.write_all(&hello).unwrap();
        let mut answer = [0u8; 64];
        to_server.read_exact(&mut answer).unwrap();
        from_client.write_all(&answer).unwrap();
        let mut proof = [0u8; 32];
        from_client.read_exact(&mut proof).unwrap();
        to_server.write_all(&proof).unwrap();
        let mut sent = hello.to_vec();
        sent.extend_from_slice(&proof);
        sent
    });
    let mut c = TcpStream::connect(relay_addr).unwrap();
    client_handshake(&mut c, &key, Protocol::Rendezvous, b"rank 1", soon()).unwrap();
    let recorded = recorder.join().unwrap();
    assert!(matches!(
        server_a.join().unwrap(),
        Progress::Authenticated(_)
    ));
    // Job B, same secret: the recording replayed.
    let (lb, addr_b) = pair();
    let server_b =
        thread::spawn(move || serve_one(lb.accept().unwrap().0, &key, Protocol::Rendezvous));
    let mut replay = TcpStream::connect(addr_b).unwrap();
    replay.write_all(&recorded).unwrap();
    let Progress::Failed(why) = server_b.join().unwrap() else {
        panic!("the replay was accepted")
    };
    assert!(why.contains("does not match the job's key"), "{why}");
}

#[test]
fn a_proof_for_one_protocol_does_not_open_another() {
    let key = JobKey::derive(b"s", "job");
    let (l, addr) = pair();
    let k = key.clone();
    let server =
        thread::spawn(move || serve_one(l.accept().unwrap().0, &k, Protocol::SocketTransport));
    let mut c = TcpStream::connect(addr).unwrap();
    let err = client_handshake(&mut c, &key, Protocol::Rendezvous, b"", soon()).unwrap_err();
    assert!(matches!(err, HandshakeError::ClosedEarly), "{err}");
    let Progress::Failed(why) = server.join().unwrap() else {
        panic!()
    };
    assert!(
        why.contains("Rendezvous handshake where SocketTransport was expected"),
        "{why}"
    );
}

#[test]
fn a_silent_server_costs_the_client_only_its_deadline() {
    let (l, addr) = pair();
    let mut c = TcpStream::connect(addr).unwrap();
    let start = Instant::now();
    let err = client_handshake(
        &mut c,
        &JobKey::derive(b"s", "job"),
        Protocol::Rendezvous,
        b"",
        Instant::now() + Duration::from_millis(200),
    )
    .unwrap_err();
    assert!(
        matches!(&err, HandshakeError::Io(e) if e.kind() == std::io::ErrorKind::TimedOut),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(2));
    drop(l);
}

#[test]
fn keys_depend_on_secret_and_context_and_never_print() {
    let a = JobKey::derive(b"secret", "job 1");
    assert_eq!(a, JobKey::derive(b"secret", "job 1"));
    assert_ne!(a, JobKey::derive(b"secret", "job 2"));
    assert_ne!(a, JobKey::derive(b"secreT", "job 1"));
    assert_ne!(a, a.subkey("socket transport"));
    assert_eq!(format!("{a:?}"), "JobKey(<redacted>)");
}

#[test]
fn hex_round_trips_and_refuses_anything_else() {
    let bytes = [0u8, 1, 0xab, 0xff];
    assert_eq!(to_hex(&bytes), "0001abff");
    assert_eq!(from_hex::<4>("0001abff"), Some(bytes));
    assert_eq!(from_hex::<4>("0001ABFF"), Some(bytes));
    assert_eq!(from_hex::<4>("0001abf"), None);
    assert_eq!(from_hex::<4>("0001abfg"), None);
    assert_eq!(from_hex::<4>("+001abff"), None);
}
