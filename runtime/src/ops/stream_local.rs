//! Stream-ordered transfers with a local operand outside the symmetric heap, and the
//! stream-ordered get between symmetric buffers (`nvshmemx_getmem_on_stream`).
//!
//! | operation | on a GPU PE | on a CPU PE |
//! |---|---|---|
//! | `get_on_stream` | `cuMemcpyDtoDAsync` from the peer-mapped heap | `get` |
//! | `put_on_stream_from` | `cuMemcpyDtoDAsync` from device memory of this PE's GPU | `put` from host memory, then `quiet` |
//! | `get_on_stream_into` | `cuMemcpyDtoDAsync` into device memory of this PE's GPU | `get` into host memory |
//! | `put_signal_on_stream_from` | the copy, then the signal as `put_signal_on_stream` | `put_signal` from host memory, then `quiet` |
//!
//! The local operand of the `_from`/`_into` forms is a raw address: on a GPU PE any device
//! memory of this PE's GPU (a CUDA tensor's `data_ptr()`, another library's buffer, the
//! symmetric heap itself), on a CPU PE host memory. Before anything is queued the runtime
//! checks what it can: not null, aligned for `T`, and on a GPU PE, by asking the driver
//! (`cuPointerGetAttribute`), that the address is device memory of this PE's GPU and that
//! the range stays inside the allocation holding it. What it cannot check (that the memory
//! stays allocated until the stream has run the copy, that a CPU PE's address is really
//! `count` readable elements) is the caller's promise.
//!
//! # Peers on other nodes
//! The copy engine reaches the PEs whose heaps are mapped into this PE's CUDA context (its
//! node, P2P). For a PE reached over the remote transport a GPU stream queues the
//! `stream_rma` helper kernel instead: one thread doing the device put (then `quiet`) or
//! get, which the proxy thread carries over the transport, staging the local operand
//! (any device memory) through its pinned buffer. A put_signal's signal then follows as
//! the `host_signal` helper kernel, also through the proxy, behind the completed data.
//! This serves every stream transfer here and `put_on_stream`/`put_signal_on_stream`.

use bytemuck::Pod;
use symmem_transport::int::SignalOp;

use super::stream::Stream;
use crate::error::{Error, Result};
use crate::route::{Located, Word};
use crate::runtime::Runtime;
use crate::sym::SymRef;

impl Runtime {
    /// Copies `count` elements of `src` on `pe` into `dst` (this PE's heap), in stream
    /// order (`nvshmemx_getmem_on_stream`): on a GPU PE the copy is queued on `stream`
    /// behind its earlier work (a copy engine copy, or for a PE on another node the
    /// `stream_rma` helper kernel, see the module docs) and the call returns at once; on a
    /// CPU PE it is a `get`, complete on return. Errors: as `get`, and a stream of another
    /// runtime or kind of PE.
    pub fn get_on_stream<T: Pod>(
        &self,
        dst: SymRef<'_, T>,
        src: SymRef<'_, T>,
        count: usize,
        pe: usize,
        stream: &Stream,
    ) -> Result<()> {
        const OP: &str = "get_on_stream";
        self.check_stream(OP, stream)?;
        let from = self.path.locate(OP, src, count, pe)?;
        let to = self.path.locate(OP, dst, count, self.my_pe())?;
        match (to, from) {
            (Located::Host(d), Located::Host(s)) => {
                // SAFETY: both ranges were located for `count` elements; `copy` allows
                // the overlap of a get from this PE's own allocation.
                unsafe { std::ptr::copy(s.cast_const(), d, count) };
                Ok(())
            }
            // A CPU PE's stream is the calling thread: the plain get (a peer on another
            // node, weak-ordering mode), and the store into `dst` complete on return.
            _ if stream.runs_now() => {
                let mut data = vec![T::zeroed(); count];
                self.path.read(OP, src, &mut data, pe)?;
                self.path.write(OP, dst, &data, self.my_pe())?;
                self.quiet()
            }
            #[cfg(feature = "cuda")]
            (Located::Device(d), Located::Device(s)) => {
                self.queue_device_copy(OP, stream, d, s, count * std::mem::size_of::<T>())
            }
            #[cfg(feature = "cuda")]
            (Located::Device(d), Located::Remote { .. }) => {
                let bytes = count * std::mem::size_of::<T>();
                self.queue_remote_rma(OP, stream, self.path.sym_addr(src), d, bytes, pe, true)
            }
            _ => Err(self.not_on_stream(OP, pe)),
        }
    }

    /// Copies `count` elements at `src` (local memory, see below) to `dst` on `pe`, in
    /// stream order: on a GPU PE queued on `stream` (a copy engine copy, or the
    /// `stream_rma` helper kernel for a PE on another node) and returning at once; on a CPU
    /// PE a `put` complete at the target on return. The local operand is any device memory
    /// of this PE's GPU on a GPU PE (a CUDA tensor outside the symmetric heap), host memory
    /// on a CPU PE. Errors: as `put`, a stream of another runtime or kind of PE, a null or
    /// misaligned `src`, and on a GPU PE an `src` that is not device memory of this PE's
    /// GPU or runs past its allocation.
    ///
    /// # Safety
    /// `src` must point at `count` readable elements that stay allocated and unchanged
    /// until the stream has run the copy (on a CPU PE: until the call returns).
    pub unsafe fn put_on_stream_from<T: Pod>(
        &self,
        dst: SymRef<'_, T>,
        src: *const T,
        count: usize,
        pe: usize,
        stream: &Stream,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.put_from_as("put_on_stream_from", dst, src, count, pe, stream) }
    }

    /// The copy of `put_on_stream_from` and `put_signal_on_stream_from`; `op` names the
    /// public operation in errors.
    ///
    /// # Safety
    /// As [`Self::put_on_stream_from`].
    unsafe fn put_from_as<T: Pod>(
        &self,
        op: &'static str,
        dst: SymRef<'_, T>,
        src: *const T,
        count: usize,
        pe: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.check_stream(op, stream)?;
        let to = self.path.locate(op, dst, count, pe)?;
        self.check_local(
            op,
            src as usize,
            std::mem::align_of::<T>(),
            count * std::mem::size_of::<T>(),
            stream,
        )?;
        if count == 0 {
            return Ok(());
        }
        match to {
            Located::Host(d) if stream.runs_now() => {
                // SAFETY: `d` was located for `count` elements, `src` holds them (the
                // caller's promise); `copy` allows a source inside this PE's own heap.
                unsafe { std::ptr::copy(src, d, count) };
                Ok(())
            }
            _ if stream.runs_now() => {
                // SAFETY: the caller's promise: `count` readable elements at `src`.
                let data = unsafe { std::slice::from_raw_parts(src, count) };
                self.path.write(op, dst, data, pe)?;
                self.quiet()
            }
            #[cfg(feature = "cuda")]
            Located::Device(d) => {
                self.queue_device_copy(op, stream, d, src as u64, count * std::mem::size_of::<T>())
            }
            #[cfg(feature = "cuda")]
            Located::Remote { .. } => {
                let bytes = count * std::mem::size_of::<T>();
                self.queue_remote_rma(
                    op,
                    stream,
                    self.path.sym_addr(dst),
                    src as u64,
                    bytes,
                    pe,
                    false,
                )
            }
            #[allow(unreachable_patterns)] // a host heap on a GPU stream: never in one job
            _ => Err(self.not_on_stream(op, pe)),
        }
    }

    /// Copies `count` elements of `src` on `pe` to `dst` (local memory, as
    /// [`Self::put_on_stream_from`]'s `src`), in stream order: on a GPU PE queued on
    /// `stream` and returning at once; on a CPU PE a `get`, complete on return. Errors as
    /// [`Self::put_on_stream_from`].
    ///
    /// # Safety
    /// `dst` must point at `count` writable elements that stay allocated until the stream
    /// has run the copy (on a CPU PE: until the call returns), and that nothing else
    /// reads or writes meanwhile.
    pub unsafe fn get_on_stream_into<T: Pod>(
        &self,
        dst: *mut T,
        src: SymRef<'_, T>,
        count: usize,
        pe: usize,
        stream: &Stream,
    ) -> Result<()> {
        const OP: &str = "get_on_stream_into";
        self.check_stream(OP, stream)?;
        let from = self.path.locate(OP, src, count, pe)?;
        self.check_local(
            OP,
            dst as usize,
            std::mem::align_of::<T>(),
            count * std::mem::size_of::<T>(),
            stream,
        )?;
        if count == 0 {
            return Ok(());
        }
        match from {
            Located::Host(s) if stream.runs_now() => {
                // SAFETY: `s` was located for `count` elements, `dst` holds them (the
                // caller's promise); `copy` allows a destination inside this PE's heap.
                unsafe { std::ptr::copy(s.cast_const(), dst, count) };
                Ok(())
            }
            _ if stream.runs_now() => {
                // SAFETY: the caller's promise: `count` writable elements at `dst`,
                // nothing else touching them.
                let out = unsafe { std::slice::from_raw_parts_mut(dst, count) };
                self.path.read(OP, src, out, pe)
            }
            #[cfg(feature = "cuda")]
            Located::Device(s) => {
                self.queue_device_copy(OP, stream, dst as u64, s, count * std::mem::size_of::<T>())
            }
            #[cfg(feature = "cuda")]
            Located::Remote { .. } => {
                let bytes = count * std::mem::size_of::<T>();
                self.queue_remote_rma(
                    OP,
                    stream,
                    self.path.sym_addr(src),
                    dst as u64,
                    bytes,
                    pe,
                    true,
                )
            }
            #[allow(unreachable_patterns)] // a host heap on a GPU stream: never in one job
            _ => Err(self.not_on_stream(OP, pe)),
        }
    }

    /// Copies `count` elements at `src` (local memory, as [`Self::put_on_stream_from`])
    /// to `dst` on `pe`, then updates `sig` on `pe` with `op(signal)`, in stream order;
    /// the target never sees the signal before the data (`put_signal_on_stream` with a
    /// local source). On a CPU PE: `put_signal`, complete on return. Errors as
    /// [`Self::put_on_stream_from`], and a bad `sig`, checked first (a bad signal leaves
    /// the target untouched).
    ///
    /// # Safety
    /// As [`Self::put_on_stream_from`].
    #[allow(clippy::too_many_arguments)] // NVSHMEM's argument list plus the stream
    pub unsafe fn put_signal_on_stream_from<T: Pod>(
        &self,
        dst: SymRef<'_, T>,
        src: *const T,
        count: usize,
        sig: SymRef<'_, u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
        stream: &Stream,
    ) -> Result<()> {
        const OP: &str = "put_signal_on_stream_from";
        let word = self.path.word(OP, sig, pe)?;
        if matches!(word, Word::Remote { .. }) && stream.runs_now() {
            // A CPU PE's stream is the calling thread: the plain put_signal, one request
            // that keeps the signal behind the data on the remote route.
            self.check_stream(OP, stream)?;
            let (align, bytes) = (std::mem::align_of::<T>(), count * std::mem::size_of::<T>());
            self.check_local(OP, src as usize, align, bytes, stream)?;
            let data: &[T] = if count == 0 {
                &[]
            } else {
                // SAFETY: the caller's promise: `count` readable elements at `src`.
                unsafe { std::slice::from_raw_parts(src, count) }
            };
            self.put_then_signal(OP, dst, data, sig, signal, op, pe, false)?;
            return self.quiet();
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.put_from_as(OP, dst, src, count, pe, stream)? };
        self.signal_after_copy(OP, word, sig, signal, op, pe, stream)
    }

    /// Fails unless the local operand at `addr` (`bytes` of elements aligned to `align`)
    /// is one a stream transfer may take: not null, aligned, and on a GPU PE device memory
    /// of this PE's GPU within one allocation. Nothing to check for no bytes.
    fn check_local(
        &self,
        op: &'static str,
        addr: usize,
        align: usize,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let bad = |reason: String| Error::InvalidArgument { op, reason };
        if addr == 0 {
            return Err(bad("the local operand is a null address".into()));
        }
        if !addr.is_multiple_of(align) {
            return Err(bad(format!(
                "the local operand at {addr:#x} is not aligned for its elements ({align} bytes)"
            )));
        }
        if addr.checked_add(bytes).is_none() {
            return Err(bad(format!(
                "the local operand at {addr:#x} ({bytes} bytes) runs past the end of the address space"
            )));
        }
        #[cfg(feature = "cuda")]
        if !stream.runs_now() {
            return self.check_local_device(op, addr as u64, bytes);
        }
        #[cfg(not(feature = "cuda"))]
        let _ = stream; // the GPU path's
        Ok(())
    }

    /// Fails unless `bytes` at `addr` are device memory of this PE's GPU, inside the
    /// allocation that holds `addr` (where the driver reports its range).
    #[cfg(feature = "cuda")]
    fn check_local_device(&self, op: &'static str, addr: u64, bytes: usize) -> Result<()> {
        use cudarc::driver::sys::{self, CUpointer_attribute as A};
        let gpu = self.path.gpu(op)?;
        gpu.bind()?;
        let query = |attribute: A, out: *mut std::ffi::c_void| {
            // SAFETY: `out` points at a value of the attribute's type (u32 memory type,
            // i32 ordinal, u64 address, usize size), as the driver documents them; any
            // address may be queried.
            unsafe { sys::cuPointerGetAttribute(out, attribute, addr) }
        };
        let bad = |what: String| {
            Error::InvalidArgument {
            op,
            reason: format!(
                "the local operand at {addr:#x} {what}; a GPU stream's transfers take device memory of PE {}'s GPU {} (a CUDA tensor there), host memory takes the host put/get",
                self.my_pe(),
                gpu.ordinal
            ),
        }
        };
        let mut kind = 0u32;
        let rc = query(A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (&raw mut kind).cast());
        if rc != sys::CUresult::CUDA_SUCCESS
            || kind != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
        {
            return Err(bad(
                "is not device memory (not memory CUDA allocated on a GPU)".into(),
            ));
        }
        let mut ordinal = -1i32;
        let rc = query(
            A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            (&raw mut ordinal).cast(),
        );
        crate::cuda::check(
            rc,
            || format!("cuPointerGetAttribute({addr:#x}, DEVICE_ORDINAL)"),
            self.my_pe(),
        )?;
        if usize::try_from(ordinal) != Ok(gpu.ordinal) {
            return Err(bad(format!("is memory of GPU {ordinal}")));
        }
        let (mut start, mut size) = (0u64, 0usize);
        let known = query(
            A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            (&raw mut start).cast(),
        ) == sys::CUresult::CUDA_SUCCESS
            && query(A::CU_POINTER_ATTRIBUTE_RANGE_SIZE, (&raw mut size).cast())
                == sys::CUresult::CUDA_SUCCESS
            && size > 0;
        if known && addr + bytes as u64 > start + size as u64 {
            return Err(bad(format!(
                "({bytes} bytes) runs past the end of its allocation ({size} bytes at {start:#x})"
            )));
        }
        Ok(())
    }

    /// Queues the `stream_rma` helper kernel on a GPU PE's `stream`: a put of `bytes`
    /// from `local` (device memory of this context) to symmetric `sym` on `pe`, then a
    /// quiet, or (`get`) a get from `sym` on `pe` into `local`; through the proxy for a PE
    /// on another node (see the module docs).
    #[cfg(feature = "cuda")]
    #[allow(clippy::too_many_arguments)] // the transfer, its target and its direction
    pub(crate) fn queue_remote_rma(
        &self,
        op: &'static str,
        stream: &Stream,
        sym: u64,
        local: u64,
        bytes: usize,
        pe: usize,
        get: bool,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let args = (
            sym as *mut u8,
            local as *mut u8,
            bytes,
            pe as u32,
            u32::from(get),
        );
        self.block_on_stream(
            op,
            stream,
            symmem_runtime_kernels::stream_rma::KERNEL,
            args,
            1,
        )
    }

    /// The error of a stream transfer that no route serves (a heap of another kind
    /// than the stream's PE: never in one job).
    pub(crate) fn not_on_stream(&self, op: &'static str, pe: usize) -> Error {
        Error::Unsupported {
            op,
            pe,
            reason: "the source and destination are on kinds of memory no stream transfer joins"
                .into(),
        }
    }
}
