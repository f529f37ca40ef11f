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
