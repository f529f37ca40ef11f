//! The proxy channel's ring: device-initiated requests to PEs with no P2P path, passed to
//! the PE's proxy thread, which issues them on the remote transport.
//!
//! # Layout
//! One ring per PE, in memory both sides reach (host memory for CPU PEs,
//! `cuMemHostAlloc(DEVICEMAP)` memory for GPU PEs). All words are little-endian u64s;
//! memory that starts zeroed is an empty ring of lap 0, so only `capacity` needs writing.
//!
//! ```text
//! header (192 B, three 64-B lines, so producers and the consumer do not share a line)
//! offset  field      written by   meaning
//!   0     reserve    producers    next ticket (fetch_add)
//!   8     (pad)
//!  64     head       consumer     next ticket the consumer takes
//!  72     quieted    consumer     1 + ticket of the last Quiet completed (0 = none)
//!  80     (pad)
//! 128     capacity   host         slots in the ring
//! 136     failed     consumer     0 = healthy; else (pe << 32) | opcode of the failed request
//! 144     (pad)
//! 192     slots[capacity]
//!
//! slot (128 B)
//! offset  field      meaning
//!   0     seq        2*lap: free for a ticket of that lap; 2*lap+1: request published
//!   8     done       1 + ticket whose result is in `result` (fetching requests)
//!  16     result     the fetched value
//!  24     waited     1: the producer waits for `done` (and frees the slot itself)
//!  32     (pad)
//!  64     request    the 64-byte Request, as 8 u64 words (`tag` = ticket)
//! ```
//!
//! # Protocol
//! Multi-producer (any number of GPU or executor threads), single consumer (the proxy
//! thread), after Vyukov's bounded queue. Ticket `t` uses slot `t % capacity` in lap
//! `t / capacity`.
//!
//! - A producer takes a ticket with a fetch_add on `reserve` (on a GPU at GPU scope: only
//!   its threads take tickets, and mapped host memory guarantees system-scope RMWs only
//!   with `hostNativeAtomicSupported`), waits until the slot's `seq`
//!   is `2*lap` (the slot's previous lap is finished: a full ring applies back-pressure, it
//!   never drops), writes the request, and publishes it with a *release* store of
//!   `2*lap+1`: the consumer's acquire load of `seq` then sees the whole request (and, on
//!   CPU PEs, the put's source data the producer wrote before).
//! - The consumer takes tickets in order: it waits for `seq == 2*lap+1` at `head`, issues
//!   the request, then frees the slot with a release store of `2*(lap+1)`, so the next
//!   lap's producer cannot overwrite a request still being read. It may read ahead
//!   ([`Ring::peek_at`]: issue tickets past `head` while earlier ones wait for replies),
//!   but it completes them in ticket order: `head` only ever moves to the next ticket.
//! - A request whose producer waits for it (`waited`: blocking puts and gets, inline
//!   `g`, fetching AMOs) is freed by its producer instead: the consumer stores `result`, then `done = ticket+1` (release); the
//!   producer reads the result after an acquire load of `done` and then frees the slot.
//!   Otherwise the next lap could overwrite the result before it is read.
//! - `quiet`: the producer submits a Quiet request and waits until `quieted` exceeds its
//!   ticket; the consumer completes the transport's quiet first. Tickets are issued in
//!   order, so every earlier request of the quieting thread is covered.
//! - `failed`: once the transport fails, the consumer sets it and stops; every waiting
//!   producer sees it and fails the kernel (naming the PE), so nothing hangs.

#[cfg(not(loom))]
use core::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};

use crate::request::Request;

/// Bytes of the ring header.
pub const HEADER_BYTES: usize = 192;
/// Bytes of one slot.
pub const SLOT_BYTES: usize = 128;
/// Words of a [`Request`] in a slot.
const REQUEST_WORDS: usize = 8;

/// The ring header; see the module docs for the layout.
#[repr(C, align(64))]
pub struct Header {
    /// Next ticket.
    pub reserve: AtomicU64,
    _pad0: [u64; 7],
    /// Next ticket the consumer takes.
    pub head: AtomicU64,
    /// 1 + ticket of the last completed Quiet request.
    pub quieted: AtomicU64,
    _pad1: [u64; 6],
    /// Slots in the ring.
    pub capacity: AtomicU64,
    /// 0, or `(pe << 32) | opcode` of the request whose issue failed.
    pub failed: AtomicU64,
    _pad2: [u64; 6],
}

/// One slot; see the module docs for the layout.
#[repr(C, align(64))]
pub struct Slot {
    /// `2*lap` (free) or `2*lap+1` (published).
    pub seq: AtomicU64,
    /// 1 + ticket whose result is in `result`.
    pub done: AtomicU64,
    /// The fetched value of a fetching request.
    pub result: AtomicU64,
    /// 1 when the producer waits for `done`.
    pub waited: AtomicU64,
    _pad: [u64; 4],
    /// The request's 8 words.
    pub request: [AtomicU64; REQUEST_WORDS],
}

// The table in the module docs is the contract with every PTX module: check it.
#[cfg(not(loom))]
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Header>() == HEADER_BYTES);
    assert!(offset_of!(Header, reserve) == 0);
    assert!(offset_of!(Header, head) == 64);
    assert!(offset_of!(Header, quieted) == 72);
    assert!(offset_of!(Header, capacity) == 128);
    assert!(offset_of!(Header, failed) == 136);
    assert!(size_of::<Slot>() == SLOT_BYTES);
    assert!(align_of::<Slot>() == 64);
    assert!(offset_of!(Slot, seq) == 0);
    assert!(offset_of!(Slot, done) == 8);
    assert!(offset_of!(Slot, result) == 16);
    assert!(offset_of!(Slot, waited) == 24);
    assert!(offset_of!(Slot, request) == 64);
    assert!(size_of::<Request>() == REQUEST_WORDS * 8);
};

impl Header {
    /// An empty ring's header with `capacity` slots (for rings owned by Rust code, as the
    /// model test builds; shared rings start as zeroed memory instead).
    pub fn new(capacity: u64) -> Self {
        Header {
            reserve: AtomicU64::new(0),
            _pad0: [0; 7],
            head: AtomicU64::new(0),
            quieted: AtomicU64::new(0),
            _pad1: [0; 6],
            capacity: AtomicU64::new(capacity),
            failed: AtomicU64::new(0),
            _pad2: [0; 6],
        }
    }
}

impl Slot {
    /// A free slot of lap 0.
    pub fn new() -> Self {
        Slot {
            seq: AtomicU64::new(0),
            done: AtomicU64::new(0),
            result: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            _pad: [0; 4],
            request: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Default for Slot {
    fn default() -> Self {
        Slot::new()
    }
}

/// Bytes of a ring of `capacity` slots.
pub const fn ring_bytes(capacity: usize) -> usize {
    HEADER_BYTES + capacity * SLOT_BYTES
}

/// The ordered accesses of the protocol: system-scope inline PTX on nvptx64 (LLVM drops
/// the ordering of RMWs there), Rust (or loom) atomics elsewhere.
mod atom {
    use super::{AtomicU64, Ordering};

    #[inline(always)]
    pub fn load_acquire(a: &AtomicU64) -> u64 {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: `a` is a valid, aligned u64 in memory this GPU reaches.
        return unsafe { crate::arch::load_acquire_u64(a.as_ptr()) };
        #[cfg(not(target_arch = "nvptx64"))]
        a.load(Ordering::Acquire)
    }

    #[inline(always)]
    pub fn store_release(a: &AtomicU64, v: u64) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as for the load.
        unsafe {
            crate::arch::store_release_u64(a.as_ptr(), v)
        };
        #[cfg(not(target_arch = "nvptx64"))]
        a.store(v, Ordering::Release)
    }

    /// A strong store with no ordering of its own (ordered by a later release).
    #[inline(always)]
    pub fn store_relaxed(a: &AtomicU64, v: u64) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as for the load.
        unsafe {
            crate::arch::store_relaxed_u64(a.as_ptr(), v)
        };
        #[cfg(not(target_arch = "nvptx64"))]
        a.store(v, Ordering::Relaxed)
    }

    /// A load ordered by an earlier acquire.
    #[inline(always)]
    pub fn load_relaxed(a: &AtomicU64) -> u64 {
        a.load(Ordering::Relaxed)
    }

    /// Takes a ticket. Relaxed would do for the ticket itself; AcqRel keeps the ticket
    /// order consistent with this thread's earlier requests on every target. On a GPU the
    /// RMW is at GPU scope: only that GPU's threads take tickets (the consumer only loads
    /// `reserve`), and on the mapped host memory the ring lives in a system-scope RMW is
    /// atomic only where the GPU reports `hostNativeAtomicSupported`. What the consumer
    /// sees is published by each slot's system-scope release store, not by the ticket.
    #[inline(always)]
    pub fn fetch_add(a: &AtomicU64, v: u64) -> u64 {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as for the load.
        return unsafe { crate::arch::atom_add_gpu_u64(a.as_ptr(), v) };
        #[cfg(not(target_arch = "nvptx64"))]
        a.fetch_add(v, Ordering::AcqRel)
    }
}

/// Why a producer's wait ended without its request completing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed {
    /// The PE of the request whose issue failed.
    pub pe: u32,
    /// Its opcode.
    pub opcode: u8,
}

impl Failed {
    /// The encoding in [`Header::failed`].
    pub const fn word(self) -> u64 {
        ((self.pe as u64) << 32) | self.opcode as u64
    }

    fn from_word(w: u64) -> Option<Failed> {
        (w != 0).then_some(Failed {
            pe: (w >> 32) as u32,
            opcode: w as u8,
        })
    }
}

/// A view of one ring: its header and its slots.
#[derive(Clone, Copy)]
pub struct Ring<'a> {
    header: &'a Header,
    slots: &'a [Slot],
}

impl<'a> Ring<'a> {
    /// The ring made of `header` and `slots` (for owned rings, as the model test builds).
    /// `header.capacity` must equal `slots.len()`.
    pub fn new(header: &'a Header, slots: &'a [Slot]) -> Self {
        debug_assert_eq!(
            atom::load_relaxed(&header.capacity),
            slots.len() as u64,
            "ring capacity"
        );
        Ring { header, slots }
    }

    /// The ring at `base`.
    ///
    /// # Safety
    /// `base` must be 64-byte aligned and point to [`ring_bytes`]`(capacity)` bytes that
    /// were zeroed, then had `capacity` written, and that stay mapped for `'a`, accessed
    /// only through rings.
    pub unsafe fn from_raw(base: *mut u8) -> Ring<'a> {
        // SAFETY: the caller guarantees the header is valid and aligned.
        let header = unsafe { &*base.cast::<Header>() };
        let cap = atom::load_relaxed(&header.capacity) as usize;
        // SAFETY: the caller guarantees `cap` slots follow the header.
        let slots =
            unsafe { core::slice::from_raw_parts(base.add(HEADER_BYTES).cast::<Slot>(), cap) };
        Ring { header, slots }
    }

    /// The header.
    pub fn header(&self) -> &'a Header {
        self.header
    }

    fn slot(&self, ticket: u64) -> (&'a Slot, u64) {
        let cap = self.slots.len() as u64;
        (&self.slots[(ticket % cap) as usize], ticket / cap)
    }

    /// The failure recorded by the consumer, if any.
    #[inline(always)]
    pub fn failed(&self) -> Option<Failed> {
        Failed::from_word(atom::load_acquire(&self.header.failed))
    }

    /// Producer: submits `req` and returns its ticket, waiting (with `snooze`) while the
    /// ring is full. With `wait`, the producer must then call [`Ring::wait_result`] (which
    /// frees the slot). Fails when the consumer has failed.
    #[inline(always)]
    pub fn submit(
        &self,
        req: &Request,
        wait: bool,
        mut snooze: impl FnMut(),
    ) -> Result<u64, Failed> {
        // A failed channel issues nothing more: say so now rather than leave a request
        // that is never issued (one racing with the failure is reported by the next wait
        // or quiet, which sees `failed`).
        if let Some(f) = self.failed() {
            return Err(f);
        }
        let ticket = atom::fetch_add(&self.header.reserve, 1);
        let (slot, lap) = self.slot(ticket);
        while atom::load_acquire(&slot.seq) != 2 * lap {
            if let Some(f) = self.failed() {
                return Err(f);
            }
            snooze();
        }
        let mut r = *req;
        r.tag = ticket;
        let words: [u64; REQUEST_WORDS] = bytemuck::cast(r);
        for (w, v) in slot.request.iter().zip(words) {
            atom::store_relaxed(w, v);
        }
        atom::store_relaxed(&slot.waited, wait as u64);
        // Release: the consumer's acquire of `seq` sees the request words and whatever
        // this thread wrote before (a put's source data).
        atom::store_release(&slot.seq, 2 * lap + 1);
        Ok(ticket)
    }

    /// Producer: waits for the result of request `ticket` (submitted with `wait`), then
    /// frees its slot.
    #[inline(always)]
    pub fn wait_result(&self, ticket: u64, mut snooze: impl FnMut()) -> Result<u64, Failed> {
        let (slot, lap) = self.slot(ticket);
        while atom::load_acquire(&slot.done) != ticket + 1 {
            if let Some(f) = self.failed() {
                return Err(f);
            }
            snooze();
        }
        let v = atom::load_relaxed(&slot.result);
        // Release: the result is read before the next lap's producer may write the slot.
        atom::store_release(&slot.seq, 2 * (lap + 1));
        Ok(v)
    }

    /// Producer: waits until the Quiet request `ticket` has completed.
    #[inline(always)]
    pub fn wait_quiet(&self, ticket: u64, mut snooze: impl FnMut()) -> Result<(), Failed> {
        while atom::load_acquire(&self.header.quieted) <= ticket {
            if let Some(f) = self.failed() {
                return Err(f);
            }
            snooze();
        }
        Ok(())
    }

    /// Consumer: the next published request (its ticket is its `tag`) and whether its
    /// producer waits for it, or `None` when the request at the head is not published
    /// yet. Only one thread may consume.
    pub fn peek(&self) -> Option<(Request, bool)> {
        self.peek_at(atom::load_relaxed(&self.header.head))
    }

    /// Consumer: the published request of `ticket`, at or after `head` (a consumer that
    /// reads ahead, issuing several requests before it completes the first), or `None`
    /// while it is not published. The slot stays the consumer's until [`Ring::complete`]:
    /// no producer writes a published slot, and the next lap's producer waits for the
    /// free `seq` that only completion stores. A ticket `capacity` or more past `head`
    /// finds its slot still holding an earlier lap, and reads as not published.
    pub fn peek_at(&self, ticket: u64) -> Option<(Request, bool)> {
        let (slot, lap) = self.slot(ticket);
        if atom::load_acquire(&slot.seq) != 2 * lap + 1 {
            return None;
        }
        let mut words = [0u64; REQUEST_WORDS];
        for (v, w) in words.iter_mut().zip(&slot.request) {
            *v = atom::load_relaxed(w);
        }
        Some((bytemuck::cast(words), atom::load_relaxed(&slot.waited) != 0))
    }

    /// Consumer: completes the request at the head (the one [`Ring::peek`] returned, with
    /// its `waited`). A waited-for request gets `result` and is freed by its producer;
    /// others are freed here. A Quiet request also advances `quieted`. Requests are
    /// completed in ticket order, whatever order their results came in: `head` counts
    /// completed requests (a host `quiet` after a kernel waits for it to reach
    /// `reserve`), and a producer's earlier request must be done when its later one is.
    pub fn complete(&self, req: &Request, waited: bool, result: u64) {
        let ticket = req.tag;
        debug_assert_eq!(
            ticket,
            atom::load_relaxed(&self.header.head),
            "completed out of ticket order"
        );
        let (slot, lap) = self.slot(ticket);
        if waited {
            atom::store_relaxed(&slot.result, result);
            atom::store_release(&slot.done, ticket + 1);
        } else {
            atom::store_release(&slot.seq, 2 * (lap + 1));
        }
        if req.opcode == crate::request::Opcode::Quiet as u8 {
            atom::store_release(&self.header.quieted, ticket + 1);
        }
        atom::store_release(&self.header.head, ticket + 1);
    }

    /// Consumer: records that issuing a request failed; producers waiting now or later
    /// fail with it.
    pub fn fail(&self, f: Failed) {
        atom::store_release(&self.header.failed, f.word());
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// The layout asserted at compile time, spelled out with the fields' byte offsets as
    /// a peer would read them.
    #[test]
    fn layout() {
        assert_eq!(ring_bytes(4), 192 + 4 * 128);
        let f = Failed { pe: 3, opcode: 2 };
        assert_eq!(Failed::from_word(f.word()), Some(f));
        assert_eq!(Failed::from_word(0), None);
    }

    /// One thread through a ring of 2 slots: laps, fetch handshakes and quiet.
    #[test]
    fn single_thread_laps() {
        let mut mem: Vec<u64> = std::vec![0; ring_bytes(2) / 8 + 8];
        let off = mem.as_ptr().align_offset(64);
        let base = mem[off..].as_mut_ptr().cast::<u8>();
        // SAFETY: zeroed, aligned, large enough; capacity written first.
        let ring = unsafe {
            (*base.add(128).cast::<u64>()) = 2;
            Ring::from_raw(base)
        };
        for i in 0..5u64 {
            let t = ring
                .submit(&Request::put(1, i, 0, 8), false, || {})
                .unwrap();
            assert_eq!(t, 2 * i);
            let (r, waited) = ring.peek().unwrap();
            assert_eq!((r.remote, r.tag, waited), (i, t, false));
            ring.complete(&r, false, 0);
            let t = ring.submit(&Request::get(1, 0, i, 8), true, || {}).unwrap();
            let (r, waited) = ring.peek().unwrap();
            assert!(waited);
            ring.complete(&r, true, 100 + i);
            assert_eq!(ring.wait_result(t, || {}).unwrap(), 100 + i);
            assert!(ring.peek().is_none());
        }
        let t = ring.submit(&Request::quiet(), false, || {}).unwrap();
        let (r, _) = ring.peek().unwrap();
        ring.complete(&r, false, 0);
        ring.wait_quiet(t, || {}).unwrap();
        ring.fail(Failed { pe: 1, opcode: 1 });
        assert_eq!(
            ring.submit(&Request::quiet(), false, || {}),
            Err(Failed { pe: 1, opcode: 1 })
        );
        assert_eq!(
            ring.wait_result(99, || {}),
            Err(Failed { pe: 1, opcode: 1 })
        );
    }
}
