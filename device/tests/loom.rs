//! Loom model of the proxy ring's protocol ([`symmem_device::proxy`]):
//!
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p symmem-device --release --test loom`
//!
//! Several producers submit more requests than the ring has slots (so they wait on the
//! previous lap: back-pressure), one consumer takes them in ticket order. The models check
//! that nothing is lost or duplicated, that each producer's requests arrive in its order,
//! and that a fetching request's result reaches its producer before the slot is reused.
//! Loom lets each load return any value the memory model allows, so a Relaxed publish or
//! free would let the consumer read a stale request word, or a producer overwrite a slot
//! still being read, and the checks fail.
//!
//! Without `--cfg loom` this file is empty.
#![cfg(loom)]

use std::cell::Cell;

use loom::sync::Arc;
use loom::thread;
use symmem_device::proxy::{Header, Ring, Slot};
use symmem_device::{AmoKind, Opcode, Request};

/// A ring owned by the model.
struct Owned {
    header: Header,
    slots: Vec<Slot>,
}

impl Owned {
    fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Owned {
            header: Header::new(capacity as u64),
            slots: (0..capacity).map(|_| Slot::new()).collect(),
        })
    }

    fn ring(&self) -> Ring<'_> {
        Ring::new(&self.header, &self.slots)
    }
}

std::thread_local! {
    /// Threads now inside a wait, after a failed poll. Loom runs a model's threads as
    /// coroutines on the test's own thread, so this counts across the model's threads.
    static SPINNING: Cell<usize> = const { Cell::new(0) };
}

/// One wait (a producer on a full ring or its result, the consumer on an empty ring).
/// While two or more threads are inside waits, loom follows its default schedule instead
/// of exploring alternatives: the spinners only re-read their words, so the order of their
/// polls adds no behaviour (symmem-sync's barrier model does the same), and without this
/// the search does not end.
#[derive(Default)]
struct Wait {
    spinning: bool,
}

impl Wait {
    fn snooze(&mut self) {
        if !self.spinning {
            self.spinning = true;
            if SPINNING.replace(SPINNING.get() + 1) + 1 == 2 {
                loom::stop_exploring();
            }
        }
        thread::yield_now();
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if self.spinning && SPINNING.replace(SPINNING.get() - 1) == 2 {
            loom::explore();
        }
    }
}

/// Submits `req`, waiting as [`Wait`] says.
fn submit(ring: Ring<'_>, req: &Request, wait: bool) -> u64 {
    let mut w = Wait::default();
    ring.submit(req, wait, || w.snooze()).unwrap()
}

/// Runs `model` with a preemption bound, which keeps the search finite while producers
/// spin on a full ring.
fn check(model: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(model);
}

/// The consumer: takes `total` requests in ticket order and returns them, answering
/// waited-for AMOs with `1000 + value`.
fn consume(ring: Ring<'_>, total: usize) -> Vec<Request> {
    let mut got = Vec::new();
    let mut w = Wait::default();
    while got.len() < total {
        match ring.peek() {
            Some((r, waited)) => {
                drop(core::mem::take(&mut w));
                assert_eq!(r.tag, got.len() as u64, "tickets are taken in order");
                assert_eq!(
                    waited,
                    r.opcode == Opcode::Amo as u8,
                    "the waited flag travels"
                );
                ring.complete(&r, waited, 1000 + r.value);
                got.push(r);
            }
            None => w.snooze(),
        }
    }
    got
}

/// The consumer of a pipelining proxy: issues (reads) up to `ahead` tickets past the
/// head before it completes the oldest, and completes in ticket order; answers waited-for
/// AMOs with `1000 + value`.
fn consume_ahead(ring: Ring<'_>, total: usize, ahead: usize) -> Vec<Request> {
    let mut issued: std::collections::VecDeque<(Request, bool)> = Default::default();
    let mut got = Vec::new();
    let mut w = Wait::default();
    while got.len() < total {
        let next = (got.len() + issued.len()) as u64;
        if issued.len() < ahead && (next as usize) < total {
            if let Some((r, waited)) = ring.peek_at(next) {
                drop(core::mem::take(&mut w));
                assert_eq!(r.tag, next, "read ahead in ticket order");
                issued.push_back((r, waited));
                continue;
            }
        }
        match issued.pop_front() {
            Some((r, waited)) => {
                ring.complete(&r, waited, 1000 + r.value);
                got.push(r);
            }
            None => w.snooze(),
        }
    }
    got
}

/// A consumer that reads ahead: two producers each submit a fetching AMO, a third a put
/// that wraps the ring of two slots; the consumer issues two tickets before it completes
/// the first, and each fetch gets its own result, nothing lost. (Each producer has one
/// waited-for request at a time, as every device operation does: a producer that took a
/// second waited-for ticket a lap after its first would wait for a slot only it frees.)
#[test]
fn read_ahead_delivers_each_result_to_its_ticket() {
    check(|| {
        let ring = Owned::new(2);
        let fetchers: Vec<_> = [7u64, 9]
            .into_iter()
            .map(|value| {
                let ring = ring.clone();
                thread::spawn(move || {
                    let r = ring.ring();
                    let req = Request::amo(1, AmoKind::FetchAdd, 8, 0, value, 0, 1);
                    let t = submit(r, &req, true);
                    let mut w = Wait::default();
                    assert_eq!(r.wait_result(t, || w.snooze()).unwrap(), 1000 + value);
                })
            })
            .collect();
        let putter = {
            let ring = ring.clone();
            thread::spawn(move || {
                submit(ring.ring(), &Request::put(2, 0, 0, 8), false);
            })
        };
        let got = consume_ahead(ring.ring(), 3, 2);
        for f in fetchers {
            f.join().unwrap();
        }
        putter.join().unwrap();
        assert_eq!(got.iter().filter(|r| r.pe == 1).count(), 2);
        assert_eq!(got.iter().filter(|r| r.pe == 2).count(), 1);
    });
}

/// Two producers, two puts each, through a ring of one slot: every request arrives once,
/// whole, in each producer's order.
#[test]
fn back_pressure_keeps_everything_in_order() {
    check(|| {
        let ring = Owned::new(1);
        let producers: Vec<_> = (0..2u32)
            .map(|pe| {
                let ring = ring.clone();
                thread::spawn(move || {
                    for i in 0..2u64 {
                        let req = Request::put(pe, i, 0x100 * pe as u64 + i, 8 + i);
                        submit(ring.ring(), &req, false);
                    }
                })
            })
            .collect();
        let got = consume(ring.ring(), 4);
        for p in producers {
            p.join().unwrap();
        }
        for pe in 0..2u32 {
            let mine: Vec<_> = got.iter().filter(|r| r.pe == pe).collect();
            assert_eq!(mine.len(), 2);
            for (i, r) in mine.iter().enumerate() {
                let i = i as u64;
                assert_eq!(
                    (r.remote, r.local, r.len),
                    (i, 0x100 * pe as u64 + i, 8 + i)
                );
            }
        }
    });
}

/// A fetching AMO and a put from two producers through one slot: the AMO's producer gets
/// its own result, and the put's producer cannot reuse the slot before it was read.
#[test]
fn fetch_result_reaches_its_producer() {
    check(|| {
        let ring = Owned::new(1);
        let fetcher = {
            let ring = ring.clone();
            thread::spawn(move || {
                let r = ring.ring();
                let req = Request::amo(1, AmoKind::FetchAdd, 8, 0, 7, 0, 1);
                let t = submit(r, &req, true);
                let mut w = Wait::default();
                assert_eq!(r.wait_result(t, || w.snooze()).unwrap(), 1007);
            })
        };
        let putter = {
            let ring = ring.clone();
            thread::spawn(move || {
                submit(ring.ring(), &Request::put(2, 0, 0, 8), false);
            })
        };
        let got = consume(ring.ring(), 2);
        fetcher.join().unwrap();
        putter.join().unwrap();
        assert_eq!(got.iter().filter(|r| r.pe == 1).count(), 1);
        assert_eq!(got.iter().filter(|r| r.pe == 2).count(), 1);
    });
}

/// Quiet: a producer's put, then its quiet; when the quiet returns, the consumer has
/// completed the put.
#[test]
fn quiet_covers_earlier_requests() {
    check(|| {
        let ring = Owned::new(2);
        let consumer = {
            let ring = ring.clone();
            thread::spawn(move || consume(ring.ring(), 2))
        };
        let r = ring.ring();
        submit(r, &Request::put(1, 0, 0, 8), false);
        let t = submit(r, &Request::quiet(), false);
        let mut w = Wait::default();
        r.wait_quiet(t, || w.snooze()).unwrap();
        drop(w);
        assert!(r.header().head.load(loom::sync::atomic::Ordering::Acquire) >= 1);
        consumer.join().unwrap();
    });
}
