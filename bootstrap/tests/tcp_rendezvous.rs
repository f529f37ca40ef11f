//! The TCP rendezvous in one process: ranks are threads.

use std::time::{Duration, Instant};

use symmem_bootstrap::auth::JobKey;
use symmem_bootstrap::tcp::{RendezvousServer, TcpBootstrap};
use symmem_bootstrap::{Bootstrap, BootstrapError, UniqueId};

/// The key of the tests' jobs.
fn key() -> JobKey {
    JobKey::derive(b"test secret", "tcp_rendezvous tests")
}

/// Runs `f(rank, bootstrap)` on `n` threads joined through a fresh unique id.
fn with_ranks<T: Send + 'static>(
    n: usize,
    timeout: Duration,
    f: impl Fn(usize, Result<TcpBootstrap, BootstrapError>) -> T + Send + Sync + Copy + 'static,
) -> Vec<T> {
    let id = UniqueId::bind(None).unwrap();
    let handles: Vec<_> = (0..n)
        .map(|r| {
            let id = id.clone();
            std::thread::spawn(move || f(r, id.join(r, n, timeout)))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn collectives_deliver_exact_payloads() {
    with_ranks(4, Duration::from_secs(20), |r, b| {
        let b = b.unwrap();
        assert_eq!((b.rank(), b.size()), (r, 4));
        // Ranks contribute different lengths, rank 1 nothing at all.
        let mine: Vec<u8> = vec![r as u8; if r == 1 { 0 } else { r * 1000 + 1 }];
        let all = b.allgather(&mine).unwrap();
        for (s, got) in all.iter().enumerate() {
            assert_eq!(*got, vec![s as u8; if s == 1 { 0 } else { s * 1000 + 1 }]);
        }
        let out: Vec<Vec<u8>> = (0..4).map(|d| vec![(r * 10 + d) as u8; d + r]).collect();
        let got = b.alltoall(&out).unwrap();
        for (s, part) in got.iter().enumerate() {
            assert_eq!(*part, vec![(s * 10 + r) as u8; r + s]);
        }
        let data = if r == 2 {
            b"from two".to_vec()
        } else {
            b"ignored".to_vec()
        };
        assert_eq!(b.broadcast(2, &data).unwrap(), b"from two");
        for _ in 0..50 {
            b.barrier().unwrap();
        }
        assert!(b.broadcast(4, b"x").is_err());
        assert!(b.alltoall(&[vec![]]).is_err());
    });
}

#[test]
fn mismatched_collectives_fail_on_every_rank() {
    let errs = with_ranks(3, Duration::from_secs(20), |r, b| {
        let b = b.unwrap();
        let res = if r == 1 {
            b.barrier().map(drop)
        } else {
            b.allgather(b"x").map(drop)
        };
        res.unwrap_err().to_string()
    });
    for e in errs {
        assert!(e.contains("mismatch") && e.contains("rank 1"), "{e}");
    }
}

#[test]
fn a_rank_that_skips_a_collective_is_named_after_the_deadline() {
    let start = Instant::now();
    let errs = with_ranks(3, Duration::from_secs(2), |r, b| {
        let b = b.unwrap();
        if r == 2 {
            // Rank 2 stays connected but never calls the barrier, until the others fail.
            while b.failure().is_none() {
                std::thread::sleep(Duration::from_millis(10));
            }
            return String::new();
        }
        b.barrier().unwrap_err().to_string()
    });
    for e in &errs[..2] {
        assert!(
            e.contains("barrier #0") && e.contains("rank(s) 2 never arrived"),
            "{e}"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(8));
}

#[test]
fn abort_is_reported_to_the_others() {
    let errs = with_ranks(3, Duration::from_secs(20), |r, b| {
        let b = b.unwrap();
        if r == 0 {
            b.abort("out of patience");
            return String::new();
        }
        b.barrier().unwrap_err().to_string()
    });
    for e in &errs[1..] {
        assert!(
            e.contains("PE 0 failed") && e.contains("out of patience"),
            "{e}"
        );
    }
}

#[test]
fn a_wrong_secret_is_refused_without_showing_either() {
    let id = UniqueId::bind(None).unwrap();
    let host = {
        let id = id.clone();
        std::thread::spawn(move || id.join(0, 2, Duration::from_secs(2)).err())
    };
    // Same address, another secret: neither side proves the other's key.
    let text = id.to_string();
    let (head, secret) = text.rsplit_once(':').unwrap();
    let last = if secret.ends_with('0') { '1' } else { '0' };
    let other = format!("{}{last}", &secret[..secret.len() - 1]);
    let stranger: UniqueId = format!("{head}:{other}").parse().unwrap();
    let err = stranger
        .join(1, 2, Duration::from_secs(2))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("did not prove the job's key"), "{err}");
    assert!(!err.contains(secret) && !err.contains(&other), "{err}");
    let host_err = host.join().unwrap().unwrap().to_string();
    assert!(host_err.contains("rank(s) 1 never arrived"), "{host_err}");
}

/// Set in the child process of [`a_rank_that_joins_after_another_died_names_it`].
const DYING_RANK_ADDR: &str = "SYMMEM_TEST_DYING_RANK_ADDR";

/// Not a test of its own: the dying rank of
/// [`a_rank_that_joins_after_another_died_names_it`], run in a child process (this test
/// binary, re-executed). It joins as rank 1 and kills itself right after its hello.
#[test]
fn dying_rank_child() {
    let Ok(addr) = std::env::var(DYING_RANK_ADDR) else {
        return;
    };
    let _ = TcpBootstrap::connect(&addr, &key(), 0, 1, 3, Duration::from_secs(20));
    unreachable!("SYMMEM_TEST_EXIT_AT=rendezvous_join did not kill this process");
}

#[test]
fn a_rank_that_joins_after_another_died_names_it() {
    let timeout = Duration::from_secs(20);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = RendezvousServer::start(listener, key(), 3, timeout).unwrap();
    let addr = server.addr().to_string();
    let join = |rank: usize| {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            let err = TcpBootstrap::connect(&addr, &key(), 0, rank, 3, timeout)
                .err()
                .expect("joined a job whose rank 1 died")
                .to_string();
            (err, start.elapsed())
        })
    };
    let early = join(0);
    // Rank 1 joins and dies (SIGKILL, no goodbye) before rank 2 has started.
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "dying_rank_child", "--nocapture"])
        .env(DYING_RANK_ADDR, &addr)
        .env("SYMMEM_TEST_EXIT_AT", "rendezvous_join")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(child.status.signal(), Some(9), "{child:?}");
    // Rank 0 learns of it first, so the group has failed before rank 2 joins.
    let early = early.join().unwrap();
    let late = join(2).join().unwrap();
    for (err, took) in [early, late] {
        assert!(err.contains("PE 1 failed"), "{err}");
        assert!(took < Duration::from_secs(10), "{err} after {took:?}");
    }
}
