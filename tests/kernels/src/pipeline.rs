//! A device-side put-with-signal pipeline: a producer kernel on one PE streams `chunks`
//! chunks through `nslots` slots of the consumer's symmetric buffer with
//! `put_signal_nbi_block`; a consumer kernel on the target waits for each chunk's signal,
//! checks and sums every element, and returns the slot as a credit with `signal_op`.
//!
//! Chunk `k` goes to slot `k % nslots`. Its signal (`sig[slot]` on the consumer) is, for
//! `SignalOp::Set`, the chunk number plus one, and for `SignalOp::Add` one more use of the
//! slot; [`chunk_signal`] gives the value the consumer waits for. The producer reuses a
//! slot only after the consumer's credit word (`credit` on the producer) says that the
//! chunk before has been consumed.

use symmem_device::*;

use crate::pattern;

/// The signal value of `slot` once chunk `k` has arrived in it.
#[inline(always)]
pub const fn chunk_signal(op: SignalOp, k: u32, nslots: u32) -> u64 {
    match op {
        SignalOp::Set => k as u64 + 1,
        SignalOp::Add => (k / nslots) as u64 + 1,
    }
}

kernel! {
    /// The producer, one block: streams chunk `k` (`chunk` u64s of `src`, host,
    /// `chunks * chunk`) into slot `k % nslots` of `slots` (sym, `nslots * chunk`) on
    /// `target` with `put_signal_nbi_block`, signalling `sig[slot]` (sym, `nslots` words)
    /// with `op` (`Set`: `k + 1`; `Add`: 1). Before reusing a slot it waits for
    /// `credit` (sym, on this PE) to show that chunk `k - nslots` was consumed.
    // A kernel takes its arguments one by one, as a CUDA kernel does.
    #[allow(clippy::too_many_arguments)]
    pub fn pipe_produce(slots: *mut u64, src: *const u64, chunk: usize, chunks: u32, nslots: u32, sig: *mut u64, credit: *mut u64, op: SignalOp, target: u32) {
        for k in 0..chunks {
            if k >= nslots {
                if thread_rank() == 0 {
                    signal_wait_until(credit, Cmp::Ge, (k - nslots + 1) as u64);
                }
                sync_threads();
            }
            let slot = k % nslots;
            let value = match op {
                SignalOp::Set => k as u64 + 1,
                SignalOp::Add => 1,
            };
            put_signal_nbi_block(
                slots.add(slot as usize * chunk),
                src.add(k as usize * chunk),
                chunk,
                sig.add(slot as usize),
                value,
                op,
                target,
            );
        }
        quiet_block();
    }

    /// The consumer, one block: for each chunk `k`, thread 0 waits until `sig[k % nslots]`
    /// equals `chunk_signal(op, k, nslots)`; every thread checks its share of the slot
    /// against `pattern(producer, k, i)` and adds it to a running (wrapping) sum; then
    /// thread 0 adds 1 to `credit` on `producer`. Thread `t` stores its sum and its number
    /// of mismatches in `out[2t]`, `out[2t + 1]` (host).
    #[allow(clippy::too_many_arguments)]
    pub fn pipe_consume(slots: *mut u64, chunk: usize, chunks: u32, nslots: u32, sig: *mut u64, credit: *mut u64, op: SignalOp, producer: u32, out: *mut u64) {
        let (t, threads) = (thread_rank() as usize, block_dim().volume() as usize);
        let (mut sum, mut bad) = (0u64, 0u64);
        for k in 0..chunks {
            let slot = k % nslots;
            if t == 0 {
                signal_wait_until(sig.add(slot as usize), Cmp::Eq, chunk_signal(op, k, nslots));
            }
            sync_threads();
            let data = slots.add(slot as usize * chunk);
            let mut i = t;
            while i < chunk {
                let v = data.add(i).read();
                if v != pattern(producer, k, i) {
                    bad += 1;
                }
                sum = sum.wrapping_add(v);
                i += threads;
            }
            sync_threads();
            if t == 0 {
                signal_op(credit, 1, SignalOp::Add, producer);
            }
        }
        out.add(2 * t).write(sum);
        out.add(2 * t + 1).write(bad);
    }
}

/// Elements of chunk `i` in the stream-ordering check: sizes from 1 to `max_len` in a
/// scrambled order.
#[inline(always)]
pub const fn stream_chunk_len(i: u32, max_len: usize) -> usize {
    1 + (i as usize * 7919) % max_len
}

kernel! {
    /// The consumer of the stream-ordering check: chunk `i` (of `iters`) arrives in region
    /// `i` (`max_len` u64s each) of `regions` (sym) with `put_signal_on_stream`, which adds
    /// 1 to `sig` (sym). For each chunk, thread 0 waits until `sig` reaches `i + 1`, then
    /// the block checks every element against `pattern(producer, i, j)` at once: a signal
    /// that overtook its data shows as mismatches, which are added to `bad` (sym) on this
    /// PE.
    pub fn stream_consume(regions: *const u64, max_len: usize, iters: u32, sig: *mut u64, producer: u32, bad: *mut u64) {
        let (t, threads) = (thread_rank() as usize, block_dim().volume() as usize);
        let mut wrong = 0u64;
        for i in 0..iters {
            if t == 0 {
                signal_wait_until(sig, Cmp::Ge, i as u64 + 1);
            }
            sync_threads();
            let data = regions.add(i as usize * max_len);
            let mut j = t;
            while j < stream_chunk_len(i, max_len) {
                if data.add(j).read() != pattern(producer, i, j) {
                    wrong += 1;
                }
                j += threads;
            }
            sync_threads();
        }
        if wrong != 0 {
            atomic_add(bad, wrong, my_pe());
        }
    }
}
