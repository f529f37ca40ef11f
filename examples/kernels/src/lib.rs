//! Kernels of the symmem examples. The same source is a PTX module on nvptx64 and runs on
//! the CPU executor elsewhere.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

pub mod moe;

/// This crate's kernels as PTX, built and embedded at build time, for
/// `Runtime::load_module` on GPU PEs.
#[cfg(not(target_arch = "nvptx64"))]
pub static PTX: symmem_device::EmbeddedPtx = symmem_device::embedded_ptx!();

pub mod transpose;

use symmem_device::{
    atomic_add, block_dim, my_pe, put_signal_nbi_block, quiet_block, signal_wait_until,
    sync_threads, thread_rank, Cmp, SignalOp,
};

symmem_device::kernel! {
    /// Producer of a device-side pipeline: one block sends `chunks` chunks of `chunk_len`
    /// u64s from `src` to `dst` on `pe`; after each chunk, `sig[c]` on `pe` is set to 1,
    /// so the consumer can start on chunk `c` while later chunks are in flight.
    pub fn pipeline_produce(dst: *mut u64, src: *const u64, chunk_len: usize, chunks: usize, sig: *mut u64, pe: u32) {
        let mut c = 0;
        while c < chunks {
            let off = c * chunk_len;
            put_signal_nbi_block(dst.add(off), src.add(off), chunk_len, sig.add(c), 1, SignalOp::Set, pe);
            c += 1;
        }
        quiet_block();
    }

    /// Consumer of the pipeline: for each chunk, waits for its signal, then the block sums
    /// the chunk into `sums[c]` (a symmetric array on this PE) with atomics.
    pub fn pipeline_consume(buf: *const u64, chunk_len: usize, chunks: usize, sig: *mut u64, sums: *mut u64) {
        let me = my_pe();
        let (tid, threads) = (thread_rank() as usize, block_dim().volume() as usize);
        let mut c = 0;
        while c < chunks {
            if tid == 0 {
                signal_wait_until(sig.add(c), Cmp::Eq, 1);
            }
            // Thread 0's acquire load saw the signal; the barrier extends that to the block.
            sync_threads();
            let chunk = buf.add(c * chunk_len);
            let mut partial = 0u64;
            let mut i = tid;
            while i < chunk_len {
                partial = partial.wrapping_add(chunk.add(i).read());
                i += threads;
            }
            atomic_add(sums.add(c), partial, me);
            c += 1;
        }
    }
}

/// Every kernel of this crate, for the check of each descriptor against its PTX `.entry`.
#[cfg(not(target_arch = "nvptx64"))]
pub const KERNELS: &[symmem_device::KernelInfo] = &[
    moe::moe_dispatch_warp::KERNEL.info(),
    moe::moe_dispatch_block::KERNEL.info(),
    moe::moe_expert_warp::KERNEL.info(),
    moe::moe_expert_block::KERNEL.info(),
    moe::moe_count::KERNEL.info(),
    moe::moe_combine::KERNEL.info(),
    transpose::transpose_staged::KERNEL.info(),
    transpose::transpose_get::KERNEL.info(),
    transpose::transpose_fused::KERNEL.info(),
    pipeline_produce::KERNEL.info(),
    pipeline_consume::KERNEL.info(),
];
