//! Which device a PE runs on (`SYMMEM_DEVICE`), the data heap created there, what a
//! GPU PE's kernels need besides the heap, and where its proxy channel's memory lives.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::heap::{Backend, MemfdHeap, SymmetricHeap};
use crate::proxy::{HostMemory, Payloads, ProxyChannel};
use crate::topology::Topology;
use symmem_bootstrap::Bootstrap;

/// What a GPU PE holds besides its heap.
#[cfg(feature = "cuda")]
pub(crate) type Device = crate::cuda::DeviceResources;
/// Without the `cuda` feature there are no GPU PEs.
#[cfg(not(feature = "cuda"))]
pub(crate) type Device = std::convert::Infallible;

/// Chooses this PE's device and creates its data heap there, for job `job`; also says, per
/// PE, whether its data heap may be mapped here (a GPU this one can access). Collective:
/// every PE allgathers its device.
pub(crate) fn create_backend(
    config: &Config,
    bootstrap: &dyn Bootstrap,
    topo: &Topology,
    job: u64,
) -> Result<(Backend, Vec<bool>)> {
    let me = topo.my_pe();
    #[cfg(feature = "cuda")]
    let gpu = match crate::cuda::select(config.device, me)? {
        None => None,
        Some(visible) => {
            let local = topo.local_pes();
            let local_rank = local.iter().position(|&p| p == me).expect("in own node");
            let ordinal = local_rank % visible;
            let sharers = (0..local.len()).filter(|r| r % visible == ordinal).count();
            Some(std::sync::Arc::new(crate::cuda::Gpu::open(
                ordinal, me, sharers,
            )?))
        }
    };
    #[cfg(not(feature = "cuda"))]
    if config.device == crate::config::DeviceChoice::Cuda {
        return Err(Error::NoGpu {
            op: "init (SYMMEM_DEVICE=cuda)",
            pe: me,
            reason: "this build of symmem has no CUDA support (the `cuda` feature is off)".into(),
        });
    }
    // Every PE learns every PE's device: "cpu", or "cuda:<PCI bus id>".
    #[cfg(feature = "cuda")]
    let mine = gpu
        .as_ref()
        .map_or("cpu".to_string(), |g| format!("cuda:{}", g.pci_bus_id));
    #[cfg(not(feature = "cuda"))]
    let mine = "cpu".to_string();
    let all: Vec<String> = bootstrap
        .allgather(mine.as_bytes())?
        .into_iter()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect();
    let kind = |d: &str| d.split(':').next().unwrap_or("").to_string();
    if let Some(other) = all.iter().position(|d| kind(d) != kind(&mine)) {
        let list = |k: &str| {
            let pes: Vec<String> = (0..all.len())
                .filter(|&p| kind(&all[p]) == k)
                .map(|p| p.to_string())
                .collect();
            pes.join(", ")
        };
        return Err(Error::Inconsistent {
            what: "device kind (SYMMEM_DEVICE)",
            detail: format!(
                "PE {} are {} PEs but PE {} are {} PEs; a job is all CPU PEs or all GPU PEs (set SYMMEM_DEVICE the same everywhere)",
                list(&kind(&mine)),
                kind(&mine),
                list(&kind(&all[other])),
                kind(&all[other])
            ),
        });
    }
    #[cfg(feature = "cuda")]
    if let Some(gpu) = gpu {
        let reachable = all
            .iter()
            .map(|d| gpu.can_access(d.trim_start_matches("cuda:")))
            .collect::<Result<Vec<bool>>>()?;
        let heap = crate::heap::cuda::CudaHeap::create(&gpu, config.symmetric_size)?;
        return Ok((Backend::Cuda(heap), reachable));
    }
    Ok((
        Backend::Memfd(MemfdHeap::create(job, me, config.symmetric_size)?),
        vec![true; all.len()],
    ))
}

/// The GPU resources of a GPU PE (None on a CPU PE).
#[cfg(feature = "cuda")]
pub(crate) fn device_resources(heap: &SymmetricHeap, peer_bases: &[u64]) -> Result<Option<Device>> {
    match heap.backend() {
        Backend::Cuda(h) => Ok(Some(crate::cuda::DeviceResources::new(
            h.gpu(),
            peer_bases,
        )?)),
        Backend::Memfd(_) => Ok(None),
    }
}

/// There are no GPU PEs without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub(crate) fn device_resources(
    _heap: &SymmetricHeap,
    _peer_bases: &[u64],
) -> Result<Option<Device>> {
    Ok(None)
}

/// The device address of the peer base table of a GPU PE.
pub(crate) fn device_peer_table(device: &Option<Device>) -> Option<u64> {
    #[cfg(feature = "cuda")]
    return device.as_ref().map(|d| d.peer_table());
    #[cfg(not(feature = "cuda"))]
    return device.as_ref().map(|d| match *d {});
}

/// The device address of the error word of a GPU PE.
pub(crate) fn device_error_word(device: &Option<Device>) -> Option<u64> {
    #[cfg(feature = "cuda")]
    return device.as_ref().map(|d| d.error_word());
    #[cfg(not(feature = "cuda"))]
    return device.as_ref().map(|d| match *d {});
}

/// Lets the remote transport apply peers' requests to this PE's heap when it is GPU
/// memory (the socket transport copies and launches helper kernels; `state` describes the
/// heap). Before the init barrier, so no request can arrive first.
#[cfg(feature = "cuda")]
pub(crate) fn serve_gpu_heap(
    heap: &SymmetricHeap,
    transport: Option<&std::sync::Arc<dyn symmem_transport::Transport>>,
    peer_bases: &[u64],
    state: symmem_device::DeviceState,
) -> Result<()> {
    let (Backend::Cuda(h), Some(t)) = (heap.backend(), transport) else {
        return Ok(());
    };
    t.serve_device_heap(&|| {
        let target = crate::cuda::GpuTarget::new(h.gpu(), peer_bases, state)?;
        Ok(std::sync::Arc::new(target))
    })
    .map_err(Error::from_gpu_heap)
}

/// There are no GPU heaps without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub(crate) fn serve_gpu_heap(
    _heap: &SymmetricHeap,
    _transport: Option<&std::sync::Arc<dyn symmem_transport::Transport>>,
    _peer_bases: &[u64],
    _state: symmem_device::DeviceState,
) -> Result<()> {
    Ok(())
}

/// Starts PE `me`'s proxy channel of `slots` slots on `transport`: on a CPU PE the ring
/// and the payloads are host memory of this process; on a GPU PE the ring is mapped
/// pinned memory the GPU reaches and the payloads are staged through the GPU's copies.
pub(crate) fn start_proxy(
    me: usize,
    slots: usize,
    device: &Option<Device>,
    transport: std::sync::Arc<dyn symmem_transport::Transport>,
) -> Result<ProxyChannel> {
    #[cfg(feature = "cuda")]
    if let Some(d) = device {
        let (memory, staging) =
            crate::cuda::proxy_memory(&d.gpu, symmem_device::proxy::ring_bytes(slots))?;
        return ProxyChannel::start(me, slots, memory, Payloads::Device(staging), transport);
    }
    #[cfg(not(feature = "cuda"))]
    if let Some(d) = device {
        match *d {}
    }
    ProxyChannel::start(
        me,
        slots,
        std::sync::Arc::new(HostMemory::new(slots)),
        Payloads::Host,
        transport,
    )
}
