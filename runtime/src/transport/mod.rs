//! Remote transports: how this PE reaches PEs whose heaps are not mapped here (other nodes,
//! or P2P disabled), and which one each PE pair uses.
//!
//! Every transport carries the one op vocabulary, [`symmem_device::Request`]: host
//! operations build requests, the proxy thread takes them off the device ring, and each
//! transport encodes them its own way (socket frames, ibverbs work requests).
//!
//! Completion follows OpenSHMEM: [`Transport::submit`] returns when the request is
//! *locally* complete (a put's source may be reused; a get's destination or a fetching
//! AMO's result is filled in). Puts, non-fetching AMOs and signals are *remotely* complete
//! only after [`Transport::quiet`]. Requests from one PE to one target are applied in the
//! order they were submitted, so a put_signal's signal is never visible before its data.

use symmem_device::Request;

use crate::error::Result;

/// The buffer a request reads from or writes to on the issuing PE.
pub(crate) enum Io<'a> {
    /// No payload (AMOs, signals, fence, quiet).
    None,
    /// The source of a put or put_signal (`request.len` bytes).
    Src(&'a [u8]),
    /// The destination of a get (`request.len` bytes).
    Dst(&'a mut [u8]),
}

/// A way to reach remote PEs.
pub(crate) trait Transport: Send + Sync {
    /// Short name for logs and errors (`socket`, `ib`).
    fn name(&self) -> &'static str;

    /// Issues `req` to `req.pe` and returns when it is locally complete; returns the
    /// fetched value of a fetching AMO (0 otherwise). `io` carries the payload: `Src` for
    /// puts, `Dst` for gets, `None` for everything else. `req.local` is ignored: the
    /// payload is `io`.
    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64>;

    /// Orders every request submitted before the fence to each PE before those submitted
    /// after it (`nvshmem_fence`). Does not wait.
    fn fence(&self) -> Result<()>;

    /// Returns when every request submitted before it is complete and visible at its
    /// target (`nvshmem_quiet`).
    fn quiet(&self) -> Result<()>;

    /// Makes progress on incoming and outgoing traffic without blocking; waits call it
    /// between polls so that a PE spinning on its own heap serves its peers.
    fn progress(&self) -> Result<()>;

    /// Stops the transport's threads and closes its connections; later submits fail.
    /// Called once, before the heap is unmapped.
    fn shutdown(&self);
}

/// This PE's heap as a transport sees it: what incoming requests are applied to (socket)
/// or what is registered with the NIC (ibverbs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeapRegion {
    /// Address of this PE's heap: a host pointer, or a device address on a GPU PE.
    pub base: u64,
    /// Bytes.
    pub len: usize,
    /// Whether `base` is host memory (a CPU PE) or GPU memory (a GPU PE).
    pub host: bool,
}

/// What a transport needs to connect. Connecting is collective: every PE of the job calls
/// it, in the same order relative to other bootstrap collectives.
pub(crate) struct Setup<'a> {
    /// The job's bootstrap, for exchanging addresses and keys.
    pub bootstrap: &'a dyn symmem_bootstrap::Bootstrap,
    /// The runtime's configuration.
    pub config: &'a crate::config::Config,
    /// This PE.
    pub me: usize,
    /// `remote[pe]`: whether this PE reaches `pe` through the transport.
    pub remote: &'a [bool],
    /// This PE's heap.
    pub heap: HeapRegion,
    /// When connecting must be done.
    pub deadline: std::time::Instant,
}
