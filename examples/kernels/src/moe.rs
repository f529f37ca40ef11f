//! Mixture-of-experts token dispatch and combine, device-initiated (`examples/moe_dispatch`).
//!
//! Experts `0..E` are spread over the PEs, `E / n_pes` per PE: expert `e` lives on PE
//! `e / experts_per_pe` as its local expert `e % experts_per_pe`. Each PE owns `T` tokens of
//! `H` u64s, each routed to `k` experts with an integer weight. The `T × k` (token, expert)
//! pairs are the *choices*, numbered `token * k + j`.
//!
//! # Runs
//! Tokens are split into one contiguous chunk per dispatch block. A block's choices for one
//! expert form a *run*: the block reserves the run's slots on the expert's PE with one
//! `atomic_fetch_add` of its length (not one per token), and its rows travel and return
//! together. A run has a *position* on the origin PE: the block's choices sorted by expert,
//! so that a run's rows are contiguous in the origin's staging and combine buffers.
//!
//! # Buffers (symmetric; `El` = experts per PE, `C` = capacity per expert, `B` = blocks)
//! - origin side: `tokens[T*H]`, `route[T*k]` ([`pack_route`]), `pos_of[T*k]` (each choice's
//!   position, or [`DROPPED`]), `plan[B*E*2]` (each block's run per expert: [`pack_run`] and
//!   its first position), `send[T*k*H]` (rows staged by position for PEs reached through the
//!   proxy), `combine_in[T*k*H]` (returned rows by position), `out[T*H]`;
//! - expert side: `recv[El*C*H]` (rows by local expert and slot), `runs[n*B*El*2]` (every
//!   source block's run descriptors: the `plan` entries of this PE's experts), and the block
//!   scratch of the expert kernel, `status[B*n]` (i32) and `pick[B]`;
//! - `ctrl` ([`Ctrl`]): the experts' slot counters and, per PE pair, the dispatch and
//!   combine signals and the rows sent and received.
//!
//! # Protocol (three launches per PE, no host round trip between them)
//! 1. [`moe_dispatch()`]: a block counts its choices per expert, reserves every run with one
//!    `atomic_fetch_add` (the threads' reservations are in flight together) and gives each
//!    choice its position, or [`DROPPED`] beyond the expert's capacity (nothing is written
//!    there, never out of bounds). Groups (warps or the block) then move the rows: straight
//!    into their slots with `put_nbi` on a PE this one reaches directly (`ptr`), else into
//!    `send`, from where one `put_nbi` per run carries them. Last, one thread per PE `q`
//!    puts the block's run descriptors for `q`'s experts, and one `signal_op` Add (after the
//!    fence it implies) tells `q` the block is done and how many rows it holds:
//!    [`DISPATCH_DONE`]` + rows` on `dispatch_sig[me]` of `q`.
//! 2. [`moe_expert()`]: takes the source PEs in the order their blocks finish
//!    (`wait_until_any`); for each, the grid's groups share its runs, apply the expert
//!    function [`expert_fn`] in place and return each run with one `put_signal_nbi`
//!    (Add of the run's rows on `combine_sig[me]` of the origin).
//! 3. [`moe_combine()`]: waits until `combine_sig[q] >= sent[q]` for every PE `q`
//!    (`wait_until_all_vector`), then writes each token's weighted sum of its returned rows.
//!
//! No `quiet` is needed for the `_nbi` puts: their sources stay unchanged until the step
//! ends, and each arrives before the signal that the receiver waits for.

use symmem_device::{
    atomic_add, atomic_fetch_add, block_dim, block_rank, grid_dim, lane_id, my_pe, n_pes, ptr,
    put_nbi, put_nbi_block, put_nbi_warp, put_signal_nbi_block, put_signal_nbi_warp, signal_fetch,
    signal_op, sync_threads, sync_warp, thread_rank, wait_until_all_vector, wait_until_any,
    warp_id, warp_width, Cmp, SignalOp, WARP_SIZE,
};

/// `pos_of` value of a choice that found its expert full: the token was not sent there.
pub const DROPPED: u64 = u64::MAX;

/// One dispatch block done, in a dispatch signal; the low 32 bits count rows written.
pub const DISPATCH_DONE: u64 = 1 << 32;

/// Words per run descriptor in `plan` and `runs`: [`pack_run`], then the first position.
pub const RUN_WORDS: usize = 2;

/// The low 32 bits of a packed word.
const LOW: u64 = (1 << 32) - 1;

/// `pick` value of an expert block that has no source left.
const NO_SOURCE: u64 = u64::MAX;

/// A route word: the expert in the low 32 bits, its integer weight in the high 32.
pub const fn pack_route(expert: u32, weight: u32) -> u64 {
    expert as u64 | (weight as u64) << 32
}

/// A run word: the first reserved slot in the high 32 bits, the rows kept in the low 32.
pub const fn pack_run(base: u32, kept: u32) -> u64 {
    (base as u64) << 32 | kept as u64
}

/// The first slot and the kept rows of a [`pack_run`] word.
pub const fn unpack_run(run: u64) -> (usize, usize) {
    ((run >> 32) as usize, (run & LOW) as usize)
}

/// The stand-in expert function of expert `e`: exact integer arithmetic, different for
/// every expert, so a row processed by the wrong expert shows up in the check.
#[inline(always)]
pub const fn expert_fn(x: u64, e: u64) -> u64 {
    x.wrapping_mul(e + 1).wrapping_add(e)
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
    /// Words in the buffer.
    pub const fn words(self) -> usize {
        self.experts_per_pe + 4 * self.n_pes
    }
}

/// How the threads of a block split into groups that each move one row at a time.
#[derive(Clone, Copy)]
struct Groups {
    /// Warps (true) or whole blocks (false).
    warp: bool,
    /// This group's index in the grid.
    id: usize,
    /// Groups in the grid.
    count: usize,
    /// This thread's rank in its group.
    rank: usize,
    /// Threads in this group.
    width: usize,
}

impl Groups {
    fn new(warp: bool) -> Self {
        let (b, blocks) = (block_rank() as usize, grid_dim().volume() as usize);
        if warp {
            let warps = block_dim().volume().div_ceil(WARP_SIZE) as usize;
            Groups {
                warp,
                id: b * warps + warp_id() as usize,
                count: blocks * warps,
                rank: lane_id() as usize,
                width: warp_width() as usize,
            }
        } else {
            Groups {
                warp,
                id: b,
                count: blocks,
                rank: thread_rank() as usize,
                width: block_dim().volume() as usize,
            }
        }
    }

    /// Within a block's own range of items, this group's first index and stride.
    fn within_block(self) -> (usize, usize) {
        if self.warp {
            let warps = block_dim().volume().div_ceil(WARP_SIZE) as usize;
            (warp_id() as usize, warps)
        } else {
            (0, 1)
        }
    }

    /// Copies `nelems` u64s between two local buffers, the members taking every
    /// `width`-th element.
    ///
    /// # Safety
    /// Both ranges hold `nelems` u64s and do not overlap; every member calls it with the
    /// same arguments.
    unsafe fn copy(self, dst: *mut u64, src: *const u64, nelems: usize) {
        let mut i = self.rank;
        while i < nelems {
            // SAFETY: i < nelems; the caller guarantees both ranges.
            unsafe { dst.add(i).write(src.add(i).read()) };
            i += self.width;
        }
    }

    fn sync(self) {
        if self.warp {
            sync_warp()
        } else {
            sync_threads()
        }
    }

    /// The group's `put_nbi` of `nelems` u64s to `dest` on `pe`.
    ///
    /// # Safety
    /// As `put_nbi_warp`/`put_nbi_block`; every member calls it with the same arguments.
    unsafe fn put_nbi(self, dest: *mut u64, src: *const u64, nelems: usize, pe: u32) {
        // SAFETY: the caller's contract is these functions' contract.
        unsafe {
            if self.warp {
                put_nbi_warp(dest, src, nelems, pe)
            } else {
                put_nbi_block(dest, src, nelems, pe)
            }
        }
    }

    /// The group's `put_signal_nbi` with an Add of `signal`.
    ///
    /// # Safety
    /// As `put_signal_nbi_warp`/`put_signal_nbi_block`; every member calls it with the same
    /// arguments.
    unsafe fn put_signal_add(
        self,
        dest: *mut u64,
        src: *const u64,
        nelems: usize,
        sig: *mut u64,
        signal: u64,
        pe: u32,
    ) {
        // SAFETY: the caller's contract is these functions' contract.
        unsafe {
            if self.warp {
                put_signal_nbi_warp(dest, src, nelems, sig, signal, SignalOp::Add, pe)
            } else {
                put_signal_nbi_block(dest, src, nelems, sig, signal, SignalOp::Add, pe)
            }
        }
    }
}

/// The `[first, end)` tokens of this block: contiguous chunks, one per block.
fn block_tokens(tokens: usize) -> (usize, usize) {
    let (b, blocks) = (block_rank() as usize, grid_dim().volume() as usize);
    let chunk = tokens.div_ceil(blocks);
    ((b * chunk).min(tokens), ((b + 1) * chunk).min(tokens))
}

/// The expert of a route word.
#[inline(always)]
fn expert_of(route: u64) -> usize {
    (route & LOW) as usize
}

symmem_device::kernel! {
    /// Dispatch (step 1 of the module's protocol): reserves this block's run on every
    /// expert with one `atomic_fetch_add`, gives each choice its position (or [`DROPPED`]),
    /// moves the rows by warp (`warp_scope != 0`) or by block, straight to PEs reached
    /// directly and through `send` to the others, then hands every PE its run descriptors
    /// and a signal with the rows it now holds.
    // Over 100 lines on purpose: the protocol's steps (reserve, place, move, describe,
    // signal) in order, sharing the block's locals and barriers.
    pub fn moe_dispatch(tokens: *const u64, route: *const u64, pos_of: *mut u64, plan: *mut u64, send: *mut u64, recv: *mut u64, runs: *mut u64, ctrl: *mut u64, n_tokens: usize, hidden: usize, top_k: usize, experts_per_pe: usize, capacity: usize, warp_scope: u32) {
        let (me, n) = (my_pe(), n_pes() as usize);
        let (el, layout) = (experts_per_pe, Ctrl { experts_per_pe, n_pes: n });
        let experts = el * n;
        let g = Groups::new(warp_scope != 0);
        let (b, blocks) = (block_rank() as usize, grid_dim().volume() as usize);
        let (tid, threads) = (thread_rank() as usize, block_dim().volume() as usize);
        let (first, end) = block_tokens(n_tokens);
        let (first_c, end_c) = (first * top_k, end * top_k);
        // This block's run per expert: `plan[e * RUN_WORDS]` the run word,
        // `plan[e * RUN_WORDS + 1]` its first position.
        let plan = plan.add(b * experts * RUN_WORDS);

        // 1. Each thread counts the block's choices of its experts (in the position word),
        //    then thread 0 turns the counts into first positions, experts in order.
        let mut e = tid;
        while e < experts {
            let mut count = 0u64;
            let mut c = first_c;
            while c < end_c {
                count += u64::from(expert_of(route.add(c).read()) == e);
                c += 1;
            }
            plan.add(e * RUN_WORDS + 1).write(count);
            e += threads;
        }
        sync_threads();
        if tid == 0 {
            let mut at = first_c as u64;
            let mut e = 0;
            while e < experts {
                let count = plan.add(e * RUN_WORDS + 1).read();
                plan.add(e * RUN_WORDS + 1).write(at);
                at += count;
                e += 1;
            }
        }
        sync_threads();

        // 2. One reservation per run, the threads' atomics in flight together; the first
        //    `kept` choices of a run get its positions, the rest are dropped.
        let mut e = tid;
        while e < experts {
            let pos0 = plan.add(e * RUN_WORDS + 1).read() as usize;
            let next = if e + 1 < experts {
                plan.add((e + 1) * RUN_WORDS + 1).read() as usize
            } else {
                end_c
            };
            let count = next - pos0;
            let (pe, local) = ((e / el) as u32, e % el);
            let (base, kept) = if count == 0 {
                (0, 0)
            } else {
                let base = atomic_fetch_add(ctrl.add(layout.counters() + local), count as u64, pe) as usize;
                (base.min(capacity), count.min(capacity.saturating_sub(base)))
            };
            plan.add(e * RUN_WORDS).write(pack_run(base as u32, kept as u32));
            let (mut rank, mut c) = (0, first_c);
            while c < end_c {
                if expert_of(route.add(c).read()) == e {
                    let pos = if rank < kept { (pos0 + rank) as u64 } else { DROPPED };
                    pos_of.add(c).write(pos);
                    rank += 1;
                }
                c += 1;
            }
            e += threads;
        }
        sync_threads();

        // 3. Each group moves one kept choice's row at a time: into its slot on a PE this
        //    one reaches directly, else into `send` at its position.
        let (offset, stride) = g.within_block();
        let mut c = first_c + offset;
        while c < end_c {
            let pos = pos_of.add(c).read();
            if pos != DROPPED {
                let e = expert_of(route.add(c).read());
                let (pe, local) = ((e / el) as u32, e % el);
                let src = tokens.add(c / top_k * hidden);
                if ptr(recv.cast_const(), pe).is_null() {
                    g.copy(send.add(pos as usize * hidden), src, hidden);
                } else {
                    let (base, _) = unpack_run(plan.add(e * RUN_WORDS).read());
                    let slot = base + (pos as usize - plan.add(e * RUN_WORDS + 1).read() as usize);
                    g.put_nbi(recv.add((local * capacity + slot) * hidden), src, hidden, pe);
                }
            }
            c += stride;
        }
        // The barrier makes the staged rows and the direct puts this block's, so the
        // fence in each `signal_op` below orders them before the signal.
        sync_threads();

        // 4. Thread q serves PE q: one put per staged run, the descriptors of q's experts,
        //    the rows sent, then the done signal.
        let mut q = tid;
        while q < n {
            let via_proxy = ptr(recv.cast_const(), q as u32).is_null();
            let mut rows = 0;
            let mut local = 0;
            while local < el {
                let e = q * el + local;
                let (base, kept) = unpack_run(plan.add(e * RUN_WORDS).read());
                if via_proxy && kept > 0 {
                    let pos0 = plan.add(e * RUN_WORDS + 1).read() as usize;
                    put_nbi(recv.add((local * capacity + base) * hidden), send.add(pos0 * hidden).cast_const(), kept * hidden, q as u32);
                }
                rows += kept as u64;
                local += 1;
            }
            let mine = runs.add((me as usize * blocks + b) * el * RUN_WORDS);
            put_nbi(mine, plan.add(q * el * RUN_WORDS).cast_const(), el * RUN_WORDS, q as u32);
            atomic_add(ctrl.add(layout.sent() + q), rows, me);
            signal_op(ctrl.add(layout.dispatch_sig() + me as usize), DISPATCH_DONE + rows, SignalOp::Add, q as u32);
            q += threads;
        }
    }

    /// The experts of this PE (step 2): takes the source PEs as their `dispatch_blocks`
    /// blocks finish, records each source's rows in `received`, and for each of its runs
    /// applies [`expert_fn`] in place and returns the run to its origin with one
    /// `put_signal_nbi`. `status` and `pick` are this kernel's scratch.
    pub fn moe_expert(recv: *mut u64, runs: *const u64, ctrl: *mut u64, status: *mut i32, pick: *mut u64, combine_in: *mut u64, hidden: usize, experts_per_pe: usize, capacity: usize, dispatch_blocks: usize, warp_scope: u32) {
        let (me, n) = (my_pe(), n_pes() as usize);
        let (el, layout) = (experts_per_pe, Ctrl { experts_per_pe, n_pes: n });
        let g = Groups::new(warp_scope != 0);
        let b = block_rank() as usize;
        let (status, pick) = (status.add(b * n), pick.add(b));
        let dispatch_sig = ctrl.add(layout.dispatch_sig());
        let all_done = dispatch_blocks as u64 * DISPATCH_DONE;
        if thread_rank() == 0 {
            let mut q = 0;
            while q < n {
                status.add(q).write(0);
                q += 1;
            }
        }
        loop {
            if thread_rank() == 0 {
                let src = match wait_until_any(dispatch_sig, n, status.cast_const(), Cmp::Ge, all_done) {
                    Some(src) => {
                        status.add(src).write(1);
                        if b == 0 {
                            let seen = signal_fetch(dispatch_sig.add(src).cast_const());
                            ctrl.add(layout.received() + src).write(seen & LOW);
                        }
                        src as u64
                    }
                    None => NO_SOURCE,
                };
                pick.write(src);
            }
            // Thread 0's acquire saw the source's signal, so its descriptors and rows; the
            // barrier extends that to the block.
            sync_threads();
            let src = pick.read();
            if src == NO_SOURCE {
                break;
            }
            let src_runs = runs.add(src as usize * dispatch_blocks * el * RUN_WORDS);
            let mut j = g.id;
            while j < dispatch_blocks * el {
                let (base, kept) = unpack_run(src_runs.add(j * RUN_WORDS).read());
                if kept > 0 {
                    let local = j % el;
                    let e = (me as usize * el + local) as u64;
                    let rows = recv.add((local * capacity + base) * hidden);
                    let len = kept * hidden;
                    let mut i = g.rank;
                    while i < len {
                        rows.add(i).write(expert_fn(rows.add(i).read(), e));
                        i += g.width;
                    }
                    // The whole run is transformed before any member (or the proxy) sends it.
                    g.sync();
                    let pos = src_runs.add(j * RUN_WORDS + 1).read() as usize;
                    let sig = ctrl.add(layout.combine_sig() + me as usize);
                    g.put_signal_add(combine_in.add(pos * hidden), rows.cast_const(), len, sig, kept as u64, src as u32);
                }
                j += g.count;
            }
            // Every thread read `pick` before thread 0 writes the next source.
            sync_threads();
        }
    }

    /// Combine (step 3): waits until every expert PE returned all the rows this PE sent
    /// it, then writes each token's weighted sum over its kept choices to `out`. One block
    /// per token at a time, its threads split the hidden dimension.
    pub fn moe_combine(combine_in: *const u64, route: *const u64, pos_of: *const u64, ctrl: *mut u64, out: *mut u64, n_tokens: usize, hidden: usize, top_k: usize, experts_per_pe: usize) {
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
                let mut acc = 0u64;
                let mut j = 0;
                while j < top_k {
                    let c = t * top_k + j;
                    let pos = pos_of.add(c).read();
                    if pos != DROPPED {
                        let weight = route.add(c).read() >> 32;
                        acc = acc.wrapping_add(weight.wrapping_mul(combine_in.add(pos as usize * hidden + h).read()));
                    }
                    j += 1;
                }
                out.add(t * hidden + h).write(acc);
                h += threads;
            }
            t += grid_dim().volume() as usize;
        }
    }
}
