//! The device operations, written once over the per-target primitives in `arch`.

mod amo;
mod rma;
mod signal;
mod sync;
mod thread;

pub use amo::*;
pub use rma::*;
pub use signal::*;
pub use sync::*;
pub use thread::*;

use crate::arch;
use crate::state::error_code;

/// This PE (`nvshmem_my_pe`).
#[inline(always)]
pub fn my_pe() -> u32 {
    arch::state().my_pe
}

/// The number of PEs (`nvshmem_n_pes`).
#[inline(always)]
pub fn n_pes() -> u32 {
    arch::state().n_pes
}

/// The address of symmetric address `sym` on `pe` in this address space, or null when
/// there is no direct (P2P) path to `pe` (`nvshmem_ptr`).
///
/// # Safety
/// `sym` must be a symmetric address (inside this PE's heap) and `pe < n_pes()`.
#[inline(always)]
pub unsafe fn ptr<T>(sym: *const T, pe: u32) -> *mut T {
    let st = arch::state();
    // SAFETY: `peer_bases` holds `n_pes` entries and the caller guarantees `pe < n_pes`.
    let base = unsafe { *(st.peer_bases as *const u64).add(pe as usize) };
    if base == 0 {
        return core::ptr::null_mut();
    }
    (base + (sym as u64 - st.heap_base)) as *mut T
}

/// Like [`ptr`], but fails the kernel visibly (error word + trap on the GPU, a panic on
/// the CPU executor) when `pe` does not exist or has no P2P path. Requests to PEs without
/// a P2P path will go to the proxy channel once a remote transport exists; until then they
/// must never be dropped silently.
#[inline(always)]
pub(crate) unsafe fn peer<T>(sym: *const T, pe: u32) -> *mut T {
    if pe >= n_pes() {
        arch::fail(error_code::INVALID_PE, pe);
    }
    // SAFETY: `pe < n_pes` was just checked; the caller guarantees `sym` is symmetric.
    let p = unsafe { ptr(sym, pe) };
    if p.is_null() {
        arch::fail(error_code::UNREACHABLE_PE, pe);
    }
    p
}
