//! Put and get at thread, warp and block scope (`nvshmem_put*`, `nvshmemx_put*_warp`,
//! `nvshmemx_put*_block`).
//!
//! To a P2P peer a put is a copy through the peer pointer; group forms split the elements
//! across the group's threads (thread `i` copies elements `i, i + width, …`, which on a
//! GPU makes neighbouring lanes touch neighbouring addresses) and end with the group's
//! barrier, so the whole copy is done when any member returns. The `_nbi` forms are the
//! same on P2P paths (nothing is left in flight); `quiet` is their portable completion.

use super::{lane_id, peer, sync_threads, sync_warp, thread_rank, warp_width};

/// Copies elements `first, first + stride, …` below `n`.
#[inline(always)]
unsafe fn copy_strided<T: Copy>(dst: *mut T, src: *const T, n: usize, first: usize, stride: usize) {
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
    unsafe { copy_strided(peer(dest, pe), src, nelems, 0, 1) }
}

/// Copies `nelems` elements from symmetric `src` on `pe` to local `dest` (`nvshmem_get`).
///
/// # Safety
/// `src` must be a symmetric address holding `nelems` elements; `dest` must be writable
/// for `nelems` elements.
#[inline(always)]
pub unsafe fn get<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { copy_strided(dest, peer(src, pe), nelems, 0, 1) }
}

/// Non-blocking [`put`] (`nvshmem_put_nbi`); complete after `quiet`.
///
/// # Safety
/// As [`put`].
#[inline(always)]
pub unsafe fn put_nbi<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { put(dest, src, nelems, pe) }
}

/// Non-blocking [`get`] (`nvshmem_get_nbi`); complete after `quiet`.
///
/// # Safety
/// As [`get`].
#[inline(always)]
pub unsafe fn get_nbi<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { get(dest, src, nelems, pe) }
}

/// Stores one element to symmetric `dest` on `pe` (`nvshmem_p`).
///
/// # Safety
/// `dest` must be a symmetric address of a `T`.
#[inline(always)]
pub unsafe fn p<T: Copy>(dest: *mut T, value: T, pe: u32) {
    use core::mem::{align_of, size_of, transmute_copy};
    // SAFETY: caller contract.
    let d = unsafe { peer(dest, pe) };
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
    // SAFETY: caller contract.
    unsafe { peer(src, pe).read() }
}

/// [`put`] by a whole warp (`nvshmemx_put_warp`).
///
/// # Safety
/// As [`put`]; every thread of the warp must call it with the same arguments.
#[inline(always)]
pub unsafe fn put_warp<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe {
        copy_strided(
            peer(dest, pe),
            src,
            nelems,
            lane_id() as usize,
            warp_width() as usize,
        )
    };
    sync_warp();
}

/// [`get`] by a whole warp (`nvshmemx_get_warp`).
///
/// # Safety
/// As [`get`]; every thread of the warp must call it with the same arguments.
#[inline(always)]
pub unsafe fn get_warp<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe {
        copy_strided(
            dest,
            peer(src, pe),
            nelems,
            lane_id() as usize,
            warp_width() as usize,
        )
    };
    sync_warp();
}

/// [`put`] by a whole block (`nvshmemx_put_block`).
///
/// # Safety
/// As [`put`]; every thread of the block must call it with the same arguments.
#[inline(always)]
pub unsafe fn put_block<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    let threads = super::block_dim().volume() as usize;
    // SAFETY: caller contract.
    unsafe { copy_strided(peer(dest, pe), src, nelems, thread_rank() as usize, threads) };
    sync_threads();
}

/// [`get`] by a whole block (`nvshmemx_get_block`).
///
/// # Safety
/// As [`get`]; every thread of the block must call it with the same arguments.
#[inline(always)]
pub unsafe fn get_block<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    let threads = super::block_dim().volume() as usize;
    // SAFETY: caller contract.
    unsafe { copy_strided(dest, peer(src, pe), nelems, thread_rank() as usize, threads) };
    sync_threads();
}

/// Non-blocking [`put_warp`] (`nvshmemx_put_nbi_warp`).
///
/// # Safety
/// As [`put_warp`].
#[inline(always)]
pub unsafe fn put_nbi_warp<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { put_warp(dest, src, nelems, pe) }
}

/// Non-blocking [`get_warp`] (`nvshmemx_get_nbi_warp`).
///
/// # Safety
/// As [`get_warp`].
#[inline(always)]
pub unsafe fn get_nbi_warp<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { get_warp(dest, src, nelems, pe) }
}

/// Non-blocking [`put_block`] (`nvshmemx_put_nbi_block`).
///
/// # Safety
/// As [`put_block`].
#[inline(always)]
pub unsafe fn put_nbi_block<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { put_block(dest, src, nelems, pe) }
}

/// Non-blocking [`get_block`] (`nvshmemx_get_nbi_block`).
///
/// # Safety
/// As [`get_block`].
#[inline(always)]
pub unsafe fn get_nbi_block<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
    // SAFETY: caller contract.
    unsafe { get_block(dest, src, nelems, pe) }
}
