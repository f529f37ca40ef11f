//! The runtime's own GPU helper kernels: what host code cannot do to GPU memory with a
//! copy. `Runtime` launches them for host atomics and signals on GPU heaps and for the
//! stream-ordered operations (`*_on_stream`, `stream_rma` for their transfers to other
//! nodes): one thread each, except the team
//! collectives (`stream_team_*`), which run the device `_block` collectives in one block
//! of [`TEAM_THREADS`] threads. The arguments are the
//! encodings of the device crate's op vocabulary ([`AmoKind`], [`SignalOp`], [`Cmp`] as
//! `u32`), so the layout test and the PTX check cover them like every other kernel crate.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use symmem_device::*;

/// These kernels as PTX, built and embedded at build time.
#[cfg(not(target_arch = "nvptx64"))]
pub static PTX: symmem_device::EmbeddedPtx = symmem_device::embedded_ptx!();

/// Threads of the one block the `stream_team_*` kernels are launched with.
pub const TEAM_THREADS: u32 = 256;

/// Calls a `_block` collective on elements of `width` bytes (8, 4, 2, else 1) at
/// `dest`/`src`, with the arguments that follow the two pointers.
macro_rules! by_width {
    ($width:expr, $f:ident($team:expr, $dest:expr, $src:expr $(, $arg:expr)*)) => {
        match $width {
            8 => $f::<u64>($team, $dest.cast(), $src.cast() $(, $arg)*),
            4 => $f::<u32>($team, $dest.cast(), $src.cast() $(, $arg)*),
            2 => $f::<u16>($team, $dest.cast(), $src.cast() $(, $arg)*),
            _ => $f::<u8>($team, $dest, $src $(, $arg)*),
        }
    };
}

/// `reduce_block`, or `reducescatter_block` when `scatter`, of `T` with the operator of
/// code `op` (a [`ReduceOp::CODE`]; bitwise codes only when `bitwise`).
///
/// # Safety
/// As the device reductions; `dest` and `src` are symmetric addresses of `T`s.
#[inline(always)]
unsafe fn reduce_typed<T: Reducible>(
    team: &DeviceTeam,
    dest: *mut u8,
    src: *const u8,
    nelems: usize,
    op: u32,
    scatter: bool,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let (d, s) = (dest.cast::<T>(), src.cast::<T>());
        macro_rules! call {
            ($o:expr) => {
                if scatter {
                    reducescatter_block(team, d, s, nelems, $o)
                } else {
                    reduce_block(team, d, s, nelems, $o)
                }
            };
        }
        match op {
            1 => call!(Prod),
            2 => call!(Min),
            3 => call!(Max),
            _ => call!(Sum),
        }
    }
}

/// [`reduce_typed`] for integers, with the bitwise operators too.
///
/// # Safety
/// As [`reduce_typed`].
#[inline(always)]
unsafe fn reduce_int<T: BitwiseReducible>(
    team: &DeviceTeam,
    dest: *mut u8,
    src: *const u8,
    nelems: usize,
    op: u32,
    scatter: bool,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let (d, s) = (dest.cast::<T>(), src.cast::<T>());
        match op {
            4 if scatter => reducescatter_block(team, d, s, nelems, And),
            4 => reduce_block(team, d, s, nelems, And),
            5 if scatter => reducescatter_block(team, d, s, nelems, Or),
            5 => reduce_block(team, d, s, nelems, Or),
            6 if scatter => reducescatter_block(team, d, s, nelems, Xor),
            6 => reduce_block(team, d, s, nelems, Xor),
            _ => reduce_typed::<T>(team, dest, src, nelems, op, scatter),
        }
    }
}

/// One atomic of `kind` on `dest` (symmetric) on `pe` with operand `value` (and, for a
/// compare-and-swap, `compare`: the value `dest` must hold to be replaced by `value`), as
/// a [`symmem_device::Request`] carries them; the old value.
///
/// # Safety
/// `dest` is an aligned symmetric address of a `T`; `kind` is an [`AmoKind`] code.
#[inline(always)]
unsafe fn amo<T: DeviceInt + Default>(dest: *mut T, pe: u32, kind: u32, value: T, compare: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe {
        match AmoKind::from_u32(kind) {
            Some(AmoKind::Fetch) => atomic_fetch(dest, pe),
            Some(AmoKind::Set) => {
                atomic_set(dest, value, pe);
                T::default()
            }
            Some(AmoKind::Swap) => atomic_swap(dest, value, pe),
            Some(AmoKind::CompareSwap) => atomic_compare_swap(dest, compare, value, pe),
            Some(AmoKind::FetchAdd) => atomic_fetch_add(dest, value, pe),
            Some(AmoKind::FetchAnd) => atomic_fetch_and(dest, value, pe),
            Some(AmoKind::FetchOr) => atomic_fetch_or(dest, value, pe),
            Some(AmoKind::FetchXor) => atomic_fetch_xor(dest, value, pe),
            None => T::default(),
        }
    }
}

/// The all-to-all-v of `stream_team_alltoallv`, by every thread of the block (see its
/// docs for the contract).
///
/// # Safety
/// `team` is this PE's handle of a live team, every member calling the team's
/// collectives in the same order; `out` (`out_rows` rows), `input` (`in_rows` rows) of
/// `row_bytes` bytes, `in_splits` (`team.size` words) and `out_so` (`2 * team.size`
/// words) are symmetric, the same on every member, and do not overlap.
#[allow(clippy::too_many_arguments)] // the kernel's arguments, passed on
#[inline(always)]
unsafe fn alltoallv_block(
    team: &DeviceTeam,
    out: *mut u8,
    out_rows: usize,
    input: *const u8,
    in_rows: usize,
    row_bytes: usize,
    in_splits: *const i64,
    out_so: *mut i64,
) {
    let (n, me) = (team.size, team.my_index);
    let world = |j: u32| team.start + team.stride * j;
    // Rows of a split as moved: a negative split moves nothing.
    let rows = |v: i64| v.max(0) as usize;
    // SAFETY: caller contract: a handle of this PE's team.
    unsafe { team_sync_block(team) };
    // (a) Each thread tells some members what this PE sends them: split `j` into word `me`
    // of their `out_so`, where it starts in `input` into word `n + me`. Inline `p`s, so
    // they need no staging on the way through the proxy.
    let mut j = thread_rank();
    while j < n {
        // SAFETY: `in_splits` holds `n` words and `out_so` `2n` on every member (caller
        // contract); `j` is a member. The entry barrier above: the member has entered,
        // so it no longer reads its `out_so` of an earlier call.
        unsafe {
            let start: usize = (0..j).map(|k| rows(in_splits.add(k as usize).read())).sum();
            let split = in_splits.add(j as usize).read();
            p(out_so.add(me as usize), split, world(j));
            p(out_so.add((n + me) as usize), start as i64, world(j));
        }
        j += block_dim().volume();
    }
    // Every member's words have landed (the barrier's quiet completes proxied `p`s).
    // SAFETY: as above.
    unsafe { team_barrier_block(team) };
    // (b) Offsets: member `i`'s rows land after those of members `0..i`. (c) Its rows come
    // with one block get, starting with the right neighbour; the first thread then
    // replaces word `n + i` (where they started in `i`'s input) with where they start
    // in `out`.
    let first = (me + 1) % n;
    // SAFETY: `out_so` is this PE's, written by the members before the barrier.
    let mut at: usize = (0..first)
        .map(|i| rows(unsafe { out_so.add(i as usize).read() }))
        .sum();
    for k in 0..n {
        let i = (first + k) % n;
        if i == 0 {
            at = 0;
        }
        // SAFETY: as above; words `i` and `n + i` are read by every thread before the
        // get's closing block barrier, after which the first thread alone writes one.
        let (count, start) = unsafe {
            (
                rows(out_so.add(i as usize).read()),
                rows(out_so.add((n + i) as usize).read()),
            )
        };
        // Only rows inside member `i`'s input and this PE's `out` move.
        let moved = count
            .min(in_rows.saturating_sub(start))
            .min(out_rows.saturating_sub(at));
        // SAFETY: `start + moved <= in_rows` rows of `input` on member `i` and
        // `at + moved <= out_rows` rows of this PE's `out` (caller contract: they hold
        // them); a get of 0 bytes moves nothing.
        unsafe {
            get_block(
                out.add(at * row_bytes),
                input.add(start * row_bytes),
                moved * row_bytes,
                world(i),
            )
        };
        if thread_rank() == 0 {
            // SAFETY: word `n + i` of this PE's `out_so`; every thread has read it.
            unsafe { out_so.add((n + i) as usize).write(at as i64) };
        }
        at += count;
    }
    // (d) No member changes its input before every member has read its rows.
    // SAFETY: as above.
    unsafe { team_sync_block(team) };
}

kernel! {
    /// Thread 0 performs one atomic of `kind` (an `AmoKind` code) on the `size`-byte (4 or
    /// 8) word at symmetric address `dest` on `pe`, with the operands of a request
    /// (`value`, and `compare` for a compare-and-swap), and stores the old value
    /// (zero-extended) in `out` (host-mapped memory).
    pub fn host_amo(dest: *mut u64, pe: u32, size: u32, kind: u32, value: u64, compare: u64, out: *mut u64) {
        if thread_rank() == 0 {
            let old = if size == 4 {
                amo::<u32>(dest as *mut u32, pe, kind, value as u32, compare as u32) as u64
            } else {
                amo::<u64>(dest, pe, kind, value, compare)
            };
            out.write(old);
        }
    }

    /// Thread 0 updates signal `sig` (symmetric) on `pe` with `value` by `op` (a
    /// `SignalOp` code), after a system-scope fence: every write this GPU made before
    /// (the data of a put_signal) is visible first.
    pub fn host_signal(sig: *mut u64, value: u64, op: u32, pe: u32) {
        if thread_rank() == 0 {
            let op = if op == SignalOp::Add as u32 { SignalOp::Add } else { SignalOp::Set };
            signal_op(sig, value, op, pe);
        }
    }

    /// Thread 0 moves `bytes` bytes between `local` (device memory of this PE's GPU) and
    /// symmetric `sym` on `pe` with the device RMA, which reaches a PE on another node
    /// through the proxy: a put from `local` to `sym` when `get == 0`, then `quiet`, so
    /// the data is complete at the target before the stream's next work (a signal);
    /// else a get from `sym` into `local`, complete when it returns. The stream-ordered
    /// transfers to PEs the copy engine cannot reach.
    pub fn stream_rma(sym: *mut u8, local: *mut u8, bytes: usize, pe: u32, get: u32) {
        if thread_rank() == 0 {
            if get != 0 {
                symmem_device::get(local, sym.cast_const(), bytes, pe);
            } else {
                put(sym, local.cast_const(), bytes, pe);
                quiet();
            }
        }
    }

    /// Thread 0 waits until this PE's `sig` (symmetric) satisfies `cmp` (a `Cmp` code)
    /// against `value`: the stream-ordered signal wait.
    pub fn stream_wait(sig: *mut u64, cmp: u32, value: u64) {
        if thread_rank() == 0 {
            let cmp = match Cmp::from_u32(cmp) {
                Some(c) => c,
                None => Cmp::Ge,
            };
            signal_wait_until(sig, cmp, value);
        }
    }

    /// Thread 0 runs `quiet`: every earlier write of this stream is complete and visible
    /// at system scope.
    pub fn stream_quiet() {
        if thread_rank() == 0 {
            quiet();
        }
    }

    /// Thread 0 runs the device `barrier_all` (quiet, then the device dissemination
    /// barrier with every PE).
    pub fn stream_barrier_all() {
        if thread_rank() == 0 {
            barrier_all();
        }
    }

    /// Every thread of the block runs `team_barrier_block` on `team` (`team_sync_block`
    /// when `sync_only != 0`): the stream-ordered team barrier.
    pub fn stream_team_barrier(team: DeviceTeam, sync_only: u32) {
        if sync_only != 0 {
            team_sync_block(&team);
        } else {
            team_barrier_block(&team);
        }
    }

    /// Every thread of the block runs `broadcast_block` of `nelems` elements of `width`
    /// bytes from team PE `root`'s `src` into `dest` (symmetric addresses).
    pub fn stream_team_broadcast(team: DeviceTeam, dest: *mut u8, src: *const u8, nelems: usize, width: u32, root: u32) {
        by_width!(width, broadcast_block(&team, dest, src, nelems, root));
    }

    /// Every thread of the block runs `fcollect_block` of `nelems` elements of `width`
    /// bytes per PE from `src` into `dest` (symmetric addresses).
    pub fn stream_team_fcollect(team: DeviceTeam, dest: *mut u8, src: *const u8, nelems: usize, width: u32) {
        by_width!(width, fcollect_block(&team, dest, src, nelems));
    }

    /// Every thread of the block runs `alltoall_block` of blocks of `nelems` elements of
    /// `width` bytes from `src` into `dest` (symmetric addresses).
    pub fn stream_team_alltoall(team: DeviceTeam, dest: *mut u8, src: *const u8, nelems: usize, width: u32) {
        by_width!(width, alltoall_block(&team, dest, src, nelems));
    }

    /// Every thread of the block runs an all-to-all of rows with per-member counts that
    /// stay on the device (torch's `all_to_all_vdev`): `in_splits[j]` rows of `input` go
    /// to team PE `j`, this PE's rows for each member in team order from row 0; team PE
    /// `i`'s rows for this PE land in `out` in team order, packed from row 0, and
    /// `out_so[i]` gets how many team PE `i` sent (its split as given), `out_so[n + i]`
    /// the row of `out` where they start. Rows are `row_bytes` bytes; `input` and `out`
    /// hold `in_rows` and `out_rows` of them. Symmetric buffers, the same on every
    /// member. Rows past the sender's `input` or this PE's `out` do not move (the counts
    /// still include them: the caller sees `out_so[n + i] + out_so[i]` pass `out_rows`);
    /// a negative split moves nothing. Three team barriers: entry, after the splits'
    /// exchange, exit.
    pub fn stream_team_alltoallv(team: DeviceTeam, out: *mut u8, out_rows: usize, input: *const u8, in_rows: usize, row_bytes: usize, in_splits: *const i64, out_so: *mut i64) {
        alltoallv_block(&team, out, out_rows, input, in_rows, row_bytes, in_splits, out_so);
    }

    /// Every thread of the block runs `reduce_block` (`reducescatter_block` when
    /// `scatter != 0`) of `nelems` elements of the type of code `ty` (a
    /// `Reducible::CODE`) with the operator of code `op` (a `ReduceOp::CODE`), from `src`
    /// into `dest` (symmetric addresses). The host checks that the pair is valid.
    pub fn stream_team_reduce(team: DeviceTeam, dest: *mut u8, src: *const u8, nelems: usize, ty: u32, op: u32, scatter: u32) {
        let scatter = scatter != 0;
        match ty {
            0 => reduce_int::<i32>(&team, dest, src, nelems, op, scatter),
            1 => reduce_int::<i64>(&team, dest, src, nelems, op, scatter),
            2 => reduce_int::<u32>(&team, dest, src, nelems, op, scatter),
            3 => reduce_int::<u64>(&team, dest, src, nelems, op, scatter),
            4 => reduce_typed::<f32>(&team, dest, src, nelems, op, scatter),
            5 => reduce_typed::<f64>(&team, dest, src, nelems, op, scatter),
            6 => reduce_typed::<bf16>(&team, dest, src, nelems, op, scatter),
            _ => reduce_typed::<f16>(&team, dest, src, nelems, op, scatter),
        }
    }
}

/// Every kernel of this crate, for the check of each descriptor against its PTX `.entry`.
#[cfg(not(target_arch = "nvptx64"))]
pub const KERNELS: &[symmem_device::KernelInfo] = &[
    host_amo::KERNEL.info(),
    host_signal::KERNEL.info(),
    stream_rma::KERNEL.info(),
    stream_wait::KERNEL.info(),
    stream_quiet::KERNEL.info(),
    stream_barrier_all::KERNEL.info(),
    stream_team_barrier::KERNEL.info(),
    stream_team_broadcast::KERNEL.info(),
    stream_team_fcollect::KERNEL.info(),
    stream_team_alltoall::KERNEL.info(),
    stream_team_reduce::KERNEL.info(),
    stream_team_alltoallv::KERNEL.info(),
];
