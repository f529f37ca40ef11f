//! Memory registration: the whole heap once (host memory with `ibv_reg_mr`, GPU memory
//! through dma-buf), and a small registered bounce buffer for payloads outside the heap.
//!
//! # GPU heaps
//! GPUDirect RDMA first asks CUDA for a dma-buf of the heap's range
//! (`cuMemGetHandleForAddressRange`) and registers it with `ibv_reg_dmabuf_mr`. If that
//! fails it tries `ibv_reg_mr` on the device address, which works where the
//! `nvidia_peermem` module is loaded. If both fail, connecting fails with both causes.
//! There is no silent fallback: with `SYMMEM_ALLOW_HOST_STAGING=1` a PE first checks
//! whether its GPU heap can be registered ([`probe_gpu_registration`]), and if not the
//! job agrees on the socket transport instead (see `transport::agree`), with a warning.
//!
//! # Bounce buffer
//! Host API payloads are user buffers the NIC cannot reach. They are copied through a
//! registered buffer of `SLOTS` slots of `SLOT_BYTES` each, plus `WORDS` 8-byte words for
//! atomic results and signal values. A slot is taken when its WR is posted and given back
//! when the WR's completion is polled.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::AccessFlags;

use super::device::LocalPort;
use super::qp::remote_access;
use crate::config::TransportConfig;
use crate::error::{Error, GpuHeapError, Result};
use crate::interface::HeapRegion;

/// Payload slots in the bounce buffer.
pub(crate) const SLOTS: usize = 32;
/// Bytes per payload slot (a put larger than this is cut into slot-sized WRs).
pub(crate) const SLOT_BYTES: usize = 128 << 10;
/// 8-byte words for atomic results and signal values.
pub(crate) const WORDS: usize = 256;

/// A hint for an `ibv_reg_mr`-style failure with `errno`.
pub(crate) fn reg_hint(errno: Option<i32>) -> &'static str {
    match errno {
        Some(libc::ENOMEM) => {
            " (locked-memory limit too small: raise `ulimit -l`, or run containers with --ulimit memlock=-1)"
        }
        Some(libc::EFAULT) => " (the address range is not mapped memory the device can pin)",
        Some(libc::EOPNOTSUPP) => {
            " (libibverbs or its provider does not support this registration: dma-buf needs rdma-core 34+ and Linux 5.12+)"
        }
        Some(libc::EINVAL) => " (the provider refused the range or the access flags)",
        _ => "",
    }
}

/// Registers this PE's heap for remote read, write and atomics; see the module docs.
pub(crate) fn register_heap(
    pd: &Arc<ProtectionDomain>,
    heap: HeapRegion,
    export: Option<&dyn Fn() -> Result<OwnedFd, GpuHeapError>>,
    config: &TransportConfig,
    me: usize,
    port: &LocalPort,
) -> Result<Arc<MemoryRegion>> {
    if heap.host {
        // SAFETY: the heap mapping is `heap.len` bytes at `heap.base` and outlives the
        // transport (the runtime shuts the transport down, dropping this MR, before it
        // unmaps the heap).
        return unsafe { pd.reg_mr(heap.base as usize, heap.len, remote_access()) }.map_err(|e| {
            let errno = reg_errno(&e);
            init_error(
                me,
                format!(
                    "registering the {}-byte heap with {}: ibv_reg_mr failed: {:?}{}",
                    heap.len,
                    port.name(),
                    e.0,
                    reg_hint(errno)
                ),
            )
        });
    }
    register_gpu(pd, heap, export).map_err(|cause| {
        init_error(
            me,
            format!(
                "the GPU heap cannot be registered with {} for GPUDirect RDMA: {cause}{}",
                port.name(),
                crate::agree::staging_hint(config.allow_host_staging)
            ),
        )
    })
}

/// Whether the NIC that `config` selects can register the GPU heap `heap`: registers it
/// once and releases it, or says why not (naming the device). Decides host staging.
pub(crate) fn probe_gpu_registration(
    config: &TransportConfig,
    heap: HeapRegion,
    export: Option<&dyn Fn() -> Result<OwnedFd, GpuHeapError>>,
) -> std::result::Result<(), String> {
    let (ctx, port) = super::device::open(config)?;
    let pd = ctx
        .alloc_pd()
        .map_err(|e| format!("{}: ibv_alloc_pd failed: {e:?}", port.name()))?;
    register_gpu(&pd, heap, export)
        .map(drop)
        .map_err(|cause| format!("{}: {cause}", port.name()))
}

fn init_error(me: usize, detail: String) -> Error {
    Error::Transport {
        transport: "ib",
        op: "init",
        me,
        pe: me,
        detail,
    }
}

fn reg_errno(e: &sideway::ibverbs::memory_region::RegisterMemoryRegionError) -> Option<i32> {
    match &e.0 {
        sideway::ibverbs::memory_region::RegisterMemoryRegionErrorKind::Ibverbs(io) => {
            io.raw_os_error()
        }
        _ => None,
    }
}

/// dma-buf first (from `export`, the runtime's `cuMemGetHandleForAddressRange`), then
/// `nvidia_peermem`; the error carries both causes.
fn register_gpu(
    pd: &Arc<ProtectionDomain>,
    heap: HeapRegion,
    export: Option<&dyn Fn() -> Result<OwnedFd, GpuHeapError>>,
) -> std::result::Result<Arc<MemoryRegion>, String> {
    let Some(export) = export else {
        return Err(
            "this PE cannot export its GPU heap as a dma-buf (no CUDA support in this build)"
                .into(),
        );
    };
    let dmabuf = match export() {
        Ok(owned) => {
            // SAFETY: `owned` is a dma-buf exporting the heap's `heap.len` bytes, which stay
            // mapped while the MR lives (see `register_heap`); iova = the heap's device
            // address, so remote addresses are heap addresses as on host heaps.
            let r = unsafe {
                pd.reg_dmabuf_mr(
                    0,
                    heap.len,
                    heap.base,
                    std::os::fd::AsRawFd::as_raw_fd(&owned),
                    remote_access(),
                )
            };
            // The MR keeps its own reference to the dma-buf; `owned` closes ours.
            match r {
                Ok(mr) => return Ok(mr),
                Err(e) => format!(
                    "ibv_reg_dmabuf_mr failed: {:?}{}",
                    e.0,
                    reg_hint(reg_errno(&e))
                ),
            }
        }
        Err(e) => format!(
            "no dma-buf support: {e} (dma-buf needs the NVIDIA open kernel module, driver 515+ and Linux 5.12+)"
        ),
    };
    // SAFETY: with nvidia_peermem the provider pins the GPU pages behind the device address
    // range, which stays mapped while the MR lives (see `register_heap`).
    match unsafe { pd.reg_mr(heap.base as usize, heap.len, remote_access()) } {
        Ok(mr) => {
            tracing::info!(target: "init::transport", "GPU heap registered through nvidia_peermem ({dmabuf})");
            Ok(mr)
        }
        Err(e) => {
            let peermem = if std::path::Path::new("/sys/module/nvidia_peermem").exists() {
                "nvidia_peermem is loaded"
            } else {
                "nvidia_peermem is not loaded"
            };
            Err(format!(
                "{dmabuf}; no peermem: ibv_reg_mr on the GPU address failed ({:?}; {peermem})",
                e.0
            ))
        }
    }
}

/// A free list of fixed-size pieces (bounce slots or words), by index.
#[derive(Debug)]
pub(crate) struct Pool {
    free: Vec<usize>,
    n: usize,
}

impl Pool {
    /// `n` free pieces.
    pub(crate) fn new(n: usize) -> Self {
        Pool {
            free: (0..n).rev().collect(),
            n,
        }
    }

    /// Takes a free piece, if any.
    pub(crate) fn take(&mut self) -> Option<usize> {
        self.free.pop()
    }

    /// Gives piece `i` back.
    pub(crate) fn give(&mut self, i: usize) {
        debug_assert!(
            i < self.n && !self.free.contains(&i),
            "piece {i} given twice"
        );
        self.free.push(i);
    }

    /// Whether no piece is free.
    pub(crate) fn all_taken(&self) -> bool {
        self.free.is_empty()
    }
}

/// The bounce buffer: `WORDS` words, then `SLOTS` payload slots. Registered by
/// [`register_bounce`]; the registration is owned by the NIC, which the transport drops
/// before this memory.
pub(crate) struct Bounce {
    /// Owns the memory; `u64` for 8-byte alignment of the words.
    _buf: Box<[u64]>,
    base: *mut u8,
    /// The registration's local key (0 until registered).
    pub lkey: u32,
    /// Free payload slots.
    pub slots: Pool,
    /// Free words.
    pub words: Pool,
}

// SAFETY: `base` points into `_buf`, which the struct owns and never reallocates; the
// bounce buffer is only used under the transport's state lock.
unsafe impl Send for Bounce {}

/// Bytes of the bounce buffer.
pub(crate) const BOUNCE_BYTES: usize = WORDS * 8 + SLOTS * SLOT_BYTES;

impl Bounce {
    /// Allocates the bounce buffer (zeroed).
    pub(crate) fn new() -> Self {
        let mut buf = vec![0u64; BOUNCE_BYTES / 8].into_boxed_slice();
        let base = buf.as_mut_ptr().cast::<u8>();
        Bounce {
            _buf: buf,
            base,
            lkey: 0,
            slots: Pool::new(SLOTS),
            words: Pool::new(WORDS),
        }
    }

    /// Free payload slots (tests check that every slot comes back).
    #[cfg(test)]
    pub(crate) fn slots_free(&self) -> usize {
        self.slots.free.len()
    }

    /// Free words.
    #[cfg(test)]
    pub(crate) fn words_free(&self) -> usize {
        self.words.free.len()
    }

    /// Address of word `i`.
    pub(crate) fn word(&self, i: usize) -> *mut u64 {
        debug_assert!(i < WORDS);
        // SAFETY: in bounds of the buffer (i < WORDS).
        unsafe { self.base.add(i * 8) }.cast()
    }

    /// Address of payload slot `i`.
    pub(crate) fn slot(&self, i: usize) -> *mut u8 {
        debug_assert!(i < SLOTS);
        // SAFETY: in bounds of the buffer (i < SLOTS).
        unsafe { self.base.add(WORDS * 8 + i * SLOT_BYTES) }
    }
}

/// Registers `bounce` for local writes (READ destinations, atomic results) and records its
/// local key. The caller keeps the region alive no longer than `bounce`.
pub(crate) fn register_bounce(
    pd: &Arc<ProtectionDomain>,
    bounce: &mut Bounce,
) -> std::result::Result<Arc<MemoryRegion>, String> {
    // SAFETY: the buffer is BOUNCE_BYTES bytes owned by `bounce`; the transport state
    // declares the NIC (which owns this region) before the bounce buffer, so the region is
    // deregistered before the memory is freed.
    let mr = unsafe { pd.reg_mr(bounce.base as usize, BOUNCE_BYTES, AccessFlags::LocalWrite) }
        .map_err(|e| {
            format!(
                "registering the {BOUNCE_BYTES}-byte bounce buffer: ibv_reg_mr failed: {:?}{}",
                e.0,
                reg_hint(reg_errno(&e))
            )
        })?;
    bounce.lkey = mr.lkey();
    Ok(mr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_hand_out_each_piece_once() {
        let mut p = Pool::new(3);
        let got: Vec<usize> = std::iter::from_fn(|| p.take()).collect();
        assert_eq!(got, vec![0, 1, 2]);
        assert!(p.take().is_none());
        assert!(p.all_taken());
        for i in got {
            p.give(i);
        }
        assert!(!p.all_taken());
        assert_eq!(p.free.len(), 3);
    }

    #[test]
    fn registration_failures_carry_their_usual_cause() {
        assert!(reg_hint(Some(libc::ENOMEM)).contains("ulimit -l"));
        assert!(reg_hint(Some(libc::EOPNOTSUPP)).contains("dma-buf"));
        assert_eq!(reg_hint(None), "");
        // The word area comes first and keeps 8-byte alignment for atomics.
        assert_eq!((WORDS * 8) % 8, 0);
        assert!(SLOT_BYTES as u64 <= super::super::wr::MAX_MSG);
    }
}
