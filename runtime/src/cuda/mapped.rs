//! Pinned host memory mapped into a GPU PE's address space
//! (`cuMemHostAlloc(DEVICEMAP | PORTABLE)`): the host reaches it at one address, the GPU
//! at the one `cuMemHostGetDevicePointer` gives. The device error word, the proxy ring and
//! the proxy's staging buffer live in it.
//!
//! Never write-combined: the host polls and reads this memory, and write-combined memory
//! is slow to read (`reference/gpu-rdma-facts.md` §4).

use std::sync::Arc;

use cudarc::driver::sys;

use super::{check, Gpu};
use crate::error::Result;

/// `CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE`: mapped for the GPU, pinned for
/// every context.
const FLAGS: u32 = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;

/// Zeroed, page-aligned pinned host memory mapped for the GPU; freed on drop.
pub(crate) struct MappedHost {
    host: *mut u8,
    device: u64,
    len: usize,
    /// Last: the memory is freed while the context is still retained.
    gpu: Arc<Gpu>,
}

// SAFETY: the allocation is shared memory owned by this value; users access it through
// atomics, volatile accesses or exclusive borrows, and the driver is thread-safe.
unsafe impl Send for MappedHost {}
// SAFETY: as above.
unsafe impl Sync for MappedHost {}

impl MappedHost {
    /// Allocates `len` (> 0) zeroed bytes for `what` (named in errors).
    pub(crate) fn new(gpu: &Arc<Gpu>, len: usize, what: &str) -> Result<Self> {
        gpu.bind()?;
        let mut host = std::ptr::null_mut();
        // SAFETY: a valid out-parameter; the context is current.
        check(
            unsafe { sys::cuMemHostAlloc(&mut host, len, FLAGS) },
            || format!("cuMemHostAlloc of {len} bytes ({what})"),
            gpu.pe,
        )?;
        let mut m = MappedHost {
            host: host.cast(),
            device: 0,
            len,
            gpu: gpu.clone(),
        };
        // SAFETY: `host` is a fresh allocation of `len` bytes.
        unsafe { m.host.write_bytes(0, len) };
        // SAFETY: `host` is a DEVICEMAP allocation; a valid out-parameter.
        check(
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut m.device, host, 0) },
            || format!("cuMemHostGetDevicePointer ({what})"),
            gpu.pe,
        )?;
        Ok(m)
    }

    /// The host address.
    pub(crate) fn host(&self) -> *mut u8 {
        self.host
    }

    /// The GPU's address of the memory.
    pub(crate) fn device(&self) -> u64 {
        self.device
    }

    /// The memory as a byte slice, for the one user that owns it exclusively.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes owned by `self`, borrowed mutably through it.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.len) }
    }
}

impl Drop for MappedHost {
    fn drop(&mut self) {
        if self.gpu.make_current().is_err() {
            return;
        }
        // SAFETY: allocated by `new` and freed once; nothing uses it after its owner.
        let rc = unsafe { sys::cuMemFreeHost(self.host.cast()) };
        self.gpu.record_drop_failure(rc, "cuMemFreeHost");
    }
}
