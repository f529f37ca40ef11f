//! Kernels exercising the symmem device API.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use symmem_device::*;

kernel! {
    /// Every thread of the block puts its part of `n` u64s to the right neighbour and
    /// thread 0 signals it.
    pub fn ring_put_signal(dst: *mut u64, src: *const u64, n: usize, sig: *mut u64) {
        let right = (my_pe() + 1) % n_pes();
        put_signal_block(dst, src, n, sig, 1, SignalOp::Add, right);
    }

    /// Waits for the signal to reach `expect`.
    pub fn wait_signal(sig: *mut u64, expect: u64) {
        if thread_rank() == 0 {
            signal_wait_until(sig, Cmp::Ge, expect);
        }
    }

    /// Adds 1 to `counter` on every PE.
    pub fn add_everywhere(counter: *mut u64) {
        let mut pe = 0;
        while pe < n_pes() {
            atomic_fetch_add(counter, 1u64, pe);
            pe += 1;
        }
        barrier_all();
    }
}
