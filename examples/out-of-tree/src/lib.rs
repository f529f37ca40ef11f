//! A kernel crate of one kernel. The same source is a PTX module on nvptx64 and runs on
//! the CPU executor elsewhere.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use symmem_device::{my_pe, n_pes, put_signal_block, SignalOp};

/// This crate's kernels as PTX, built and embedded by build.rs, for
/// `Runtime::load_module` (GPU PEs load the PTX, CPU PEs run the same kernels natively).
#[cfg(not(target_arch = "nvptx64"))]
pub static PTX: symmem_device::EmbeddedPtx = symmem_device::embedded_ptx!();

symmem_device::kernel! {
    /// The block puts `n` u64s of `src` into `dst` on the right neighbour, then adds 1 to
    /// `sig` there.
    pub fn ring(dst: *mut u64, src: *const u64, n: usize, sig: *mut u64) {
        let right = (my_pe() + 1) % n_pes();
        put_signal_block(dst, src, n, sig, 1, SignalOp::Add, right);
    }
}
