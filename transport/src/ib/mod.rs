//! The ibverbs transport (feature `ib`): RC queue pairs to every remote peer, the whole
//! heap registered once, RDMA WRITE/READ and NIC atomics, through `sideway` (which loads
//! libibverbs at run time, so an `ib` build runs everywhere).
//!
//! # Connecting (`connect.rs`)
//! Each PE opens the first usable port ([`device`]), registers its heap ([`mr`]) and a
//! bounce buffer, creates one CQ and `SYMMEM_IB_QPS_PER_PEER` RC QPs per remote peer and
//! moves them to INIT. Its [`endpoint`] (LID, GID, MTU, heap rkey/base/len, and the QP
//! numbers and PSNs it made for each peer) goes round through the bootstrap's allgather,
//! together with a failure flag, so one PE without a device fails every PE with its
//! reason instead of leaving them waiting. Then each QP goes to RTR and RTS ([`qp`]) and
//! a barrier makes sure every peer can receive before anyone sends.
//!
//! # Issuing
//! [`Transport::submit`] turns a request into work requests ([`wr`]) on one QP of the
//! target (round-robin per request, so a put_signal's data and signal share a QP), every
//! WR signaled. A payload inside this PE's host heap is used in place; anything else goes
//! through a bounce slot. Completion is local, as the trait says: a put returns once its
//! data is copied into bounce slots (or, in place, once its WRITEs completed); a get, a
//! fetching AMO or a CAS loop once their completions arrived. `quiet` waits until no WR
//! is outstanding; `fence` flags the next WR of each QP with `IBV_SEND_FENCE` (with
//! several QPs per peer it waits like `quiet`, as NVSHMEM does).
//!
//! # Completions
//! One CQ, polled by whoever waits (submit, quiet, progress) under the state lock, with
//! the runtime's [`Backoff`] between polls (2 cores: a busy spin would starve peers).
//! Waits release the lock while they back off. A failed completion fails that operation
//! and every later one to the same peer, with an error naming the peer, device, opcode
//! and status ([`error`]). `SYMMEM_TIMEOUT` bounds every wait; the RC retry limits
//! (about 30 s) bound them anyway.

mod connect;
mod device;
mod entry;
// Crate-visible for the fuzzing decoders (`crate::fuzzing`).
pub(crate) mod endpoint;
mod error;
mod mr;
mod nic;
mod qp;
mod wr;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use symmem_device::{Opcode, Request};
use symmem_sync::Backoff;

use self::mr::{Bounce, SLOT_BYTES};
use self::nic::{Nic, Posted};
use self::wr::{Fences, Local, Plan, Wr, WrOp, MAX_MSG};
use super::target::Target;
use crate::error::{Error, Result};
use crate::interface::{HeapRegion, Io, Transport};

use self::device::probe;
use self::mr::probe_gpu_registration;
use crate::registry::{counted, Driver, Entry};

/// The ib transport in the registry: `auto` takes it wherever an RDMA device with an
/// active port is, and its NIC registers the heap (a GPU heap needs GPUDirect RDMA, or
/// host staging).
pub(crate) const ENTRY: Entry = entry::ENTRY.with_driver(Driver {
    probe,
    auto: Some(|config| {
        probe(config)
            .map(|device| format!("RDMA device {device}"))
            .map_err(|why| format!("no RDMA device ({why})"))
    }),
    gpu_registration: Some(|setup| {
        probe_gpu_registration(setup.config, setup.heap, setup.export_gpu_heap)
    }),
    connect: |setup| Ok(counted(setup, ENTRY.name, IbTransport::connect(setup)?)),
});

/// Most WRs outstanding per QP.
const QP_DEPTH: u32 = 256;

/// The ibverbs transport of one PE.
pub(crate) struct IbTransport {
    me: usize,
    /// "mlx5_0 port 1", for errors.
    device: String,
    qps_per_peer: usize,
    timeout: Option<Duration>,
    /// `None` once shut down.
    state: Mutex<Option<State>>,
    /// Calls whose wait is slow, for the hang report.
    blocked: crate::blocked::BlockedCalls,
}

/// Everything the NIC work needs, under one lock.
struct State {
    /// Declared first: its QPs and memory regions go before the bounce memory.
    nic: Box<dyn Nic>,
    peers: Vec<Option<Peer>>,
    heap: HeapRegion,
    heap_lkey: u32,
    bounce: Bounce,
    /// Posted WRs not yet completed, by WR id.
    pending: HashMap<u64, Pending>,
    /// Completed WRs whose issuer waits for them, by WR id.
    done: HashMap<u64, Done>,
    next_id: u64,
    depth: u32,
}

/// A remote peer: its QPs and heap.
struct Peer {
    qps: Vec<Qp>,
    /// The QP the next request uses.
    next: usize,
    rkey: u32,
    base: u64,
    len: u64,
    /// The first failure on any of its QPs; every later operation fails with it.
    failure: Option<String>,
}

/// Bookkeeping of one QP (the QP itself is the NIC's).
struct Qp {
    outstanding: u32,
    fences: Fences,
}

/// A bounce-buffer piece a WR holds until it completes.
#[derive(Debug, Clone, Copy)]
enum Held {
    None,
    Slot(usize),
    Word(usize),
}

struct Pending {
    pe: usize,
    qp: usize,
    /// The request's name (`put`, `amo` …).
    op: &'static str,
    /// The WR's opcode name.
    wr: &'static str,
    held: Held,
    /// Whether the issuer collects the completion (else it is retired when polled).
    wait: bool,
}

struct Done {
    status: u32,
    vendor: u32,
    wr: &'static str,
    held: Held,
}

/// Where a request goes: its name, the target PE and the QP index.
#[derive(Debug, Clone, Copy)]
struct To {
    op: &'static str,
    pe: usize,
    qi: usize,
}

/// A request's payload: the put's source or the get's destination, and whether it lies
/// in this PE's registered host heap (used in place) or goes through bounce slots.
struct Payload<'a> {
    src: Option<&'a [u8]>,
    dst: Option<&'a mut [u8]>,
    in_place: bool,
}

impl Payload<'_> {
    /// No payload (AMOs, signals).
    const NONE: Payload<'static> = Payload {
        src: None,
        dst: None,
        in_place: false,
    };
}

/// What to do with a collected completion.
enum Finish {
    /// Nothing (a WRITE from the heap in place).
    Nothing,
    /// Copy `len` bytes from bounce slot to `dst + offset` (a get through the bounce).
    CopyOut { offset: usize, len: usize },
    /// Read the fetched value from the word.
    Value,
}

impl IbTransport {
    fn err(&self, op: &'static str, pe: usize, detail: impl Into<String>) -> Error {
        Error::Transport {
            transport: "ib",
            op,
            me: self.me,
            pe,
            detail: detail.into(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        // A panic while holding the lock leaves NIC bookkeeping we cannot trust, but
        // poisoning must not turn into a second panic here: the state is still memory-safe.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Polls and backs off until `ready` holds, returning the locked state; fails when the
    /// transport is shut down, `pe`'s connection failed (`None`: a wait on every peer,
    /// which failures do not stop), or `SYMMEM_TIMEOUT` passes (the error names the PEs
    /// with work outstanding).
    fn wait_until(
        &self,
        op: &'static str,
        pe: Option<usize>,
        what: &str,
        mut ready: impl FnMut(&State) -> bool,
    ) -> Result<MutexGuard<'_, Option<State>>> {
        let start = Instant::now();
        let mut backoff = Backoff::new();
        let named = pe.unwrap_or(self.me);
        let mut shown = None;
        loop {
            let mut g = self.lock();
            let Some(st) = g.as_mut() else {
                return Err(self.err(op, named, "the ib transport is shut down"));
            };
            st.poll(self.me, &self.device);
            if ready(st) {
                return Ok(g);
            }
            if let Some(f) = pe.and_then(|pe| st.peers.get(pe)?.as_ref()?.failure.clone()) {
                return Err(self.err(op, named, f));
            }
            if backoff.is_slow() {
                shown.get_or_insert_with(|| {
                    self.blocked.begin(crate::blocked::Blocked {
                        op,
                        peer: pe,
                        detail: format!("{what} on the ib transport ({})", self.device),
                        since: start,
                    })
                });
                if let Some(t) = self.timeout.filter(|&t| start.elapsed() > t) {
                    let mut waiting: Vec<usize> = st.pending.values().map(|p| p.pe).collect();
                    waiting.sort_unstable();
                    waiting.dedup();
                    let list: Vec<String> = waiting.iter().map(|p| p.to_string()).collect();
                    return Err(self.err(
                        op,
                        pe.or(waiting.first().copied()).unwrap_or(named),
                        format!(
                            "timed out after {:.1} s (SYMMEM_TIMEOUT) waiting for {what} on {}; work requests outstanding to PEs [{}]",
                            t.as_secs_f64(),
                            self.device,
                            list.join(", ")
                        ),
                    ));
                }
            }
            drop(g);
            backoff.snooze();
        }
    }

    /// Waits for the completions of `waits`, then finishes each (copies out, reads the
    /// fetched value, gives back bounce pieces). Returns the last fetched value.
    fn collect(
        &self,
        op: &'static str,
        pe: usize,
        waits: &mut Vec<(u64, Finish)>,
        dst: &mut Option<&mut [u8]>,
    ) -> Result<u64> {
        if waits.is_empty() {
            return Ok(0);
        }
        let mut g = self.wait_until(op, Some(pe), "work completions", |st| {
            waits.iter().all(|(id, _)| st.done.contains_key(id))
        })?;
        let st = g.as_mut().expect("checked by wait_until");
        let mut value = 0;
        let mut failed = None;
        for (id, finish) in waits.drain(..) {
            let d = st.done.remove(&id).expect("waited for");
            if d.status != 0 {
                failed.get_or_insert_with(|| {
                    error::completion_error(self.me, pe, &self.device, op, d.wr, d.status, d.vendor)
                });
            } else {
                match (finish, d.held) {
                    (Finish::CopyOut { offset, len }, Held::Slot(s)) => {
                        if let Some(out) = dst.as_deref_mut() {
                            // SAFETY: slot `s` holds `len` bytes the READ wrote; the
                            // completion was polled, so the NIC is done with them.
                            let src = unsafe { std::slice::from_raw_parts(st.bounce.slot(s), len) };
                            out[offset..offset + len].copy_from_slice(src);
                        }
                    }
                    (Finish::Value, Held::Word(w)) => {
                        // SAFETY: word `w` holds the fetched value, written by the NIC
                        // before the completion that was polled.
                        value = unsafe { std::ptr::read_volatile(st.bounce.word(w)) };
                    }
                    _ => {}
                }
            }
            st.give_back(d.held);
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(value),
        }
    }

    /// Posts `wrs` of one request on QP `to.qi` of `to.pe`; returns the fetched value
    /// when `fetch`. On an error, the completions it was waiting for are left to the
    /// poller, which gives their bounce pieces back.
    fn run(&self, to: To, wrs: &[Wr], mut payload: Payload<'_>, fetch: bool) -> Result<u64> {
        let mut waits: Vec<(u64, Finish)> = Vec::new();
        let r = self.run_into(to, wrs, &mut payload, fetch, &mut waits);
        if r.is_err() && !waits.is_empty() {
            let mut g = self.lock();
            if let Some(st) = g.as_mut() {
                for (id, _) in waits.drain(..) {
                    if let Some(d) = st.done.remove(&id) {
                        st.give_back(d.held);
                    } else if let Some(p) = st.pending.get_mut(&id) {
                        p.wait = false;
                    }
                }
            }
        }
        r
    }

    fn run_into(
        &self,
        to: To,
        wrs: &[Wr],
        payload: &mut Payload<'_>,
        fetch: bool,
        waits: &mut Vec<(u64, Finish)>,
    ) -> Result<u64> {
        let To { op, pe, qi } = to;
        for wr in wrs {
            // The local side: in place in the heap, or a bounce piece.
            let needs_slot = matches!(wr.local, Local::Payload { .. }) && !payload.in_place;
            let needs_word = !matches!(wr.local, Local::Payload { .. });
            // Our own gets hold slots until collected. While pieces are short, collect
            // them instead of waiting for more, or two threads could each wait for the
            // pieces the other holds.
            let mut g = loop {
                let mine = !waits.is_empty();
                let g = self.wait_until(
                    op,
                    Some(pe),
                    "a free bounce slot and send-queue entry",
                    |st| {
                        let starved = (needs_slot && st.bounce.slots.all_taken())
                            || (needs_word && st.bounce.words.all_taken());
                        let qp_room = st.peers[pe]
                            .as_ref()
                            .is_some_and(|p| p.qps[qi].outstanding < st.depth);
                        (starved && mine) || (!starved && qp_room)
                    },
                )?;
                let st = g.as_ref().expect("checked by wait_until");
                let starved = (needs_slot && st.bounce.slots.all_taken())
                    || (needs_word && st.bounce.words.all_taken());
                if !starved {
                    break g;
                }
                drop(g);
                self.collect(op, pe, waits, &mut payload.dst)?;
            };
            let st = g.as_mut().expect("checked by wait_until");
            let (lkey, addr, held, finish, wait) = st
                .local_buffer(wr, payload, needs_slot, fetch)
                .map_err(|why| self.err(op, pe, why))?;
            let id = st.post(to, wr, (lkey, addr), held, wait).map_err(|e| {
                st.give_back(held);
                error::verbs_error(self.me, pe, &self.device, op, e)
            })?;
            if wait {
                waits.push((id, finish));
            }
        }
        let last = self.collect(op, pe, waits, &mut payload.dst)?;
        Ok(if fetch { last } else { 0 })
    }

    /// Issues a compare-and-swap loop on QP `qi` of `pe`; returns the AMO's result.
    fn cas_loop(&self, pe: usize, qi: usize, c: wr::CasLoop) -> Result<u64> {
        let step = |op: WrOp| Wr {
            op,
            remote: c.word,
            len: 8,
            local: Local::Result,
        };
        let to = To { op: "amo", pe, qi };
        let mut old = self.run(to, &[step(WrOp::FetchAdd { add: 0 })], Payload::NONE, true)?;
        loop {
            let Some(new) = c.next(old) else {
                return Ok(c.result(old));
            };
            let got = self.run(
                to,
                &[step(WrOp::CompareSwap {
                    compare: old,
                    swap: new,
                })],
                Payload::NONE,
                true,
            )?;
            if got == old {
                return Ok(c.result(old));
            }
            old = got;
        }
    }
}

impl State {
    /// Retires every available completion.
    fn poll(&mut self, me: usize, device: &str) {
        let mut got = Vec::new();
        self.nic.poll(&mut got);
        for (id, status, vendor) in got {
            let Some(p) = self.pending.remove(&id) else {
                continue;
            };
            if let Some(peer) = self.peers[p.pe].as_mut() {
                peer.qps[p.qp].outstanding -= 1;
                if status != 0 && peer.failure.is_none() {
                    let e = error::completion_error(me, p.pe, device, p.op, p.wr, status, vendor);
                    tracing::error!("{e}");
                    peer.failure = Some(format!(
                        "the connection failed (a {}: {}); every later operation to this PE fails",
                        p.op,
                        error::completion_detail(device, p.wr, status, vendor)
                    ));
                }
            }
            if p.wait {
                self.done.insert(
                    id,
                    Done {
                        status,
                        vendor,
                        wr: p.wr,
                        held: p.held,
                    },
                );
            } else {
                self.give_back(p.held);
            }
        }
    }

    /// The local side of `wr`: the caller's buffer in the heap (`needs_slot` false), or a
    /// bounce slot or word, taken here (the caller waited for one to be free). Returns the
    /// key and address the NIC uses, what is held until completion, what to do then, and
    /// whether the issuer waits for it.
    fn local_buffer(
        &mut self,
        wr: &Wr,
        payload: &Payload<'_>,
        needs_slot: bool,
        fetch: bool,
    ) -> std::result::Result<(u32, u64, Held, Finish, bool), &'static str> {
        Ok(match wr.local {
            Local::Payload { offset } => {
                let (o, l) = (offset as usize, wr.len as usize);
                let place = match (&payload.src, &payload.dst) {
                    (Some(s), _) => s[o..o + l].as_ptr(),
                    (None, Some(d)) => d[o..o + l].as_ptr(),
                    (None, None) => return Err("a payload request without a buffer"),
                };
                if !needs_slot {
                    // In place: the issuer waits until the NIC is done with it.
                    (
                        self.heap_lkey,
                        place as u64,
                        Held::None,
                        Finish::Nothing,
                        true,
                    )
                } else {
                    let s = self.bounce.slots.take().expect("waited for a free slot");
                    let at = self.bounce.slot(s);
                    if wr.op == WrOp::Write {
                        // SAFETY: slot `s` was free (taken just now) and holds
                        // SLOT_BYTES >= l (planned with chunk <= SLOT_BYTES); `place`
                        // is `l` readable bytes of the source.
                        unsafe { std::ptr::copy_nonoverlapping(place, at, l) };
                        // The data is copied: the put is locally complete.
                        (
                            self.bounce.lkey,
                            at as u64,
                            Held::Slot(s),
                            Finish::Nothing,
                            false,
                        )
                    } else {
                        let finish = Finish::CopyOut { offset: o, len: l };
                        (self.bounce.lkey, at as u64, Held::Slot(s), finish, true)
                    }
                }
            }
            Local::Value(v) => {
                let w = self.bounce.words.take().expect("waited for a free word");
                // SAFETY: word `w` was free (taken just now); the NIC reads it only
                // after the post.
                unsafe { std::ptr::write_volatile(self.bounce.word(w), v) };
                let at = self.bounce.word(w) as u64;
                (self.bounce.lkey, at, Held::Word(w), Finish::Nothing, false)
            }
            Local::Result => {
                let w = self.bounce.words.take().expect("waited for a free word");
                let at = self.bounce.word(w) as u64;
                (self.bounce.lkey, at, Held::Word(w), Finish::Value, fetch)
            }
        })
    }

    fn give_back(&mut self, held: Held) {
        match held {
            Held::None => {}
            Held::Slot(s) => self.bounce.slots.give(s),
            Held::Word(w) => self.bounce.words.give(w),
        }
    }

    /// Posts one signaled WR of request `to` with local buffer `(lkey, addr)`, holding
    /// `held` until it completes; returns its id.
    fn post(
        &mut self,
        to: To,
        wr: &Wr,
        (lkey, addr): (u32, u64),
        held: Held,
        wait: bool,
    ) -> std::result::Result<u64, String> {
        let To { op, pe, qi } = to;
        let id = self.next_id;
        self.next_id += 1;
        let peer = self.peers[pe].as_mut().expect("checked by the caller");
        let q = &mut peer.qps[qi];
        let posted = Posted {
            id,
            op: wr.op,
            rkey: peer.rkey,
            raddr: peer.base + wr.remote,
            lkey,
            laddr: addr,
            len: wr.len,
            fence: q.fences.take(),
        };
        self.nic.post(pe, qi, &posted)?;
        q.outstanding += 1;
        self.pending.insert(
            id,
            Pending {
                pe,
                qp: qi,
                op,
                wr: wr.op.name(),
                held,
                wait,
            },
        );
        Ok(id)
    }
}

impl Transport for IbTransport {
    fn name(&self) -> &'static str {
        "ib"
    }

    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64> {
        let Some(opcode) = req.opcode() else {
            return Err(self.err(
                "submit",
                req.pe as usize,
                format!("unknown opcode {}", req.opcode),
            ));
        };
        let op = opcode.name();
        let pe = req.pe as usize;
        match opcode {
            Opcode::Fence => return self.fence().map(|()| 0),
            Opcode::Quiet => return self.quiet().map(|()| 0),
            _ => {}
        }
        // The payload's length is the buffer's.
        let mut r = *req;
        let (src, dst) = match io {
            Io::Src(s) => {
                r.len = s.len() as u64;
                (Some(s), None)
            }
            Io::Dst(d) => {
                r.len = d.len() as u64;
                (None, Some(d))
            }
            Io::None => (None, None),
        };
        match (opcode, &src, &dst) {
            (Opcode::Put | Opcode::PutSignal, None, _) | (Opcode::Get, _, None) => {
                return Err(self.err(op, pe, "the payload buffer is missing"))
            }
            _ => {}
        }
        let (qi, in_place) = {
            let mut g = self.lock();
            let st = g
                .as_mut()
                .ok_or_else(|| self.err(op, pe, "the ib transport is shut down"))?;
            let heap = st.heap;
            let Some(peer) = st.peers.get_mut(pe).and_then(|p| p.as_mut()) else {
                return Err(self.err(op, pe, "this PE has no ib connection to it"));
            };
            if let Some(f) = &peer.failure {
                return Err(self.err(op, pe, f.clone()));
            }
            // The same checks a target applies, against the peer's heap.
            Target::new(HeapRegion {
                base: 0,
                len: peer.len as usize,
                host: true,
            })
            .check(&r)
            .map_err(|why| self.err(op, pe, why))?;
            let qi = peer.next;
            peer.next = (peer.next + 1) % peer.qps.len();
            let buf = src
                .map(|s| (s.as_ptr(), s.len()))
                .or(dst.as_ref().map(|d| (d.as_ptr(), d.len())));
            let in_place = buf.is_some_and(|(p, l)| {
                heap.host
                    && p as u64 >= heap.base
                    && p as u64 + l as u64 <= heap.base + heap.len as u64
            });
            (qi, in_place)
        };
        let chunk = if in_place { MAX_MSG } else { SLOT_BYTES as u64 };
        match wr::plan(&r, chunk).map_err(|why| self.err(op, pe, why))? {
            Plan::Wrs(wrs) => {
                // A fetching AMO waits for its value. A fetch is always fetching, whatever
                // its result flag says (the host API's remote `load_word` sends 0).
                let fetch = opcode == Opcode::Amo
                    && (req.local != 0 || req.amo_kind() == Some(symmem_device::AmoKind::Fetch));
                self.run(
                    To { op, pe, qi },
                    &wrs,
                    Payload { src, dst, in_place },
                    fetch,
                )
            }
            Plan::CasLoop(c) => self.cas_loop(pe, qi, c),
        }
    }

    fn fence(&self) -> Result<()> {
        if self.qps_per_peer > 1 {
            // Separate QPs are not ordered with each other: complete everything.
            return self.quiet();
        }
        let mut g = self.lock();
        if let Some(st) = g.as_mut() {
            for peer in st.peers.iter_mut().flatten() {
                for q in &mut peer.qps {
                    q.fences.mark();
                }
            }
        }
        Ok(())
    }

    fn quiet(&self) -> Result<()> {
        let g = self.wait_until("quiet", None, "every outstanding work request", |st| {
            st.pending.values().all(|p| p.wait)
        })?;
        let st = g.as_ref().expect("checked by wait_until");
        if let Some((pe, f)) = st
            .peers
            .iter()
            .enumerate()
            .find_map(|(pe, p)| Some((pe, p.as_ref()?.failure.clone()?)))
        {
            return Err(self.err("quiet", pe, f));
        }
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        if let Ok(mut g) = self.state.try_lock() {
            if let Some(st) = g.as_mut() {
                st.poll(self.me, &self.device);
            }
        }
        Ok(())
    }

    fn blocked(&self) -> Option<crate::blocked::Blocked> {
        self.blocked.oldest()
    }

    fn shutdown(&self) {
        // Dropping the state destroys the QPs, then the CQ, and deregisters the heap and
        // the bounce buffer (sideway's Arcs order it) before the runtime unmaps the heap.
        let st = self.lock().take();
        drop(st);
    }
}

#[cfg(test)]
mod tests {
    use super::connect::{exchange_blob, read_exchange};
    use super::endpoint::{Endpoint, QpAddr};
    use super::*;
    use crate::config::TransportConfig;

    #[test]
    fn a_pe_whose_setup_failed_fails_everyone_naming_it() {
        let ep = Endpoint {
            link: endpoint::Link::Ethernet,
            mtu: 3,
            lid: 0,
            rd_atomic: 16,
            qps_per_peer: 1,
            n_pes: 3,
            rkey: 9,
            base: 0x1000,
            len: 1 << 20,
            gid: [1; 16],
            qps: vec![QpAddr { qpn: 5, psn: 1 }; 3],
        };
        let ok = exchange_blob(Ok(&ep));
        let remote = [false, true, true];
        let eps = read_exchange(&[ok.clone(), ok.clone(), ok.clone()], &remote, 1).unwrap();
        assert!(eps[0].is_none(), "PE 0 is not reached through ib");
        assert_eq!(eps[1].as_ref(), Some(&ep));

        let down = Error::TransportConfig {
            variable: crate::config::var::REMOTE_TRANSPORT,
            value: "ib".into(),
            reason: "PE 2: no usable RDMA device: mlx5_0 port 1 is DOWN".into(),
        };
        let failed = exchange_blob(Err(&down));
        let (pe, why) = read_exchange(&[ok.clone(), ok.clone(), failed], &remote, 1).unwrap_err();
        assert_eq!(pe, 2);
        assert!(
            why.contains("PE 2 could not set up ib") && why.contains("mlx5_0 port 1 is DOWN"),
            "{why}"
        );
        let (pe, why) = read_exchange(&[ok.clone(), vec![], ok.clone()], &remote, 1).unwrap_err();
        assert_eq!((pe, why.contains("malformed")), (1, true), "{why}");
        let (pe, why) =
            read_exchange(&[ok.clone(), ok[..20].to_vec(), ok.clone()], &remote, 1).unwrap_err();
        assert_eq!((pe, why.contains("bytes")), (1, true), "{why}");
        let (_, why) =
            read_exchange(&[ok.clone(), ok.clone(), ok.clone()], &remote, 2).unwrap_err();
        assert!(why.contains("SYMMEM_IB_QPS_PER_PEER"), "{why}");
        let (_, why) = read_exchange(&[ok.clone(), ok.clone()], &remote, 1).unwrap_err();
        assert!(why.contains("2 endpoints for 3 PEs"), "{why}");
    }

    #[test]
    fn an_hca_list_that_matches_nothing_is_reported() {
        let config = TransportConfig {
            hca_filter: crate::config::HcaFilter::parse("=no_such_hca0").unwrap(),
            ..TransportConfig::unset()
        };
        if let Err(why) = probe(&config) {
            // Without libibverbs or devices the list is never reached; with devices, the
            // answer names the filter and what exists.
            assert!(
                why.starts_with("libibverbs not found")
                    || why.starts_with("no RDMA devices")
                    || (why.contains("SYMMEM_HCA_LIST") && why.contains("no_such_hca0")),
                "{why}"
            );
        }
    }
}

/// The transport's bookkeeping (bounce slots, waits, QP round-robin, fences, CAS loops,
/// failures, timeouts) driven through a fake NIC that performs each work request on
/// ordinary memory when the CQ is polled, as a NIC would complete them later.
#[cfg(test)]
mod fake_nic_tests {
    use std::collections::VecDeque;
    use std::sync::Arc;

    use symmem_device::{AmoKind, SignalOp};

    use super::mr::{SLOTS, WORDS};
    use super::nic::Completion;
    use super::*;

    const DEVICE: &str = "fake0 port 1";
    const HEAP_LKEY: u32 = 0x77;
    const BOUNCE_LKEY: u32 = 0x55;

    #[derive(Default)]
    struct Ctl {
        /// Complete nothing.
        stall: bool,
        /// The n-th WR performed (1-based) fails with this status; every later WR on
        /// the same peer is flushed.
        fail_at: Option<(u64, u32)>,
    }

    struct FakeNic {
        queue: VecDeque<(usize, Posted)>,
        log: Arc<Mutex<Vec<(usize, usize, Posted)>>>,
        ctl: Arc<Mutex<Ctl>>,
        performed: u64,
        failed_pe: Option<usize>,
    }

    impl Nic for FakeNic {
        fn post(&mut self, pe: usize, qi: usize, wr: &Posted) -> std::result::Result<(), String> {
            self.log.lock().unwrap().push((pe, qi, *wr));
            self.queue.push_back((pe, *wr));
            Ok(())
        }

        fn poll(&mut self, out: &mut Vec<Completion>) {
            let ctl = self.ctl.lock().unwrap();
            if ctl.stall {
                return;
            }
            while let Some((pe, w)) = self.queue.pop_front() {
                self.performed += 1;
                if self.failed_pe == Some(pe) {
                    out.push((w.id, 5, 0));
                    continue;
                }
                if let Some((n, status)) = ctl.fail_at {
                    if n == self.performed {
                        self.failed_pe = Some(pe);
                        out.push((w.id, status, 0x81));
                        continue;
                    }
                }
                // SAFETY: the tests' remote heaps and the transport's local buffers are
                // live, and the transport keeps local buffers until their completion.
                unsafe { perform(&w) };
                out.push((w.id, 0, 0));
            }
        }
    }

    /// Does what the NIC would do for `w`.
    ///
    /// # Safety
    /// `w.raddr` and `w.laddr` are valid for `w.len` bytes (8-byte aligned for atomics).
    unsafe fn perform(w: &Posted) {
        let (r, l, n) = (w.raddr as *mut u8, w.laddr as *mut u8, w.len as usize);
        // SAFETY: forwarded from the caller.
        unsafe {
            match w.op {
                WrOp::Write => std::ptr::copy_nonoverlapping(l, r, n),
                WrOp::Read => std::ptr::copy_nonoverlapping(r, l, n),
                WrOp::FetchAdd { add } => {
                    let old = (r as *mut u64).read();
                    (r as *mut u64).write(old.wrapping_add(add));
                    (l as *mut u64).write(old);
                }
                WrOp::CompareSwap { compare, swap } => {
                    let old = (r as *mut u64).read();
                    if old == compare {
                        (r as *mut u64).write(swap);
                    }
                    (l as *mut u64).write(old);
                }
            }
        }
    }

    struct Rig {
        t: IbTransport,
        /// Heaps of PEs 1.. (index 0 is this PE's own heap).
        heaps: Vec<Box<[u64]>>,
        log: Arc<Mutex<Vec<(usize, usize, Posted)>>>,
        ctl: Arc<Mutex<Ctl>>,
    }

    impl Rig {
        /// PE 0 of `n` PEs, reaching PEs 1.. through the fake NIC; heaps of `heap` bytes.
        fn new(n: usize, heap: usize, q: usize, timeout: Option<Duration>) -> Rig {
            let mut heaps: Vec<Box<[u64]>> = (0..n)
                .map(|_| vec![0u64; heap / 8].into_boxed_slice())
                .collect();
            let peers = (0..n)
                .map(|pe| {
                    (pe != 0).then(|| Peer {
                        qps: (0..q)
                            .map(|_| Qp {
                                outstanding: 0,
                                fences: Fences::default(),
                            })
                            .collect(),
                        next: 0,
                        rkey: 0x1000 + pe as u32,
                        base: heaps[pe].as_mut_ptr() as u64,
                        len: heap as u64,
                        failure: None,
                    })
                })
                .collect();
            let log = Arc::new(Mutex::new(Vec::new()));
            let ctl = Arc::new(Mutex::new(Ctl::default()));
            let mut bounce = Bounce::new();
            bounce.lkey = BOUNCE_LKEY;
            let st = State {
                nic: Box::new(FakeNic {
                    queue: VecDeque::new(),
                    log: log.clone(),
                    ctl: ctl.clone(),
                    performed: 0,
                    failed_pe: None,
                }),
                peers,
                heap: HeapRegion {
                    base: heaps[0].as_mut_ptr() as u64,
                    len: heap,
                    host: true,
                },
                heap_lkey: HEAP_LKEY,
                bounce,
                pending: HashMap::new(),
                done: HashMap::new(),
                next_id: 1,
                depth: 8,
            };
            Rig {
                t: IbTransport {
                    me: 0,
                    device: DEVICE.into(),
                    qps_per_peer: q,
                    timeout,
                    state: Mutex::new(Some(st)),
                    blocked: Default::default(),
                },
                heaps,
                log,
                ctl,
            }
        }

        fn bytes(&self, pe: usize) -> &[u8] {
            bytemuck::cast_slice(&self.heaps[pe])
        }

        fn take_log(&self) -> Vec<(usize, usize, Posted)> {
            std::mem::take(&mut *self.log.lock().unwrap())
        }

        /// Every bounce piece is back in its pool and nothing is outstanding.
        fn idle(&self) -> bool {
            let g = self.t.lock();
            let st = g.as_ref().unwrap();
            st.pending.is_empty()
                && st.done.is_empty()
                && st.bounce.slots_free() == SLOTS
                && st.bounce.words_free() == WORDS
        }
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn puts_through_bounce_slots_land_after_quiet_and_gets_read_them_back() {
        let r = Rig::new(2, 1 << 20, 1, None);
        let data = pattern(300 << 10, 7);
        r.t.submit(&Request::put(1, 64, 0, 0), Io::Src(&data))
            .unwrap();
        let log = r.take_log();
        assert_eq!(log.len(), 3, "300 KiB in 128 KiB slots");
        for (k, (pe, qi, w)) in log.iter().enumerate() {
            assert_eq!(
                (*pe, *qi, w.op, w.lkey, w.rkey),
                (1, 0, WrOp::Write, BOUNCE_LKEY, 0x1001)
            );
            assert_eq!(
                w.raddr,
                r.heaps[1].as_ptr() as u64 + 64 + (k as u64) * (128 << 10)
            );
        }
        // Locally complete, not yet performed: the slots still hold the data.
        assert!(!r.idle());
        r.t.quiet().unwrap();
        assert!(r.idle());
        assert_eq!(&r.bytes(1)[64..64 + data.len()], &data[..]);

        let mut back = vec![0u8; data.len()];
        r.t.submit(&Request::get(1, 0, 64, 0), Io::Dst(&mut back))
            .unwrap();
        assert_eq!(back, data);
        assert!(r.idle());
    }

    #[test]
    fn gets_larger_than_every_slot_collect_their_own_slots() {
        let len = SLOTS * SLOT_BYTES + (SLOT_BYTES / 2) + 3;
        let r = Rig::new(2, 8 << 20, 1, None);
        let data = pattern(len, 3);
        r.t.submit(&Request::put(1, 8, 0, 0), Io::Src(&data))
            .unwrap();
        let mut back = vec![0u8; len];
        r.t.submit(&Request::get(1, 0, 8, 0), Io::Dst(&mut back))
            .unwrap();
        assert!(back == data, "the get read back different bytes");
        r.t.quiet().unwrap();
        assert!(r.idle());
    }

    #[test]
    fn heap_payloads_are_used_in_place_and_waited_for() {
        let mut r = Rig::new(2, 1 << 20, 1, None);
        let src = pattern(200 << 10, 9);
        let local: &mut [u8] = bytemuck::cast_slice_mut(&mut r.heaps[0]);
        local[4096..4096 + src.len()].copy_from_slice(&src);
        let base = local.as_ptr() as u64;
        // SAFETY: the slice lies inside the heap box, which outlives the submit.
        let in_heap = unsafe { std::slice::from_raw_parts((base + 4096) as *const u8, src.len()) };
        r.t.submit(&Request::put(1, 0, 0, 0), Io::Src(in_heap))
            .unwrap();
        let log = r.take_log();
        assert_eq!(log.len(), 1, "one WR: no bounce chunking in place");
        assert_eq!((log[0].2.lkey, log[0].2.laddr), (HEAP_LKEY, base + 4096));
        assert!(r.idle(), "an in-place put returns after its completion");
        assert_eq!(&r.bytes(1)[..src.len()], &src[..]);
    }

    #[test]
    fn put_signal_posts_data_then_signal_on_one_qp() {
        let r = Rig::new(2, 1 << 20, 2, None);
        let data = pattern(200 << 10, 1);
        let ps = Request::put_signal(1, 0, 0, 0, 0x8_0000, SignalOp::Add, 5);
        r.t.submit(&ps, Io::Src(&data)).unwrap();
        r.t.submit(&ps, Io::Src(&data)).unwrap();
        let ps = Request::put_signal(1, 0, 0, 0, 0x8_0008, SignalOp::Set, 42);
        r.t.submit(&ps, Io::Src(&data)).unwrap();
        r.t.quiet().unwrap();
        let log = r.take_log();
        assert_eq!(log.len(), 9);
        for (req, wrs) in log.chunks(3).enumerate() {
            // Round-robin per request, every WR of one put_signal on the same QP.
            assert!(
                wrs.iter().all(|(_, qi, _)| *qi == req % 2),
                "{req}: {wrs:?}"
            );
            assert!(wrs[..2]
                .iter()
                .all(|(_, _, w)| w.op == WrOp::Write && w.len > 8));
        }
        assert_eq!(log[2].2.op, WrOp::FetchAdd { add: 5 });
        assert_eq!((log[8].2.op, log[8].2.len), (WrOp::Write, 8));
        let words: &[u64] = &r.heaps[1];
        assert_eq!(words[0x8_0000 / 8], 10);
        assert_eq!(words[0x8_0008 / 8], 42);
        assert_eq!(&r.bytes(1)[..data.len()], &data[..]);
        assert!(r.idle());
    }

    #[test]
    fn amos_native_and_by_cas_loop() {
        let mut r = Rig::new(2, 1 << 16, 1, None);
        r.heaps[1][2] = 100;
        r.heaps[1][3] = 0xaaaa_aaaa_0000_0005;
        let t = &r.t;
        let amo = |kind, width, at, v, c, fetch: bool| {
            t.submit(
                &Request::amo(1, kind, width, at, v, c, fetch as u64),
                Io::None,
            )
            .unwrap()
        };
        assert_eq!(amo(AmoKind::FetchAdd, 8, 16, 7, 0, true), 100);
        assert_eq!(
            amo(AmoKind::FetchAdd, 8, 16, 1, 0, false),
            0,
            "non-fetching"
        );
        t.quiet().unwrap();
        // A fetch returns its value even with the result flag at 0 (load_word's way).
        assert_eq!(amo(AmoKind::Fetch, 8, 16, 0, 0, false), 108);
        assert_eq!(amo(AmoKind::CompareSwap, 8, 16, 9, 108, true), 108);
        assert_eq!(
            amo(AmoKind::CompareSwap, 8, 16, 1, 108, true),
            9,
            "failed compare"
        );
        assert_eq!(amo(AmoKind::Swap, 8, 16, 77, 0, true), 9);
        assert_eq!(amo(AmoKind::Set, 8, 16, 78, 0, false), 0);
        assert_eq!(amo(AmoKind::Fetch, 8, 16, 0, 0, false), 78);
        // 4-byte words in both halves of 0xaaaaaaaa_00000005 at offset 24.
        assert_eq!(amo(AmoKind::FetchOr, 4, 24, 0xf0, 0, true), 5);
        assert_eq!(
            amo(AmoKind::FetchAdd, 4, 28, 0x5555_5556, 0, true),
            0xaaaa_aaaa
        );
        assert_eq!(amo(AmoKind::CompareSwap, 4, 24, 1, 0xf5, true), 0xf5);
        t.quiet().unwrap();
        assert_eq!(r.heaps[1][2], 78);
        assert_eq!(
            r.heaps[1][3], 0x0000_0000_0000_0001,
            "upper half wrapped to 0"
        );
        assert!(r.idle());
        // Every atomic the NIC saw is 8 bytes on an 8-byte-aligned address.
        for (_, _, w) in r.take_log() {
            if !matches!(w.op, WrOp::Write | WrOp::Read) {
                assert!(w.len == 8 && w.raddr % 8 == 0, "{w:?}");
            }
        }
    }

    #[test]
    fn a_fence_flags_the_next_wr_of_each_qp_and_waits_with_several_qps() {
        let r = Rig::new(3, 1 << 16, 1, None);
        let x = [1u8; 8];
        r.t.submit(&Request::put(1, 0, 0, 0), Io::Src(&x)).unwrap();
        r.t.fence().unwrap();
        r.t.submit(&Request::put(1, 8, 0, 0), Io::Src(&x)).unwrap();
        r.t.submit(&Request::put(2, 8, 0, 0), Io::Src(&x)).unwrap();
        r.t.submit(&Request::put(1, 16, 0, 0), Io::Src(&x)).unwrap();
        let fences: Vec<bool> = r.take_log().iter().map(|(_, _, w)| w.fence).collect();
        assert_eq!(fences, vec![false, true, true, false]);

        let r = Rig::new(2, 1 << 16, 2, None);
        r.t.submit(&Request::put(1, 0, 0, 0), Io::Src(&x)).unwrap();
        assert!(!r.idle());
        r.t.fence().unwrap();
        assert!(r.idle(), "with 2 QPs per peer a fence completes everything");
    }

    #[test]
    fn a_failed_completion_fails_that_peer_naming_everything() {
        let r = Rig::new(3, 1 << 16, 1, None);
        r.ctl.lock().unwrap().fail_at = Some((1, 12));
        let x = [1u8; 8];
        // The put is locally complete before the NIC reports its failure…
        r.t.submit(&Request::put(1, 0, 0, 0), Io::Src(&x)).unwrap();
        // … so quiet reports it.
        let e = r.t.quiet().unwrap_err().to_string();
        for part in [
            "PE 0",
            "PE 1",
            DEVICE,
            "put",
            "RDMA_WRITE",
            "IBV_WC_RETRY_EXC_ERR",
        ] {
            assert!(e.contains(part), "{part:?} missing from {e}");
        }
        let e =
            r.t.submit(&Request::put(1, 0, 0, 0), Io::Src(&x))
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("PE 1") && e.contains("IBV_WC_RETRY_EXC_ERR"),
            "{e}"
        );
        // Another peer still works (quiet keeps reporting PE 1, so poll by progress).
        r.t.submit(&Request::put(2, 0, 0, 0), Io::Src(&x)).unwrap();
        r.t.progress().unwrap();
        assert!(r.idle());
        assert_eq!(&r.bytes(2)[..8], &x);

        // A waited-for request fails with its own completion.
        let r = Rig::new(2, 1 << 16, 1, None);
        r.ctl.lock().unwrap().fail_at = Some((1, 10));
        let mut back = [0u8; 8];
        let e =
            r.t.submit(&Request::get(1, 0, 0, 0), Io::Dst(&mut back))
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("RDMA_READ") && e.contains("IBV_WC_REM_ACCESS_ERR"),
            "{e}"
        );
        assert!(r.idle());
    }

    #[test]
    fn a_silent_nic_times_out_naming_the_peer_and_gives_slots_back() {
        let r = Rig::new(2, 1 << 16, 1, Some(Duration::from_millis(50)));
        r.ctl.lock().unwrap().stall = true;
        let mut back = [0u8; 64];
        let e =
            r.t.submit(&Request::get(1, 0, 0, 0), Io::Dst(&mut back))
                .unwrap_err()
                .to_string();
        assert!(e.contains("SYMMEM_TIMEOUT") && e.contains("PE 1"), "{e}");
        let e = r.t.quiet().unwrap_err().to_string();
        assert!(e.contains("PEs [1]"), "{e}");
        r.ctl.lock().unwrap().stall = false;
        r.t.quiet().unwrap();
        assert!(
            r.idle(),
            "the abandoned get's slot went back when it completed"
        );
    }

    #[test]
    fn bad_requests_are_refused_before_anything_is_posted() {
        let r = Rig::new(2, 1 << 16, 1, None);
        let x = [0u8; 16];
        let e =
            r.t.submit(&Request::put(1, (1 << 16) - 8, 0, 0), Io::Src(&x))
                .unwrap_err()
                .to_string();
        assert!(e.contains("outside"), "{e}");
        let e =
            r.t.submit(&Request::amo(1, AmoKind::FetchAdd, 8, 4, 1, 0, 1), Io::None)
                .unwrap_err()
                .to_string();
        assert!(e.contains("aligned"), "{e}");
        let e =
            r.t.submit(&Request::put(0, 0, 0, 0), Io::Src(&x))
                .unwrap_err()
                .to_string();
        assert!(e.contains("no ib connection"), "{e}");
        assert!(r.take_log().is_empty());
        r.t.shutdown();
        let e =
            r.t.submit(&Request::put(1, 0, 0, 0), Io::Src(&x))
                .unwrap_err()
                .to_string();
        assert!(e.contains("shut down"), "{e}");
    }

    #[test]
    fn threads_share_one_transport() {
        let r = Rig::new(3, 1 << 20, 2, None);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let tr = &r.t;
                s.spawn(move || {
                    let pe = 1 + (t % 2) as u32;
                    let base = (t / 2) * 1000;
                    for i in 0..50u64 {
                        let v = (base + i).to_le_bytes();
                        tr.submit(&Request::put(pe, (base + i) * 8, 0, 0), Io::Src(&v))
                            .unwrap();
                        let c = Request::amo(pe, AmoKind::FetchAdd, 8, 0x8_0000, 1, 0, 1);
                        tr.submit(&c, Io::None).unwrap();
                        if i % 10 == 0 {
                            let mut big = vec![0u8; 300 << 10];
                            tr.submit(&Request::get(pe, 0, 0x4_0000, 0), Io::Dst(&mut big))
                                .unwrap();
                        }
                    }
                    tr.quiet().unwrap();
                });
            }
        });
        r.t.quiet().unwrap();
        assert!(r.idle());
        for pe in 1..3 {
            let words: &[u64] = &r.heaps[pe];
            assert_eq!(words[0x8_0000 / 8], 100, "PE {pe}'s counter");
            for i in (0..50).chain(1000..1050) {
                assert_eq!(words[i as usize], i, "PE {pe} word {i}");
            }
        }
    }

    #[test]
    fn concurrent_gets_larger_than_every_slot_do_not_wait_for_each_other() {
        // A deadlock would show as a SYMMEM_TIMEOUT error, not a hang.
        let len = SLOTS * SLOT_BYTES * 3 / 2;
        let r = Rig::new(2, 8 << 20, 1, Some(Duration::from_secs(20)));
        let data = pattern(len, 5);
        r.t.submit(&Request::put(1, 0, 0, 0), Io::Src(&data))
            .unwrap();
        r.t.quiet().unwrap();
        std::thread::scope(|s| {
            for _ in 0..3 {
                let (tr, data) = (&r.t, &data);
                s.spawn(move || {
                    for _ in 0..3 {
                        let mut back = vec![0u8; len];
                        tr.submit(&Request::get(1, 0, 0, 0), Io::Dst(&mut back))
                            .unwrap();
                        assert!(back == *data);
                    }
                });
            }
        });
        assert!(r.idle());
    }

    #[test]
    fn a_full_send_queue_applies_back_pressure() {
        let r = Rig::new(2, 1 << 16, 1, None);
        for i in 0..100u64 {
            r.t.submit(&Request::put(1, i * 8, 0, 0), Io::Src(&i.to_le_bytes()))
                .unwrap();
            let g = r.t.lock();
            let st = g.as_ref().unwrap();
            assert!(st.peers[1].as_ref().unwrap().qps[0].outstanding <= st.depth);
        }
        r.t.quiet().unwrap();
        let words: &[u64] = &r.heaps[1];
        assert!((0..100u64).all(|i| words[i as usize] == i));
    }
}
