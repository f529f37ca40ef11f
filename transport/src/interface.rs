//! What every transport implements ([`Transport`], [`InFlight`]) and what it is given to
//! connect ([`Setup`]): the contract between the runtime and the transports, which
//! imports none of them.

use std::sync::Arc;

use symmem_device::{AmoKind, Request, SignalOp};

use crate::config::TransportConfig;
use crate::error::{GpuHeapError, Result};

/// The buffer a request reads from or writes to on the issuing PE.
pub enum Io<'a> {
    /// No payload (AMOs, signals, fence, quiet).
    None,
    /// The source of a put or put_signal (`request.len` bytes).
    Src(&'a [u8]),
    /// The destination of a get (`request.len` bytes).
    Dst(&'a mut [u8]),
}

/// A request issued with [`Transport::submit_nowait`].
pub enum Pending {
    /// Locally complete on return, like [`Transport::submit`]: the fetched value of a
    /// fetching AMO (0 otherwise); a get's bytes are already in its `Io::Dst`.
    Done(u64),
    /// Sent; the reply, with the fetched value or bytes, comes later.
    Reply(Box<dyn InFlight>),
}

/// A fetching request whose reply has not been collected yet. Dropping it abandons the
/// reply: a reply that comes later is read and discarded.
pub trait InFlight: Send {
    /// Collects the reply if it has arrived: `Some(value)` (a fetching AMO's old value,
    /// 0 for a get) with a get's `request.len` bytes copied into `dst` (empty for an
    /// AMO); `None` while it has not. Never blocks and does not read the connection
    /// itself: [`Transport::progress`] and the transport's own thread do. Fails naming
    /// the target PE when its connection failed or no reply came within `SYMMEM_TIMEOUT`;
    /// then every later poll of that peer's requests fails too.
    fn poll(&mut self, dst: &mut [u8]) -> Result<Option<u64>>;
}

/// A way to reach remote PEs.
pub trait Transport: Send + Sync {
    /// Short name for logs and errors (`socket`, `ib`).
    fn name(&self) -> &'static str;

    /// Issues `req` to `req.pe` and returns when it is locally complete; returns the
    /// fetched value of a fetching AMO (0 otherwise). `io` carries the payload: `Src` for
    /// puts, `Dst` for gets, `None` for everything else. `req.local` is ignored: the
    /// payload is `io`.
    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64>;

    /// Issues `req` like [`Transport::submit`], but a fetching request (a fetching AMO,
    /// a get) may return [`Pending::Reply`] before its reply is in; `io` is as for
    /// `submit` (a pending get's bytes go to the `dst` of the poll that collects them
    /// instead). The request is ordered with every other request to `req.pe` as if
    /// `submit` had been called, and a later [`Transport::quiet`] covers it. Callers
    /// bound how many they leave in flight per peer. The default completes synchronously
    /// through `submit`.
    fn submit_nowait(&self, req: &Request, io: Io<'_>) -> Result<Pending> {
        self.submit(req, io).map(Pending::Done)
    }

    /// Issues `req`, a signal of the runtime's own team barrier (a `signal` with
    /// `Io::None`, or a `put_signal` whose few bytes, the barrier call's identity, land
    /// before its signal), like [`Transport::submit`], except that no later
    /// [`Transport::quiet`] needs to complete it: the barrier waits for it at the target
    /// itself, and a quiet that only had it to flush would cost a round trip per
    /// barrier. The default submits it like any other.
    fn barrier_signal(&self, req: &Request, io: Io<'_>) -> Result<()> {
        self.submit(req, io).map(drop)
    }

    /// Orders every request submitted before the fence to each PE before those submitted
    /// after it (`nvshmem_fence`). Does not wait.
    fn fence(&self) -> Result<()>;

    /// Returns when every request submitted before it is complete and visible at its
    /// target (`nvshmem_quiet`).
    fn quiet(&self) -> Result<()>;

    /// Makes progress on incoming and outgoing traffic without blocking; waits call it
    /// between polls while they spin, so that a PE spinning on its own heap serves its
    /// peers at once (a sleeping wait leaves that to the transport's own thread).
    fn progress(&self) -> Result<()>;

    /// Whether the transport serves peers' operations on this PE while none of its
    /// threads calls in (a service or progress thread of its own). Where it does not
    /// (`SYMMEM_OFI_PROGRESS=manual`), waits keep calling [`Transport::progress`] while
    /// they sleep, not only while they spin.
    fn serves_while_idle(&self) -> bool {
        true
    }

    /// Tells the transport that the issuer of `req`, a put, put_signal or get it already
    /// submitted, does not wait for it (`put_nbi`, `put_signal_nbi`, `get_nbi`, from a
    /// kernel or from host code): the source at `req.local` must stay unchanged until the
    /// next quiet, and a get's destination there is defined only after it. Transports that
    /// copied the payload need nothing; weak ordering fingerprints a put's source to
    /// report its reuse and hides a get's result until the quiet.
    fn nbi_issued(&self, req: &Request) {
        let _ = req;
    }

    /// A peer this transport has lost, if any: `(pe, why)` for a PE whose connection
    /// failed (it closed without the peer's goodbye, an error on it, a malformed frame,
    /// no answer within `SYMMEM_TIMEOUT`), so that the runtime's health check can name a
    /// dead remote PE that nothing else reports (an MPI bootstrap does not report deaths,
    /// and same-node process watching does not see other nodes). Never blocks: it is
    /// polled by slow waits; a transport whose state is busy may answer `None` this time.
    /// A peer that shut down in an orderly way (finalize) is not lost. The default, for
    /// transports that cannot tell, is `None`.
    fn failed_peer(&self) -> Option<(usize, String)> {
        None
    }

    /// The call blocked longest inside this transport, once its wait is slow (a quiet
    /// waiting for acknowledgements, a get or fetching AMO for its reply), for the hang
    /// report: without it, a PE stuck in a transport's wait looks like one in user code.
    /// Never blocks on the transport's state. The default, for transports whose waits do
    /// not publish, is `None`.
    fn blocked(&self) -> Option<crate::blocked::Blocked> {
        None
    }

    /// Stops the transport's threads and closes its connections; later submits fail.
    /// Called once, before the heap is unmapped.
    fn shutdown(&self);

    /// Gives the transport this PE's GPU heap access path, built by `make`, if it applies
    /// peers' requests itself (socket). Called once at init, before any peer may send. A
    /// transport whose NIC reaches the heap itself (ib) does not call `make`.
    fn serve_device_heap(
        &self,
        make: &dyn Fn() -> Result<Arc<dyn DeviceHeap>, GpuHeapError>,
    ) -> Result<(), GpuHeapError> {
        let _ = make;
        Ok(())
    }
}

/// This PE's heap as a transport sees it: what incoming requests are applied to (socket)
/// or what is registered with the NIC (ibverbs).
#[derive(Debug, Clone, Copy)]
pub struct HeapRegion {
    /// Address of this PE's heap: a host pointer, or a device address on a GPU PE.
    pub base: u64,
    /// Bytes.
    pub len: usize,
    /// Whether `base` is host memory (a CPU PE) or GPU memory (a GPU PE).
    pub host: bool,
}

/// What a transport needs to connect. Connecting is collective: every PE of the job calls
/// it, in the same order relative to other bootstrap collectives.
pub struct Setup<'a> {
    /// The job's bootstrap, for exchanging addresses and keys.
    pub bootstrap: &'a dyn symmem_bootstrap::Bootstrap,
    /// The transports' part of the runtime's configuration.
    pub config: &'a TransportConfig,
    /// This PE.
    pub me: usize,
    /// `remote[pe]`: whether this PE reaches `pe` through the transport.
    pub remote: &'a [bool],
    /// This PE's heap.
    pub heap: HeapRegion,
    /// The CUDA device (ordinal) whose memory holds a GPU heap, for transports that
    /// register it by device (ofi's `FI_HMEM_CUDA`); `None` on a CPU PE.
    pub gpu_ordinal: Option<i32>,
    /// The PCI bus id of this PE's GPU (`0000:1b:00.0`, as CUDA names it), for transports
    /// that place the PE on the NIC nearest it (ofi's domain choice); `None` on a CPU PE.
    pub gpu_pci_bus_id: Option<&'a str>,
    /// `peer_bases[pe]`: where `pe`'s heap is mapped here (host memory), 0 if it is not.
    pub peer_bases: &'a [u64],
    /// When connecting must be done.
    pub deadline: std::time::Instant,
    /// The counters of the path named (`socket`, `ib`, `direct`): each transport counts
    /// the requests, fences and quiets it carries in its own.
    pub counter: &'a dyn Fn(&'static str) -> Arc<dyn OpCounter>,
    /// Exports this PE's GPU heap as a dma-buf (`cuMemGetHandleForAddressRange`), for a
    /// NIC to register; `None` on a CPU PE or a build without CUDA.
    pub export_gpu_heap: Option<&'a dyn Fn() -> Result<std::os::fd::OwnedFd, GpuHeapError>>,
}

/// Where a transport's traffic is counted: the runtime's counters of one path. Counting
/// is a few relaxed atomic adds; a remote operation costs microseconds.
pub trait OpCounter: Send + Sync {
    /// Counts a request submitted: a put, get, AMO or signal and its bytes.
    fn request(&self, req: &Request);
    /// Counts a fence the transport was asked for.
    fn fence(&self);
    /// Counts a quiet the transport was asked for.
    fn quiet(&self);
}

/// A GPU heap as the target of peers' requests: what loads and stores cannot reach. Offsets
/// are checked before any call; an error (the runtime's, e.g. a CUDA call that failed)
/// goes back to the peer in words.
pub trait DeviceHeap: Send + Sync {
    /// Copies `src` to heap offset `off`; complete (visible to the GPU) on return.
    fn write(&self, off: u64, src: &[u8]) -> Result<(), GpuHeapError>;
    /// Copies `dst.len()` bytes from heap offset `off` into `dst`.
    fn read(&self, off: u64, dst: &mut [u8]) -> Result<(), GpuHeapError>;
    /// The AMO `kind` on the `width`-byte word at `off`; returns the old value's bits.
    fn amo(
        &self,
        off: u64,
        width: u8,
        kind: AmoKind,
        value: u64,
        compare: u64,
    ) -> Result<u64, GpuHeapError>;
    /// Updates the signal word at `off`, after every earlier [`Self::write`].
    fn signal(&self, off: u64, op: SignalOp, value: u64) -> Result<(), GpuHeapError>;
}
