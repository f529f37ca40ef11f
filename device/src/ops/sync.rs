//! Ordering and synchronization from kernels: `fence`, `quiet`, `sync_all`, `barrier_all`
//! (called by one thread per PE) and their `_warp` and `_block` forms (called by every
//! thread of one warp, or one block, per PE).
//!
//! `sync_all` is a dissemination barrier over device barrier flags in each PE's heap
//! (reserved by the runtime, located by `DeviceState::barrier_off`), separate from the
//! host's barrier flags so host and device barriers never mix epochs. The epoch counter
//! lives in this PE's heap, so successive launches continue the sequence.

use super::{has_proxy, lane_id, remote, route, sync_threads, sync_warp, thread_rank, Route};
use crate::arch;
use crate::op_kinds::{Cmp, SignalOp};
use crate::state::{wait_op, WaitSite};

/// Bytes between two rounds' flags: one cache line each.
const FLAG_STRIDE: u64 = 64;

/// Orders this PE's puts, AMOs and signals to each PE (`nvshmem_fence`). A flag published
/// after it must be a strong store: `p` of a 4- or 8-byte value, `atomic_set`,
/// `signal_op` or `put_signal` (not a multi-element `put`). With a proxy channel it also
/// orders this PE's proxy requests (a Fence request in the ring).
#[inline(always)]
pub fn fence() {
    arch::fence_sys();
    if has_proxy() {
        remote::fence();
    }
}

/// Completes every earlier put, get, AMO and signal of this thread (`nvshmem_quiet`).
/// On P2P paths they are complete already; the fence makes them visible system-wide. With
/// a proxy channel it also waits until the proxy has completed every earlier request of
/// this PE on the transport.
#[inline(always)]
pub fn quiet() {
    arch::fence_sys();
    if has_proxy() {
        remote::quiet();
    }
}

/// Waits until every PE has called `sync_all` (`nvshmem_sync_all`). One thread per PE.
pub fn sync_all() {
    sync_rounds(false);
}

/// The dissemination barrier of `sync_all`/`barrier_all`, by one thread per PE. Round 0's
/// flag store is a release (a fence, then the store) unless `fenced`: this thread has just
/// run a system-scope fence (`barrier_all`'s quiet), which with a relaxed store forms the
/// same release pattern, so the barrier costs one system fence, not two. Later rounds
/// (more than 2 PEs) release again, to pass on what earlier rounds acquired.
fn sync_rounds(fenced: bool) {
    let st = arch::state();
    let (me, n) = (st.my_pe, st.n_pes);
    let epoch_ptr = (st.heap_base + st.epoch_off) as *mut u64;
    // SAFETY: the epoch word is reserved in this PE's heap and touched only by the one
    // thread per PE that runs the barrier (launch boundaries order successive ones), so
    // relaxed accesses suffice.
    let epoch = unsafe { arch::load_relaxed_u64(epoch_ptr) } + 1;
    // SAFETY: as above.
    unsafe { arch::store_relaxed_u64(epoch_ptr, epoch) };
    let (mut dist, mut round) = (1u32, 0u64);
    while dist < n {
        let to = (me + dist) % n;
        let flag_off = st.barrier_off + round * FLAG_STRIDE;
        let mine = (st.heap_base + flag_off) as *mut u64;
        // SAFETY: barrier flags are reserved, aligned u64s in every PE's heap; `route`
        // fails visibly when `to` cannot be reached. The release publishes this PE's
        // earlier writes (and, transitively, what it learned in earlier rounds) to `to`;
        // through the proxy, the flag is a signal Set ordered after this PE's earlier
        // requests.
        match unsafe { route(mine, to) } {
            Route::Direct(p) if fenced && round == 0 => unsafe {
                arch::store_relaxed_u64(p, epoch)
            },
            Route::Direct(p) => unsafe { arch::store_release_u64(p, epoch) },
            Route::Proxy(off) => remote::signal(to, off, SignalOp::Set, epoch),
        }
        let mut backoff = arch::Backoff::new(WaitSite {
            op: wait_op::SYNC_ALL,
            cmp: Cmp::Ge as u32,
            pe: (me + n - dist) % n,
            addr: mine as u64,
            wanted: epoch,
        });
        // Polled with acquire loads, as `wait_until` (see `signal.rs`).
        loop {
            // SAFETY: `mine` is this PE's own flag for this round.
            let seen = unsafe { arch::load_acquire_u64(mine) };
            if seen >= epoch {
                break;
            }
            backoff.snooze(seen);
        }
        dist *= 2;
        round += 1;
    }
}

/// [`quiet`] then [`sync_all`] (`nvshmem_barrier_all`). One thread per PE. The quiet's
/// fence also publishes the first round's flag.
pub fn barrier_all() {
    quiet();
    sync_rounds(true);
}

/// [`quiet`] by a whole block: returns when every thread's earlier operations are
/// complete (`nvshmemx_quiet_block`). One thread quiets for all: the block barrier before
/// it orders every thread's earlier operations before that thread's system fence (which
/// is cumulative), and the barrier after it orders the fence before every thread's later
/// operations; a proxy quiet completes every earlier request of this PE, whoever issued
/// it. (Every thread quieting cost a system fence per warp and, through the proxy, a quiet
/// request per thread.)
pub fn quiet_block() {
    sync_threads();
    if thread_rank() == 0 {
        quiet();
    }
    sync_threads();
}

/// [`quiet`] by a whole warp (`nvshmemx_quiet_warp`): as [`quiet_block`], lane 0 quiets
/// for the warp between warp barriers.
pub fn quiet_warp() {
    sync_warp();
    if lane_id() == 0 {
        quiet();
    }
    sync_warp();
}

/// [`sync_all`] called by every thread of one block per PE (`nvshmemx_sync_all_block`).
pub fn sync_all_block() {
    sync_threads();
    if thread_rank() == 0 {
        sync_all();
    }
    sync_threads();
}

/// [`barrier_all`] called by every thread of one block per PE
/// (`nvshmemx_barrier_all_block`).
pub fn barrier_all_block() {
    sync_threads();
    if thread_rank() == 0 {
        barrier_all();
    }
    sync_threads();
}

/// [`sync_all`] called by every thread of one warp per PE (`nvshmemx_sync_all_warp`): lane
/// 0 runs the barrier between warp barriers.
pub fn sync_all_warp() {
    sync_warp();
    if lane_id() == 0 {
        sync_all();
    }
    sync_warp();
}

/// [`barrier_all`] called by every thread of one warp per PE
/// (`nvshmemx_barrier_all_warp`): the warp barrier before it orders every lane's earlier
/// operations before lane 0's quiet (as [`quiet_block`] does for a block).
pub fn barrier_all_warp() {
    sync_warp();
    if lane_id() == 0 {
        barrier_all();
    }
    sync_warp();
}
