//! Kernels that exercise every symmem device operation.
//!
//! They run on the CPU executor (the `device-test-pe` program of `tests/device` launches
//! them on 2 and 4 PEs and checks the results exactly) and compile to PTX: `no_std`, no
//! allocation, no formatting, plain loops over raw pointers.
//!
//! Kernel arguments are symmetric addresses (marked *sym* in the docs: the host passes
//! `Runtime::ptr(&buf, my_pe)`), plain values, or pointers to host memory (*host*). Values
//! that kernels write and host checks expect (or the other way round) come from
//! [`pattern`], so both sides agree on every element.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

/// This crate's kernels as PTX, built and embedded at build time, for
/// `Runtime::load_module` on GPU PEs.
#[cfg(not(target_arch = "nvptx64"))]
pub static PTX: symmem_device::EmbeddedPtx = symmem_device::embedded_ptx!();

pub mod amo;
pub mod block;
pub mod collective;
pub mod element_types;
pub mod failure;
pub mod generic;
pub mod pipeline;
pub mod print;
pub mod proxy;
pub mod ring;
pub mod rma;
pub mod signal;
pub mod sync;
pub mod threads;

use symmem_device::{block_dim, block_rank, thread_rank};

/// Element `i` of data block `tag` written by PE `pe`. Distinct for every
/// `(pe < 2^15, tag < 2^16, i < 2^32)` and never zero, so a misplaced, stale or missing
/// element (symmetric memory starts zeroed) never passes a check.
#[inline(always)]
pub const fn pattern(pe: u32, tag: u32, i: usize) -> u64 {
    ((pe as u64 + 1) << 48) | ((tag as u64 & 0xffff) << 32) | (i as u64 & 0xffff_ffff)
}

/// This thread's index in the whole grid: `block_rank * threads_per_block + thread_rank`.
#[inline(always)]
fn global_thread() -> u32 {
    block_rank() * block_dim().volume() + thread_rank()
}

/// Warps per block (the last one may be partial).
#[inline(always)]
fn warps_per_block() -> u32 {
    block_dim().volume().div_ceil(symmem_device::WARP_SIZE)
}

/// Every kernel of this crate, for the check of each descriptor against its PTX `.entry`.
#[cfg(not(target_arch = "nvptx64"))]
pub const KERNELS: &[symmem_device::KernelInfo] = &[
    amo::amo_u32::KERNEL.info(),
    amo::amo_i32::KERNEL.info(),
    amo::amo_u64::KERNEL.info(),
    amo::amo_i64::KERNEL.info(),
    block::block_scan::KERNEL.info(),
    block::warp_ops::KERNEL.info(),
    block::shared_hist::KERNEL.info(),
    block::dyn_shared::KERNEL.info(),
    block::group_misuse::KERNEL.info(),
    collective::coll_barrier::KERNEL.info(),
    collective::coll_broadcast::KERNEL.info(),
    collective::coll_fcollect::KERNEL.info(),
    collective::coll_collect::KERNEL.info(),
    collective::coll_alltoall::KERNEL.info(),
    collective::coll_reduce_i32::KERNEL.info(),
    collective::coll_reduce_i64::KERNEL.info(),
    collective::coll_reduce_u32::KERNEL.info(),
    collective::coll_reduce_u64::KERNEL.info(),
    collective::coll_reduce_f32::KERNEL.info(),
    collective::coll_reduce_f64::KERNEL.info(),
    collective::coll_reduce_bf16::KERNEL.info(),
    collective::coll_reduce_f16::KERNEL.info(),
    element_types::put_bf16::KERNEL.info(),
    element_types::put_f16::KERNEL.info(),
    element_types::put_e4m3::KERNEL.info(),
    element_types::put_e5m2::KERNEL.info(),
    element_types::amo_f32::KERNEL.info(),
    element_types::amo_f64::KERNEL.info(),
    element_types::strided::KERNEL.info(),
    generic::slice_rma_u64_thread_4::KERNEL.info(),
    generic::slice_rma_u32_warp_2::KERNEL.info(),
    generic::slice_rma_f64_block_8::KERNEL.info(),
    generic::slice_rma_u8_block_1::KERNEL.info(),
    generic::slice_elems_u32_3::KERNEL.info(),
    generic::slice_elems_f64_2::KERNEL.info(),
    generic::scope_collectives_thread::KERNEL.info(),
    generic::scope_collectives_warp::KERNEL.info(),
    generic::scope_collectives_block::KERNEL.info(),
    generic::slice_put_at::KERNEL.info(),
    generic::slice_put_warp_at::KERNEL.info(),
    generic::scope_put_nbi_warp::KERNEL.info(),
    generic::scope_put_nbi_block::KERNEL.info(),
    generic::explicit_put_nbi_warp::KERNEL.info(),
    generic::explicit_put_nbi_block::KERNEL.info(),
    generic::slice_p_loop::KERNEL.info(),
    generic::slice_p_loop_unchecked::KERNEL.info(),
    generic::slice_put_loop::KERNEL.info(),
    generic::slice_put_loop_unchecked::KERNEL.info(),
    failure::panic_one::KERNEL.info(),
    failure::remote_op::KERNEL.info(),
    failure::wait_forever::KERNEL.info(),
    failure::sync_all_once::KERNEL.info(),
    failure::early_exit_sync::KERNEL.info(),
    proxy::proxy_flood::KERNEL.info(),
    pipeline::pipe_produce::KERNEL.info(),
    pipeline::pipe_consume::KERNEL.info(),
    pipeline::stream_consume::KERNEL.info(),
    print::print_values::KERNEL.info(),
    ring::ring_put_signal::KERNEL.info(),
    ring::wait_signal::KERNEL.info(),
    ring::identity::KERNEL.info(),
    rma::rma_put_threads::KERNEL.info(),
    rma::rma_get_threads::KERNEL.info(),
    rma::rma_p_threads::KERNEL.info(),
    rma::rma_g_threads::KERNEL.info(),
    rma::rma_put_warps::KERNEL.info(),
    rma::rma_get_warps::KERNEL.info(),
    rma::rma_put_blocks::KERNEL.info(),
    rma::rma_get_blocks::KERNEL.info(),
    rma::rma_bytes::KERNEL.info(),
    signal::ps_put_threads::KERNEL.info(),
    signal::wait_many::KERNEL.info(),
    signal::ps_put_warps::KERNEL.info(),
    signal::ps_put_blocks::KERNEL.info(),
    signal::ps_consume::KERNEL.info(),
    signal::signal_cmp::KERNEL.info(),
    signal::wait_cmp_u32::KERNEL.info(),
    signal::wait_cmp_i32::KERNEL.info(),
    signal::wait_cmp_u64::KERNEL.info(),
    signal::wait_cmp_i64::KERNEL.info(),
    sync::fence_flag::KERNEL.info(),
    sync::quiet_block_flag::KERNEL.info(),
    sync::barrier_rounds::KERNEL.info(),
    sync::barrier_rounds_block::KERNEL.info(),
    sync::barrier_rounds_warp::KERNEL.info(),
    sync::flag_without_fence::KERNEL.info(),
    sync::get_nbi_read_early::KERNEL.info(),
    sync::nbi_source_reused::KERNEL.info(),
    threads::geometry::KERNEL.info(),
    threads::sync_exchange::KERNEL.info(),
    threads::big_grid::KERNEL.info(),
    threads::count_threads::KERNEL.info(),
    threads::count_threads_64::KERNEL.info(),
    threads::coop_blocks::KERNEL.info(),
];
