//! The proxy channel: device-initiated requests to PEs without a P2P path go through a
//! lock-free ring ([`symmem_device::proxy`]) to this PE's proxy thread, which issues them
//! on the remote [`Transport`].
//!
//! # The thread
//! It takes requests in ticket order and issues each one: puts and gets with the payload
//! at the request's `local` address (or inline, `local == 0`, for `p`/`g` of up to 8 bytes),
//! AMOs and signals as they are, Fence as `transport.fence()`, Quiet as `transport.quiet()`
//! before the ring's `quieted` counter advances. While it has nothing to do it backs off
//! with the shared [`Backoff`] (spin, yield, sleep: the machines here have 2 cores for 4
//! PEs), calling `transport.progress()` only while it spins; on a CPU PE, once it would
//! sleep and no kernel launch is running, it waits for the next launch instead
//! ([`gate`]). When the transport or a
//! staging copy fails, the thread records the error (naming this PE, the operation, its
//! target PE and size, and what failed), marks the ring failed so every waiting and later
//! device operation fails instead of hanging, and stops.
//!
//! # Pipelining
//! Fetching requests (fetching AMOs, inline `g`, gets into host memory) are issued with
//! [`Transport::submit_nowait`]: the thread goes on reading the ring
//! ([`Ring::peek_at`]) and issuing while their replies are on the way, so the kernel
//! threads' fetch-adds overlap instead of paying one round trip each. The rules:
//! - **Completion in ticket order.** Results are published to the ring
//!   ([`Ring::complete`]) oldest first; a later request whose result is in (or that needed
//!   none: a put) waits until every earlier one is done. `head` therefore still counts
//!   completed requests, and a producer's earlier request is done when its later one is.
//! - **Order per target.** Requests are issued in ticket order, and each transport
//!   applies one PE's requests to one target in submission order (socket: one
//!   connection), so a put_signal's signal never precedes its data and Fence needs no
//!   wait; the transports that cannot pipeline (direct, weak, ib) complete
//!   `submit_nowait` synchronously.
//! - **Quiet** is not issued until every earlier request is done (their replies
//!   collected, the thread holding nothing in flight); then `transport.quiet()` covers
//!   the rest, as before.
//! - **Back-pressure.** At most [`IN_FLIGHT_PER_PE`] replies per target PE are awaited;
//!   a request to a PE at the limit waits (and the reading with it) until that PE's
//!   oldest is collected. The ring's capacity bounds everything else.
//! - **Failure.** A reply that fails (the peer died, a malformed frame, no answer within
//!   `SYMMEM_TIMEOUT`) fails the ring like any issue error, naming the peer; requests in
//!   flight behind it are abandoned with the ring, so nothing waits for them.
//! - **Staged gets** (GPU PEs, payload in GPU memory: [`payload`]) stay synchronous:
//!   each chunk's bytes must reach the pinned staging buffer and be copied to the GPU
//!   before the buffer is reused, so they wait for their replies (earlier replies land
//!   meanwhile). Puts need no reply: they are done once their bytes are sent.
//!
//! # Memory
//! The ring lives in [`RingMemory`]: host memory both sides reach. On a CPU PE that is
//! ordinary memory of this process ([`HostMemory`]). On a GPU PE it is
//! `cuMemHostAlloc(DEVICEMAP | PORTABLE)` memory (`cuda::MappedHost`): the kernels see it at
//! the address from `cuMemHostGetDevicePointer` (that is `DeviceState::proxy`), the proxy
//! thread at the host address. Mapped pinned memory is coherent at system scope: the
//! producers publish with `st.release.sys` and wait with `ld.acquire.sys`, and this thread
//! uses acquire loads and release stores. Only the producers (threads of this PE's GPU)
//! take tickets, with a GPU-scope RMW (`symmem_device::proxy`).
//!
//! A request's payload is at its `local` address, in host memory on a CPU PE and in GPU
//! memory on a GPU PE, where the thread stages it through a pinned buffer in chunks
//! ([`payload`]).

mod gate;
mod payload;

use std::alloc::Layout;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use symmem_device::proxy::{ring_bytes, Failed, Header, Ring};
use symmem_device::{Opcode, Request};
use symmem_sync::Backoff;

use crate::counters::ProxyStats;
use crate::error::{Error, Result};
pub(crate) use gate::RunningKernel;
use gate::{KernelGate, LONGEST_SLEEP};
use symmem_transport::{InFlight, Io, Pending, Transport};

use payload::Failure;
pub(crate) use payload::Payloads;
#[cfg(feature = "cuda")]
pub(crate) use payload::{Staging, STAGING_BYTES};

/// Memory a ring lives in: at least [`ring_bytes`] of the ring's capacity, zeroed,
/// 128-byte aligned, reachable by the proxy thread at [`RingMemory::host`] and by the
/// producers at [`RingMemory::device`], for as long as the value lives.
pub(crate) trait RingMemory: Send + Sync {
    /// The proxy thread's (this process's) address of the memory.
    fn host(&self) -> *mut u8;
    /// The producers' address of the memory: `DeviceState::proxy`.
    fn device(&self) -> u64;
}

/// A CPU PE's ring memory: zeroed, 128-byte aligned host memory, freed on drop.
pub(crate) struct HostMemory {
    base: *mut u8,
    layout: Layout,
}

// SAFETY: the memory is only accessed through `Ring`, whose words are atomics.
unsafe impl Send for HostMemory {}
// SAFETY: as above.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// Memory for a ring of `slots` slots.
    pub(crate) fn new(slots: usize) -> Self {
        let layout = Layout::from_size_align(ring_bytes(slots), 128).expect("ring layout");
        // SAFETY: the layout has a nonzero size.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        HostMemory { base, layout }
    }
}

impl RingMemory for HostMemory {
    fn host(&self) -> *mut u8 {
        self.base
    }

    fn device(&self) -> u64 {
        self.base as u64
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the proxy thread has been joined.
        unsafe { std::alloc::dealloc(self.base, self.layout) }
    }
}

/// Writes the header's `capacity` word of a ring in zeroed `memory`; the rest, zero, is
/// an empty ring of lap 0.
fn init_ring(memory: &dyn RingMemory, slots: usize) {
    let at = std::mem::offset_of!(Header, capacity);
    // SAFETY: the memory is aligned and holds the header; no ring exists yet.
    unsafe { memory.host().add(at).cast::<u64>().write(slots as u64) };
}

/// One PE's proxy channel: the ring and the thread that drains it.
pub(crate) struct ProxyChannel {
    memory: Arc<dyn RingMemory>,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// What the thread took off the ring, and the ring's high-water mark.
    stats: Arc<ProxyStats>,
    /// The executor's launches, which wake the thread where it sleeps between kernels.
    gate: Arc<KernelGate>,
}

impl ProxyChannel {
    /// Starts the channel of PE `me` with a ring of `slots` slots in `memory` (zeroed,
    /// [`ring_bytes`]`(slots)` bytes), issuing on `transport` with the payloads where
    /// `payloads` says they live (host memory: a CPU PE, whose thread sleeps between
    /// kernel launches).
    pub(crate) fn start(
        me: usize,
        slots: usize,
        memory: Arc<dyn RingMemory>,
        payloads: Payloads,
        transport: Arc<dyn Transport>,
    ) -> Result<Self> {
        init_ring(&*memory, slots);
        let stop = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let stats = Arc::new(ProxyStats::default());
        let sleeps = matches!(payloads, Payloads::Host);
        let gate = Arc::new(KernelGate::new(sleeps, LONGEST_SLEEP));
        let thread = {
            let (memory, stop, error) = (memory.clone(), stop.clone(), error.clone());
            let (stats, gate) = (stats.clone(), gate.clone());
            std::thread::Builder::new()
                .name(format!("symmem-proxy-{me}"))
                .spawn(move || {
                    symmem_bootstrap::affinity::place_helper_thread("the proxy thread");
                    // SAFETY: initialized above; `memory` lives as long as this thread.
                    let ring = unsafe { Ring::from_raw(memory.host()) };
                    let shared = Shared {
                        stop: &stop,
                        gate: &gate,
                        error: &error,
                        stats: &stats,
                    };
                    run(me, ring, payloads, &*transport, shared)
                })
                .map_err(|e| Error::Io {
                    context: format!("PE {me}: starting the proxy thread"),
                    source: e,
                })?
        };
        Ok(ProxyChannel {
            memory,
            stop,
            error,
            thread: Mutex::new(Some(thread)),
            stats,
            gate,
        })
    }

    /// Counts a kernel launch of this PE's executor until the value drops, waking the
    /// thread if it sleeps between launches.
    pub(crate) fn kernel_running(&self) -> RunningKernel<'_> {
        self.gate.begin()
    }

    /// The channel's counters (for `Runtime::counters`).
    pub(crate) fn stats(&self) -> &ProxyStats {
        &self.stats
    }

    /// The ring's address as the producers see it, for `DeviceState::proxy`.
    pub(crate) fn address(&self) -> u64 {
        self.memory.device()
    }

    fn ring(&self) -> Ring<'_> {
        // SAFETY: initialized by `start`; alive as long as `self`.
        unsafe { Ring::from_raw(self.memory.host()) }
    }

    /// Why the channel failed, if it did: the transport's error, naming the PE and op.
    pub(crate) fn failure(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits until the proxy thread has issued and completed every request already in the
    /// ring, so a host `quiet` after a kernel also completes the kernel's `_nbi` requests.
    /// Fails with the channel's error, or after `timeout` (`SYMMEM_TIMEOUT`; a launch
    /// stopped while a thread waited for a slot leaves a ticket that is never published).
    pub(crate) fn drain(
        &self,
        me: usize,
        transport: &'static str,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let ring = self.ring();
        let h = ring.header();
        let start = Instant::now();
        let mut backoff = Backoff::new();
        let error = |pe: usize, detail: String| {
            Error::Transport(crate::error::TransportError::Transport {
                transport,
                op: "quiet (device requests in the proxy ring)",
                me,
                pe,
                detail,
            })
        };
        loop {
            if let Some(f) = ring.failed() {
                return Err(error(f.pe as usize, self.failure().unwrap_or_default()));
            }
            let (head, reserve) = (
                h.head.load(Ordering::Acquire),
                h.reserve.load(Ordering::Acquire),
            );
            if head >= reserve {
                return Ok(());
            }
            if timeout.is_some_and(|t| start.elapsed() > t) {
                let detail = format!(
                    "the proxy thread completed requests up to ticket {head} of {reserve} within SYMMEM_TIMEOUT ({:?})",
                    start.elapsed()
                );
                return Err(error(me, detail));
            }
            backoff.snooze();
        }
    }

    /// Stops the thread once the requests already in the ring are issued, and joins it.
    /// Idempotent. Called before the transport shuts down.
    pub(crate) fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        self.gate.wake();
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            // A panic in the proxy thread was already recorded as its failure; a join
            // error has nothing more to say, and shutdown must not panic (it runs in drop).
            let _ = h.join();
        }
    }
}

impl Drop for ProxyChannel {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What the proxy thread shares with its channel.
struct Shared<'a> {
    /// Set by `shutdown`.
    stop: &'a AtomicBool,
    /// The executor's launches (a CPU PE's thread sleeps between them).
    gate: &'a KernelGate,
    /// Why the channel failed.
    error: &'a Mutex<Option<String>>,
    /// What the thread took off the ring.
    stats: &'a ProxyStats,
}

/// The proxy thread: drains `ring` until `stop` is set, the ring is empty and nothing is
/// in flight.
fn run(
    me: usize,
    ring: Ring<'_>,
    mut payloads: Payloads,
    transport: &dyn Transport,
    shared: Shared<'_>,
) {
    let Shared {
        stop,
        gate,
        error,
        stats,
    } = shared;
    let mut pipe = Pipeline::new(ring);
    let mut idle = Backoff::new();
    loop {
        // Read before the ring is looked at: a launch that begins after this keeps the
        // thread from sleeping on the gate below, even if it ends before then.
        let launches = gate.begun();
        match pipe.step(transport, &mut payloads, stats) {
            Ok(true) => {
                idle = Backoff::new();
                continue;
            }
            Ok(false) => {}
            Err(failed) => {
                let (req, f) = *failed;
                let msg = describe(me, &req, transport.name(), &f);
                tracing::error!("{msg}");
                *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg);
                ring.fail(Failed {
                    pe: req.pe,
                    opcode: req.opcode,
                });
                return;
            }
        }
        if stop.load(Ordering::Acquire) && pipe.is_idle() {
            return;
        }
        // Serve the transport while spinning, as waits do (this is also how replies in
        // flight get read; progress errors, a dead peer, surface on the next request to
        // it or the next poll of a reply). Once idle long enough to sleep, leave the
        // sockets to the transport's own thread: a sleeping caller of progress would hold
        // it off and delay every peer's request by the sleep.
        if !idle.is_slow() {
            let _ = transport.progress();
        } else if pipe.is_idle() {
            // Nothing in flight and nothing new: on a CPU PE, sleep until a launch.
            gate.sleep_until_a_launch(launches, stop);
        }
        idle.snooze();
    }
}

/// Replies one target PE may owe the proxy thread at once (see the module docs'
/// back-pressure rule): enough to cover a ring of kernel threads' fetch-adds over a
/// socket's round trip, few enough that the peer's socket buffers hold every reply.
const IN_FLIGHT_PER_PE: usize = 64;

/// A request taken off the ring and issued, not yet completed toward it.
struct Issued {
    req: Request,
    waited: bool,
    state: State,
}

/// Where an issued request stands.
enum State {
    /// Locally complete, with its result (the fetched value, else 0).
    Done(u64),
    /// Waiting for its target's reply, whose result lands as `into` says.
    Waiting {
        reply: Box<dyn InFlight>,
        into: Landing,
    },
}

/// What a pending reply's result is.
#[derive(Clone, Copy)]
enum Landing {
    /// A fetching AMO: the reply's value.
    Value,
    /// An inline `g`: the reply's (up to 8) bytes, as the value.
    Inline,
    /// A get into host memory: the bytes go to `req.local`; the result is 0.
    Host,
}

/// The proxy thread's requests issued and not yet completed toward the ring, oldest
/// first (see the module docs' rules).
struct Pipeline<'a> {
    ring: Ring<'a>,
    /// The next ticket to read off the ring.
    next: u64,
    issued: VecDeque<Issued>,
    /// Replies awaited per target PE.
    awaited: HashMap<u32, usize>,
}

impl<'a> Pipeline<'a> {
    fn new(ring: Ring<'a>) -> Self {
        Pipeline {
            next: ring.header().head.load(Ordering::Acquire),
            ring,
            issued: VecDeque::new(),
            awaited: HashMap::new(),
        }
    }

    /// Whether `req`, next on the ring, may be issued now.
    fn may_issue(&self, req: &Request) -> bool {
        match Opcode::from_u8(req.opcode) {
            Some(Opcode::Quiet) => self.issued.is_empty(),
            Some(Opcode::Amo | Opcode::Get) => {
                self.awaited.get(&req.pe).copied().unwrap_or(0) < IN_FLIGHT_PER_PE
            }
            _ => true,
        }
    }

    /// Issues what the ring holds (as far as the rules allow), then completes toward the
    /// ring, in ticket order, what is done. Returns whether anything moved, or the request
    /// that failed and why.
    fn step(
        &mut self,
        transport: &dyn Transport,
        payloads: &mut Payloads,
        stats: &ProxyStats,
    ) -> std::result::Result<bool, Box<(Request, Failure)>> {
        let mut moved = false;
        while let Some((req, waited)) = self.ring.peek_at(self.next) {
            if !self.may_issue(&req) {
                break;
            }
            stats.took(&req, self.ring.header());
            let state = issue(transport, payloads, &req).map_err(|f| Box::new((req, f)))?;
            if !waited {
                transport.nbi_issued(&req);
            }
            if matches!(state, State::Waiting { .. }) {
                *self.awaited.entry(req.pe).or_default() += 1;
            }
            self.issued.push_back(Issued { req, waited, state });
            self.next += 1;
            moved = true;
        }
        while let Some(front) = self.issued.front_mut() {
            let result = match &mut front.state {
                State::Done(v) => *v,
                State::Waiting { reply, into } => {
                    match collect(&front.req, reply.as_mut(), *into) {
                        Ok(Some(v)) => {
                            if let Some(n) = self.awaited.get_mut(&front.req.pe) {
                                *n -= 1;
                            }
                            v
                        }
                        Ok(None) => break,
                        Err(e) => return Err(Box::new((front.req, Failure::Transport(e)))),
                    }
                }
            };
            self.ring.complete(&front.req, front.waited, result);
            self.issued.pop_front();
            moved = true;
        }
        Ok(moved)
    }

    /// Whether nothing is in flight and the ring holds no request.
    fn is_idle(&self) -> bool {
        self.issued.is_empty() && self.ring.peek_at(self.next).is_none()
    }
}

/// Polls a pending reply; the request's result once the reply is in.
fn collect(req: &Request, reply: &mut dyn InFlight, into: Landing) -> Result<Option<u64>> {
    match into {
        Landing::Value => Ok(reply.poll(&mut [])?),
        Landing::Inline => {
            let mut bytes = [0u8; 8];
            let n = (req.len as usize).min(8);
            Ok(reply
                .poll(&mut bytes[..n])?
                .map(|_| u64::from_le_bytes(bytes)))
        }
        Landing::Host => {
            // SAFETY: as for the get's issue (`Payloads::get`): the device operation
            // guarantees `local` holds `len` writable bytes that nothing else accesses
            // until the request completes, which it has not yet.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(req.local as *mut u8, req.len as usize) };
            Ok(reply.poll(dst)?.map(|_| 0))
        }
    }
}

/// The channel's error for a request whose issue failed: this PE, the operation, its
/// target PE and size, and what failed.
fn describe(me: usize, req: &Request, transport: &str, f: &Failure) -> String {
    let op = Opcode::from_u8(req.opcode).map_or("invalid request", Opcode::name);
    let what = match Opcode::from_u8(req.opcode) {
        Some(Opcode::Fence | Opcode::Quiet) => String::new(),
        Some(Opcode::Put | Opcode::PutSignal | Opcode::Get) => {
            format!(" of {} bytes to PE {}", req.len, req.pe)
        }
        _ => format!(" to PE {}", req.pe),
    };
    match f {
        Failure::Transport(e) => format!(
            "PE {me}'s proxy thread: device-initiated {op}{what} failed on the {transport} transport: {e}"
        ),
        Failure::Staging { what: copy, error } => format!(
            "PE {me}'s proxy thread: device-initiated {op}{what} failed {copy}: {error}"
        ),
    }
}

/// Issues one request: done with its result (the fetched value of an inline `g` or a
/// fetching AMO, else 0), or waiting for its reply.
fn issue(
    transport: &dyn Transport,
    payloads: &mut Payloads,
    req: &Request,
) -> std::result::Result<State, Failure> {
    let len = req.len as usize;
    let pending = |p: Pending, into: Landing| match p {
        Pending::Done(v) => State::Done(v),
        Pending::Reply(reply) => State::Waiting { reply, into },
    };
    match Opcode::from_u8(req.opcode) {
        Some(Opcode::Put | Opcode::PutSignal) if req.local == 0 => {
            let bytes = req.value.to_le_bytes();
            Ok(State::Done(
                transport.submit(req, Io::Src(&bytes[..len.min(8)]))?,
            ))
        }
        Some(Opcode::Put | Opcode::PutSignal) => {
            payloads.put(transport, req).map(|()| State::Done(0))
        }
        Some(Opcode::Get) if req.local == 0 => {
            let mut bytes = [0u8; 8];
            let p = transport.submit_nowait(req, Io::Dst(&mut bytes[..len.min(8)]))?;
            let value = u64::from_le_bytes(bytes);
            Ok(match p {
                Pending::Done(_) => State::Done(value),
                Pending::Reply(reply) => State::Waiting {
                    reply,
                    into: Landing::Inline,
                },
            })
        }
        Some(Opcode::Get) => Ok(pending(payloads.get(transport, req)?, Landing::Host)),
        Some(Opcode::Amo | Opcode::Signal) => Ok(pending(
            transport.submit_nowait(req, Io::None)?,
            Landing::Value,
        )),
        Some(Opcode::Fence) => Ok(transport.fence().map(|()| State::Done(0))?),
        Some(Opcode::Quiet) => Ok(transport.quiet().map(|()| State::Done(0))?),
        None => Err(Failure::Transport(Error::InvalidArgument {
            op: "proxy",
            reason: format!("invalid opcode {} in the proxy ring", req.opcode),
        })),
    }
}

#[cfg(test)]
mod tests {
    //! The thread with a fake GPU's staging and a fake transport: requests submitted to
    //! the ring as a kernel would, completed in order, failures named.

    use symmem_device::SignalOp;

    use symmem_device::AmoKind;

    use super::payload::tests::{FakeGpu, FakeTransport, Held, GPU_BASE};
    use super::*;

    /// Waits (up to 10 s) until `cond` holds.
    fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while !cond() {
            assert!(t0.elapsed() < Duration::from_secs(10), "never: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A CPU PE's channel (host payloads) of `slots` slots over a transport whose
    /// replies are held until released.
    fn held_channel(slots: usize) -> (ProxyChannel, Arc<FakeTransport>, Arc<Held>) {
        let held = Arc::new(Held::default());
        let t = Arc::new(FakeTransport {
            held: Some(held.clone()),
            ..Default::default()
        });
        let memory: Arc<dyn RingMemory> = Arc::new(HostMemory::new(slots));
        let ch = ProxyChannel::start(5, slots, memory, Payloads::Host, t.clone()).unwrap();
        (ch, t, held)
    }

    fn fetch_add(pe: u32, value: u64) -> Request {
        Request::amo(pe, AmoKind::FetchAdd, 8, 64, value, 0, 1)
    }

    /// 32 fetch-adds to two PEs, an inline `g` and a get into host memory, all submitted
    /// before any reply: all are in flight at once; replies released newest first
    /// complete nothing until the oldest is in (results are published in ticket order);
    /// then each producer's ticket gets its own request's result, and a quiet after them
    /// reaches the transport only once they are all done.
    #[test]
    fn fetches_are_in_flight_together_and_complete_in_ticket_order() {
        let (ch, t, held) = held_channel(64);
        let ring = producer(&ch);
        let y = std::thread::yield_now;
        let mut tickets = Vec::new();
        for i in 0..32u64 {
            let req = fetch_add(1 + (i % 2) as u32, 100 * i);
            tickets.push(ring.submit(&req, true, y).unwrap());
        }
        let g = ring.submit(&Request::get(2, 0, 8, 8), true, y).unwrap();
        let mut dst = vec![0u8; 40];
        let get = Request::get(1, dst.as_mut_ptr() as u64, 200, 40);
        let gt = ring.submit(&get, true, y).unwrap();
        eventually("34 requests in flight", || {
            held.sent.load(Ordering::Acquire) == 34
        });
        let h = ring.header();
        for i in (1..34).rev() {
            held.release(i);
        }
        // Give the thread time to (wrongly) publish a later result; it must not.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(h.head.load(Ordering::Acquire), 0, "ticket 0 holds the rest");
        let qt = ring.submit(&Request::quiet(), false, y).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            t.quiets.load(Ordering::Acquire),
            0,
            "quiet waits for the fetches"
        );
        held.release(0);
        for (i, tk) in tickets.into_iter().enumerate() {
            assert_eq!(
                ring.wait_result(tk, y).unwrap(),
                100 * i as u64 + 1,
                "ticket {tk}"
            );
        }
        assert_eq!(
            ring.wait_result(g, y).unwrap(),
            u64::from_le_bytes(std::array::from_fn(|i| 8 + i as u8))
        );
        ring.wait_result(gt, y).unwrap();
        assert_eq!(dst, (200..240).map(|i| i as u8).collect::<Vec<u8>>());
        ring.wait_quiet(qt, y).unwrap();
        assert_eq!(t.quiets.load(Ordering::Acquire), 1);
        assert!(ch.failure().is_none());
        ch.shutdown();
    }

    /// Back-pressure: of 80 fetch-adds to one PE, at most [`IN_FLIGHT_PER_PE`] are in
    /// flight; each reply collected lets one more go, and all complete.
    #[test]
    fn fetches_in_flight_per_pe_are_bounded() {
        let (ch, _t, held) = held_channel(128);
        let ring = producer(&ch);
        let y = std::thread::yield_now;
        let tickets: Vec<u64> = (0..80u64)
            .map(|i| ring.submit(&fetch_add(3, i), true, y).unwrap())
            .collect();
        eventually("the limit reached", || {
            held.sent.load(Ordering::Acquire) == IN_FLIGHT_PER_PE
        });
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(held.sent.load(Ordering::Acquire), IN_FLIGHT_PER_PE);
        held.release(0);
        eventually("one more after a reply", || {
            held.sent.load(Ordering::Acquire) == IN_FLIGHT_PER_PE + 1
        });
        for i in 1..80 {
            held.release(i);
        }
        for (i, tk) in tickets.into_iter().enumerate() {
            assert_eq!(ring.wait_result(tk, y).unwrap(), i as u64 + 1);
        }
        ch.shutdown();
    }

    /// A peer that dies with replies in flight: the replies before it are delivered, the
    /// ring fails naming the dead peer, every producer waiting behind it (and a later
    /// submit) fails instead of hanging, and the channel's error says what happened.
    #[test]
    fn a_dead_peer_fails_its_requests_in_flight_and_the_ring() {
        let (ch, _t, held) = held_channel(16);
        let ring = producer(&ch);
        let y = std::thread::yield_now;
        let tickets: Vec<u64> = (0..6u64)
            .map(|i| {
                ring.submit(&fetch_add(1 + (i % 2) as u32, i), true, y)
                    .unwrap()
            })
            .collect();
        eventually("6 in flight", || held.sent.load(Ordering::Acquire) == 6);
        held.release(0);
        held.release(2);
        held.fail(1);
        assert_eq!(ring.wait_result(tickets[0], y).unwrap(), 1);
        for &tk in &tickets[1..] {
            let f = ring.wait_result(tk, y).unwrap_err();
            assert_eq!((f.pe, f.opcode), (2, Opcode::Amo as u8));
        }
        let msg = ch.failure().unwrap();
        for needle in [
            "PE 5's proxy thread",
            "amo to PE 2",
            "connection to PE 2 closed",
        ] {
            assert!(msg.contains(needle), "{needle:?} missing from {msg}");
        }
        assert!(ring.submit(&fetch_add(1, 0), true, y).is_err());
        let err = ch.drain(5, "fake", None).unwrap_err().to_string();
        assert!(err.contains("PE 2"), "{err}");
    }

    fn channel(gpu: FakeGpu, transport: Arc<FakeTransport>) -> ProxyChannel {
        let memory: Arc<dyn RingMemory> = Arc::new(HostMemory::new(4));
        ProxyChannel::start(5, 4, memory, Payloads::Device(Box::new(gpu)), transport).unwrap()
    }

    fn producer(ch: &ProxyChannel) -> Ring<'_> {
        // SAFETY: a CPU-side producer sees the ring at its device address, which for
        // host memory is the host address.
        unsafe { Ring::from_raw(ch.address() as *mut u8) }
    }

    /// Staged put_signal, get and inline `g`, then quiet: issued in ticket order, data
    /// before signal, the get's bytes in "GPU memory" when its producer's wait ends.
    #[test]
    fn staged_requests_complete_in_order() {
        let gpu = FakeGpu::new(4096, 1000);
        let memory = gpu.memory.clone();
        let t = Arc::new(FakeTransport::default());
        let ch = channel(gpu, t.clone());
        let ring = producer(&ch);
        let put = Request::put_signal(2, 0, GPU_BASE, 2500, 9000, SignalOp::Set, 1);
        let tk = ring.submit(&put, true, std::thread::yield_now).unwrap();
        ring.wait_result(tk, std::thread::yield_now).unwrap();
        let get = Request::get(2, GPU_BASE + 3000, 50, 1000);
        let tk = ring.submit(&get, true, std::thread::yield_now).unwrap();
        ring.wait_result(tk, std::thread::yield_now).unwrap();
        let mem = memory.lock().unwrap().clone();
        let want: Vec<u8> = (50..1050).map(|i| i as u8).collect();
        assert_eq!(&mem[3000..4000], &want[..]);
        let g = Request::get(2, 0, 8, 8);
        let tk = ring.submit(&g, true, std::thread::yield_now).unwrap();
        assert_eq!(
            ring.wait_result(tk, std::thread::yield_now).unwrap(),
            u64::from_le_bytes(std::array::from_fn(|i| 8 + i as u8))
        );
        let tk = ring
            .submit(&Request::quiet(), false, std::thread::yield_now)
            .unwrap();
        ring.wait_quiet(tk, std::thread::yield_now).unwrap();
        ch.drain(5, "fake", Some(Duration::from_secs(10))).unwrap();
        let ops: Vec<(u8, u64, u64)> = t
            .sent
            .lock()
            .unwrap()
            .iter()
            .map(|(r, _)| (r.opcode, r.remote, r.len))
            .collect();
        let (p, ps, gt) = (
            Opcode::Put as u8,
            Opcode::PutSignal as u8,
            Opcode::Get as u8,
        );
        assert_eq!(
            ops,
            [
                (p, 0, 1000),
                (p, 1000, 1000),
                (ps, 2000, 500),
                (gt, 50, 1000),
                (gt, 8, 8)
            ]
        );
        assert!(ch.failure().is_none());
        ch.shutdown();
    }

    /// A copy that fails fails the channel: the waiting producer sees it, and the
    /// channel's error names this PE, the op, the target PE, the size and the copy.
    #[test]
    fn a_failed_copy_fails_the_channel_naming_pe_op_and_size() {
        let mut gpu = FakeGpu::new(64, 16);
        gpu.fail_at = Some(0);
        let ch = channel(gpu, Arc::new(FakeTransport::default()));
        let ring = producer(&ch);
        let tk = ring
            .submit(
                &Request::put(3, 0, GPU_BASE, 40),
                true,
                std::thread::yield_now,
            )
            .unwrap();
        let f = ring.wait_result(tk, std::thread::yield_now).unwrap_err();
        assert_eq!((f.pe, f.opcode), (3, Opcode::Put as u8));
        let msg = ch.failure().unwrap();
        for needle in [
            "PE 5's proxy thread",
            "put of 40 bytes to PE 3",
            "bytes 0..16",
            "ILLEGAL_ADDRESS",
        ] {
            assert!(msg.contains(needle), "{needle:?} missing from {msg}");
        }
        let err = ch.drain(5, "fake", None).unwrap_err().to_string();
        assert!(err.contains("PE 3"), "{err}");
    }

    /// The proxy thread counts each request it takes, by kind, and its ring's high-water
    /// mark; the counted transport it issues on sees the same requests.
    #[test]
    fn the_proxy_thread_counts_what_it_takes() {
        let slots = 8;
        use crate::counters::{OpCounts, Registry};
        let reg = Registry::new(u64::MAX - 4, false);
        let transport = Arc::new(symmem_transport::Counted::new(
            FakeTransport::default(),
            reg.transport("socket"),
        ));
        let memory = Arc::new(HostMemory::new(slots));
        let ch = ProxyChannel::start(3, slots, memory, Payloads::Host, transport).unwrap();
        // SAFETY: a CPU-side producer sees the ring at its device address, which for host
        // memory is the host address; the channel outlives `ring`.
        let ring = unsafe { Ring::from_raw(ch.address() as *mut u8) };
        let src = [7u8; 32];
        let put = Request::put(1, 0, src.as_ptr() as u64, 32);
        for _ in 0..5 {
            ring.submit(&put, false, std::thread::yield_now).unwrap();
        }
        let amo = Request::amo(1, symmem_device::AmoKind::FetchAdd, 8, 64, 1, 0, 0);
        ring.submit(&amo, false, std::thread::yield_now).unwrap();
        let tk = ring
            .submit(&Request::quiet(), false, std::thread::yield_now)
            .unwrap();
        ring.wait_quiet(tk, std::thread::yield_now).unwrap();
        ch.shutdown();
        let c = reg.snapshot(Some(ch.stats()));
        let want = OpCounts {
            puts: 5,
            put_bytes: 160,
            amos: 1,
            quiets: 1,
            ..OpCounts::default()
        };
        assert_eq!((c.proxy, c.remote), (want, want));
        assert_eq!(c.remote_transport, Some("socket"));
        assert!((1..=slots as u64).contains(&c.proxy_ring_high_water), "{c}");
        assert_eq!(c.direct, OpCounts::default());
    }
}
