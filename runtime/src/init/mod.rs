//! Starting a PE: the public init functions, and [`Runtime::start`], which joins the job
//! in the steps of [`steps`] and then builds the state every operation reads (routes,
//! device state, the proxy). What init logs is in [`report`].

mod job_key;
mod report;
mod steps;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use symmem_bootstrap::{Bootstrap, UniqueId};
use symmem_device::{DeviceState, DEVICE_STATE_VERSION};

use crate::allocator::{AllocState, Allocator, MIN_ALIGN};
use crate::config::{Config, MemoryOrdering};
use crate::counters::Registry;
use crate::data_path::{self, DataPath};
use crate::error::Result;
use crate::heap::{self, SymmetricHeap, RESERVED};
use crate::host_copy::HostCopy;
use crate::liveness::{self, InitProgress, PeerWatch};
use crate::pe_device::{device_error_word, device_peer_table, device_resources, start_proxy};
use crate::runtime::Runtime;
use crate::team_state::TeamState;
use crate::topology::Topology;

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
/// Rank 0 calls this and passes the id's text form to the other ranks by any private
/// channel. The id is a secret (whoever holds it can join the job and reach every heap):
/// never put it on a command line, where every user of the host can read it.
pub fn unique_id() -> Result<UniqueId> {
    let config = Config::from_env()?;
    Ok(UniqueId::bind(config.socket_ifname.as_deref())?)
}

impl Runtime {
    /// A unique id for a second job of the same processes, made by PE 0 (as
    /// [`unique_id`]) and broadcast over this runtime's bootstrap, which is authenticated,
    /// so the secret stays within the job. Every PE then calls
    /// `init_with_unique_id(rt.my_pe(), rt.n_pes(), &id)`, from any thread, to start a
    /// runtime of its own beside this one (see the book's "Several runtimes in one
    /// process"). PE 0 gets the id it made, which holds the socket the new job's rendezvous
    /// is hosted on: it must keep it until its `init_with_unique_id` returns. Collective;
    /// when PE 0 cannot make the id, every PE fails, saying why.
    pub fn broadcast_unique_id(&self) -> Result<UniqueId> {
        const MADE: u8 = b'I';
        const FAILED: u8 = b'E';
        let me = self.my_pe();
        let made = (me == 0).then(unique_id);
        let payload = match &made {
            Some(Ok(id)) => [&[MADE][..], id.to_string().as_bytes()].concat(),
            Some(Err(e)) => [&[FAILED][..], e.to_string().as_bytes()].concat(),
            None => Vec::new(),
        };
        let got = self.bootstrap.broadcast(0, &payload)?;
        if let Some(made) = made {
            return made;
        }
        let bad = |detail: String| {
            crate::Error::from(symmem_bootstrap::BootstrapError::Protocol {
                peer: "PE 0".into(),
                detail: format!("broadcast_unique_id: {detail}"),
            })
        };
        match got.split_first() {
            Some((&MADE, text)) => std::str::from_utf8(text)
                .map_err(|_| bad("the id is not text".into()))?
                .parse()
                .map_err(|e| bad(format!("{e}"))),
            Some((&FAILED, why)) => Err(crate::Error::from(
                symmem_bootstrap::BootstrapError::Config(format!(
                    "broadcast_unique_id: PE 0 could not make a unique id: {}",
                    String::from_utf8_lossy(why)
                )),
            )),
            _ => Err(bad(format!("a {}-byte reply that is no id", got.len()))),
        }
    }
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
    init_with_config(Config::from_env()?, bootstrap)
}

/// Starts this PE on a bootstrap the caller built, with a configuration the caller
/// adjusted in code (a [`Config::from_env`] with, say, another `symmetric_size`: what
/// Python's `symmem.init(heap_size=...)` passes). Collective; every PE's heap size must
/// match.
pub fn init_with_config(config: Config, bootstrap: Box<dyn Bootstrap>) -> Result<Runtime> {
    crate::logging::init(&config);
    Runtime::start(config, bootstrap)
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
        wait_record: 0,
    }
}

impl Runtime {
    /// Starts this PE on `bootstrap`: joins the job ([`steps::join`]; a failure names
    /// its root cause, a dead peer or this PE, which then aborts the others), then builds
    /// the runtime over what the steps set up. Collective.
    pub(crate) fn start(config: Config, bootstrap: Box<dyn Bootstrap>) -> Result<Self> {
        let id = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
        let counters = Registry::new(id, crate::logging::info_or_more(&config));
        let mut progress = InitProgress::default();
        let joined = match steps::join(&config, &*bootstrap, &counters, &mut progress) {
            Ok(j) => j,
            Err(e) => return Err(liveness::fail_init(&*bootstrap, &progress, e)),
        };
        let rt = Self::assemble(id, config, bootstrap, counters, joined)?;
        rt.log_started();
        Ok(rt)
    }

    /// The runtime over a joined PE: how each peer is reached, the team area and the
    /// allocator behind the reserved part of the heap, the device state its kernels read
    /// and the proxy of device-initiated remote requests. A failure here aborts the job:
    /// the peers have passed the final barrier already.
    fn assemble(
        id: u64,
        config: Config,
        bootstrap: Box<dyn Bootstrap>,
        counters: Registry,
        joined: steps::Joined,
    ) -> Result<Self> {
        let steps::Joined {
            topo,
            heap,
            transport,
            remote_choice,
        } = joined;
        let rank = topo.my_pe();
        let watch = PeerWatch::new(
            topo.local_pes()
                .iter()
                .filter(|&&p| p != rank)
                .map(|&p| (p, topo.pid(p))),
        );
        // The team area follows the runtime's reserved part; allocations start after it.
        let team_bytes =
            TeamState::area_bytes(config.max_teams, topo.n_pes()).next_multiple_of(MIN_ALIGN);
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
        let (host_copy, basis) =
            HostCopy::new(config.vector_copy, config.nt_copy, config.sliced_copy);
        tracing::info!(target: "symmem_runtime::host_copy", "PE {rank}: {}; {}", host_copy.describe(), basis.describe());
        let device_and_proxy = (|| {
            let device = device_resources(&heap, &peer_bases)?;
            let proxy = transport
                .as_ref()
                .map(|t| start_proxy(rank, config.proxy_slots, &device, t.clone()))
                .transpose()?;
            Ok((device, proxy))
        })();
        let device_and_proxy = device_and_proxy.and_then(|dp| {
            Ok((
                dp,
                crate::hang::HangReport::start(&config, &*bootstrap, transport.as_ref())?,
            ))
        });
        let ((device, proxy), hang) = match device_and_proxy {
            Ok(v) => v,
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
        device_state.proxy = proxy.as_ref().map_or(0, |p| p.address());
        let device_waits = hang
            .as_ref()
            .map(|h| crate::device_waits::DeviceWaits::start(&h.board, &device, device_state))
            .transpose();
        let device_waits = match device_waits {
            Ok(d) => d,
            Err(e) => {
                bootstrap.abort(&format!("init failed: {e}"));
                return Err(e);
            }
        };
        device_state.wait_record = device_waits.as_ref().map_or(0, |d| d.device_address());
        #[cfg(feature = "cuda")]
        let gpu = device.as_ref().map(|d| d.gpu.clone());
        let path = DataPath::new(data_path::Parts {
            id,
            topo,
            transport,
            remote_choice,
            heap,
            weak,
            host_copy,
            counters,
            #[cfg(feature = "cuda")]
            sym_base: device_state.heap_base,
            #[cfg(feature = "cuda")]
            gpu,
        });
        Ok(Runtime {
            config,
            bootstrap,
            proxy,
            path,
            watch,
            allocs: Mutex::new(AllocState {
                allocator,
                calls: 0,
            }),
            barrier: symmem_sync::barrier::Epoch::default(),
            teams,
            all_mapped,
            device_state,
            _peer_bases: peer_bases,
            device,
            #[cfg(feature = "cuda")]
            helpers: Default::default(),
            finalized: false,
            hang,
            _device_waits: device_waits,
        })
    }
}
