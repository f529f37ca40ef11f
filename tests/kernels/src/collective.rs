//! Collectives on a team from kernels: `team_barrier`/`team_sync`, `broadcast`,
//! `fcollect`, `collect`, `alltoall`, `reduce` and `reducescatter`, each at the scope `scope` names, in blocks of
//! [`THREADS`] threads:
//! - `0`: thread 0 calls the thread form;
//! - `1`: warp 1 (threads 32..48, a partial warp of 16) calls the `_warp` form;
//! - `2`: every thread calls the `_block` form.
//!
//! Inputs and expected results come from [`coll_value`] and [`reduce_input`], so the host
//! check agrees with the kernels on every element.

use symmem_device::*;

use crate::pattern;

/// Threads per block of every kernel here: one full warp and a partial one.
pub const THREADS: u32 = 48;

/// Element `i` of the block team PE `from` sends for a collective with tag `tag`.
#[inline(always)]
pub const fn coll_value(from: u32, tag: u32, i: usize) -> u64 {
    pattern(from, tag, i)
}

/// Element `i` of team PE `index`'s `src` in reduction round `salt`, as an i64 that every
/// reduction type converts with `as` (small enough that float sums and products of a few
/// PEs stay exact; integers of every sign and several bits).
#[inline(always)]
pub const fn reduce_input(index: u32, salt: u32, i: usize) -> i64 {
    let v = (index as i64 + 1) * ((i % 7) as i64 - 3) + (salt as i64) + (i % 5) as i64 * 4;
    if v == 0 {
        1
    } else {
        v
    }
}

/// Whether this thread calls the collectives at `scope`.
#[inline(always)]
pub(crate) fn calls(scope: u32) -> bool {
    match scope {
        0 => thread_rank() == 0,
        1 => warp_id() == 1,
        _ => true,
    }
}

/// Whether this thread is the first of those that call at `scope`.
#[inline(always)]
pub(crate) fn leads(scope: u32) -> bool {
    match scope {
        1 => thread_rank() == 32,
        _ => thread_rank() == 0,
    }
}

/// The barrier of the threads that call at `scope` (called only by them).
#[inline(always)]
pub(crate) fn scope_sync(scope: u32) {
    match scope {
        0 => {}
        1 => sync_warp(),
        _ => sync_threads(),
    }
}

/// Calls the thread, warp or block form of a collective, by the threads of `scope`.
macro_rules! at_scope {
    ($scope:expr, $thread:ident, $warp:ident, $block:ident, ($($arg:expr),*)) => {
        if calls($scope) {
            match $scope {
                0 => $thread($($arg),*),
                1 => $warp($($arg),*),
                _ => $block($($arg),*),
            }
        }
    };
}

/// [`coll_reduce_i32()`]'s `mode` bit: reduce each block onto itself (`src` copied first).
pub const IN_PLACE: u32 = 1;
/// [`coll_reduce_i32()`]'s `mode` bit: `reducescatter` instead of `reduce`.
pub const SCATTER: u32 = 2;

/// One reduction with `op` into `dest`, as `mode` says.
#[inline(always)]
unsafe fn reduce_one<T: Reducible, O: ReduceOp<T>>(
    team: &DeviceTeam,
    dest: *mut T,
    src: *const T,
    nelems: usize,
    scope: u32,
    mode: u32,
    op: O,
) {
    let src_len = if mode & SCATTER != 0 {
        nelems * team.n_pes() as usize
    } else {
        nelems
    };
    let from = if mode & IN_PLACE != 0 {
        if calls(scope) {
            if leads(scope) {
                core::ptr::copy_nonoverlapping(src, dest, src_len);
            }
            scope_sync(scope);
        }
        dest.cast_const()
    } else {
        src
    };
    if mode & SCATTER != 0 {
        at_scope!(
            scope,
            reducescatter,
            reducescatter_warp,
            reducescatter_block,
            (team, dest, from, nelems, op)
        );
    } else {
        at_scope!(
            scope,
            reduce,
            reduce_warp,
            reduce_block,
            (team, dest, from, nelems, op)
        );
    }
}

/// Block `k` of a reduction kernel's `dest`: `n * nelems` elements apart for
/// reducescatter (room for an in-place source), `nelems` for reduce.
#[inline(always)]
unsafe fn dest_block<T>(
    team: &DeviceTeam,
    dest: *mut T,
    nelems: usize,
    mode: u32,
    k: usize,
) -> *mut T {
    let stride = if mode & SCATTER != 0 {
        nelems * team.n_pes() as usize
    } else {
        nelems
    };
    dest.add(k * stride)
}

/// Every operator on an integer type: sum, prod, min, max, and, or, xor into blocks 0..7
/// of `dest`.
#[inline(always)]
unsafe fn reduce_int<T: BitwiseReducible>(
    team: &DeviceTeam,
    dest: *mut T,
    src: *const T,
    nelems: usize,
    scope: u32,
    mode: u32,
) {
    let d = |k: usize| dest_block(team, dest, nelems, mode, k);
    reduce_one(team, d(0), src, nelems, scope, mode, Sum);
    reduce_one(team, d(1), src, nelems, scope, mode, Prod);
    reduce_one(team, d(2), src, nelems, scope, mode, Min);
    reduce_one(team, d(3), src, nelems, scope, mode, Max);
    reduce_one(team, d(4), src, nelems, scope, mode, And);
    reduce_one(team, d(5), src, nelems, scope, mode, Or);
    reduce_one(team, d(6), src, nelems, scope, mode, Xor);
}

/// Every operator on a float type: sum, prod, min, max into blocks 0..4 of `dest`.
#[inline(always)]
unsafe fn reduce_float<T: Reducible>(
    team: &DeviceTeam,
    dest: *mut T,
    src: *const T,
    nelems: usize,
    scope: u32,
    mode: u32,
) {
    let d = |k: usize| dest_block(team, dest, nelems, mode, k);
    reduce_one(team, d(0), src, nelems, scope, mode, Sum);
    reduce_one(team, d(1), src, nelems, scope, mode, Prod);
    reduce_one(team, d(2), src, nelems, scope, mode, Min);
    reduce_one(team, d(3), src, nelems, scope, mode, Max);
}

kernel! {
    /// `iters` rounds with values `base + 1 ..= base + iters`: the leader stores the value
    /// into element `team.my_pe()` of `slots` (sym, `team.n_pes()` u64s) on every team PE
    /// with `p`, `team_barrier`, checks that every element of its own `slots` holds the
    /// value, and `team_sync`s before the next round. `out[0]` (sym): stale elements.
    pub fn coll_barrier(team: DeviceTeam, slots: *mut u64, base: u64, iters: u32, scope: u32, out: *mut u64) {
        let (me, n) = (team.my_pe(), team.n_pes());
        let mut bad = 0u64;
        if calls(scope) {
            for k in 1..=iters as u64 {
                let value = base + k;
                if leads(scope) {
                    for j in 0..n {
                        if let Some(pe) = team.world_pe(j) {
                            p(slots.add(me as usize), value, pe);
                        }
                    }
                }
                at_scope!(scope, team_barrier, team_barrier_warp, team_barrier_block, (&team));
                if leads(scope) {
                    bad += (0..n as usize).filter(|&s| slots.add(s).read() != value).count() as u64;
                }
                at_scope!(scope, team_sync, team_sync_warp, team_sync_block, (&team));
            }
            if leads(scope) {
                out.write(bad);
            }
        }
    }

    /// `broadcast` of `nelems` u64s from `src` (sym) on team PE `root` into `dest` (sym).
    pub fn coll_broadcast(team: DeviceTeam, dest: *mut u64, src: *const u64, nelems: usize, root: u32, scope: u32) {
        at_scope!(scope, broadcast, broadcast_warp, broadcast_block, (&team, dest, src, nelems, root));
    }

    /// `fcollect` of `nelems` u64s from `src` (sym) into `dest` (sym, `nelems * n`).
    pub fn coll_fcollect(team: DeviceTeam, dest: *mut u64, src: *const u64, nelems: usize, scope: u32) {
        at_scope!(scope, fcollect, fcollect_warp, fcollect_block, (&team, dest, src, nelems));
    }

    /// `collect` of `nelems` u64s (different on each PE) from `src` (sym) into `dest` (sym,
    /// the sum of every PE's `nelems`).
    pub fn coll_collect(team: DeviceTeam, dest: *mut u64, src: *const u64, nelems: usize, scope: u32) {
        at_scope!(scope, collect, collect_warp, collect_block, (&team, dest, src, nelems));
    }

    /// `alltoall` of blocks of `nelems` u64s from `src` into `dest` (both sym, `nelems * n`).
    pub fn coll_alltoall(team: DeviceTeam, dest: *mut u64, src: *const u64, nelems: usize, scope: u32) {
        at_scope!(scope, alltoall, alltoall_warp, alltoall_block, (&team, dest, src, nelems));
    }

    /// Every integer reduction of `src` (sym) into blocks 0..7 of `dest` (sym): sum, prod,
    /// min, max, and, or, xor. `mode` ([`IN_PLACE`], [`SCATTER`]): `reduce` of `nelems`
    /// elements into blocks of `nelems`, or `reducescatter` of `n * nelems` into blocks
    /// `n * nelems` apart (each result in the block's first `nelems`); in place, `src` is
    /// copied into each block, which is reduced onto itself.
    pub fn coll_reduce_i32(team: DeviceTeam, dest: *mut i32, src: *const i32, nelems: usize, scope: u32, mode: u32) {
        reduce_int(&team, dest, src, nelems, scope, mode);
    }

    /// [`coll_reduce_i32()`] on i64.
    pub fn coll_reduce_i64(team: DeviceTeam, dest: *mut i64, src: *const i64, nelems: usize, scope: u32, mode: u32) {
        reduce_int(&team, dest, src, nelems, scope, mode);
    }

    /// [`coll_reduce_i32()`] on u32.
    pub fn coll_reduce_u32(team: DeviceTeam, dest: *mut u32, src: *const u32, nelems: usize, scope: u32, mode: u32) {
        reduce_int(&team, dest, src, nelems, scope, mode);
    }

    /// [`coll_reduce_i32()`] on u64.
    pub fn coll_reduce_u64(team: DeviceTeam, dest: *mut u64, src: *const u64, nelems: usize, scope: u32, mode: u32) {
        reduce_int(&team, dest, src, nelems, scope, mode);
    }

    /// Every float reduction of `src` (sym) into blocks 0..4 of `dest` (sym): sum, prod,
    /// min, max; `mode` as in [`coll_reduce_i32()`].
    pub fn coll_reduce_f32(team: DeviceTeam, dest: *mut f32, src: *const f32, nelems: usize, scope: u32, mode: u32) {
        reduce_float(&team, dest, src, nelems, scope, mode);
    }

    /// [`coll_reduce_f32`] on f64.
    pub fn coll_reduce_f64(team: DeviceTeam, dest: *mut f64, src: *const f64, nelems: usize, scope: u32, mode: u32) {
        reduce_float(&team, dest, src, nelems, scope, mode);
    }

    /// [`coll_reduce_f32`] on bf16 (rounded at every step).
    pub fn coll_reduce_bf16(team: DeviceTeam, dest: *mut bf16, src: *const bf16, nelems: usize, scope: u32, mode: u32) {
        reduce_float(&team, dest, src, nelems, scope, mode);
    }

    /// [`coll_reduce_f32`] on f16 (rounded at every step).
    pub fn coll_reduce_f16(team: DeviceTeam, dest: *mut f16, src: *const f16, nelems: usize, scope: u32, mode: u32) {
        reduce_float(&team, dest, src, nelems, scope, mode);
    }
}
