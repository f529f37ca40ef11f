//! What a rendezvous server spends on connections that lie or never authenticate.
//!
//! The tests share process-wide measures (allocated bytes, thread count), so they take
//! turns through [`serial`], and this file is its own test binary.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use symmem_bootstrap::auth::{self, JobKey, Protocol};
use symmem_bootstrap::tcp::{Claim, RendezvousServer, TcpBootstrap};
use symmem_bootstrap::wire::{self, Header};
use symmem_bootstrap::Bootstrap;

/// The system allocator, keeping count of the bytes live now and the most ever live.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

impl Counting {
    fn added(size: usize) {
        let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to `System`; the counters do not affect
// what is allocated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            Self::added(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            Self::added(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with this layout (every path above uses it).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `alloc`; `ptr` and `layout` are the caller's, from `System`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            Self::added(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// More than any honest exchange below needs; far less than the 1 GiB the frames claim.
const MEMORY_BOUND: usize = 16 << 20;

fn serial() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// The key of the tests' jobs.
fn key() -> JobKey {
    JobKey::derive(b"limits test", "rendezvous_limits")
}

fn start(size: usize) -> RendezvousServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    RendezvousServer::start(listener, key(), size, Duration::from_secs(20)).unwrap()
}

/// A frame header of the rendezvous protocol claiming `len` payload bytes.
fn header(kind: u16, len: u32) -> [u8; wire::HEADER_LEN] {
    Header {
        magic: wire::MAGIC,
        version: wire::VERSION,
        kind,
        len,
    }
    .encode()
}

/// Everything the server sends until it closes the connection (or 10 s pass).
fn read_until_closed(stream: &mut TcpStream) -> (Vec<u8>, Duration) {
    let start = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return (got, start.elapsed()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line in /proc/self/status")
}

#[test]
fn a_frame_instead_of_a_handshake_is_refused_at_once() {
    let _turn = serial();
    let server = start(2);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let mut s = TcpStream::connect(server.addr()).unwrap();
    // A collective claiming 1 GiB, padded to a hello's length, where the handshake must
    // come first: nothing of it is believed, and nothing is sent to a stranger.
    let mut bogus = header(3, 1 << 30).to_vec();
    bogus.resize(auth::HELLO_LEN, 0);
    s.write_all(&bogus).unwrap();
    let (reply, took) = read_until_closed(&mut s);
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert!(reply.is_empty(), "a stranger was told {reply:?}");
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert!(peak < MEMORY_BOUND, "{peak} bytes allocated");
}

#[test]
fn an_authenticated_lying_length_reserves_nothing_ahead_of_data() {
    let _turn = serial();
    let server = start(2);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let mut s = TcpStream::connect(server.addr()).unwrap();
    let claim = Claim {
        session: 0,
        rank: 0,
        size: 2,
        pid: std::process::id(),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    auth::client_handshake(
        &mut s,
        &key(),
        Protocol::Rendezvous,
        &claim.encode(),
        deadline,
    )
    .unwrap();
    // A collective claiming 1 GiB - 1 bytes, of which 1 MiB arrives.
    s.write_all(&header(3, (1 << 30) - 1)).unwrap();
    s.write_all(&vec![0u8; 1 << 20]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert!(
        peak < MEMORY_BOUND,
        "{peak} bytes allocated for 1 MiB of data"
    );
    drop(s);
}

/// How long 2 ranks take to join `server` and pass a barrier.
fn job_start(server: &RendezvousServer) -> Duration {
    let addr = server.addr().to_string();
    let start = Instant::now();
    let ranks: Vec<_> = (0..2)
        .map(|r| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let b = TcpBootstrap::connect(&addr, &key(), 0, r, 2, Duration::from_secs(20))?;
                b.barrier()
            })
        })
        .collect();
    for r in ranks {
        r.join().unwrap().unwrap();
    }
    start.elapsed()
}

#[test]
fn a_thousand_idle_or_trickling_strangers_cost_no_threads_little_memory_and_no_delay() {
    const STRANGERS: usize = 1000;
    let _turn = serial();
    let quiet = job_start(&start(2));
    let server = start(2);
    let base_threads = threads();
    let mut strangers: Vec<TcpStream> = Vec::with_capacity(STRANGERS);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    for _ in 0..STRANGERS {
        strangers.push(TcpStream::connect(server.addr()).unwrap());
    }
    // Every other one trickles a byte of a plausible hello now and then.
    let trickle = |strangers: &[TcpStream]| {
        for s in strangers.iter().step_by(2) {
            let _ = (&*s).write(&[0x41]);
        }
    };
    for _ in 0..5 {
        trickle(&strangers);
        std::thread::sleep(Duration::from_millis(100));
    }
    let during_threads = threads();
    let held = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    assert!(
        during_threads <= base_threads,
        "{during_threads} threads with {STRANGERS} strangers connected (before: {base_threads})"
    );
    assert!(
        held <= 64 << 10,
        "{held} bytes held for {STRANGERS} strangers"
    );
    let flooded = job_start(&server);
    trickle(&strangers);
    assert!(
        flooded <= quiet + Duration::from_secs(1),
        "the job took {flooded:?} to start among {STRANGERS} strangers, {quiet:?} without"
    );
    drop(strangers);
}
