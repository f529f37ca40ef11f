//! Kernels behind the device-initiated rows of `symmem-perf`. Each loops `iters` times over
//! one operation at a scope chosen by `scope`: 0 = one thread, 1 = a warp, 2 = a block.
//! The host times the whole launch, so per-operation numbers include the launch overhead
//! amortized over `iters`.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

/// This crate's kernels as PTX, built and embedded at build time, for
/// `Runtime::load_module` on GPU PEs.
#[cfg(not(target_arch = "nvptx64"))]
pub static PTX: symmem_device::EmbeddedPtx = symmem_device::embedded_ptx!();

use symmem_device::*;

/// `scope` value of thread-initiated operations.
pub const THREAD: u32 = 0;
/// `scope` value of warp-initiated operations.
pub const WARP: u32 = 1;
/// `scope` value of block-initiated operations.
pub const BLOCK: u32 = 2;

/// Threads per block of the block-scope rows, and the launch bound of every kernel here
/// but the grid's [`bench_put_bw()`] (each runs one block of 1, 32 or this many threads):
/// with `max_threads` the compiler may give a kernel the registers it needs rather than
/// the 64 a 1024-thread block allows, as nvcc gives NVSHMEM's benchmark kernels.
pub const BLOCK_THREADS: u32 = 64;

/// `then` of [`bench_put_nbi()`]: nothing after each put.
pub const THEN_NOTHING: u32 = 0;
/// `then` of [`bench_put_nbi()`]: a fence after each put.
pub const THEN_FENCE: u32 = 1;
/// `then` of [`bench_put_nbi()`]: a quiet after each put.
pub const THEN_QUIET: u32 = 2;

/// `kind` of [`bench_amo()`]: `atomic_fetch`.
pub const AMO_FETCH: u32 = 0;
/// `kind` of [`bench_amo()`]: `atomic_set`, then quiet.
pub const AMO_SET: u32 = 1;
/// `kind` of [`bench_amo()`]: `atomic_swap`.
pub const AMO_SWAP: u32 = 2;
/// `kind` of [`bench_amo()`]: `atomic_compare_swap`.
pub const AMO_COMPARE_SWAP: u32 = 3;
/// `kind` of [`bench_amo()`]: `atomic_fetch_add`.
pub const AMO_FETCH_ADD: u32 = 4;
/// `kind` of [`bench_amo()`]: `atomic_add`, then quiet.
pub const AMO_ADD: u32 = 5;
/// `kind` of [`bench_amo()`]: `atomic_fetch_inc`.
pub const AMO_FETCH_INC: u32 = 6;
/// `kind` of [`bench_amo()`]: `atomic_inc`, then quiet.
pub const AMO_INC: u32 = 7;
/// `kind` of [`bench_amo()`]: `atomic_fetch_and`.
pub const AMO_FETCH_AND: u32 = 8;
/// `kind` of [`bench_amo()`]: `atomic_and`, then quiet.
pub const AMO_AND: u32 = 9;
/// `kind` of [`bench_amo()`]: `atomic_fetch_or`.
pub const AMO_FETCH_OR: u32 = 10;
/// `kind` of [`bench_amo()`]: `atomic_or`, then quiet.
pub const AMO_OR: u32 = 11;
/// `kind` of [`bench_amo()`]: `atomic_fetch_xor`.
pub const AMO_FETCH_XOR: u32 = 12;
/// `kind` of [`bench_amo()`]: `atomic_xor`, then quiet.
pub const AMO_XOR: u32 = 13;

/// `op` of [`bench_pg()`]: `p`, then quiet.
pub const PG_P: u32 = 0;
/// `op` of [`bench_pg()`]: `g`.
pub const PG_G: u32 = 1;

/// The group barrier of `scope` (none for a single thread).
#[inline(always)]
fn group_sync(scope: u32) {
    match scope {
        WARP => sync_warp(),
        BLOCK => sync_threads(),
        _ => {}
    }
}

/// Whether this thread issues the group's waits.
#[inline(always)]
fn leader(scope: u32) -> bool {
    match scope {
        WARP => lane_id() == 0,
        BLOCK => thread_rank() == 0,
        _ => true,
    }
}

symmem_device::kernel! {
    /// `iters` times: put `n` u64s from `src` to `dst` on `pe` at `scope`, then quiet.
    pub fn bench_put(dst: *mut u64, src: *const u64, n: usize, iters: usize, pe: u32, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => put_warp(dst, src, n, pe),
                BLOCK => put_block(dst, src, n, pe),
                _ => put(dst, src, n, pe),
            }
            quiet();
            i += 1;
        }
    }

    /// Bandwidth form: `iters` times, the grid puts `n` u64s from `src` to `dst` on `pe`,
    /// each block its contiguous share with `put_block`, then quiets. With `window`
    /// elements (a multiple of `n`) on both sides, iteration `i` moves the `i`-th `n`
    /// elements of the window, round and round, so that a window larger than the L2 cache
    /// makes every iteration read and write HBM; `window == n` moves the same `n` each time.
    pub fn bench_put_bw(dst: *mut u64, src: *const u64, n: usize, iters: usize, pe: u32, window: usize) {
        let blocks = grid_dim().volume() as usize;
        let share = n.div_ceil(blocks);
        let start = (block_rank() as usize * share).min(n);
        let len = share.min(n - start);
        let slots = (window / n).max(1);
        let mut i = 0;
        while i < iters {
            let at = start + (i % slots) * n;
            put_block(dst.add(at), src.add(at), len, pe);
            quiet_block();
            i += 1;
        }
    }

    /// `iters` times: get `n` u64s from `src` on `pe` into local `dst` at `scope`.
    pub fn bench_get(dst: *mut u64, src: *const u64, n: usize, iters: usize, pe: u32, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => get_warp(dst, src, n, pe),
                BLOCK => get_block(dst, src, n, pe),
                _ => get(dst, src, n, pe),
            }
            i += 1;
        }
    }

    /// `iters` times: one thread fetch-adds 1 to `word` on `pe`, each add waiting for the
    /// previous one's result: the fetched value's top bit (always 0 here, which the
    /// compiler cannot know) goes into the next operand, as in NVSHMEM's row of
    /// `benches/peers/nvshmem_perf.cu`. (AMOs have no group forms: a warp or block
    /// issuing one AMO is a thread issuing it.)
    pub fn bench_fetch_add(word: *mut u64, iters: usize, pe: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        let mut dep = 0u64;
        while i < iters {
            dep = atomic_fetch_add(word, 1 + dep, pe) >> 63;
            i += 1;
        }
        if dep != 0 {
            word.write(dep);
        }
    }

    /// `iters` times: `put_nbi` of `n` u64s from `src` to `dst` on `pe` by one thread, then
    /// what `then` names ([`THEN_NOTHING`], [`THEN_FENCE`], [`THEN_QUIET`]); a quiet at
    /// the end.
    pub fn bench_put_nbi(dst: *mut u64, src: *const u64, n: usize, iters: usize, pe: u32, then: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            put_nbi(dst, src, n, pe);
            match then {
                THEN_FENCE => fence(),
                THEN_QUIET => quiet(),
                _ => {}
            }
            i += 1;
        }
        quiet();
    }

    /// `iters` times: one thread runs the atomic `kind` (an `AMO_*` code) on `word` of
    /// `pe`; the non-fetching kinds are followed by a quiet. A fetching kind's result
    /// feeds the next operand (see [`bench_fetch_add`]), so each waits for the last.
    pub fn bench_amo(word: *mut u64, iters: usize, pe: u32, kind: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        let mut dep = 0u64;
        while i < iters {
            let v = i as u64 + dep;
            let old = match kind {
                AMO_FETCH => atomic_fetch(word, pe),
                AMO_SET => { atomic_set(word, v, pe); quiet(); 0 }
                AMO_SWAP => atomic_swap(word, v, pe),
                AMO_COMPARE_SWAP => atomic_compare_swap(word, v, v + 1, pe),
                AMO_FETCH_ADD => atomic_fetch_add(word, 1 + dep, pe),
                AMO_ADD => { atomic_add(word, 1u64, pe); quiet(); 0 }
                AMO_FETCH_INC => atomic_fetch_inc(word, pe),
                AMO_INC => { atomic_inc(word, pe); quiet(); 0 }
                AMO_FETCH_AND => atomic_fetch_and(word, !dep, pe),
                AMO_AND => { atomic_and(word, !0u64, pe); quiet(); 0 }
                AMO_FETCH_OR => atomic_fetch_or(word, 1 + dep, pe),
                AMO_OR => { atomic_or(word, 1u64, pe); quiet(); 0 }
                AMO_FETCH_XOR => atomic_fetch_xor(word, 1 + dep, pe),
                _ => { atomic_xor(word, 1u64, pe); quiet(); 0 }
            };
            dep = old >> 63;
            i += 1;
        }
        if dep != 0 {
            word.write(dep);
        }
    }

    /// `iters` times: one thread runs `p` of `word` to `pe` then quiet ([`PG_P`]), or `g`
    /// of it ([`PG_G`]); the loaded values' sum goes to this PE's `word` at the end, so
    /// that no load is optimized away.
    pub fn bench_pg(word: *mut u64, iters: usize, pe: u32, op: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        let mut sum = 0u64;
        while i < iters {
            if op == PG_P {
                p(word, i as u64, pe);
                quiet();
            } else {
                sum = sum.wrapping_add(g(word, pe));
            }
            i += 1;
        }
        if op == PG_G {
            word.write(sum);
        }
    }

    /// Bandwidth form at `scope`: `iters` back-to-back `put_nbi`s (or `get_nbi`s with
    /// `get != 0`, from `src` on `pe` into local `dst`) of `n` u64s, then one quiet.
    pub fn bench_rma_bw(dst: *mut u64, src: *const u64, n: usize, iters: usize, pe: u32, scope: u32, get: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match (scope, get != 0) {
                (WARP, false) => put_nbi_warp(dst, src, n, pe),
                (BLOCK, false) => put_nbi_block(dst, src, n, pe),
                (_, false) => put_nbi(dst, src, n, pe),
                (WARP, true) => get_nbi_warp(dst, src, n, pe),
                (BLOCK, true) => get_nbi_block(dst, src, n, pe),
                (_, true) => get_nbi(dst, src, n, pe),
            }
            i += 1;
        }
        match scope {
            BLOCK => quiet_block(),
            _ => quiet(),
        }
    }

    /// `iters` times: `team_barrier` on `team` at `scope` (every PE of the team runs it).
    pub fn bench_team_barrier(team: DeviceTeam, iters: usize, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => team_barrier_warp(&team),
                BLOCK => team_barrier_block(&team),
                _ => team_barrier(&team),
            }
            i += 1;
        }
    }

    /// `iters` times: `team_sync` on `team` at `scope` (every PE of the team runs it).
    pub fn bench_team_sync(team: DeviceTeam, iters: usize, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => team_sync_warp(&team),
                BLOCK => team_sync_block(&team),
                _ => team_sync(&team),
            }
            i += 1;
        }
    }

    /// `iters` times: sum `reducescatter` on `team` at `scope`: `n` u64s per PE's block of
    /// `src` into `dst` (every PE of the team runs it).
    pub fn bench_team_reducescatter(team: DeviceTeam, dst: *mut u64, src: *const u64, n: usize, iters: usize, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => reducescatter_warp(&team, dst, src, n, Sum),
                BLOCK => reducescatter_block(&team, dst, src, n, Sum),
                _ => reducescatter(&team, dst, src, n, Sum),
            }
            i += 1;
        }
    }

    /// `iters` times: `collect` of `n` u64s per PE (the same on every PE) from `src` into
    /// `dst` on `team` at `scope` (every PE of the team runs it).
    pub fn bench_team_collect(team: DeviceTeam, dst: *mut u64, src: *const u64, n: usize, iters: usize, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => collect_warp(&team, dst, src, n),
                BLOCK => collect_block(&team, dst, src, n),
                _ => collect(&team, dst, src, n),
            }
            i += 1;
        }
    }

    /// `iters` times: sum `reduce` of `n` u64s of `src` into `dst` on `team` at `scope`
    /// (every PE of the team runs it).
    pub fn bench_team_reduce(team: DeviceTeam, dst: *mut u64, src: *const u64, n: usize, iters: usize, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => reduce_warp(&team, dst, src, n, Sum),
                BLOCK => reduce_block(&team, dst, src, n, Sum),
                _ => reduce(&team, dst, src, n, Sum),
            }
            i += 1;
        }
    }

    /// `iters` times: `broadcast` of `n` u64s of `src` on team PE 0 into `dst` on `team`
    /// at `scope` (every PE of the team runs it).
    pub fn bench_team_broadcast(team: DeviceTeam, dst: *mut u64, src: *const u64, n: usize, iters: usize, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => broadcast_warp(&team, dst, src, n, 0),
                BLOCK => broadcast_block(&team, dst, src, n, 0),
                _ => broadcast(&team, dst, src, n, 0),
            }
            i += 1;
        }
    }

    /// `iters` times: `alltoall` of blocks of `n` u64s from `src` into `dst` on `team` at
    /// `scope` (every PE of the team runs it).
    pub fn bench_team_alltoall(team: DeviceTeam, dst: *mut u64, src: *const u64, n: usize, iters: usize, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => alltoall_warp(&team, dst, src, n),
                BLOCK => alltoall_block(&team, dst, src, n),
                _ => alltoall(&team, dst, src, n),
            }
            i += 1;
        }
    }

    /// `iters` times: `fcollect` of `n` u64s per PE from `src` into `dst` on `team` at
    /// `scope` (every PE of the team runs it).
    pub fn bench_team_fcollect(team: DeviceTeam, dst: *mut u64, src: *const u64, n: usize, iters: usize, scope: u32) max_threads(BLOCK_THREADS) {
        let mut i = 0;
        while i < iters {
            match scope {
                WARP => fcollect_warp(&team, dst, src, n),
                BLOCK => fcollect_block(&team, dst, src, n),
                _ => fcollect(&team, dst, src, n),
            }
            i += 1;
        }
    }

    /// Ping-pong of `signal_op` alone between two PEs, one thread each: the side with
    /// `first != 0` sends first; each side waits for the other's signal `>= i` before its
    /// `i`-th answer.
    pub fn bench_signal_pingpong(sig: *mut u64, iters: usize, peer: u32, first: u32) max_threads(BLOCK_THREADS) {
        let mut i = 1u64;
        while i <= iters as u64 {
            if first == 0 {
                signal_wait_until(sig, Cmp::Ge, i);
            }
            signal_op(sig, i, SignalOp::Set, peer);
            if first != 0 {
                signal_wait_until(sig, Cmp::Ge, i);
            }
            i += 1;
        }
    }

    /// Ping-pong of `n` u64s with a signal between two PEs at `scope`: the side with
    /// `first != 0` sends first; each side waits for the other's signal `>= i` before
    /// its `i`-th answer.
    pub fn bench_pingpong(dst: *mut u64, src: *const u64, n: usize, sig: *mut u64, iters: usize, peer: u32, scope: u32, first: u32) max_threads(BLOCK_THREADS) {
        let mut i = 1u64;
        while i <= iters as u64 {
            if first == 0 {
                if leader(scope) {
                    signal_wait_until(sig, Cmp::Ge, i);
                }
                group_sync(scope);
            }
            match scope {
                WARP => put_signal_warp(dst, src, n, sig, i, SignalOp::Set, peer),
                BLOCK => put_signal_block(dst, src, n, sig, i, SignalOp::Set, peer),
                _ => put_signal(dst, src, n, sig, i, SignalOp::Set, peer),
            }
            if first != 0 {
                if leader(scope) {
                    signal_wait_until(sig, Cmp::Ge, i);
                }
                group_sync(scope);
            }
            i += 1;
        }
    }
}

/// Every kernel of this crate, for the check of each descriptor against its PTX `.entry`.
#[cfg(not(target_arch = "nvptx64"))]
pub const KERNELS: &[symmem_device::KernelInfo] = &[
    bench_put::KERNEL.info(),
    bench_put_bw::KERNEL.info(),
    bench_get::KERNEL.info(),
    bench_fetch_add::KERNEL.info(),
    bench_put_nbi::KERNEL.info(),
    bench_amo::KERNEL.info(),
    bench_pg::KERNEL.info(),
    bench_rma_bw::KERNEL.info(),
    bench_team_broadcast::KERNEL.info(),
    bench_team_sync::KERNEL.info(),
    bench_team_reducescatter::KERNEL.info(),
    bench_team_collect::KERNEL.info(),
    bench_signal_pingpong::KERNEL.info(),
    bench_pingpong::KERNEL.info(),
    bench_team_barrier::KERNEL.info(),
    bench_team_reduce::KERNEL.info(),
    bench_team_alltoall::KERNEL.info(),
    bench_team_fcollect::KERNEL.info(),
];
