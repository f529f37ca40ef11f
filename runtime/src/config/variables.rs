//! Every variable symmem reads, each declared once: its name, its default, what it does,
//! when it is read, and for those the runtime's [`Config`] holds, how a value is parsed
//! and how the effective value is shown. Reading ([`super::read`]), the configuration
//! `init` logs and `symmem-info` prints ([`Config::describe`]) and the check of the book's
//! list (`tests/symmem_info.rs`) all come from these declarations.

use std::path::PathBuf;
use std::time::Duration;

use symmem_bootstrap::{duration, BootstrapChoice};
use symmem_transport::config::{OfiAssumeOrder, OfiProgress};

use super::read::{choice, number, parse_bool, parse_size, parse_u64, split_list, NOT_AN_INTEGER};
use super::{
    Config, CopyBound, DeviceChoice, HcaFilter, MemoryOrdering, RemoteTransport, DEVICE_CHOICES,
    LOG_LEVELS, MAX_IB_QPS_PER_PEER, MAX_MAX_TEAMS, MIN_EXEC_STACK, MIN_MAX_TEAMS, MIN_NT_COPY,
    MIN_SLICED_COPY_FROM, MIN_VECTOR_COPY_BELOW, OFI_ASSUME_ORDER_CHOICES, OFI_PROGRESS_CHOICES,
    ORDERINGS, SUBSYSTEMS,
};

/// One documented environment variable.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// The default, as text; in parentheses (`(auto)`, `(unset)`) it says what happens
    /// without a value, and such a variable reads as none when it is not set.
    pub default: &'static str,
    /// What it does.
    pub doc: &'static str,
    /// When it is read: at run time, while building kernel crates, or only by tests.
    pub category: Category,
    /// Its effective value in a [`Config`], for those a `Config` holds.
    shown: Option<fn(&Config) -> String>,
}

impl Variable {
    /// A variable read by a running program.
    const fn runtime(name: &'static str, default: &'static str, doc: &'static str) -> Self {
        Self::new(name, default, doc, Category::Runtime)
    }

    /// A variable read while building a kernel crate.
    const fn build_time(name: &'static str, default: &'static str, doc: &'static str) -> Self {
        Self::new(name, default, doc, Category::BuildTime)
    }

    /// A variable read only by tests.
    const fn testing(name: &'static str, default: &'static str, doc: &'static str) -> Self {
        Self::new(name, default, doc, Category::Testing)
    }

    const fn new(
        name: &'static str,
        default: &'static str,
        doc: &'static str,
        category: Category,
    ) -> Self {
        Variable {
            name,
            default,
            doc,
            category,
            shown: None,
        }
    }

    /// This variable, its effective value in a [`Config`] shown by `show`.
    const fn shown(self, show: fn(&Config) -> String) -> Self {
        Variable {
            shown: Some(show),
            ..self
        }
    }

    /// The default when it is a value (not a description in parentheses, not empty).
    pub fn default_value(&self) -> Option<&'static str> {
        (!self.default.is_empty() && !self.default.starts_with('(')).then_some(self.default)
    }

    /// Its effective value in `config`, as `symmem-info` and init's log show it; `None`
    /// for a variable a [`Config`] does not hold (read by the bootstrap, at build time).
    pub fn value_in(&self, config: &Config) -> Option<String> {
        self.shown.map(|show| show(config))
    }
}

/// A variable that the runtime's [`Config`] reads, with the parser of its values (whose
/// error says what is wrong; the reader names the variable and the value).
#[derive(Debug, Clone, Copy)]
pub struct Var<T> {
    /// The variable: name, default, doc, category.
    pub about: Variable,
    /// Parses a value (set, or the default).
    pub(super) parse: fn(&str) -> Result<T, String>,
}

impl<T> Var<T> {
    /// The variable's name.
    pub const fn name(&self) -> &'static str {
        self.about.name
    }
}

/// When a [`Variable`] is read; `symmem-info` lists each category apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Read by a running program (init, the transports, the executor).
    Runtime,
    /// Read while building a kernel crate (symmem-ptx-build), not by a running program.
    BuildTime,
    /// Read only to make tests place faults; never set in production.
    Testing,
}

impl Category {
    /// Its name in `symmem-info`'s output: `runtime`, `build-time` or `testing`.
    pub fn name(self) -> &'static str {
        match self {
            Category::Runtime => "runtime",
            Category::BuildTime => "build-time",
            Category::Testing => "testing",
        }
    }
}

/// The declaration of `SYMMEM_SYMMETRIC_SIZE`, read into [`Config`].
pub const SYMMETRIC_SIZE: Var<usize> = Var {
    about: Variable::runtime(
        "SYMMEM_SYMMETRIC_SIZE",
        "1G",
        "bytes of symmetric heap per PE; suffixes K, M, G, T (powers of 1024); sparse, so unused space costs nothing",
    )
    .shown(|c| c.symmetric_size.to_string()),
    parse: parse_size,
};

/// The declaration of `SYMMEM_BOOTSTRAP`, read into [`Config`].
pub const BOOTSTRAP: Var<BootstrapChoice> = Var {
    about: Variable::runtime(
        symmem_bootstrap::vars::BOOTSTRAP,
        "auto",
        "how PEs find each other: auto (in order: symrun, torchrun/PyTorch variables, MPI launcher with the mpi feature, PMI-1 server (PMI_FD or PMI_PORT: Hydra mpiexec, srun --mpi=pmi2), PMIx server (PMIX_RANK, PMIX_NAMESPACE or PMIX_SERVER_URI*: Open MPI mpirun, srun --mpi=pmix), Kubernetes Indexed Job, srun without PMI, else one PE; the choice and why is logged at info), tcp (symrun), mpi, pmi (PMI-1 client), pmix (PMIx client, libpmix loaded at run time), env (launcher variables, first found), env:torchrun, env:k8s, env:slurm (that source, also when another disagrees)",
    )
    .shown(|c| c.bootstrap.to_string()),
    parse: |v| v.parse(),
};

/// The declaration of `SYMMEM_PMIX_LIB` (read outside [`Config`]).
pub const PMIX_LIB: Variable = Variable::runtime(
    symmem_bootstrap::pmix::ENV_PMIX_LIB,
    "libpmix.so.2, then libpmix.so",
    "pmix bootstrap: the libpmix (PMIx v4 or later) to dlopen, a file name or a path",
);

/// The declaration of `SYMMEM_ROOT_ADDR` (read outside [`Config`]).
pub const ROOT_ADDR: Variable = Variable::runtime(
    symmem_bootstrap::env::ENV_ROOT_ADDR,
    "(from the launcher)",
    "env bootstrap: host of rank 0's rendezvous; overrides MASTER_ADDR and Slurm's first step node; required for Kubernetes Indexed Jobs (the index-0 pod's DNS name)",
);

/// The declaration of `SYMMEM_ROOT_PORT` (read outside [`Config`]).
pub const ROOT_PORT: Variable = Variable::runtime(
    symmem_bootstrap::env::ENV_ROOT_PORT,
    "(from the launcher)",
    "env bootstrap: port of rank 0's rendezvous; default MASTER_PORT+1000 under torchrun/PyTorchJob (MASTER_PORT is left to torchrun's store), 29650 for Kubernetes Indexed Jobs, the first of SLURM_STEP_RESV_PORTS or a port derived from the Slurm job and step ids",
);

/// The declaration of `SYMMEM_JOB_SECRET` (read outside [`Config`]).
pub const JOB_SECRET: Variable = Variable::runtime(
    symmem_bootstrap::env::ENV_JOB_SECRET,
    "(derived from the job identity)",
    "env bootstrap: secret from which the rendezvous key is derived (e.g. from a Kubernetes Secret; 32 random bytes as hex); without it the key is derived from the launcher's job identity and anyone who can reach the port and guess it can join (a warning says so), and a job on more than one node is refused unless SYMMEM_ALLOW_PUBLIC_JOB_KEY=1",
);

/// The declaration of `SYMMEM_ALLOW_PUBLIC_JOB_KEY`, read into [`Config`].
pub const ALLOW_PUBLIC_JOB_KEY: Var<bool> = Var {
    about: Variable::runtime(
        symmem_bootstrap::env::ENV_ALLOW_PUBLIC_JOB_KEY,
        "0",
        "env bootstrap: 1 = let a job whose PEs are on more than one node run without SYMMEM_JOB_SECRET, its key derived from the launcher's public job identity (Slurm job id, torchrun's address and port); anyone who can reach rank 0's port and guess that identity can then join the job and read and write every PE's heap, so use it only on a network nobody else reaches; without it such a job fails at init on every PE",
    )
    .shown(|c| u8::from(c.allow_public_job_key).to_string()),
    parse: parse_bool,
};

/// The declaration of `SYMMEM_WORLD_SIZE` (read outside [`Config`]).
pub const WORLD_SIZE: Variable = Variable::runtime(
    symmem_bootstrap::env::ENV_WORLD_SIZE,
    "(unset)",
    "env bootstrap: number of PEs of a Kubernetes Indexed Job (its completions), which Kubernetes does not export",
);

/// The declaration of `SYMMEM_BOOTSTRAP_TIMEOUT`, read into [`Config`].
pub const BOOTSTRAP_TIMEOUT: Var<Duration> = Var {
    about: Variable::runtime(
        "SYMMEM_BOOTSTRAP_TIMEOUT",
        "60",
        "seconds each bootstrap call (init, alloc, free, finalize) may wait for the other PEs; alloc, free and finalize first wait for every PE to arrive, as long as all are alive (only SYMMEM_TIMEOUT bounds that), so a late PE is not a failure; 1 year or more (e.g. inf) = no limit",
    )
    .shown(|c| show_bootstrap_timeout(c.bootstrap_timeout)),
    parse: parse_bootstrap_timeout,
};

/// The declaration of `SYMMEM_TIMEOUT`, read into [`Config`].
pub const TIMEOUT: Var<Option<Duration>> = Var {
    about: Variable::runtime(
        "SYMMEM_TIMEOUT",
        "0",
        "seconds a wait (barrier, wait_until, quiet, alloc/free/finalize waiting for a late PE) may block before failing; 0, or 1 year or more (e.g. inf), = no limit (dead peers are still detected); device waits (in kernels) default to 60 s when it is not set",
    )
    .shown(|c| show_limit(c.timeout, "no limit")),
    parse: parse_limit,
};

/// The declaration of `SYMMEM_HANG_REPORT`, read into [`Config`].
pub const HANG_REPORT: Var<Option<Duration>> = Var {
    about: Variable::runtime(
        "SYMMEM_HANG_REPORT",
        "60",
        "seconds a host wait (or a transport's wait inside a call) may block before its PE gathers every PE's wait record over a side channel (a small authenticated TCP listener per PE, one thread) and logs one hang report (target hang, error level) naming the root: a PE not answering (dead or stopped), a PE in user code, mismatched collectives, a signal wait no PE will write; a wait that reaches SYMMEM_TIMEOUT first reports then; 0 = off (no listener, no thread). Left at its default, a side channel that cannot start is warned about and the job runs without it; one-PE jobs have none",
    )
    .shown(|c| show_limit(c.hang_report, "off")),
    parse: parse_limit,
};

/// The declaration of `SYMMEM_HANG_REPORT_FILE`, read into [`Config`].
pub const HANG_REPORT_FILE: Var<PathBuf> = Var {
    about: Variable::runtime(
        symmem_bootstrap::report_file::VAR,
        "(unset)",
        "with SYMMEM_HANG_REPORT: also append each hang report, as one JSON line, to this file (unset: the JSON line is logged beside the report)",
    )
    .shown(|c| show_or(c.hang_report_file.as_ref().map(|p| p.display()), "(unset)")),
    parse: |v| Ok(v.into()),
};

/// The declaration of `SYMMEM_DEAD_PEER_TIMEOUT`, read into [`Config`].
pub const DEAD_PEER_TIMEOUT: Var<Option<Duration>> = Var {
    about: Variable::runtime(
        symmem_bootstrap::DEAD_PEER_TIMEOUT_VAR,
        "30",
        "seconds a TCP peer (the rendezvous, the socket transport) may stay silent before its connection fails with an error naming it: a host that lost power or a cut link ends every wait on it within this time plus about a twentieth of it (at least 1 s), never a silent hang (kernel keepalive probes and TCP_USER_TIMEOUT; a live peer's kernel answers the probes, so a long computation is never mistaken for death); also bounds each write of the rendezvous to a rank that stops reading; at least 1; 0, or 1 year or more (e.g. inf), = off",
    )
    .shown(|c| show_limit(c.dead_peer_timeout, "off")),
    parse: symmem_bootstrap::net::parse_dead_peer_timeout,
};

/// The declaration of `SYMMEM_DEBUG`, read into [`Config`].
pub const DEBUG: Var<String> = Var {
    about: Variable::runtime(
        "SYMMEM_DEBUG",
        "warn",
        "log level: error, warn, info, debug, trace",
    )
    .shown(|c| c.debug.clone()),
    parse: |v| choice(v, LOG_LEVELS).map(str::to_string),
};

/// The declaration of `SYMMEM_DEBUG_SUBSYS`, read into [`Config`].
pub const DEBUG_SUBSYS: Var<Vec<String>> = Var {
    about: Variable::runtime(
        "SYMMEM_DEBUG_SUBSYS",
        "all",
        "comma-separated subsystems to log (init, heap, bootstrap, rma, transport, proxy, coll), or all; the configuration and the counters lines show at info whatever the subsystems",
    )
    .shown(|c| show_subsystems(&c.debug_subsys)),
    parse: parse_subsystems,
};

/// The declaration of `SYMMEM_DISABLE_P2P`, read into [`Config`].
pub const DISABLE_P2P: Var<bool> = Var {
    about: Variable::runtime(
        "SYMMEM_DISABLE_P2P",
        "0",
        "1 = do not map same-node peers' heaps (every peer is reached through a transport)",
    )
    .shown(|c| u8::from(c.disable_p2p).to_string()),
    parse: parse_bool,
};

/// The declaration of `SYMMEM_REMOTE_TRANSPORT`, read into [`Config`].
pub const REMOTE_TRANSPORT: Var<RemoteTransport> = Var {
    about: Variable::runtime(
        symmem_transport::config::var::REMOTE_TRANSPORT,
        "auto",
        "transport to other nodes: auto (ib with an RDMA device, else ofi with a libfabric fabric provider such as efa or cxi in builds with the ofi feature, else socket), socket, ib, ofi (libfabric; builds with the ofi feature)",
    )
    .shown(|c| c.remote_transport.to_string()),
    parse: |v| choice(v, &symmem_transport::remote_transport_choices()),
};

/// The declaration of `SYMMEM_NODE_ID`, read into [`Config`].
pub const NODE_ID: Var<String> = Var {
    about: Variable::runtime(
        "SYMMEM_NODE_ID",
        "(boot id + IPC/net/PID namespaces)",
        "node identity; PEs with equal ids share memory. By default the kernel boot id and the IPC, network and PID namespaces (the hostname only where /proc is unreadable; hostnames are shown in messages, never compared), together with the launcher's node where it tells (PMI_process_mapping, PMIX_HOSTNAME, SLURMD_NODENAME, torchrun's GROUP_RANK): PEs share a node only when both agree. Setting it overrides both and lets one machine act as several nodes",
    )
    .shown(|c| c.node_id.clone()),
    parse: |v| Ok(v.to_string()),
};

/// The declaration of `SYMMEM_PROXY_SLOTS`, read into [`Config`].
pub const PROXY_SLOTS: Var<usize> = Var {
    about: Variable::runtime(
        "SYMMEM_PROXY_SLOTS",
        "1024",
        "slots of each PE's proxy ring (device-initiated requests to remote PEs); a full ring makes kernels wait, never drops",
    )
    .shown(|c| c.proxy_slots.to_string()),
    parse: |v| number(v, 1..=1 << 20, "ring slots"),
};

/// The declaration of `SYMMEM_SIMULATE_NODES`, read into [`Config`].
pub const SIMULATE_NODES: Var<usize> = Var {
    about: Variable::runtime(
        "SYMMEM_SIMULATE_NODES",
        "1",
        "split the job's PEs into this many nodes of consecutive PEs (PE p is on node p * K / n_pes, suffixed to the node id), so one machine runs a multi-node job whose nodes share no memory and talk over the remote transport",
    )
    .shown(|c| c.simulate_nodes.to_string()),
    parse: parse_simulate_nodes,
};

/// The declaration of `SYMMEM_MAX_TEAMS`, read into [`Config`].
pub const MAX_TEAMS: Var<usize> = Var {
    about: Variable::runtime(
        "SYMMEM_MAX_TEAMS",
        "32",
        "teams that may exist at once on a PE, TEAM_WORLD and TEAM_NODE included (2 to 4096; the default is NVSHMEM's); each is a slot of symmetric heap reserved at init, of about 16 * n_pes * (4 + ceil(SYMMEM_MAX_TEAMS / 64)) bytes",
    )
    .shown(|c| c.max_teams.to_string()),
    parse: |v| number(v, MIN_MAX_TEAMS..=MAX_MAX_TEAMS, "teams (TEAM_WORLD and TEAM_NODE included)"),
};

/// The declaration of `SYMMEM_CHECK_COLLECTIVES`, read into [`Config`].
pub const CHECK_COLLECTIVES: Var<bool> = Var {
    about: Variable::runtime(
        "SYMMEM_CHECK_COLLECTIVES",
        "0",
        "1 = host team collectives verify their arguments across PEs and fail on every PE, naming the PEs and the differing argument, when they disagree (through the P2P mapping within a node; a put to every member and a quiet per call across nodes). Off by default: it doubles a small collective's latency. Set it on every PE alike",
    )
    .shown(|c| u8::from(c.check_collectives).to_string()),
    parse: parse_bool,
};

/// The declaration of `SYMMEM_HCA_LIST`, read into [`Config`].
pub const HCA_LIST: Var<HcaFilter> = Var {
    about: Variable::runtime(
        "SYMMEM_HCA_LIST",
        "(all)",
        "RDMA devices (ib transport), NCCL-style: comma-separated name prefixes with an optional :port (mlx5_0:1,mlx5_1); a leading = matches names exactly, a leading ^ excludes the listed devices",
    )
    .shown(|c| c.hca_filter.to_string()),
    parse: HcaFilter::parse,
};

/// The declaration of `SYMMEM_IB_GID_INDEX`, read into [`Config`].
pub const IB_GID_INDEX: Var<u32> = Var {
    about: Variable::runtime(
        symmem_transport::config::var::IB_GID_INDEX,
        "(auto)",
        "GID index for RoCE (ib transport); auto prefers a RoCE v2 GID of an IPv4 address",
    )
    .shown(|c| show_or(c.ib_gid_index, "(auto)")),
    parse: |v| v.parse().map_err(|_| NOT_AN_INTEGER.to_string()),
};

/// The declaration of `SYMMEM_IB_QPS_PER_PEER`, read into [`Config`].
pub const IB_QPS_PER_PEER: Var<usize> = Var {
    about: Variable::runtime(
        "SYMMEM_IB_QPS_PER_PEER",
        "1",
        "RC queue pairs per remote peer (ib transport), used round-robin per request; above 1, requests to one peer are ordered only by fence/quiet (fence waits like quiet) and a put_signal's signal after its own data",
    )
    .shown(|c| c.ib_qps_per_peer.to_string()),
    parse: |v| number(v, 1..=MAX_IB_QPS_PER_PEER, "queue pairs"),
};

/// The declaration of `SYMMEM_ALLOW_HOST_STAGING`, read into [`Config`].
pub const ALLOW_HOST_STAGING: Var<bool> = Var {
    about: Variable::runtime(
        "SYMMEM_ALLOW_HOST_STAGING",
        "0",
        "1 = when the NIC cannot register a GPU heap (no dma-buf, no peermem), the whole job uses the socket transport, staged through host memory, with a warning on every PE, instead of failing (must be set on every PE that uses ib)",
    )
    .shown(|c| u8::from(c.allow_host_staging).to_string()),
    parse: parse_bool,
};

/// The declaration of `SYMMEM_OFI_PROVIDER`, read into [`Config`].
pub const OFI_PROVIDER: Var<String> = Var {
    about: Variable::runtime(
        symmem_transport::config::var::OFI_PROVIDER,
        "(auto)",
        "ofi transport: the libfabric provider (tcp;ofi_rxm, shm, verbs;ofi_rxm, efa, cxi, …); unset = the first fabric provider with RDM endpoints, RMA and atomics (not tcp, udp, sockets or shm), else the first of any kind; one that is missing is an error naming what fi_getinfo offers",
    )
    .shown(|c| show_or(c.ofi_provider.as_ref(), "(auto)")),
    parse: |v| Ok(v.to_string()),
};

/// The declaration of `SYMMEM_OFI_PROGRESS`, read into [`Config`].
pub const OFI_PROGRESS: Var<OfiProgress> = Var {
    about: Variable::runtime(
        symmem_transport::config::var::OFI_PROGRESS,
        "auto",
        "ofi transport: how its progress thread waits for work. block: on the completion queue's wait object, which the provider then signals for every completion (over tcp;ofi_rxm here 2-3 µs per get or atomic); poll: never blocks, yielding its CPU between polls, with no signals; manual: no progress thread (peers' operations on this PE complete only while its threads call in: waits, tests, fences, quiets); auto: poll where each PE's progress thread can have a CPU of its own (a spare CPU per PE on the machine, else two of the process's CPUs per PE), else block",
    )
    .shown(|c| c.ofi_progress.to_string()),
    parse: |v| choice(v, OFI_PROGRESS_CHOICES),
};

/// The declaration of `SYMMEM_OFI_DOMAIN`, read into [`Config`].
pub const OFI_DOMAIN: Var<String> = Var {
    about: Variable::runtime(
        symmem_transport::config::var::OFI_DOMAIN,
        "(auto)",
        "ofi transport: the libfabric domain (NIC, as fi_info names it: mlx5_0, cxi0, rdmap16s27-rdm, eth0, …) this PE opens; unset = the one nearest the PE (its GPU's NUMA node, else its CPUs'), PEs of a machine spread over the nearest ones by local rank, libfabric's first where sysfs says nothing; one the provider does not offer is an error naming those it offers",
    )
    .shown(|c| show_or(c.ofi_domain.as_ref(), "(auto)")),
    parse: |v| Ok(v.to_string()),
};

/// The declaration of `SYMMEM_OFI_ASSUME_ORDER`, read into [`Config`].
pub const OFI_ASSUME_ORDER: Var<OfiAssumeOrder> = Var {
    about: Variable::runtime(
        "SYMMEM_OFI_ASSUME_ORDER",
        "provider",
        "ofi transport: the order it relies on between operations to a peer. provider: what the provider promises (its FI_ORDER_* bits, FI_FENCE where offered); weakest: efa's, whatever the provider promises (only sends stay behind sends; FI_FENCE only where the provider really offers it): every RMA or atomic that must follow an earlier one to the same peer waits for it, and signals go as messages; for running efa's protocol on tcp;ofi_rxm or shm",
    )
    .shown(|c| c.ofi_assume_order.to_string()),
    parse: |v| choice(v, OFI_ASSUME_ORDER_CHOICES),
};

/// The declaration of `SYMMEM_SOCKET_IFNAME`, read into [`Config`].
pub const SOCKET_IFNAME: Var<String> = Var {
    about: Variable::runtime(
        symmem_bootstrap::vars::SOCKET_IFNAME,
        "(auto)",
        "network interface for sockets and unique-id rendezvous",
    )
    .shown(|c| show_or(c.socket_ifname.as_ref(), "(auto)")),
    parse: |v| Ok(v.to_string()),
};

/// The declaration of `SYMMEM_SOCKET_FAULTS`, read into [`Config`].
pub const SOCKET_FAULTS: Var<u64> = Var {
    about: Variable::runtime(
        "SYMMEM_SOCKET_FAULTS",
        "(unset)",
        "testing: a seed; the socket transport cuts its writes and reads short at points drawn from it and sleeps up to 200 µs before some, so that races needing a slow network or many cores show up on a laptop (the protocol must deliver the same bytes anyway); each PE and connection draws its own stream. Costs throughput: never in production",
    )
    .shown(|c| show_or(c.socket_faults, "(unset: none)")),
    parse: parse_u64,
};

/// The declaration of `SYMMEM_DEVICE`, read into [`Config`].
pub const DEVICE: Var<DeviceChoice> = Var {
    about: Variable::runtime(
        "SYMMEM_DEVICE",
        "auto",
        "what a PE is: auto (a GPU PE when libcuda loads and a GPU is visible, else a CPU PE), cpu, cuda (an error if no GPU can be used)",
    )
    .shown(|c| format!("{:?}", c.device).to_lowercase()),
    parse: |v| choice(v, DEVICE_CHOICES),
};

/// The declaration of `SYMMEM_EXEC_SEED`, read into [`Config`].
pub const EXEC_SEED: Var<u64> = Var {
    about: Variable::runtime(
        "SYMMEM_EXEC_SEED",
        "(unset)",
        "CPU executor: order in which a block's kernel threads (fibers) run after each switch point (barrier, device wait); unset = thread index order, the same every run; a number = an order drawn from that seed, the same again with the same seed (within a PE); a failed launch names its schedule",
    )
    .shown(|c| show_or(c.exec_seed, "(unset: thread index order)")),
    parse: parse_u64,
};

/// The declaration of `SYMMEM_NT_COPY_THRESHOLD`, read into [`Config`].
pub const NT_COPY_THRESHOLD: Var<CopyBound> = Var {
    about: Variable::runtime(
        "SYMMEM_NT_COPY_THRESHOLD",
        "auto",
        "bytes from which host puts and gets on mapped heaps copy with non-temporal stores, which bypass the caches (x86-64); suffixes K, M, G; at least 4K; auto = where they measured faster than memcpy on this machine (measured once per boot in optimized builds, about 0.1 s, kept in the user's symmem-<uid> directory; symmem-info --calibrate measures again), else 3/8 of the last-level cache; off = memcpy at every size",
    )
    .shown(|c| c.nt_copy.to_string()),
    parse: |v| CopyBound::parse(v, MIN_NT_COPY),
};

/// The declaration of `SYMMEM_SLICED_COPY_FROM`, read into [`Config`].
pub const SLICED_COPY_FROM: Var<CopyBound> = Var {
    about: Variable::runtime(
        "SYMMEM_SLICED_COPY_FROM",
        "auto",
        "bytes from which host puts and gets on mapped heaps copy with memcpy in 256 KiB slices, up to SYMMEM_NT_COPY_THRESHOLD (where glibc's memcpy of a size above a core's L2 reads every destination line before writing it, and of a smaller one does not); suffixes K, M, G; at least 512K; auto = the sizes where the slices measured no slower than one memcpy on this machine (as SYMMEM_NT_COPY_THRESHOLD's auto; none where nothing is measured); off = never",
    )
    .shown(|c| c.sliced_copy.to_string()),
    parse: |v| CopyBound::parse(v, MIN_SLICED_COPY_FROM),
};

/// The declaration of `SYMMEM_VECTOR_COPY_BELOW`, read into [`Config`].
pub const VECTOR_COPY_BELOW: Var<CopyBound> = Var {
    about: Variable::runtime(
        "SYMMEM_VECTOR_COPY_BELOW",
        "auto",
        "bytes below which host puts and gets on mapped heaps of at least 2K copy with the runtime's own 32-byte vector loop instead of memcpy (x86-64 with AVX2), which stays fast where source and destination are misaligned against each other; suffixes K, M, G; at least 4K; auto = up to the first size where it measured no faster than memcpy on this machine (as SYMMEM_NT_COPY_THRESHOLD's auto), else the size of a core's L2 cache (1M where sysfs does not say); off = memcpy",
    )
    .shown(|c| c.vector_copy.to_string()),
    parse: |v| CopyBound::parse(v, MIN_VECTOR_COPY_BELOW),
};

/// The declaration of `SYMMEM_EXEC_STACK_SIZE`, read into [`Config`].
pub const EXEC_STACK_SIZE: Var<usize> = Var {
    about: Variable::runtime(
        "SYMMEM_EXEC_STACK_SIZE",
        "256K",
        "CPU executor: stack of each kernel thread (fiber); suffixes K, M (powers of 1024); at least 16K; an overflow fails the launch as a stack overflow naming the block and thread",
    )
    .shown(|c| c.exec_stack_size.to_string()),
    parse: parse_exec_stack,
};

/// The declaration of `SYMMEM_ORDERING`, read into [`Config`].
pub const ORDERING: Var<MemoryOrdering> = Var {
    about: Variable::runtime(
        symmem_transport::config::var::ORDERING,
        "strict",
        "CPU PEs: strict (puts, p, AMOs and signals to a peer are visible in program order, as x86 makes them), or weak (a debugging mode: they are buffered and delivered later in a seeded random order that only fence, quiet, barrier and put_signal constrain, so a missing fence fails on CPU PEs as it would on a GPU; peers have no ptr() and device operations to them go through the proxy). An error on GPU PEs",
    )
    .shown(|c| format!("{:?}", c.ordering).to_lowercase()),
    parse: |v| choice(v, ORDERINGS),
};

/// The declaration of `SYMMEM_ORDERING_SEED`, read into [`Config`].
pub const ORDERING_SEED: Var<u64> = Var {
    about: Variable::runtime(
        symmem_transport::config::var::ORDERING_SEED,
        "(from the clock)",
        "weak ordering: the seed of the delivery order and delays (the same on every PE; each PE derives its own stream). Logged at warn level when weak ordering starts, so a failing run can be replayed",
    )
    .shown(|c| show_or(c.ordering_seed, "(from the clock)")),
    parse: parse_u64,
};

/// The declaration of `SYMMEM_PTXAS` (read outside [`Config`]).
pub const PTXAS: Variable = Variable::build_time(
    "SYMMEM_PTXAS",
    "(PATH, then the nvidia-cuda-nvcc-cu12 wheel)",
    "build time (symmem-ptx-build): the ptxas that assembles the kernels' PTX to check it",
);

/// The declaration of `SYMMEM_REQUIRE_PTX` (read outside [`Config`]).
pub const REQUIRE_PTX: Variable = Variable::build_time(
    "SYMMEM_REQUIRE_PTX",
    "0",
    "build time (symmem-ptx-build): 1 = a kernel crate whose PTX or cubin cannot be built fails the build, even without symmem's cuda feature and with SYMMEM_SKIP_PTX=1 (without either, the reason is embedded and load_module reports it on a GPU PE)",
);

/// The declaration of `SYMMEM_STREAM_MEMOPS` (read outside [`Config`]).
pub const STREAM_MEMOPS: Variable = Variable::runtime(
    "SYMMEM_STREAM_MEMOPS",
    "1",
    "GPU PEs: 0 = stream-ordered signal writes and waits (put_signal_on_stream with Set, signal_wait_until_on_stream with Ge, Eq, Gt) use helper kernels instead of the driver's stream memory operations",
);

/// The declaration of `SYMMEM_SASS_ARCH` (read outside [`Config`]).
pub const SASS_ARCH: Variable = Variable::build_time(
    "SYMMEM_SASS_ARCH",
    "(none)",
    "build time (symmem-ptx-build): sm_XX = also assemble each kernel crate for that architecture with ptxas and embed the cubin, which a GPU of exactly that architecture loads without the driver's JIT (scripts/gpu-check.sh bundle sets sm_90)",
);

/// The declaration of `SYMMEM_PTX_CHECK_ARCHS` (read outside [`Config`]).
pub const PTX_CHECK_ARCHS: Variable = Variable::build_time(
    "SYMMEM_PTX_CHECK_ARCHS",
    "(none)",
    "build time (symmem-ptx-build): comma-separated sm_XX = also assemble each kernel crate's PTX for those architectures into the build's cubin cache, beside the embedded cubin, to check that it assembles there; the PTX test (tests/device/tests/ptx.rs) reads the same cache (the test command sets sm_80)",
);

/// The declaration of `SYMMEM_SKIP_PTX` (read outside [`Config`]).
pub const SKIP_PTX: Variable = Variable::build_time(
    "SYMMEM_SKIP_PTX",
    "0",
    "build time (symmem-ptx-build): 1 = skip the nested PTX builds of kernel crates on purpose (CPU PEs only; load_module on a GPU PE says why there is no PTX); without it, a PTX build that fails while symmem's cuda feature is on fails the build, naming the missing rustup components",
);

/// The declaration of `SYMMEM_TEST_EXIT_AT`, read into [`Config`].
pub const TEST_EXIT_AT: Var<String> = Var {
    about: Variable::testing(
        symmem_bootstrap::fault::EXIT_AT_VAR,
        "(unset)",
        "testing only: this process kills itself (SIGKILL) when init reaches the named point (launcher_exchange, rendezvous_join, rendezvous, topology, heap_connect, heap_serve, heap_served_one, heap_receive, init_barrier), so fault tests place a PE's death at each init step",
    )
    .shown(|c| show_or(c.test_exit_at.as_ref(), "(unset)")),
    parse: |v| symmem_bootstrap::fault::check_exit_point(v).map(|()| v.to_string()),
};

/// Every variable symmem reads, in the order `symmem-info` and the book list them.
pub const VARIABLES: &[Variable] = &[
    SYMMETRIC_SIZE.about,
    BOOTSTRAP.about,
    PMIX_LIB,
    ROOT_ADDR,
    ROOT_PORT,
    JOB_SECRET,
    ALLOW_PUBLIC_JOB_KEY.about,
    WORLD_SIZE,
    BOOTSTRAP_TIMEOUT.about,
    TIMEOUT.about,
    HANG_REPORT.about,
    HANG_REPORT_FILE.about,
    DEAD_PEER_TIMEOUT.about,
    DEBUG.about,
    DEBUG_SUBSYS.about,
    DISABLE_P2P.about,
    REMOTE_TRANSPORT.about,
    NODE_ID.about,
    PROXY_SLOTS.about,
    SIMULATE_NODES.about,
    MAX_TEAMS.about,
    CHECK_COLLECTIVES.about,
    HCA_LIST.about,
    IB_GID_INDEX.about,
    IB_QPS_PER_PEER.about,
    ALLOW_HOST_STAGING.about,
    OFI_PROVIDER.about,
    OFI_PROGRESS.about,
    OFI_DOMAIN.about,
    OFI_ASSUME_ORDER.about,
    SOCKET_IFNAME.about,
    SOCKET_FAULTS.about,
    DEVICE.about,
    EXEC_SEED.about,
    NT_COPY_THRESHOLD.about,
    VECTOR_COPY_BELOW.about,
    SLICED_COPY_FROM.about,
    EXEC_STACK_SIZE.about,
    ORDERING.about,
    ORDERING_SEED.about,
    PTXAS,
    REQUIRE_PTX,
    STREAM_MEMOPS,
    SASS_ARCH,
    PTX_CHECK_ARCHS,
    SKIP_PTX,
    TEST_EXIT_AT.about,
];

/// `SYMMEM_BOOTSTRAP_TIMEOUT`: seconds, more than 0.
fn parse_bootstrap_timeout(v: &str) -> Result<Duration, String> {
    duration::parse_seconds(v).and_then(|d| match d.is_zero() {
        true => Err("must be greater than 0".into()),
        false => Ok(d),
    })
}

/// A limit in seconds where 0, or one year or more, is none.
fn parse_limit(v: &str) -> Result<Option<Duration>, String> {
    duration::parse_seconds(v)
        .map(|d| Some(d).filter(|d| !d.is_zero() && !duration::is_unlimited(*d)))
}

/// `SYMMEM_SIMULATE_NODES`: at least 1.
fn parse_simulate_nodes(v: &str) -> Result<usize, String> {
    v.parse::<usize>()
        .ok()
        .filter(|&k| k >= 1)
        .ok_or_else(|| "expected a number of nodes, at least 1".to_string())
}

/// `SYMMEM_EXEC_STACK_SIZE`: a size of at least [`MIN_EXEC_STACK`].
fn parse_exec_stack(v: &str) -> Result<usize, String> {
    parse_size(v).and_then(|n| match n >= MIN_EXEC_STACK {
        true => Ok(n),
        false => Err("must be at least 16K".into()),
    })
}

/// `SYMMEM_DEBUG_SUBSYS`: `all` (empty: every subsystem), or a list of known ones.
fn parse_subsystems(v: &str) -> Result<Vec<String>, String> {
    if v.eq_ignore_ascii_case("all") {
        return Ok(Vec::new());
    }
    let list = split_list(v);
    match list.iter().find(|s| !SUBSYSTEMS.contains(&s.as_str())) {
        Some(unknown) => Err(format!(
            "unknown subsystem {unknown:?}; known: {}",
            SUBSYSTEMS.join(", ")
        )),
        None => Ok(list),
    }
}

/// `SYMMEM_BOOTSTRAP_TIMEOUT`'s effective value.
fn show_bootstrap_timeout(d: Duration) -> String {
    if duration::is_unlimited(d) {
        "inf (no limit)".to_string()
    } else {
        d.as_secs_f64().to_string()
    }
}

/// A limit in seconds, or `0 (none)` with `none` saying what no limit means.
fn show_limit(d: Option<Duration>, none: &str) -> String {
    d.map_or_else(|| format!("0 ({none})"), |d| d.as_secs_f64().to_string())
}

/// A value, or `unset` (which says what happens without one).
fn show_or(v: Option<impl std::fmt::Display>, unset: &str) -> String {
    v.map_or_else(|| unset.to_string(), |v| v.to_string())
}

/// `SYMMEM_DEBUG_SUBSYS`'s effective value: the list, or `(all)`.
fn show_subsystems(list: &[String]) -> String {
    if list.is_empty() {
        "(all)".to_string()
    } else {
        list.join(",")
    }
}
