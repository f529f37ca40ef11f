//! A non-blocking CUDA stream for copies made by the runtime's own threads while a kernel
//! may be running: the proxy thread's staging copies and the socket transport's copies
//! into this PE's GPU heap.
//!
//! Kernels launched through `Runtime::launch` run on the legacy default stream, and a
//! copy on that stream waits for them. A copy a running kernel waits for (a blocking
//! device put's source, a peer's put_signal data) would then never start. A
//! `CU_STREAM_NON_BLOCKING` stream does not synchronize with the legacy stream, so these
//! copies run beside the kernel.

use std::sync::Arc;

use cudarc::driver::sys;

use super::{check, Gpu};
use crate::error::Result;

/// A `CU_STREAM_NON_BLOCKING` stream of a GPU PE's context; destroyed on drop.
pub(crate) struct CopyStream {
    stream: sys::CUstream,
    /// Last: the stream is destroyed while the context is still retained.
    gpu: Arc<Gpu>,
}

// SAFETY: a stream handle may be used from any thread once the context is current (every
// method makes it current); the driver is thread-safe.
unsafe impl Send for CopyStream {}
// SAFETY: as above.
unsafe impl Sync for CopyStream {}

impl CopyStream {
    /// A new stream; `what` names its user in errors.
    pub(crate) fn new(gpu: &Arc<Gpu>, what: &str) -> Result<Self> {
        gpu.make_current()?;
        let mut stream = std::ptr::null_mut();
        // SAFETY: a valid out-parameter; the context is current.
        check(
            unsafe {
                sys::cuStreamCreate(
                    &mut stream,
                    sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                )
            },
            || format!("cuStreamCreate(CU_STREAM_NON_BLOCKING) for {what}"),
            gpu.pe,
        )?;
        Ok(CopyStream {
            stream,
            gpu: gpu.clone(),
        })
    }

    /// The raw stream, to launch on.
    pub(crate) fn raw(&self) -> sys::CUstream {
        self.stream
    }

    /// Waits until everything queued on the stream has finished.
    pub(crate) fn synchronize(&self, op: &str) -> Result<()> {
        self.gpu.make_current()?;
        // SAFETY: a live stream of the current context.
        check(
            unsafe { sys::cuStreamSynchronize(self.stream) },
            || format!("cuStreamSynchronize ({op})"),
            self.gpu.pe,
        )
    }

    /// Copies `len` bytes from host `src` to device address `dst`; complete on return.
    ///
    /// # Safety
    /// `src` is valid for `len` bytes; `dst..dst+len` is device memory mapped in this
    /// context.
    pub(crate) unsafe fn copy_to_device(
        &self,
        op: &str,
        dst: u64,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        self.gpu.make_current()?;
        // SAFETY: forwarded from the caller; the stream is live.
        check(
            unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), len, self.stream) },
            || format!("cuMemcpyHtoDAsync of {len} bytes to {dst:#x} ({op})"),
            self.gpu.pe,
        )?;
        self.synchronize(op)
    }

    /// Copies `len` bytes from device address `src` to host `dst`; complete on return.
    ///
    /// # Safety
    /// `dst` is valid for `len` bytes of writes; `src..src+len` is device memory mapped
    /// in this context.
    pub(crate) unsafe fn copy_from_device(
        &self,
        op: &str,
        dst: *mut u8,
        src: u64,
        len: usize,
    ) -> Result<()> {
        self.gpu.make_current()?;
        // SAFETY: forwarded from the caller; the stream is live.
        check(
            unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, self.stream) },
            || format!("cuMemcpyDtoHAsync of {len} bytes from {src:#x} ({op})"),
            self.gpu.pe,
        )?;
        self.synchronize(op)
    }
}

impl Drop for CopyStream {
    fn drop(&mut self) {
        if self.gpu.make_current().is_err() {
            return;
        }
        // SAFETY: created by `new`, destroyed once; its users are gone with it.
        let rc = unsafe { sys::cuStreamDestroy_v2(self.stream) };
        self.gpu.record_drop_failure(rc, "cuStreamDestroy");
    }
}
