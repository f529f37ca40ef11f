//! Configuration from `SYMMEM_*` environment variables, read once at init.
//!
//! One declarative table ([`VARIABLES`]) drives parsing, the `symmem-info` printout and
//! the list in the book (`docs/src/configuration.md`). A bad value is an error that names the variable; it never falls back
//! to a default silently. An unknown `SYMMEM_*` variable (a typo, usually) is warned about.

use std::time::Duration;

use symmem_bootstrap::duration;
use symmem_bootstrap::BootstrapChoice;

use symmem_transport::config::TransportConfig;
pub use symmem_transport::config::{HcaEntry, HcaFilter, RemoteTransport, MAX_IB_QPS_PER_PEER};

use crate::error::Error;

/// One documented environment variable.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// The default, as text.
    pub default: &'static str,
    /// What it does.
    pub doc: &'static str,
}

/// Every variable symmem reads.
pub const VARIABLES: &[Variable] = &[
    Variable { name: "SYMMEM_SYMMETRIC_SIZE", default: "1G", doc: "bytes of symmetric heap per PE; suffixes K, M, G, T (powers of 1024); sparse, so unused space costs nothing" },
    Variable { name: "SYMMEM_BOOTSTRAP", default: "auto", doc: "how PEs find each other: auto (in order: symrun, torchrun/PyTorch variables, MPI launcher with the mpi feature, PMI-1 server (PMI_FD or PMI_PORT: Hydra mpiexec, srun --mpi=pmi2), PMIx server (PMIX_RANK, PMIX_NAMESPACE or PMIX_SERVER_URI*: Open MPI mpirun, srun --mpi=pmix), Kubernetes Indexed Job, srun without PMI, else one PE; the choice and why is logged at info), tcp (symrun), mpi, pmi (PMI-1 client), pmix (PMIx client, libpmix loaded at run time), env (launcher variables, first found), env:torchrun, env:k8s, env:slurm (that source, also when another disagrees)" },
    Variable { name: "SYMMEM_PMIX_LIB", default: "libpmix.so.2, then libpmix.so", doc: "pmix bootstrap: the libpmix (PMIx v4 or later) to dlopen, a file name or a path" },
    Variable { name: "SYMMEM_ROOT_ADDR", default: "(from the launcher)", doc: "env bootstrap: host of rank 0's rendezvous; overrides MASTER_ADDR and Slurm's first step node; required for Kubernetes Indexed Jobs (the index-0 pod's DNS name)" },
    Variable { name: "SYMMEM_ROOT_PORT", default: "(from the launcher)", doc: "env bootstrap: port of rank 0's rendezvous; default MASTER_PORT+1000 under torchrun/PyTorchJob (MASTER_PORT is left to torchrun's store), 29650 for Kubernetes Indexed Jobs, the first of SLURM_STEP_RESV_PORTS or a port derived from the Slurm job and step ids" },
    Variable { name: "SYMMEM_JOB_SECRET", default: "(derived from the job identity)", doc: "env bootstrap: secret every rank presents to rank 0's rendezvous (e.g. from a Kubernetes Secret); without it the secret is derived from the launcher's job identity and anyone who can reach the port and guess it can join (a warning says so)" },
    Variable { name: "SYMMEM_WORLD_SIZE", default: "(unset)", doc: "env bootstrap: number of PEs of a Kubernetes Indexed Job (its completions), which Kubernetes does not export" },
    Variable { name: "SYMMEM_BOOTSTRAP_TIMEOUT", default: "60", doc: "seconds each bootstrap call (init, alloc, finalize) may wait for the other PEs; 1 year or more (e.g. inf) = no limit" },
    Variable { name: "SYMMEM_TIMEOUT", default: "0", doc: "seconds a wait (barrier, wait_until, quiet) may block before failing; 0, or 1 year or more (e.g. inf), = no limit (dead peers are still detected); device waits (in kernels) default to 60 s when it is not set" },
    Variable { name: "SYMMEM_DEBUG", default: "warn", doc: "log level: error, warn, info, debug, trace" },
    Variable { name: "SYMMEM_DEBUG_SUBSYS", default: "all", doc: "comma-separated subsystems to log (init, heap, bootstrap, rma, transport, proxy, coll), or all; the configuration and the counters lines show at info whatever the subsystems" },
    Variable { name: "SYMMEM_DISABLE_P2P", default: "0", doc: "1 = do not map same-node peers' heaps (every peer is reached through a transport)" },
    Variable { name: "SYMMEM_REMOTE_TRANSPORT", default: "auto", doc: "transport to other nodes: auto, socket, ib" },
    Variable { name: "SYMMEM_NODE_ID", default: "(boot id + IPC/net/PID namespaces)", doc: "node identity; PEs with equal ids share memory. By default the kernel boot id and the IPC, network and PID namespaces (the hostname only where /proc is unreadable; hostnames are shown in messages, never compared), together with the launcher's node where it tells (PMI_process_mapping, PMIX_HOSTNAME, SLURMD_NODENAME, torchrun's GROUP_RANK): PEs share a node only when both agree. Setting it overrides both and lets one machine act as several nodes" },
    Variable { name: "SYMMEM_PROXY_SLOTS", default: "1024", doc: "slots of each PE's proxy ring (device-initiated requests to remote PEs); a full ring makes kernels wait, never drops" },
    Variable { name: "SYMMEM_SIMULATE_NODES", default: "1", doc: "split the job's PEs into this many nodes of consecutive PEs (PE p is on node p * K / n_pes, suffixed to the node id), so one machine runs a multi-node job whose nodes share no memory and talk over the remote transport" },
    Variable { name: "SYMMEM_MAX_TEAMS", default: "32", doc: "teams that may exist at once on a PE, TEAM_WORLD and TEAM_NODE included (2 to 4096; the default is NVSHMEM's); each is a slot of symmetric heap reserved at init, of about 16 * n_pes * (4 + ceil(SYMMEM_MAX_TEAMS / 64)) bytes" },
    Variable { name: "SYMMEM_CHECK_COLLECTIVES", default: "0", doc: "1 = host team collectives verify their arguments across PEs and fail on every PE, naming the PEs and the differing argument, when they disagree (through the P2P mapping within a node; a put to every member and a quiet per call across nodes). Off by default: it doubles a small collective's latency. Set it on every PE alike" },
    Variable { name: "SYMMEM_HCA_LIST", default: "(all)", doc: "RDMA devices (ib transport), NCCL-style: comma-separated name prefixes with an optional :port (mlx5_0:1,mlx5_1); a leading = matches names exactly, a leading ^ excludes the listed devices" },
    Variable { name: "SYMMEM_IB_GID_INDEX", default: "(auto)", doc: "GID index for RoCE (ib transport); auto prefers a RoCE v2 GID of an IPv4 address" },
    Variable { name: "SYMMEM_IB_QPS_PER_PEER", default: "1", doc: "RC queue pairs per remote peer (ib transport), used round-robin per request; above 1, requests to one peer are ordered only by fence/quiet (fence waits like quiet) and a put_signal's signal after its own data" },
    Variable { name: "SYMMEM_ALLOW_HOST_STAGING", default: "0", doc: "1 = when the NIC cannot register a GPU heap (no dma-buf, no peermem), the whole job uses the socket transport, staged through host memory, with a warning on every PE, instead of failing (must be set on every PE that uses ib)" },
    Variable { name: "SYMMEM_SOCKET_IFNAME", default: "(auto)", doc: "network interface for sockets and unique-id rendezvous" },
    Variable { name: "SYMMEM_DEVICE", default: "auto", doc: "what a PE is: auto (a GPU PE when libcuda loads and a GPU is visible, else a CPU PE), cpu, cuda (an error if no GPU can be used)" },
    Variable { name: "SYMMEM_EXEC_SEED", default: "(unset)", doc: "CPU executor: order in which a block's kernel threads (fibers) run after each switch point (barrier, device wait); unset = thread index order, the same every run; a number = an order drawn from that seed, the same again with the same seed (within a PE); a failed launch names its schedule" },
    Variable { name: "SYMMEM_EXEC_STACK_SIZE", default: "256K", doc: "CPU executor: stack of each kernel thread (fiber); suffixes K, M (powers of 1024); at least 16K; an overflow fails the launch as a stack overflow naming the block and thread" },
    Variable { name: "SYMMEM_ORDERING", default: "strict", doc: "CPU PEs: strict (puts, p, AMOs and signals to a peer are visible in program order, as x86 makes them), or weak (a debugging mode: they are buffered and delivered later in a seeded random order that only fence, quiet, barrier and put_signal constrain, so a missing fence fails on CPU PEs as it would on a GPU; peers have no ptr() and device operations to them go through the proxy). An error on GPU PEs" },
    Variable { name: "SYMMEM_ORDERING_SEED", default: "(from the clock)", doc: "weak ordering: the seed of the delivery order and delays (the same on every PE; each PE derives its own stream). Logged at warn level when weak ordering starts, so a failing run can be replayed" },
    Variable { name: "SYMMEM_PTXAS", default: "(PATH, then the nvidia-cuda-nvcc-cu12 wheel)", doc: "build time (symmem-ptx-build): the ptxas that assembles the kernels' PTX to check it" },
    Variable { name: "SYMMEM_REQUIRE_PTX", default: "0", doc: "build time (symmem-ptx-build): 1 = a kernel crate whose PTX cannot be built fails the build, instead of embedding the reason (which load_module then reports on a GPU PE)" },
    Variable { name: "SYMMEM_STREAM_MEMOPS", default: "1", doc: "GPU PEs: 0 = stream-ordered signal writes and waits (put_signal_on_stream with Set, signal_wait_until_on_stream with Ge, Eq, Gt) use helper kernels instead of the driver's stream memory operations" },
    Variable { name: "SYMMEM_SASS_ARCH", default: "", doc: "build time (symmem-ptx-build): sm_XX = also assemble each kernel crate for that architecture with ptxas and embed the cubin, which a GPU of exactly that architecture loads without the driver's JIT (scripts/gpu-check.sh bundle sets sm_90)" },
    Variable { name: "SYMMEM_SKIP_PTX", default: "0", doc: "build time (symmem-ptx-build): 1 = skip the nested PTX builds of kernel crates (CPU PEs only; load_module on a GPU PE says why there is no PTX)" },
    Variable { name: "SYMMEM_TEST_EXIT_AT", default: "(unset)", doc: "testing only: this process kills itself (SIGKILL) when init reaches the named point (launcher_exchange, rendezvous_join, rendezvous, topology, heap_connect, heap_serve, heap_served_one, heap_receive, init_barrier), so fault tests place a PE's death at each init step" },
];

/// Default `SYMMEM_EXEC_STACK_SIZE`: kernels keep little on the stack (a GPU thread has a
/// few KiB), and 256 KiB leaves room for panic messages and debug builds.
pub const DEFAULT_EXEC_STACK: usize = 256 << 10;

/// How long a device wait may last when `SYMMEM_TIMEOUT` is not set: long enough for real
/// work, short enough that a kernel waiting for a silent peer fails with a name.
pub const DEFAULT_DEVICE_TIMEOUT: Duration = Duration::from_secs(60);

/// `SYMMEM_MAX_TEAMS` when unset: NVSHMEM's default (`NVSHMEM_MAX_TEAMS`), TEAM_WORLD and
/// TEAM_NODE included.
pub const DEFAULT_MAX_TEAMS: usize = 32;

/// The smallest `SYMMEM_MAX_TEAMS`: room for TEAM_WORLD and TEAM_NODE.
pub const MIN_MAX_TEAMS: usize = 2;

/// The largest `SYMMEM_MAX_TEAMS`.
pub const MAX_MAX_TEAMS: usize = 4096;
/// Smallest `SYMMEM_EXEC_STACK_SIZE`.
const MIN_EXEC_STACK: usize = 16 << 10;

/// Prefixes of variables set by launchers and test harnesses, not by users.
const INTERNAL_PREFIXES: &[&str] = &["SYMMEM_LAUNCH_", "SYMMEM_TEST_"];

/// What kind of PE to be (`SYMMEM_DEVICE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// A GPU PE when the CUDA driver loads and a GPU is visible, else a CPU PE.
    Auto,
    /// A CPU PE: host-memory heap, kernels on the CPU executor.
    Cpu,
    /// A GPU PE, or an error that says what is missing.
    Cuda,
}

/// When puts and signals to a peer become visible (`SYMMEM_ORDERING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryOrdering {
    /// In program order, as soon as issued (x86 CPU PEs, the default).
    Strict,
    /// Buffered and delivered in any order the memory model allows (a debugging mode).
    Weak,
}

/// Parsed configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `SYMMEM_SYMMETRIC_SIZE` in bytes.
    pub symmetric_size: usize,
    /// `SYMMEM_BOOTSTRAP`.
    pub bootstrap: BootstrapChoice,
    /// `SYMMEM_BOOTSTRAP_TIMEOUT`; [`duration::MAX_WAIT`] (one year) = no limit.
    pub bootstrap_timeout: Duration,
    /// `SYMMEM_TIMEOUT`; `None` = no limit (`0`, or one year or more).
    pub timeout: Option<Duration>,
    /// How long a device wait may last: `SYMMEM_TIMEOUT` when set, else
    /// [`DEFAULT_DEVICE_TIMEOUT`]; `None` = no limit.
    pub device_timeout: Option<Duration>,
    /// `SYMMEM_DEBUG`.
    pub debug: String,
    /// `SYMMEM_DEBUG_SUBSYS`; empty = all.
    pub debug_subsys: Vec<String>,
    /// `SYMMEM_DISABLE_P2P`.
    pub disable_p2p: bool,
    /// `SYMMEM_REMOTE_TRANSPORT`.
    pub remote_transport: RemoteTransport,
    /// `SYMMEM_NODE_ID`, or by default the kernel boot id and the IPC, network and PID
    /// namespaces (`boot=<boot id>,ipc=<inode>,net=<inode>,pid=<inode>`), or the hostname where
    /// `/proc` cannot tell (see `node_id_fallback`).
    pub node_id: String,
    /// `SYMMEM_SIMULATE_NODES`: the job's PEs form this many nodes (1 = by node id only).
    pub simulate_nodes: usize,
    /// `SYMMEM_PROXY_SLOTS`: slots of the proxy ring.
    pub proxy_slots: usize,
    /// This machine's hostname, for messages only (containers may share one).
    pub hostname: String,
    /// Why `node_id` is the hostname, when `/proc` could not tell the default identity
    /// (logged at warn by init).
    pub node_id_fallback: Option<String>,
    /// `SYMMEM_NODE_ID` is set: it alone is the node identity, the launcher's node view is
    /// not used.
    pub node_id_set: bool,
    /// `SYMMEM_MAX_TEAMS`: teams that may exist at once on a PE, the predefined included.
    pub max_teams: usize,
    /// `SYMMEM_CHECK_COLLECTIVES`: verify host collectives' arguments across PEs over the
    /// remote transport too.
    pub check_collectives: bool,
    /// `SYMMEM_HCA_LIST`; empty = all.
    pub hca_list: Vec<String>,
    /// `SYMMEM_HCA_LIST`, parsed.
    pub hca_filter: HcaFilter,
    /// `SYMMEM_IB_GID_INDEX`.
    pub ib_gid_index: Option<u32>,
    /// `SYMMEM_IB_QPS_PER_PEER` (1 to [`MAX_IB_QPS_PER_PEER`]).
    pub ib_qps_per_peer: usize,
    /// `SYMMEM_ALLOW_HOST_STAGING`.
    pub allow_host_staging: bool,
    /// `SYMMEM_SOCKET_IFNAME`.
    pub socket_ifname: Option<String>,
    /// `SYMMEM_DEVICE`.
    pub device: DeviceChoice,
    /// `SYMMEM_EXEC_SEED`: the CPU executor's lane schedule; `None` = thread index order.
    pub exec_seed: Option<u64>,
    /// `SYMMEM_EXEC_STACK_SIZE`: bytes of stack per kernel thread of the CPU executor.
    pub exec_stack_size: usize,
    /// `SYMMEM_ORDERING`.
    pub ordering: MemoryOrdering,
    /// `SYMMEM_ORDERING_SEED`; `None` = chosen from the clock at init.
    pub ordering_seed: Option<u64>,
    /// `SYMMEM_TEST_EXIT_AT` (testing only; acted on by `symmem_bootstrap::fault`).
    #[doc(hidden)]
    pub test_exit_at: Option<String>,
}

/// The subsystems `SYMMEM_DEBUG_SUBSYS` accepts; each is a set of `tracing` targets
/// (`logging.rs`), among them its own name.
pub const SUBSYSTEMS: &[&str] = &[
    "init",
    "heap",
    "bootstrap",
    "rma",
    "transport",
    "proxy",
    "coll",
];

impl Config {
    /// The transports' part of this configuration.
    pub(crate) fn transport(&self) -> TransportConfig {
        TransportConfig {
            remote_transport: self.remote_transport,
            weak_ordering: self.ordering == MemoryOrdering::Weak,
            ordering_seed: self.ordering_seed,
            timeout: self.timeout,
            socket_ifname: self.socket_ifname.clone(),
            hca_list: self.hca_list.clone(),
            hca_filter: self.hca_filter.clone(),
            ib_gid_index: self.ib_gid_index,
            ib_qps_per_peer: self.ib_qps_per_peer,
            allow_host_staging: self.allow_host_staging,
        }
    }
}

impl Config {
    /// Reads and validates every variable from the process environment.
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads every variable through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let symmetric_size = match get("SYMMEM_SYMMETRIC_SIZE") {
            Some(v) => parse_size("SYMMEM_SYMMETRIC_SIZE", &v)?,
            None => 1 << 30,
        };
        let bootstrap = match get("SYMMEM_BOOTSTRAP") {
            Some(v) => v.parse().map_err(|why| bad("SYMMEM_BOOTSTRAP", &v, why))?,
            None => BootstrapChoice::Auto,
        };
        let bootstrap_timeout = match get("SYMMEM_BOOTSTRAP_TIMEOUT") {
            Some(v) => {
                let d = parse_seconds("SYMMEM_BOOTSTRAP_TIMEOUT", &v)?;
                if d.is_zero() {
                    return Err(bad(
                        "SYMMEM_BOOTSTRAP_TIMEOUT",
                        &v,
                        "must be greater than 0",
                    ));
                }
                d
            }
            None => Duration::from_secs(60),
        };
        let (timeout, device_timeout) = match get("SYMMEM_TIMEOUT") {
            Some(v) => {
                let t = Some(parse_seconds("SYMMEM_TIMEOUT", &v)?)
                    .filter(|d| !d.is_zero() && !duration::is_unlimited(*d));
                (t, t)
            }
            None => (None, Some(DEFAULT_DEVICE_TIMEOUT)),
        };
        let debug = match get("SYMMEM_DEBUG") {
            Some(v) => {
                let lower = v.to_ascii_lowercase();
                if !["error", "warn", "info", "debug", "trace"].contains(&lower.as_str()) {
                    return Err(bad(
                        "SYMMEM_DEBUG",
                        &v,
                        "expected error, warn, info, debug or trace",
                    ));
                }
                lower
            }
            None => "warn".into(),
        };
        let debug_subsys = match get("SYMMEM_DEBUG_SUBSYS") {
            Some(v) if v.eq_ignore_ascii_case("all") => Vec::new(),
            Some(v) => {
                let list = split_list(&v);
                if let Some(unknown) = list.iter().find(|s| !SUBSYSTEMS.contains(&s.as_str())) {
                    return Err(bad(
                        "SYMMEM_DEBUG_SUBSYS",
                        &v,
                        format!(
                            "unknown subsystem {unknown:?}; known: {}",
                            SUBSYSTEMS.join(", ")
                        ),
                    ));
                }
                list
            }
            None => Vec::new(),
        };
        let disable_p2p = match get("SYMMEM_DISABLE_P2P") {
            Some(v) => parse_bool("SYMMEM_DISABLE_P2P", &v)?,
            None => false,
        };
        let remote_transport = match get("SYMMEM_REMOTE_TRANSPORT").as_deref() {
            None | Some("auto") => RemoteTransport::Auto,
            Some("socket") => RemoteTransport::Socket,
            Some("ib") => RemoteTransport::Ib,
            Some(v) => {
                return Err(bad(
                    "SYMMEM_REMOTE_TRANSPORT",
                    v,
                    "expected auto, socket or ib",
                ))
            }
        };
        let hostname = hostname()?;
        let node_id_set = get("SYMMEM_NODE_ID").is_some();
        let (node_id, node_id_fallback) = match get("SYMMEM_NODE_ID") {
            Some(v) => (v, None),
            None => match crate::topology::default_node_id() {
                Ok(id) => (id, None),
                Err(why) => (hostname.clone(), Some(why)),
            },
        };
        let simulate_nodes = match get("SYMMEM_SIMULATE_NODES") {
            Some(v) => match v.parse::<usize>() {
                Ok(k) if k >= 1 => k,
                _ => {
                    return Err(bad(
                        "SYMMEM_SIMULATE_NODES",
                        &v,
                        "expected a number of nodes, at least 1",
                    ))
                }
            },
            None => 1,
        };
        let check_collectives = match get("SYMMEM_CHECK_COLLECTIVES") {
            Some(v) => parse_bool("SYMMEM_CHECK_COLLECTIVES", &v)?,
            None => false,
        };
        let max_teams = match get("SYMMEM_MAX_TEAMS") {
            Some(v) => match v.parse::<usize>() {
                Ok(t) if (MIN_MAX_TEAMS..=MAX_MAX_TEAMS).contains(&t) => t,
                _ => {
                    return Err(bad(
                        "SYMMEM_MAX_TEAMS",
                        &v,
                        format!(
                            "expected a number of teams from {} (TEAM_WORLD and TEAM_NODE) to {}",
                            MIN_MAX_TEAMS, MAX_MAX_TEAMS
                        ),
                    ))
                }
            },
            None => DEFAULT_MAX_TEAMS,
        };
        let proxy_slots = match get("SYMMEM_PROXY_SLOTS") {
            Some(v) => match v.parse::<usize>() {
                Ok(k) if (1..=1 << 20).contains(&k) => k,
                _ => {
                    return Err(bad(
                        "SYMMEM_PROXY_SLOTS",
                        &v,
                        "expected a number of ring slots from 1 to 1048576",
                    ))
                }
            },
            None => 1024,
        };
        let hca_list = get("SYMMEM_HCA_LIST")
            .map(|v| split_list(&v))
            .unwrap_or_default();
        let hca_filter = match get("SYMMEM_HCA_LIST") {
            Some(v) => HcaFilter::parse(&v).map_err(|why| bad("SYMMEM_HCA_LIST", &v, why))?,
            None => HcaFilter::default(),
        };
        let ib_qps_per_peer = match get("SYMMEM_IB_QPS_PER_PEER") {
            Some(v) => match v.parse::<usize>() {
                Ok(q) if (1..=MAX_IB_QPS_PER_PEER).contains(&q) => q,
                _ => {
                    return Err(bad(
                        "SYMMEM_IB_QPS_PER_PEER",
                        &v,
                        format!("expected a number of queue pairs from 1 to {MAX_IB_QPS_PER_PEER}"),
                    ))
                }
            },
            None => 1,
        };
        let allow_host_staging = match get("SYMMEM_ALLOW_HOST_STAGING") {
            Some(v) => parse_bool("SYMMEM_ALLOW_HOST_STAGING", &v)?,
            None => false,
        };
        let ib_gid_index =
            match get("SYMMEM_IB_GID_INDEX") {
                Some(v) => Some(v.parse::<u32>().map_err(|_| {
                    bad("SYMMEM_IB_GID_INDEX", &v, "expected a non-negative integer")
                })?),
                None => None,
            };
        let device = match get("SYMMEM_DEVICE")
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            None | Some("auto") => DeviceChoice::Auto,
            Some("cpu") => DeviceChoice::Cpu,
            Some("cuda") | Some("gpu") => DeviceChoice::Cuda,
            Some(v) => return Err(bad("SYMMEM_DEVICE", v, "expected auto, cpu or cuda")),
        };
        let exec_seed = match get("SYMMEM_EXEC_SEED") {
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                bad(
                    "SYMMEM_EXEC_SEED",
                    &v,
                    "expected a non-negative integer seed",
                )
            })?),
            None => None,
        };
        let ordering = match get("SYMMEM_ORDERING")
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            None | Some("strict") => MemoryOrdering::Strict,
            Some("weak") => MemoryOrdering::Weak,
            Some(v) => return Err(bad("SYMMEM_ORDERING", v, "expected strict or weak")),
        };
        let ordering_seed = match get("SYMMEM_ORDERING_SEED") {
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                bad(
                    "SYMMEM_ORDERING_SEED",
                    &v,
                    "expected a non-negative integer",
                )
            })?),
            None => None,
        };
        let exec_stack_size = match get("SYMMEM_EXEC_STACK_SIZE") {
            Some(v) => match parse_size("SYMMEM_EXEC_STACK_SIZE", &v)? {
                n if n >= MIN_EXEC_STACK => n,
                _ => return Err(bad("SYMMEM_EXEC_STACK_SIZE", &v, "must be at least 16K")),
            },
            None => DEFAULT_EXEC_STACK,
        };
        // Testing only: read where it acts (symmem_bootstrap::fault), checked here so that
        // a misspelt point is an error rather than a test that silently kills nobody.
        let test_exit_at = get(symmem_bootstrap::fault::EXIT_AT_VAR);
        if let Some(v) = &test_exit_at {
            symmem_bootstrap::fault::check_exit_point(v)
                .map_err(|why| bad("SYMMEM_TEST_EXIT_AT", v, why))?;
        }
        Ok(Config {
            device,
            symmetric_size,
            bootstrap,
            bootstrap_timeout,
            timeout,
            device_timeout,
            debug,
            debug_subsys,
            disable_p2p,
            remote_transport,
            node_id,
            simulate_nodes,
            max_teams,
            check_collectives,
            proxy_slots,
            hostname,
            node_id_fallback,
            node_id_set,
            hca_list,
            hca_filter,
            ib_gid_index,
            ib_qps_per_peer,
            allow_host_staging,
            socket_ifname: get("SYMMEM_SOCKET_IFNAME"),
            exec_seed,
            exec_stack_size,
            ordering,
            ordering_seed,
            test_exit_at,
        })
    }

    /// Names of `SYMMEM_*` variables in the environment that symmem does not know.
    pub fn unknown_variables() -> Vec<String> {
        std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| k.starts_with("SYMMEM_"))
            .filter(|k| !INTERNAL_PREFIXES.iter().any(|p| k.starts_with(p)))
            .filter(|k| !VARIABLES.iter().any(|v| v.name == k))
            .collect()
    }

    /// Where the node identity comes from (see `topology`'s docs), for the info log and
    /// `symmem-info`; `launcher` is the launcher's node view, as its bootstrap describes it.
    pub fn node_identity_source(&self, launcher: Option<&str>) -> String {
        if self.node_id_set {
            return format!(
                "SYMMEM_NODE_ID={} (the launcher's node and the machine identity are not used)",
                self.node_id
            );
        }
        let machine = match &self.node_id_fallback {
            None => "the kernel boot id and IPC, network and PID namespaces",
            Some(_) => "the hostname (/proc cannot tell the boot id and namespaces)",
        };
        match launcher {
            Some(l) => format!(
                "the launcher's node, {l}, and {machine}: PEs share a node only when both agree"
            ),
            None => format!("{machine} (the launcher tells no node)"),
        }
    }

    /// The effective value of every variable, one `NAME=value` per entry.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let opt = |d: Option<Duration>| {
            d.map_or("0 (no limit)".to_string(), |d| {
                format!("{}", d.as_secs_f64())
            })
        };
        let list = |l: &[String]| {
            if l.is_empty() {
                "(all)".to_string()
            } else {
                l.join(",")
            }
        };
        vec![
            ("SYMMEM_SYMMETRIC_SIZE", self.symmetric_size.to_string()),
            ("SYMMEM_BOOTSTRAP", self.bootstrap.to_string()),
            (
                "SYMMEM_BOOTSTRAP_TIMEOUT",
                if duration::is_unlimited(self.bootstrap_timeout) {
                    "inf (no limit)".to_string()
                } else {
                    self.bootstrap_timeout.as_secs_f64().to_string()
                },
            ),
            ("SYMMEM_TIMEOUT", opt(self.timeout)),
            ("SYMMEM_DEBUG", self.debug.clone()),
            ("SYMMEM_DEBUG_SUBSYS", list(&self.debug_subsys)),
            ("SYMMEM_DISABLE_P2P", (self.disable_p2p as u8).to_string()),
            (
                "SYMMEM_REMOTE_TRANSPORT",
                format!("{:?}", self.remote_transport).to_lowercase(),
            ),
            ("SYMMEM_NODE_ID", self.node_id.clone()),
            ("SYMMEM_SIMULATE_NODES", self.simulate_nodes.to_string()),
            ("SYMMEM_MAX_TEAMS", self.max_teams.to_string()),
            (
                "SYMMEM_CHECK_COLLECTIVES",
                (self.check_collectives as u8).to_string(),
            ),
            ("SYMMEM_PROXY_SLOTS", self.proxy_slots.to_string()),
            ("SYMMEM_HCA_LIST", list(&self.hca_list)),
            (
                "SYMMEM_IB_GID_INDEX",
                self.ib_gid_index.map_or("(auto)".into(), |g| g.to_string()),
            ),
            ("SYMMEM_IB_QPS_PER_PEER", self.ib_qps_per_peer.to_string()),
            (
                "SYMMEM_ALLOW_HOST_STAGING",
                (self.allow_host_staging as u8).to_string(),
            ),
            (
                "SYMMEM_SOCKET_IFNAME",
                self.socket_ifname
                    .clone()
                    .unwrap_or_else(|| "(auto)".into()),
            ),
            ("SYMMEM_DEVICE", format!("{:?}", self.device).to_lowercase()),
            (
                "SYMMEM_EXEC_SEED",
                self.exec_seed
                    .map_or("(unset: thread index order)".into(), |s| s.to_string()),
            ),
            ("SYMMEM_EXEC_STACK_SIZE", self.exec_stack_size.to_string()),
            (
                "SYMMEM_ORDERING",
                format!("{:?}", self.ordering).to_lowercase(),
            ),
            (
                "SYMMEM_ORDERING_SEED",
                self.ordering_seed
                    .map_or("(from the clock)".into(), |s| s.to_string()),
            ),
            (
                "SYMMEM_TEST_EXIT_AT",
                self.test_exit_at
                    .clone()
                    .unwrap_or_else(|| "(unset)".into()),
            ),
        ]
    }
}

fn bad(var: &'static str, value: &str, why: impl Into<String>) -> Error {
    Error::Config {
        var,
        value: value.to_string(),
        reason: why.into(),
    }
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Parses `1024`, `64K`, `512M`, `1G`, `1T` (powers of 1024; an optional trailing `B`/`iB`).
fn parse_size(var: &'static str, v: &str) -> Result<usize, Error> {
    let upper = v.to_ascii_uppercase();
    let trimmed = upper.trim_end_matches("IB").trim_end_matches('B');
    let (digits, shift) = match trimmed.chars().last() {
        Some('K') => (&trimmed[..trimmed.len() - 1], 10),
        Some('M') => (&trimmed[..trimmed.len() - 1], 20),
        Some('G') => (&trimmed[..trimmed.len() - 1], 30),
        Some('T') => (&trimmed[..trimmed.len() - 1], 40),
        _ => (trimmed, 0),
    };
    let n: usize = digits
        .trim()
        .parse()
        .map_err(|_| bad(var, v, "expected a size such as 1073741824, 512M or 1G"))?;
    let bytes = n
        .checked_mul(1usize << shift)
        .ok_or_else(|| bad(var, v, "size overflows"))?;
    if bytes == 0 {
        return Err(bad(var, v, "must be greater than 0"));
    }
    Ok(bytes)
}

/// Parses seconds by the one rule for durations from outside ([`symmem_bootstrap::duration`]):
/// one year or more (`inf` included) is [`duration::MAX_WAIT`], meaning no limit.
fn parse_seconds(var: &'static str, v: &str) -> Result<Duration, Error> {
    symmem_bootstrap::duration::parse_seconds(v).map_err(|why| bad(var, v, why))
}

fn parse_bool(var: &'static str, v: &str) -> Result<bool, Error> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad(var, v, "expected 0/1, true/false, yes/no or on/off")),
    }
}

fn hostname() -> Result<String, Error> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(Error::io(
            "reading the hostname (shown in messages; the node identity where /proc is unreadable)",
            std::io::Error::last_os_error(),
        ));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, Error> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn weak_ordering_parses_and_bad_values_name_the_variable() {
        let c = cfg(&[]).unwrap();
        assert_eq!(
            (c.ordering, c.ordering_seed),
            (MemoryOrdering::Strict, None)
        );
        let c = cfg(&[("SYMMEM_ORDERING", "Weak"), ("SYMMEM_ORDERING_SEED", "7")]).unwrap();
        assert_eq!(
            (c.ordering, c.ordering_seed),
            (MemoryOrdering::Weak, Some(7))
        );
        let e = cfg(&[("SYMMEM_ORDERING", "relaxed")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("SYMMEM_ORDERING") && e.contains("relaxed"),
            "{e}"
        );
        let e = cfg(&[("SYMMEM_ORDERING_SEED", "-1")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("SYMMEM_ORDERING_SEED"), "{e}");
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.symmetric_size, 1 << 30);
        assert_eq!(c.bootstrap_timeout, Duration::from_secs(60));
        assert_eq!(c.timeout, None);
        assert!(!c.disable_p2p);
        assert_eq!(c.exec_seed, None);
        assert_eq!(c.exec_stack_size, 256 << 10);
        let c = cfg(&[("SYMMEM_EXEC_SEED", "42"), ("SYMMEM_EXEC_STACK_SIZE", "1M")]).unwrap();
        assert_eq!((c.exec_seed, c.exec_stack_size), (Some(42), 1 << 20));
    }

    #[test]
    fn sizes_and_durations() {
        let c = cfg(&[
            ("SYMMEM_SYMMETRIC_SIZE", "64M"),
            ("SYMMEM_BOOTSTRAP_TIMEOUT", "2.5"),
            ("SYMMEM_TIMEOUT", "10"),
            ("SYMMEM_DISABLE_P2P", "yes"),
            ("SYMMEM_NODE_ID", "nodeA"),
        ])
        .unwrap();
        assert_eq!(c.symmetric_size, 64 << 20);
        assert_eq!(c.bootstrap_timeout, Duration::from_millis(2500));
        assert_eq!(c.timeout, Some(Duration::from_secs(10)));
        assert!(c.disable_p2p);
        assert_eq!(c.node_id, "nodeA");
        assert_eq!(
            cfg(&[("SYMMEM_SYMMETRIC_SIZE", "4KiB")])
                .unwrap()
                .symmetric_size,
            4096
        );
    }

    #[test]
    fn node_id_defaults_to_the_proc_identity_and_can_be_overridden() {
        let c = cfg(&[]).unwrap();
        match crate::topology::default_node_id() {
            Ok(id) => assert_eq!((&c.node_id, &c.node_id_fallback), (&id, &None)),
            Err(why) => {
                assert_eq!(c.node_id, c.hostname);
                assert_eq!(c.node_id_fallback, Some(why));
            }
        }
        assert!(!c.hostname.is_empty());
        assert!(!c.node_id_set);
        assert!(c
            .node_identity_source(Some("n07 (Slurm SLURMD_NODENAME)"))
            .contains("n07 (Slurm SLURMD_NODENAME)"));
        assert!(c
            .node_identity_source(None)
            .contains("the launcher tells no node"));
        let c = cfg(&[("SYMMEM_NODE_ID", "rack3")]).unwrap();
        assert_eq!(c.node_id, "rack3");
        assert!(c.node_id_set);
        let source = c.node_identity_source(Some("n07 (Slurm SLURMD_NODENAME)"));
        assert!(
            source.contains("SYMMEM_NODE_ID=rack3") && !source.contains("n07"),
            "{source}"
        );
    }

    #[test]
    fn huge_durations_mean_no_limit() {
        for v in ["1e19", "1e20", "inf", "31536000"] {
            let c = cfg(&[("SYMMEM_TIMEOUT", v), ("SYMMEM_BOOTSTRAP_TIMEOUT", v)])
                .unwrap_or_else(|e| panic!("{v}: {e}"));
            assert_eq!(c.timeout, None, "SYMMEM_TIMEOUT={v}");
            assert_eq!(c.bootstrap_timeout, duration::MAX_WAIT, "{v}");
            // What init does with it: no overflow, no panic.
            let _ = duration::deadline_after(c.bootstrap_timeout);
            let described = c.describe();
            let shown = &described
                .iter()
                .find(|(k, _)| *k == "SYMMEM_BOOTSTRAP_TIMEOUT")
                .unwrap()
                .1;
            assert!(shown.contains("no limit"), "{shown}");
        }
    }

    #[test]
    fn bad_durations_name_the_variable_and_value() {
        for var in ["SYMMEM_TIMEOUT", "SYMMEM_BOOTSTRAP_TIMEOUT"] {
            for val in ["nan", "-1", "-inf", "abc"] {
                let err = cfg(&[(var, val)]).unwrap_err().to_string();
                assert!(err.contains(var) && err.contains(val), "{var}={val}: {err}");
            }
        }
        let err = cfg(&[("SYMMEM_BOOTSTRAP_TIMEOUT", "0")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("greater than 0"), "{err}");
    }

    #[test]
    fn describe_names_each_table_variable_at_most_once() {
        let c = cfg(&[]).unwrap();
        let described = c.describe();
        for (i, (name, _)) in described.iter().enumerate() {
            assert!(
                VARIABLES.iter().any(|v| v.name == *name),
                "describe() shows {name}, which VARIABLES does not list"
            );
            assert!(
                described[..i].iter().all(|(n, _)| n != name),
                "describe() shows {name} twice"
            );
        }
    }

    #[test]
    fn every_test_exit_point_is_documented() {
        let var = VARIABLES
            .iter()
            .find(|v| v.name == symmem_bootstrap::fault::EXIT_AT_VAR)
            .expect("SYMMEM_TEST_EXIT_AT is in the table");
        for (point, _) in symmem_bootstrap::fault::EXIT_POINTS {
            assert!(var.doc.contains(point), "{point} is missing from the doc");
        }
        let c = cfg(&[("SYMMEM_TEST_EXIT_AT", "heap_serve")]).unwrap();
        assert_eq!(c.test_exit_at.as_deref(), Some("heap_serve"));
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (var, val) in [
            ("SYMMEM_SYMMETRIC_SIZE", "lots"),
            ("SYMMEM_SYMMETRIC_SIZE", "0"),
            ("SYMMEM_BOOTSTRAP", "carrier-pigeon"),
            ("SYMMEM_BOOTSTRAP_TIMEOUT", "-1"),
            ("SYMMEM_TIMEOUT", "soon"),
            ("SYMMEM_DEBUG", "loud"),
            ("SYMMEM_DEBUG_SUBSYS", "init,gpu-magic"),
            ("SYMMEM_DISABLE_P2P", "maybe"),
            ("SYMMEM_REMOTE_TRANSPORT", "pigeon"),
            ("SYMMEM_IB_GID_INDEX", "-3"),
            ("SYMMEM_IB_QPS_PER_PEER", "0"),
            ("SYMMEM_IB_QPS_PER_PEER", "65"),
            ("SYMMEM_IB_QPS_PER_PEER", "two"),
            ("SYMMEM_ALLOW_HOST_STAGING", "please"),
            ("SYMMEM_HCA_LIST", "mlx5_0:0"),
            ("SYMMEM_HCA_LIST", "mlx5_0:x"),
            ("SYMMEM_HCA_LIST", "mlx5 0"),
            ("SYMMEM_HCA_LIST", "^"),
            ("SYMMEM_TEST_EXIT_AT", "halfway"),
            ("SYMMEM_MAX_TEAMS", "1"),
            ("SYMMEM_MAX_TEAMS", "4097"),
            ("SYMMEM_MAX_TEAMS", "many"),
            ("SYMMEM_EXEC_SEED", "-1"),
            ("SYMMEM_EXEC_SEED", "lucky"),
            ("SYMMEM_EXEC_STACK_SIZE", "8K"),
            ("SYMMEM_EXEC_STACK_SIZE", "big"),
        ] {
            let err = cfg(&[(var, val)]).unwrap_err().to_string();
            assert!(err.contains(var) && err.contains(val), "{var}={val}: {err}");
        }
    }

    #[test]
    fn max_teams_defaults_like_nvshmem() {
        assert_eq!(cfg(&[]).unwrap().max_teams, DEFAULT_MAX_TEAMS);
        assert_eq!(cfg(&[("SYMMEM_MAX_TEAMS", "2")]).unwrap().max_teams, 2);
        assert_eq!(
            cfg(&[("SYMMEM_MAX_TEAMS", "4096")]).unwrap().max_teams,
            4096
        );
    }

    #[test]
    fn ib_variables_parse_with_defaults() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.ib_qps_per_peer, 1);
        assert!(!c.allow_host_staging);
        assert_eq!(c.hca_filter, HcaFilter::default());
        let c = cfg(&[
            ("SYMMEM_IB_QPS_PER_PEER", "4"),
            ("SYMMEM_ALLOW_HOST_STAGING", "1"),
            ("SYMMEM_HCA_LIST", "mlx5_0:1,mlx5_1"),
        ])
        .unwrap();
        assert_eq!(c.ib_qps_per_peer, 4);
        assert!(c.allow_host_staging);
        assert_eq!(
            c.hca_filter.entries,
            vec![
                HcaEntry {
                    name: "mlx5_0".into(),
                    port: Some(1)
                },
                HcaEntry {
                    name: "mlx5_1".into(),
                    port: None
                },
            ]
        );
    }
}
