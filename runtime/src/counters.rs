//! Per-PE operation counters: how many puts, gets, AMOs, signals, fences and quiets this
//! PE issued, and how many bytes it moved, on each path to its peers ([`Counters`], from
//! [`Runtime::counters`](crate::Runtime::counters)).
//!
//! # Where counting happens
//! - **direct**: host operations on heaps mapped here (this PE, and same-node peers with
//!   P2P on), counted at the route layer where an operation lands on the mapped heap (or
//!   on a GPU heap, where the copy route runs), **only when `SYMMEM_DEBUG` is `info` or
//!   more verbose**. A direct `p` followed by `quiet` takes about 4 ns, and any counter in
//!   memory adds its load and add to the path the fence waits for: symmem-perf measured
//!   `p` + `quiet` going from 3.7 to 4.6 ns with an inlined per-PE counter block and to
//!   5.8 ns with inlined per-thread blocks. Off, the cost is a load of a flag and a branch
//!   that falls through; on, an out-of-line call (about 9 ns for `p` + `quiet`). Each thread
//!   that issues on a runtime owns a block of counters that only it writes (relaxed load
//!   and store, no `lock` prefix, no cache line shared between threads), found through a
//!   thread-local (runtime id, block) pair. A snapshot sums every thread's block; blocks
//!   live as long as the runtime, so counts of threads that ended stay in.
//! - **remote**: every request submitted to the job's remote transport (socket or ib:
//!   one per job, named in [`Counters::remote_transport`]), by host code or by the proxy
//!   thread, and every fence and quiet it was asked for (by the host API,
//!   barriers, collectives and finalize), counted by a wrapper around the transport with
//!   relaxed atomic adds: a remote operation costs microseconds, so they are free.
//! - **proxy**: device-initiated requests the proxy thread took off the ring (also counted
//!   on the transport that carried them), and the ring's high-water mark.
//!
//! Device operations that a kernel performs itself through a peer's mapped heap (P2P)
//! are **not counted**: counting them would add a global atomic to every device put and
//! slow the kernels down. Only those routed through the proxy are.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;

use symmem_device::proxy::Header;
use symmem_device::{Opcode, Request};

/// Operation counts of one path (see [`Counters`]). A put_signal counts as one put and
/// one signal; a strided `iput`/`iget` on the direct path as one put or get of all its
/// elements (over a transport `iput` sends one request per element).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Puts: `put`, `put_nbi`, `p`, `putmem`, `iput`, and the data of `put_signal`.
    pub puts: u64,
    /// Bytes those puts wrote.
    pub put_bytes: u64,
    /// Gets: `get`, `get_nbi`, `g`, `getmem`, `iget`.
    pub gets: u64,
    /// Bytes those gets read.
    pub get_bytes: u64,
    /// Atomic memory operations, fetching or not (over a transport also the remote reads
    /// of a word that `signal_fetch` or a wait does).
    pub amos: u64,
    /// Signal updates: `signal_op` and the signal of `put_signal`.
    pub signals: u64,
    /// Fences: `Runtime::fence` calls (direct), or fences the transport was asked for.
    pub fences: u64,
    /// Quiets: `Runtime::quiet` calls (direct), or quiets the transport was asked for
    /// (barriers and finalize ask too).
    pub quiets: u64,
}

impl std::ops::AddAssign for OpCounts {
    fn add_assign(&mut self, o: Self) {
        self.puts += o.puts;
        self.put_bytes += o.put_bytes;
        self.gets += o.gets;
        self.get_bytes += o.get_bytes;
        self.amos += o.amos;
        self.signals += o.signals;
        self.fences += o.fences;
        self.quiets += o.quiets;
    }
}

impl OpCounts {
    /// The counts since `earlier`, a snapshot of the same path taken before this one.
    pub fn since(&self, earlier: &OpCounts) -> OpCounts {
        OpCounts {
            puts: self.puts - earlier.puts,
            put_bytes: self.put_bytes - earlier.put_bytes,
            gets: self.gets - earlier.gets,
            get_bytes: self.get_bytes - earlier.get_bytes,
            amos: self.amos - earlier.amos,
            signals: self.signals - earlier.signals,
            fences: self.fences - earlier.fences,
            quiets: self.quiets - earlier.quiets,
        }
    }
}

impl std::fmt::Display for OpCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "put {} ({} B), get {} ({} B), amo {}, signal {}, fence {}, quiet {}",
            self.puts,
            self.put_bytes,
            self.gets,
            self.get_bytes,
            self.amos,
            self.signals,
            self.fences,
            self.quiets
        )
    }
}

/// A snapshot of one PE's operation counters since init, per path to the target
/// ([`Runtime::counters`](crate::Runtime::counters); printed at finalize when
/// `SYMMEM_DEBUG` is `info` or more verbose). Counts are of operations this PE issued,
/// not of those peers applied to its heap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Host operations on heaps mapped here: this PE's own and same-node peers' with P2P
    /// on (loads, stores and atomics; on a GPU PE, copies and helper kernels). Counted
    /// only when `SYMMEM_DEBUG` is `info` or more verbose (all 0 otherwise), except that
    /// weak ordering's deliveries to same-node peers always are. Device operations
    /// through P2P pointers in kernels are never counted.
    pub direct: OpCounts,
    /// Requests sent over the job's remote transport, host- and device-initiated; all 0
    /// when it has none.
    pub remote: OpCounts,
    /// The remote transport the job uses (`socket`, `ib`), as its transport names itself;
    /// `None` when every PE's heap is mapped here.
    pub remote_transport: Option<&'static str>,
    /// Device-initiated requests the proxy thread issued on the remote transport (also
    /// counted in `remote`).
    pub proxy: OpCounts,
    /// The most requests the proxy ring held when the proxy thread took one (tickets
    /// taken and not yet issued, at most `SYMMEM_PROXY_SLOTS`); 0 when none was taken.
    pub proxy_ring_high_water: u64,
    /// Whether host operations on the direct path were counted (`SYMMEM_DEBUG` at `info`
    /// or more verbose): when false, `direct` holds only weak ordering's deliveries, and
    /// its zeros say nothing about how many direct operations ran.
    pub direct_counted: bool,
}

impl Counters {
    /// The counts since `earlier`, a snapshot of the same PE taken before this one (for
    /// the operations of one phase of a program); the high-water mark is this snapshot's.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            direct: self.direct.since(&earlier.direct),
            remote: self.remote.since(&earlier.remote),
            remote_transport: self.remote_transport,
            proxy: self.proxy.since(&earlier.proxy),
            proxy_ring_high_water: self.proxy_ring_high_water,
            direct_counted: self.direct_counted,
        }
    }
}

impl std::fmt::Display for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let uncounted = if self.direct_counted {
            ""
        } else {
            " (host direct ops not counted below SYMMEM_DEBUG=info)"
        };
        write!(
            f,
            "direct: {}{uncounted}; remote ({}): {}; proxy: {}, ring high-water {}",
            self.direct,
            self.remote_transport.unwrap_or("none"),
            self.remote,
            self.proxy,
            self.proxy_ring_high_water
        )
    }
}

/// What an operation is, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Put,
    Get,
    Amo,
    Signal,
    Fence,
    Quiet,
}

/// Slots of a counter block, in [`OpCounts`] order.
const PUTS: usize = 0;
const PUT_BYTES: usize = 1;
const GETS: usize = 2;
const GET_BYTES: usize = 3;
const AMOS: usize = 4;
const SIGNALS: usize = 5;
const FENCES: usize = 6;
const QUIETS: usize = 7;
const SLOTS: usize = 8;

/// The (count, bytes) slots of `op`.
#[inline(always)]
fn slots(op: Op) -> (usize, Option<usize>) {
    match op {
        Op::Put => (PUTS, Some(PUT_BYTES)),
        Op::Get => (GETS, Some(GET_BYTES)),
        Op::Amo => (AMOS, None),
        Op::Signal => (SIGNALS, None),
        Op::Fence => (FENCES, None),
        Op::Quiet => (QUIETS, None),
    }
}

/// Counters that several threads may update: relaxed atomic adds (transports, the proxy).
#[derive(Debug, Default)]
pub(crate) struct SharedOps([AtomicU64; SLOTS]);

impl SharedOps {
    /// Counts one `op` of `bytes` bytes.
    pub(crate) fn add(&self, op: Op, bytes: u64) {
        let (count, bytes_slot) = slots(op);
        self.0[count].fetch_add(1, Relaxed);
        if let Some(b) = bytes_slot {
            self.0[b].fetch_add(bytes, Relaxed);
        }
    }

    /// Counts `req` as its opcode says: a put_signal is a put and a signal.
    pub(crate) fn add_request(&self, req: &Request) {
        match Opcode::from_u8(req.opcode) {
            Some(Opcode::Put) => self.add(Op::Put, req.len),
            Some(Opcode::Get) => self.add(Op::Get, req.len),
            Some(Opcode::Amo) => self.add(Op::Amo, 0),
            Some(Opcode::PutSignal) => {
                self.add(Op::Put, req.len);
                self.add(Op::Signal, 0);
            }
            Some(Opcode::Signal) => self.add(Op::Signal, 0),
            Some(Opcode::Fence) => self.add(Op::Fence, 0),
            Some(Opcode::Quiet) => self.add(Op::Quiet, 0),
            None => {}
        }
    }

    fn snapshot(&self) -> OpCounts {
        snapshot(&self.0)
    }
}

impl symmem_transport::OpCounter for SharedOps {
    fn request(&self, req: &Request) {
        self.add_request(req);
    }

    fn fence(&self) {
        self.add(Op::Fence, 0);
    }

    fn quiet(&self) {
        self.add(Op::Quiet, 0);
    }
}

fn snapshot(c: &[AtomicU64; SLOTS]) -> OpCounts {
    let v = |i: usize| c[i].load(Relaxed);
    OpCounts {
        puts: v(PUTS),
        put_bytes: v(PUT_BYTES),
        gets: v(GETS),
        get_bytes: v(GET_BYTES),
        amos: v(AMOS),
        signals: v(SIGNALS),
        fences: v(FENCES),
        quiets: v(QUIETS),
    }
}

/// One thread's direct-path counters for one runtime. Only that thread writes them, so
/// an update is a relaxed load and store (no read-modify-write); snapshots read them
/// from any thread. Aligned to its own cache lines so that threads share none.
#[repr(align(128))]
#[derive(Default)]
struct ThreadOps([AtomicU64; SLOTS]);

impl ThreadOps {
    #[inline(always)]
    fn bump(&self, slot: usize, n: u64) {
        let c = &self.0[slot];
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    }
}

thread_local! {
    /// The runtime id and counter block this thread used last. Runtime ids are never
    /// reused within a process, so a block is only reached through the id of the runtime
    /// that owns it, which is alive while one of its methods runs.
    static CURRENT: Cell<(u64, *const ThreadOps)> = const { Cell::new((0, std::ptr::null())) };
}

/// One runtime's counters: per-thread blocks for the direct path, shared ones for the
/// transports.
pub(crate) struct Registry {
    /// The runtime's id (`Runtime::id`).
    id: u64,
    /// Whether the direct path is counted (`SYMMEM_DEBUG` is info or more verbose).
    direct_on: bool,
    /// Every thread's direct-path block, boxed so that its address never changes.
    threads: Mutex<Vec<(ThreadId, Box<ThreadOps>)>>,
    /// Requests over the job's remote transport.
    pub(crate) remote: Arc<SharedOps>,
    /// Its name, once it connected.
    remote_name: OnceLock<&'static str>,
    /// Requests to same-node peers through the direct transport (weak ordering), added
    /// to the direct path.
    pub(crate) direct_transport: Arc<SharedOps>,
}

impl Registry {
    /// The counters of runtime `id`, all zero; the direct path is counted when
    /// `direct_on`.
    pub(crate) fn new(id: u64, direct_on: bool) -> Self {
        Registry {
            id,
            direct_on,
            threads: Mutex::new(Vec::new()),
            remote: Arc::default(),
            remote_name: OnceLock::new(),
            direct_transport: Arc::default(),
        }
    }

    /// The counters of the transport path `name` (what a transport's
    /// [`symmem_transport::Setup::counter`] returns): `direct` for weak ordering's
    /// deliveries to same-node peers, anything else for the job's one remote transport,
    /// which is then named in the snapshots.
    pub(crate) fn transport(&self, name: &'static str) -> Arc<dyn symmem_transport::OpCounter> {
        if name == "direct" {
            return self.direct_transport.clone();
        }
        let first = *self.remote_name.get_or_init(|| name);
        debug_assert_eq!(first, name, "a job connects one remote transport");
        self.remote.clone()
    }

    /// Counts one direct-path `op` of `bytes` bytes for the calling thread.
    #[inline(always)]
    pub(crate) fn direct(&self, op: Op, bytes: usize) {
        if self.direct_on {
            self.direct_counted(op, bytes);
        }
    }

    /// [`Self::direct`] when counting is on: out of line and cold, so that the fast path
    /// with counting off is a load and a branch that falls through.
    #[cold]
    #[inline(never)]
    fn direct_counted(&self, op: Op, bytes: usize) {
        let (id, block) = CURRENT.get();
        if id == self.id {
            // SAFETY: the block belongs to this runtime (ids are unique per process), which
            // owns it boxed in `threads` until it is dropped, after `&self` ends.
            add(unsafe { &*block }, op, bytes);
        } else {
            self.direct_first(op, bytes);
        }
    }

    /// [`Self::direct`] on a thread's first operation on this runtime (or after it used
    /// another runtime): finds or creates its block and remembers it.
    #[cold]
    #[inline(never)]
    fn direct_first(&self, op: Op, bytes: usize) {
        let me = std::thread::current().id();
        let mut threads = self.threads.lock().unwrap_or_else(|p| p.into_inner());
        let block: *const ThreadOps = match threads.iter().find(|(t, _)| *t == me) {
            Some((_, b)) => &**b,
            None => {
                threads.push((me, Box::default()));
                &*threads.last().expect("just pushed").1
            }
        };
        drop(threads);
        CURRENT.set((self.id, block));
        // SAFETY: as in `direct`: the box lives in `threads` as long as `self`.
        add(unsafe { &*block }, op, bytes);
    }

    /// The counters now, with the proxy's when there is one.
    pub(crate) fn snapshot(&self, proxy: Option<&ProxyStats>) -> Counters {
        let mut direct = self.direct_transport.snapshot();
        for (_, b) in self
            .threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            direct += snapshot(&b.0);
        }
        Counters {
            direct,
            remote: self.remote.snapshot(),
            remote_transport: self.remote_name.get().copied(),
            proxy: proxy.map(|p| p.ops.snapshot()).unwrap_or_default(),
            proxy_ring_high_water: proxy.map_or(0, |p| p.high_water.load(Relaxed)),
            direct_counted: self.direct_on,
        }
    }
}

#[inline(always)]
fn add(block: &ThreadOps, op: Op, bytes: usize) {
    let (count, bytes_slot) = slots(op);
    block.bump(count, 1);
    if let Some(b) = bytes_slot {
        block.bump(b, bytes as u64);
    }
}

/// The proxy thread's counters: the requests it took off the ring, and the ring's
/// high-water mark. Only the proxy thread writes them.
#[derive(Debug, Default)]
pub(crate) struct ProxyStats {
    ops: SharedOps,
    high_water: AtomicU64,
}

impl ProxyStats {
    /// Counts `req`, just taken off the ring with `header`, and raises the high-water mark
    /// to the ring's occupancy now: the tickets from `req`'s (its `tag`) up to the next
    /// one to be taken, at most the ring's capacity (producers past it wait for a slot).
    pub(crate) fn took(&self, req: &Request, header: &Header) {
        self.ops.add_request(req);
        let occupancy = header
            .reserve
            .load(Relaxed)
            .saturating_sub(req.tag)
            .min(header.capacity.load(Relaxed));
        if occupancy > self.high_water.load(Relaxed) {
            self.high_water.store(occupancy, Relaxed);
        }
    }
}

/// Logs `counters` of PE `pe` at info level, one line (at finalize).
pub(crate) fn log(pe: usize, counters: &Counters) {
    tracing::info!(target: crate::logging::SUMMARY, "PE {pe} counters: {counters}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use symmem_device::proxy::{ring_bytes, Ring};
    use symmem_device::SignalOp;

    /// Each thread counts in its own block; a snapshot sums them, threads that ended
    /// included, and a second runtime's counts stay apart.
    #[test]
    fn direct_counts_are_per_thread_and_summed() {
        let a = Registry::new(u64::MAX - 1, true);
        let b = Registry::new(u64::MAX - 2, true);
        let off = Registry::new(u64::MAX - 3, false);
        off.direct(Op::Put, 8);
        assert_eq!(off.snapshot(None), Counters::default());
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..100 {
                        a.direct(Op::Put, 8);
                        b.direct(Op::Get, 16);
                    }
                    a.direct(Op::Quiet, 0);
                });
            }
        });
        a.direct(Op::Amo, 0);
        let (ca, cb) = (a.snapshot(None), b.snapshot(None));
        let want_a = OpCounts {
            puts: 300,
            put_bytes: 2400,
            amos: 1,
            quiets: 3,
            ..OpCounts::default()
        };
        assert_eq!(ca.direct, want_a);
        assert_eq!((cb.direct.gets, cb.direct.get_bytes), (300, 4800));
        assert_eq!(a.threads.lock().unwrap().len(), 4);
        assert_eq!(ca.proxy_ring_high_water, 0);
    }

    /// A put_signal request counts as a put and a signal; fences and quiets count.
    #[test]
    fn requests_count_by_opcode() {
        let ops = SharedOps::default();
        ops.add_request(&Request::put_signal(1, 0, 0, 40, 64, SignalOp::Set, 1));
        ops.add_request(&Request::get(1, 0, 0, 24));
        ops.add_request(&Request::signal(1, 64, SignalOp::Add, 1));
        ops.add_request(&Request::quiet());
        ops.add(Op::Fence, 0);
        let want = OpCounts {
            puts: 1,
            put_bytes: 40,
            gets: 1,
            get_bytes: 24,
            signals: 2,
            fences: 1,
            quiets: 1,
            ..OpCounts::default()
        };
        assert_eq!(ops.snapshot(), want);
    }

    /// The high-water mark is the ring's largest occupancy at a take, capped at its
    /// capacity.
    #[test]
    fn proxy_high_water_is_the_largest_occupancy_seen() {
        let slots = 4;
        let mut mem = vec![0u64; ring_bytes(slots) / 8 + 16];
        let base = (mem.as_mut_ptr() as usize).next_multiple_of(128) as *mut u8;
        // SAFETY: `base` is 128-byte aligned inside `mem`, which holds `ring_bytes(slots)`
        // zeroed bytes after it and outlives `ring`.
        let ring = unsafe {
            base.cast::<u64>()
                .add(std::mem::offset_of!(Header, capacity) / 8)
                .write(slots as u64);
            Ring::from_raw(base)
        };
        let h = ring.header();
        let stats = ProxyStats::default();
        let at = |tag| Request {
            tag,
            ..Request::quiet()
        };
        h.reserve.store(3, Relaxed);
        stats.took(&at(0), h);
        stats.took(&at(1), h);
        h.reserve.store(9, Relaxed);
        stats.took(&at(7), h);
        assert_eq!(stats.high_water.load(Relaxed), 3);
        stats.took(&at(2), h);
        assert_eq!(stats.high_water.load(Relaxed), 4, "capped at the capacity");
        assert_eq!(stats.ops.snapshot().quiets, 4);
    }
}
