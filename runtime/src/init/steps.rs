//! The steps that join a PE to its job, one function per [`InitStep`]: agree on a job id,
//! learn the topology, exchange and map heaps, connect the remote transport, and the final
//! barrier. Each step runs under `progress`, so a failure names the step and its root
//! cause (see [`crate::liveness::fail_init`]).

use std::sync::Arc;
use std::time::Instant;

use symmem_bootstrap::{Bootstrap, BootstrapError};

use crate::config::Config;
use crate::counters::Registry;
use crate::error::Result;
use crate::heap::{self, PendingHeap, SymmetricHeap};
use crate::liveness::{InitProgress, InitStep};
use crate::pe_device::{create_backend, serve_gpu_heap};
use crate::team_state::TeamState;
use crate::topology::{PeInfo, Topology};
use symmem_transport::{self as transport, HeapRegion, RemoteChoice, Transport};

use super::device_state;

/// What the steps set up: everything a PE shares with its peers.
pub(super) struct Joined {
    /// Every PE's node, pid and heap size.
    pub topo: Topology,
    /// This PE's heap, and the same-node peers' heaps mapped here.
    pub heap: SymmetricHeap,
    /// The transport to the PEs whose heaps are not mapped here, if any.
    pub transport: Option<Arc<dyn Transport>>,
    /// The remote transport behind it and why it was chosen.
    pub remote_choice: Option<RemoteChoice>,
}

/// Runs the steps in order, entering each in `progress`. Collective.
pub(super) fn join(
    config: &Config,
    bootstrap: &dyn Bootstrap,
    counters: &Registry,
    progress: &mut InitProgress,
) -> Result<Joined> {
    progress.enter(InitStep::Rendezvous);
    let pending = rendezvous(bootstrap)?;
    progress.enter(InitStep::Topology);
    let topo = topology(config, bootstrap)?;
    progress.learn(&topo);
    super::job_key::check(config, bootstrap, &topo)?;
    heap::check_sizes(&topo.heap_lens())?;
    TeamState::check(
        bootstrap,
        config.max_teams,
        config.check_collectives,
        config.symmetric_size,
    )?;
    let (backend, reachable) = create_backend(config, bootstrap, &topo, pending.job())?;
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
    let transport::Connected {
        transport,
        remote: remote_choice,
    } = connect_transport(config, bootstrap, &topo, &heap, counters, deadline)?;
    progress.enter(InitStep::Barrier);
    // Nobody may use a peer's heap before that peer has mapped everyone's.
    bootstrap.barrier()?;
    Ok(Joined {
        topo,
        heap,
        transport,
        remote_choice,
    })
}

/// [`InitStep::Rendezvous`]: agrees on a random job id (PE 0's) and creates this PE's
/// heap under it, not yet mapped by anyone else.
fn rendezvous(bootstrap: &dyn Bootstrap) -> Result<PendingHeap> {
    let job_bytes = bootstrap.broadcast(0, &symmem_bootstrap::random_nonce()?.to_le_bytes())?;
    let job = u64::from_le_bytes(job_bytes.as_slice().try_into().map_err(|_| {
        BootstrapError::Protocol {
            peer: "rank 0".into(),
            detail: "job id broadcast has the wrong length".into(),
        }
    })?);
    SymmetricHeap::create(job, bootstrap.rank())
}

/// [`InitStep::Topology`]: allgathers every PE's node identity, host, pid and heap size.
fn topology(config: &Config, bootstrap: &dyn Bootstrap) -> Result<Topology> {
    let rank = bootstrap.rank();
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
        node: node_of(config, rank, bootstrap.size()),
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
    Ok(Topology::new(rank, infos))
}

/// This PE's node identity: the configured one, split into `SYMMEM_SIMULATE_NODES`
/// nodes of consecutive PEs when asked.
fn node_of(config: &Config, rank: usize, n_pes: usize) -> String {
    match config.simulate_nodes {
        1 => config.node_id.clone(),
        k => format!("{}/sim{}", config.node_id, rank * k / n_pes),
    }
}

/// [`InitStep::Transport`]: connects the transports to the PEs whose heaps are not mapped
/// here (see [`transport::connect`]), and hands a GPU heap to the one that serves it.
fn connect_transport(
    config: &Config,
    bootstrap: &dyn Bootstrap,
    topo: &Topology,
    heap: &SymmetricHeap,
    counters: &Registry,
    deadline: Instant,
) -> Result<transport::Connected> {
    let rank = bootstrap.rank();
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
    let base = heap.base(rank).expect("own heap is mapped");
    #[cfg(feature = "cuda")]
    let export = move || -> std::result::Result<std::os::fd::OwnedFd, transport::GpuHeapError> {
        Ok(crate::cuda::export_dmabuf(rank, base, heap.len())?)
    };
    #[cfg(feature = "cuda")]
    let export_gpu_heap: Option<&dyn Fn() -> _> = (!heap.host_accessible()).then_some(&export);
    #[cfg(not(feature = "cuda"))]
    let export_gpu_heap = None;
    #[cfg(feature = "cuda")]
    let (gpu_ordinal, gpu_pci_bus_id) = match heap.backend() {
        crate::heap::Backend::Cuda(c) => (
            Some(c.gpu().ordinal as i32),
            Some(c.gpu().pci_bus_id.as_str()),
        ),
        crate::heap::Backend::Memfd(_) => (None, None),
    };
    #[cfg(not(feature = "cuda"))]
    let (gpu_ordinal, gpu_pci_bus_id) = (None, None);
    let connected = transport::connect(&transport::Setup {
        bootstrap,
        config: &config.transport(),
        me: rank,
        remote: &remote,
        heap: HeapRegion {
            base,
            len: heap.len(),
            host: heap.host_accessible(),
        },
        gpu_ordinal,
        gpu_pci_bus_id,
        peer_bases: &mapped,
        deadline,
        counter: &|name| counters.transport(name),
        export_gpu_heap,
    })?;
    let peer_bases: Vec<u64> = (0..topo.n_pes())
        .map(|pe| heap.base(pe).unwrap_or(0))
        .collect();
    serve_gpu_heap(
        heap,
        connected.transport.as_ref(),
        &peer_bases,
        device_state(rank, topo, heap, 0, 0, config.device_timeout),
    )?;
    Ok(connected)
}
