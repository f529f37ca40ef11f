//! The runtime handle: init, queries and finalize. Allocation is in `alloc.rs`, the
//! shared wait loop and health checks in `liveness.rs`, device setup in `pe_device.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use symmem_bootstrap::{Bootstrap, BootstrapError, UniqueId};
use symmem_device::{DeviceState, DEVICE_STATE_VERSION};

use crate::allocator::{AllocState, Allocator};
use crate::config::{Config, MemoryOrdering};
use crate::counters::{Counters, Registry};
use crate::error::{Error, Result};
use crate::heap::{self, SymmetricHeap, RESERVED};
use crate::liveness::{self, InitProgress, InitStep, PeerWatch};
use crate::pe_device::{
    create_backend, device_error_word, device_peer_table, device_resources, serve_gpu_heap,
    start_proxy, Device,
};
use crate::route::Route;
use crate::sym::SymBuf;
use crate::team::TeamState;
use crate::topology::{PeInfo, Topology};
use crate::transport::{self, HeapRegion, Transport};

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
    /// The proxy channel of device-initiated requests to remote PEs (a PE with a
    /// transport); None otherwise. Declared before `transport`: its thread issues on the
    /// transport, so it is joined first.
    pub(crate) proxy: Option<crate::proxy::ProxyChannel>,
    /// The transport to PEs whose heaps are not mapped here; None when every PE is.
    /// Declared before `heap`: it is shut down (its threads joined) before the heap is
    /// unmapped.
    pub(crate) transport: Option<Arc<dyn Transport>>,
    /// The remote transport (not the weak-ordering one in front of it) and why it was
    /// chosen; None when every PE's heap is mapped.
    pub(crate) remote_choice: Option<transport::RemoteChoice>,
    pub(crate) heap: SymmetricHeap,
    pub(crate) watch: PeerWatch,
    pub(crate) allocs: Mutex<AllocState>,
    /// Serializes barrier_all and holds its epoch counter.
    pub(crate) barrier: symmem_sync::barrier::Epoch,
    /// Every PE's heap is mapped here, so `barrier_all` can use the heap flags. Fixed
    /// after `start`; computed once instead of scanning all PEs on every barrier.
    pub(crate) all_mapped: bool,
    /// How each PE's heap is reached, chosen once at init.
    pub(crate) routes: Box<[Route]>,
    /// What device code (kernels on the CPU executor, or a PTX module) reads.
    pub(crate) device_state: DeviceState,
    /// The array `device_state.peer_bases` points to on a CPU PE.
    _peer_bases: Box<[u64]>,
    /// The GPU of a GPU PE and what its kernels need; None on a CPU PE.
    pub(crate) device: Option<Device>,
    /// The runtime's helper kernels on a GPU PE (host atomics, signals, on-stream ops).
    #[cfg(feature = "cuda")]
    pub(crate) helpers: crate::gpu_host::Helpers,
    /// Team slots and counters (`team.rs`).
    pub(crate) teams: TeamState,
    /// Operation counters per path (`counters.rs`).
    pub(crate) counters: Registry,
    finalized: bool,
}

/// The [`DeviceState`] of PE `rank` on `heap`, with the peer base table at `peer_bases`,
/// the error record at `error` (addresses its kernels use) and device waits limited to
/// `wait_timeout`.
fn device_state(
    rank: usize,
    topo: &Topology,
    heap: &SymmetricHeap,
    peer_bases: u64,
    error: u64,
    wait_timeout: Option<std::time::Duration>,
) -> DeviceState {
    DeviceState {
        version: DEVICE_STATE_VERSION,
        my_pe: rank as u32,
        n_pes: topo.n_pes() as u32,
        // At least 1 ms (0 would mean no limit), at most u32::MAX ms (49 days).
        wait_timeout_ms: wait_timeout
            .map_or(0, |t| t.as_millis().clamp(1, u32::MAX as u128) as u32),
        heap_base: heap.base(rank).expect("own heap is mapped"),
        heap_size: heap.len() as u64,
        peer_bases,
        barrier_off: heap::DEVICE_BARRIER_OFF as u64,
        epoch_off: heap::DEVICE_EPOCH_OFF as u64,
        error,
        proxy: 0,
    }
}

/// This PE's node identity: the configured one, split into `SYMMEM_SIMULATE_NODES`
/// nodes of consecutive PEs when asked.
fn node_of(config: &Config, rank: usize, n_pes: usize) -> String {
    match config.simulate_nodes {
        1 => config.node_id.clone(),
        k => format!("{}/sim{}", config.node_id, rank * k / n_pes),
    }
}

impl Runtime {
    fn start(config: Config, bootstrap: Box<dyn Bootstrap>) -> Result<Self> {
        let rank = bootstrap.rank();
        let id = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
        let counters = Registry::new(id, crate::logging::info_or_more(&config));
        let mut progress = InitProgress::default();
        let setup = (|| {
            progress.enter(InitStep::Rendezvous);
            let job_bytes =
                bootstrap.broadcast(0, &symmem_bootstrap::random_nonce()?.to_le_bytes())?;
            let job = u64::from_le_bytes(job_bytes.as_slice().try_into().map_err(|_| {
                BootstrapError::Protocol {
                    peer: "rank 0".into(),
                    detail: "job id broadcast has the wrong length".into(),
                }
            })?);
            let pending = SymmetricHeap::create(job, rank)?;
            progress.enter(InitStep::Topology);
            if let Some(why) = &config.node_id_fallback {
                tracing::warn!(
                    host = %config.hostname,
                    "the node identity is the hostname: /proc cannot tell the default (boot id and IPC/network namespaces): {why}"
                );
            }
            let launcher = bootstrap
                .launcher_node()
                .filter(|_| !config.node_id_set)
                .map(|l| l.to_string());
            tracing::info!(
                pe = rank,
                "node identity: {}",
                config.node_identity_source(launcher.as_deref())
            );
            let me = PeInfo {
                node: node_of(&config, rank, bootstrap.size()),
                launcher,
                host: config.hostname.clone(),
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
            progress.learn(&topo);
            heap::check_sizes(&topo.heap_lens())?;
            TeamState::check(&*bootstrap, config.max_teams, config.symmetric_size)?;
            let (backend, reachable) = create_backend(&config, &*bootstrap, &topo)?;
            progress.enter(InitStep::HeapExchange);
            let deadline = symmem_bootstrap::duration::deadline_after(config.bootstrap_timeout);
            let heap = pending.connect(
                &topo,
                config.symmetric_size,
                backend,
                !config.disable_p2p,
                |p| reachable[p],
                deadline,
            )?;
            progress.enter(InitStep::Transport);
            let remote: Vec<bool> = (0..topo.n_pes())
                .map(|pe| pe != rank && heap.base(pe).is_none())
                .collect();
            let mapped: Vec<u64> = (0..topo.n_pes())
                .map(|pe| {
                    heap.base(pe)
                        .filter(|_| heap.host_accessible())
                        .unwrap_or(0)
                })
                .collect();
            let transport::Connected {
                transport,
                remote: remote_choice,
            } = transport::connect(&transport::Setup {
                bootstrap: &*bootstrap,
                config: &config,
                me: rank,
                remote: &remote,
                heap: HeapRegion {
                    base: heap.base(rank).expect("own heap is mapped"),
                    len: heap.len(),
                    host: heap.host_accessible(),
                },
                peer_bases: &mapped,
                deadline,
                counters: &counters,
            })?;
            let peer_bases: Vec<u64> = (0..topo.n_pes())
                .map(|pe| heap.base(pe).unwrap_or(0))
                .collect();
            serve_gpu_heap(
                &heap,
                transport.as_ref(),
                &peer_bases,
                device_state(rank, &topo, &heap, 0, 0, config.device_timeout),
            )?;
            progress.enter(InitStep::Barrier);
            // Nobody may use a peer's heap before that peer has mapped everyone's.
            bootstrap.barrier()?;
            Ok::<_, Error>((topo, heap, transport, remote_choice))
        })();
        let (topo, heap, transport, remote_choice) = match setup {
            Ok(v) => v,
            // Name the root cause (a dead peer, or this PE, which then aborts the others).
            Err(e) => return Err(liveness::fail_init(&*bootstrap, &progress, e)),
        };
        let watch = PeerWatch::new(
            topo.local_pes()
                .iter()
                .filter(|&&p| p != rank)
                .map(|&p| (p, topo.pid(p))),
        );
        // The team area follows the runtime's reserved part; allocations start after it.
        let team_bytes = TeamState::area_bytes(config.max_teams, topo.n_pes())
            .next_multiple_of(crate::allocator::MIN_ALIGN);
        let teams = TeamState::new(RESERVED, config.max_teams, topo.n_pes());
        let allocator = Allocator::new(
            RESERVED + team_bytes,
            heap.len().saturating_sub(RESERVED + team_bytes),
        );
        let all_mapped = (0..topo.n_pes()).all(|pe| heap.control(pe).is_some());
        // Weak ordering reaches every peer through its transport: no P2P pointers.
        let weak = config.ordering == MemoryOrdering::Weak && transport.is_some();
        let peer_bases: Box<[u64]> = (0..topo.n_pes())
            .map(|pe| heap.base(pe).filter(|_| !weak || pe == rank).unwrap_or(0))
            .collect();
        let routes: Box<[Route]> = (0..topo.n_pes())
            .map(|pe| match heap.base(pe) {
                _ if weak && pe != rank => Route::Remote,
                None if transport.is_some() => Route::Remote,
                None => Route::Unreachable,
                Some(b) if heap.host_accessible() => Route::Direct(b as *mut u8),
                #[cfg(feature = "cuda")]
                Some(b) => Route::Copy(b),
                #[cfg(not(feature = "cuda"))]
                Some(_) => unreachable!("only memfd heaps exist without the cuda feature"),
            })
            .collect();
        let device = match device_resources(&heap, &peer_bases) {
            Ok(d) => d,
            Err(e) => {
                bootstrap.abort(&format!("init failed: {e}"));
                return Err(e);
            }
        };
        // On a CPU PE the boxed slice's buffer, which does not move when the box does;
        // on a GPU PE its device copy. The CPU executor reports device errors as panics,
        // not through a word.
        let mut device_state = device_state(
            rank,
            &topo,
            &heap,
            device_peer_table(&device).unwrap_or(peer_bases.as_ptr() as u64),
            device_error_word(&device).unwrap_or(0),
            config.device_timeout,
        );
        let proxy = match &transport {
            Some(t) => match start_proxy(rank, config.proxy_slots, &device, t.clone()) {
                Ok(p) => Some(p),
                Err(e) => {
                    bootstrap.abort(&format!("init failed: {e}"));
                    return Err(e);
                }
            },
            None => None,
        };
        device_state.proxy = proxy.as_ref().map_or(0, |p| p.address());
        let rt = Runtime {
            id,
            config,
            bootstrap,
            topo,
            proxy,
            transport,
            remote_choice,
            heap,
            watch,
            allocs: Mutex::new(AllocState {
                allocator,
                calls: 0,
            }),
            barrier: symmem_sync::barrier::Epoch::default(),
            teams,
            all_mapped,
            routes,
            device_state,
            _peer_bases: peer_bases,
            device,
            #[cfg(feature = "cuda")]
            helpers: Default::default(),
            counters,
            finalized: false,
        };
        tracing::info!(
            pe = rank,
            n_pes = rt.n_pes(),
            node = %rt.topo.node(rank),
            host = %rt.config.hostname,
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
        rt.log_setup();
        Ok(rt)
    }

    /// Logs this PE's configuration (the `SYMMEM_*` variables set, and the effective
    /// values that decide how it runs) at info whatever `SYMMEM_DEBUG_SUBSYS` selects, and
    /// for each same-node peer how it is reached and why: over P2P at info, over a
    /// transport in its place at warn (the remote transport logs its other peers).
    fn log_setup(&self) {
        let me = self.my_pe();
        let c = &self.config;
        let set: Vec<String> = crate::config::VARIABLES
            .iter()
            .filter_map(|v| {
                std::env::var(v.name)
                    .ok()
                    .map(|val| format!("{}={val}", v.name))
            })
            .collect();
        let remote = match &self.transport {
            Some(t) => t.name(),
            None => "none (every PE is mapped)",
        };
        let subsys = if c.debug_subsys.is_empty() {
            "all".to_string()
        } else {
            c.debug_subsys.join(",")
        };
        tracing::info!(
            target: crate::logging::SUMMARY,
            "PE {me} configuration: set: {}; effective: {} PEs, node {}, device {}, heap {} bytes, bootstrap {}, P2P {}, remote transport {remote} (SYMMEM_REMOTE_TRANSPORT={}), ordering {}, timeout {}, proxy slots {}, log {} ({subsys})",
            if set.is_empty() { "none".to_string() } else { set.join(" ") },
            self.n_pes(),
            self.topo.node(me),
            self.device_description(),
            self.heap.len(),
            self.bootstrap.kind(),
            if c.disable_p2p { "off (SYMMEM_DISABLE_P2P=1)" } else { "on" },
            format!("{:?}", c.remote_transport).to_lowercase(),
            format!("{:?}", c.ordering).to_lowercase(),
            c.timeout.map_or("none".to_string(), |t| format!("{}s", t.as_secs_f64())),
            c.proxy_slots,
            c.debug,
        );
        for &pe in self.topo.local_pes().iter().filter(|&&p| p != me) {
            match self.routes[pe] {
                Route::Direct(_) => tracing::info!(
                    target: "init::transport",
                    "PE {me} reaches PE {pe} over p2p (same node: its heap is mapped here, host loads and stores)"
                ),
                #[cfg(feature = "cuda")]
                Route::Copy(_) => tracing::info!(
                    target: "init::transport",
                    "PE {me} reaches PE {pe} over p2p (same node: its GPU heap is mapped into this GPU's context, host copies and kernel loads and stores)"
                ),
                Route::Remote if c.ordering == MemoryOrdering::Weak => tracing::info!(
                    target: "init::transport",
                    "PE {me} reaches PE {pe} over {remote} (SYMMEM_ORDERING=weak: reordered, then delivered through the mapping)"
                ),
                Route::Remote => tracing::warn!(
                    target: "init::transport",
                    "PE {me} reaches same-node PE {pe} over {remote}, not P2P: {}",
                    if c.disable_p2p {
                        "SYMMEM_DISABLE_P2P=1"
                    } else {
                        "its heap is not mapped here (its GPU is not peer-accessible from this one)"
                    }
                ),
                Route::Unreachable => tracing::warn!(
                    target: "init::transport",
                    "PE {me} cannot reach same-node PE {pe}: its heap is not mapped here and no remote transport was started"
                ),
            }
        }
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

    /// The node identity of `pe`: `SYMMEM_NODE_ID`, or by default its kernel boot id and
    /// IPC, network and PID namespaces, preceded by the launcher's node where the launcher
    /// tells one. PEs with equal identities share memory.
    pub fn node_of(&self, pe: usize) -> Result<&str> {
        self.check_pe("node_of", pe)?;
        Ok(self.topo.node(pe))
    }

    /// The hostname of `pe`'s machine, for messages. Not a node identity: containers on
    /// different machines may share a hostname (compare [`Self::node_of`] instead).
    pub fn hostname_of(&self, pe: usize) -> Result<&str> {
        self.check_pe("hostname_of", pe)?;
        Ok(self.topo.host(pe))
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

    /// Whether this PE is a GPU PE (its heap is GPU memory; kernels run on its GPU).
    pub fn is_gpu(&self) -> bool {
        self.device.is_some()
    }

    /// A one-line description of this PE's device: `cpu`, or the GPU's ordinal, name
    /// and PCI bus id.
    pub fn device_description(&self) -> String {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            let g = &d.gpu;
            return format!(
                "GPU {} ({}, sm_{}{}, {})",
                g.ordinal, g.name, g.compute_capability.0, g.compute_capability.1, g.pci_bus_id
            );
        }
        "cpu".into()
    }

    /// This PE's operation counters since init: ops and bytes per path (direct, socket,
    /// ib, proxy) and the proxy ring's high-water mark (see [`Counters`] for what each
    /// counts; device operations through P2P pointers in kernels are not counted). Also
    /// printed at finalize when `SYMMEM_DEBUG` is `info` or more verbose.
    pub fn counters(&self) -> Counters {
        self.counters
            .snapshot(self.proxy.as_ref().map(|p| p.stats()))
    }

    /// Symmetric heap bytes currently free.
    pub fn heap_free(&self) -> usize {
        self.lock_allocs().allocator.free_bytes()
    }

    /// A direct pointer to `buf` in `pe`'s heap (`nvshmem_ptr`): `Some` when `pe`'s heap is
    /// mapped into this process (same node, P2P enabled, and on GPU PEs a GPU this one
    /// can access), `None` otherwise. On a CPU PE it is a host pointer; on a GPU PE a
    /// device pointer, for kernels (the host cannot dereference it). `ptr(&buf, my_pe)`
    /// is the symmetric address device operations take.
    ///
    /// Reading or writing through the pointer is up to the caller: other PEs may access
    /// the same memory concurrently.
    ///
    /// With `SYMMEM_ORDERING=weak` it is `None` for every peer, as for a peer on another
    /// node: stores through a pointer would bypass the reordering that mode exists for.
    pub fn ptr<T>(&self, buf: &SymBuf<T>, pe: usize) -> Result<Option<std::ptr::NonNull<T>>> {
        self.check_buf("ptr", buf)?;
        self.check_pe("ptr", pe)?;
        if pe != self.my_pe() && matches!(self.routes[pe], Route::Remote) {
            return Ok(None);
        }
        Ok(self
            .heap
            .base(pe)
            .and_then(|b| std::ptr::NonNull::new((b as usize + buf.offset) as *mut T)))
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
        self.record_failure_cause();
        if let Some(cb) = self.heap.control(self.my_pe()) {
            cb.finalizing.0.store(1, Ordering::Release);
        }
        // No kernel runs now: the proxy issues what is left in its ring, then stops.
        if let Some(p) = &self.proxy {
            p.shutdown();
        }
        // This PE's remote puts must land before peers leave; then peers may still read
        // or write this PE's heap until they, too, reach finalize.
        let quiet = self.transport.as_ref().map_or(Ok(()), |t| t.quiet());
        let barrier = self.bootstrap.barrier();
        if let Some(t) = &self.transport {
            t.shutdown();
        }
        crate::counters::log(self.my_pe(), &self.counters());
        quiet?;
        barrier?;
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
            self.record_failure_cause();
            if let Some(cb) = self.heap.control(self.my_pe()) {
                cb.finalizing.0.store(1, Ordering::Release);
            }
            self.bootstrap
                .abort(&format!("PE {} panicked", self.my_pe()));
            if let Some(p) = &self.proxy {
                p.shutdown();
            }
            if let Some(t) = &self.transport {
                t.shutdown();
            }
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
            .field("node", &self.topo.node(self.my_pe()))
            .field("host", &self.config.hostname)
            .field("bootstrap", &self.bootstrap.kind())
            .field("heap", &self.heap)
            .finish()
    }
}
