//! One-sided put and get (OpenSHMEM 1.5 §9.6, NVSHMEM `nvshmem_put*`/`get*`).
//!
//! To a PE whose heap is mapped here (same node, P2P on) a put is a `memcpy` into that
//! heap and a get a `memcpy` out of it, complete when the call returns: the `_nbi` forms
//! have nothing left to wait for, and [`Runtime::quiet`] only has to order memory. The
//! heap is shared with other processes, which the compiler cannot see, so the runtime
//! copies through raw pointers and never hands out plain references into memory that
//! peers may write (see [`crate::local`] for the sound ways to look at it).

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::sym::{SymBuf, SymRef};

impl Runtime {
    /// Copies `src` to `src.len()` elements from `dst` on `pe` (`nvshmem_put`,
    /// `shmem_put`). Complete on return: `src` may be reused at once.
    #[inline(always)]
    pub fn put<T: bytemuck::Pod>(&self, dst: SymRef<'_, T>, src: &[T], pe: usize) -> Result<()> {
        self.path.write("put", dst, src, pe)
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
        self.path.read("get", src, dst, pe)
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
        self.path.write_nbi("put_nbi", dst, src, pe)
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
        self.path.read_nbi("get_nbi", src, dst, pe)
    }

    /// Stores one element (`nvshmem_p`).
    #[inline]
    pub fn p<T: bytemuck::Pod>(&self, dst: SymRef<'_, T>, value: T, pe: usize) -> Result<()> {
        self.path.store("p", dst, value, pe)
    }

    /// Loads one element (`nvshmem_g`).
    #[inline]
    pub fn g<T: bytemuck::Pod>(&self, src: SymRef<'_, T>, pe: usize) -> Result<T> {
        let mut value = T::zeroed();
        self.path
            .read("g", src, std::slice::from_mut(&mut value), pe)?;
        Ok(value)
    }

    /// Copies raw bytes to byte offset `at` of `dst` on `pe` (`nvshmem_putmem`).
    pub fn putmem<T>(&self, dst: &SymBuf<T>, at: usize, src: &[u8], pe: usize) -> Result<()> {
        self.path.write_bytes("putmem", (dst, at), src, pe)
    }

    /// Copies raw bytes from byte offset `at` of `src` on `pe` (`nvshmem_getmem`).
    pub fn getmem<T>(&self, src: &SymBuf<T>, at: usize, dst: &mut [u8], pe: usize) -> Result<()> {
        self.path.read_bytes("getmem", (src, at), dst, pe)
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
        self.path.write_strided(
            "iput",
            (dst, dst_stride, dspan),
            (src, src_stride),
            nelems,
            pe,
        )
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
        self.path.read_strided(
            "iget",
            (dst, dst_stride),
            (src, src_stride, sspan),
            nelems,
            pe,
        )
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
