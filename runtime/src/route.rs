//! Routes: how this PE reaches each PE's heap, chosen once at init, and what a checked
//! access resolves to (`Located`, `Word`); the data path (`data_path.rs`) does the checks
//! and the resolving.
//!
//! Every host operation first does the transport-independent checks (PE, allocation,
//! bounds) and then dispatches on the target's [`Route`]. The direct route is the CPU fast
//! path: loads, stores and atomics through the mapped heap. The copy route serves
//! host-initiated operations on GPU heaps with `cuMemcpy`. The remote route carries
//! requests to PEs on other nodes (or with P2P disabled) over the job's transport.

use symmem_transport::int::SymInt;

/// How this PE reaches one PE's heap.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Route {
    /// The heap is host memory mapped here: plain loads, stores and atomics.
    Direct(*mut u8),
    /// The heap is GPU memory mapped into this PE's CUDA context at this device address:
    /// the host copies with `cuMemcpy`.
    #[cfg(feature = "cuda")]
    Copy(u64),
    /// Another node, or P2P disabled: requests go over the remote transport.
    Remote,
    /// No path (a GPU that is not peer-accessible, and no remote transport).
    Unreachable,
}

// SAFETY: the pointer names a mapping owned by the runtime, valid on any thread.
unsafe impl Send for Route {}
// SAFETY: see above.
unsafe impl Sync for Route {}

/// The path of a [`PeRoute`]: how this PE reaches one PE's heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RoutePath {
    /// The PE's own heap.
    Own,
    /// Loads, stores and atomics on the peer's heap, mapped here (same node, P2P).
    Direct,
    /// `cuMemcpy` to and from the peer's GPU heap, mapped into this PE's CUDA context.
    CudaCopy,
    /// Requests over the remote transport of this name (`socket`, `ib`).
    Transport(&'static str),
    /// No path: the heap is not mapped and there is no remote transport.
    Unreachable,
}

impl std::fmt::Display for RoutePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RoutePath::Own => f.write_str("own heap"),
            RoutePath::Direct => f.write_str("direct p2p"),
            RoutePath::CudaCopy => f.write_str("cuda copy"),
            RoutePath::Transport(name) => f.write_str(name),
            RoutePath::Unreachable => f.write_str("unreachable"),
        }
    }
}

/// How this PE reaches one PE's heap and why, as chosen once at init
/// ([`Runtime::route_to`](crate::Runtime::route_to)); read-only, for reports such as `symmem-info --pes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeRoute {
    /// The path.
    pub path: RoutePath,
    /// `SYMMEM_ORDERING=weak`: operations on this path are buffered and delivered in a
    /// seeded order by the weak-ordering transport.
    pub weak: bool,
    /// Why this path: the node identities, `SYMMEM_DISABLE_P2P`, and for a remote
    /// transport why it was chosen (`SYMMEM_REMOTE_TRANSPORT`, the RDMA probe).
    pub why: String,
}

impl std::fmt::Display for PeRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.weak {
            write!(f, "weak ordering over {}: {}", self.path, self.why)
        } else {
            write!(f, "{}: {}", self.path, self.why)
        }
    }
}

/// What the remote transport `name` would use here (for ib, the RDMA device and port;
/// for ofi, the libfabric provider), or why it cannot run here (a build without its
/// feature, no device or provider, one excluded by its variables, no transport of that
/// name). The probe [`init`](crate::init) runs when `SYMMEM_REMOTE_TRANSPORT` names it;
/// [`remote_transports`](crate::remote_transports) lists the names.
pub fn transport_probe(
    name: &str,
    config: &crate::config::Config,
) -> std::result::Result<String, String> {
    symmem_transport::probe(name, &config.transport())
}

/// Where a checked access lands.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Located<T> {
    /// Host-accessible memory.
    Host(*mut T),
    /// Device memory of this PE's GPU context.
    #[cfg(feature = "cuda")]
    Device(u64),
    /// Heap offset `off` on `pe`, reached through the remote transport.
    Remote {
        /// The target PE.
        pe: usize,
        /// Heap offset of the first element.
        off: u64,
    },
}

/// An integer that an atomic-only operation (a wait, a signal) reads or updates, by its
/// route: a host atomic, or a word of a GPU heap.
pub(crate) enum Word<'a, T: SymInt> {
    /// Host memory: an atomic reference.
    Host(&'a T::Atomic),
    /// A GPU heap: the device address (for reads by copy) and the symmetric address (for
    /// updates by helper kernel).
    #[cfg(feature = "cuda")]
    Device {
        /// Address in this PE's context.
        addr: u64,
        /// Symmetric address, translated to the target PE by device operations.
        sym: u64,
    },
    /// Heap offset `off` on `pe`, reached through the remote transport.
    Remote {
        /// The target PE.
        pe: usize,
        /// Heap offset of the word.
        off: u64,
    },
}
