//! The ring example, and the identity queries `my_pe`, `n_pes` and `ptr`.

use symmem_device::*;

use crate::pattern;

kernel! {
    /// Every thread of the block puts its part of `n` u64s from `src` (host) to the right
    /// neighbour's `dst` (sym) and thread 0 adds 1 to the neighbour's `sig` (sym).
    pub fn ring_put_signal(dst: *mut u64, src: *const u64, n: usize, sig: *mut u64) {
        let right = (my_pe() + 1) % n_pes();
        put_signal_block(dst, src, n, sig, 1, SignalOp::Add, right);
    }

    /// Thread 0 waits for this PE's `sig` (sym) to reach `expect`.
    pub fn wait_signal(sig: *mut u64, expect: u64) {
        if thread_rank() == 0 {
            signal_wait_until(sig, Cmp::Ge, expect);
        }
    }

    /// Launched as one block: thread `t` records `my_pe()` and `n_pes()` in
    /// `ids[2t..2t + 2]` (host). Thread `t < n_pes` also records `ptr(buf, t)` in `ptrs[t]`
    /// (host) and, if it is not null, stores `pattern(my_pe, t, 0)` through it into element
    /// `my_pe` of PE `t`'s `buf` (sym, `n_pes` u64s).
    pub fn identity(buf: *mut u64, ids: *mut u32, ptrs: *mut u64) {
        let (t, me) = (thread_rank(), my_pe());
        ids.add(2 * t as usize).write(me);
        ids.add(2 * t as usize + 1).write(n_pes());
        if t < n_pes() {
            let peer_buf = ptr(buf, t);
            ptrs.add(t as usize).write(peer_buf as u64);
            if !peer_buf.is_null() {
                peer_buf.add(me as usize).write(pattern(me, t, 0));
            }
        }
    }
}
