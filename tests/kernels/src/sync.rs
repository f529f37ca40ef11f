//! Ordering and synchronization from kernels: `fence`, `quiet`, `quiet_block`,
//! `barrier_all`, `sync_all` and their `_block` forms, repeated many times with values
//! that prove each one orders memory.

use symmem_device::*;

use crate::pattern;

/// Index of the data flag in the `flags` argument: written by the left neighbour.
const FLAG: usize = 0;
/// Index of the acknowledgement: written by the right neighbour.
const ACK: usize = 1;

kernel! {
    /// One thread: a producer/consumer ring over `rounds` rounds. In round `r` the thread
    /// waits for the right neighbour's acknowledgement of round `r - 1`, writes `len`
    /// u64s of round `r` into the right neighbour's `data` (sym), orders them, and stores
    /// `r` in the neighbour's flag with `p` (`flags`, sym, 2 words: flag, ack). With
    /// `mode == 0` the data are `p` stores of `pattern(me, r, i)` ordered by `fence`; with
    /// `mode == 1` a `put_nbi` from round `r`'s part of `src` (host, `rounds * len`)
    /// completed by `quiet`. It then waits for its own flag to reach `r`, checks every
    /// element against `pattern(left, r, i)` and acknowledges. `out` (host): mismatched
    /// elements, flag values other than `r`, elements checked.
    pub fn fence_flag(data: *mut u64, src: *const u64, len: usize, flags: *mut u64, rounds: u32, mode: u32, out: *mut u64) {
        let (me, n) = (my_pe(), n_pes());
        let (left, right) = ((me + n - 1) % n, (me + 1) % n);
        let (mut bad, mut bad_flags, mut checked) = (0u64, 0u64, 0u64);
        for r in 1..=rounds {
            if r > 1 {
                wait_until(flags.add(ACK), Cmp::Ge, r as u64 - 1);
            }
            if mode == 0 {
                for i in 0..len {
                    p(data.add(i), pattern(me, r, i), right);
                }
                fence();
            } else {
                put_nbi(data, src.add((r as usize - 1) * len), len, right);
                quiet();
            }
            p(flags.add(FLAG), r as u64, right);
            if wait_until(flags.add(FLAG), Cmp::Ge, r as u64) != r as u64 {
                bad_flags += 1;
            }
            for i in 0..len {
                checked += 1;
                if data.add(i).read() != pattern(left, r, i) {
                    bad += 1;
                }
            }
            atomic_set(flags.add(ACK), r as u64, left);
        }
        out.write(bad);
        out.add(1).write(bad_flags);
        out.add(2).write(checked);
    }

    /// A deliberately wrong [`fence_flag`] for the weak-ordering tests: no fence between
    /// the data and the flag. In round `r` (of `rounds`) the thread waits for the right
    /// neighbour's acknowledgement of round `r - 1`, `put`s round `r`'s part of `src`
    /// (host, `rounds * len`) to the neighbour's `data` (sym, `len`), and sets the
    /// neighbour's flag (`flags`, sym, 2 words: flag, ack) to `r` with `p` (`mode == 0`)
    /// or with a second one-element `put` (`mode == 1`), or sets the flag with
    /// `signal_op` before the `put` (`mode == 2`: the signal before its data), or raises
    /// it to `r` with `atomic_fetch_add` of 1 (`mode == 3`: a relaxed AMO used as if it
    /// published the data). It then
    /// waits for its own flag to reach `r`, counts the round in `out[0]` (host) if any
    /// element is not yet `pattern(left, r, i)`, and acknowledges.
    pub fn flag_without_fence(data: *mut u64, src: *const u64, len: usize, flags: *mut u64, rounds: u32, mode: u32, out: *mut u64) {
        let (me, n) = (my_pe(), n_pes());
        let (left, right) = ((me + n - 1) % n, (me + 1) % n);
        let mut stale = 0u64;
        for r in 1..=rounds {
            if r > 1 {
                wait_until(flags.add(ACK), Cmp::Ge, r as u64 - 1);
            }
            let round = src.add((r as usize - 1) * len);
            let flag = r as u64;
            match mode {
                0 => {
                    put(data, round, len, right);
                    p(flags.add(FLAG), flag, right);
                }
                1 => {
                    put(data, round, len, right);
                    put(flags.add(FLAG), &flag, 1, right);
                }
                3 => {
                    put(data, round, len, right);
                    let _ = atomic_fetch_add(flags.add(FLAG), 1u64, right);
                }
                _ => {
                    signal_op(flags.add(FLAG), flag, SignalOp::Set, right);
                    put(data, round, len, right);
                }
            }
            wait_until(flags.add(FLAG), Cmp::Ge, r as u64);
            if (0..len).any(|i| data.add(i).read() != pattern(left, r, i)) {
                stale += 1;
            }
            atomic_set(flags.add(ACK), r as u64, left);
        }
        out.write(stale);
    }

    /// A deliberately wrong kernel for the weak-ordering tests: `put_nbi`s `len` u64s of
    /// `src` (sym) to the right neighbour's `data` (sym), waits with a blocking `g` from
    /// that neighbour until the request has been issued, then changes `src[0]` before the
    /// `quiet` that completes the put: a source reused too early.
    pub fn nbi_source_reused(data: *mut u64, src: *mut u64, len: usize) {
        let right = (my_pe() + 1) % n_pes();
        put_nbi(data, src.cast_const(), len, right);
        let _ = g(data.cast_const(), right);
        src.write(src.read().wrapping_add(1));
        quiet();
    }

    /// A deliberately wrong kernel for the weak-ordering tests: `get_nbi`s `len` u64s of
    /// the right neighbour's `src` (sym, `pattern(right, 0, i)`) into `dst` (sym), waits
    /// with a blocking `g` until the request has been issued, and counts the elements
    /// that are wrong when read before `quiet` (`out[0]`, host) and after it (`out[1]`).
    pub fn get_nbi_read_early(dst: *mut u64, src: *const u64, len: usize, out: *mut u64) {
        let right = (my_pe() + 1) % n_pes();
        get_nbi(dst, src, len, right);
        let _ = g(src, right);
        let wrong = |dst: *mut u64| (0..len).filter(|&i| dst.add(i).read() != pattern(right, 0, i)).count() as u64;
        out.write(wrong(dst));
        quiet();
        out.add(1).write(wrong(dst));
    }

    /// [`fence_flag`] with a whole block: in every round each thread `put_nbi`s its share
    /// of round `r`'s part of `src` (host) to the right neighbour's `data` (sym),
    /// `quiet_block` completes all of them, and thread 0 then sets the flag with `p`.
    /// After thread 0 has seen its own flag reach `r`, every thread checks its share.
    /// Thread `t` stores its mismatches (thread 0 adding flag values other than `r`) and
    /// elements checked in `out[2t]`, `out[2t + 1]` (host).
    pub fn quiet_block_flag(data: *mut u64, src: *const u64, len: usize, flags: *mut u64, rounds: u32, out: *mut u64) {
        let (me, n, t, threads) = (my_pe(), n_pes(), thread_rank() as usize, block_dim().volume() as usize);
        let (left, right) = ((me + n - 1) % n, (me + 1) % n);
        let (lo, hi) = (t * len / threads, (t + 1) * len / threads);
        let (mut bad, mut checked) = (0u64, 0u64);
        for r in 1..=rounds {
            if t == 0 && r > 1 {
                wait_until(flags.add(ACK), Cmp::Ge, r as u64 - 1);
            }
            sync_threads();
            put_nbi(data.add(lo), src.add((r as usize - 1) * len + lo), hi - lo, right);
            quiet_block();
            if t == 0 {
                p(flags.add(FLAG), r as u64, right);
                if wait_until(flags.add(FLAG), Cmp::Ge, r as u64) != r as u64 {
                    bad += 1;
                }
            }
            sync_threads();
            for i in lo..hi {
                checked += 1;
                if data.add(i).read() != pattern(left, r, i) {
                    bad += 1;
                }
            }
            sync_threads();
            if t == 0 {
                atomic_set(flags.add(ACK), r as u64, left);
            }
        }
        out.add(2 * t).write(bad);
        out.add(2 * t + 1).write(checked);
    }

    /// One thread per PE, `iters` iterations with values `base + 1 ..= base + iters`: store
    /// the value into element `my_pe` of `slots` (sym, `n_pes` u64s) on every PE with `p`,
    /// synchronize, check that every element of this PE's `slots` holds the value, and
    /// synchronize again before the next iteration's stores. Odd values use `barrier_all`
    /// then `sync_all`, even ones `quiet` + `sync_all` then `barrier_all`. `out[0]` (host):
    /// stale elements seen.
    pub fn barrier_rounds(slots: *mut u64, base: u64, iters: u32, out: *mut u64) {
        let (me, n) = (my_pe(), n_pes());
        let mut bad = 0u64;
        for k in 1..=iters as u64 {
            let value = base + k;
            for pe in 0..n {
                p(slots.add(me as usize), value, pe);
            }
            if value % 2 == 1 {
                barrier_all();
            } else {
                quiet();
                sync_all();
            }
            for s in 0..n {
                if g(slots.add(s as usize), me) != value {
                    bad += 1;
                }
            }
            if value % 2 == 1 {
                sync_all();
            } else {
                barrier_all();
            }
        }
        out.write(bad);
    }

    /// [`barrier_rounds`] by one block per PE: thread `t` stores into element
    /// `my_pe * B + t` of `slots` (sym, `n_pes * B` u64s) on every PE and checks elements
    /// `s * B + t` for every `s`; odd values use `barrier_all_block` then
    /// `sync_all_block`, even ones `quiet_block` + `sync_all_block` then
    /// `barrier_all_block`. `out[t]` (host): stale elements thread `t` saw.
    pub fn barrier_rounds_block(slots: *mut u64, base: u64, iters: u32, out: *mut u64) {
        let (me, n, t, threads) = (my_pe(), n_pes(), thread_rank() as usize, block_dim().volume() as usize);
        let mut bad = 0u64;
        for k in 1..=iters as u64 {
            let value = base + k;
            for pe in 0..n {
                p(slots.add(me as usize * threads + t), value, pe);
            }
            if value % 2 == 1 {
                barrier_all_block();
            } else {
                quiet_block();
                sync_all_block();
            }
            for s in 0..n as usize {
                if g(slots.add(s * threads + t), me) != value {
                    bad += 1;
                }
            }
            if value % 2 == 1 {
                sync_all_block();
            } else {
                barrier_all_block();
            }
        }
        out.add(t).write(bad);
    }

    /// [`barrier_rounds_block`] by one warp per PE (the block's first warp, which may be
    /// partial; the other lanes return): lane `t` stores into element `my_pe * W + t` of
    /// `slots` (sym, `n_pes * W` u64s, `W` the warp's width) on every PE and checks
    /// elements `s * W + t`; odd values use `barrier_all_warp` then `sync_all_warp`, even
    /// ones `quiet` (every lane) + `sync_all_warp` then `barrier_all_warp`. `out[t]`
    /// (sym): stale elements lane `t` saw.
    pub fn barrier_rounds_warp(slots: *mut u64, base: u64, iters: u32, out: *mut u64) {
        if warp_id() != 0 {
            return;
        }
        let (me, n, t, lanes) = (my_pe(), n_pes(), lane_id() as usize, warp_width() as usize);
        let mut bad = 0u64;
        for k in 1..=iters as u64 {
            let value = base + k;
            for pe in 0..n {
                p(slots.add(me as usize * lanes + t), value, pe);
            }
            if value % 2 == 1 {
                barrier_all_warp();
            } else {
                quiet();
                sync_all_warp();
            }
            for s in 0..n as usize {
                if g(slots.add(s * lanes + t), me) != value {
                    bad += 1;
                }
            }
            if value % 2 == 1 {
                sync_all_warp();
            } else {
                barrier_all_warp();
            }
        }
        out.add(t).write(bad);
    }
}
