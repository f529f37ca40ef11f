//! The symmetric heap: this PE's memory that peers read and write, and the mappings of
//! same-node peers' heaps.
//!
//! Two memory backends ([`Backend`]) hold the data: a memfd in host memory (CPU PEs) or
//! CUDA VMM memory on the GPU (GPU PEs). Either way the first [`RESERVED`] bytes of the data
//! heap belong to the runtime ([`DeviceControl`]: the device barrier's flags) and user
//! allocations start after them, at the same offsets on every PE.
//!
//! The host control words ([`ControlBlock`]: the host barrier, the failure cause, the
//! finalizing flag) live in a small memfd of their own on every PE, CPU or GPU, because
//! liveness and the host barrier use CPU atomics. Same-node PEs exchange both over Unix
//! sockets (`fd_pass`) and map them.

#[cfg(feature = "cuda")]
pub mod cuda;
pub(crate) mod fd_pass;
mod memfd;
mod peer_cred;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::topology::Topology;
pub use memfd::MemfdHeap;
use memfd::{create_memfd, Mapping};

/// Bytes at the start of every data heap reserved for the runtime.
pub const RESERVED: usize = 64 * 1024;

/// The largest alignment an allocation can ask for (`alloc_aligned`, `shmem_align`,
/// `nvshmem_align`): 16 MiB. Every data heap starts at a multiple of it, so that an
/// allocation's offset, the same on every PE, is aligned exactly when its address is: on
/// every PE, in its own heap and in every same-node peer's mapping. Memfd heaps are mapped
/// at a multiple of it plus their colour (`heap/memfd.rs`), VMM heaps reserve their range
/// aligned to it, and a legacy-IPC GPU heap starts at the first multiple of it inside an
/// allocation that much larger (`heap/cuda.rs`; there only the own address is
/// guaranteed, a peer's mapping is placed by the driver).
///
/// Why not more: an address can only be aligned as far as its heap's base is, so a larger
/// limit would take base address bits from the per-PE heap colours (bits 24–27, see
/// `HEAP_COLOUR_ALIGN` in `heap/memfd.rs`), which keep the same word of two same-node
/// heaps out of one AMD L1 microtag: each doubling halves the distinct colours, and
/// 256 MiB would leave none. 16 MiB covers page sizes, 2 MiB huge pages and what Sandia
/// OpenSHMEM's `shmemalign` test asks (8 B … 8 MiB, the address checked on every PE),
/// with one doubling to spare and 16 colours left; 1 GiB huge-page alignment is not
/// offered. A larger alignment fails on every PE with
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming this limit.
pub const MAX_ALIGN: usize = 16 << 20;

const _: () = assert!(MAX_ALIGN.is_power_of_two() && RESERVED <= MAX_ALIGN);

/// Most rounds a dissemination barrier needs: ceil(log2(n_pes)) for up to 2^32 PEs.
pub const MAX_BARRIER_ROUNDS: usize = 32;

/// A `u64` alone on its cache line.
#[repr(C, align(64))]
pub struct PaddedU64(pub AtomicU64);

/// The host control words of a PE, in a memfd of their own. Other PEs write into it;
/// everything here is atomic.
#[repr(C)]
pub struct ControlBlock {
    /// `barrier[r]` is written by this PE's round-`r` partner in the dissemination barrier.
    pub barrier: [PaddedU64; MAX_BARRIER_ROUNDS],
    /// 0, or 1 + the PE whose failure this PE detected. Written by this PE before it gives
    /// up, and always before it sets `finalizing`; read by peers that find this PE dead or
    /// finalizing, so that they name the root cause rather than a PE that merely left in
    /// reaction to it. The mapping outlives the process.
    pub failure_cause: PaddedU64,
    /// Nonzero once this PE has entered finalize: peers waiting for it in a barrier it
    /// will never join fail instead of waiting for the bootstrap deadline.
    pub finalizing: PaddedU64,
}

/// Bytes of the control memfd.
const CONTROL_LEN: usize = std::mem::size_of::<ControlBlock>();

/// The runtime's words at the start of every data heap (host or GPU memory), used by
/// device code. Its layout is part of the device contract: `DeviceState::barrier_off` and
/// `epoch_off` are offsets of its fields, asserted below.
#[repr(C)]
pub struct DeviceControl {
    /// Flags of the device-side dissemination barrier (`DeviceState::barrier_off`), one
    /// cache line per round.
    pub device_barrier: [PaddedU64; MAX_BARRIER_ROUNDS],
    /// This PE's device barrier epoch (`DeviceState::epoch_off`), advanced by the one
    /// device thread per PE that runs `sync_all`.
    pub device_epoch: PaddedU64,
}

/// Heap offset of the device barrier flags.
pub const DEVICE_BARRIER_OFF: usize = std::mem::offset_of!(DeviceControl, device_barrier);
/// Heap offset of the device barrier epoch.
pub const DEVICE_EPOCH_OFF: usize = std::mem::offset_of!(DeviceControl, device_epoch);

const _: () = {
    assert!(std::mem::size_of::<DeviceControl>() <= RESERVED);
    assert!(DEVICE_BARRIER_OFF == 0);
    assert!(DEVICE_EPOCH_OFF == 64 * MAX_BARRIER_ROUNDS);
    assert!(std::mem::size_of::<PaddedU64>() == 64);
};

/// Where a PE's data heap lives.
#[derive(Debug)]
pub enum Backend {
    /// Host memory (a memfd): host-accessible, mapped by same-node CPU PEs.
    Memfd(MemfdHeap),
    /// GPU memory (CUDA VMM or legacy IPC): reached by the host through copies.
    #[cfg(feature = "cuda")]
    Cuda(cuda::CudaHeap),
}

impl Backend {
    /// Whether the host can load and store through the heap's addresses.
    pub fn host_accessible(&self) -> bool {
        match self {
            Backend::Memfd(_) => true,
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => false,
        }
    }

    fn base(&self) -> u64 {
        match self {
            Backend::Memfd(m) => m.base(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => c.base(),
        }
    }

    /// Tag byte + backend description, and the fds, that peers need to map this heap.
    fn export(&self) -> (Vec<u8>, Vec<BorrowedFd<'_>>) {
        match self {
            Backend::Memfd(m) => (vec![b'm'], vec![m.fd()]),
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => {
                let mut d = vec![b'c'];
                d.extend_from_slice(c.description());
                (d, c.fds())
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Backend::Memfd(_) => "host memory",
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => "GPU memory",
        }
    }
}

/// This PE's heap and its mappings of same-node peers' heaps and control blocks.
pub struct SymmetricHeap {
    len: usize,
    /// Address of each PE's data heap in this process (host or device address, as the
    /// backend says); None if not mapped.
    bases: Vec<Option<u64>>,
    /// Each PE's control block, if mapped here.
    controls: Vec<Option<NonNull<ControlBlock>>>,
    /// Keeps the control mappings alive (own first).
    _control_mappings: Vec<Mapping>,
    _control_fd: OwnedFd,
    backend: Backend,
}

// SAFETY: the heap is a set of address ranges that live as long as it does; the runtime
// synchronizes accesses through them with atomics and barriers.
unsafe impl Send for SymmetricHeap {}
// SAFETY: see above.
unsafe impl Sync for SymmetricHeap {}

impl SymmetricHeap {
    /// Creates this PE's control block and binds its exchange socket. Part one of setup,
    /// done before the topology allgather so that peers can connect right after it.
    pub fn create(job: u64, topo_rank: usize) -> Result<PendingHeap> {
        let control_fd = create_memfd(
            &format!("symmem-control-{job:016x}-pe{topo_rank}"),
            CONTROL_LEN,
        )?;
        let control = Mapping::map(control_fd.as_fd(), CONTROL_LEN, "this PE's control block")?;
        let listener = fd_pass::listen(job, topo_rank)?;
        Ok(PendingHeap {
            job,
            control_fd,
            control,
            listener,
        })
    }

    /// Address of `pe`'s data heap in this process, if mapped: a host address when
    /// [`Self::host_accessible`], else a device address.
    #[inline]
    pub fn base(&self, pe: usize) -> Option<u64> {
        self.bases.get(pe).copied().flatten()
    }

    /// Whether the data heaps are host memory.
    pub fn host_accessible(&self) -> bool {
        self.backend.host_accessible()
    }

    /// The data heap's backend.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // only GPU PEs ask
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Heap length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `pe`'s control block, if mapped here.
    pub fn control(&self, pe: usize) -> Option<&ControlBlock> {
        // SAFETY: every control pointer is the base of a zero-initialized (memfd),
        // page-aligned, ControlBlock-sized mapping that lives as long as `self`; all its
        // fields are atomics, so shared references are sound while other processes
        // write it.
        self.controls
            .get(pe)
            .copied()
            .flatten()
            .map(|p| unsafe { p.as_ref() })
    }
}

/// A heap whose peers are not mapped yet.
pub struct PendingHeap {
    job: u64,
    control_fd: OwnedFd,
    control: Mapping,
    listener: std::os::unix::net::UnixListener,
}

impl PendingHeap {
    /// The job id the PEs agreed on, which names this PE's memfds and heap socket.
    pub fn job(&self) -> u64 {
        self.job
    }

    /// Exchanges control blocks and data heaps with the same-node peers in `topo` (unless
    /// `map_peers` is false) and maps them. The data heap of peer `p` is mapped only if
    /// `reachable(p)` (e.g. its GPU can be accessed from this one); its control block
    /// always is.
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // reachable: GPU heaps
    pub fn connect(
        self,
        topo: &Topology,
        len: usize,
        mut backend: Backend,
        map_peers: bool,
        reachable: impl Fn(usize) -> bool,
        deadline: Instant,
    ) -> Result<SymmetricHeap> {
        let me = topo.my_pe();
        let peers: Vec<usize> = if map_peers {
            topo.local_pes()
                .iter()
                .copied()
                .filter(|&p| p != me)
                .collect()
        } else {
            Vec::new()
        };
        // Every listener exists since before the allgather, so these connects complete
        // at once into the peers' backlogs (unless something else fills them: then they
        // fail at the deadline).
        let streams = peers
            .iter()
            .map(|&p| fd_pass::connect(self.job, p, topo.pid(p), deadline))
            .collect::<Result<Vec<_>>>()?;
        let pids: Vec<(usize, u32)> = peers.iter().map(|&p| (p, topo.pid(p))).collect();
        {
            let (description, data_fds) = backend.export();
            let mut fds = vec![self.control_fd.as_fd()];
            fds.extend(data_fds);
            fd_pass::serve(
                &self.listener,
                self.job,
                me,
                len,
                &description,
                &fds,
                &pids,
                deadline,
            )?;
        }
        let mut bases = vec![None; topo.n_pes()];
        let mut controls = vec![None; topo.n_pes()];
        bases[me] = Some(backend.base());
        controls[me] = Some(self.control.base().cast());
        let mut control_mappings = vec![self.control];
        for (stream, &p) in streams.iter().zip(&peers) {
            let (description, mut fds) = fd_pass::receive(stream, self.job, p, len, deadline)?;
            let control_fd = fds.remove(0);
            let m = map_control(p, control_fd.as_fd())?;
            controls[p] = Some(m.base().cast());
            control_mappings.push(m);
            let (tag, rest) = description.split_first().unwrap_or((&0, &[]));
            bases[p] = match (&mut backend, *tag) {
                (Backend::Memfd(h), b'm') if fds.len() == 1 => {
                    Some(h.import(p, fds[0].as_fd(), len)?)
                }
                #[cfg(feature = "cuda")]
                (Backend::Cuda(h), b'c') if reachable(p) => Some(h.import(p, rest, fds, len)?),
                #[cfg(feature = "cuda")]
                (Backend::Cuda(_), b'c') => {
                    tracing::warn!(pe = me, peer = p, "no direct path to PE {p}'s GPU heap (its GPU is not peer-accessible from this one)");
                    None
                }
                (_, t) => {
                    return Err(Error::Inconsistent {
                        what: "heap kind",
                        detail: format!(
                            "PE {me} has its heap in {} but PE {p} sent a heap of kind {:?} with {} fds; every PE of a node must use the same SYMMEM_DEVICE",
                            backend.kind(),
                            t as char,
                            fds.len()
                        ),
                    });
                }
            };
        }
        tracing::debug!(
            mapped = bases.iter().filter(|b| b.is_some()).count(),
            len,
            kind = backend.kind(),
            "symmetric heap ready"
        );
        Ok(SymmetricHeap {
            len,
            bases,
            controls,
            _control_mappings: control_mappings,
            _control_fd: self.control_fd,
            backend,
        })
    }
}

/// Maps `peer`'s control block from the memfd it sent, once it passed
/// [`memfd::check_import`].
fn map_control(peer: usize, fd: BorrowedFd<'_>) -> Result<Mapping> {
    memfd::check_import(fd, peer, CONTROL_LEN, "control block")?;
    Mapping::map(fd, CONTROL_LEN, &format!("PE {peer}'s control block"))
}

impl std::fmt::Debug for SymmetricHeap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymmetricHeap")
            .field("len", &self.len)
            .field("kind", &self.backend.kind())
            .field("mapped", &self.bases.iter().filter(|b| b.is_some()).count())
            .finish()
    }
}

/// Checks that every PE uses the same heap size.
pub fn check_sizes(sizes: &[usize]) -> Result<()> {
    if sizes.windows(2).all(|w| w[0] == w[1]) {
        return Ok(());
    }
    let detail = sizes
        .iter()
        .enumerate()
        .map(|(pe, s)| format!("PE {pe}: {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(Error::Inconsistent {
        what: crate::config::SYMMETRIC_SIZE.name(),
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd};

    /// A peer's control memfd that is not sealed (created without MFD_ALLOW_SEALING) is
    /// refused before it is mapped, naming the peer.
    #[test]
    fn an_unsealed_control_memfd_is_refused() {
        // SAFETY: a valid NUL-terminated name; the fd is fresh and owned below.
        let fd = unsafe { libc::memfd_create(c"symmem-test-control".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: resizing a memfd we own.
        assert_eq!(
            unsafe { libc::ftruncate(fd.as_raw_fd(), CONTROL_LEN as libc::off_t) },
            0
        );
        let err = map_control(3, fd.as_fd()).unwrap_err().to_string();
        assert!(
            err.contains("PE 3's control block") && err.contains("seals"),
            "{err}"
        );

        let sealed = create_memfd("symmem-test-control", CONTROL_LEN).unwrap();
        map_control(3, sealed.as_fd()).expect("a sealed control memfd of the right size maps");
    }
}
