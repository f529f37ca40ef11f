//! The weak-ordering transport (`SYMMEM_ORDERING=weak`): buffers this PE's puts and
//! signals and delivers them later, in a seeded random order that only the memory model
//! constrains, so that a program that forgets a `fence` fails on CPU PEs as it would on a
//! GPU. x86 (TSO) makes stores visible in program order and so hides such bugs.
//!
//! In weak mode every peer is reached through this transport (the runtime gives peers the
//! remote route and device code no P2P pointer, so device operations to peers go through
//! the proxy ring); it wraps the transports that really move the bytes: the
//! [`direct`](super::direct) transport for same-node peers, the socket or ib transport for
//! the others.
//!
//! # Rules
//! Each rule is the weakest that the specifications allow (OpenSHMEM 1.5: §9.6 RMA,
//! §9.7 AMOs, §9.8 signaling operations, §9.9.1 `shmem_barrier_all`, §9.11 memory
//! ordering; NVSHMEM: "Memory Ordering", the table of operations that `nvshmem_fence` and
//! `nvshmem_quiet` order), except where noted as conservative. (Section numbers as in the
//! 1.5 document, tag `v1.5` of github.com/openshmem-org/specification: chapter 9 is the
//! API, §9.11.3 "Synchronization and Communication Ordering" summarizes the rules.)
//!
//! - **Buffered**: puts (and `p`, `put_nbi`, `iput`), non-fetching AMOs and signal
//!   operations are copied (payload included) and queued per target. `submit` returns at
//!   once: the source may be reused (local completion, OpenSHMEM §9.6: a blocking put
//!   returns once its source may be reused, not when the data is delivered).
//! - **Delivered eventually, in any order**: each buffered operation gets a seeded random
//!   delay (up to [`MAX_DELAY`]); a delivery thread applies them as they fall due,
//!   earliest first, so two unordered operations land in either order and a correct
//!   program never waits longer than the delay. The thread sleeps on a condition
//!   variable until the next one is due: no spinning. Only the [`WINDOW`] oldest
//!   operations to a target compete, so two operations are reordered only when fewer
//!   than that many lie between them.
//! - **Same-location coherence**: operations to overlapping bytes of one target are
//!   delivered in issue order, as a GPU's per-location coherence keeps two writes of one
//!   thread to the same address in program order (PTX memory model, "Coherence"), and as
//!   an in-order path does. Conservative for network paths with several routes, where
//!   OpenSHMEM needs a fence even here.
//! - **`fence` orders per target** (OpenSHMEM §9.11.1 `shmem_fence`; NVSHMEM
//!   `nvshmem_fence`: "all operations … issued to a particular PE prior to the call …
//!   are guaranteed to be delivered before any subsequent operations … to the same PE"):
//!   a fence closes every target's epoch; nothing of epoch k+1 is delivered to a target
//!   before all of its epoch k. Operations to different targets stay unordered. A fence
//!   of host code also orders this PE's device requests and the other way round (both
//!   reach this one transport): stronger than NVSHMEM requires.
//! - **`quiet` delivers everything** before it returns (OpenSHMEM §9.11.2 `shmem_quiet`;
//!   NVSHMEM `nvshmem_quiet`), then quiets the inner transports. `barrier_all` (§9.9.1:
//!   quiet, then synchronize), a device `quiet`/`barrier_all` (the ring's Quiet request),
//!   `free` (§9.3.1: a barrier on entry) and finalize all quiet first. The runtime's `sync_all` also quiets in weak mode, as
//!   it does on remote routes in the default mode (conservative: the spec's `sync_all`
//!   completes nothing).
//! - **`put_signal` delivers its data before its signal** (OpenSHMEM §9.8.3
//!   `shmem_put_signal`: the signal is updated only after the data is delivered): it is
//!   split into a put and a signal that depends on it; other operations of the same epoch
//!   may land between the two.
//! - **Gets see what this PE wrote to their target** (gets, `g`): everything still
//!   buffered to that target is delivered first, then the get runs on the inner
//!   transport. The specifications allow a get to overtake an unfenced put to the same
//!   address; delivering first is conservative, so that weak mode never reports a bug the
//!   specifications would not.
//! - **Fetching AMOs are relaxed** (OpenSHMEM §9.7 orders AMOs only through fence and
//!   quiet; NVSHMEM's AMOs are relaxed system-scope atomics): only the buffered
//!   operations a fence ordered before the AMO and those that write its own bytes (with
//!   what the rules make go first) are delivered before it, so a program that used a
//!   fetch-add or swap as the flag of unfenced data reads stale data here, as it can on
//!   a GPU. `signal_fetch` of a peer is such an AMO.
//! - **`get_nbi` destinations are filled late** (OpenSHMEM §9.6.2 `shmem_get_nbi`: the
//!   destination is defined only after `shmem_quiet`): a `get_nbi` (device, or host
//!   code's) into this PE's symmetric heap is performed at once, but its destination
//!   holds [`LATE_GET_FILL`] bytes until the quiet that completes it, so a program that
//!   reads it early reads junk.
//! - **`put_nbi` sources are checked** (OpenSHMEM §9.6.2 `shmem_put_nbi`: the source may
//!   not be modified until quiet): a `put_nbi` or `put_signal_nbi` (device, or host
//!   code's) from this PE's symmetric heap is fingerprinted when it is issued and checked
//!   by quiet, which fails naming the op, the buffer, its size and the PEs if it changed.
//!   Sources and destinations outside the heap are not looked at: host code's are
//!   copied before the call returns, and may be freed before the quiet.
//! - **Nothing is lost**: `shutdown` (finalize, or the drop of a failing PE) delivers
//!   everything still buffered; an operation that cannot be delivered (its target died)
//!   is reported by the next `submit`, `fence` or `quiet`, or logged at shutdown, naming
//!   the PE, the operation, its target, its size and the seed.
//!
//! # Seeds
//! `SYMMEM_ORDERING_SEED` (or one drawn from the clock by PE 0 and broadcast) is the same
//! on every PE; each PE mixes in its number. It fixes the delays and so the delivery order
//! of one PE's operations as far as its own timing allows: the seed replays the same
//! choices, but when threads issue at different moments the order can still differ.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use symmem_device::{Opcode, Request};

use crate::error::{Error, Result};
use crate::interface::{Io, Transport};
use symmem_sync::split_mix::SplitMix64;

/// What a `get_nbi`'s destination in this PE's heap holds until the quiet that
/// completes it.
pub(crate) const LATE_GET_FILL: u8 = 0xdb;

/// The longest delay of a buffered operation.
pub(crate) const MAX_DELAY: Duration = Duration::from_micros(1000);

/// How many of a target's oldest buffered operations compete for delivery: enough to
/// reorder any bug's few operations, few enough that a stream of thousands (an `iput` is
/// one request per element) stays cheap to schedule.
pub(crate) const WINDOW: usize = 16;

/// How long the delivery thread sleeps when nothing is buffered (it is woken by new
/// operations and by shutdown).
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// One buffered operation.
struct Op {
    id: u64,
    /// A put, a non-fetching AMO or a signal (`local` unused: the payload is `data`).
    req: Request,
    data: Vec<u8>,
    /// The target's fence epoch when it was issued.
    epoch: u64,
    /// When the delivery thread applies it.
    due: Instant,
    /// An operation that must be delivered first (a put_signal's data).
    after: Option<u64>,
    /// The heap bytes it writes: [`bytes`] of `req`.
    bytes: (u64, u64),
}

/// The heap bytes `start..end` that `req` writes on its target.
fn bytes(req: &Request) -> (u64, u64) {
    let len = match req.opcode() {
        Some(Opcode::Put) => req.len,
        _ => req.width as u64,
    };
    (req.remote, req.remote.saturating_add(len.max(1)))
}

/// The source of a `put_nbi`, fingerprinted when it was issued.
struct Source {
    /// The put (its `local` is the source's address).
    req: Request,
    /// [`fingerprint`] of the source then.
    hash: u64,
}

/// A hash of the `len` bytes at `addr`.
///
/// # Safety
/// `addr..addr + len` lies in this PE's mapped symmetric heap.
unsafe fn fingerprint(addr: u64, len: u64) -> u64 {
    use std::hash::Hasher;
    // SAFETY: forwarded from the caller. Only a buggy kernel writes the bytes meanwhile,
    // which is what the check reports; any byte value is a valid u8.
    let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len as usize) };
    let mut h = std::hash::DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

/// The first delivery that failed.
struct Failure {
    op: &'static str,
    pe: usize,
    detail: String,
}

/// What the issuing threads and the delivery thread share, under one lock.
struct State {
    /// `queues[pe]`: operations buffered to `pe`, in issue order.
    queues: Vec<VecDeque<Op>>,
    /// `epochs[pe]`: the epoch new operations to `pe` join; every fence advances them.
    epochs: Vec<u64>,
    rng: SplitMix64,
    next_id: u64,
    failure: Option<Failure>,
    /// Operations that could not be delivered.
    lost: u64,
    closed: bool,
    /// When the delivery thread wakes next (`None`: when woken).
    planned: Option<Instant>,
    /// Sources of `put_nbi`s since the last quiet.
    sources: Vec<Source>,
    /// `get_nbi`s since the last quiet: destination address and the fetched bytes,
    /// written there by quiet.
    late_gets: Vec<(u64, Vec<u8>)>,
}

impl State {
    /// Indices of `pe`'s operations that may be delivered next, whatever their delays: of
    /// the oldest epoch, and not waiting for another operation still buffered.
    ///
    /// Operations join the queue in issue order and epochs never decrease, so the oldest
    /// epoch is a prefix of it; only its first [`WINDOW`] operations compete.
    fn eligible(&self, pe: usize) -> impl Iterator<Item = usize> + '_ {
        let q = &self.queues[pe];
        let oldest = q.front().map_or(0, |o| o.epoch);
        let window = q.iter().take(WINDOW).take_while(move |o| o.epoch == oldest);
        window.enumerate().filter_map(move |(i, o)| {
            let earlier = q.range(..i);
            let (start, end) = o.bytes;
            let blocked = earlier.into_iter().any(|p| {
                let (s, e) = p.bytes;
                // A put_signal's data first; and same-location coherence: an earlier
                // operation on overlapping bytes first.
                Some(p.id) == o.after || (s < end && start < e)
            });
            (!blocked).then_some(i)
        })
    }

    /// The eligible operation to `pe` due first, if it is due by `now` (`None`: any).
    fn pick(&self, pe: usize, now: Option<Instant>) -> Option<usize> {
        let q = &self.queues[pe];
        self.eligible(pe)
            .filter(|&i| now.is_none_or(|n| q[i].due <= n))
            .min_by_key(|&i| q[i].due)
    }

    /// When the next eligible operation falls due.
    fn next_due(&self) -> Option<Instant> {
        (0..self.queues.len())
            .filter_map(|pe| self.eligible(pe).map(|i| self.queues[pe][i].due).min())
            .min()
    }
}

/// What the transport and its delivery thread share.
struct Shared {
    me: usize,
    seed: u64,
    /// This PE's heap (address, bytes): `put_nbi` sources in it are checked.
    heap: (u64, usize),
    /// `inners[route[pe]]` reaches `pe`; `None` for this PE (never a target here).
    route: Box<[Option<usize>]>,
    inners: Box<[Arc<dyn Transport>]>,
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn inner(&self, pe: usize) -> Option<&dyn Transport> {
        self.route
            .get(pe)
            .copied()
            .flatten()
            .map(|i| &*self.inners[i])
    }

    /// Applies operation `i` of `pe`'s queue on the inner transport; a failure is recorded
    /// (the first one is reported later) and the operation counted as lost.
    fn deliver(&self, st: &mut State, pe: usize, i: usize) {
        let op = st.queues[pe].remove(i).expect("an index from `pick`");
        let io = match op.req.opcode() {
            Some(Opcode::Put) => Io::Src(&op.data),
            _ => Io::None,
        };
        let result = match self.inner(pe) {
            Some(t) => t.submit(&op.req, io),
            None => Err(Error::InvalidArgument {
                op: "weak ordering",
                reason: format!("no transport reaches PE {pe}"),
            }),
        };
        if let Err(e) = result {
            st.lost += 1;
            let name = op.req.opcode().map_or("request", Opcode::name);
            tracing::error!(
                "PE {}: weak ordering could not deliver a buffered {name} of {} bytes to PE {pe} at heap offset {:#x} (SYMMEM_ORDERING_SEED={}): {e}",
                self.me, op.req.len, op.req.remote, self.seed
            );
            st.failure.get_or_insert(Failure {
                op: name,
                pe,
                detail: format!(
                    "a buffered {name} of {} bytes at heap offset {:#x} could not be delivered (SYMMEM_ORDERING_SEED={}): {e}",
                    op.req.len, op.req.remote, self.seed
                ),
            });
        }
    }

    /// Delivers everything buffered to `pe`, in an order the rules allow.
    fn flush(&self, st: &mut State, pe: usize) {
        while let Some(i) = st.pick(pe, None) {
            self.deliver(st, pe, i);
        }
    }

    /// Delivers what must land before a fetching AMO on `range` of `pe`: every operation
    /// of an epoch a fence closed (the AMO is ordered after them) and every one that
    /// writes bytes of `range` (and whatever the rules make go before them), eligible
    /// overlapping ones first. Nothing else is forced, so a program that relied on the
    /// AMO itself to publish other data is caught.
    fn flush_for_amo(&self, st: &mut State, pe: usize, (start, end): (u64, u64)) {
        let overlaps = |o: &Op| o.bytes.0 < end && start < o.bytes.1;
        let current = st.epochs[pe];
        while st.queues[pe]
            .iter()
            .any(|o| o.epoch < current || overlaps(o))
        {
            let q = &st.queues[pe];
            let next = st
                .eligible(pe)
                .filter(|&i| overlaps(&q[i]))
                .min_by_key(|&i| q[i].due)
                .or_else(|| st.pick(pe, None))
                .expect("a non-empty queue has an eligible operation");
            self.deliver(st, pe, next);
        }
    }

    /// Delivers everything buffered to every PE.
    fn flush_all(&self, st: &mut State) {
        for pe in 0..st.queues.len() {
            self.flush(st, pe);
        }
    }

    /// The recorded delivery failure, as the error of `op`.
    fn check(&self, st: &State) -> Result<()> {
        match &st.failure {
            None => Ok(()),
            Some(f) => Err(Error::Transport {
                transport: "weak",
                op: f.op,
                me: self.me,
                pe: f.pe,
                detail: format!("{} ({} buffered operations lost)", f.detail, st.lost),
            }),
        }
    }

    /// Writes the fetched bytes of every `get_nbi` into its destination.
    fn fill_late_gets(&self, st: &mut State) {
        for (addr, fetched) in st.late_gets.drain(..) {
            // SAFETY: recorded by `nbi_issued` for a destination inside this PE's heap,
            // mapped while the transport lives.
            unsafe {
                std::ptr::copy_nonoverlapping(fetched.as_ptr(), addr as *mut u8, fetched.len())
            };
        }
    }

    /// Fails, naming the first one, if a `put_nbi` source changed since it was issued:
    /// it was reused before the quiet that completes the put (NVSHMEM `nvshmem_put_nbi`:
    /// the source must not be modified until `nvshmem_quiet`).
    fn check_sources(&self, sources: &[Source]) -> Result<()> {
        // SAFETY: every source was checked to lie in this PE's heap when recorded.
        let changed = sources
            .iter()
            .find(|s| unsafe { fingerprint(s.req.local, s.req.len) } != s.hash);
        match changed {
            None => Ok(()),
            Some(s) => {
                let op = if s.req.opcode() == Some(Opcode::PutSignal) {
                    "put_signal_nbi"
                } else {
                    "put_nbi"
                };
                Err(Error::Transport {
                    transport: "weak",
                    op,
                    me: self.me,
                    pe: s.req.pe as usize,
                    detail: format!(
                        "the source buffer of a {op} of {} bytes (address {:#x}, heap offset {:#x}) to PE {} changed before the quiet that completes it: an nbi source may be reused only after quiet (SYMMEM_ORDERING_SEED={})",
                        s.req.len,
                        s.req.local,
                        s.req.local - self.heap.0,
                        s.req.pe,
                        self.seed
                    ),
                })
            }
        }
    }

    /// The delivery thread: applies operations as they fall due, until closed.
    fn run(&self) {
        let mut st = self.lock();
        while !st.closed {
            let now = Instant::now();
            for pe in 0..st.queues.len() {
                while let Some(i) = st.pick(pe, Some(now)) {
                    self.deliver(&mut st, pe, i);
                }
            }
            let next = st.next_due();
            st.planned = next;
            let wait = next.map_or(IDLE_WAIT, |d| d.saturating_duration_since(Instant::now()));
            if !wait.is_zero() {
                st = self
                    .wake
                    .wait_timeout(st, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }
}

/// The reordering transport: see the module docs.
pub(crate) struct WeakTransport {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl WeakTransport {
    /// Starts the transport of PE `me` with the job's seed `seed` (mixed with `me`, so
    /// that each PE has its own stream) and
    /// this PE's `heap` (address, bytes): `route[pe]` names the transport of `inners` that
    /// reaches `pe`.
    pub(crate) fn start(
        me: usize,
        seed: u64,
        heap: (u64, usize),
        route: Vec<Option<usize>>,
        inners: Vec<Arc<dyn Transport>>,
    ) -> Result<Self> {
        let n = route.len();
        let shared = Arc::new(Shared {
            me,
            seed,
            heap,
            route: route.into(),
            inners: inners.into(),
            state: Mutex::new(State {
                queues: (0..n).map(|_| VecDeque::new()).collect(),
                epochs: vec![0; n],
                rng: SplitMix64::new(seed ^ (me as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                next_id: 0,
                failure: None,
                lost: 0,
                closed: false,
                planned: None,
                sources: Vec::new(),
                late_gets: Vec::new(),
            }),
            wake: Condvar::new(),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("symmem-weak-{me}"))
                .spawn(move || shared.run())
                .map_err(|e| Error::Io {
                    context: format!("PE {me}: starting the weak-ordering delivery thread"),
                    source: e,
                })?
        };
        Ok(WeakTransport {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Buffers `req` with `data` to its target; `after` must be delivered first.
    fn buffer(&self, st: &mut State, req: Request, data: &[u8], after: Option<u64>) -> Result<u64> {
        let pe = req.pe as usize;
        let sh = &*self.shared;
        if st.closed || sh.inner(pe).is_none() {
            return Err(Error::Transport {
                transport: "weak",
                op: req.opcode().map_or("request", Opcode::name),
                me: sh.me,
                pe,
                detail: if st.closed {
                    "the transport is shut down".into()
                } else {
                    format!("no transport reaches PE {pe}")
                },
            });
        }
        let delay = st.rng.up_to(MAX_DELAY.as_micros() as u64);
        let id = st.next_id;
        st.next_id += 1;
        let epoch = st.epochs[pe];
        st.queues[pe].push_back(Op {
            id,
            req,
            data: data.to_vec(),
            epoch,
            due: Instant::now() + Duration::from_micros(delay),
            after,
            bytes: bytes(&req),
        });
        // Wake the delivery thread only when it would sleep past this operation.
        let due = st.queues[pe].back().expect("just pushed").due;
        if st.planned.is_none_or(|p| due < p) {
            self.shared.wake.notify_one();
        }
        Ok(id)
    }
}

impl Transport for WeakTransport {
    fn name(&self) -> &'static str {
        "weak"
    }

    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64> {
        let sh = &*self.shared;
        let pe = req.pe as usize;
        let mut local = *req;
        local.local = 0;
        match (req.opcode(), io) {
            (Some(Opcode::Fence), _) => return self.fence().map(|()| 0),
            (Some(Opcode::Quiet), _) => return self.quiet().map(|()| 0),
            (Some(Opcode::Put), Io::Src(src)) => {
                let mut st = sh.lock();
                sh.check(&st)?;
                self.buffer(&mut st, local, src, None)?;
            }
            (Some(Opcode::PutSignal), Io::Src(src)) => {
                let kind = req.signal_kind().ok_or_else(|| Error::InvalidArgument {
                    op: "put_signal",
                    reason: format!("unknown signal operation {}", req.signal_op),
                })?;
                let mut st = sh.lock();
                sh.check(&st)?;
                let data = Request::put(req.pe, req.remote, 0, req.len);
                let id = self.buffer(&mut st, data, src, None)?;
                let signal = Request::signal(req.pe, req.signal, kind, req.value);
                self.buffer(&mut st, signal, &[], Some(id))?;
            }
            (Some(Opcode::Amo | Opcode::Signal), Io::None) if !req.returns_data() => {
                let mut st = sh.lock();
                sh.check(&st)?;
                self.buffer(&mut st, local, &[], None)?;
            }
            (kind, io) => {
                // Fetching AMOs see this PE's earlier writes to their word; gets, and
                // anything malformed (the inner transport refuses it), everything written
                // to the target.
                {
                    let mut st = sh.lock();
                    if kind == Some(Opcode::Amo) {
                        sh.flush_for_amo(&mut st, pe, bytes(req));
                    } else {
                        sh.flush(&mut st, pe);
                    }
                    sh.check(&st)?;
                }
                let inner = sh.inner(pe).ok_or_else(|| Error::Transport {
                    transport: "weak",
                    op: req.opcode().map_or("request", Opcode::name),
                    me: sh.me,
                    pe,
                    detail: format!("no transport reaches PE {pe}"),
                })?;
                return inner.submit(req, io);
            }
        }
        Ok(0)
    }

    fn fence(&self) -> Result<()> {
        let mut st = self.shared.lock();
        st.epochs.iter_mut().for_each(|e| *e += 1);
        self.shared.check(&st)
    }

    fn quiet(&self) -> Result<()> {
        let sh = &*self.shared;
        {
            let mut st = sh.lock();
            sh.flush_all(&mut st);
            sh.check(&st)?;
            sh.fill_late_gets(&mut st);
            let sources = std::mem::take(&mut st.sources);
            sh.check_sources(&sources)?;
        }
        for t in sh.inners.iter() {
            t.quiet()?;
        }
        Ok(())
    }

    fn nbi_issued(&self, req: &Request) {
        let (base, len) = self.shared.heap;
        let in_heap = req
            .local
            .checked_sub(base)
            .and_then(|off| off.checked_add(req.len))
            .is_some_and(|end| end <= len as u64);
        if req.local == 0 || req.len == 0 || !in_heap {
            return;
        }
        match req.opcode() {
            Some(Opcode::Put | Opcode::PutSignal) => {
                // SAFETY: the range lies in this PE's heap, mapped while the transport
                // lives.
                let hash = unsafe { fingerprint(req.local, req.len) };
                self.shared.lock().sources.push(Source { req: *req, hash });
            }
            Some(Opcode::Get) => {
                let dst = req.local as *mut u8;
                let mut fetched = vec![0u8; req.len as usize];
                // SAFETY: the destination lies in this PE's heap (checked above) and
                // holds the fetched bytes; it is the kernel's until quiet, which restores
                // them, and a kernel that reads it before then is what this exposes.
                unsafe {
                    std::ptr::copy_nonoverlapping(dst, fetched.as_mut_ptr(), fetched.len());
                    std::ptr::write_bytes(dst, LATE_GET_FILL, fetched.len());
                }
                self.shared.lock().late_gets.push((req.local, fetched));
            }
            _ => {}
        }
    }

    fn progress(&self) -> Result<()> {
        for t in self.shared.inners.iter() {
            t.progress()?;
        }
        Ok(())
    }

    fn serves_while_idle(&self) -> bool {
        self.shared.inners.iter().all(|t| t.serves_while_idle())
    }

    fn failed_peer(&self) -> Option<(usize, String)> {
        self.shared.inners.iter().find_map(|t| t.failed_peer())
    }

    fn blocked(&self) -> Option<crate::blocked::Blocked> {
        self.shared
            .inners
            .iter()
            .filter_map(|t| t.blocked())
            .min_by_key(|b| b.since)
    }

    fn shutdown(&self) {
        let sh = &*self.shared;
        {
            let mut st = sh.lock();
            sh.flush_all(&mut st);
            sh.fill_late_gets(&mut st);
            st.closed = true;
            if st.lost > 0 {
                tracing::error!(
                    "PE {}: weak ordering lost {} buffered operations at shutdown (SYMMEM_ORDERING_SEED={})",
                    sh.me, st.lost, sh.seed
                );
            }
        }
        sh.wake.notify_all();
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            // The thread only delivers (failures are recorded, not panics); a join error
            // has nothing to add, and shutdown must not panic (it runs in drop).
            let _ = h.join();
        }
        for t in sh.inners.iter() {
            t.shutdown();
        }
    }
}

impl Drop for WeakTransport {
    fn drop(&mut self) {
        let closed = self.shared.lock().closed;
        if !closed {
            self.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use symmem_device::{AmoKind, SignalOp};

    /// An inner transport that records what it applies, in order, as (opcode, remote).
    #[derive(Default)]
    struct Recorder {
        log: Mutex<Vec<(Opcode, u64)>>,
        quiets: Mutex<usize>,
    }

    impl Transport for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn submit(&self, req: &Request, _io: Io<'_>) -> Result<u64> {
            let mut log = self.log.lock().unwrap();
            log.push((req.opcode().unwrap(), req.remote));
            Ok(log.len() as u64)
        }
        fn fence(&self) -> Result<()> {
            Ok(())
        }
        fn quiet(&self) -> Result<()> {
            *self.quiets.lock().unwrap() += 1;
            Ok(())
        }
        fn progress(&self) -> Result<()> {
            Ok(())
        }
        fn shutdown(&self) {}
    }

    fn weak(seed: u64) -> (WeakTransport, Arc<Recorder>) {
        let rec = Arc::new(Recorder::default());
        let t = WeakTransport::start(
            0,
            seed,
            (0, 0),
            vec![None, Some(0), Some(0)],
            vec![rec.clone()],
        )
        .unwrap();
        (t, rec)
    }

    fn put(pe: u32, at: u64) -> Request {
        Request::put(pe, at, 0, 8)
    }

    fn log(rec: &Recorder) -> Vec<(Opcode, u64)> {
        rec.log.lock().unwrap().clone()
    }

    #[test]
    fn unfenced_puts_are_reordered_for_some_seed() {
        let reordered = (0..50).any(|seed| {
            let (t, rec) = weak(seed);
            for at in 0..4 {
                t.submit(&put(1, at * 8), Io::Src(&[0; 8])).unwrap();
            }
            t.quiet().unwrap();
            let order: Vec<u64> = log(&rec).iter().map(|&(_, at)| at).collect();
            assert_eq!(order.len(), 4, "quiet delivers everything");
            order != [0, 8, 16, 24]
        });
        assert!(reordered, "no seed of 50 reordered four unfenced puts");
    }

    #[test]
    fn fence_epochs_order_each_target() {
        for seed in 0..30 {
            let (t, rec) = weak(seed);
            for epoch in 0..4u64 {
                for k in 0..3 {
                    t.submit(&put(1, epoch * 100 + k * 8), Io::Src(&[0; 8]))
                        .unwrap();
                    t.submit(&put(2, 10_000 + epoch * 100 + k * 8), Io::Src(&[0; 8]))
                        .unwrap();
                }
                t.fence().unwrap();
            }
            t.quiet().unwrap();
            let l = log(&rec);
            assert_eq!(l.len(), 24);
            for target in [0..10_000, 10_000..20_000] {
                let epochs: Vec<u64> = l
                    .iter()
                    .filter(|(_, at)| target.contains(at))
                    .map(|&(_, at)| (at % 10_000) / 100)
                    .collect();
                assert_eq!(epochs.len(), 12);
                assert!(
                    epochs.windows(2).all(|w| w[0] <= w[1]),
                    "seed {seed}: {epochs:?}"
                );
            }
        }
    }

    #[test]
    fn operations_on_the_same_bytes_keep_their_order() {
        for seed in 0..30 {
            let (t, rec) = weak(seed);
            t.submit(&Request::put(1, 0, 0, 16), Io::Src(&[0; 16]))
                .unwrap();
            t.submit(&Request::amo(1, AmoKind::Set, 8, 8, 1, 0, 0), Io::None)
                .unwrap();
            t.submit(&Request::signal(1, 8, SignalOp::Add, 1), Io::None)
                .unwrap();
            t.quiet().unwrap();
            let ops: Vec<Opcode> = log(&rec).iter().map(|&(op, _)| op).collect();
            assert_eq!(
                ops,
                [Opcode::Put, Opcode::Amo, Opcode::Signal],
                "seed {seed}"
            );
        }
    }

    #[test]
    fn put_signal_delivers_its_data_before_its_signal() {
        for seed in 0..30 {
            let (t, rec) = weak(seed);
            let ps = Request::put_signal(1, 64, 0, 8, 8, SignalOp::Set, 1);
            t.submit(&ps, Io::Src(&[1; 8])).unwrap();
            t.submit(&put(1, 200), Io::Src(&[0; 8])).unwrap();
            t.quiet().unwrap();
            let l = log(&rec);
            let data = l.iter().position(|&e| e == (Opcode::Put, 64)).unwrap();
            let sig = l.iter().position(|&e| e == (Opcode::Signal, 8)).unwrap();
            assert!(data < sig, "seed {seed}: {l:?}");
        }
    }

    #[test]
    fn a_fetching_amo_after_a_fence_lands_after_what_the_fence_ordered() {
        for seed in 0..10 {
            let (t, rec) = weak(seed);
            t.submit(&put(1, 0), Io::Src(&[0; 8])).unwrap();
            t.fence().unwrap();
            let swap = Request::amo(1, AmoKind::Swap, 8, 24, 1, 0, 1);
            t.submit(&swap, Io::None).unwrap();
            t.quiet().unwrap();
            let l = log(&rec);
            let at = |e: (Opcode, u64)| l.iter().position(|&x| x == e).unwrap();
            assert!(
                at((Opcode::Put, 0)) < at((Opcode::Amo, 24)),
                "seed {seed}: {l:?}"
            );
        }
    }

    #[test]
    fn gets_deliver_what_is_buffered_to_their_target_first_and_amos_what_writes_their_word() {
        let mut amo_overtook_a_put = false;
        for seed in 0..10 {
            let (t, rec) = weak(seed);
            t.submit(&put(1, 0), Io::Src(&[0; 8])).unwrap();
            t.submit(&put(2, 1000), Io::Src(&[0; 8])).unwrap();
            let add = Request::amo(1, AmoKind::FetchAdd, 8, 24, 1, 0, 0);
            t.submit(&add, Io::None).unwrap();
            let fetch = Request::amo(1, AmoKind::FetchAdd, 8, 24, 1, 0, 1);
            t.submit(&fetch, Io::None).unwrap();
            let mut out = [0u8; 8];
            t.submit(&Request::get(2, 0, 2000, 8), Io::Dst(&mut out))
                .unwrap();
            t.quiet().unwrap();
            let l = log(&rec);
            let at = |e: (Opcode, u64)| l.iter().position(|&x| x == e).unwrap();
            let (add_at, fetched) = (
                l.iter().position(|&x| x == (Opcode::Amo, 24)).unwrap(),
                l.iter().rposition(|&x| x == (Opcode::Amo, 24)).unwrap(),
            );
            assert!(add_at < fetched, "seed {seed}: {l:?}");
            amo_overtook_a_put |= at((Opcode::Put, 0)) > fetched;
            assert!(
                at((Opcode::Put, 1000)) < at((Opcode::Get, 2000)),
                "seed {seed}: {l:?}"
            );
        }
        assert!(
            amo_overtook_a_put,
            "a fetching AMO never overtook an unfenced put to other bytes in 10 seeds"
        );
    }

    #[test]
    fn quiet_delivers_everything_and_the_thread_delivers_eventually() {
        let (t, rec) = weak(9);
        for at in 0..10 {
            t.submit(&put(1 + at as u32 % 2, at * 8), Io::Src(&[0; 8]))
                .unwrap();
        }
        t.quiet().unwrap();
        assert_eq!(log(&rec).len(), 10);
        assert_eq!(*rec.quiets.lock().unwrap(), 1);
        // Without a quiet the delivery thread applies it within MAX_DELAY (+ scheduling).
        t.submit(&Request::signal(1, 8, SignalOp::Add, 1), Io::None)
            .unwrap();
        let start = Instant::now();
        while log(&rec).len() < 11 {
            assert!(start.elapsed() < Duration::from_secs(10), "never delivered");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn shutdown_delivers_what_is_buffered_and_refuses_later_requests() {
        let (t, rec) = weak(1);
        t.submit(&put(1, 0), Io::Src(&[0; 8])).unwrap();
        t.submit(&put(2, 8), Io::Src(&[0; 8])).unwrap();
        t.shutdown();
        assert_eq!(log(&rec).len(), 2);
        let e = t
            .submit(&put(1, 0), Io::Src(&[0; 8]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("shut down"), "{e}");
    }

    #[test]
    fn a_put_nbi_source_changed_before_quiet_is_reported() {
        let mut heap = [0u64; 16];
        let base = heap.as_mut_ptr() as u64;
        let rec: Arc<dyn Transport> = Arc::new(Recorder::default());
        let t = WeakTransport::start(0, 5, (base, 128), vec![None, Some(0)], vec![rec]).unwrap();
        let nbi = Request::put(1, 0, base + 64, 32);
        t.submit(&nbi, Io::Src(&[0; 32])).unwrap();
        t.nbi_issued(&nbi);
        t.quiet().unwrap();
        t.submit(&nbi, Io::Src(&[0; 32])).unwrap();
        t.nbi_issued(&nbi);
        // SAFETY: a plain write to the test's own array, which no other thread reads.
        unsafe { (base as *mut u64).add(9).write_volatile(1) };
        let e = t.quiet().unwrap_err().to_string();
        let addr = format!("{:#x}", base + 64);
        for needle in [
            "put_nbi",
            "PE 1",
            "32 bytes",
            addr.as_str(),
            "heap offset 0x40",
        ] {
            assert!(e.contains(needle), "{needle:?} in {e}");
        }
        assert!(
            t.quiet().is_ok(),
            "reported once; the next quiet starts afresh"
        );
        let _ = heap;
    }

    #[test]
    fn a_get_nbi_destination_is_filled_by_quiet() {
        let mut heap = [7u64; 4];
        let base = heap.as_mut_ptr() as u64;
        let rec: Arc<dyn Transport> = Arc::new(Recorder::default());
        let t = WeakTransport::start(0, 5, (base, 32), vec![None, Some(0)], vec![rec]).unwrap();
        let get = Request::get(1, base + 8, 0, 16);
        t.nbi_issued(&get);
        // SAFETY: the test's own array; no other thread writes it meanwhile.
        let early = unsafe { std::ptr::read_volatile((base as *const u64).add(1)) };
        assert_eq!(early, u64::from_ne_bytes([LATE_GET_FILL; 8]));
        t.quiet().unwrap();
        // SAFETY: as above.
        let late = unsafe { std::ptr::read_volatile((base as *const u64).add(1)) };
        assert_eq!(late, 7);
        let _ = heap;
    }

    #[test]
    fn a_failed_delivery_is_reported_naming_the_op_peer_size_and_seed() {
        struct Failing;
        impl Transport for Failing {
            fn name(&self) -> &'static str {
                "failing"
            }
            fn submit(&self, _: &Request, _: Io<'_>) -> Result<u64> {
                Err(Error::InvalidArgument {
                    op: "put",
                    reason: "peer gone".into(),
                })
            }
            fn fence(&self) -> Result<()> {
                Ok(())
            }
            fn quiet(&self) -> Result<()> {
                Ok(())
            }
            fn progress(&self) -> Result<()> {
                Ok(())
            }
            fn shutdown(&self) {}
        }
        let t = WeakTransport::start(0, 42, (0, 0), vec![None, Some(0)], vec![Arc::new(Failing)])
            .unwrap();
        t.submit(&Request::put(1, 0x40, 0, 16), Io::Src(&[0; 16]))
            .unwrap();
        let e = t.quiet().unwrap_err().to_string();
        for needle in [
            "put",
            "PE 1",
            "16 bytes",
            "0x40",
            "SYMMEM_ORDERING_SEED=42",
            "peer gone",
        ] {
            assert!(e.contains(needle), "{needle:?} in {e}");
        }
    }
}
