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
    pub fn bench_put(dst: *mut u64, src: *const u64, n: usize, iters: usize, pe: u32, scope: u32) {
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
    /// each block its contiguous share with `put_block`, then quiets.
    pub fn bench_put_bw(dst: *mut u64, src: *const u64, n: usize, iters: usize, pe: u32) {
        let blocks = grid_dim().volume() as usize;
        let share = n.div_ceil(blocks);
        let start = (block_rank() as usize * share).min(n);
        let len = share.min(n - start);
        let mut i = 0;
        while i < iters {
            put_block(dst.add(start), src.add(start), len, pe);
            quiet_block();
            i += 1;
        }
    }

    /// `iters` times: get `n` u64s from `src` on `pe` into local `dst` at `scope`.
    pub fn bench_get(dst: *mut u64, src: *const u64, n: usize, iters: usize, pe: u32, scope: u32) {
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

    /// `iters` times: one thread fetch-adds 1 to `word` on `pe`. (AMOs have no group
    /// forms: a warp or block issuing one AMO is a thread issuing it.)
    pub fn bench_fetch_add(word: *mut u64, iters: usize, pe: u32) {
        let mut i = 0;
        while i < iters {
            atomic_fetch_add(word, 1u64, pe);
            i += 1;
        }
    }

    /// `iters` times: `team_barrier` on `team` at `scope` (every PE of the team runs it).
    pub fn bench_team_barrier(team: DeviceTeam, iters: usize, scope: u32) {
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

    /// `iters` times: sum `reduce` of `n` u64s of `src` into `dst` on `team` at `scope`
    /// (every PE of the team runs it).
    pub fn bench_team_reduce(team: DeviceTeam, dst: *mut u64, src: *const u64, n: usize, iters: usize, scope: u32) {
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

    /// `iters` times: `alltoall` of blocks of `n` u64s from `src` into `dst` on `team` at
    /// `scope` (every PE of the team runs it).
    pub fn bench_team_alltoall(team: DeviceTeam, dst: *mut u64, src: *const u64, n: usize, iters: usize, scope: u32) {
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
    pub fn bench_team_fcollect(team: DeviceTeam, dst: *mut u64, src: *const u64, n: usize, iters: usize, scope: u32) {
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

    /// Ping-pong of `n` u64s with a signal between two PEs at `scope`: the side with
    /// `first != 0` sends first; each side waits for the other's signal `>= i` before
    /// its `i`-th answer.
    pub fn bench_pingpong(dst: *mut u64, src: *const u64, n: usize, sig: *mut u64, iters: usize, peer: u32, scope: u32, first: u32) {
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
    bench_pingpong::KERNEL.info(),
    bench_team_barrier::KERNEL.info(),
    bench_team_reduce::KERNEL.info(),
    bench_team_alltoall::KERNEL.info(),
    bench_team_fcollect::KERNEL.info(),
];
