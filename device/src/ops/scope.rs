//! Operations generic over the group that runs them: the marker types [`Thread`], [`Warp`]
//! and [`Block`] implement the sealed [`Scope`] trait, whose functions are the thread,
//! `_warp` and `_block` forms of the group operations. A kernel written once over
//! `S: Scope` (a `kernel!` type parameter) calls `S::put_nbi(…)` where CUDA code would
//! take a template parameter and NVSHMEM code would pick `nvshmemx_putmem_nbi_warp` or
//! `_block` by hand.
//!
//! Each implementation calls the explicit function of its scope (`Warp::put_nbi` is
//! [`put_nbi_warp`](super::put_nbi_warp)), so an instantiation compiles to the same code as
//! the explicit form: the choice is made by the compiler, not at run time.
//!
//! Every function with a group form keeps that form's rule: every thread of the group
//! calls it with the same arguments.

use super::*;
use crate::op_kinds::{Cmp, SignalOp};
use crate::reduce::{ReduceOp, Reducible};
use crate::team::DeviceTeam;

mod sealed {
    pub trait Sealed {}
}

/// The group of threads that runs an operation together: one [`Thread`], a [`Warp`] or a
/// [`Block`]. Sealed: the three implementations are the only ones.
pub trait Scope: sealed::Sealed + Copy + Default + 'static {
    /// `"thread"`, `"warp"` or `"block"`, for messages.
    const NAME: &'static str;

    /// This thread's rank in its group: 0, its lane, or its rank in the block.
    fn rank() -> u32;

    /// Threads in this thread's group: 1, [`warp_width`], or the block's size.
    fn width() -> u32;

    /// Whether this thread is its group's first (rank 0): the one that issues what the
    /// group does once (a signal, a proxy request).
    #[inline(always)]
    fn is_leader() -> bool {
        Self::rank() == 0
    }

    /// The group's barrier: nothing, [`sync_warp`] or [`sync_threads`].
    fn sync();

    /// Copies `nelems` elements from `src` to `dest`, both in this PE's memory (local or
    /// symmetric), the group's threads sharing the work, then [`Self::sync`].
    ///
    /// # Safety
    /// Both ranges hold `nelems` elements and do not overlap; every thread of the group
    /// calls it with the same arguments.
    #[inline(always)]
    unsafe fn copy<T: Copy>(dest: *mut T, src: *const T, nelems: usize) {
        // SAFETY: caller contract.
        unsafe {
            super::rma::copy_split(
                dest,
                src,
                nelems,
                Self::rank() as usize,
                Self::width() as usize,
            )
        };
        Self::sync();
    }

    /// [`put`] by this group.
    ///
    /// # Safety
    /// As [`put`], by every thread of the group.
    unsafe fn put<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32);

    /// [`get`] by this group.
    ///
    /// # Safety
    /// As [`get`], by every thread of the group.
    unsafe fn get<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32);

    /// [`put_nbi`] by this group.
    ///
    /// # Safety
    /// As [`put_nbi`], by every thread of the group.
    unsafe fn put_nbi<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32);

    /// [`get_nbi`] by this group.
    ///
    /// # Safety
    /// As [`get_nbi`], by every thread of the group.
    unsafe fn get_nbi<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32);

    /// [`put_signal`] by this group.
    ///
    /// # Safety
    /// As [`put_signal`], by every thread of the group.
    unsafe fn put_signal<T: Copy>(
        dest: *mut T,
        src: *const T,
        nelems: usize,
        sig: *mut u64,
        signal: u64,
        op: SignalOp,
        pe: u32,
    );

    /// [`put_signal_nbi`] by this group.
    ///
    /// # Safety
    /// As [`put_signal_nbi`], by every thread of the group.
    unsafe fn put_signal_nbi<T: Copy>(
        dest: *mut T,
        src: *const T,
        nelems: usize,
        sig: *mut u64,
        signal: u64,
        op: SignalOp,
        pe: u32,
    );

    /// [`quiet`] by this group: every earlier operation of its threads is complete when
    /// any of them returns.
    fn quiet();

    /// [`sync_all`] by this group (one group per PE).
    fn sync_all();

    /// [`barrier_all`] by this group (one group per PE).
    fn barrier_all();

    /// [`team_sync`] by this group.
    ///
    /// # Safety
    /// As [`team_sync`], by every thread of the group.
    unsafe fn team_sync(team: &DeviceTeam);

    /// [`broadcast`] by this group.
    ///
    /// # Safety
    /// As [`broadcast`], by every thread of the group.
    unsafe fn broadcast<T: Copy>(
        team: &DeviceTeam,
        dest: *mut T,
        src: *const T,
        nelems: usize,
        root: u32,
    );

    /// [`fcollect`] by this group.
    ///
    /// # Safety
    /// As [`fcollect`], by every thread of the group.
    unsafe fn fcollect<T: Copy>(team: &DeviceTeam, dest: *mut T, src: *const T, nelems: usize);

    /// [`reduce()`] by this group.
    ///
    /// # Safety
    /// As [`reduce()`], by every thread of the group.
    unsafe fn reduce<T: Reducible, O: ReduceOp<T>>(
        team: &DeviceTeam,
        dest: *mut T,
        src: *const T,
        nelems: usize,
        op: O,
    );

    /// Waits until the signal word `sig` (this PE's) satisfies `cmp value`, polled by the
    /// group's first thread, then [`Self::sync`]: every thread sees what the signal
    /// published. Returns the value seen (to the first thread; the others get `value`).
    ///
    /// # Safety
    /// As [`signal_wait_until`], by every thread of the group.
    #[inline(always)]
    unsafe fn signal_wait_until(sig: *const u64, cmp: Cmp, value: u64) -> u64 {
        let seen = if Self::is_leader() {
            // SAFETY: caller contract.
            unsafe { signal_wait_until(sig, cmp, value) }
        } else {
            value
        };
        Self::sync();
        seen
    }
}

/// Defines a scope's marker type and its [`Scope`] implementation over the explicit
/// functions of that scope.
macro_rules! scope {
    (
        $(#[$doc:meta])* $ty:ident, $name:literal,
        rank: $rank:expr, width: $width:expr, sync: $sync:expr,
        $put:ident, $get:ident, $put_nbi:ident, $get_nbi:ident,
        $put_signal:ident, $put_signal_nbi:ident, $quiet:expr, $sync_all:ident,
        $barrier_all:ident, $team_sync:ident, $broadcast:ident, $fcollect:ident,
        $reduce:ident
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $ty;

        impl sealed::Sealed for $ty {}

        impl Scope for $ty {
            const NAME: &'static str = $name;

            #[inline(always)]
            fn rank() -> u32 {
                $rank
            }

            #[inline(always)]
            fn width() -> u32 {
                $width
            }

            #[inline(always)]
            fn sync() {
                $sync
            }

            #[inline(always)]
            unsafe fn put<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
                // SAFETY: caller contract.
                unsafe { $put(dest, src, nelems, pe) }
            }

            #[inline(always)]
            unsafe fn get<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
                // SAFETY: caller contract.
                unsafe { $get(dest, src, nelems, pe) }
            }

            #[inline(always)]
            unsafe fn put_nbi<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
                // SAFETY: caller contract.
                unsafe { $put_nbi(dest, src, nelems, pe) }
            }

            #[inline(always)]
            unsafe fn get_nbi<T: Copy>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
                // SAFETY: caller contract.
                unsafe { $get_nbi(dest, src, nelems, pe) }
            }

            #[inline(always)]
            unsafe fn put_signal<T: Copy>(
                dest: *mut T,
                src: *const T,
                nelems: usize,
                sig: *mut u64,
                signal: u64,
                op: SignalOp,
                pe: u32,
            ) {
                // SAFETY: caller contract.
                unsafe { $put_signal(dest, src, nelems, sig, signal, op, pe) }
            }

            #[inline(always)]
            unsafe fn put_signal_nbi<T: Copy>(
                dest: *mut T,
                src: *const T,
                nelems: usize,
                sig: *mut u64,
                signal: u64,
                op: SignalOp,
                pe: u32,
            ) {
                // SAFETY: caller contract.
                unsafe { $put_signal_nbi(dest, src, nelems, sig, signal, op, pe) }
            }

            #[inline(always)]
            fn quiet() {
                $quiet
            }

            #[inline(always)]
            fn sync_all() {
                $sync_all()
            }

            #[inline(always)]
            fn barrier_all() {
                $barrier_all()
            }

            #[inline(always)]
            unsafe fn team_sync(team: &DeviceTeam) {
                // SAFETY: caller contract.
                unsafe { $team_sync(team) }
            }

            #[inline(always)]
            unsafe fn broadcast<T: Copy>(
                team: &DeviceTeam,
                dest: *mut T,
                src: *const T,
                nelems: usize,
                root: u32,
            ) {
                // SAFETY: caller contract.
                unsafe { $broadcast(team, dest, src, nelems, root) }
            }

            #[inline(always)]
            unsafe fn fcollect<T: Copy>(
                team: &DeviceTeam,
                dest: *mut T,
                src: *const T,
                nelems: usize,
            ) {
                // SAFETY: caller contract.
                unsafe { $fcollect(team, dest, src, nelems) }
            }

            #[inline(always)]
            unsafe fn reduce<T: Reducible, O: ReduceOp<T>>(
                team: &DeviceTeam,
                dest: *mut T,
                src: *const T,
                nelems: usize,
                op: O,
            ) {
                // SAFETY: caller contract.
                unsafe { $reduce(team, dest, src, nelems, op) }
            }
        }
    };
}

scope! {
    /// One thread: the plain operations ([`put`], [`put_signal`], [`quiet`]…).
    Thread, "thread",
    rank: 0, width: 1, sync: {},
    put, get, put_nbi, get_nbi, put_signal, put_signal_nbi, quiet(), sync_all,
    barrier_all, team_sync, broadcast, fcollect, reduce
}

scope! {
    /// The threads of one warp: the `_warp` operations ([`put_warp`],
    /// [`put_signal_warp`]…).
    Warp, "warp",
    rank: lane_id(), width: warp_width(), sync: sync_warp(),
    put_warp, get_warp, put_nbi_warp, get_nbi_warp, put_signal_warp, put_signal_nbi_warp,
    quiet_warp(), sync_all_warp, barrier_all_warp, team_sync_warp, broadcast_warp,
    fcollect_warp, reduce_warp
}

scope! {
    /// The threads of one block: the `_block` operations ([`put_block`],
    /// [`put_signal_block`]…).
    Block, "block",
    rank: thread_rank(), width: block_dim().volume(), sync: sync_threads(),
    put_block, get_block, put_nbi_block, get_nbi_block, put_signal_block,
    put_signal_nbi_block, quiet_block(), sync_all_block, barrier_all_block, team_sync_block,
    broadcast_block, fcollect_block, reduce_block
}
