//! The symmetric heap on host memory.
//!
//! Each PE owns one memfd of `SYMMEM_SYMMETRIC_SIZE` bytes, mapped shared. Same-node PEs
//! receive each other's memfds over Unix sockets and map them too, so `ptr(sym, pe)` is a
//! plain pointer into the peer's heap. The first [`RESERVED`] bytes of every heap belong to
//! the runtime ([`ControlBlock`]); user allocations start after them, at the same offsets
//! on every PE.

mod fd_pass;
mod mapping;

use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::topology::Topology;
use mapping::{create_memfd, Mapping};

/// Bytes at the start of every heap reserved for the runtime.
pub const RESERVED: usize = 64 * 1024;

/// Most rounds a dissemination barrier needs: ceil(log2(n_pes)) for up to 2^32 PEs.
pub const MAX_BARRIER_ROUNDS: usize = 32;

/// A `u64` alone on its cache line.
#[repr(C, align(64))]
pub struct PaddedU64(pub AtomicU64);

/// The runtime's part of every PE's heap. Other PEs write into it; everything here is
/// atomic.
#[repr(C)]
pub struct ControlBlock {
    /// `barrier[r]` is written by this PE's round-`r` partner in the dissemination barrier.
    pub barrier: [PaddedU64; MAX_BARRIER_ROUNDS],
    /// 0, or 1 + the PE whose failure this PE detected. Written by this PE before it gives
    /// up, read by peers that find this PE dead, so that they name the root cause rather
    /// than a PE that merely exited in reaction to it. The mapping outlives the process.
    pub failure_cause: PaddedU64,
    /// Nonzero once this PE has entered finalize: peers waiting for it in a barrier it
    /// will never join fail instead of waiting for the bootstrap deadline.
    pub finalizing: PaddedU64,
    /// Flags of the device-side dissemination barrier (`DeviceState::barrier_off`), kept
    /// apart from the host barrier's so the two never mix epochs.
    pub device_barrier: [PaddedU64; MAX_BARRIER_ROUNDS],
    /// This PE's device barrier epoch (`DeviceState::epoch_off`), advanced by the one
    /// device thread per PE that runs `sync_all`.
    pub device_epoch: PaddedU64,
}

const _: () = assert!(std::mem::size_of::<ControlBlock>() <= RESERVED);

/// This PE's heap and its mappings of same-node peers' heaps.
pub struct SymmetricHeap {
    len: usize,
    /// Base address of each PE's heap in this process; None if not mapped.
    bases: Vec<Option<NonNull<u8>>>,
    /// Keeps every mapping alive (own heap first).
    _mappings: Vec<Mapping>,
    _memfd: OwnedFd,
}

// SAFETY: the heap is a set of address ranges that live as long as it does; the runtime
// synchronizes accesses through them with atomics and barriers.
unsafe impl Send for SymmetricHeap {}
// SAFETY: see above.
unsafe impl Sync for SymmetricHeap {}

impl SymmetricHeap {
    /// Creates this PE's memfd heap and binds its exchange socket. Part one of setup, done
    /// before the topology allgather so that peers can connect right after it.
    pub fn create(job: u64, topo_rank: usize, len: usize) -> Result<PendingHeap> {
        let memfd = create_memfd(&format!("symmem-heap-pe{topo_rank}"), len)?;
        let own = Mapping::map(memfd.as_fd(), len, "this PE's symmetric heap")?;
        let listener = fd_pass::listen(job, topo_rank)?;
        Ok(PendingHeap {
            job,
            len,
            memfd,
            own,
            listener,
        })
    }

    /// Base of `pe`'s heap in this process, if mapped.
    #[inline]
    pub fn base(&self, pe: usize) -> Option<NonNull<u8>> {
        self.bases.get(pe).copied().flatten()
    }

    /// Heap length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `pe`'s control block, if its heap is mapped here.
    pub fn control(&self, pe: usize) -> Option<&ControlBlock> {
        // SAFETY: every heap starts with a ControlBlock-sized, zero-initialized (memfd) and
        // suitably aligned (page-aligned mapping) region that stays mapped as long as
        // `self`; all its fields are atomics, so shared references are sound while other
        // processes write it.
        self.base(pe)
            .map(|b| unsafe { &*b.as_ptr().cast::<ControlBlock>() })
    }
}

/// A heap whose peers are not mapped yet.
pub struct PendingHeap {
    job: u64,
    len: usize,
    memfd: OwnedFd,
    own: Mapping,
    listener: std::os::unix::net::UnixListener,
}

impl PendingHeap {
    /// Exchanges memfds with the same-node peers in `topo` (unless `map_peers` is false)
    /// and maps them.
    pub fn connect(
        self,
        topo: &Topology,
        map_peers: bool,
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
        // at once into the peers' backlogs.
        let streams = peers
            .iter()
            .map(|&p| fd_pass::connect(self.job, p))
            .collect::<Result<Vec<_>>>()?;
        let pids: Vec<u32> = peers.iter().map(|&p| topo.pid(p)).collect();
        fd_pass::serve(
            &self.listener,
            self.job,
            me,
            self.len,
            self.memfd.as_fd(),
            &pids,
            deadline,
        )?;
        let mut bases = vec![None; topo.n_pes()];
        bases[me] = Some(self.own.base());
        let mut mappings = vec![self.own];
        for (stream, &p) in streams.iter().zip(&peers) {
            let fd = fd_pass::receive(stream, self.job, p, self.len, deadline)?;
            let m = Mapping::map(fd.as_fd(), self.len, &format!("PE {p}'s symmetric heap"))?;
            bases[p] = Some(m.base());
            mappings.push(m);
        }
        tracing::debug!(mapped = peers.len(), len = self.len, "symmetric heap ready");
        Ok(SymmetricHeap {
            len: self.len,
            bases,
            _mappings: mappings,
            _memfd: self.memfd,
        })
    }
}

impl std::fmt::Debug for SymmetricHeap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymmetricHeap")
            .field("len", &self.len)
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
        what: "SYMMEM_SYMMETRIC_SIZE",
        detail,
    })
}
