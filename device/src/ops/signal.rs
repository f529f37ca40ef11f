//! Put-with-signal, signals and point-to-point waits (`nvshmem_put_signal*`,
//! `nvshmem_signal_op`, `nvshmem_signal_wait_until`, `nvshmem_wait_until`, `nvshmem_test`).
//!
//! The target never sees the signal before the data: the data stores (by every thread of
//! the group, ordered under the signalling thread by the group barrier) are followed by
//! one `fence.sc.sys`, then a relaxed store or add of the signal at system scope (a
//! release pattern). Waits poll with system-scope acquire loads, so the data is visible
//! once the signal is. (Polling relaxed and re-reading once with an acquire costs a second
//! memory round trip after the signal lands: 0.17 µs more per ping-pong on an H100,
//! 2026-11-26. An acquire load also invalidates the SM's L1 cache, once per poll, which
//! only the waiting block's SM sees.)
//!
//! To a PE without a P2P path, a put_signal is one PutSignal request in the proxy ring
//! (from the group's first thread), which every transport applies data first; a
//! `signal_op` is a fence request and then the signal, so it follows every earlier
//! request even on a transport that does not apply one PE's requests in order. The
//! `_nbi` forms do not wait for the proxy to read the source.

use super::rma::{put_group, Group};
use super::{heap_offset, remote, route, DeviceInt, Route};
use crate::arch;
use crate::op_kinds::{Cmp, SignalOp};
use crate::state::{wait_op, WaitSite, ANY_PE};

/// Updates the signal word `sig` on `pe`, after a system-scope fence that orders every
/// earlier store of this thread before it.
#[inline(always)]
unsafe fn signal_after_fence(sig: *mut u64, signal: u64, op: SignalOp, pe: u32) {
    // SAFETY: caller contract: `sig` is a symmetric u64.
    let s = match unsafe { route(sig, pe) } {
        Route::Direct(s) => s,
        Route::Proxy(off) => {
            // The proxy's fence, as `fence_sys` below: earlier requests must land first
            // even on a path that reorders (several ib QPs, `SYMMEM_ORDERING=weak`).
            remote::fence();
            return remote::signal(pe, off, op, signal);
        }
    };
    // One system-scope fence, then a relaxed (strong) store or add: together a release
    // pattern (PTX memory model), as NVSHMEM's `__threadfence_system()` and plain store.
    // A release store after the fence would be a second system barrier.
    arch::fence_sys();
    match op {
        // SAFETY: `s` is valid and aligned.
        SignalOp::Set => unsafe { arch::store_relaxed_u64(s, signal) },
        // SAFETY: as above.
        SignalOp::Add => unsafe { arch::red_add_u64(s, signal) },
    }
}

/// A put_signal by `group`. To a P2P peer: the group's copy, then, after the group's
/// barrier, the fenced signal from its first thread. Through the proxy: one PutSignal
/// request from the first thread, then the group's barrier.
///
/// # Safety
/// As [`put_signal`].
#[inline(always)]
#[allow(clippy::too_many_arguments)] // put_signal's arguments, and the group
unsafe fn put_signal_group<T: Copy>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    signal: u64,
    op: SignalOp,
    pe: u32,
    group: Group,
    nbi: bool,
) {
    // SAFETY: caller contract: `dest` is symmetric.
    match unsafe { route(dest, pe) } {
        Route::Proxy(off) => {
            if group.is_leader() {
                let len = (nelems * core::mem::size_of::<T>()) as u64;
                let sig_off = heap_offset(sig);
                remote::put_signal(pe, off, src as u64, len, sig_off, op, signal, nbi);
            }
            group.sync();
        }
        Route::Direct(_) => {
            // SAFETY: caller contract; `put_group` ends with the group's barrier.
            unsafe {
                put_group(dest, src, nelems, pe, group, nbi);
                if group.is_leader() {
                    signal_after_fence(sig, signal, op, pe);
                }
            }
        }
    }
}

/// Puts `nelems` elements to `dest` on `pe`, then updates the signal `sig` on `pe`
/// (`nvshmem_put_signal`).
///
/// # Safety
/// `dest` (room for `nelems`) and `sig` must be symmetric addresses; `src` readable.
#[inline(always)]
pub unsafe fn put_signal<T: Copy>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    signal: u64,
    op: SignalOp,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { put_signal_group(dest, src, nelems, sig, signal, op, pe, Group::Thread, false) }
}

/// Non-blocking [`put_signal`] (`nvshmem_put_signal_nbi`).
///
/// # Safety
/// As [`put_signal`].
#[inline(always)]
pub unsafe fn put_signal_nbi<T: Copy>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    signal: u64,
    op: SignalOp,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { put_signal_group(dest, src, nelems, sig, signal, op, pe, Group::Thread, true) }
}

/// [`put_signal`] by a whole warp: lanes split the copy, lane 0 signals after the warp
/// barrier (`nvshmemx_put_signal_warp`).
///
/// # Safety
/// As [`put_signal`]; every thread of the warp must call it with the same arguments.
#[inline(always)]
pub unsafe fn put_signal_warp<T: Copy>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    signal: u64,
    op: SignalOp,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { put_signal_group(dest, src, nelems, sig, signal, op, pe, Group::Warp, false) }
}

/// [`put_signal`] by a whole block: threads split the copy, thread 0 signals after the
/// block barrier (`nvshmemx_put_signal_block`).
///
/// # Safety
/// As [`put_signal`]; every thread of the block must call it with the same arguments.
#[inline(always)]
pub unsafe fn put_signal_block<T: Copy>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    signal: u64,
    op: SignalOp,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { put_signal_group(dest, src, nelems, sig, signal, op, pe, Group::Block, false) }
}

/// Non-blocking [`put_signal_warp`] (`nvshmemx_put_signal_nbi_warp`).
///
/// # Safety
/// As [`put_signal_warp`].
#[inline(always)]
pub unsafe fn put_signal_nbi_warp<T: Copy>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    signal: u64,
    op: SignalOp,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { put_signal_group(dest, src, nelems, sig, signal, op, pe, Group::Warp, true) }
}

/// Non-blocking [`put_signal_block`] (`nvshmemx_put_signal_nbi_block`).
///
/// # Safety
/// As [`put_signal_block`].
#[inline(always)]
pub unsafe fn put_signal_nbi_block<T: Copy>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    signal: u64,
    op: SignalOp,
    pe: u32,
) {
    // SAFETY: caller contract.
    unsafe { put_signal_group(dest, src, nelems, sig, signal, op, pe, Group::Block, true) }
}

/// Updates the signal `sig` on `pe` without data (`nvshmemx_signal_op`).
///
/// # Safety
/// `sig` must be a symmetric address of a u64.
#[inline(always)]
pub unsafe fn signal_op(sig: *mut u64, signal: u64, op: SignalOp, pe: u32) {
    // SAFETY: caller contract.
    unsafe { signal_after_fence(sig, signal, op, pe) }
}

/// Reads this PE's signal `sig` (`nvshmem_signal_fetch`).
///
/// # Safety
/// `sig` must be a symmetric address of a u64.
#[inline(always)]
pub unsafe fn signal_fetch(sig: *const u64) -> u64 {
    // SAFETY: caller contract.
    unsafe { arch::load_acquire_u64(sig) }
}

/// Waits until this PE's signal `sig` satisfies `cmp value`; returns the value seen
/// (`nvshmem_signal_wait_until`).
///
/// # Safety
/// `sig` must be a symmetric address of a u64.
#[inline(always)]
pub unsafe fn signal_wait_until(sig: *const u64, cmp: Cmp, value: u64) -> u64 {
    // SAFETY: caller contract.
    unsafe { wait_until(sig as *mut u64, cmp, value) }
}

/// Waits until this PE's `ivar` satisfies `cmp value`; returns the value seen
/// (`nvshmem_wait_until`). A wait that lasts longer than `SYMMEM_TIMEOUT` (default 60 s)
/// fails the kernel naming the word, the value seen and the value wanted; on the CPU
/// executor a peer's death fails it too.
///
/// # Safety
/// `ivar` must be a symmetric (or any valid, aligned) address of a `T`.
#[inline(always)]
pub unsafe fn wait_until<T: DeviceInt>(ivar: *mut T, cmp: Cmp, value: T) -> T {
    let mut backoff = arch::Backoff::new(WaitSite {
        op: wait_op::WAIT_UNTIL,
        cmp: cmp as u32,
        pe: ANY_PE,
        addr: ivar as u64,
        wanted: value.to_bits(),
    });
    loop {
        // SAFETY: caller contract.
        let seen = unsafe { T::load_acquire(ivar) };
        if cmp.holds(seen, value) {
            return seen;
        }
        backoff.snooze(seen.to_bits());
    }
}

/// Whether this PE's `ivar` satisfies `cmp value` now (`nvshmem_test`).
///
/// # Safety
/// As [`wait_until`].
#[inline(always)]
pub unsafe fn test<T: DeviceInt>(ivar: *mut T, cmp: Cmp, value: T) -> bool {
    // SAFETY: caller contract.
    cmp.holds(unsafe { T::load_acquire(ivar) }, value)
}
