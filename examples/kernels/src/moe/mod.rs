//! Mixture-of-experts token dispatch and combine, device-initiated (`examples/moe_dispatch`).
//!
//! Experts `0..E` are spread over the PEs, `E / n_pes` per PE: expert `e` lives on PE
//! `e / experts_per_pe` as its local expert `e % experts_per_pe`. Each PE owns `T` tokens of
//! `H` [`bf16`] elements, each routed to `k` experts with an f32 weight. The `T × k`
//! (token, expert) pairs are the *choices*, numbered `token * k + j`. Rows travel as bf16
//! or, with `fp8 != 0`, quantized to E4M3 with one f32 scale per 128 elements ([`wire`]);
//! they return as bf16 and are combined in f32, rounded to bf16 once.
//!
//! # Runs
//! Tokens are split into one contiguous chunk per dispatch block. A block's choices for one
//! expert form a *run*: the block reserves the run's slots on the expert's PE with one
//! `atomic_fetch_add` of its length (not one per token), and its rows travel and return
//! together. A run has a *position* on the origin PE: the block's choices sorted by expert,
//! so that a run's rows are contiguous in the origin's staging and combine buffers.
//!
//! # Counting in shared memory
//! The dispatch block counts its choices per expert with `histogram_block` into a
//! `shared!` array, gives each thread a contiguous range of experts and turns the counts
//! into first positions with one `scan_exclusive_block` of the ranges' totals. Each choice
//! then takes its rank in its run with a warp-aggregated block atomic: the lanes of a warp
//! that chose the same expert find each other with `match_any`, the lowest of them adds
//! their number (`popc`) to the expert's shared cursor, and `shfl` hands the old value to
//! the others. One pass over the choices, no per-expert rescans and no global scratch for
//! the counts. Within a warp the ranks follow the choice order; between warps the atomics
//! decide, so on a GPU which choices of an overflowing expert are dropped may differ from
//! run to run (the counts never do); on the CPU executor the schedule fixes them.
//!
//! # Two modes of slot assignment
//! - **Atomic** (`counts_in` null): each run's slots come from an `atomic_fetch_add` on
//!   the expert's PE, so an expert's receive order (and, past its capacity, which choices
//!   are dropped) follows the order in which the blocks of all PEs reach it.
//! - **Deterministic** (`counts_in` the count exchange's buffer): a fourth launch first,
//!   [`moe_count()`], with the dispatch's grid: each block counts its choices per expert
//!   and puts the counts to every PE, one `signal_op` each. The dispatch block then waits
//!   for every PE's counts and takes as its run's first slot the exclusive prefix sum of
//!   the counts of the (PE, block) pairs before its own, and ranks its choices one warp at
//!   a time, so the ranks follow the choices' order. Every expert's slots hold its rows in
//!   (source PE, token) order and the first `capacity` of them in that order are kept,
//!   whatever the timing. No atomic remains that decides an order; the cost is one more
//!   launch, one all-to-all of `experts` counts per block, and a barrier per warp and round
//!   of the ranking.
//!
//! Combine is the same in both: each token's weighted rows added in f32 in choice order
//! (by top-k index), from zero, rounded to bf16 once, never in arrival order. So with the
//! same PEs, inputs and grid, the combined tokens are the same bits in either mode whenever
//! nothing is dropped; the deterministic mode also fixes the receive buffers and the drops.
//!
//! # Buffers (symmetric; `El` = experts per PE, `C` = capacity per expert, `B` = blocks,
//! `W` = [`wire_words`])
//! - origin side: `tokens[T*H]` (bf16), `experts[T*k]` (u32), `weights[T*k]` (f32),
//!   `pos_of[T*k]` (u32: each choice's position, or [`DROPPED`]), `plan[B*E*2]` (each
//!   block's run per expert: [`pack_run`] and its first position), `send[T*k*W]` (rows
//!   staged by position for PEs reached through the proxy), `combine_in[T*k*H]` (returned
//!   bf16 rows by position), `out[T*H]` (bf16);
//! - expert side: `recv[El*C*W]` (rows in flight by local expert and slot), `done[El*C*H]`
//!   (the experts' bf16 outputs), `runs[n*B*El*2]` (every source block's run descriptors:
//!   the `plan` entries of this PE's experts);
//! - `ctrl` ([`Ctrl`]): the experts' slot counters and, per PE pair, the dispatch and
//!   combine signals, the rows sent and received, and the count exchange's signals;
//! - deterministic mode: `counts_in[n*B*E]` (u32: every (source PE, block)'s choices per
//!   expert, filled by [`moe_count()`]).
//!
//! # Scope
//! Dispatch and expert move rows by *group*: a warp or the whole block, the kernels' type
//! parameter `S` ([`RowScope`], a [`Scope`](symmem_device::Scope) that also numbers the
//! grid's groups). Each is instantiated at both, as `moe_dispatch_warp` and
//! `moe_dispatch_block`, `moe_expert_warp` and `moe_expert_block`: the host picks the
//! entry, and each entry calls the warp or block operations directly, with no choice made
//! at run time. Combine has no group operations and one entry, [`moe_combine()`].
//!
//! # Protocol (three launches per PE, four in the deterministic mode, no host round trip)
//! 0. Deterministic mode only: [`moe_count()`], the count exchange (above).
//! 1. [`moe_dispatch()`]: a block counts and places its choices (above), reserves every run
//!    with one `atomic_fetch_add` (the threads' reservations are in flight together; in the
//!    deterministic mode at its prefix sum of the exchanged counts) and
//!    gives each choice its position, or [`DROPPED`] beyond the expert's capacity (nothing
//!    is written there, never out of bounds). Groups of scope `S` then move the
//!    rows: on a PE this one reaches directly (`ptr`), bf16 rows go to their slots with
//!    `put_nbi` and fp8 rows are quantized straight into them; for the other PEs rows are
//!    encoded into `send`, from where one `put_nbi` per run carries them. Last, one thread
//!    per PE `q` puts the block's run descriptors for `q`'s experts, and one `signal_op`
//!    Add (after the fence it implies) tells `q` the block is done and how many rows it
//!    holds: [`DISPATCH_DONE`]` + rows` on `dispatch_sig[me]` of `q`.
//! 2. [`moe_expert()`]: takes the source PEs in the order their blocks finish
//!    (`wait_until_any`, its status array in shared memory); for each, the grid's groups
//!    share its runs, apply the expert function [`expert_fn`] into `done` and return each
//!    run with one `put_signal_nbi` (Add of the run's rows on `combine_sig[me]` of the
//!    origin).
//! 3. [`moe_combine()`]: waits until `combine_sig[q] >= sent[q]` for every PE `q`
//!    (`wait_until_all_vector`), then writes each token's weighted sum of its returned rows.
//!
//! No `quiet` is needed for the `_nbi` puts: their sources stay unchanged until the step
//! ends, and each arrives before the signal that the receiver waits for. The direct stores
//! of quantized rows into a peer are ordered the same way: the block barrier makes them
//! the signalling thread's, and the signal's fence orders them before the signal.

mod groups;
pub mod wire;

use symmem_device::{
    atomic_add, atomic_fetch_add, ballot, bf16, block_dim, block_rank, grid_dim, histogram_block,
    lane_id, match_any, my_pe, n_pes, popc, ptr, put_nbi, scan_exclusive_block, shfl, signal_fetch,
    signal_op, sync_threads, thread_rank, wait_until_all, wait_until_all_vector, wait_until_any,
    warp_id, warp_mask, Block, Cmp, SharedSlice, SignalOp, Warp, WARP_SIZE,
};

pub use groups::RowScope;
use groups::{expert_row, quantize_row, stage};
pub use wire::{expert_fn, wire_words};

/// `pos_of` value of a choice that found its expert full: the token was not sent there.
pub const DROPPED: u32 = u32::MAX;

/// One dispatch block done, in a dispatch signal; the low 32 bits count rows written.
pub const DISPATCH_DONE: u64 = 1 << 32;

/// Words per run descriptor in `plan` and `runs`: [`pack_run`], then the first position.
pub const RUN_WORDS: usize = 2;

/// The most experts a job may have: the size of the dispatch's shared counting arrays
/// (four `u32`s each, 16 KiB per block).
pub const MAX_EXPERTS: usize = 1024;

/// The most PEs a job may have: the size of the expert kernel's shared status array.
pub const MAX_PES: usize = 1024;

/// The low 32 bits of a packed word.
const LOW: u64 = (1 << 32) - 1;

/// Picked source of an expert block that has no source left.
const NO_SOURCE: u32 = u32::MAX;

symmem_device::shared! {
    /// Dispatch: the block's choices per expert, then the ranks handed out so far.
    static COUNTS: [u32; MAX_EXPERTS];
    /// Dispatch: per expert, the position of the block's run's first row.
    static STARTS: [u32; MAX_EXPERTS];
    /// Dispatch: per expert, the first slot the block's run reserved.
    static BASES: [u32; MAX_EXPERTS];
    /// Dispatch: per expert, the rows of the block's run that fit the capacity.
    static KEPT: [u32; MAX_EXPERTS];
    /// Expert: the source PEs this block has taken (`wait_until_any`'s status).
    static TAKEN: [i32; MAX_PES];
    /// Expert: the source thread 0 picked for the block.
    static PICKED: [u32; 1];
}

/// A run word: the first reserved slot in the high 32 bits, the rows kept in the low 32.
pub const fn pack_run(base: u32, kept: u32) -> u64 {
    (base as u64) << 32 | kept as u64
}

/// The first slot and the kept rows of a [`pack_run`] word.
pub const fn unpack_run(run: u64) -> (usize, usize) {
    ((run >> 32) as usize, (run & LOW) as usize)
}

/// The parts of the control buffer, in u64s from its start: `counters[El]`,
/// `dispatch_sig[n]`, `combine_sig[n]`, `sent[n]`, `received[n]`. The host zeroes it before
/// each step.
#[derive(Debug, Clone, Copy)]
pub struct Ctrl {
    /// Experts per PE (`El`).
    pub experts_per_pe: usize,
    /// PEs in the job (`n`).
    pub n_pes: usize,
}

impl Ctrl {
    /// Slot counters of this PE's experts: the rows reserved so far.
    pub const fn counters(self) -> usize {
        0
    }
    /// Per source PE: [`DISPATCH_DONE`] per finished block plus the rows it sent here.
    pub const fn dispatch_sig(self) -> usize {
        self.experts_per_pe
    }
    /// Per expert PE: rows it returned here.
    pub const fn combine_sig(self) -> usize {
        self.experts_per_pe + self.n_pes
    }
    /// Per expert PE: rows this PE sent there.
    pub const fn sent(self) -> usize {
        self.experts_per_pe + 2 * self.n_pes
    }
    /// Per source PE: rows it announced here (written by expert block 0).
    pub const fn received(self) -> usize {
        self.experts_per_pe + 3 * self.n_pes
    }
    /// Per source PE: its blocks whose counts arrived here ([`moe_count()`], the
    /// deterministic mode only).
    pub const fn count_sig(self) -> usize {
        self.experts_per_pe + 4 * self.n_pes
    }
    /// Words in the buffer.
    pub const fn words(self) -> usize {
        self.experts_per_pe + 5 * self.n_pes
    }
}

/// The `[first, end)` tokens of this block: contiguous chunks, one per block.
fn block_tokens(tokens: usize) -> (usize, usize) {
    let (b, blocks) = (block_rank() as usize, grid_dim().volume() as usize);
    let chunk = tokens.div_ceil(blocks);
    ((b * chunk).min(tokens), ((b + 1) * chunk).min(tokens))
}

/// This thread's contiguous range of `items` when the block's threads share them.
fn thread_range(items: usize) -> (usize, usize) {
    let (tid, threads) = (thread_rank() as usize, block_dim().volume() as usize);
    let per = items.div_ceil(threads);
    ((tid * per).min(items), ((tid + 1) * per).min(items))
}

/// The slots of expert `e` that the `pairs` (source PE, dispatch block) pairs before this
/// block's take, in the deterministic mode: the sum of their counts in `counts_in`
/// (`[pair][expert]`, `n_experts` per pair).
fn slots_before(counts_in: *const u32, pairs: usize, n_experts: usize, e: usize) -> usize {
    let mut sum = 0;
    for pair in 0..pairs {
        // SAFETY: the dispatch's caller passes `n_pes * blocks * n_experts` counts, and
        // `pairs` is at most this block's index among the job's (PE, block) pairs.
        sum += unsafe { counts_in.add(pair * n_experts + e).read() } as usize;
    }
    sum
}

/// Dispatch step 3 for this thread's choice `c` (none when `c >= end`): its rank among
/// the choices of its expert, one warp-aggregated atomic on the expert's shared cursor in
/// `cursors` (the lanes that chose the same expert find each other with `match_any`);
/// writes its position (`starts` plus the rank) or [`DROPPED`] (a rank past `kept_of`)
/// to `pos_of`. Every lane of the warp calls it together.
///
/// # Safety
/// `experts` and `pos_of` hold at least `end` choices, each expert below the slices' length.
unsafe fn rank_choice(
    c: usize,
    end: usize,
    experts: *const u32,
    pos_of: *mut u32,
    cursors: SharedSlice<u32>,
    starts: SharedSlice<u32>,
    kept_of: SharedSlice<u32>,
) {
    let lane = lane_id();
    let mask = ballot(warp_mask(), c < end);
    if c < end {
        // SAFETY: c < end, inside `experts`.
        let e = unsafe { experts.add(c).read() };
        let peers = match_any(mask, e);
        let leader = peers.trailing_zeros();
        let first_rank = if lane == leader {
            cursors.fetch_add(e as usize, popc(peers))
        } else {
            0
        };
        let rank = shfl(mask, first_rank, leader) + popc(peers & ((1u32 << lane) - 1));
        let e = e as usize;
        let pos = if rank < kept_of.get(e) {
            starts.get(e) + rank
        } else {
            DROPPED
        };
        // SAFETY: c < end, inside `pos_of`.
        unsafe { pos_of.add(c).write(pos) };
    }
}

#[cold]
#[inline(never)]
fn too_many(what: &str, have: usize, max: usize) -> ! {
    panic!("moe: {what} {have} is more than this kernel's shared arrays hold ({max})")
}

symmem_device::kernel! {
    /// The count exchange of the deterministic mode (step 0, before [`moe_dispatch()`],
    /// with the same grid): each block counts its dispatch block's choices per expert,
    /// writes them to its row of `counts_in` (`[source PE][block][expert]`, `n_pes ×
    /// blocks × experts` u32s on every PE), puts the row to every other PE and adds 1 to
    /// `count_sig[me]` on every PE (after the fence the signal implies).
    pub fn moe_count(experts: *const u32, counts_in: *mut u32, ctrl: *mut u64, n_tokens: usize, top_k: usize, experts_per_pe: usize) {
        let (me, n) = (my_pe(), n_pes() as usize);
        let layout = Ctrl { experts_per_pe, n_pes: n };
        let n_experts = experts_per_pe * n;
        if n_experts > MAX_EXPERTS {
            too_many("experts", n_experts, MAX_EXPERTS);
        }
        let (b, blocks) = (block_rank() as usize, grid_dim().volume() as usize);
        let (tid, threads) = (thread_rank() as usize, block_dim().volume() as usize);
        let (first, end) = block_tokens(n_tokens);
        let counts = COUNTS.slice().sub(0, n_experts);
        histogram_block(counts, (first * top_k + tid..end * top_k).step_by(threads).map(|c| experts.add(c).read()));
        let row = counts_in.add((me as usize * blocks + b) * n_experts);
        let (lo, hi) = thread_range(n_experts);
        for e in lo..hi {
            row.add(e).write(counts.get(e));
        }
        // The barrier makes the row this block's, so each signal's fence orders it first.
        sync_threads();
        let mut q = tid;
        while q < n {
            if q != me as usize {
                put_nbi(row, row.cast_const(), n_experts, q as u32);
            }
            signal_op(ctrl.add(layout.count_sig() + me as usize), 1, SignalOp::Add, q as u32);
            q += threads;
        }
    }

    /// Dispatch (step 1 of the module's protocol): counts this block's choices per expert
    /// in shared memory, reserves its run on every expert (atomic mode, `counts` null:
    /// with one `atomic_fetch_add`; deterministic mode: at the offset the count exchange
    /// of [`moe_count()`] in `counts_in` gives it), gives each choice its position (or
    /// [`DROPPED`]), moves the rows by group of scope `S` (`moe_dispatch_warp`: by warp;
    /// `moe_dispatch_block`: by block), as bf16 or fp8 (`fp8 != 0`), straight to PEs
    /// reached directly and through `send` to the others, then hands every PE its run
    /// descriptors and a signal with the rows it now holds.
    // Over 100 lines on purpose: the protocol's steps (count, reserve, rank, move,
    // describe, signal) in order, sharing the block's locals and barriers.
    pub fn moe_dispatch[type S](tokens: *const bf16, experts: *const u32, pos_of: *mut u32, plan: *mut u64, send: *mut u32, recv: *mut u32, runs: *mut u64, ctrl: *mut u64, counts_in: *const u32, n_tokens: usize, hidden: usize, top_k: usize, experts_per_pe: usize, capacity: usize, fp8: u32) where [S: RowScope] {
        let (me, n) = (my_pe(), n_pes() as usize);
        let (el, layout) = (experts_per_pe, Ctrl { experts_per_pe, n_pes: n });
        let n_experts = el * n;
        if n_experts > MAX_EXPERTS {
            too_many("experts", n_experts, MAX_EXPERTS);
        }
        let words = wire_words(hidden, fp8 != 0);
        let (b, blocks) = (block_rank() as usize, grid_dim().volume() as usize);
        let (tid, threads) = (thread_rank() as usize, block_dim().volume() as usize);
        let (first, end) = block_tokens(n_tokens);
        let (first_c, end_c) = (first * top_k, end * top_k);
        // This block's run per expert, as sent: `plan[e * RUN_WORDS]` the run word,
        // `plan[e * RUN_WORDS + 1]` its first position.
        let plan = plan.add(b * n_experts * RUN_WORDS);
        let counts = COUNTS.slice().sub(0, n_experts);
        let (starts, bases, kept_of) = (STARTS.slice(), BASES.slice(), KEPT.slice());

        // 1. The block's choices per expert, then each thread's range of experts gets its
        //    first positions from one block scan of the ranges' totals.
        histogram_block(counts, (first_c + tid..end_c).step_by(threads).map(|c| experts.add(c).read()));
        let (lo, hi) = thread_range(n_experts);
        let mut total = 0;
        for e in lo..hi {
            total += counts.get(e);
        }
        let (before, _) = scan_exclusive_block(total);

        // 2. One reservation per run: the threads' atomics in flight together, or in the
        //    deterministic mode the runs of the (PE, block) pairs before this one, once
        //    every PE's counts are here.
        let deterministic = !counts_in.is_null();
        if deterministic {
            if tid == 0 {
                wait_until_all(ctrl.add(layout.count_sig()), n, core::ptr::null(), Cmp::Ge, blocks as u64);
            }
            // Thread 0's acquire saw every block's counts; the barrier extends it.
            sync_threads();
        }
        let mut at = first_c as u32 + before;
        for e in lo..hi {
            let count = counts.get(e) as usize;
            let (pe, local) = ((e / el) as u32, e % el);
            let (base, kept) = if count == 0 {
                (0, 0)
            } else {
                let base = if deterministic {
                    slots_before(counts_in, me as usize * blocks + b, n_experts, e)
                } else {
                    atomic_fetch_add(ctrl.add(layout.counters() + local), count as u64, pe) as usize
                };
                (base.min(capacity), count.min(capacity.saturating_sub(base)))
            };
            starts.set(e, at);
            bases.set(e, base as u32);
            kept_of.set(e, kept as u32);
            // From here on the expert's cursor: the ranks in its run handed out so far.
            counts.set(e, 0);
            plan.add(e * RUN_WORDS).write(pack_run(base as u32, kept as u32));
            plan.add(e * RUN_WORDS + 1).write(u64::from(at));
            at += count as u32;
        }
        sync_threads();

        // 3. Each choice's rank in its run, one warp-aggregated atomic per expert a warp
        //    meets in a round: the first `kept` ranks get positions, the rest are dropped.
        //    The deterministic mode takes a round's warps in turn, so ranks follow the
        //    choices' order.
        let turns = if deterministic { threads.div_ceil(WARP_SIZE as usize) } else { 1 };
        let mut round = first_c;
        while round < end_c {
            let c = round + tid;
            for turn in 0..turns {
                if !deterministic || warp_id() as usize == turn {
                    rank_choice(c, end_c, experts, pos_of, counts, starts, kept_of);
                }
                if deterministic {
                    sync_threads();
                }
            }
            round += threads;
        }
        sync_threads();

        // 4. Each group moves one kept choice's row at a time: into its slot on a PE this
        //    one reaches directly, else into `send` at its position.
        let (offset, stride) = (S::index_in_block(), S::per_block());
        let mut c = first_c + offset;
        while c < end_c {
            let pos = pos_of.add(c).read();
            if pos != DROPPED {
                let e = experts.add(c).read() as usize;
                let (pe, local) = ((e / el) as u32, e % el);
                let slot = bases.get(e) as usize + (pos - starts.get(e)) as usize;
                let slot_words = (local * capacity + slot) * words;
                let src = tokens.add(c / top_k * hidden);
                let direct = ptr(recv.cast_const(), pe);
                if fp8 != 0 {
                    let dst = if direct.is_null() { send.add(pos as usize * words) } else { direct.add(slot_words) };
                    quantize_row::<S>(dst, src, hidden);
                } else if direct.is_null() {
                    stage::<S, _>(send.add(pos as usize * words), src.cast::<u32>(), words);
                } else {
                    S::put_nbi(recv.add(slot_words), src.cast::<u32>(), words, pe);
                }
            }
            c += stride;
        }
        // The barrier makes the staged rows and the direct stores and puts this block's,
        // so the fence in each `signal_op` below orders them before the signal.
        sync_threads();

        // 5. Thread q serves PE q: one put per staged run, the descriptors of q's experts,
        //    the rows sent, then the done signal.
        let mut q = tid;
        while q < n {
            let via_proxy = ptr(recv.cast_const(), q as u32).is_null();
            let mut rows = 0;
            for local in 0..el {
                let e = q * el + local;
                let kept = kept_of.get(e) as usize;
                if via_proxy && kept > 0 {
                    let dst = recv.add((local * capacity + bases.get(e) as usize) * words);
                    let src = send.add(starts.get(e) as usize * words).cast_const();
                    put_nbi(dst, src, kept * words, q as u32);
                }
                rows += kept as u64;
            }
            let mine = runs.add((me as usize * blocks + b) * el * RUN_WORDS);
            put_nbi(mine, plan.add(q * el * RUN_WORDS).cast_const(), el * RUN_WORDS, q as u32);
            atomic_add(ctrl.add(layout.sent() + q), rows, me);
            signal_op(ctrl.add(layout.dispatch_sig() + me as usize), DISPATCH_DONE + rows, SignalOp::Add, q as u32);
            q += threads;
        }
    }
    instances {
        moe_dispatch_warp = [Warp],
        moe_dispatch_block = [Block],
    }

    /// The experts of this PE (step 2): takes the source PEs as their `dispatch_blocks`
    /// blocks finish, records each source's rows in `received`, and for each of its runs
    /// applies [`expert_fn`] to the rows in `recv` (bf16 or fp8: `fp8 != 0`), writes the
    /// bf16 results to `done` and returns the run to its origin with one `put_signal_nbi`.
    /// The runs are shared by the grid's groups of scope `S` (`moe_expert_warp`: warps;
    /// `moe_expert_block`: blocks).
    pub fn moe_expert[type S](recv: *const u32, runs: *const u64, ctrl: *mut u64, done: *mut bf16, combine_in: *mut bf16, hidden: usize, experts_per_pe: usize, capacity: usize, dispatch_blocks: usize, fp8: u32) where [S: RowScope] {
        let (me, n) = (my_pe(), n_pes() as usize);
        if n > MAX_PES {
            too_many("PEs", n, MAX_PES);
        }
        let (el, layout) = (experts_per_pe, Ctrl { experts_per_pe, n_pes: n });
        let words = wire_words(hidden, fp8 != 0);
        let b = block_rank() as usize;
        let (group, groups) = (S::id(), S::count());
        let (taken, picked) = (TAKEN.slice().sub(0, n), PICKED.slice());
        let dispatch_sig = ctrl.add(layout.dispatch_sig());
        let all_done = dispatch_blocks as u64 * DISPATCH_DONE;
        taken.fill_block(0);
        loop {
            if thread_rank() == 0 {
                let src = match wait_until_any(dispatch_sig, n, taken.as_ptr().cast_const(), Cmp::Ge, all_done) {
                    Some(src) => {
                        taken.set(src, 1);
                        if b == 0 {
                            let seen = signal_fetch(dispatch_sig.add(src).cast_const());
                            ctrl.add(layout.received() + src).write(seen & LOW);
                        }
                        src as u32
                    }
                    None => NO_SOURCE,
                };
                picked.set(0, src);
            }
            // Thread 0's acquire saw the source's signal, so its descriptors and rows; the
            // barrier extends that to the block.
            sync_threads();
            let src = picked.get(0);
            if src == NO_SOURCE {
                break;
            }
            let src_runs = runs.add(src as usize * dispatch_blocks * el * RUN_WORDS);
            let mut j = group;
            while j < dispatch_blocks * el {
                let (base, kept) = unpack_run(src_runs.add(j * RUN_WORDS).read());
                if kept > 0 {
                    let local = j % el;
                    let e = (me as usize * el + local) as u32;
                    let slot = local * capacity + base;
                    let mut r = 0;
                    while r < kept {
                        let row_in = recv.add((slot + r) * words);
                        expert_row::<S>(done.add((slot + r) * hidden), row_in, hidden, e, fp8 != 0);
                        r += 1;
                    }
                    // The whole run is computed before any member (or the proxy) sends it.
                    S::sync();
                    let pos = src_runs.add(j * RUN_WORDS + 1).read() as usize;
                    let sig = ctrl.add(layout.combine_sig() + me as usize);
                    let rows = done.add(slot * hidden).cast_const();
                    S::put_signal_nbi(combine_in.add(pos * hidden), rows, kept * hidden, sig, kept as u64, SignalOp::Add, src);
                }
                j += groups;
            }
            // Every thread read `picked` before thread 0 writes the next source.
            sync_threads();
        }
    }
    instances {
        moe_expert_warp = [Warp],
        moe_expert_block = [Block],
    }

    /// Combine (step 3): waits until every expert PE returned all the rows this PE sent
    /// it, then writes each token's weighted sum over its kept choices to `out`: f32
    /// products added in choice order, rounded to bf16 once. One block per token at a
    /// time, its threads split the hidden dimension.
    pub fn moe_combine(combine_in: *const bf16, weights: *const f32, pos_of: *const u32, ctrl: *mut u64, out: *mut bf16, n_tokens: usize, hidden: usize, top_k: usize, experts_per_pe: usize) {
        let n = n_pes() as usize;
        let layout = Ctrl { experts_per_pe, n_pes: n };
        if thread_rank() == 0 {
            let sent = ctrl.add(layout.sent()).cast_const();
            wait_until_all_vector(ctrl.add(layout.combine_sig()), n, core::ptr::null(), Cmp::Ge, sent);
        }
        sync_threads();
        let (tid, threads) = (thread_rank() as usize, block_dim().volume() as usize);
        let mut t = block_rank() as usize;
        while t < n_tokens {
            let mut h = tid;
            while h < hidden {
                let mut acc = 0f32;
                for c in t * top_k..(t + 1) * top_k {
                    let pos = pos_of.add(c).read();
                    if pos != DROPPED {
                        acc += weights.add(c).read() * combine_in.add(pos as usize * hidden + h).read().to_f32();
                    }
                }
                out.add(t * hidden + h).write(bf16::from_f32(acc));
                h += threads;
            }
            t += grid_dim().volume() as usize;
        }
    }
}
