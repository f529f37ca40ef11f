//! This PE's CPUs: the line init logs and `symmem-info` prints (which CPUs, and who chose
//! them: symrun's `--bind-to`, or not symmem), and on a GPU PE the narrowing to its GPU's
//! NUMA node.

use symmem_bootstrap::affinity::{self, CpuSet};
use symmem_bootstrap::launcher::ENV_BIND;

/// This PE's CPUs in words, e.g. `bound to CPUs 1 (symrun --bind-to core)` or `runs on
/// CPUs 0-1 (not bound by symmem)`; `narrowed` says to what a GPU PE's CPUs were narrowed
/// ([`narrow_to_gpu`]). The CPUs are the calling thread's, at init those of the process.
pub(crate) fn describe(narrowed: Option<&str>) -> String {
    let cpus = match CpuSet::of_this_thread() {
        Ok(c) => c,
        Err(e) => return format!("runs on CPUs unknown (sched_getaffinity failed: {e})"),
    };
    let (bound, origin) = match std::env::var(ENV_BIND) {
        Ok(how) if affinity::binds(&how) => (true, format!("symrun {how}")),
        Ok(how) => (false, format!("not bound: symrun {how}")),
        Err(_) => (false, "not bound by symmem".to_string()),
    };
    match narrowed {
        Some(note) => format!("bound to CPUs {cpus} ({origin}; narrowed to {note})"),
        None if bound => format!("bound to CPUs {cpus} ({origin})"),
        None => format!("runs on CPUs {cpus} ({origin})"),
    }
}

/// Narrows the calling thread's CPUs (and so those of the threads it starts later) to
/// those of the NUMA node of the GPU `pci_bus_id`, when the node is known and has some
/// of them but not all: never widened, never emptied. Returns what they were narrowed to.
#[cfg(feature = "cuda")]
pub(crate) fn narrow_to_gpu(pe: usize, pci_bus_id: &str) -> Option<String> {
    use symmem_bootstrap::affinity::numa;
    let node = numa::pci_numa_node(pci_bus_id)?;
    let allowed = CpuSet::of_this_thread().ok()?;
    let cpus = numa::narrow_to_node(&allowed, &numa::nodes(), node)?;
    match cpus.bind_this_thread() {
        Ok(()) => {
            tracing::info!("PE {pe}: CPUs {allowed} narrowed to {cpus}, those of NUMA node {node} of its GPU {pci_bus_id}");
            Some(format!("NUMA node {node} of its GPU"))
        }
        Err(e) => {
            tracing::warn!("PE {pe}: cannot narrow its CPUs {allowed} to {cpus}, those of NUMA node {node} of its GPU {pci_bus_id}: {e}");
            None
        }
    }
}
