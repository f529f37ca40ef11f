//! Thread geometry and group barriers, so kernels need no other crate.

use crate::arch;
use crate::geometry::{Dim3, WARP_SIZE};

/// `threadIdx`.
#[inline(always)]
pub fn thread_idx() -> Dim3 {
    arch::thread_idx()
}

/// `blockIdx`.
#[inline(always)]
pub fn block_idx() -> Dim3 {
    arch::block_idx()
}

/// `blockDim`.
#[inline(always)]
pub fn block_dim() -> Dim3 {
    arch::block_dim()
}

/// `gridDim`.
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    arch::grid_dim()
}

/// This thread's linear index within its block (x fastest).
#[inline(always)]
pub fn thread_rank() -> u32 {
    block_dim().linear(thread_idx())
}

/// This block's linear index within the grid.
#[inline(always)]
pub fn block_rank() -> u32 {
    grid_dim().linear(block_idx())
}

/// This thread's lane within its warp, `0..WARP_SIZE`.
#[inline(always)]
pub fn lane_id() -> u32 {
    arch::lane_id()
}

/// The warp's index within the block.
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_rank() / WARP_SIZE
}

/// Threads in this thread's warp: `WARP_SIZE`, or fewer in a block's last, partial warp.
#[inline(always)]
pub fn warp_width() -> u32 {
    let threads = block_dim().volume();
    (threads - warp_id() * WARP_SIZE).min(WARP_SIZE)
}

/// `__syncthreads()`: every thread of the block must call it.
#[inline(always)]
pub fn sync_threads() {
    arch::sync_threads()
}

/// `__syncwarp()`: every thread of the warp must call it.
#[inline(always)]
pub fn sync_warp() {
    arch::sync_warp()
}
