//! Traffic through the proxy channel: many requests from many threads, to fill the ring.

use symmem_device::*;

use crate::{global_thread, pattern};

kernel! {
    /// Every thread `t` (grid-wide) stores `rounds` values with `p` (inline, not waited for)
    /// into its slots `dst[base + t * rounds + r]` (sym) on PE `pe`, where `base = my_pe *
    /// threads * rounds`, then adds 1 to `count` (sym) on `pe` and quiets. With a small
    /// ring, threads wait for slots: nothing may be lost.
    pub fn proxy_flood(dst: *mut u64, count: *mut u64, pe: u32, rounds: u32) {
        let t = global_thread();
        let threads = grid_dim().volume() * block_dim().volume();
        let me = my_pe();
        let base = (me * threads * rounds) as usize;
        for r in 0..rounds {
            let i = (t * rounds + r) as usize;
            p(dst.add(base + i), pattern(me, 7, i), pe);
        }
        atomic_add(count, 1u64, pe);
        quiet();
    }
}
