//! Stream-ordered operations (NVSHMEM's `nvshmemx_*_on_stream`): queued on a CUDA stream
//! of a GPU PE, behind the kernels and copies already on it, without blocking the host.
//!
//! | operation | on a GPU PE | on a CPU PE |
//! |---|---|---|
//! | `put_on_stream` | `cuMemcpyDtoDAsync` into the peer-mapped heap | `put` |
//! | `put_signal_on_stream` | the copy, then the `host_signal` helper kernel (fence, signal) | `put_signal` |
//! | `signal_wait_until_on_stream` | the `stream_wait` helper kernel (one thread spins with backoff) | `signal_wait_until` |
//! | `quiet_on_stream` | the `stream_quiet` helper kernel (`fence.sc.sys`) | `quiet` |
//! | `barrier_all_on_stream` | the `stream_barrier_all` helper kernel (device `barrier_all`) | `barrier_all` |
//! | `Team::*_on_stream` (barrier, sync, broadcast, fcollect, alltoall, reduce, reducescatter) | a `stream_team_*` helper kernel: one block running the `_block` device collective | the host collective |
//! | `launch_on_stream`, `launch_by_name_on_stream` | the user's kernel, `cuLaunchKernel` on the stream | `launch`, `launch_by_name` |
//! | `get_on_stream`, and the forms with a local operand outside the heap (`put_on_stream_from`, `get_on_stream_into`, `put_signal_on_stream_from`) | see `stream_local.rs` | `get`, `put`, `put_signal` |
//!
//! A GPU stream reaches the PEs of this node with copies; a PE on another node with the
//! `stream_rma` helper kernel, through the proxy (see `stream_local.rs`).
//!
//! On a CPU PE a [`Stream`] is the calling thread: each call runs at once, in order, so
//! one program runs on both kinds of PE.

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::sym::SymRef;
use symmem_transport::int::{Cmp, SignalOp};

/// Where stream-ordered operations run: a CUDA stream of this PE's GPU, or the calling
/// thread on a CPU PE.
#[derive(Debug, Clone)]
pub struct Stream {
    kind: StreamKind,
    runtime: u64,
    /// The PE that created it, for errors.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // read by GPU errors
    pe: usize,
}

#[derive(Debug, Clone)]
enum StreamKind {
    Host,
    #[cfg(feature = "cuda")]
    Cuda(std::sync::Arc<cudarc::driver::CudaStream>),
    /// A stream another library created and owns (its `CUstream` handle, as an address).
    #[cfg(feature = "cuda")]
    Borrowed(usize),
}

impl Stream {
    /// Whether this is a CPU PE's stream, the calling thread: operations on it run at
    /// once.
    pub(crate) fn runs_now(&self) -> bool {
        matches!(self.kind, StreamKind::Host)
    }

    /// Waits until everything queued on the stream has run (on a CPU PE: at once).
    pub fn synchronize(&self) -> Result<()> {
        match &self.kind {
            StreamKind::Host => Ok(()),
            #[cfg(feature = "cuda")]
            StreamKind::Cuda(s) => s.synchronize().map_err(|e| {
                crate::cuda::cuda_error(e.0, "cuStreamSynchronize".into(), self.pe, String::new())
            }),
            #[cfg(feature = "cuda")]
            StreamKind::Borrowed(handle) => {
                // SAFETY: `stream_from_raw`'s caller keeps the stream alive while it is used.
                let rc = unsafe {
                    cudarc::driver::sys::cuStreamSynchronize(
                        *handle as cudarc::driver::sys::CUstream,
                    )
                };
                crate::cuda::check(rc, || "cuStreamSynchronize".into(), self.pe)
            }
        }
    }

    /// The `CUstream` handle of a GPU PE's stream (as an address, like
    /// [`Runtime::stream_from_raw`] takes it), to queue your own kernels and copies on
    /// (`None` on a CPU PE). It stays valid while this stream (or a clone) lives.
    #[cfg(feature = "cuda")]
    pub fn raw_handle(&self) -> Option<usize> {
        match &self.kind {
            StreamKind::Cuda(s) => Some(s.cu_stream() as usize),
            StreamKind::Borrowed(handle) => Some(*handle),
            StreamKind::Host => None,
        }
    }
}

impl Runtime {
    /// A new stream: a CUDA stream of this PE's GPU, or the calling thread on a CPU PE.
    pub fn create_stream(&self) -> Result<Stream> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            let s = d.gpu.ctx.new_stream().map_err(|e| {
                crate::cuda::cuda_error(e.0, "cuStreamCreate".into(), self.my_pe(), String::new())
            })?;
            d.track_stream(&s);
            return Ok(Stream {
                kind: StreamKind::Cuda(s),
                runtime: self.path.runtime_id(),
                pe: self.my_pe(),
            });
        }
        Ok(Stream {
            kind: StreamKind::Host,
            runtime: self.path.runtime_id(),
            pe: self.my_pe(),
        })
    }

    /// Wraps the handle of a CUDA stream of this PE's GPU context that another library
    /// created and owns (PyTorch's `torch.cuda.current_stream().cuda_stream`; 0 for the
    /// legacy default stream), for the `*_on_stream` operations.
    ///
    /// # Safety
    /// `handle` must be a stream of this PE's context that stays alive while the returned
    /// [`Stream`] (or a clone) is used.
    #[cfg(feature = "cuda")]
    pub unsafe fn stream_from_raw(&self, handle: usize) -> Result<Stream> {
        use cudarc::driver::sys;
        let d = self.device_resources("stream_from_raw")?;
        d.gpu.bind()?;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the caller passes a live stream handle; a valid out-parameter.
        let rc = unsafe { sys::cuStreamGetCtx(handle as sys::CUstream, &mut ctx) };
        crate::cuda::check(rc, || format!("cuStreamGetCtx({handle:#x})"), self.my_pe())?;
        if ctx != d.gpu.ctx.cu_ctx() {
            return Err(Error::InvalidArgument {
                op: "stream_from_raw",
                reason: format!(
                    "stream {handle:#x} belongs to another CUDA context than PE {}'s (GPU {})",
                    self.my_pe(),
                    d.gpu.ordinal
                ),
            });
        }
        Ok(Stream {
            kind: StreamKind::Borrowed(handle),
            runtime: self.path.runtime_id(),
            pe: self.my_pe(),
        })
    }

    /// The stream's CUDA handle on a GPU PE, `None` on a CPU PE, after checking that it
    /// belongs to this runtime.
    #[cfg(feature = "cuda")]
    pub(crate) fn cu_stream(
        &self,
        op: &'static str,
        stream: &Stream,
    ) -> Result<Option<cudarc::driver::sys::CUstream>> {
        self.check_stream(op, stream)?;
        Ok(match &stream.kind {
            StreamKind::Host => None,
            StreamKind::Cuda(s) => Some(s.cu_stream()),
            StreamKind::Borrowed(handle) => Some(*handle as cudarc::driver::sys::CUstream),
        })
    }

    /// Fails unless `stream` belongs to this runtime and to this kind of PE.
    pub(crate) fn check_stream(&self, op: &'static str, stream: &Stream) -> Result<()> {
        if stream.runtime != self.path.runtime_id() {
            return Err(Error::InvalidArgument {
                op,
                reason: "the stream was created by another runtime instance".into(),
            });
        }
        let on_gpu = !matches!(stream.kind, StreamKind::Host);
        if on_gpu != self.device.is_some() {
            return Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "a {} stream on a {} PE",
                    if on_gpu { "GPU" } else { "host" },
                    if on_gpu { "CPU" } else { "GPU" }
                ),
            });
        }
        Ok(())
    }

    /// Copies `count` elements from `src` (this PE's heap) to `dst` on `pe`, in stream
    /// order (`nvshmemx_putmem_on_stream`).
    pub fn put_on_stream<T: bytemuck::Pod>(
        &self,
        dst: SymRef<'_, T>,
        src: SymRef<'_, T>,
        count: usize,
        pe: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.copy_on_stream("put_on_stream", dst, src, count, pe, stream)
    }

    /// The copy of `put_on_stream` and `put_signal_on_stream`.
    fn copy_on_stream<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        dst: SymRef<'_, T>,
        src: SymRef<'_, T>,
        count: usize,
        pe: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.check_stream(op, stream)?;
        let to = self.path.locate(op, dst, count, pe)?;
        let from = self.path.locate(op, src, count, self.my_pe())?;
        match (to, from) {
            (crate::route::Located::Host(d), crate::route::Located::Host(s)) => {
                // SAFETY: both ranges were located for `count` elements; `copy` allows
                // the overlap of a put to this PE's own allocation.
                unsafe { std::ptr::copy(s.cast_const(), d, count) };
                Ok(())
            }
            // A CPU PE's stream is the calling thread: the plain put, on every route
            // (a peer on another node, every peer in weak-ordering mode), complete before
            // the stream's next operation as on a GPU stream (a quiet: otherwise a later
            // put_signal_on_stream's signal could pass this data).
            _ if matches!(stream.kind, StreamKind::Host) => {
                let data = self.stream_source(op, src, count)?;
                self.path.write(op, dst, &data, pe)?;
                self.quiet()
            }
            #[cfg(feature = "cuda")]
            (crate::route::Located::Device(d), crate::route::Located::Device(s)) => {
                self.queue_device_copy(op, stream, d, s, count * std::mem::size_of::<T>())
            }
            #[cfg(feature = "cuda")]
            (crate::route::Located::Remote { .. }, crate::route::Located::Device(s)) => {
                let bytes = count * std::mem::size_of::<T>();
                self.queue_remote_rma(op, stream, self.path.sym_addr(dst), s, bytes, pe, false)
            }
            #[allow(unreachable_patterns)] // host and device heaps never mix in one job
            _ => Err(Error::Unsupported {
                op,
                pe,
                reason: "source and destination are on different kinds of memory".into(),
            }),
        }
    }

    /// Waits until the streams `create_stream` handed out (and the program still holds)
    /// have run what was queued on them, as `free` and `finalize` must before an offset
    /// is reused or the heap unmapped: a stream copy or signal still queued would land in
    /// the next allocation at that offset, or in unmapped memory. Waits like every host
    /// wait (dead peers and `SYMMEM_TIMEOUT` end it, naming the streams); nothing to do on
    /// a CPU PE, whose streams run each call at once. Streams of another library's
    /// (`stream_from_raw`) are the caller's to synchronize.
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // op: the GPU path
    pub(crate) fn wait_for_streams(&self, op: &'static str) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            let mut failed = None;
            self.wait_for(
                op,
                || "the work queued on this PE's streams (create_stream)".to_string(),
                || match d.streams_ended(op) {
                    None => false,
                    Some(r) => {
                        failed = r.err();
                        true
                    }
                },
            )?;
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The `count` elements of this PE's `src`, copied out for a host stream's plain put
    /// (the put may overlap them: a put to this PE's own allocation).
    fn stream_source<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        src: SymRef<'_, T>,
        count: usize,
    ) -> Result<Vec<T>> {
        let mut data = vec![T::zeroed(); count];
        self.path.read(op, src, &mut data, self.my_pe())?;
        Ok(data)
    }

    /// Copies `count` elements from `src` (this PE's heap) to `dst` on `pe`, then updates
    /// `sig` on `pe` with `op(signal)`, in stream order; the target never sees the signal
    /// before the data (`nvshmemx_putmem_signal_on_stream`).
    #[allow(clippy::too_many_arguments)] // NVSHMEM's argument list plus the stream
    pub fn put_signal_on_stream<T: bytemuck::Pod>(
        &self,
        dst: SymRef<'_, T>,
        src: SymRef<'_, T>,
        count: usize,
        sig: SymRef<'_, u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
        stream: &Stream,
    ) -> Result<()> {
        const OP: &str = "put_signal_on_stream";
        // Check the signal first so that a bad signal address leaves the target untouched.
        let word = self.path.word(OP, sig, pe)?;
        if matches!(word, crate::route::Word::Remote { .. })
            && matches!(stream.kind, StreamKind::Host)
        {
            // A CPU PE's stream is the calling thread: the plain put_signal, one request
            // that keeps the signal behind the data on the remote route, complete before
            // the stream's next operation.
            self.check_stream(OP, stream)?;
            let data = self.stream_source(OP, src, count)?;
            self.put_then_signal(OP, dst, &data, sig, signal, op, pe, false)?;
            return self.quiet();
        }
        self.copy_on_stream(OP, dst, src, count, pe, stream)?;
        self.signal_after_copy(OP, word, sig, signal, op, pe, stream)
    }

    /// The signal of a stream-ordered put_signal (`name`), queued behind its copy: the
    /// host signal on a CPU PE, a stream memory write or the `host_signal` helper kernel
    /// on a GPU PE. `word` is `sig` on `pe`, checked.
    #[allow(clippy::too_many_arguments)] // put_signal's signal half, and the stream
    pub(crate) fn signal_after_copy(
        &self,
        name: &'static str,
        word: crate::route::Word<'_, u64>,
        sig: SymRef<'_, u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
        stream: &Stream,
    ) -> Result<()> {
        #[cfg(not(feature = "cuda"))]
        let _ = (name, stream); // the GPU path's
        match word {
            crate::route::Word::Host(_) => self.signal_op(sig, signal, op, pe),
            #[cfg(feature = "cuda")]
            crate::route::Word::Device { addr, sym } => {
                if op == SignalOp::Set && self.write_value_on_stream(name, stream, addr, signal)? {
                    return Ok(());
                }
                self.helper_on_stream(
                    name,
                    stream,
                    symmem_runtime_kernels::host_signal::KERNEL,
                    (sym as *mut u64, signal, op as u32, pe as u32),
                )
            }
            // A GPU stream's signal to another node: through the proxy, behind the data
            // (the `stream_rma` kernel completed it with a quiet).
            #[cfg(feature = "cuda")]
            crate::route::Word::Remote { .. } => self.helper_on_stream(
                name,
                stream,
                symmem_runtime_kernels::host_signal::KERNEL,
                (
                    self.path.sym_addr(sig) as *mut u64,
                    signal,
                    op as u32,
                    pe as u32,
                ),
            ),
            #[cfg(not(feature = "cuda"))]
            crate::route::Word::Remote { .. } => {
                unreachable!("a host stream's signal goes with its data")
            }
        }
    }

    /// Makes `stream` wait (without blocking the host) until this PE's `sig` satisfies
    /// `cmp value` (`nvshmemx_signal_wait_until_on_stream`).
    pub fn signal_wait_until_on_stream(
        &self,
        sig: SymRef<'_, u64>,
        cmp: Cmp,
        value: u64,
        stream: &Stream,
    ) -> Result<()> {
        const OP: &str = "signal_wait_until_on_stream";
        self.check_stream(OP, stream)?;
        match self.path.word(OP, sig, self.my_pe())? {
            crate::route::Word::Host(_) => self.signal_wait_until(sig, cmp, value).map(drop),
            #[cfg(feature = "cuda")]
            crate::route::Word::Device { addr, sym } => {
                if self.wait_value_on_stream(OP, stream, addr, cmp, value)? {
                    return Ok(());
                }
                self.helper_on_stream(
                    OP,
                    stream,
                    symmem_runtime_kernels::stream_wait::KERNEL,
                    (sym as *mut u64, cmp as u32, value),
                )
            }
            crate::route::Word::Remote { .. } => unreachable!("this PE's heap is never remote"),
        }
    }

    /// Completes and makes visible every earlier operation of `stream` before later ones
    /// run (`nvshmemx_quiet_on_stream`).
    pub fn quiet_on_stream(&self, stream: &Stream) -> Result<()> {
        const OP: &str = "quiet_on_stream";
        self.check_stream(OP, stream)?;
        #[cfg(feature = "cuda")]
        if self.device.is_some() {
            return self.helper_on_stream(
                OP,
                stream,
                symmem_runtime_kernels::stream_quiet::KERNEL,
                (),
            );
        }
        self.quiet()
    }

    /// A barrier of all PEs in stream order: later work of `stream` starts once every PE
    /// has reached it (`nvshmemx_barrier_all_on_stream`).
    pub fn barrier_all_on_stream(&self, stream: &Stream) -> Result<()> {
        const OP: &str = "barrier_all_on_stream";
        self.check_stream(OP, stream)?;
        #[cfg(feature = "cuda")]
        if self.device.is_some() {
            return self.helper_on_stream(
                OP,
                stream,
                symmem_runtime_kernels::stream_barrier_all::KERNEL,
                (),
            );
        }
        self.barrier_all()
    }

    /// Queues one helper kernel, one thread, on a GPU PE's stream.
    #[cfg(feature = "cuda")]
    fn helper_on_stream<A: symmem_device::KernelArgs>(
        &self,
        op: &'static str,
        stream: &Stream,
        kernel: symmem_device::Kernel<A>,
        args: A,
    ) -> Result<()> {
        self.block_on_stream(op, stream, kernel, args, 1)
    }

    /// This GPU PE's GPU (its context bound) and the driver handle of `stream`, for a
    /// stream memory operation; `None` when the GPU has none (or `SYMMEM_STREAM_MEMOPS=0`).
    #[cfg(feature = "cuda")]
    fn memop_stream(
        &self,
        op: &'static str,
        stream: &Stream,
    ) -> Result<Option<(&crate::cuda::Gpu, cudarc::driver::sys::CUstream)>> {
        let gpu = &self
            .device
            .as_ref()
            .expect("GPU heaps belong to GPU PEs")
            .gpu;
        if !gpu.stream_memops {
            return Ok(None);
        }
        let cu = self
            .cu_stream(op, stream)?
            .expect("GPU PEs have GPU streams");
        gpu.bind()?;
        Ok(Some((gpu, cu)))
    }

    /// Queues a write of `value` to the u64 at `addr` (this PE's context: its heap or a
    /// mapped peer's) on `stream` as a stream memory operation, after a memory barrier
    /// that makes every earlier write of the stream's work visible first
    /// (`CU_STREAM_WRITE_VALUE_DEFAULT`), as NVSHMEM signals on a stream. False when the
    /// GPU has no stream memory operations (the caller queues a helper kernel).
    #[cfg(feature = "cuda")]
    fn write_value_on_stream(
        &self,
        op: &'static str,
        stream: &Stream,
        addr: u64,
        value: u64,
    ) -> Result<bool> {
        use cudarc::driver::sys;
        let Some((gpu, cu)) = self.memop_stream(op, stream)? else {
            return Ok(false);
        };
        let flags = sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
        // SAFETY: a live stream of this context and the address of an aligned u64 that
        // stays mapped while the runtime lives (a checked signal word).
        let rc = unsafe { sys::cuStreamWriteValue64_v2(cu, addr, value, flags) };
        crate::cuda::check(rc, || "cuStreamWriteValue64".into(), gpu.pe)?;
        Ok(true)
    }

    /// Queues a wait until the u64 at `addr` (this PE's heap) satisfies `cmp value` on
    /// `stream` as a stream memory operation, for the comparisons it has (`Ge`, `Eq`, and
    /// `Gt` below `u64::MAX`), with a flush of remote writes that arrived before the
    /// value where the GPU can (`CU_STREAM_WAIT_VALUE_FLUSH`). False when it cannot (the
    /// caller queues a helper kernel).
    #[cfg(feature = "cuda")]
    fn wait_value_on_stream(
        &self,
        op: &'static str,
        stream: &Stream,
        addr: u64,
        cmp: Cmp,
        value: u64,
    ) -> Result<bool> {
        use cudarc::driver::sys::{self, CUstreamWaitValue_flags as F};
        let (kind, value) = match cmp {
            Cmp::Ge => (F::CU_STREAM_WAIT_VALUE_GEQ, value),
            Cmp::Eq => (F::CU_STREAM_WAIT_VALUE_EQ, value),
            Cmp::Gt if value < u64::MAX => (F::CU_STREAM_WAIT_VALUE_GEQ, value + 1),
            _ => return Ok(false),
        };
        let Some((gpu, cu)) = self.memop_stream(op, stream)? else {
            return Ok(false);
        };
        let mut flags = kind as u32;
        if gpu.flush_remote_writes {
            flags |= F::CU_STREAM_WAIT_VALUE_FLUSH as u32;
        }
        // SAFETY: a live stream of this context and the address of an aligned u64 of this
        // PE's heap (a checked signal word).
        let rc = unsafe { sys::cuStreamWaitValue64_v2(cu, addr, value, flags) };
        crate::cuda::check(rc, || "cuStreamWaitValue64".into(), gpu.pe)?;
        Ok(true)
    }

    /// Queues a copy of `bytes` bytes from `src` to `dst` (addresses in this PE's CUDA
    /// context: its heap, a mapped peer's, or its other device memory) on a GPU PE's
    /// `stream`.
    #[cfg(feature = "cuda")]
    pub(crate) fn queue_device_copy(
        &self,
        op: &'static str,
        stream: &Stream,
        dst: u64,
        src: u64,
        bytes: usize,
    ) -> Result<()> {
        let cu = self
            .cu_stream(op, stream)?
            .expect("a GPU heap implies a GPU stream");
        let gpu = self.path.gpu(op)?;
        gpu.bind()?;
        // SAFETY: the callers located or checked both ranges for `bytes` bytes of device
        // memory mapped in this context; the copy is queued on the caller's stream.
        crate::cuda::check(
            unsafe { cudarc::driver::sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, cu) },
            || format!("cuMemcpyDtoDAsync of {bytes} bytes ({op})"),
            self.my_pe(),
        )
    }

    /// Queues one helper kernel as one block of `threads` threads on a GPU PE's stream.
    #[cfg(feature = "cuda")]
    pub(crate) fn block_on_stream<A: symmem_device::KernelArgs>(
        &self,
        op: &'static str,
        stream: &Stream,
        kernel: symmem_device::Kernel<A>,
        args: A,
        threads: u32,
    ) -> Result<()> {
        let cu = self
            .cu_stream(op, stream)?
            .expect("GPU PEs have GPU streams");
        let module = self.helper_module(op)?;
        // SAFETY: the helper kernels only touch the symmetric addresses they are given,
        // which the callers derive from checked references.
        unsafe { self.launch_helper_on_stream(op, &module, kernel, args, threads, cu) }
    }
}
