//! The device operations, written once over the per-target primitives in `arch`.

mod amo;
mod block_atomic;
mod block_scan;
mod collective;
mod remote;
mod rma;
mod scope;
mod shared;
mod signal;
mod sym_slice;
mod sync;
mod thread;
mod wait_many;
mod warp;

pub use amo::*;
pub use block_atomic::*;
pub use block_scan::*;
pub use collective::*;
pub use rma::*;
pub use scope::*;
pub use shared::*;
pub use signal::*;
pub use sym_slice::*;
pub use sync::*;
pub use thread::*;
pub use wait_many::*;
pub(crate) use warp::ShflMode;
pub use warp::*;

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
    // SAFETY: `peer_bases` holds `n_pes` entries, the caller guarantees `pe < n_pes`, and
    // the host does not change the table during a launch.
    let base = unsafe { arch::load_invariant_u64((st.peer_bases as *const u64).add(pe as usize)) };
    if base == 0 {
        return core::ptr::null_mut();
    }
    (base + (sym as u64 - st.heap_base)) as *mut T
}

/// How an operation reaches its target PE.
pub(crate) enum Route<T> {
    /// Through this P2P pointer.
    Direct(*mut T),
    /// Through the proxy channel, at this heap offset on the target.
    Proxy(u64),
}

/// The route of an operation on symmetric address `sym` of `pe`: its P2P pointer, or the
/// proxy channel when `pe` has no P2P path and the PE has one. Fails the kernel visibly
/// (error word + trap on the GPU, a panic on the CPU executor) when `pe` does not exist or
/// cannot be reached at all: requests are never dropped silently.
#[inline(always)]
pub(crate) unsafe fn route<T>(sym: *const T, pe: u32) -> Route<T> {
    if pe >= n_pes() {
        arch::fail(error_code::INVALID_PE, pe);
    }
    // SAFETY: `pe < n_pes` was just checked; the caller guarantees `sym` is symmetric.
    let p = unsafe { ptr(sym, pe) };
    if !p.is_null() {
        return Route::Direct(p);
    }
    let st = arch::state();
    if st.proxy == 0 {
        arch::fail(error_code::UNREACHABLE_PE, pe);
    }
    Route::Proxy(heap_offset(sym))
}

/// The heap offset of symmetric address `sym` (the same on every PE).
#[inline(always)]
pub(crate) fn heap_offset<T>(sym: *const T) -> u64 {
    sym as u64 - arch::state().heap_base
}

/// Whether this PE has a proxy channel (so `fence`/`quiet` must also cover it).
#[inline(always)]
pub(crate) fn has_proxy() -> bool {
    arch::state().proxy != 0
}
