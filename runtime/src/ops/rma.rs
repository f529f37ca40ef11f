//! One-sided put and get (OpenSHMEM 1.5 §9.6, NVSHMEM `nvshmem_put*`/`get*`).
//!
//! To a PE whose heap is mapped here (same node, P2P on) a put is a `memcpy` into that
//! heap and a get a `memcpy` out of it, complete when the call returns: the `_nbi` forms
//! have nothing left to wait for, and [`Runtime::quiet`] only has to order memory. The
//! heap is shared with other processes, which the compiler cannot see, so the runtime
//! copies through raw pointers and never hands out plain references into memory that
//! peers may write (see [`crate::local`] for the sound ways to look at it).

use crate::counters::Op;
use crate::error::{Error, Result};
use crate::route::{bytes, Located};
use crate::runtime::Runtime;
use crate::sym::{SymBuf, SymRef};
use symmem_device::Request;

impl Runtime {
    /// The error for an access to `count` elements from `start` of `buf` on a PE that
    /// does not exist.
    #[cold]
    #[inline(never)]
    pub(crate) fn invalid_pe_access<T>(
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
            n_pes: self.n_pes(),
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

    /// Copies `src` to `src.len()` elements from `dst` on `pe` (`nvshmem_put`,
    /// `shmem_put`). Complete on return: `src` may be reused at once.
    #[inline(always)]
    pub fn put<T: bytemuck::Pod>(&self, dst: SymRef<'_, T>, src: &[T], pe: usize) -> Result<()> {
        self.copy_to("put", dst, src, pe)
    }

    /// The copy behind every put form; `op` names the public operation in errors.
    #[inline(always)]
    pub(crate) fn copy_to<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        dst: SymRef<'_, T>,
        src: &[T],
        pe: usize,
    ) -> Result<()> {
        let to = self.locate(op, dst, src.len(), pe)?;
        // SAFETY: `to` is valid for `src.len()` elements (checked by `locate`); `src` is
        // local memory, so the ranges cannot overlap.
        unsafe {
            self.write_located(
                op,
                bytes(to),
                src.as_ptr().cast(),
                std::mem::size_of_val(src),
            )
        }
    }

    /// Copies `dst.len()` elements from `src` on `pe` into `dst` (`nvshmem_get`).
    /// Complete on return.
    #[inline]
    pub fn get<T: bytemuck::Pod>(
        &self,
        src: SymRef<'_, T>,
        dst: &mut [T],
        pe: usize,
    ) -> Result<()> {
        self.copy_from("get", src, dst, pe)
    }

    /// The copy behind every get form; `op` names the public operation in errors.
    #[inline]
    pub(crate) fn copy_from<T: bytemuck::Pod>(
        &self,
        op: &'static str,
        src: SymRef<'_, T>,
        dst: &mut [T],
        pe: usize,
    ) -> Result<()> {
        let from = self.locate(op, src, dst.len(), pe)?;
        let len = std::mem::size_of_val(dst);
        // SAFETY: `from` is valid for `dst.len()` elements; `dst` is local and exclusive.
        // T: Pod, so whatever bytes a concurrent writer left form a valid T.
        unsafe { self.read_located(op, bytes(from), dst.as_mut_ptr().cast(), len) }
    }

    /// Non-blocking put (`nvshmem_put_nbi`): the data is complete at the target after
    /// [`Runtime::quiet`] (on a mapped peer it already is on return).
    ///
    /// The borrow of `src` ends with the call, and every path copies it by then, so
    /// reusing `src` at once is safe here. The specifications allow it only after `quiet`
    /// (OpenSHMEM 1.5 §9.6.2 `shmem_put_nbi`, NVSHMEM `nvshmem_put_nbi`), and a GPU kernel
    /// that reuses it earlier sends whatever the buffer holds when the copy runs. A source
    /// in this PE's symmetric heap (a [`local_slice`](Runtime::local_slice)) that changes
    /// before the next quiet is therefore reported by that quiet in weak-ordering mode
    /// (`SYMMEM_ORDERING=weak`), naming the op, the buffer, its size and the target PE.
    #[inline(always)]
    pub fn put_nbi<T: bytemuck::Pod>(
        &self,
        dst: SymRef<'_, T>,
        src: &[T],
        pe: usize,
    ) -> Result<()> {
        let to = bytes(self.locate("put_nbi", dst, src.len(), pe)?);
        let len = std::mem::size_of_val(src);
        // SAFETY: `to` is valid for `src.len()` elements (checked by `locate`); `src` is
        // local memory, so the ranges cannot overlap.
        unsafe { self.write_located("put_nbi", to, src.as_ptr().cast(), len)? };
        if let Located::Remote { pe, off } = to {
            // Only the weak-ordering transport looks at the source again (at quiet), and
            // only where it lies in this PE's heap, which stays mapped.
            let req = Request::put(pe as u32, off, src.as_ptr() as u64, len as u64);
            self.remote().nbi_issued(&req);
        }
        Ok(())
    }

    /// Non-blocking get (`nvshmem_get_nbi`): `dst` holds the data after
    /// [`Runtime::quiet`].
    ///
    /// Every path has filled `dst` when the call returns (the `&mut` borrow ends with
    /// it), but the specifications define it only after `quiet` (OpenSHMEM 1.5 §9.6.2
    /// `shmem_get_nbi`), as on a GPU. In weak-ordering mode (`SYMMEM_ORDERING=weak`) a
    /// destination in this PE's symmetric heap (a
    /// [`local_slice_mut`](Runtime::local_slice_mut), dropped before the quiet) fetched
    /// from a peer holds `0xdb` bytes until the next quiet, so a program that reads it
    /// early reads junk.
    #[inline]
    pub fn get_nbi<T: bytemuck::Pod>(
        &self,
        src: SymRef<'_, T>,
        dst: &mut [T],
        pe: usize,
    ) -> Result<()> {
        let from = bytes(self.locate("get_nbi", src, dst.len(), pe)?);
        let len = std::mem::size_of_val(dst);
        let at = dst.as_mut_ptr();
        // SAFETY: `from` is valid for `dst.len()` elements; `dst` is local and exclusive.
        // T: Pod, so whatever bytes a concurrent writer left form a valid T.
        unsafe { self.read_located("get_nbi", from, at.cast(), len)? };
        if let Located::Remote { pe, off } = from {
            // The weak-ordering transport hides the fetched bytes until quiet where `dst`
            // lies in this PE's heap (mapped while the runtime lives); elsewhere it
            // ignores the request.
            let req = Request::get(pe as u32, at as u64, off, len as u64);
            self.remote().nbi_issued(&req);
        }
        Ok(())
    }

    /// Stores one element (`nvshmem_p`).
    #[inline]
    pub fn p<T: bytemuck::Pod>(&self, dst: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        use std::mem::{align_of, size_of};
        use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
        let p = match self.locate("p", dst, 1, pe)? {
            Located::Host(p) => p,
            // One copy of the whole element: a single store of it on the GPU side, one
            // request on a remote transport.
            to => {
                // SAFETY: `to` is valid for one T; `value` is local.
                return unsafe {
                    self.write_located("p", bytes(to), (&value as *const T).cast(), size_of::<T>())
                };
            }
        };
        // A 4- or 8-byte element is one relaxed atomic store, so "put data; fence;
        // p(flag)" publishes the data to a peer's Acquire wait (the fence is Release).
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

    /// Loads one element (`nvshmem_g`).
    #[inline]
    pub fn g<T: bytemuck::Pod>(&self, src: SymRef<'_, T>, pe: usize) -> Result<T> {
        let mut value = T::zeroed();
        self.copy_from("g", src, std::slice::from_mut(&mut value), pe)?;
        Ok(value)
    }

    /// Copies raw bytes to byte offset `at` of `dst` on `pe` (`nvshmem_putmem`).
    pub fn putmem<T>(&self, dst: &SymBuf<T>, at: usize, src: &[u8], pe: usize) -> Result<()> {
        let to = self.target_bytes("putmem", dst, at, src.len(), pe)?;
        // SAFETY: `to` is valid for `src.len()` bytes (checked); `src` is local.
        unsafe { self.write_located("putmem", to, src.as_ptr(), src.len()) }
    }

    /// Copies raw bytes from byte offset `at` of `src` on `pe` (`nvshmem_getmem`).
    pub fn getmem<T>(&self, src: &SymBuf<T>, at: usize, dst: &mut [u8], pe: usize) -> Result<()> {
        let from = self.target_bytes("getmem", src, at, dst.len(), pe)?;
        // SAFETY: `from` is valid for `dst.len()` bytes (checked); `dst` is local.
        unsafe { self.read_located("getmem", from, dst.as_mut_ptr(), dst.len()) }
    }

    fn target_bytes<T>(
        &self,
        op: &'static str,
        buf: &SymBuf<T>,
        at: usize,
        count: usize,
        pe: usize,
    ) -> Result<Located<u8>> {
        self.check_buf(op, buf)?;
        if pe >= self.n_pes() {
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
        let whole = self.locate(op, buf.at(0), 0, pe)?;
        Ok(match bytes(whole) {
            // SAFETY: offset + at + count lies within the allocation inside the mapped heap.
            Located::Host(p) => Located::Host(unsafe { p.add(at) }),
            #[cfg(feature = "cuda")]
            Located::Device(a) => Located::Device(a + at as u64),
            Located::Remote { pe, off } => Located::Remote {
                pe,
                off: off + at as u64,
            },
        })
    }

    /// Strided put (`shmem_iput`): for `i in 0..nelems`, element `i * dst_stride` from
    /// `dst` on `pe` receives `src[i * src_stride]`. Strides are in elements, at least 1.
    pub fn iput<T: bytemuck::Pod>(
        &self,
        dst: SymRef<'_, T>,
        dst_stride: usize,
        src: &[T],
        src_stride: usize,
        nelems: usize,
        pe: usize,
    ) -> Result<()> {
        let (dspan, sspan) = strided_spans("iput", pe, dst.buf.id, dst_stride, src_stride, nelems)?;
        if sspan > src.len() {
            return Err(local_too_short(
                "iput",
                "source",
                sspan,
                src.len(),
                pe,
                dst.buf.id,
            ));
        }
        let p = match self.locate("iput", dst, dspan, pe)? {
            Located::Host(p) => p,
            _ => {
                // One copy per element: other elements of the span may be written by
                // others meanwhile, so the span is never rewritten as a whole.
                for i in 0..nelems {
                    self.copy_to(
                        "iput",
                        dst.buf.at(dst.index + i * dst_stride),
                        &src[i * src_stride..][..1],
                        pe,
                    )?;
                }
                return Ok(());
            }
        };
        for i in 0..nelems {
            // SAFETY: i * dst_stride < dspan, which `locate` checked against the
            // allocation; the source index is below sspan <= src.len().
            unsafe { p.add(i * dst_stride).write(src[i * src_stride]) };
        }
        self.counters
            .direct(Op::Put, nelems * std::mem::size_of::<T>());
        Ok(())
    }

    /// Strided get (`shmem_iget`): for `i in 0..nelems`, `dst[i * dst_stride]` receives
    /// element `i * src_stride` from `src` on `pe`.
    pub fn iget<T: bytemuck::Pod>(
        &self,
        dst: &mut [T],
        dst_stride: usize,
        src: SymRef<'_, T>,
        src_stride: usize,
        nelems: usize,
        pe: usize,
    ) -> Result<()> {
        let (dspan, sspan) = strided_spans("iget", pe, src.buf.id, dst_stride, src_stride, nelems)?;
        if dspan > dst.len() {
            return Err(local_too_short(
                "iget",
                "destination",
                dspan,
                dst.len(),
                pe,
                src.buf.id,
            ));
        }
        let p = match self.locate("iget", src, sspan, pe)? {
            Located::Host(p) => p,
            _ => {
                // One copy of the span, then the strided picks on the host.
                let mut span = vec![T::zeroed(); sspan];
                self.copy_from("iget", src, &mut span, pe)?;
                for i in 0..nelems {
                    dst[i * dst_stride] = span[i * src_stride];
                }
                return Ok(());
            }
        };
        for i in 0..nelems {
            // SAFETY: i * src_stride < sspan, checked by `target`.
            dst[i * dst_stride] = unsafe { p.add(i * src_stride).read() };
        }
        self.counters
            .direct(Op::Get, nelems * std::mem::size_of::<T>());
        Ok(())
    }
}

/// Elements spanned on each side by a strided transfer: `(nelems - 1) * stride + 1`.
fn strided_spans(
    op: &'static str,
    pe: usize,
    alloc: u64,
    dst_stride: usize,
    src_stride: usize,
    nelems: usize,
) -> Result<(usize, usize)> {
    if dst_stride == 0 || src_stride == 0 {
        return Err(Error::InvalidArgument {
            op,
            reason: format!(
                "strides must be at least 1 (dst_stride {dst_stride}, src_stride {src_stride}; PE {pe}, allocation #{alloc})"
            ),
        });
    }
    let span = |stride: usize| {
        nelems
            .checked_sub(1)
            .map_or(Some(0), |k| {
                k.checked_mul(stride).and_then(|s| s.checked_add(1))
            })
            .ok_or_else(|| Error::InvalidArgument {
                op,
                reason: format!(
                    "{nelems} elements with stride {stride} overflow (PE {pe}, allocation #{alloc})"
                ),
            })
    };
    Ok((span(dst_stride)?, span(src_stride)?))
}

fn local_too_short(
    op: &'static str,
    which: &str,
    need: usize,
    have: usize,
    pe: usize,
    alloc: u64,
) -> Error {
    Error::InvalidArgument {
        op,
        reason: format!(
            "the local {which} has {have} elements but the stride pattern needs {need} (PE {pe}, allocation #{alloc})"
        ),
    }
}
