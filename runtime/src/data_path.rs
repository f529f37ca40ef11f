//! The data path: every host operation's way to a PE's heap, behind one private type.
//!
//! [`DataPath`] owns what an access needs (the job's topology, the symmetric heap, how each
//! PE's heap is reached, the host copy, the remote transport and the counters) and does
//! the whole access: the transport-independent checks (allocation, PE, bounds), the route
//! (`route.rs`) that reaches the target, the copy or word operation on it, and the count.
//! The operation files in `ops/` keep the public API and call in here, so a put is
//! `ops/rma.rs` → [`DataPath::write`] → the host copy or the transport.

use std::sync::Arc;

use symmem_device::{AmoKind, Request};
use symmem_transport::int::SymInt;
use symmem_transport::{Io, RemoteChoice, Transport};

use crate::counters::{Op, Registry};
use crate::error::{Error, Result};
use crate::heap::SymmetricHeap;
use crate::host_copy::HostCopy;
use crate::route::{Located, Route, Word};
use crate::sym::{SymBuf, SymRef};
use crate::topology::Topology;

/// What the data path is built from, at the end of init.
pub(crate) struct Parts {
    /// The runtime's id (handles of other runtimes are refused).
    pub id: u64,
    /// Where every PE runs.
    pub topo: Topology,
    /// The transport to PEs whose heaps are not mapped here.
    pub transport: Option<Arc<dyn Transport>>,
    /// The remote transport (not the weak-ordering one in front of it) and why.
    pub remote_choice: Option<RemoteChoice>,
    /// The symmetric heap and its peer mappings.
    pub heap: SymmetricHeap,
    /// With weak ordering every peer is reached through the transport.
    pub weak: bool,
    /// How host copies are made, by size.
    pub host_copy: HostCopy,
    /// The runtime's counters.
    pub counters: Registry,
    /// This PE's heap base as device code sees it (symmetric addresses start there).
    #[cfg(feature = "cuda")]
    pub sym_base: u64,
    /// The GPU of a GPU PE, whose context the copy route's addresses live in.
    #[cfg(feature = "cuda")]
    pub gpu: Option<Arc<crate::cuda::Gpu>>,
}

/// Every host operation's access to a PE's heap (see the module documentation).
pub(crate) struct DataPath {
    /// The runtime's id (handles of other runtimes are refused).
    id: u64,
    /// Where every PE runs: the PE checks and the errors' node names.
    topo: Topology,
    /// The transport to PEs whose heaps are not mapped here; None when every PE is.
    /// Declared before `heap`: it is shut down (its threads joined) before the heap is
    /// unmapped.
    transport: Option<Arc<dyn Transport>>,
    /// The remote transport and why it was chosen; None when every PE's heap is mapped.
    remote_choice: Option<RemoteChoice>,
    /// The symmetric heap and the peers' heaps mapped here.
    heap: SymmetricHeap,
    /// How each PE's heap is reached, chosen once at init.
    routes: Box<[Route]>,
    /// How host copies to and from mapped heaps are made, by size.
    host_copy: HostCopy,
    /// Operation counters per path.
    counters: Registry,
    /// This PE's heap base as device code sees it.
    #[cfg(feature = "cuda")]
    sym_base: u64,
    /// The GPU of a GPU PE; last, so the context outlives the heap.
    #[cfg(feature = "cuda")]
    gpu: Option<Arc<crate::cuda::Gpu>>,
}

impl DataPath {
    /// The data path over `parts`, with each PE's route: through the mapping (host loads
    /// and stores, or copies into a GPU heap), through the transport (with weak ordering:
    /// every peer), or none.
    pub(crate) fn new(parts: Parts) -> Self {
        let Parts {
            id,
            topo,
            transport,
            remote_choice,
            heap,
            weak,
            host_copy,
            counters,
            #[cfg(feature = "cuda")]
            sym_base,
            #[cfg(feature = "cuda")]
            gpu,
        } = parts;
        let me = topo.my_pe();
        let routes = (0..topo.n_pes())
            .map(|pe| match heap.base(pe) {
                _ if weak && pe != me => Route::Remote,
                None if transport.is_some() => Route::Remote,
                None => Route::Unreachable,
                Some(b) if heap.host_accessible() => Route::Direct(b as *mut u8),
                #[cfg(feature = "cuda")]
                Some(b) => Route::Copy(b),
                #[cfg(not(feature = "cuda"))]
                Some(_) => unreachable!("only memfd heaps exist without the cuda feature"),
            })
            .collect();
        DataPath {
            id,
            topo,
            transport,
            remote_choice,
            heap,
            routes,
            host_copy,
            counters,
            #[cfg(feature = "cuda")]
            sym_base,
            #[cfg(feature = "cuda")]
            gpu,
        }
    }

    /// The runtime's id, which its handles carry.
    #[inline(always)]
    pub(crate) fn runtime_id(&self) -> u64 {
        self.id
    }

    /// Where every PE runs.
    #[inline(always)]
    pub(crate) fn topo(&self) -> &Topology {
        &self.topo
    }

    /// The symmetric heap and the peers' heaps mapped here.
    #[inline(always)]
    pub(crate) fn heap(&self) -> &SymmetricHeap {
        &self.heap
    }

    /// The transport to PEs whose heaps are not mapped here, if any.
    #[inline(always)]
    pub(crate) fn transport(&self) -> Option<&Arc<dyn Transport>> {
        self.transport.as_ref()
    }

    /// The remote transport and why it was chosen, if any.
    pub(crate) fn remote_choice(&self) -> Option<&RemoteChoice> {
        self.remote_choice.as_ref()
    }

    /// How `pe`'s heap is reached (`pe` checked by the caller).
    #[inline(always)]
    pub(crate) fn route(&self, pe: usize) -> Route {
        self.routes[pe]
    }

    /// The runtime's counters.
    #[inline(always)]
    pub(crate) fn counters(&self) -> &Registry {
        &self.counters
    }

    /// How host copies are made, by size.
    pub(crate) fn host_copy(&self) -> &HostCopy {
        &self.host_copy
    }

    /// The remote transport; only called for PEs whose route is [`Route::Remote`], which
    /// exists only with a transport.
    pub(crate) fn remote(&self) -> &dyn Transport {
        self.transport
            .as_deref()
            .expect("a remote route implies a transport")
    }
}

/// Checks: every one runs on every one-sided operation. The comparisons are inlined;
/// building the error (a large enum) lives in `#[cold]` functions, so the fast path of
/// `put`/`get`/`p`/`g`/AMOs stays small enough to inline into the caller (measured by
/// symmem-perf: out-of-line checks cost several ns per 8-byte operation).
impl DataPath {
    /// Fails unless `pe` names a PE of the job.
    #[inline]
    pub(crate) fn check_pe(&self, op: &'static str, pe: usize) -> Result<()> {
        if pe < self.topo.n_pes() {
            Ok(())
        } else {
            Err(self.invalid_pe(op, pe))
        }
    }

    /// Fails unless `buf` was allocated by this runtime.
    #[inline]
    pub(crate) fn check_buf<T>(&self, op: &'static str, buf: &SymBuf<T>) -> Result<()> {
        if buf.runtime == self.id {
            Ok(())
        } else {
            Err(self.foreign_allocation(op, buf.id, buf.runtime))
        }
    }

    /// The address of `count` elements from `r` on `pe` by whatever route reaches it,
    /// after every check.
    #[inline(always)]
    pub(crate) fn locate<T>(
        &self,
        op: &'static str,
        r: SymRef<'_, T>,
        count: usize,
        pe: usize,
    ) -> Result<Located<T>> {
        let buf = r.buf;
        self.check_buf(op, buf)?;
        if pe >= self.topo.n_pes() {
            return Err(self.invalid_pe_access(op, pe, buf, r.index, count));
        }
        if r.index.checked_add(count).is_none_or(|end| end > buf.len) {
            return Err(self.out_of_bounds(op, buf, pe, r.index, count));
        }
        let at = buf.offset + r.index * std::mem::size_of::<T>();
        self.at_offset(op, pe, at)
    }

    /// Like [`Self::locate`] for `count` bytes from byte `at` of `buf`.
    fn locate_bytes<T>(
        &self,
        op: &'static str,
        buf: &SymBuf<T>,
        at: usize,
        count: usize,
        pe: usize,
    ) -> Result<Located<u8>> {
        self.check_buf(op, buf)?;
        if pe >= self.topo.n_pes() {
            let mut err = self.invalid_pe_access(op, pe, buf, 0, buf.len);
            if let Error::InvalidPe { access, .. } = &mut err {
                *access = format!(
                    " (access to bytes {at}..{} of allocation #{}, {} bytes at heap offset {:#x})",
                    at.saturating_add(count),
                    buf.id,
                    buf.size_bytes(),
                    buf.offset
                );
            }
            return Err(err);
        }
        let size = buf.size_bytes();
        if at.checked_add(count).is_none_or(|end| end > size) {
            return Err(Error::OutOfBounds {
                op,
                pe,
                start: at,
                end: at.saturating_add(count),
                len: size,
                elem_size: 1,
                alloc: buf.id,
                offset: buf.offset,
            });
        }
        self.at_offset(op, pe, buf.offset + at)
    }

    /// Heap offset `at` on `pe` (checked by the caller) by its route.
    #[inline(always)]
    fn at_offset<T>(&self, op: &'static str, pe: usize, at: usize) -> Result<Located<T>> {
        match self.routes[pe] {
            // SAFETY: the caller checked that the access lies within an allocation, which
            // lies within the mapped heap.
            Route::Direct(base) => Ok(Located::Host(unsafe { base.add(at) }.cast())),
            #[cfg(feature = "cuda")]
            Route::Copy(base) => Ok(Located::Device(base + at as u64)),
            Route::Remote => Ok(Located::Remote { pe, off: at as u64 }),
            Route::Unreachable => Err(self.unreachable(op, pe)),
        }
    }

    /// Like [`Self::locate`], for operations that need host loads, stores or atomics on
    /// the target (atomics, signals, waits, local views).
    #[inline(always)]
    pub(crate) fn target<T>(
        &self,
        op: &'static str,
        r: SymRef<'_, T>,
        count: usize,
        pe: usize,
    ) -> Result<*mut T> {
        match self.locate(op, r, count, pe)? {
            Located::Host(p) => Ok(p),
            #[cfg(feature = "cuda")]
            Located::Device(_) => Err(self.not_host_accessible(op, pe)),
            Located::Remote { .. } => Err(self.unreachable(op, pe)),
        }
    }
}

/// Copies: whole ranges written to or read from a located place.
impl DataPath {
    /// Copies `src` to `src.len()` elements from `dst` on `pe` (every put form).
    #[inline(always)]
    pub(crate) fn write<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        dst: SymRef<'_, T>,
        src: &[T],
        pe: usize,
    ) -> Result<()> {
        self.write_to(op, dst, src, pe).map(drop)
    }

    /// [`Self::write`], returning where the elements went.
    #[inline(always)]
    fn write_to<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        dst: SymRef<'_, T>,
        src: &[T],
        pe: usize,
    ) -> Result<Located<u8>> {
        let to = bytes(self.locate(op, dst, src.len(), pe)?);
        // SAFETY: `to` is valid for `src.len()` elements (checked by `locate`); `src` is
        // local memory, so the ranges cannot overlap.
        unsafe { self.write_located(op, to, src.as_ptr().cast(), std::mem::size_of_val(src))? };
        Ok(to)
    }

    /// Copies `dst.len()` elements from `src` on `pe` into `dst` (every get form).
    #[inline(always)]
    pub(crate) fn read<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        src: SymRef<'_, T>,
        dst: &mut [T],
        pe: usize,
    ) -> Result<()> {
        self.read_from(op, src, dst, pe).map(drop)
    }

    /// [`Self::read`], returning where the elements came from.
    #[inline(always)]
    fn read_from<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        src: SymRef<'_, T>,
        dst: &mut [T],
        pe: usize,
    ) -> Result<Located<u8>> {
        let from = bytes(self.locate(op, src, dst.len(), pe)?);
        let len = std::mem::size_of_val(dst);
        // SAFETY: `from` is valid for `dst.len()` elements; `dst` is local and exclusive.
        // T: Pod, so whatever bytes a concurrent writer left form a valid T.
        unsafe { self.read_located(op, from, dst.as_mut_ptr().cast(), len)? };
        Ok(from)
    }

    /// [`Self::write`] for a non-blocking put: a remote one is also told to the transport,
    /// since the weak-ordering transport looks at the source again at quiet (only where
    /// it lies in this PE's heap, which stays mapped).
    #[inline(always)]
    pub(crate) fn write_nbi<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        dst: SymRef<'_, T>,
        src: &[T],
        pe: usize,
    ) -> Result<()> {
        if let Located::Remote { pe, off } = self.write_to(op, dst, src, pe)? {
            let len = std::mem::size_of_val(src) as u64;
            let req = Request::put(pe as u32, off, src.as_ptr() as u64, len);
            self.remote().nbi_issued(&req);
        }
        Ok(())
    }

    /// [`Self::read`] for a non-blocking get: a remote one is also told to the transport,
    /// since the weak-ordering transport hides the fetched bytes until quiet where `dst`
    /// lies in this PE's heap (mapped while the runtime lives).
    #[inline(always)]
    pub(crate) fn read_nbi<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        src: SymRef<'_, T>,
        dst: &mut [T],
        pe: usize,
    ) -> Result<()> {
        let (at, len) = (dst.as_mut_ptr() as u64, std::mem::size_of_val(dst) as u64);
        if let Located::Remote { pe, off } = self.read_from(op, src, dst, pe)? {
            let req = Request::get(pe as u32, at, off, len);
            self.remote().nbi_issued(&req);
        }
        Ok(())
    }

    /// Copies `src` to byte `at` of `dst` on `pe`.
    pub(crate) fn write_bytes<T>(
        &self,
        op: &'static str,
        (dst, at): (&SymBuf<T>, usize),
        src: &[u8],
        pe: usize,
    ) -> Result<()> {
        let to = self.locate_bytes(op, dst, at, src.len(), pe)?;
        // SAFETY: `to` is valid for `src.len()` bytes (checked); `src` is local.
        unsafe { self.write_located(op, to, src.as_ptr(), src.len()) }
    }

    /// Copies `dst.len()` bytes from byte `at` of `src` on `pe` into `dst`.
    pub(crate) fn read_bytes<T>(
        &self,
        op: &'static str,
        (src, at): (&SymBuf<T>, usize),
        dst: &mut [u8],
        pe: usize,
    ) -> Result<()> {
        let from = self.locate_bytes(op, src, at, dst.len(), pe)?;
        // SAFETY: `from` is valid for `dst.len()` bytes (checked); `dst` is local.
        unsafe { self.read_located(op, from, dst.as_mut_ptr(), dst.len()) }
    }

    /// Stores one element: on a mapped host heap a 4- or 8-byte element is one relaxed
    /// atomic store, so "put data; fence; p(flag)" publishes the data to a peer's Acquire
    /// wait (the fence is Release); elsewhere one copy of the whole element (a single
    /// store on the GPU side, one request on a remote transport).
    #[inline(always)]
    pub(crate) fn store<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        dst: SymRef<'_, T>,
        value: T,
        pe: usize,
    ) -> Result<()> {
        use std::mem::{align_of, size_of};
        use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
        let p = match self.locate(op, dst, 1, pe)? {
            Located::Host(p) => p,
            to => {
                // SAFETY: `to` is valid for one T; `value` is local.
                return unsafe {
                    self.write_located(op, bytes(to), (&value as *const T).cast(), size_of::<T>())
                };
            }
        };
        // SAFETY: `p` is valid and aligned for one T (allocations are ≥ 64-byte aligned
        // and indexed in whole elements); the size and alignment checks make the
        // reinterpretation exact, and T: Pod has no invalid bit patterns.
        unsafe {
            if size_of::<T>() == 8 && align_of::<T>() >= 8 {
                AtomicU64::from_ptr(p.cast()).store(*bytemuck::cast_ref::<T, u64>(&value), Relaxed);
            } else if size_of::<T>() == 4 && align_of::<T>() >= 4 {
                AtomicU32::from_ptr(p.cast()).store(*bytemuck::cast_ref::<T, u32>(&value), Relaxed);
            } else {
                p.write(value);
            }
        }
        self.counters.direct(Op::Put, size_of::<T>());
        Ok(())
    }

    /// Writes `src[i * src_stride]` to element `i * dst_stride` from `dst` on `pe`, for
    /// `i in 0..nelems`; `dspan` (the elements spanned at the target) and the source's
    /// span were checked by the caller against `src`.
    pub(crate) fn write_strided<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        (dst, dst_stride, dspan): (SymRef<'_, T>, usize, usize),
        (src, src_stride): (&[T], usize),
        nelems: usize,
        pe: usize,
    ) -> Result<()> {
        let Located::Host(p) = self.locate(op, dst, dspan, pe)? else {
            // One copy per element: other elements of the span may be written by
            // others meanwhile, so the span is never rewritten as a whole.
            for i in 0..nelems {
                self.write(
                    op,
                    dst.buf.at(dst.index + i * dst_stride),
                    &src[i * src_stride..][..1],
                    pe,
                )?;
            }
            return Ok(());
        };
        for i in 0..nelems {
            // SAFETY: i * dst_stride < dspan, which `locate` checked against the
            // allocation; the caller checked the source index against `src`.
            unsafe { p.add(i * dst_stride).write(src[i * src_stride]) };
        }
        self.counters
            .direct(Op::Put, nelems * std::mem::size_of::<T>());
        Ok(())
    }

    /// Reads element `i * src_stride` from `src` on `pe` into `dst[i * dst_stride]`, for
    /// `i in 0..nelems`; `sspan` (the elements spanned at the source) and the destination's
    /// span were checked by the caller against `dst`.
    pub(crate) fn read_strided<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        (dst, dst_stride): (&mut [T], usize),
        (src, src_stride, sspan): (SymRef<'_, T>, usize, usize),
        nelems: usize,
        pe: usize,
    ) -> Result<()> {
        let Located::Host(p) = self.locate(op, src, sspan, pe)? else {
            // One copy of the span, then the strided picks on the host.
            let mut span = vec![T::zeroed(); sspan];
            self.read(op, src, &mut span, pe)?;
            for i in 0..nelems {
                dst[i * dst_stride] = span[i * src_stride];
            }
            return Ok(());
        };
        for i in 0..nelems {
            // SAFETY: i * src_stride < sspan, checked by `locate`.
            dst[i * dst_stride] = unsafe { p.add(i * src_stride).read() };
        }
        self.counters
            .direct(Op::Get, nelems * std::mem::size_of::<T>());
        Ok(())
    }

    /// Writes `len` bytes from `src` to a located destination.
    ///
    /// # Safety
    /// `src` is valid for `len` bytes and does not overlap the destination; `dst` was
    /// located for at least `len` bytes.
    #[inline(always)]
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // op names copy-route errors
    pub(crate) unsafe fn write_located(
        &self,
        op: &'static str,
        dst: Located<u8>,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        match dst {
            Located::Host(p) => {
                // SAFETY: forwarded from the caller.
                unsafe { self.host_copy.copy(p, src, len) };
                self.counters.direct(Op::Put, len);
            }
            #[cfg(feature = "cuda")]
            Located::Device(a) => {
                // SAFETY: forwarded from the caller; the copy route's addresses are mapped
                // in this PE's context.
                unsafe { self.gpu(op)?.copy_to_device(op, a, src, len)? };
                self.counters.direct(Op::Put, len);
            }
            Located::Remote { pe, off } => {
                // SAFETY: forwarded from the caller.
                let data = unsafe { std::slice::from_raw_parts(src, len) };
                let req = Request::put(pe as u32, off, 0, len as u64);
                self.remote().submit(&req, Io::Src(data))?;
            }
        }
        Ok(())
    }

    /// Reads `len` bytes from a located source into `dst`.
    ///
    /// # Safety
    /// `dst` is valid for `len` bytes of writes and does not overlap the source; `src`
    /// was located for at least `len` bytes.
    #[inline(always)]
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // op names copy-route errors
    pub(crate) unsafe fn read_located(
        &self,
        op: &'static str,
        src: Located<u8>,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        match src {
            Located::Host(p) => {
                // SAFETY: forwarded from the caller.
                unsafe { self.host_copy.copy(dst, p.cast_const(), len) };
                self.counters.direct(Op::Get, len);
            }
            #[cfg(feature = "cuda")]
            Located::Device(a) => {
                // SAFETY: as in `write_located`.
                unsafe { self.gpu(op)?.copy_from_device(op, dst, a, len)? };
                self.counters.direct(Op::Get, len);
            }
            Located::Remote { pe, off } => {
                // SAFETY: forwarded from the caller.
                let out = unsafe { std::slice::from_raw_parts_mut(dst, len) };
                let req = Request::get(pe as u32, 0, off, len as u64);
                self.remote().submit(&req, Io::Dst(out))?;
            }
        }
        Ok(())
    }
}

/// Words: the integers atomics, signals and waits work on.
impl DataPath {
    /// The word at `r` on `pe`, after every check.
    #[inline(always)]
    pub(crate) fn word<T: SymInt>(
        &self,
        op: &'static str,
        r: SymRef<'_, T>,
        pe: usize,
    ) -> Result<Word<'_, T>> {
        match self.locate(op, r, 1, pe)? {
            // SAFETY: in bounds, aligned (typed handle, aligned allocation), mapped while
            // `self` lives; words are only accessed atomically.
            Located::Host(p) => Ok(Word::Host(unsafe { T::atomic(p) })),
            #[cfg(feature = "cuda")]
            Located::Device(addr) => Ok(Word::Device {
                addr,
                sym: self.sym_addr(r),
            }),
            Located::Remote { pe, off } => Ok(Word::Remote { pe, off }),
        }
    }

    /// Reads a word with Acquire semantics (on a GPU heap: a device-to-host copy, ordered
    /// after every earlier GPU write that the copy engine can see).
    #[inline(always)]
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // op names copy errors
    pub(crate) fn load_word<T: SymInt>(&self, op: &'static str, w: &Word<'_, T>) -> Result<T> {
        match w {
            Word::Host(a) => Ok(T::load(a, std::sync::atomic::Ordering::Acquire)),
            #[cfg(feature = "cuda")]
            Word::Device { addr, .. } => {
                let mut v = T::zeroed();
                // SAFETY: `addr` was located for one T; `v` is a local T.
                unsafe {
                    self.gpu(op)?.copy_from_device(
                        op,
                        (&mut v as *mut T).cast(),
                        *addr,
                        std::mem::size_of::<T>(),
                    )?
                };
                Ok(v)
            }
            Word::Remote { pe, off } => {
                let width = std::mem::size_of::<T>() as u8;
                // `result` nonzero: the fetched value is wanted back.
                let req = Request::amo(*pe as u32, AmoKind::Fetch, width, *off, 0, 0, 1);
                Ok(T::from_bits(self.remote().submit(&req, Io::None)?))
            }
        }
    }

    /// The symmetric address (in this PE's own heap) of `r`, which device operations
    /// translate to any PE.
    #[cfg(feature = "cuda")]
    #[inline]
    pub(crate) fn sym_addr<T>(&self, r: SymRef<'_, T>) -> u64 {
        self.sym_base + (r.buf.offset + r.index * std::mem::size_of::<T>()) as u64
    }

    /// This PE's GPU, or the error for a CPU PE (copy routes exist on GPU PEs only).
    #[cfg(feature = "cuda")]
    pub(crate) fn gpu(&self, op: &'static str) -> Result<&crate::cuda::Gpu> {
        self.gpu.as_deref().ok_or_else(|| Error::NoGpu {
            op,
            pe: self.topo.my_pe(),
            reason: "this is a CPU PE".into(),
        })
    }
}

/// Errors, cold and out of line so that the checks stay small enough to inline into
/// every operation.
impl DataPath {
    /// The error of a failed [`Self::check_pe`].
    #[cold]
    #[inline(never)]
    fn invalid_pe(&self, op: &'static str, pe: usize) -> Error {
        Error::InvalidPe {
            op,
            pe,
            n_pes: self.topo.n_pes(),
            access: String::new(),
        }
    }

    /// The error of a failed [`Self::check_buf`].
    #[cold]
    #[inline(never)]
    fn foreign_allocation(&self, op: &'static str, alloc: u64, owner: u64) -> Error {
        Error::ForeignAllocation {
            op,
            alloc,
            owner,
            this: self.id,
        }
    }

    /// The error for an access to `count` elements from `start` of `buf` on a PE that
    /// does not exist.
    #[cold]
    #[inline(never)]
    fn invalid_pe_access<T>(
        &self,
        op: &'static str,
        pe: usize,
        buf: &SymBuf<T>,
        start: usize,
        count: usize,
    ) -> Error {
        Error::InvalidPe {
            op,
            pe,
            n_pes: self.topo.n_pes(),
            access: format!(
                " (access to elements {start}..{} of allocation #{}, {} elements at heap offset {:#x})",
                start.saturating_add(count),
                buf.id,
                buf.len,
                buf.offset
            ),
        }
    }

    /// The error for `count` elements from `start` that do not fit in `buf`.
    #[cold]
    #[inline(never)]
    pub(crate) fn out_of_bounds<T>(
        &self,
        op: &'static str,
        buf: &SymBuf<T>,
        pe: usize,
        start: usize,
        count: usize,
    ) -> Error {
        Error::OutOfBounds {
            op,
            pe,
            start,
            end: start.saturating_add(count),
            len: buf.len,
            elem_size: std::mem::size_of::<T>(),
            alloc: buf.id,
            offset: buf.offset,
        }
    }

    /// The error for a PE with no route.
    #[cold]
    #[inline(never)]
    pub(crate) fn unreachable(&self, op: &'static str, pe: usize) -> Error {
        let me = self.topo.my_pe();
        Error::Unreachable {
            op,
            pe,
            node: self.topo.node(pe).to_string(),
            me,
            my_node: self.topo.node(me).to_string(),
        }
    }

    /// The error for a host-side atomic, wait or view on a GPU heap.
    #[cfg(feature = "cuda")]
    #[cold]
    #[inline(never)]
    pub(crate) fn not_host_accessible(&self, op: &'static str, pe: usize) -> Error {
        Error::Unsupported {
            op,
            pe,
            reason: format!(
                "PE {pe}'s heap is GPU memory, which host code reaches only by copies: put, get, p, g, putmem, getmem, iput, iget, read_local and calloc work from the host; atomics, signals, waits and local views of GPU heaps are done by device operations in a kernel (host-side forms on GPU PEs are not implemented yet)"
            ),
        }
    }
}

/// Casts a located element address to bytes.
#[inline(always)]
fn bytes<T>(l: Located<T>) -> Located<u8> {
    match l {
        Located::Host(p) => Located::Host(p.cast()),
        #[cfg(feature = "cuda")]
        Located::Device(a) => Located::Device(a),
        Located::Remote { pe, off } => Located::Remote { pe, off },
    }
}
