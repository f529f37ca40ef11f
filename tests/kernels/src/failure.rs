//! Kernels that fail on purpose: an explicit panic while sibling threads wait, device
//! operations on PEs that cannot be reached or do not exist, and a wait for a PE that
//! dies.

use symmem_device::*;

/// Operations [`remote_op()`] can issue, by number.
pub const REMOTE_OPS: u32 = 8;

kernel! {
    /// Thread `victim_thread` (thread rank) of block `victim_block` (block rank) panics.
    /// Every other thread waits: thread 0 of each block in `signal_wait_until(sig, Gt,
    /// block_rank)` (`sig`, sym, is set by the host so that blocks before the victim's pass
    /// and the victim's never does), then every thread in `sync_warp` and `sync_threads`.
    pub fn panic_one(sig: *mut u64, victim_block: u32, victim_thread: u32) {
        let (b, t) = (block_rank(), thread_rank());
        if b == victim_block && t == victim_thread {
            panic!("deliberate kernel panic");
        }
        if t == 0 {
            signal_wait_until(sig, Cmp::Gt, b as u64);
        }
        sync_warp();
        sync_threads();
    }

    /// Thread `who` (grid-wide thread number) issues device operation `op` on `buf` (sym,
    /// at least 2 u64s) at PE `pe`: 0 `put`, 1 `get`, 2 `p`, 3 `g`, 4 `atomic_fetch_add`,
    /// 5 `put_signal`, 6 `p` of the 16-byte `[0x5eed_0001, 0x5eed_0002]` to `buf[0..2]`,
    /// 7 `g` of the 16 bytes `buf[0..2]` into this PE's `buf[0..2]`. The others wait in
    /// `sync_threads`.
    pub fn remote_op(buf: *mut u64, op: u32, pe: u32, who: u32) {
        if crate::global_thread() == who {
            let local = buf.add(1);
            match op {
                0 => put(buf, local, 1, pe),
                1 => get(local, buf, 1, pe),
                2 => p(buf, 1, pe),
                3 => local.write(g(buf, pe)),
                4 => {
                    atomic_fetch_add(buf, 1, pe);
                }
                6 => p(buf.cast::<[u64; 2]>(), [0x5eed_0001, 0x5eed_0002], pe),
                7 => {
                    let pair = buf.cast::<[u64; 2]>();
                    pair.write(g(pair.cast_const(), pe));
                }
                _ => put_signal(buf, local, 1, local, 1, SignalOp::Add, pe),
            }
        }
        sync_threads();
    }

    /// One thread runs a device `sync_all`, which a silent peer never joins.
    pub fn sync_all_once() {
        sync_all();
    }

    /// Thread 0 waits for `sig` (sym) to become non-zero, a signal that never comes; the
    /// other threads of the block wait for it in `sync_threads`.
    pub fn wait_forever(sig: *mut u64) {
        if thread_rank() == 0 {
            signal_wait_until(sig, Cmp::Ne, 0);
        }
        sync_threads();
    }
}

symmem_device::kernel! {
    /// Thread 0 of every block returns at once; the others meet at `sync_threads` and
    /// `sync_warp` (an exited thread counts as arrived, as on a GPU) and then each adds 1
    /// to `counter` on this PE.
    pub fn early_exit_sync(counter: *mut u64) {
        if thread_rank() == 0 {
            return;
        }
        sync_threads();
        sync_warp();
        atomic_add(counter, 1u64, my_pe());
    }
}
