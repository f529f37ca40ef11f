//! Put and get at thread, warp and block scope (`nvshmem_put*`, `nvshmemx_put*_warp`,
//! `nvshmemx_put*_block`), contiguous and strided (`iput`, `iget`).
//!
//! To a P2P peer a put is a copy through the peer pointer, in 16-byte vector accesses
//! where the two ranges' alignment allows (element by element at the unaligned head and
//! tail); group forms split the copy across the group's threads (thread `i` copies chunks
//! `i, i + width, …`, which on a GPU makes neighbouring lanes touch neighbouring
//! addresses) and end with the group's
//! barrier, so the whole copy is done when any member returns. The `_nbi` forms are the
//! same on P2P paths (nothing is left in flight); `quiet` is their portable completion.
//!
//! To a PE without a P2P path the transfer goes through the proxy channel
//! ([`super::remote`]): one request per call (group forms: one request, from the group's
//! first thread), waited for unless `_nbi`.

use super::{lane_id, remote, route, sync_threads, sync_warp, thread_rank, warp_width, Route};

/// Which threads of a group an operation runs on.
#[derive(Clone, Copy)]
pub(crate) enum Group {
    /// One thread.
    Thread,
    /// A warp: lanes split a P2P copy, lane 0 submits a proxy request.
    Warp,
    /// A block: threads split a P2P copy, thread 0 submits a proxy request.
    Block,
}

impl Group {
    /// (this thread's first element, stride, whether this thread submits proxy requests).
    #[inline(always)]
    pub(crate) fn split(self) -> (usize, usize, bool) {
        match self {
            Group::Thread => (0, 1, true),
            Group::Warp => (lane_id() as usize, warp_width() as usize, lane_id() == 0),
            Group::Block => {
                let r = thread_rank() as usize;
                (r, super::block_dim().volume() as usize, r == 0)
            }
        }
    }

    /// Whether this thread is the group's first (the one that submits proxy requests).
    #[inline(always)]
    pub(crate) fn is_leader(self) -> bool {
        self.split().2
    }

    /// The group's barrier (none for one thread).
    #[inline(always)]
    pub(crate) fn sync(self) {
        match self {
            Group::Thread => {}
            Group::Warp => sync_warp(),
            Group::Block => sync_threads(),
        }
    }
}

/// A put by `group`, through P2P or the proxy.
#[inline(always)]
pub(crate) unsafe fn put_group<T: Copy>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    pe: u32,
    group: Group,
    nbi: bool,
) {
    let (first, stride, leader) = group.split();
    // SAFETY: caller contract.
    match unsafe { route(dest, pe) } {
        // SAFETY: caller contract: both ranges hold `nelems` elements.
        Route::Direct(d) => unsafe { copy_split(d, src, nelems, first, stride) },
        Route::Proxy(off) if leader => {
            let len = (nelems * core::mem::size_of::<T>()) as u64;
            remote::put(pe, off, src as u64, len, nbi)
        }
        Route::Proxy(_) => {}
    }
    group.sync();
}

/// A get by `group`, through P2P or the proxy.
#[inline(always)]
pub(crate) unsafe fn get_group<T: Copy>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    pe: u32,
    group: Group,
    nbi: bool,
) {
    let (first, stride, leader) = group.split();
    // SAFETY: caller contract.
    match unsafe { route(src, pe) } {
        // SAFETY: caller contract: both ranges hold `nelems` elements.
        Route::Direct(s) => unsafe { copy_split(dest, s.cast_const(), nelems, first, stride) },
        Route::Proxy(off) if leader => {
            let len = (nelems * core::mem::size_of::<T>()) as u64;
            remote::get(pe, dest as u64, off, len, nbi)
        }
        Route::Proxy(_) => {}
    }
    group.sync();
}

/// Bytes of one vector access: a 16-byte load and store (`ld.v4.u32`/`st.v4.u32` on the
/// GPU), as NVSHMEM's and DeepEP's copies use, instead of one access per element.
#[cfg(target_arch = "nvptx64")]
const VEC: usize = 16;

/// Vector chunks a thread keeps in flight: loads issued before the stores that use them.
#[cfg(target_arch = "nvptx64")]
const UNROLL: usize = 4;

/// The group's share of a copy of `n` elements on the CPU executor: one contiguous range
/// per thread, copied as the host's puts copy ([`crate::arch::copy_bytes`]: the method
/// the runtime picks for the size). A block's threads are fibers taking turns on one core,
/// so lanes that interleave 16-byte chunks (the GPU's pattern, below) would only make each
/// fiber walk the whole buffer: every cache line loaded by several fibers at different
/// times (a 2 MiB block put moved 4 GB/s that way, against memcpy's 47).
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
pub(crate) unsafe fn copy_split<T: Copy>(
    dst: *mut T,
    src: *const T,
    n: usize,
    first: usize,
    stride: usize,
) {
    let share = n.div_ceil(stride.max(1));
    let start = first.saturating_mul(share).min(n);
    let end = start.saturating_add(share).min(n);
    // SAFETY: caller contract: both ranges hold `n` elements and do not overlap;
    // `start <= end <= n`.
    unsafe {
        crate::arch::copy_bytes(
            dst.add(start).cast(),
            src.add(start).cast(),
            (end - start) * core::mem::size_of::<T>(),
        )
    }
}

/// The group's share of a copy of `n` elements: this thread copies elements (and 16-byte
/// chunks) `first, first + stride, …`, so neighbouring lanes touch neighbouring addresses.
/// When both ranges are equally misaligned by a whole number of elements and the element
/// size divides 16, the body between the first and last 16-byte boundaries goes as
/// 16-byte vector accesses and only the head and tail element by element.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) unsafe fn copy_split<T: Copy>(
    dst: *mut T,
    src: *const T,
    n: usize,
    first: usize,
    stride: usize,
) {
    let size = core::mem::size_of::<T>();
    let (d, s) = (dst as usize % VEC, src as usize % VEC);
    if size == 0
        || !VEC.is_multiple_of(size)
        || d != s
        || !d.is_multiple_of(size)
        || n * size < 2 * VEC
    {
        // SAFETY: caller contract.
        return unsafe { copy_elements(dst, src, n, first, stride) };
    }
    let head = ((VEC - d) % VEC / size).min(n);
    let chunks = (n - head) * size / VEC;
    let tail = head + chunks * VEC / size;
    // SAFETY: caller contract: both ranges hold `n` elements; `head + chunks * VEC` bytes
    // and the tail lie inside them, and the body starts 16-byte aligned in both.
    unsafe {
        copy_elements(dst, src, head, first, stride);
        let (vd, vs) = (dst.add(head).cast::<u8>(), src.add(head).cast::<u8>());
        let mut i = first;
        while i + (UNROLL - 1) * stride < chunks {
            let mut v = [[0u32; 4]; UNROLL];
            for (k, x) in v.iter_mut().enumerate() {
                *x = crate::arch::load16(vs.add((i + k * stride) * VEC));
            }
            for (k, x) in v.iter().enumerate() {
                crate::arch::store16(vd.add((i + k * stride) * VEC), *x);
            }
            i += UNROLL * stride;
        }
        while i < chunks {
            crate::arch::store16(vd.add(i * VEC), crate::arch::load16(vs.add(i * VEC)));
            i += stride;
        }
        copy_elements(dst.add(tail), src.add(tail), n - tail, first, stride);
    }
}

/// Copies elements `first, first + stride, …` below `n`, one access each.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn copy_elements<T: Copy>(
    dst: *mut T,
    src: *const T,
    n: usize,
    first: usize,
    stride: usize,
) {
    let mut i = first;
    while i < n {
        // SAFETY: i < n and the caller guarantees both ranges hold `n` elements.
        unsafe { dst.add(i).write(src.add(i).read()) };
        i += stride;
    }
}

/// Copies `nelems` elements from local `src` to symmetric `dest` on `pe` (`nvshmem_put`).
///
/// # Safety
/// `dest` must be a symmetric address with room for `nelems` elements; `src` must be
/// readable for `nelems` elements.
#[inline(always)]
pub unsafe fn put<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { put_group(dest, src, nelems, pe, Group::Thread, false) }
}

/// Copies `nelems` elements from symmetric `src` on `pe` to local `dest` (`nvshmem_get`).
///
/// # Safety
/// `src` must be a symmetric address holding `nelems` elements; `dest` must be writable
/// for `nelems` elements.
#[inline(always)]
pub unsafe fn get<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { get_group(dest, src, nelems, pe, Group::Thread, false) }
}

/// Non-blocking [`put`] (`nvshmem_put_nbi`); complete after `quiet`.
///
/// # Safety
/// As [`put`].
#[inline(always)]
pub unsafe fn put_nbi<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { put_group(dest, src, nelems, pe, Group::Thread, true) }
}

/// Non-blocking [`get`] (`nvshmem_get_nbi`); complete after `quiet`.
///
/// # Safety
/// As [`get`].
#[inline(always)]
pub unsafe fn get_nbi<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { get_group(dest, src, nelems, pe, Group::Thread, true) }
}

/// Stores one element to symmetric `dest` on `pe` (`nvshmem_p`).
///
/// # Safety
/// `dest` must be a symmetric address of a `T`.
#[inline(always)]
pub unsafe fn p<T: Copy>(dest: *mut T, value: T, pe: u32) {
    use core::mem::{align_of, size_of, transmute_copy};
    // SAFETY: caller contract.
    let d = match unsafe { route(dest, pe) } {
        Route::Direct(d) => d,
        Route::Proxy(off) => {
            // SAFETY: the value's bytes, read while `value` lives.
            unsafe { remote::p_bytes(pe, off, (&value as *const T).cast(), size_of::<T>()) };
            return;
        }
    };
    // A 4- or 8-byte element is stored with one system-scope strong store, so the
    // "put data; fence; p(flag)" idiom publishes the data (as NVSHMEM's volatile store
    // does); a weak store could become visible out of the fence's order.
    // SAFETY: `d` is valid and aligned for T; the size and alignment checks make the
    // reinterpretation exact.
    unsafe {
        if size_of::<T>() == 8 && align_of::<T>() >= 8 {
            crate::arch::store_relaxed_u64(d.cast(), transmute_copy(&value));
        } else if size_of::<T>() == 4 && align_of::<T>() >= 4 {
            crate::arch::store_relaxed_u32(d.cast(), transmute_copy(&value));
        } else {
            d.write(value);
        }
    }
}

/// Loads one element from symmetric `src` on `pe` (`nvshmem_g`).
///
/// # Safety
/// `src` must be a symmetric address of a `T`.
#[inline(always)]
pub unsafe fn g<T: Copy>(src: *const T, pe: u32) -> T {
    use core::mem::{size_of, MaybeUninit};
    // SAFETY: caller contract.
    match unsafe { route(src, pe) } {
        // SAFETY: caller contract.
        Route::Direct(s) => unsafe { s.read() },
        Route::Proxy(off) => {
            let mut v = MaybeUninit::<T>::uninit();
            // SAFETY: `v` has room for the `size_of::<T>()` bytes.
            unsafe { remote::g_bytes(pe, off, v.as_mut_ptr().cast(), size_of::<T>()) };
            // SAFETY: the proxy returned all `size_of::<T>()` bytes of a `T`.
            unsafe { v.assume_init() }
        }
    }
}

/// [`put`] by a whole warp (`nvshmemx_put_warp`).
///
/// # Safety
/// As [`put`]; every thread of the warp must call it with the same arguments.
#[inline(always)]
pub unsafe fn put_warp<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { put_group(dest, src, nelems, pe, Group::Warp, false) }
}

/// [`get`] by a whole warp (`nvshmemx_get_warp`).
///
/// # Safety
/// As [`get`]; every thread of the warp must call it with the same arguments.
#[inline(always)]
pub unsafe fn get_warp<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { get_group(dest, src, nelems, pe, Group::Warp, false) }
}

/// [`put`] by a whole block (`nvshmemx_put_block`).
///
/// # Safety
/// As [`put`]; every thread of the block must call it with the same arguments.
#[inline(always)]
pub unsafe fn put_block<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { put_group(dest, src, nelems, pe, Group::Block, false) }
}

/// [`get`] by a whole block (`nvshmemx_get_block`).
///
/// # Safety
/// As [`get`]; every thread of the block must call it with the same arguments.
#[inline(always)]
pub unsafe fn get_block<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { get_group(dest, src, nelems, pe, Group::Block, false) }
}

/// Non-blocking [`put_warp`] (`nvshmemx_put_nbi_warp`).
///
/// # Safety
/// As [`put_warp`].
#[inline(always)]
pub unsafe fn put_nbi_warp<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { put_group(dest, src, nelems, pe, Group::Warp, true) }
}

/// Non-blocking [`get_warp`] (`nvshmemx_get_nbi_warp`).
///
/// # Safety
/// As [`get_warp`].
#[inline(always)]
pub unsafe fn get_nbi_warp<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { get_group(dest, src, nelems, pe, Group::Warp, true) }
}

/// Non-blocking [`put_block`] (`nvshmemx_put_nbi_block`).
///
/// # Safety
/// As [`put_block`].
#[inline(always)]
pub unsafe fn put_nbi_block<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { put_group(dest, src, nelems, pe, Group::Block, true) }
}

/// Non-blocking [`get_block`] (`nvshmemx_get_nbi_block`).
///
/// # Safety
/// As [`get_block`].
#[inline(always)]
pub unsafe fn get_nbi_block<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { get_group(dest, src, nelems, pe, Group::Block, true) }
}

// Strided put and get (`nvshmem_iput`, `nvshmem_iget`).

/// A strided put by `group`: `dest[i * dst]` on `pe` gets `src[i * sst]` for `i <
/// nelems`, strides in elements. Through P2P the group's threads take elements `first,
/// first + stride, …`; through the proxy its first thread sends each element inline
/// (`p`'s requests), so `src` may be reused on return, as after a blocking put.
#[inline(always)]
unsafe fn iput_group<T: Copy>(
    dest: *mut T,
    src: *const T,
    dst: usize,
    sst: usize,
    nelems: usize,
    pe: u32,
    group: Group,
) {
    let (first, stride, leader) = group.split();
    let size = core::mem::size_of::<T>();
    // SAFETY: caller contract.
    match unsafe { route(dest, pe) } {
        Route::Direct(d) => {
            let mut i = first;
            while i < nelems {
                // SAFETY: caller contract: element `i * dst` of `dest` and `i * sst` of
                // `src` exist for every `i < nelems`.
                unsafe { d.add(i * dst).write(src.add(i * sst).read()) };
                i += stride;
            }
        }
        Route::Proxy(off) if leader => {
            for i in 0..nelems {
                // SAFETY: as above; the element's bytes are read before the call returns.
                unsafe {
                    remote::p_bytes(
                        pe,
                        off + (i * dst * size) as u64,
                        src.add(i * sst).cast(),
                        size,
                    )
                };
            }
        }
        Route::Proxy(_) => {}
    }
    group.sync();
}

/// A strided get by `group`: `dest[i * dst]` gets `src[i * sst]` of `pe` for `i <
/// nelems`. Through the proxy its first thread fetches each element inline (`g`'s
/// requests), so every element has arrived when the group returns.
#[inline(always)]
unsafe fn iget_group<T: Copy>(
    dest: *mut T,
    src: *const T,
    dst: usize,
    sst: usize,
    nelems: usize,
    pe: u32,
    group: Group,
) {
    let (first, stride, leader) = group.split();
    let size = core::mem::size_of::<T>();
    // SAFETY: caller contract.
    match unsafe { route(src, pe) } {
        Route::Direct(s) => {
            let mut i = first;
            while i < nelems {
                // SAFETY: caller contract, as in `iput_group`.
                unsafe { dest.add(i * dst).write(s.add(i * sst).read()) };
                i += stride;
            }
        }
        Route::Proxy(off) if leader => {
            for i in 0..nelems {
                // SAFETY: as above; `dest`'s element has room for `size` bytes.
                unsafe {
                    remote::g_bytes(
                        pe,
                        off + (i * sst * size) as u64,
                        dest.add(i * dst).cast(),
                        size,
                    )
                };
            }
        }
        Route::Proxy(_) => {}
    }
    group.sync();
}

/// Copies `nelems` elements from local `src`, every `sst`-th, to symmetric `dest` on
/// `pe`, every `dst`-th (`nvshmem_iput`; strides in elements, 1 for contiguous): `dest[i
/// * dst] = src[i * sst]`. Returns when `src` may be reused; complete at `pe` after
/// [`quiet`](super::quiet), as [`put`]. Through the proxy, one request per element.
///
/// # Safety
/// `dest` must be a symmetric address with elements `0, dst, …, (nelems - 1) * dst`;
/// `src` must be readable at elements `0, sst, …, (nelems - 1) * sst`.
#[inline(always)]
pub unsafe fn iput<T: Copy>(
    dest: *mut T,
    src: *const T,
    dst: usize,
    sst: usize,
    nelems: usize,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { iput_group(dest, src, dst, sst, nelems, pe, Group::Thread) }
}

/// Copies `nelems` elements from symmetric `src` on `pe`, every `sst`-th, to local
/// `dest`, every `dst`-th (`nvshmem_iget`): `dest[i * dst] = src[i * sst]`. Returns when
/// every element has arrived. Through the proxy, one round trip per element.
///
/// # Safety
/// `src` must be a symmetric address with elements `0, sst, …, (nelems - 1) * sst`;
/// `dest` must be writable at elements `0, dst, …, (nelems - 1) * dst`.
#[inline(always)]
pub unsafe fn iget<T: Copy>(
    dest: *mut T,
    src: *const T,
    dst: usize,
    sst: usize,
    nelems: usize,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { iget_group(dest, src, dst, sst, nelems, pe, Group::Thread) }
}

/// [`iput`] by a whole warp (`nvshmemx_iput_warp`): lanes take every warp-width-th
/// element.
///
/// # Safety
/// As [`iput`]; every thread of the warp must call it with the same arguments.
#[inline(always)]
pub unsafe fn iput_warp<T: Copy>(
    dest: *mut T,
    src: *const T,
    dst: usize,
    sst: usize,
    nelems: usize,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { iput_group(dest, src, dst, sst, nelems, pe, Group::Warp) }
}

/// [`iget`] by a whole warp (`nvshmemx_iget_warp`).
///
/// # Safety
/// As [`iget`]; every thread of the warp must call it with the same arguments.
#[inline(always)]
pub unsafe fn iget_warp<T: Copy>(
    dest: *mut T,
    src: *const T,
    dst: usize,
    sst: usize,
    nelems: usize,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { iget_group(dest, src, dst, sst, nelems, pe, Group::Warp) }
}

/// [`iput`] by a whole block (`nvshmemx_iput_block`): threads take every
/// block-size-th element.
///
/// # Safety
/// As [`iput`]; every thread of the block must call it with the same arguments.
#[inline(always)]
pub unsafe fn iput_block<T: Copy>(
    dest: *mut T,
    src: *const T,
    dst: usize,
    sst: usize,
    nelems: usize,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { iput_group(dest, src, dst, sst, nelems, pe, Group::Block) }
}

/// [`iget`] by a whole block (`nvshmemx_iget_block`).
///
/// # Safety
/// As [`iget`]; every thread of the block must call it with the same arguments.
#[inline(always)]
pub unsafe fn iget_block<T: Copy>(
    dest: *mut T,
    src: *const T,
    dst: usize,
    sst: usize,
    nelems: usize,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { iget_group(dest, src, dst, sst, nelems, pe, Group::Block) }
}
