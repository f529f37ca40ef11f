//! Every variable symmem reads, with its default and what it does: the one table that
//! parsing ([`super::read`]), `symmem-info` and the book's list come from.

/// One documented environment variable.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// The default, as text.
    pub default: &'static str,
    /// What it does.
    pub doc: &'static str,
    /// When it is read: at run time, while building kernel crates, or only by tests.
    pub category: Category,
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

/// Every variable symmem reads.
pub const VARIABLES: &[Variable] = &[
    Variable { name: "SYMMEM_SYMMETRIC_SIZE", default: "1G", doc: "bytes of symmetric heap per PE; suffixes K, M, G, T (powers of 1024); sparse, so unused space costs nothing", category: Category::Runtime },
    Variable { name: "SYMMEM_BOOTSTRAP", default: "auto", doc: "how PEs find each other: auto (in order: symrun, torchrun/PyTorch variables, MPI launcher with the mpi feature, PMI-1 server (PMI_FD or PMI_PORT: Hydra mpiexec, srun --mpi=pmi2), PMIx server (PMIX_RANK, PMIX_NAMESPACE or PMIX_SERVER_URI*: Open MPI mpirun, srun --mpi=pmix), Kubernetes Indexed Job, srun without PMI, else one PE; the choice and why is logged at info), tcp (symrun), mpi, pmi (PMI-1 client), pmix (PMIx client, libpmix loaded at run time), env (launcher variables, first found), env:torchrun, env:k8s, env:slurm (that source, also when another disagrees)", category: Category::Runtime },
    Variable { name: "SYMMEM_PMIX_LIB", default: "libpmix.so.2, then libpmix.so", doc: "pmix bootstrap: the libpmix (PMIx v4 or later) to dlopen, a file name or a path", category: Category::Runtime },
    Variable { name: "SYMMEM_ROOT_ADDR", default: "(from the launcher)", doc: "env bootstrap: host of rank 0's rendezvous; overrides MASTER_ADDR and Slurm's first step node; required for Kubernetes Indexed Jobs (the index-0 pod's DNS name)", category: Category::Runtime },
    Variable { name: "SYMMEM_ROOT_PORT", default: "(from the launcher)", doc: "env bootstrap: port of rank 0's rendezvous; default MASTER_PORT+1000 under torchrun/PyTorchJob (MASTER_PORT is left to torchrun's store), 29650 for Kubernetes Indexed Jobs, the first of SLURM_STEP_RESV_PORTS or a port derived from the Slurm job and step ids", category: Category::Runtime },
    Variable { name: "SYMMEM_JOB_SECRET", default: "(derived from the job identity)", doc: "env bootstrap: secret from which the rendezvous key is derived (e.g. from a Kubernetes Secret; 32 random bytes as hex); without it the key is derived from the launcher's job identity and anyone who can reach the port and guess it can join (a warning says so), and a job on more than one node is refused unless SYMMEM_ALLOW_PUBLIC_JOB_KEY=1", category: Category::Runtime },
    Variable { name: "SYMMEM_ALLOW_PUBLIC_JOB_KEY", default: "0", doc: "env bootstrap: 1 = let a job whose PEs are on more than one node run without SYMMEM_JOB_SECRET, its key derived from the launcher's public job identity (Slurm job id, torchrun's address and port); anyone who can reach rank 0's port and guess that identity can then join the job and read and write every PE's heap, so use it only on a network nobody else reaches; without it such a job fails at init on every PE", category: Category::Runtime },
    Variable { name: "SYMMEM_WORLD_SIZE", default: "(unset)", doc: "env bootstrap: number of PEs of a Kubernetes Indexed Job (its completions), which Kubernetes does not export", category: Category::Runtime },
    Variable { name: "SYMMEM_BOOTSTRAP_TIMEOUT", default: "60", doc: "seconds each bootstrap call (init, alloc, free, finalize) may wait for the other PEs; alloc, free and finalize first wait for every PE to arrive, as long as all are alive (only SYMMEM_TIMEOUT bounds that), so a late PE is not a failure; 1 year or more (e.g. inf) = no limit", category: Category::Runtime },
    Variable { name: "SYMMEM_TIMEOUT", default: "0", doc: "seconds a wait (barrier, wait_until, quiet, alloc/free/finalize waiting for a late PE) may block before failing; 0, or 1 year or more (e.g. inf), = no limit (dead peers are still detected); device waits (in kernels) default to 60 s when it is not set", category: Category::Runtime },
    Variable { name: "SYMMEM_DEAD_PEER_TIMEOUT", default: "30", doc: "seconds a TCP peer (the rendezvous, the socket transport) may stay silent before its connection fails with an error naming it: a host that lost power or a cut link ends every wait on it within this time plus about a twentieth of it (at least 1 s), never a silent hang (kernel keepalive probes and TCP_USER_TIMEOUT; a live peer's kernel answers the probes, so a long computation is never mistaken for death); also bounds each write of the rendezvous to a rank that stops reading; at least 1; 0, or 1 year or more (e.g. inf), = off", category: Category::Runtime },
    Variable { name: "SYMMEM_DEBUG", default: "warn", doc: "log level: error, warn, info, debug, trace", category: Category::Runtime },
    Variable { name: "SYMMEM_DEBUG_SUBSYS", default: "all", doc: "comma-separated subsystems to log (init, heap, bootstrap, rma, transport, proxy, coll), or all; the configuration and the counters lines show at info whatever the subsystems", category: Category::Runtime },
    Variable { name: "SYMMEM_DISABLE_P2P", default: "0", doc: "1 = do not map same-node peers' heaps (every peer is reached through a transport)", category: Category::Runtime },
    Variable { name: "SYMMEM_REMOTE_TRANSPORT", default: "auto", doc: "transport to other nodes: auto (ib with an RDMA device, else ofi with a libfabric fabric provider such as efa or cxi in builds with the ofi feature, else socket), socket, ib, ofi (libfabric; builds with the ofi feature)", category: Category::Runtime },
    Variable { name: "SYMMEM_NODE_ID", default: "(boot id + IPC/net/PID namespaces)", doc: "node identity; PEs with equal ids share memory. By default the kernel boot id and the IPC, network and PID namespaces (the hostname only where /proc is unreadable; hostnames are shown in messages, never compared), together with the launcher's node where it tells (PMI_process_mapping, PMIX_HOSTNAME, SLURMD_NODENAME, torchrun's GROUP_RANK): PEs share a node only when both agree. Setting it overrides both and lets one machine act as several nodes", category: Category::Runtime },
    Variable { name: "SYMMEM_PROXY_SLOTS", default: "1024", doc: "slots of each PE's proxy ring (device-initiated requests to remote PEs); a full ring makes kernels wait, never drops", category: Category::Runtime },
    Variable { name: "SYMMEM_SIMULATE_NODES", default: "1", doc: "split the job's PEs into this many nodes of consecutive PEs (PE p is on node p * K / n_pes, suffixed to the node id), so one machine runs a multi-node job whose nodes share no memory and talk over the remote transport", category: Category::Runtime },
    Variable { name: "SYMMEM_MAX_TEAMS", default: "32", doc: "teams that may exist at once on a PE, TEAM_WORLD and TEAM_NODE included (2 to 4096; the default is NVSHMEM's); each is a slot of symmetric heap reserved at init, of about 16 * n_pes * (4 + ceil(SYMMEM_MAX_TEAMS / 64)) bytes", category: Category::Runtime },
    Variable { name: "SYMMEM_CHECK_COLLECTIVES", default: "0", doc: "1 = host team collectives verify their arguments across PEs and fail on every PE, naming the PEs and the differing argument, when they disagree (through the P2P mapping within a node; a put to every member and a quiet per call across nodes). Off by default: it doubles a small collective's latency. Set it on every PE alike", category: Category::Runtime },
    Variable { name: "SYMMEM_HCA_LIST", default: "(all)", doc: "RDMA devices (ib transport), NCCL-style: comma-separated name prefixes with an optional :port (mlx5_0:1,mlx5_1); a leading = matches names exactly, a leading ^ excludes the listed devices", category: Category::Runtime },
    Variable { name: "SYMMEM_IB_GID_INDEX", default: "(auto)", doc: "GID index for RoCE (ib transport); auto prefers a RoCE v2 GID of an IPv4 address", category: Category::Runtime },
    Variable { name: "SYMMEM_IB_QPS_PER_PEER", default: "1", doc: "RC queue pairs per remote peer (ib transport), used round-robin per request; above 1, requests to one peer are ordered only by fence/quiet (fence waits like quiet) and a put_signal's signal after its own data", category: Category::Runtime },
    Variable { name: "SYMMEM_ALLOW_HOST_STAGING", default: "0", doc: "1 = when the NIC cannot register a GPU heap (no dma-buf, no peermem), the whole job uses the socket transport, staged through host memory, with a warning on every PE, instead of failing (must be set on every PE that uses ib)", category: Category::Runtime },
    Variable { name: "SYMMEM_OFI_PROVIDER", default: "(auto)", doc: "ofi transport: the libfabric provider (tcp;ofi_rxm, shm, verbs;ofi_rxm, efa, cxi, …); unset = the first fabric provider with RDM endpoints, RMA and atomics (not tcp, udp, sockets or shm), else the first of any kind; one that is missing is an error naming what fi_getinfo offers", category: Category::Runtime },
    Variable { name: "SYMMEM_OFI_PROGRESS", default: "auto", doc: "ofi transport: how its progress thread waits for work. block: on the completion queue's wait object, which the provider then signals for every completion (over tcp;ofi_rxm here 2-3 µs per get or atomic); poll: never blocks, yielding its CPU between polls, with no signals; manual: no progress thread (peers' operations on this PE complete only while its threads call in: waits, tests, fences, quiets); auto: poll where each PE's progress thread can have a CPU of its own (a spare CPU per PE on the machine, else two of the process's CPUs per PE), else block", category: Category::Runtime },
    Variable { name: "SYMMEM_OFI_DOMAIN", default: "(auto)", doc: "ofi transport: the libfabric domain (NIC, as fi_info names it: mlx5_0, cxi0, rdmap16s27-rdm, eth0, …) this PE opens; unset = the one nearest the PE (its GPU's NUMA node, else its CPUs'), PEs of a machine spread over the nearest ones by local rank, libfabric's first where sysfs says nothing; one the provider does not offer is an error naming those it offers", category: Category::Runtime },
    Variable { name: "SYMMEM_OFI_ASSUME_ORDER", default: "provider", doc: "ofi transport: the order it relies on between operations to a peer. provider: what the provider promises (its FI_ORDER_* bits, FI_FENCE where offered); weakest: efa's, whatever the provider promises (only sends stay behind sends; FI_FENCE only where the provider really offers it): every RMA or atomic that must follow an earlier one to the same peer waits for it, and signals go as messages; for running efa's protocol on tcp;ofi_rxm or shm", category: Category::Runtime },
    Variable { name: "SYMMEM_SOCKET_IFNAME", default: "(auto)", doc: "network interface for sockets and unique-id rendezvous", category: Category::Runtime },
    Variable { name: "SYMMEM_SOCKET_FAULTS", default: "(unset)", doc: "testing: a seed; the socket transport cuts its writes and reads short at points drawn from it and sleeps up to 200 µs before some, so that races needing a slow network or many cores show up on a laptop (the protocol must deliver the same bytes anyway); each PE and connection draws its own stream. Costs throughput: never in production", category: Category::Runtime },
    Variable { name: "SYMMEM_DEVICE", default: "auto", doc: "what a PE is: auto (a GPU PE when libcuda loads and a GPU is visible, else a CPU PE), cpu, cuda (an error if no GPU can be used)", category: Category::Runtime },
    Variable { name: "SYMMEM_EXEC_SEED", default: "(unset)", doc: "CPU executor: order in which a block's kernel threads (fibers) run after each switch point (barrier, device wait); unset = thread index order, the same every run; a number = an order drawn from that seed, the same again with the same seed (within a PE); a failed launch names its schedule", category: Category::Runtime },
    Variable { name: "SYMMEM_NT_COPY_THRESHOLD", default: "auto", doc: "bytes from which host puts and gets on mapped heaps copy with non-temporal stores, which bypass the caches (x86-64); suffixes K, M, G; at least 4K; auto = 3/8 of the last-level cache, where they measured faster than memcpy; off = memcpy at every size", category: Category::Runtime },
    Variable { name: "SYMMEM_VECTOR_COPY_BELOW", default: "auto", doc: "bytes below which host puts and gets on mapped heaps of at least 2K copy with the runtime's own 32-byte vector loop instead of memcpy (x86-64 with AVX2), which stays fast where source and destination are misaligned against each other; suffixes K, M, G; at least 4K; auto = the size of a core's L2 cache (1M where sysfs does not say); off = memcpy", category: Category::Runtime },
    Variable { name: "SYMMEM_EXEC_STACK_SIZE", default: "256K", doc: "CPU executor: stack of each kernel thread (fiber); suffixes K, M (powers of 1024); at least 16K; an overflow fails the launch as a stack overflow naming the block and thread", category: Category::Runtime },
    Variable { name: "SYMMEM_ORDERING", default: "strict", doc: "CPU PEs: strict (puts, p, AMOs and signals to a peer are visible in program order, as x86 makes them), or weak (a debugging mode: they are buffered and delivered later in a seeded random order that only fence, quiet, barrier and put_signal constrain, so a missing fence fails on CPU PEs as it would on a GPU; peers have no ptr() and device operations to them go through the proxy). An error on GPU PEs", category: Category::Runtime },
    Variable { name: "SYMMEM_ORDERING_SEED", default: "(from the clock)", doc: "weak ordering: the seed of the delivery order and delays (the same on every PE; each PE derives its own stream). Logged at warn level when weak ordering starts, so a failing run can be replayed", category: Category::Runtime },
    Variable { name: "SYMMEM_PTXAS", default: "(PATH, then the nvidia-cuda-nvcc-cu12 wheel)", doc: "build time (symmem-ptx-build): the ptxas that assembles the kernels' PTX to check it", category: Category::BuildTime },
    Variable { name: "SYMMEM_REQUIRE_PTX", default: "0", doc: "build time (symmem-ptx-build): 1 = a kernel crate whose PTX or cubin cannot be built fails the build, even without symmem's cuda feature and with SYMMEM_SKIP_PTX=1 (without either, the reason is embedded and load_module reports it on a GPU PE)", category: Category::BuildTime },
    Variable { name: "SYMMEM_STREAM_MEMOPS", default: "1", doc: "GPU PEs: 0 = stream-ordered signal writes and waits (put_signal_on_stream with Set, signal_wait_until_on_stream with Ge, Eq, Gt) use helper kernels instead of the driver's stream memory operations", category: Category::Runtime },
    Variable { name: "SYMMEM_SASS_ARCH", default: "", doc: "build time (symmem-ptx-build): sm_XX = also assemble each kernel crate for that architecture with ptxas and embed the cubin, which a GPU of exactly that architecture loads without the driver's JIT (scripts/gpu-check.sh bundle sets sm_90)", category: Category::BuildTime },
    Variable { name: "SYMMEM_PTX_CHECK_ARCHS", default: "(none)", doc: "build time (symmem-ptx-build): comma-separated sm_XX = also assemble each kernel crate's PTX for those architectures into the build's cubin cache, beside the embedded cubin, to check that it assembles there; the PTX test (tests/device/tests/ptx.rs) reads the same cache (the test command sets sm_80)", category: Category::BuildTime },
    Variable { name: "SYMMEM_SKIP_PTX", default: "0", doc: "build time (symmem-ptx-build): 1 = skip the nested PTX builds of kernel crates on purpose (CPU PEs only; load_module on a GPU PE says why there is no PTX); without it, a PTX build that fails while symmem's cuda feature is on fails the build, naming the missing rustup components", category: Category::BuildTime },
    Variable { name: "SYMMEM_TEST_EXIT_AT", default: "(unset)", doc: "testing only: this process kills itself (SIGKILL) when init reaches the named point (launcher_exchange, rendezvous_join, rendezvous, topology, heap_connect, heap_serve, heap_served_one, heap_receive, init_barrier), so fault tests place a PE's death at each init step", category: Category::Testing },
];
