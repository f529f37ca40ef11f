//! The runtime handle: its state, queries and finalize. Starting one is in `init/`, the
//! operations in `ops/`, device setup in `pe_device.rs`.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use symmem_bootstrap::Bootstrap;
use symmem_device::DeviceState;

use crate::allocator::AllocState;
use crate::config::Config;
use crate::counters::Counters;
use crate::data_path::DataPath;
use crate::error::{Error, Result};
use crate::liveness::PeerWatch;
use crate::pe_device::Device;
use crate::route::Route;
use crate::sym::SymBuf;
use crate::team_state::TeamState;

/// A running PE: owns the bootstrap, the symmetric heap and the peer mappings.
///
/// `Runtime` is `Send + Sync`: one-sided operations may be issued from several threads.
/// Collective calls (allocation, `barrier_all`) must be made by one thread per PE at a
/// time, in the same order on every PE.
pub struct Runtime {
    pub(crate) config: Config,
    pub(crate) bootstrap: Box<dyn Bootstrap>,
    /// The proxy channel of device-initiated requests to remote PEs (a PE with a
    /// transport); None otherwise. Declared before `path`: its thread issues on the
    /// transport, so it is joined first.
    pub(crate) proxy: Option<crate::proxy::ProxyChannel>,
    /// Every host operation's way to a PE's heap: topology, heap, routes, host copy,
    /// transport and counters (`data_path.rs`).
    pub(crate) path: DataPath,
    pub(crate) watch: PeerWatch,
    pub(crate) allocs: Mutex<AllocState>,
    /// Serializes barrier_all and holds its epoch counter.
    pub(crate) barrier: symmem_sync::barrier::Epoch,
    /// Every PE's heap is mapped here, so `barrier_all` can use the heap flags. Fixed
    /// after `start`; computed once instead of scanning all PEs on every barrier.
    pub(crate) all_mapped: bool,
    /// What device code (kernels on the CPU executor, or a PTX module) reads.
    pub(crate) device_state: DeviceState,
    /// The array `device_state.peer_bases` points to on a CPU PE.
    pub(crate) _peer_bases: Box<[u64]>,
    /// The GPU of a GPU PE and what its kernels need; None on a CPU PE.
    pub(crate) device: Option<Device>,
    /// The runtime's helper kernels on a GPU PE (host atomics, signals, on-stream ops).
    #[cfg(feature = "cuda")]
    pub(crate) helpers: crate::module::Helpers,
    /// Team slots and counters (`team.rs`).
    pub(crate) teams: TeamState,
    /// Finalize ran (explicitly, or in drop).
    pub(crate) finalized: bool,
    /// The hang report's wait records and side path; None when the report is off.
    pub(crate) hang: Option<crate::hang::HangReport>,
    /// The record where kernels' slow device waits show for the hang report (held for its
    /// source on the board); None when the report is off.
    pub(crate) _device_waits: Option<crate::device_waits::DeviceWaits>,
}

impl Runtime {
    /// This PE's number, `0..n_pes()` (`nvshmem_my_pe`).
    #[inline]
    pub fn my_pe(&self) -> usize {
        self.path.topo().my_pe()
    }

    /// The number of PEs in the job (`nvshmem_n_pes`).
    #[inline]
    pub fn n_pes(&self) -> usize {
        self.path.topo().n_pes()
    }

    /// The node identity of `pe`: `SYMMEM_NODE_ID`, or by default its kernel boot id and
    /// IPC, network and PID namespaces, preceded by the launcher's node where the launcher
    /// tells one. PEs with equal identities share memory.
    pub fn node_of(&self, pe: usize) -> Result<&str> {
        self.path.check_pe("node_of", pe)?;
        Ok(self.path.topo().node(pe))
    }

    /// The hostname of `pe`'s machine, for messages. Not a node identity: containers on
    /// different machines may share a hostname (compare [`Self::node_of`] instead).
    pub fn hostname_of(&self, pe: usize) -> Result<&str> {
        self.path.check_pe("hostname_of", pe)?;
        Ok(self.path.topo().host(pe))
    }

    /// PEs that share this PE's node (and so its memory), including this PE.
    pub fn local_pes(&self) -> &[usize] {
        self.path.topo().local_pes()
    }

    /// The configuration this runtime was started with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Which bootstrap the job uses.
    pub fn bootstrap_kind(&self) -> symmem_bootstrap::BootstrapKind {
        self.bootstrap.kind()
    }

    /// Symmetric heap bytes available to allocations (excludes the runtime's reserve).
    pub fn heap_capacity(&self) -> usize {
        self.lock_allocs().allocator.capacity()
    }

    /// The state device code of this PE reads: what a PTX module's `SYMMEM_DEVICE_STATE`
    /// is filled with, and what the CPU executor installs for each kernel thread.
    pub fn device_state(&self) -> &DeviceState {
        &self.device_state
    }

    /// Whether this PE is a GPU PE (its heap is GPU memory; kernels run on its GPU).
    pub fn is_gpu(&self) -> bool {
        self.device.is_some()
    }

    /// The ordinal of this PE's GPU among the visible ones (what CUDA, DLPack and torch
    /// call the device index), or `None` on a CPU PE.
    pub fn gpu_ordinal(&self) -> Option<usize> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            return Some(d.gpu.ordinal);
        }
        None
    }

    /// A one-line description of this PE's device: `cpu`, or the GPU's ordinal, name
    /// and PCI bus id.
    pub fn device_description(&self) -> String {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            let g = &d.gpu;
            return format!(
                "GPU {} ({}, sm_{}{}, {})",
                g.ordinal, g.name, g.compute_capability.0, g.compute_capability.1, g.pci_bus_id
            );
        }
        "cpu".into()
    }

    /// This PE's CPUs and who chose them, e.g. `bound to CPUs 1 (symrun --bind-to core)`
    /// or `runs on CPUs 0-1 (not bound by symmem)`: the CPUs the calling thread may run
    /// on, which every thread the runtime starts inherits.
    pub fn cpu_binding(&self) -> String {
        #[cfg(feature = "cuda")]
        let narrowed = self
            .device
            .as_ref()
            .and_then(|d| d.gpu.cpus_narrowed.as_deref());
        #[cfg(not(feature = "cuda"))]
        let narrowed = None;
        crate::binding::describe(narrowed)
    }

    /// This PE's operation counters since init: ops and bytes per path (direct, the
    /// job's remote transport, proxy) and the proxy ring's high-water mark (see [`Counters`] for what each
    /// counts; device operations through P2P pointers in kernels are not counted). Also
    /// printed at finalize when `SYMMEM_DEBUG` is `info` or more verbose.
    pub fn counters(&self) -> Counters {
        self.path
            .counters()
            .snapshot(self.proxy.as_ref().map(|p| p.stats()))
    }

    /// Symmetric heap bytes currently free.
    pub fn heap_free(&self) -> usize {
        self.lock_allocs().allocator.free_bytes()
    }

    /// A direct pointer to `buf` in `pe`'s heap (`nvshmem_ptr`): `Some` when `pe`'s heap is
    /// mapped into this process (same node, P2P enabled, and on GPU PEs a GPU this one
    /// can access), `None` otherwise. On a CPU PE it is a host pointer; on a GPU PE a
    /// device pointer, for kernels (the host cannot dereference it). `ptr(&buf, my_pe)`
    /// is the symmetric address device operations take.
    ///
    /// Reading or writing through the pointer is up to the caller: other PEs may access
    /// the same memory concurrently.
    ///
    /// With `SYMMEM_ORDERING=weak` it is `None` for every peer, as for a peer on another
    /// node: stores through a pointer would bypass the reordering that mode exists for.
    pub fn ptr<T>(&self, buf: &SymBuf<T>, pe: usize) -> Result<Option<std::ptr::NonNull<T>>> {
        self.path.check_buf("ptr", buf)?;
        self.path.check_pe("ptr", pe)?;
        if pe != self.my_pe() && matches!(self.path.route(pe), Route::Remote) {
            return Ok(None);
        }
        Ok(self
            .path
            .heap()
            .base(pe)
            .and_then(|b| std::ptr::NonNull::new((b as usize + buf.offset) as *mut T)))
    }

    /// This PE's copy of `buf` as a [`SymSlice`](symmem_device::SymSlice): the typed
    /// kernel argument whose device operations check every range against it.
    ///
    /// ```ignore
    /// let (dst, src) = (rt.sym_slice(&dst)?, rt.sym_slice(&src)?);
    /// unsafe { rt.launch(&m, my_kernels::scatter::KERNEL, 1, 128, (dst, src))? };
    /// ```
    pub fn sym_slice<T>(&self, buf: &SymBuf<T>) -> Result<symmem_device::SymSlice<T>> {
        self.sym_slice_range(buf, ..)
    }

    /// Elements `range` of this PE's copy of `buf` as a
    /// [`SymSlice`](symmem_device::SymSlice); a range outside `buf` is refused, naming it.
    pub fn sym_slice_range<T>(
        &self,
        buf: &SymBuf<T>,
        range: impl std::ops::RangeBounds<usize>,
    ) -> Result<symmem_device::SymSlice<T>> {
        use std::ops::Bound;
        let op = "sym_slice";
        self.path.check_buf(op, buf)?;
        let me = self.my_pe();
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => buf.len,
        };
        if start > end || end > buf.len {
            return Err(self
                .path
                .out_of_bounds(op, buf, me, start, end.saturating_sub(start)));
        }
        let base = self
            .path
            .heap()
            .base(me)
            .ok_or_else(|| Error::InvalidArgument {
                op,
                reason: "this PE's heap is not mapped".into(),
            })?;
        let ptr = (base as usize + buf.offset) as *mut T;
        // SAFETY: `ptr..ptr + buf.len` is `buf` in this PE's heap (a symmetric address
        // range, alive until `buf` is freed) and `start <= end <= buf.len`.
        Ok(unsafe { symmem_device::SymSlice::from_raw_parts(ptr.add(start), end - start) })
    }

    #[cfg(feature = "cuda")]
    /// This PE's device resources, or the error for a host-memory PE.
    pub(crate) fn device_resources(
        &self,
        op: &'static str,
    ) -> Result<&crate::cuda::DeviceResources> {
        self.device.as_ref().ok_or_else(|| Error::NoGpu {
            op,
            pe: self.my_pe(),
            reason: "this is a CPU PE".into(),
        })
    }

    /// Finalizes this PE (`nvshmem_finalize`): waits until every PE has finalized its
    /// use of the heap, then releases everything. Collective. Dropping the runtime does the
    /// same but can only log an error. After a peer's failure is known it fails at once,
    /// naming that PE, and still releases everything.
    pub fn finalize(mut self) -> Result<()> {
        self.finalize_inner()
    }

    fn finalize_inner(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.finalized, true) {
            return Ok(());
        }
        self.record_failure_cause();
        // No kernel runs now: the proxy issues what is left in its ring, then stops.
        if let Some(p) = &self.proxy {
            p.shutdown();
        }
        // This PE's remote puts must land before peers leave; then peers may still read
        // or write this PE's heap until they, too, reach finalize. The arrival barrier
        // waits for PEs that are late but alive however late they are; the bootstrap's,
        // with its deadline, then only for PEs already on their way.
        let quiet = self
            .wait_for_streams("finalize")
            .and_then(|()| self.path.transport().map_or(Ok(()), |t| Ok(t.quiet()?)));
        // Only now announce finalize: a peer still in a barrier that this PE left takes
        // the announcement for a PE that skipped it unless its flag is set, and this PE's
        // signals of that barrier may have been in flight until the quiet above (a
        // transport route, or weak ordering's buffer, even to a same-node peer).
        if let Some(cb) = self.path.heap().control(self.my_pe()) {
            cb.finalizing.0.store(1, Ordering::Release);
        }
        // A peer already known to have failed will never arrive: fail at once, naming it,
        // instead of signalling it (a transport may retry a dead peer until SYMMEM_TIMEOUT:
        // the ofi transport's tcp;ofi_rxm did, seen in the kill -9 matrix) and waiting.
        let barrier = self
            .check_health("finalize")
            .and_then(|()| self.arrive_all("finalize"))
            .and_then(|()| Ok(self.bootstrap.barrier()?));
        if let Some(t) = self.path.transport() {
            t.shutdown();
        }
        crate::counters::log(self.my_pe(), &self.counters());
        if quiet.is_err() || barrier.is_err() {
            // The job is broken (a peer dead or unreachable): a collective teardown at exit
            // (MPI_Finalize) could wait for it forever.
            self.bootstrap.peer_lost();
        }
        quiet?;
        barrier?;
        tracing::debug!(pe = self.my_pe(), "symmem finalized");
        Ok(())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.finalized {
            // A panicking PE will not take part in anything collective again: tell the
            // others now instead of making them wait in finalize's barrier.
            self.finalized = true;
            self.record_failure_cause();
            if let Some(cb) = self.path.heap().control(self.my_pe()) {
                cb.finalizing.0.store(1, Ordering::Release);
            }
            self.bootstrap
                .abort(&format!("PE {} panicked", self.my_pe()));
            if let Some(p) = &self.proxy {
                p.shutdown();
            }
            if let Some(t) = self.path.transport() {
                t.shutdown();
            }
            return;
        }
        if let Err(e) = self.finalize_inner() {
            tracing::error!(pe = self.my_pe(), "finalize during drop failed: {e}");
        }
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("my_pe", &self.my_pe())
            .field("n_pes", &self.n_pes())
            .field("node", &self.path.topo().node(self.my_pe()))
            .field("host", &self.config.hostname)
            .field("bootstrap", &self.bootstrap.kind())
            .field("heap", &self.path.heap())
            .finish()
    }
}
