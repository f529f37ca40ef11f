//! Put-with-signal at thread, warp and block scope (`SignalOp::Set` and `::Add`, blocking
//! and `_nbi`), `signal_op`, `signal_fetch`, `signal_wait_until`, and `wait_until` /
//! `test` with every comparison on every integer type.
//!
//! The put-with-signal kernels use the units of [`crate::rma`]: unit `u` of PE `s` puts
//! region `r = s * U + u` to PE `put_target(s, u)`, then signals it with token `r + 1`:
//! `Set` stores the token in `sig[r]`, `Add` adds it to the shared word `sig[n_pes * U]`.
//! A separate consumer kernel on the target waits for the signals and checks every
//! element.

use symmem_device::*;

use crate::rma::put_target;
use crate::{global_thread, pattern, warps_per_block};

/// The region unit `u` of this PE writes, the signal word it updates and the value.
#[inline(always)]
unsafe fn unit_signal(sig: *mut u64, u: u32, units: u32, op: SignalOp) -> (u32, *mut u64, u64) {
    let (me, n) = (my_pe(), n_pes());
    let region = me * units + u;
    let word = match op {
        SignalOp::Set => sig.add(region as usize),
        SignalOp::Add => sig.add((n * units) as usize),
    };
    (region, word, region as u64 + 1)
}

kernel! {
    /// Thread scope: every thread puts its `len` u64s from `src` (host, `len` per unit) to
    /// its region of `dst` (sym) with `put_signal` (or `put_signal_nbi` if `nbi != 0`) and
    /// signals `sig` (sym, `n_pes * U + 1` words) with `op`.
    pub fn ps_put_threads(dst: *mut u64, src: *const u64, len: usize, sig: *mut u64, op: SignalOp, nbi: u32) {
        let units = grid_dim().volume() * block_dim().volume();
        let u = global_thread();
        let (region, word, value) = unit_signal(sig, u, units, op);
        let (d, s, pe) = (dst.add(region as usize * len), src.add(u as usize * len), put_target(my_pe(), u, n_pes()));
        if nbi == 0 {
            put_signal(d, s, len, word, value, op, pe);
        } else {
            put_signal_nbi(d, s, len, word, value, op, pe);
            quiet();
        }
    }

    /// Warp scope: as [`ps_put_threads`] with one unit per warp, through
    /// `put_signal_warp` / `put_signal_nbi_warp`.
    pub fn ps_put_warps(dst: *mut u64, src: *const u64, len: usize, sig: *mut u64, op: SignalOp, nbi: u32) {
        let wpb = warps_per_block();
        let (u, units) = (block_rank() * wpb + warp_id(), grid_dim().volume() * wpb);
        let (region, word, value) = unit_signal(sig, u, units, op);
        let (d, s, pe) = (dst.add(region as usize * len), src.add(u as usize * len), put_target(my_pe(), u, n_pes()));
        if nbi == 0 {
            put_signal_warp(d, s, len, word, value, op, pe);
        } else {
            put_signal_nbi_warp(d, s, len, word, value, op, pe);
            quiet();
        }
    }

    /// Block scope: as [`ps_put_threads`] with one unit per block, through
    /// `put_signal_block` / `put_signal_nbi_block`.
    pub fn ps_put_blocks(dst: *mut u64, src: *const u64, len: usize, sig: *mut u64, op: SignalOp, nbi: u32) {
        let (u, units) = (block_rank(), grid_dim().volume());
        let (region, word, value) = unit_signal(sig, u, units, op);
        let (d, s, pe) = (dst.add(region as usize * len), src.add(u as usize * len), put_target(my_pe(), u, n_pes()));
        if nbi == 0 {
            put_signal_block(d, s, len, word, value, op, pe);
        } else {
            put_signal_nbi_block(d, s, len, word, value, op, pe);
            quiet_block();
        }
    }

    /// The consumer, one block: for every region of `dst` (sym) addressed to this PE by a
    /// producer with `units` units, thread 0 waits for its signal in `sig` (sym): for
    /// `Set` until `sig[r] == r + 1`, for `Add` (once) until the shared word equals the sum
    /// of the tokens addressed here. Then every thread checks its share of the region's
    /// elements against `pattern(s, u, i)`. Thread `t` stores the number of elements it
    /// checked and of mismatches in `out[2t]`, `out[2t + 1]` (host).
    pub fn ps_consume(dst: *mut u64, len: usize, units: u32, sig: *mut u64, op: SignalOp, out: *mut u64) {
        let (me, n, t, threads) = (my_pe(), n_pes(), thread_rank(), block_dim().volume());
        if op == SignalOp::Add && t == 0 {
            let mut total = 0;
            for r in 0..n * units {
                if put_target(r / units, r % units, n) == me {
                    total += r as u64 + 1;
                }
            }
            signal_wait_until(sig.add((n * units) as usize), Cmp::Eq, total);
        }
        let (mut checked, mut bad) = (0u64, 0u64);
        for r in 0..n * units {
            let (s, u) = (r / units, r % units);
            if put_target(s, u, n) != me {
                continue;
            }
            if op == SignalOp::Set && t == 0 {
                signal_wait_until(sig.add(r as usize), Cmp::Eq, r as u64 + 1);
            }
            sync_threads();
            let region = dst.add(r as usize * len);
            let mut i = t as usize;
            while i < len {
                checked += 1;
                if region.add(i).read() != pattern(s, u, i) {
                    bad += 1;
                }
                i += threads as usize;
            }
        }
        out.add(2 * t as usize).write(checked);
        out.add(2 * t as usize + 1).write(bad);
    }

    /// Signals and signal waits with every comparison, one block of at least 6 threads.
    /// `sig` (sym) holds 7 words, `EQ NE GT GE LT LE SELF`, initialised by the host.
    /// Thread 0 records every word with `signal_fetch` in `out[0..7]` (host); after a
    /// `sync_all_block` it updates the right neighbour's words with `signal_op` (`EQ` Set 7,
    /// `NE` Set 9, `LT` Set 3, `LE` Set 4), adds `my_pe + 1` to `GT` and `GE` on every PE,
    /// and adds 5 twice to its own `SELF`. Thread `c < 6` waits on word `c` with
    /// `Cmp::ALL[c]` against `[7, 0, T - 1, T, 4, 4][c]` (`T = n(n+1)/2`) and stores what
    /// it saw in `out[7 + c]`; finally thread 0 records every word again in `out[13..20]`.
    pub fn signal_cmp(sig: *mut u64, out: *mut u64) {
        let (me, n, t) = (my_pe(), n_pes(), thread_rank());
        let right = (me + 1) % n;
        if t == 0 {
            for w in 0..7 {
                out.add(w).write(signal_fetch(sig.add(w)));
            }
        }
        sync_all_block();
        if t == 0 {
            signal_op(sig, 7, SignalOp::Set, right);
            signal_op(sig.add(1), 9, SignalOp::Set, right);
            for pe in 0..n {
                signal_op(sig.add(2), me as u64 + 1, SignalOp::Add, pe);
                signal_op(sig.add(3), me as u64 + 1, SignalOp::Add, pe);
            }
            signal_op(sig.add(4), 3, SignalOp::Set, right);
            signal_op(sig.add(5), 4, SignalOp::Set, right);
            signal_op(sig.add(6), 5, SignalOp::Add, me);
            signal_op(sig.add(6), 5, SignalOp::Add, me);
        }
        if t < 6 {
            let total = (n * (n + 1) / 2) as u64;
            let value = [7, 0, total - 1, total, 4, 4][t as usize];
            out.add(7 + t as usize).write(signal_wait_until(sig.add(t as usize), Cmp::ALL[t as usize], value));
        }
        sync_threads();
        if t == 0 {
            for w in 0..7 {
                out.add(13 + w).write(signal_fetch(sig.add(w)));
            }
        }
    }
}

/// The body of the `wait_cmp_*` kernels, for one of the four integer types.
#[inline(always)]
unsafe fn wait_cmp<T: DeviceInt>(ivar: *mut T, table: *const T, seen: *mut T, flags: *mut u32) {
    let (me, n, c) = (my_pe(), n_pes(), thread_rank() as usize);
    let right = (me + 1) % n;
    let row = table.add(4 * c);
    let (init, value, mid, fin) = (*row, *row.add(1), *row.add(2), *row.add(3));
    let cmp = Cmp::ALL[c];
    let word = ivar.add(c);
    atomic_set(word, init, me);
    sync_all_block();
    flags.add(3 * c).write(test(word, cmp, value) as u32);
    sync_all_block();
    atomic_set(word, mid, right);
    barrier_all_block();
    flags.add(3 * c + 1).write(test(word, cmp, value) as u32);
    sync_all_block();
    atomic_set(word, fin, right);
    seen.add(c).write(wait_until(word, cmp, value));
    flags.add(3 * c + 2).write(test(word, cmp, value) as u32);
}

kernel! {
    /// `wait_until` and `test` on u32, one block of 6 threads: thread `c` uses `Cmp::ALL[c]`
    /// with row `c` of `table` (host, 6 rows `init, value, mid, fin`). It sets its word of
    /// `ivar` (sym, 6 words) to `init`, records `test` in `flags[3c]` (host); after a
    /// barrier the left neighbour stores `mid` and thread `c` records `test` in
    /// `flags[3c + 1]`; then the left neighbour stores `fin`, and thread `c` waits with
    /// `wait_until`, stores the value seen in `seen[c]` (host) and `test` in `flags[3c + 2]`.
    pub fn wait_cmp_u32(ivar: *mut u32, table: *const u32, seen: *mut u32, flags: *mut u32) {
        wait_cmp(ivar, table, seen, flags);
    }

    /// As [`wait_cmp_u32`] on i32.
    pub fn wait_cmp_i32(ivar: *mut i32, table: *const i32, seen: *mut i32, flags: *mut u32) {
        wait_cmp(ivar, table, seen, flags);
    }

    /// As [`wait_cmp_u32`] on u64.
    pub fn wait_cmp_u64(ivar: *mut u64, table: *const u64, seen: *mut u64, flags: *mut u32) {
        wait_cmp(ivar, table, seen, flags);
    }

    /// As [`wait_cmp_u32`] on i64.
    pub fn wait_cmp_i64(ivar: *mut i64, table: *const i64, seen: *mut i64, flags: *mut u32) {
        wait_cmp(ivar, table, seen, flags);
    }
}

kernel! {
    /// One thread per PE, for each round `r` of `rounds`: puts `len` u64s of
    /// `pattern(me, r, i)` with a put_signal (Set `r`) into region `me` of every other
    /// PE's `data` (sym, `n_pes * len`) and signal `sigs[me]` (sym, `n_pes`), the peers in
    /// an order that differs by PE and round; then takes the other PEs' regions in the
    /// order they arrive with `wait_until_any` (marking each in `status`, sym, `n_pes`
    /// i32s), checking each region as it comes. After the round: `test_all`,
    /// `wait_until_all_vector` with `r` for each signal, `wait_until_some` (every signal
    /// at once, into `indices`, sym, `n_pes`), `test_any`/`test_some` with every element
    /// excluded, and `test_any_vector` with a value no signal reaches. Each PE then waits
    /// for every other PE's acknowledgement (`acks`, sym, `n_pes`: an atomic add of 1 per
    /// round) before the next round. `out` (sym, 3): regions checked, mismatches (bad
    /// elements, wrong results of the waits and tests), regions that came out of PE
    /// order. At most 64 PEs.
    pub fn wait_many(data: *mut u64, len: usize, sigs: *mut u64, acks: *mut u64, status: *mut i32, indices: *mut usize, rounds: u32, out: *mut u64) {
        let (me, n) = (my_pe(), n_pes());
        let (mut checked, mut bad, mut out_of_order) = (0u64, 0u64, 0u64);
        let mut values = [0u64; 64];
        for r in 1..=rounds {
            for k in 0..n.saturating_sub(1) {
                // Every other PE once, starting at one that depends on the PE and round.
                let to = (me + 1 + (k + r + me) % (n - 1)) % n;
                let region = data.add(me as usize * len);
                for i in 0..len {
                    p(region.add(i), pattern(me, r, i), to);
                }
                fence();
                signal_op(sigs.add(me as usize), r as u64, SignalOp::Set, to);
            }
            for i in 0..n as usize {
                status.add(i).write((i == me as usize) as i32);
            }
            let mut last = 0usize;
            let mut first = true;
            while let Some(src_pe) = wait_until_any(sigs, n as usize, status, Cmp::Ge, r as u64) {
                status.add(src_pe).write(1);
                checked += 1;
                if !first && src_pe < last {
                    out_of_order += 1;
                }
                first = false;
                last = src_pe;
                let region = data.add(src_pe * len);
                bad += (0..len).filter(|&i| region.add(i).read() != pattern(src_pe as u32, r, i)).count() as u64;
            }
            // My own slot never gets a signal: exclude it from the tests below.
            for i in 0..n as usize {
                status.add(i).write((i == me as usize) as i32);
                values[i % 64] = r as u64;
            }
            bad += !test_all(sigs, n as usize, status, Cmp::Ge, r as u64) as u64;
            wait_until_all_vector(sigs, n as usize, status, Cmp::Eq, values.as_ptr());
            let some = wait_until_some(sigs, n as usize, indices, status, Cmp::Ge, r as u64);
            bad += (some != n as usize - 1) as u64;
            bad += (0..some).filter(|&k| indices.add(k).read() == me as usize).count() as u64;
            for i in 0..n as usize {
                status.add(i).write(1);
            }
            bad += test_any(sigs, n as usize, status, Cmp::Ge, 0u64).is_some() as u64;
            bad += (test_some(sigs, n as usize, indices, status, Cmp::Ge, 0u64) != 0) as u64;
            bad += wait_until_any(sigs, n as usize, status, Cmp::Ge, 0u64).is_some() as u64;
            values[0] = u64::MAX;
            bad += test_any_vector(sigs, 1, core::ptr::null(), Cmp::Eq, values.as_ptr()).is_some() as u64;
            // Release: the acknowledgement also orders this round's reads of the regions
            // before the peers overwrite them.
            for k in 1..n {
                ordered(AmoOrder::Release, || atomic_add(acks.add(me as usize), 1u64, (me + k) % n));
            }
            for i in (0..n as usize).filter(|&i| i != me as usize) {
                wait_until(acks.add(i), Cmp::Ge, r as u64);
            }
        }
        out.write(checked);
        out.add(1).write(bad);
        out.add(2).write(out_of_order);
    }
}
