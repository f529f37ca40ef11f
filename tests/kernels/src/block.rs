//! Shared memory (static and dynamic), warp intrinsics, block-scope atomics and the
//! block-wide scan and histogram.

use symmem_device::*;

use crate::global_thread;

/// u64 fields [`block_scan()`] records per thread.
pub const SCAN_FIELDS: usize = 4;
/// u64 fields [`warp_ops()`] records per thread.
pub const WARP_FIELDS: usize = 11;
/// Bins of [`shared_hist()`].
pub const BINS: usize = 64;
/// u64 fields [`shared_hist()`] records per block after its bins.
pub const ATOMIC_FIELDS: usize = 4;

/// The u32 that thread `g` of the grid scans in [`block_scan()`].
#[inline(always)]
pub const fn scan_input(g: u32) -> u32 {
    g.wrapping_mul(2_654_435_761) >> 20
}

/// The 64-bit multiplier of [`block_scan()`]'s u64 scan: sums exceed 32 bits.
pub const WIDE: u64 = 3_000_000_019;

shared! {
    /// [`shared_hist()`]'s bins.
    static HIST: [u32; BINS];
    /// [`shared_hist()`]'s block-scope minimum and maximum.
    static EXTREMES: [i64; 2];
    /// [`shared_hist()`]'s compare-and-swap word and winner count.
    static CLAIM: [u32; 2];
}

kernel! {
    /// Thread `g` scans `scan_input(g)` over its block: it stores, at record `g` of `out`
    /// ([`SCAN_FIELDS`] u64s), the inclusive and exclusive u32 sums, the inclusive u64 sum
    /// of `scan_input * WIDE`, and the block's u64 total.
    pub fn block_scan(out: *mut u64) {
        let g = global_thread();
        let v = scan_input(g);
        let incl = scan_inclusive_block(v);
        let (excl, _) = scan_exclusive_block(v);
        let (wide_excl, total) = scan_exclusive_block(v as u64 * WIDE);
        let rec = out.add(g as usize * SCAN_FIELDS);
        rec.write(incl as u64);
        rec.add(1).write(excl as u64);
        rec.add(2).write(wide_excl + v as u64 * WIDE);
        rec.add(3).write(total);
    }

    /// Every warp intrinsic in full warps (blocks of a multiple of 32 threads): thread `g`
    /// stores, at record `g` of `out` ([`WARP_FIELDS`] u64s): the ballot of
    /// `lane % 3 == 0`; `g * WIDE` of lane `(lane + 5) % 32` (64-bit shfl); `lane` of lane
    /// `lane - 3` (shfl_up); `lane` of lane `lane + 2` (shfl_down); the f64 `lane + 0.5` of
    /// lane `lane ^ 1` (shfl_xor); match_any of `lane / 4`; match_all of 7 and of `lane`
    /// (0 for none); `active_mask` (before any lane can have exited); `popc` of the first ballot; and, with the warp split
    /// into halves that shuffle apart, `lane` of the lane mirrored within its half.
    pub fn warp_ops(out: *mut u64) {
        let g = global_thread();
        let lane = lane_id();
        let mask = warp_mask();
        // First: on the CPU executor a lane that finished the kernel counts as inactive.
        let active = active_mask();
        let votes = ballot(mask, lane.is_multiple_of(3));
        let rec = out.add(g as usize * WARP_FIELDS);
        rec.write(votes as u64);
        rec.add(1).write(shfl(mask, g as u64 * WIDE, (lane + 5) % WARP_SIZE));
        rec.add(2).write(shfl_up(mask, lane, 3) as u64);
        rec.add(3).write(shfl_down(mask, lane, 2) as u64);
        rec.add(4).write(shfl_xor(mask, lane as f64 + 0.5, 1).to_bits());
        rec.add(5).write(match_any(mask, lane / 4) as u64);
        rec.add(6).write(match_all(mask, 7u32).unwrap_or(0) as u64);
        rec.add(7).write(match_all(mask, lane).unwrap_or(0) as u64);
        rec.add(8).write(active as u64);
        rec.add(9).write(popc(votes) as u64);
        let mirrored = if lane < 16 {
            shfl(0x0000_ffff, lane, 15 - lane)
        } else {
            shfl(0xffff_0000, lane, 47 - lane)
        };
        rec.add(10).write(mirrored as u64);
    }

    /// Block `b` counts `keys[b * threads * per_thread..]` (`per_thread` keys of each
    /// thread, all below [`BINS`]) with `histogram_block` into a static shared array and
    /// stores its bins in `out[b * (BINS + ATOMIC_FIELDS)..]` (u64s), then the block-scope
    /// minimum and maximum of `key - 10` (i64, as bits), the number of threads whose
    /// compare-and-swap claimed a word, and the claimant's `thread_rank + 1`.
    pub fn shared_hist(keys: *const u32, per_thread: u32, out: *mut u64) {
        let (t, b, threads) = (thread_rank(), block_rank(), block_dim().volume());
        let mine = keys.add(((b * threads + t) * per_thread) as usize);
        let bins = HIST.slice();
        histogram_block(bins, (0..per_thread as usize).map(|i| mine.add(i).read()));
        let (extremes, claim) = (EXTREMES.slice(), CLAIM.slice());
        if t == 0 {
            extremes.set(0, i64::MAX);
            extremes.set(1, i64::MIN);
            claim.set(0, 0);
            claim.set(1, 0);
        }
        sync_threads();
        for i in 0..per_thread as usize {
            let k = mine.add(i).read() as i64 - 10;
            extremes.fetch_min(0, k);
            extremes.fetch_max(1, k);
        }
        if claim.compare_swap(0, 0, t + 1) == 0 {
            claim.fetch_add(1, 1);
        }
        sync_threads();
        let rec = out.add(b as usize * (BINS + ATOMIC_FIELDS));
        let mut i = t as usize;
        while i < BINS {
            rec.add(i).write(bins.get(i) as u64);
            i += threads as usize;
        }
        if t == 0 {
            rec.add(BINS).write(extremes.get(0) as u64);
            rec.add(BINS + 1).write(extremes.get(1) as u64);
            rec.add(BINS + 2).write(claim.get(1) as u64);
            rec.add(BINS + 3).write(claim.get(0) as u64);
        }
    }

    /// Dynamic shared memory: thread `t` of block `b` stores `t * 7 + b` in element `t` of
    /// the block's `dynamic_shared::<u64>()`, and after `sync_threads` stores element
    /// `(t + 1) % threads` in `out[g]`; thread 0 also stores the slice's length in
    /// `out[grid threads + b]`.
    pub fn dyn_shared(out: *mut u64) {
        let (t, b, threads) = (thread_rank(), block_rank(), block_dim().volume());
        let mem = dynamic_shared::<u64>();
        mem.set(t as usize, (t * 7 + b) as u64);
        sync_threads();
        out.add(global_thread() as usize).write(mem.get(((t + 1) % threads) as usize));
        if t == 0 {
            let all = threads * grid_dim().volume();
            out.add((all + b) as usize).write(mem.len() as u64);
        }
    }

    /// A misuse the CPU executor refuses with a message: `0`, a shared index past the end;
    /// `1`, a shuffle whose mask leaves out lane 1, called by lane 1; `2`, lane 3 exits
    /// before the rest of its warp shuffle with every lane; `3`, a histogram key outside
    /// the bins.
    pub fn group_misuse(mode: u32) {
        let lane = lane_id();
        match mode {
            0 => {
                HIST.slice().get(BINS + thread_rank() as usize);
            }
            1 => {
                shfl(0b01, lane, 0);
            }
            2 => {
                if lane != 3 {
                    shfl(ALL_LANES, lane, 0);
                }
            }
            _ => histogram_block(HIST.slice(), [BINS as u32 + thread_rank()]),
        }
    }
}
