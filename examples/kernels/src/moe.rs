//! Mixture-of-experts token dispatch and combine, device-initiated (`examples/moe_dispatch`).
//!
//! Experts `0..E` are spread over the PEs, `E / n_pes` per PE: expert `e` lives on PE
//! `e / experts_per_pe` as its local expert `e % experts_per_pe`. Each PE owns `T` tokens of
//! `H` u64s, each routed to `k` experts with an integer weight.
//!
//! # Buffers (symmetric u64 arrays; `El` = experts per PE, `C` = capacity per expert)
//! - origin side: `tokens[T*H]`, `route[T*k]` ([`pack_route`]), `slot_of[T*k]` (the slot
//!   each choice got, or [`DROPPED`]), `combine_in[T*k*H]` (results, one row per choice),
//!   `out[T*H]`;
//! - expert side: `counters[El]`, `recv[El*C*H]` (token rows by expert and slot),
//!   `origin[El*C]` ([`pack_origin`]: who sent each slot);
//! - per PE pair: `dispatch_sig[n]`, `received[n]`, `sent[n]`, `combine_sig[n]`.
//!
//! # Protocol (three launches per PE, no host round trip between them)
//! 1. [`moe_dispatch`]: for each token and choice, one thread reserves a slot on the
//!    expert's PE with `atomic_fetch_add` on the expert's counter (a group's threads
//!    reserve a batch of choices at once, so their atomics overlap). A slot at or beyond the
//!    capacity is [`DROPPED`] and nothing is written (never out of bounds). Otherwise it
//!    writes the origin word with `p` and the group (warp or block) puts the token row with
//!    `put_nbi`. At the end each block tells every PE `q`, with one `signal_op` Add after the
//!    fence it implies, that it is done and how many rows it wrote to `q`:
//!    [`DISPATCH_DONE`]` + count` on `dispatch_sig[me]` of `q`.
//! 2. [`moe_expert`]: waits until every source PE's signal shows all its blocks done (the
//!    fetch-adds were complete before each signal, so the counters are final), applies the
//!    expert function [`expert_fn`] in place, and returns each row to its origin slot in
//!    `combine_in` with `put_signal_nbi` (Add 1 on `combine_sig[me]` of the origin).
//! 3. [`moe_combine`]: waits until `combine_sig[q] == sent[q]` for every expert PE `q`,
//!    then writes each token's weighted sum of its returned rows to `out`.
//!
//! No `quiet` is needed for the `_nbi` puts: their sources stay unchanged until the step
//! ends, and each arrives before the signal that the receiver waits for.

use symmem_device::{
    atomic_add, atomic_fetch, atomic_fetch_add, block_dim, block_rank, grid_dim, lane_id, my_pe,
    n_pes, p, put_nbi_block, put_nbi_warp, put_signal_nbi_block, put_signal_nbi_warp, signal_op,
    signal_wait_until, sync_threads, sync_warp, thread_rank, warp_id, warp_width, Cmp, SignalOp,
    WARP_SIZE,
};

/// `slot_of` value of a choice that found its expert full: the token was not sent there.
pub const DROPPED: u64 = u64::MAX;

/// One dispatch block done, in a dispatch signal; the low 32 bits count rows written.
pub const DISPATCH_DONE: u64 = 1 << 32;

/// The low 32 bits of a packed word.
const LOW: u64 = (1 << 32) - 1;

/// A route word: the expert in the low 32 bits, its integer weight in the high 32.
pub const fn pack_route(expert: u32, weight: u32) -> u64 {
    expert as u64 | (weight as u64) << 32
}

/// An origin word: the PE that sent a row in the high 32 bits, its choice index
/// (`token * k + j`) on that PE in the low 32.
pub const fn pack_origin(pe: u32, choice: u32) -> u64 {
    (pe as u64) << 32 | choice as u64
}

/// The stand-in expert function of expert `e`: exact integer arithmetic, different for
/// every expert, so a row processed by the wrong expert shows up in the check.
#[inline(always)]
pub const fn expert_fn(x: u64, e: u64) -> u64 {
    x.wrapping_mul(e + 1).wrapping_add(e)
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

    fn sync(self) {
        if self.warp {
            sync_warp()
        } else {
            sync_threads()
        }
    }
}

/// The `[first, end)` tokens of this block: contiguous chunks, one per block.
fn block_tokens(tokens: usize) -> (usize, usize) {
    let (b, blocks) = (block_rank() as usize, grid_dim().volume() as usize);
    let chunk = tokens.div_ceil(blocks);
    ((b * chunk).min(tokens), ((b + 1) * chunk).min(tokens))
}

symmem_device::kernel! {
    /// Dispatch (step 1 of the module's protocol): reserves a slot for each of this PE's
    /// `tokens × top_k` choices on its expert's PE and puts the token row there, by warp
    /// (`warp_scope != 0`) or by block, then signals every PE with the count it received.
    pub fn moe_dispatch(tokens: *const u64, route: *const u64, slot_of: *mut u64, counters: *mut u64, recv: *mut u64, origin: *mut u64, sent: *mut u64, dispatch_sig: *mut u64, n_tokens: usize, hidden: usize, top_k: usize, experts_per_pe: usize, capacity: usize, warp_scope: u32) {
        let (me, n) = (my_pe(), n_pes() as usize);
        let g = Groups::new(warp_scope != 0);
        let (first, end) = block_tokens(n_tokens);
        // The block's choices go in batches, one batch per group at a time: every member
        // reserves its own choices of the batch at once (the atomics are in flight
        // together), then the group puts the batch's rows one by one.
        let batch = if g.warp { WARP_SIZE as usize } else { g.width };
        let (offset, stride) = g.within_block();
        let (first_c, end_c) = (first * top_k, end * top_k);
        let mut base = first_c + offset * batch;
        while base < end_c {
            let stop = (base + batch).min(end_c);
            let mut c = base + g.rank;
            while c < stop {
                let e = (route.add(c).read() & LOW) as usize;
                let (pe, local) = ((e / experts_per_pe) as u32, e % experts_per_pe);
                let slot = atomic_fetch_add(counters.add(local), 1, pe) as usize;
                if slot < capacity {
                    let at = local * capacity + slot;
                    p(origin.add(at), pack_origin(me, c as u32), pe);
                    slot_of.add(c).write(slot as u64);
                } else {
                    slot_of.add(c).write(DROPPED);
                }
                c += g.width;
            }
            // The group barrier makes every member's `slot_of` writes visible to all.
            g.sync();
            let mut c = base;
            while c < stop {
                let slot = slot_of.add(c).read();
                if slot != DROPPED {
                    let e = (route.add(c).read() & LOW) as usize;
                    let (pe, local) = ((e / experts_per_pe) as u32, e % experts_per_pe);
                    let dst = recv.add((local * capacity + slot as usize) * hidden);
                    let src = tokens.add(c / top_k * hidden);
                    if g.warp {
                        put_nbi_warp(dst, src, hidden, pe);
                    } else {
                        put_nbi_block(dst, src, hidden, pe);
                    }
                }
                c += 1;
            }
            base += stride * batch;
        }
        // Every row of this block is issued; thread q tells PE q (the fence in
        // `signal_op` orders the block's puts, which the barrier made this thread's).
        sync_threads();
        let (tid, threads) = (thread_rank() as usize, block_dim().volume() as usize);
        let mut q = tid;
        while q < n {
            let mut count = 0u64;
            let mut c = first * top_k;
            while c < end * top_k {
                let e = (route.add(c).read() & LOW) as usize;
                if e / experts_per_pe == q && slot_of.add(c).read() != DROPPED {
                    count += 1;
                }
                c += 1;
            }
            atomic_add(sent.add(q), count, me);
            signal_op(dispatch_sig.add(me as usize), DISPATCH_DONE + count, SignalOp::Add, q as u32);
            q += threads;
        }
    }

    /// The experts of this PE (step 2): waits for every source PE's `dispatch_blocks`
    /// blocks, records each source's row count in `received`, applies [`expert_fn`] to
    /// every row in place and returns it to its origin with `put_signal_nbi`.
    pub fn moe_expert(recv: *mut u64, origin: *const u64, counters: *mut u64, dispatch_sig: *mut u64, received: *mut u64, combine_in: *mut u64, combine_sig: *mut u64, hidden: usize, experts_per_pe: usize, capacity: usize, dispatch_blocks: usize, warp_scope: u32) {
        let (me, n) = (my_pe(), n_pes() as usize);
        let g = Groups::new(warp_scope != 0);
        if thread_rank() == 0 {
            let mut src = 0;
            while src < n {
                let seen = signal_wait_until(dispatch_sig.add(src), Cmp::Ge, dispatch_blocks as u64 * DISPATCH_DONE);
                if block_rank() == 0 {
                    received.add(src).write(seen & LOW);
                }
                src += 1;
            }
        }
        // Thread 0's acquire loads saw every signal; the barrier extends that to the block.
        sync_threads();
        let mut local = 0;
        while local < experts_per_pe {
            let e = (me as usize * experts_per_pe + local) as u64;
            let rows = (atomic_fetch(counters.add(local), me) as usize).min(capacity);
            let mut slot = g.id;
            while slot < rows {
                let at = local * capacity + slot;
                let row = recv.add(at * hidden);
                let mut h = g.rank;
                while h < hidden {
                    row.add(h).write(expert_fn(row.add(h).read(), e));
                    h += g.width;
                }
                // The whole row is transformed before any member (or the proxy) sends it.
                g.sync();
                let from = origin.add(at).read();
                let (pe, choice) = ((from >> 32) as u32, (from & LOW) as usize);
                let dst = combine_in.add(choice * hidden);
                let sig = combine_sig.add(me as usize);
                if g.warp {
                    put_signal_nbi_warp(dst, row.cast_const(), hidden, sig, 1, SignalOp::Add, pe);
                } else {
                    put_signal_nbi_block(dst, row.cast_const(), hidden, sig, 1, SignalOp::Add, pe);
                }
                slot += g.count;
            }
            local += 1;
        }
    }

    /// Combine (step 3): waits until every expert PE returned all `sent` rows, then writes
    /// each token's weighted sum over its kept choices to `out`. One block per token at a
    /// time, its threads split the hidden dimension.
    pub fn moe_combine(combine_in: *const u64, route: *const u64, slot_of: *const u64, sent: *mut u64, combine_sig: *mut u64, out: *mut u64, n_tokens: usize, hidden: usize, top_k: usize) {
        let (me, n) = (my_pe(), n_pes() as usize);
        if thread_rank() == 0 {
            let mut q = 0;
            while q < n {
                signal_wait_until(combine_sig.add(q), Cmp::Ge, atomic_fetch(sent.add(q), me));
                q += 1;
            }
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
                    if slot_of.add(c).read() != DROPPED {
                        let weight = route.add(c).read() >> 32;
                        acc = acc.wrapping_add(weight.wrapping_mul(combine_in.add(c * hidden + h).read()));
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
