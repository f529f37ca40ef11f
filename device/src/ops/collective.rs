//! Collectives on a team from kernels (NVSHMEM's `nvshmem_team_sync`, `nvshmem_barrier`,
//! `nvshmem_TYPENAME_broadcast`, `_fcollect`, `_alltoall`, `nvshmem_TYPENAME_OP_reduce`,
//! OpenSHMEM's `collect` and `reducescatter`, and their `nvshmemx_*_warp` / `_block`
//! forms), on a [`DeviceTeam`] the host got from `Team::device` and passed as a kernel
//! argument.
//!
//! # Scopes
//! Thread-scope forms are called by one thread per PE, `_warp` forms by every thread of
//! one warp per PE, `_block` forms by every thread of one block per PE, with the same
//! arguments. Group forms split the copies and the combining across the group's threads
//! (thread `t` handles elements `t, t + width, …`); the group's first thread alone does
//! the barrier signalling and submits proxy requests, between group barriers. Every
//! member of the team calls the team's collectives in the same order, one at a time,
//! host and device alike.
//!
//! # Algorithms
//! - **Dissemination barrier** (`team_sync`, `team_barrier`): ceil(log2 n) rounds; in
//!   round `r` team PE `i` adds 1 to flag `r` of team PE `i + 2^r` with `signal_op` (a
//!   system-scope release add through the P2P pointer, or a fenced signal through the
//!   proxy channel) and waits until its own flag `r` reaches the epoch. It is the host
//!   `Team::sync`'s protocol on the same flags and epoch word, so host and device barriers
//!   on one team interleave. `team_barrier` first completes this PE's operations
//!   (`quiet`).
//! - **Direct push between team barriers** (`broadcast`, `fcollect`, `alltoall`,
//!   `collect`, which first exchanges the sizes through the team's scratch): the
//!   entry barrier (every member has entered, so no one still reads its `dest` from
//!   before), then each PE puts its blocks straight into the `dest` of the PEs that need
//!   them, its right neighbour first: through the P2P pointer a copy by the group's
//!   threads, otherwise one `put_nbi` through the proxy channel per block; then `quiet`
//!   and the exit barrier, so every block has landed when any member returns.
//! - **Direct-load reduce** (`reduce` and `reducescatter`, when every member's heap has a
//!   P2P pointer and `dest` is not `src`): the entry barrier, then each thread loads its
//!   elements of every member's `src` (its own block, for `reducescatter`) through the
//!   P2P pointers, combining in team order, and stores them in its own `dest`; the exit
//!   barrier keeps every `src` unchanged until all loads are done.
//! - **All-gather reduce through the team's scratch** (otherwise: members behind the
//!   proxy, or `dest == src`): chunk by chunk, each PE puts its chunk of `src` (of the
//!   receiver's block, for `reducescatter`) into its part of every member's scratch,
//!   `quiet` and the team barrier, then each PE combines the `n` parts in team order into
//!   its `dest`. Chunks alternate the scratch's two
//!   halves, as the host collectives do: a PE writes half `c % 2` only after the barrier
//!   of chunk `c - 1`, which every PE enters after reading chunk `c - 2`.
//!
//! Both reduction algorithms combine in team order, `((x_0 op x_1) op x_2) …`, so floating-point
//! results are the same on every PE and whatever the timing.
//!
//! # Buffers
//! `dest` and `src` are symmetric addresses. They must not overlap, except that a
//! reduction may have `dest == src` (NVSHMEM's rule). Every member must take the same
//! path: teams whose members reach each other through P2P on some PEs and not on others
//! are not supported (P2P is symmetric within a node).
//!
//! # Errors
//! A handle that does not describe a team of this PE fails the kernel with
//! [`error_code::INVALID_TEAM`], a broadcast root outside the team with
//! [`error_code::INVALID_TEAM_PE`] (error word and trap on the GPU, a panic on the CPU
//! executor, as other device misuse). Waits go through the device back-off, so a dead
//! member or `SYMMEM_TIMEOUT` fails the kernel instead of hanging it.

use core::mem::size_of;

use super::rma::{put_group, Group};
use super::{ptr, quiet, route, signal_op, wait_until, Route};
use crate::arch;
use crate::op_kinds::{Cmp, SignalOp};
use crate::reduce::{ReduceOp, Reducible};
use crate::state::error_code;
use crate::team::DeviceTeam;

/// Fails the kernel unless `team` describes a team of this PE within the job.
#[inline(always)]
fn check(team: &DeviceTeam) {
    let st = arch::state();
    let last = team.start as u64 + team.stride as u64 * (team.size as u64).saturating_sub(1);
    let valid = team.size != 0
        && team.stride != 0
        && team.my_index < team.size
        && last < st.n_pes as u64
        && team.world_pe(team.my_index) == Some(st.my_pe);
    if !valid {
        arch::fail(error_code::INVALID_TEAM, st.my_pe);
    }
}

/// The world PE of team PE `index < size`.
#[inline(always)]
fn world(team: &DeviceTeam, index: u32) -> u32 {
    team.start + team.stride * index
}

/// This PE's address of heap offset `off`.
#[inline(always)]
fn local<T>(off: u64) -> *mut T {
    (arch::state().heap_base + off) as *mut T
}

/// The dissemination barrier among the team's PEs, by one thread (see the module docs).
/// Round 0's flag add is a release (a fence, then the add) unless `fenced`: this thread
/// has just run a system-scope fence (the barrier's quiet), which with a relaxed add forms
/// the same release pattern, so a barrier of 2 PEs costs one system fence. Later rounds
/// release again, to pass on what earlier rounds acquired.
///
/// # Safety
/// `team` passed [`check`]; its flags and epoch word are the runtime's.
unsafe fn sync_one(team: &DeviceTeam, fenced: bool) {
    let n = team.size;
    if n == 1 {
        return;
    }
    let epoch_word = local::<u64>(team.epoch_off);
    // SAFETY: this PE's epoch word for the team, advanced only by the one thread that
    // runs the team's barrier (host or device, one at a time, ordered by launch
    // boundaries), so relaxed accesses suffice.
    let epoch = unsafe { arch::load_relaxed_u64(epoch_word) } + 1;
    // SAFETY: as above.
    unsafe { arch::store_relaxed_u64(epoch_word, epoch) };
    let (mut dist, mut round) = (1u32, 0u64);
    while dist < n {
        let to = world(team, (team.my_index + dist) % n);
        let mine = local::<u64>(team.flags_off + round * 8);
        // SAFETY: the flags are aligned u64s of the team's slot, at the same offset on
        // every member; `to` is a member (checked). The add is released after this PE's
        // earlier writes; the wait's acquire load sees what the partner wrote before.
        unsafe {
            match (fenced && round == 0, route(mine, to)) {
                (true, Route::Direct(p)) => arch::red_add_u64(p, 1),
                _ => signal_op(mine, 1, SignalOp::Add, to),
            }
            wait_until(mine, Cmp::Ge, epoch);
        }
        dist *= 2;
        round += 1;
    }
}

/// The team barrier by `group`: the group's first thread runs it (after `quiet` when
/// `complete`) between group barriers.
///
/// # Safety
/// As [`sync_one`].
#[inline(always)]
unsafe fn sync_group(team: &DeviceTeam, group: Group, complete: bool) {
    group.sync();
    if group.is_leader() {
        if complete {
            quiet();
        }
        // SAFETY: caller contract.
        unsafe { sync_one(team, complete) };
    }
    group.sync();
}

/// [`sync_group`] for the collectives that move data: a call, not inlined, since each of
/// them barriers two or three times and is generic over its element type (and the
/// reductions over their operator); inlined, the barrier's waits were copied into every
/// instance, which made the PTX of a kernel using every reduction megabytes long and
/// ptxas take minutes on it. Barriers cost microseconds; the call, nanoseconds.
///
/// # Safety
/// As [`sync_group`].
#[inline(never)]
unsafe fn sync_members(team: &DeviceTeam, group: Group, complete: bool) {
    // SAFETY: caller contract.
    unsafe { sync_group(team, group, complete) }
}

/// [`put_group`] for the collectives that move data, a call for the reason
/// [`sync_members`] is: one copy per element type, not one per collective, operator
/// and group.
///
/// # Safety
/// As [`put_group`] (non-blocking).
#[inline(never)]
unsafe fn put_member<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32, group: Group) {
    // SAFETY: caller contract.
    unsafe { put_group(dest, src, nelems, pe, group, true) }
}

/// Direct push between team barriers: for each team PE `j`, starting with the right
/// neighbour, `part(j)` names the block this PE sends it: (element index in `dest`,
/// source of `nelems` elements), or `None`.
///
/// # Safety
/// `team` passed [`check`]; every block lies inside `dest` (symmetric) and its source.
#[inline(always)]
unsafe fn push<T: Copy>(
    team: &DeviceTeam,
    group: Group,
    dest: *mut T,
    nelems: usize,
    part: impl Fn(u32) -> Option<(usize, *const T)>,
) {
    // SAFETY: caller contract.
    unsafe { sync_members(team, group, false) };
    let n = team.size;
    for k in 0..n {
        let j = (team.my_index + k) % n;
        if let Some((at, src)) = part(j) {
            // SAFETY: caller contract; `j` is a member.
            unsafe { put_member(dest.add(at), src, nelems, world(team, j), group) };
        }
    }
    // SAFETY: caller contract.
    unsafe { sync_members(team, group, true) };
}

/// `team_sync` by `group`.
///
/// # Safety
/// As [`team_sync`].
#[inline(always)]
unsafe fn team_sync_group(team: &DeviceTeam, group: Group) {
    check(team);
    // SAFETY: checked; caller contract.
    unsafe { sync_group(team, group, false) }
}

/// `team_barrier` by `group`.
///
/// # Safety
/// As [`team_barrier`].
#[inline(always)]
unsafe fn team_barrier_group(team: &DeviceTeam, group: Group) {
    check(team);
    // SAFETY: checked; caller contract.
    unsafe { sync_group(team, group, true) }
}

/// Broadcast by `group`.
///
/// # Safety
/// As [`broadcast`].
#[inline(always)]
unsafe fn broadcast_group<T: Copy>(
    team: &DeviceTeam,
    group: Group,
    dest: *mut T,
    src: *const T,
    nelems: usize,
    root: u32,
) {
    check(team);
    if root >= team.size {
        arch::fail(error_code::INVALID_TEAM_PE, root);
    }
    let me = team.my_index;
    // SAFETY: caller contract.
    unsafe {
        push(team, group, dest, nelems, |_| {
            (me == root).then_some((0, src))
        })
    }
}

/// Fcollect by `group`.
///
/// # Safety
/// As [`fcollect`].
#[inline(always)]
unsafe fn fcollect_group<T: Copy>(
    team: &DeviceTeam,
    group: Group,
    dest: *mut T,
    src: *const T,
    nelems: usize,
) {
    check(team);
    let at = team.my_index as usize * nelems;
    // SAFETY: caller contract.
    unsafe { push(team, group, dest, nelems, |_| Some((at, src))) }
}

/// Alltoall by `group`.
///
/// # Safety
/// As [`alltoall`].
#[inline(always)]
unsafe fn alltoall_group<T: Copy>(
    team: &DeviceTeam,
    group: Group,
    dest: *mut T,
    src: *const T,
    nelems: usize,
) {
    check(team);
    let at = team.my_index as usize * nelems;
    // SAFETY: caller contract: `src` holds `n * nelems` elements.
    unsafe {
        push(team, group, dest, nelems, |j| {
            Some((at, src.add(j as usize * nelems)))
        })
    }
}

/// Reduce by `group`.
///
/// # Safety
/// As [`reduce`].
#[inline(always)]
unsafe fn reduce_group<T: Reducible, O: ReduceOp<T>>(
    team: &DeviceTeam,
    group: Group,
    dest: *mut T,
    src: *const T,
    nelems: usize,
    _op: O,
) {
    // SAFETY: caller contract.
    unsafe { reduce_blocks::<T, O>(team, group, dest, src, nelems, false) }
}

/// Reducescatter by `group`.
///
/// # Safety
/// As [`reducescatter`].
#[inline(always)]
unsafe fn reducescatter_group<T: Reducible, O: ReduceOp<T>>(
    team: &DeviceTeam,
    group: Group,
    dest: *mut T,
    src: *const T,
    nelems: usize,
    _op: O,
) {
    // SAFETY: caller contract.
    unsafe { reduce_blocks::<T, O>(team, group, dest, src, nelems, true) }
}

/// The reductions, with the direct-load or the all-gather algorithm: each PE's `dest`
/// gets the combination of one block of `nelems` elements of every member's `src`, the
/// block at 0 (`reduce`) or, with `scatter`, the block at `my_index * nelems`
/// (`reducescatter`). A call, not inlined: one copy per element type and operator, which
/// the thread, warp and block forms of `reduce` and `reducescatter` share.
///
/// # Safety
/// As [`reduce`] or [`reducescatter`].
#[inline(never)]
unsafe fn reduce_blocks<T: Reducible, O: ReduceOp<T>>(
    team: &DeviceTeam,
    group: Group,
    dest: *mut T,
    src: *const T,
    nelems: usize,
    scatter: bool,
) {
    check(team);
    let (n, me) = (team.size, team.my_index);
    let block = |j: u32| if scatter { j as usize * nelems } else { 0 };
    let (first, stride, _) = group.split();
    // SAFETY: every member is a PE of the job (checked); `src` is symmetric.
    let direct =
        dest.cast_const() != src && (0..n).all(|j| !unsafe { ptr(src, world(team, j)) }.is_null());
    // SAFETY: `team` passed `check`.
    unsafe { sync_members(team, group, false) };
    if direct {
        let mut i = block(me) + first;
        let end = block(me) + nelems;
        while i < end {
            // SAFETY: every member's `src` holds this block, mapped here; `dest` does not
            // overlap `src` (caller contract).
            unsafe {
                let mut acc = ptr(src, world(team, 0)).add(i).read();
                for j in 1..n {
                    acc = O::apply(acc, ptr(src, world(team, j)).add(i).read());
                }
                dest.add(i - block(me)).write(acc);
            }
            i += stride;
        }
        // SAFETY: as above.
        unsafe { sync_members(team, group, false) };
        return;
    }
    let per = team.scratch_words as usize * 8 / size_of::<T>();
    let (mut at, mut chunk) = (0usize, 0u32);
    while at < nelems {
        let len = per.min(nelems - at);
        let part = |p: u32| local::<T>(team.scratch_part_off(chunk % 2, p));
        for k in 0..n {
            let j = (me + k) % n;
            // SAFETY: scratch parts hold `per >= len` elements at the same offset on
            // every member; `src` holds team PE `j`'s block.
            unsafe { put_member(part(me), src.add(block(j) + at), len, world(team, j), group) };
        }
        // SAFETY: as above.
        unsafe { sync_members(team, group, true) };
        let mut i = first;
        while i < len {
            // SAFETY: every member's part of this half now holds its chunk. With
            // `dest == src`, `dest[at..at + len]` has been sent already.
            unsafe {
                let mut acc = part(0).add(i).read();
                for j in 1..n {
                    acc = O::apply(acc, part(j).add(i).read());
                }
                dest.add(at + i).write(acc);
            }
            i += stride;
        }
        at += len;
        chunk += 1;
    }
    group.sync();
}

/// Collect by `group`: the sizes through the team's scratch, then a direct push.
///
/// # Safety
/// As [`collect`].
#[inline(always)]
unsafe fn collect_group<T: Copy>(
    team: &DeviceTeam,
    group: Group,
    dest: *mut T,
    src: *const T,
    nelems: usize,
) {
    check(team);
    let (n, me) = (team.size, team.my_index);
    let size = |p: u32| local::<u64>(team.scratch_part_off(0, p));
    // SAFETY: `team` passed `check`.
    unsafe { sync_members(team, group, false) };
    if group.is_leader() {
        for k in 0..n {
            let j = (me + k) % n;
            // SAFETY: this PE's size word in every member's scratch (the same offset);
            // `p` carries the value inline, so it works through the proxy too.
            unsafe { super::p(size(me), nelems as u64, world(team, j)) };
        }
    }
    // SAFETY: as above.
    unsafe { sync_members(team, group, true) };
    // SAFETY: every member's size word has landed (the barrier); nobody writes them again
    // before the next collective's entry barrier, which this PE enters after returning.
    let at: usize = (0..me).map(|j| unsafe { size(j).read() } as usize).sum();
    // SAFETY: caller contract: `dest` holds every member's block.
    unsafe { push(team, group, dest, nelems, |_| Some((at, src))) }
}

/// Defines the thread, warp and block forms of each collective over its `*_group` function.
macro_rules! scoped {
    ($(
        $(#[$doc:meta])*
        $thread:ident, $warp:ident, $block:ident:
        <$($g:ident: $b:path),*>($($arg:ident: $ty:ty),*) => $inner:ident;
    )*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub unsafe fn $thread<$($g: $b),*>(team: &DeviceTeam, $($arg: $ty),*) {
            // SAFETY: caller contract.
            unsafe { $inner(team, Group::Thread, $($arg),*) }
        }

        #[doc = concat!("[`", stringify!($thread), "`] by every thread of a warp (`nvshmemx_…_warp`).")]
        ///
        /// # Safety
        #[doc = concat!("As [`", stringify!($thread), "`]; every thread of the warp calls it with the same arguments.")]
        #[inline(always)]
        pub unsafe fn $warp<$($g: $b),*>(team: &DeviceTeam, $($arg: $ty),*) {
            // SAFETY: caller contract.
            unsafe { $inner(team, Group::Warp, $($arg),*) }
        }

        #[doc = concat!("[`", stringify!($thread), "`] by every thread of a block (`nvshmemx_…_block`).")]
        ///
        /// # Safety
        #[doc = concat!("As [`", stringify!($thread), "`]; every thread of the block calls it with the same arguments.")]
        #[inline(always)]
        pub unsafe fn $block<$($g: $b),*>(team: &DeviceTeam, $($arg: $ty),*) {
            // SAFETY: caller contract.
            unsafe { $inner(team, Group::Block, $($arg),*) }
        }
    )*};
}

scoped! {
    /// Waits until every PE of `team` has called it (`nvshmem_team_sync`): the
    /// dissemination barrier over the team's flags, continuing the epochs of the host's
    /// `Team::sync`. Orders memory like `sync_all` among the team; does not complete
    /// non-blocking operations.
    ///
    /// # Safety
    /// `team` is this PE's handle from `Team::device` (of a live team); every member calls
    /// the team's collectives in the same order, one at a time.
    team_sync, team_sync_warp, team_sync_block: <>() => team_sync_group;

    /// [`quiet`], then [`team_sync`] (`nvshmem_barrier`): every earlier operation of this
    /// PE is complete and visible when any member returns.
    ///
    /// # Safety
    /// As [`team_sync`].
    team_barrier, team_barrier_warp, team_barrier_block: <>() => team_barrier_group;

    /// Copies `nelems` elements of `src` on team PE `root` into `dest` on every PE of the
    /// team, the root included (`nvshmem_TYPENAME_broadcast`); direct push by the root
    /// between team barriers. A `root` outside the team fails the kernel.
    ///
    /// # Safety
    /// As [`team_sync`]; `dest` and `src` are symmetric addresses of `nelems` elements
    /// that do not overlap, the same on every member.
    broadcast, broadcast_warp, broadcast_block:
        <T: Copy>(dest: *mut T, src: *const T, nelems: usize, root: u32) => broadcast_group;

    /// Concatenates `nelems` elements of `src` from every PE of the team, in team order,
    /// into `dest` on every PE: team PE `i`'s block lands at `dest[i * nelems..]`
    /// (`nvshmem_TYPENAME_fcollect`); direct push of each PE's block between team
    /// barriers.
    ///
    /// # Safety
    /// As [`team_sync`]; `src` (`nelems` elements) and `dest` (`nelems * n_pes`) are
    /// symmetric addresses that do not overlap, the same on every member.
    fcollect, fcollect_warp, fcollect_block:
        <T: Copy>(dest: *mut T, src: *const T, nelems: usize) => fcollect_group;

    /// Exchanges blocks of `nelems` elements between every pair of team PEs: block `j`
    /// of `src` on team PE `i` (`src[j * nelems..]`) lands in block `i` of `dest` on
    /// team PE `j` (`nvshmem_TYPENAME_alltoall`); direct push of each block between team
    /// barriers.
    ///
    /// # Safety
    /// As [`team_sync`]; `src` and `dest` are symmetric addresses of `nelems * n_pes`
    /// elements that do not overlap, the same on every member.
    alltoall, alltoall_warp, alltoall_block:
        <T: Copy>(dest: *mut T, src: *const T, nelems: usize) => alltoall_group;

    /// Combines `nelems` elements of `src` from every PE of the team with `op`, element by
    /// element in team order, into `dest` on every PE (`nvshmem_TYPENAME_OP_reduce`):
    /// `reduce(&team, dest, src, n, Sum)`. Direct-load reduce when every member is
    /// reachable through P2P, all-gather reduce through the team's scratch otherwise (see
    /// the module docs). Bitwise operators take integers only: `reduce(&team, d, s, n,
    /// And)` on `f32` does not compile.
    ///
    /// # Safety
    /// As [`team_sync`]; `src` and `dest` are symmetric addresses of `nelems` elements,
    /// the same on every member, either equal or not overlapping.
    reduce, reduce_warp, reduce_block:
        <T: Reducible, O: ReduceOp<T>>(dest: *mut T, src: *const T, nelems: usize, op: O) => reduce_group;

    /// Combines block `i` (`src[i * nelems..]`) of every PE's `src` with `op`, element by
    /// element in team order, into `dest` on team PE `i` (`shmem_<op>_reducescatter`,
    /// OpenSHMEM 1.5): the reduce algorithms, each PE combining only its block.
    ///
    /// # Safety
    /// As [`team_sync`]; `src` (`nelems * n_pes` elements) and `dest` (`nelems`) are
    /// symmetric addresses, the same on every member, either equal or not overlapping.
    reducescatter, reducescatter_warp, reducescatter_block:
        <T: Reducible, O: ReduceOp<T>>(dest: *mut T, src: *const T, nelems: usize, op: O) => reducescatter_group;

    /// Concatenates `nelems` elements of `src` from every PE of the team, where `nelems`
    /// may differ between PEs, in team order, into `dest` on every PE (`shmem_collect`,
    /// OpenSHMEM 1.5): each PE first puts its `nelems` into every member's scratch (one
    /// barrier), then pushes its block to every member at the sum of the `nelems` of the
    /// team PEs before it, between team barriers.
    ///
    /// # Safety
    /// As [`team_sync`]; `src` (`nelems` elements) and `dest` (the sum of every member's
    /// `nelems`) are symmetric addresses that do not overlap, the same on every member.
    collect, collect_warp, collect_block:
        <T: Copy>(dest: *mut T, src: *const T, nelems: usize) => collect_group;
}
