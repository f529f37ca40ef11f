//! The runtime handle: init, finalize, queries, collective allocation, and the shared
//! wait loop.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use symmem_bootstrap::{Bootstrap, BootstrapError, UniqueId};
use symmem_device::{DeviceState, DEVICE_STATE_VERSION};
use symmem_sync::Backoff;

use crate::alloc::Allocator;
use crate::barrier::BarrierState;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::heap::{self, ControlBlock, SymmetricHeap, RESERVED};
use crate::liveness::PeerWatch;
use crate::sym::SymBuf;
use crate::topology::{PeInfo, Topology};

/// Distinguishes runtime instances, so handles from one are refused by another.
static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

/// Starts this PE: reads the configuration, bootstraps with the launcher the process was
/// started by (symrun, MPI, or none: a single PE), and sets up the symmetric heap.
/// Collective: every PE of the job must call it.
pub fn init() -> Result<Runtime> {
    let config = Config::from_env()?;
    crate::logging::init(&config);
    let bootstrap = symmem_bootstrap::from_env(config.bootstrap, config.bootstrap_timeout)?;
    Runtime::start(config, bootstrap)
}

/// Creates a unique id for [`init_with_unique_id`] (NVSHMEM's `nvshmemx_get_uniqueid`).
/// Rank 0 calls this and passes the id's text form to the other ranks by any channel.
pub fn unique_id() -> Result<UniqueId> {
    let config = Config::from_env()?;
    Ok(UniqueId::bind(config.socket_ifname.as_deref())?)
}

/// Starts PE `rank` of `n_pes` without a launcher, rendezvousing through `id`
/// (NVSHMEM's `nvshmemx_init_attr` with `NVSHMEMX_INIT_WITH_UNIQUEID`).
pub fn init_with_unique_id(rank: usize, n_pes: usize, id: &UniqueId) -> Result<Runtime> {
    let config = Config::from_env()?;
    crate::logging::init(&config);
    let bootstrap = id.join(rank, n_pes, config.bootstrap_timeout)?;
    Runtime::start(config, Box::new(bootstrap))
}

/// Starts this PE on a duplicate of an existing MPI communicator
/// (NVSHMEM's `NVSHMEMX_INIT_WITH_MPI_COMM`). MPI stays the caller's to finalize.
#[cfg(feature = "mpi")]
pub fn init_with_mpi_comm<C: mpi::topology::Communicator>(comm: &C) -> Result<Runtime> {
    let config = Config::from_env()?;
    crate::logging::init(&config);
    let b = symmem_bootstrap::mpi::MpiBootstrap::from_communicator(comm, config.bootstrap_timeout)?;
    Runtime::start(config, Box::new(b))
}

/// Starts this PE on a bootstrap the caller built.
pub fn init_with_bootstrap(bootstrap: Box<dyn Bootstrap>) -> Result<Runtime> {
    let config = Config::from_env()?;
    crate::logging::init(&config);
    Runtime::start(config, bootstrap)
}

/// Allocation bookkeeping, guarded by one lock: collective calls are serialized.
struct AllocState {
    allocator: Allocator,
    /// Number of collective allocation calls so far (alloc and free alike).
    calls: u64,
}

/// A running PE: owns the bootstrap, the symmetric heap and the peer mappings.
///
/// `Runtime` is `Send + Sync`: one-sided operations may be issued from several threads.
/// Collective calls (allocation, `barrier_all`) must be made by one thread per PE at a
/// time, in the same order on every PE.
pub struct Runtime {
    pub(crate) id: u64,
    pub(crate) config: Config,
    pub(crate) bootstrap: Box<dyn Bootstrap>,
    pub(crate) topo: Topology,
    pub(crate) heap: SymmetricHeap,
    watch: PeerWatch,
    allocs: Mutex<AllocState>,
    /// Serializes barrier_all and holds its epoch counter.
    pub(crate) barrier: BarrierState,
    /// Every PE's heap is mapped here, so `barrier_all` can use the heap flags. Fixed
    /// after `start`; computed once instead of scanning all PEs on every barrier.
    pub(crate) all_mapped: bool,
    /// What device code (kernels on the CPU executor, or a PTX module) reads.
    pub(crate) device_state: DeviceState,
    /// The array `device_state.peer_bases` points to.
    _peer_bases: Box<[u64]>,
    finalized: bool,
}

impl Runtime {
    fn start(config: Config, bootstrap: Box<dyn Bootstrap>) -> Result<Self> {
        let rank = bootstrap.rank();
        let setup = (|| {
            let job_bytes =
                bootstrap.broadcast(0, &symmem_bootstrap::random_nonce()?.to_le_bytes())?;
            let job = u64::from_le_bytes(job_bytes.as_slice().try_into().map_err(|_| {
                BootstrapError::Protocol {
                    peer: "rank 0".into(),
                    detail: "job id broadcast has the wrong length".into(),
                }
            })?);
            let pending = SymmetricHeap::create(job, rank, config.symmetric_size)?;
            let me = PeInfo {
                node: config.node_id.clone(),
                pid: std::process::id(),
                heap_len: config.symmetric_size,
            };
            let infos = bootstrap
                .allgather(&me.encode())?
                .iter()
                .enumerate()
                .map(|(pe, b)| PeInfo::decode(b, pe))
                .collect::<Result<Vec<_>>>()?;
            let topo = Topology::new(rank, infos);
            heap::check_sizes(&topo.heap_lens())?;
            let deadline = Instant::now() + config.bootstrap_timeout;
            let heap = pending.connect(&topo, !config.disable_p2p, deadline)?;
            // Nobody may use a peer's heap before that peer has mapped everyone's.
            bootstrap.barrier()?;
            Ok::<_, Error>((topo, heap))
        })();
        let (topo, heap) = match setup {
            Ok(v) => v,
            Err(e) => {
                // Tell the others at once instead of letting them wait for the deadline.
                bootstrap.abort(&format!("init failed: {e}"));
                return Err(e);
            }
        };
        let watch = PeerWatch::new(
            topo.local_pes()
                .iter()
                .filter(|&&p| p != rank)
                .map(|&p| (p, topo.pid(p))),
        );
        let allocator = Allocator::new(RESERVED, heap.len().saturating_sub(RESERVED));
        let all_mapped = (0..topo.n_pes()).all(|pe| heap.base(pe).is_some());
        let peer_bases: Box<[u64]> = (0..topo.n_pes())
            .map(|pe| heap.base(pe).map_or(0, |b| b.as_ptr() as u64))
            .collect();
        let device_state = DeviceState {
            version: DEVICE_STATE_VERSION,
            my_pe: rank as u32,
            n_pes: topo.n_pes() as u32,
            _reserved: 0,
            heap_base: heap.base(rank).expect("own heap is mapped").as_ptr() as u64,
            heap_size: heap.len() as u64,
            // The boxed slice's buffer does not move when the box does.
            peer_bases: peer_bases.as_ptr() as u64,
            barrier_off: std::mem::offset_of!(ControlBlock, device_barrier) as u64,
            epoch_off: std::mem::offset_of!(ControlBlock, device_epoch) as u64,
            // The CPU executor reports device errors as panics, not through a word.
            error: 0,
            proxy: 0,
        };
        let rt = Runtime {
            id: NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed),
            config,
            bootstrap,
            topo,
            heap,
            watch,
            allocs: Mutex::new(AllocState {
                allocator,
                calls: 0,
            }),
            barrier: BarrierState::default(),
            all_mapped,
            device_state,
            _peer_bases: peer_bases,
            finalized: false,
        };
        tracing::info!(
            pe = rank,
            n_pes = rt.n_pes(),
            node = %rt.config.node_id,
            local_pes = ?rt.topo.local_pes(),
            bootstrap = %rt.bootstrap.kind(),
            heap_bytes = rt.heap.len(),
            "symmem initialized"
        );
        if rank == 0 {
            for (name, value) in rt.config.describe() {
                tracing::info!("{name}={value}");
            }
            for unknown in Config::unknown_variables() {
                tracing::warn!("unknown environment variable {unknown} (typo?) is ignored");
            }
        }
        Ok(rt)
    }

    /// This PE's number, `0..n_pes()` (`nvshmem_my_pe`).
    #[inline]
    pub fn my_pe(&self) -> usize {
        self.topo.my_pe()
    }

    /// The number of PEs in the job (`nvshmem_n_pes`).
    #[inline]
    pub fn n_pes(&self) -> usize {
        self.topo.n_pes()
    }

    /// The node identity of `pe` (`SYMMEM_NODE_ID` or its hostname).
    pub fn node_of(&self, pe: usize) -> Result<&str> {
        self.check_pe("node_of", pe)?;
        Ok(self.topo.node(pe))
    }

    /// PEs that share this PE's node (and so its memory), including this PE.
    pub fn local_pes(&self) -> &[usize] {
        self.topo.local_pes()
    }

    /// The configuration this runtime was started with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Which bootstrap the job uses.
    pub fn bootstrap_kind(&self) -> symmem_bootstrap::BootstrapKind {
        self.bootstrap.kind()
    }

    /// Symmetric heap bytes available to allocations (excludes the runtime's reserve).
    pub fn heap_capacity(&self) -> usize {
        self.lock_allocs().allocator.capacity()
    }

    /// The state device code of this PE reads: what a PTX module's `SYMMEM_DEVICE_STATE`
    /// is filled with, and what the CPU executor installs for each kernel thread.
    pub fn device_state(&self) -> &DeviceState {
        &self.device_state
    }

    /// Symmetric heap bytes currently free.
    pub fn heap_free(&self) -> usize {
        self.lock_allocs().allocator.free_bytes()
    }

    /// A direct pointer to `buf` in `pe`'s heap (`nvshmem_ptr`): `Some` when `pe`'s heap is
    /// mapped into this process (same node, P2P enabled), `None` otherwise.
    ///
    /// Reading or writing through the pointer is up to the caller: other PEs may access
    /// the same memory concurrently.
    pub fn ptr<T>(&self, buf: &SymBuf<T>, pe: usize) -> Result<Option<std::ptr::NonNull<T>>> {
        self.check_buf("ptr", buf)?;
        self.check_pe("ptr", pe)?;
        Ok(self.heap.base(pe).map(|b| {
            // SAFETY: `buf.offset` lies inside the heap (the allocator only hands out
            // in-heap offsets), so the result stays inside the same mapping.
            unsafe { b.add(buf.offset) }.cast()
        }))
    }

    /// Fails unless `pe` names a PE of the job.
    ///
    /// The check_* helpers run on every one-sided operation. The comparisons are inlined;
    /// building the error (a large enum) lives in `#[cold]` functions, so the fast path of
    /// `put`/`get`/`p`/`g`/AMOs stays small enough to inline into the caller (measured by
    /// symmem-perf: out-of-line checks cost several ns per 8-byte operation).
    #[inline]
    pub(crate) fn check_pe(&self, op: &'static str, pe: usize) -> Result<()> {
        if pe < self.n_pes() {
            Ok(())
        } else {
            Err(self.invalid_pe(op, pe))
        }
    }

    /// The error of a failed [`Self::check_pe`].
    #[cold]
    #[inline(never)]
    fn invalid_pe(&self, op: &'static str, pe: usize) -> Error {
        Error::InvalidPe {
            op,
            pe,
            n_pes: self.n_pes(),
            access: String::new(),
        }
    }

    /// Fails unless `buf` was allocated by this runtime (see [`Self::check_pe`]).
    #[inline]
    pub(crate) fn check_buf<T>(&self, op: &'static str, buf: &SymBuf<T>) -> Result<()> {
        if buf.runtime == self.id {
            Ok(())
        } else {
            Err(self.foreign_allocation(op, buf.id, buf.runtime))
        }
    }

    /// The error of a failed [`Self::check_buf`].
    #[cold]
    #[inline(never)]
    fn foreign_allocation(&self, op: &'static str, alloc: u64, owner: u64) -> Error {
        Error::ForeignAllocation {
            op,
            alloc,
            owner,
            this: self.id,
        }
    }

    fn lock_allocs(&self) -> std::sync::MutexGuard<'_, AllocState> {
        self.allocs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Collectively allocates `len` elements of `T` (`nvshmem_malloc`). The contents are
    /// unspecified (possibly data from an earlier, freed allocation).
    pub fn alloc<T: bytemuck::Pod>(&self, len: usize) -> Result<SymBuf<T>> {
        self.alloc_impl("alloc", len, std::mem::align_of::<T>(), false)
    }

    /// Collectively allocates `len` zeroed elements of `T` (`nvshmem_calloc`). Returns
    /// after every PE has zeroed its part, so no peer's write can be lost to the zeroing.
    pub fn calloc<T: bytemuck::Pod>(&self, len: usize) -> Result<SymBuf<T>> {
        self.alloc_impl("calloc", len, std::mem::align_of::<T>(), true)
    }

    /// Collectively allocates `len` elements of `T` aligned to `align` bytes, a power of
    /// two (`nvshmem_align`).
    pub fn alloc_aligned<T: bytemuck::Pod>(&self, len: usize, align: usize) -> Result<SymBuf<T>> {
        if !align.is_power_of_two() {
            return Err(Error::InvalidArgument {
                op: "alloc_aligned",
                reason: format!("alignment {align} is not a power of two"),
            });
        }
        self.alloc_impl(
            "alloc_aligned",
            len,
            align.max(std::mem::align_of::<T>()),
            false,
        )
    }

    fn alloc_impl<T>(
        &self,
        op: &'static str,
        len: usize,
        align: usize,
        zero: bool,
    ) -> Result<SymBuf<T>> {
        let bytes =
            len.checked_mul(std::mem::size_of::<T>())
                .ok_or_else(|| Error::InvalidArgument {
                    op,
                    reason: format!(
                        "{len} elements of {} bytes overflow",
                        std::mem::size_of::<T>()
                    ),
                })?;
        let mut state = self.lock_allocs();
        let call = state.calls;
        // Every collective call takes a number, failed or not, the same on every PE.
        state.calls += 1;
        self.verify_collective(call, &Request::Alloc { bytes, align, zero })?;
        let offset = state
            .allocator
            .alloc(bytes, align)
            .map_err(|ex| Error::OutOfMemory {
                requested: bytes,
                align,
                free: ex.free,
                largest_free: ex.largest_free,
                heap_size: state.allocator.capacity(),
            })?;
        drop(state);
        tracing::debug!(target: "symmem_runtime::alloc", id = call, offset, bytes, align, "allocated");
        if zero {
            let base = self
                .heap
                .base(self.my_pe())
                .expect("own heap is always mapped");
            // SAFETY: offset..offset+bytes is a live allocation inside this PE's heap. Peers
            // cannot write it yet: they are held by the barrier below.
            unsafe { base.as_ptr().add(offset).write_bytes(0, bytes) };
            self.barrier_all()?;
        }
        Ok(SymBuf {
            runtime: self.id,
            id: call,
            offset,
            len,
            _elem: PhantomData,
        })
    }

    /// Collectively frees `buf` (`nvshmem_free`). Every PE must free the same allocation.
    pub fn free<T>(&self, buf: SymBuf<T>) -> Result<()> {
        self.check_buf("free", &buf)?;
        let mut state = self.lock_allocs();
        let call = state.calls;
        state.calls += 1;
        self.verify_collective(
            call,
            &Request::Free {
                id: buf.id,
                offset: buf.offset,
            },
        )?;
        let freed = state.allocator.free(buf.offset);
        debug_assert!(freed, "a live SymBuf always names a live block");
        Ok(())
    }

    /// Allgathers this PE's request and checks that every PE made the same one.
    fn verify_collective(&self, call: u64, request: &Request) -> Result<()> {
        let all = self.bootstrap.allgather(&request.encode())?;
        if all.iter().all(|r| *r == all[self.my_pe()]) {
            return Ok(());
        }
        // Group PEs by what they asked for, so the message stays short on big jobs.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (pe, bytes) in all.iter().enumerate() {
            let text = Request::describe(bytes);
            match groups.iter_mut().find(|(t, _)| *t == text) {
                Some((_, pes)) => pes.push(pe),
                None => groups.push((text, vec![pe])),
            }
        }
        let detail = groups
            .iter()
            .map(|(text, pes)| {
                let pes: Vec<String> = pes.iter().map(|p| p.to_string()).collect();
                format!("PE {} called {text}", pes.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ");
        Err(Error::AllocMismatch { call, detail })
    }

    /// Waits until `ready()` returns true, backing off, checking for dead peers and
    /// `SYMMEM_TIMEOUT` once the wait is no longer short. `waiting_for` names what the wait
    /// depends on, for the error message.
    ///
    /// The loop is kept small and inlined into each wait: the spin phase is a load, a
    /// compare and a `pause`, so a condition that becomes true is noticed within one
    /// `pause` (see [`Backoff`]). Health and deadline checks, which cost syscalls, live
    /// out of line in [`Self::check_slow_wait`] and run only after the spin phase.
    #[inline]
    pub(crate) fn wait_for(
        &self,
        op: &'static str,
        waiting_for: impl Fn() -> String,
        mut ready: impl FnMut() -> bool,
    ) -> Result<()> {
        if ready() {
            return Ok(());
        }
        let mut backoff = Backoff::new();
        let mut started: Option<Instant> = None;
        loop {
            backoff.snooze();
            if ready() {
                return Ok(());
            }
            if backoff.is_slow() {
                if let Some(after) = self.check_slow_wait(op, &mut started)? {
                    return Err(Error::Timeout {
                        op,
                        me: self.my_pe(),
                        after,
                        waiting_for: waiting_for(),
                    });
                }
            }
        }
    }

    /// One round of the slow part of [`Self::wait_for`]: fails if a peer died, and returns
    /// `Some(limit)` once `SYMMEM_TIMEOUT` has passed since the first slow round.
    #[inline(never)]
    fn check_slow_wait(
        &self,
        op: &'static str,
        started: &mut Option<Instant>,
    ) -> Result<Option<std::time::Duration>> {
        self.check_health(op)?;
        let t0 = *started.get_or_insert_with(Instant::now);
        Ok(self.config.timeout.filter(|&limit| t0.elapsed() >= limit))
    }

    /// Fails if a peer is known to have died, naming the root cause: a dead peer that
    /// recorded which failure it reacted to points at that PE instead.
    pub(crate) fn check_health(&self, op: &'static str) -> Result<()> {
        let me = self.my_pe();
        let failed = |pe: usize, reason: String| Error::PeerFailed { pe, me, op, reason };
        let dead = self.watch.dead();
        let cause_of = |pe: usize| -> Option<usize> {
            let c = self
                .heap
                .control(pe)?
                .failure_cause
                .0
                .load(Ordering::Acquire);
            c.checked_sub(1).map(|c| c as usize).filter(|&c| c != me)
        };
        let err = if let Some(&(pe, pid)) = dead.iter().find(|(pe, _)| cause_of(*pe).is_none()) {
            failed(pe, format!("its process {pid} exited"))
        } else if let Some(&(pe, pid)) = dead.first() {
            let root = cause_of(pe).expect("every dead peer recorded a cause");
            failed(
                root,
                format!(
                    "PE {pe} (process {pid}) exited after it detected the failure of PE {root}"
                ),
            )
        } else {
            match self.bootstrap.failure() {
                None => return Ok(()),
                Some(BootstrapError::PeerFailed { rank, reason }) => failed(rank, reason),
                Some(other) => return Err(other.into()),
            }
        };
        if let (Error::PeerFailed { pe, .. }, Some(cb)) = (&err, self.heap.control(me)) {
            cb.failure_cause.0.store(*pe as u64 + 1, Ordering::Release);
        }
        Err(err)
    }

    /// Finalizes this PE (`nvshmem_finalize`): waits until every PE has finalized its
    /// use of the heap, then releases everything. Collective. Dropping the runtime does the
    /// same but can only log an error.
    pub fn finalize(mut self) -> Result<()> {
        self.finalize_inner()
    }

    fn finalize_inner(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.finalized, true) {
            return Ok(());
        }
        if let Some(cb) = self.heap.control(self.my_pe()) {
            cb.finalizing.0.store(1, Ordering::Release);
        }
        // Peers may still read or write this PE's heap until they, too, reach finalize.
        self.bootstrap.barrier()?;
        tracing::debug!(pe = self.my_pe(), "symmem finalized");
        Ok(())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.finalized {
            // A panicking PE will not take part in anything collective again: tell the
            // others now instead of making them wait in finalize's barrier.
            self.finalized = true;
            if let Some(cb) = self.heap.control(self.my_pe()) {
                cb.finalizing.0.store(1, Ordering::Release);
            }
            self.bootstrap
                .abort(&format!("PE {} panicked", self.my_pe()));
            return;
        }
        if let Err(e) = self.finalize_inner() {
            tracing::error!(pe = self.my_pe(), "finalize during drop failed: {e}");
        }
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("my_pe", &self.my_pe())
            .field("n_pes", &self.n_pes())
            .field("node", &self.config.node_id)
            .field("bootstrap", &self.bootstrap.kind())
            .field("heap", &self.heap)
            .finish()
    }
}

/// A collective allocation call, as compared across PEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    Alloc {
        bytes: usize,
        align: usize,
        zero: bool,
    },
    Free {
        id: u64,
        offset: usize,
    },
}

impl Request {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(25);
        match *self {
            Request::Alloc { bytes, align, zero } => {
                v.push(if zero { 2 } else { 1 });
                v.extend_from_slice(&(bytes as u64).to_le_bytes());
                v.extend_from_slice(&(align as u64).to_le_bytes());
            }
            Request::Free { id, offset } => {
                v.push(3);
                v.extend_from_slice(&id.to_le_bytes());
                v.extend_from_slice(&(offset as u64).to_le_bytes());
            }
        }
        v
    }

    /// Human-readable form of an encoded request.
    fn describe(bytes: &[u8]) -> String {
        if bytes.len() != 17 {
            return format!("an unknown request ({} bytes)", bytes.len());
        }
        let a = u64::from_le_bytes(bytes[1..9].try_into().unwrap());
        let b = u64::from_le_bytes(bytes[9..17].try_into().unwrap());
        match bytes[0] {
            1 => format!("alloc({a} bytes, align {b})"),
            2 => format!("calloc({a} bytes, align {b})"),
            3 => format!("free(allocation #{a} at offset {b:#x})"),
            t => format!("an unknown request (tag {t})"),
        }
    }
}
