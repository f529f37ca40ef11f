//! The run functions of the host-initiated rows: each runs `iters` iterations at `size`
//! bytes on every PE (collectively) and returns the time the initiator measured (zero on
//! the other PEs).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use symmem::{Cmp, SignalOp};
use symmem_bench_kernels as kernels;

use crate::ctx::{block_elems, bytes, bytes_mut, timed, words, words_mut, Ctx, Role};
use crate::initiator::Initiator;
use crate::sizes::ELEM;

/// The floor under `put_signal_pingpong`: the initiator and the target bounce a counter
/// through the same signal words with plain atomics on the mapped heaps, bypassing the
/// runtime. Busy-waits without a limit: if the peer dies, the launcher ends the job.
pub fn flag_pingpong(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    let rt = c.rt;
    c.reset_signal()?;
    if c.role() == Role::Idle {
        return Ok(Duration::ZERO);
    }
    let word = |pe: usize| -> symmem::Result<&AtomicU64> {
        let p = rt.ptr(&c.sig, pe)?.ok_or(symmem::Error::InvalidArgument {
            op: "flag_pingpong_latency",
            reason: format!("PE {pe}'s heap is not mapped (the baseline needs P2P)"),
        })?;
        // SAFETY: the pointer addresses the live, 8-byte aligned signal word of a mapped
        // heap that outlives `rt`'s borrow; every PE accesses it only atomically.
        Ok(unsafe { AtomicU64::from_ptr(p.as_ptr()) })
    };
    let (mine, theirs) = (word(rt.my_pe())?, word(c.peer())?);
    let wait = |seq: u64| {
        while mine.load(Ordering::Acquire) < seq {
            std::hint::spin_loop();
        }
    };
    match c.role() {
        Role::Initiator => timed(c, iters, |i| {
            let seq = i as u64 + 1;
            theirs.store(seq, Ordering::Release);
            wait(seq);
            Ok(())
        }),
        _ => {
            for i in 0..iters {
                let seq = i as u64 + 1;
                wait(seq);
                theirs.store(seq, Ordering::Release);
            }
            Ok(Duration::ZERO)
        }
    }
}

/// A ping-pong through the signal word: the initiator sends with `send(seq)` and waits
/// for the answer `>= seq`; the target waits, then answers with `send(seq)`.
fn pingpong(
    c: &Ctx,
    iters: usize,
    send: impl Fn(u64) -> symmem::Result<()>,
) -> symmem::Result<Duration> {
    let rt = c.rt;
    c.reset_signal()?;
    match c.role() {
        Role::Initiator => timed(c, iters, |i| {
            let seq = i as u64 + 1;
            send(seq)?;
            rt.signal_wait_until(c.sig.at(0), Cmp::Ge, seq)?;
            Ok(())
        }),
        Role::Target => {
            for i in 0..iters {
                let seq = i as u64 + 1;
                rt.signal_wait_until(c.sig.at(0), Cmp::Ge, seq)?;
                send(seq)?;
            }
            Ok(Duration::ZERO)
        }
        Role::Idle => Ok(Duration::ZERO),
    }
}

/// The initiator puts `size` bytes with a signal; the target waits for the signal and
/// answers alike.
pub fn put_signal_pingpong(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let (src, peer) = (words(&c.src, size), c.peer());
    pingpong(c, iters, |seq| {
        c.rt.put_signal(c.big.at(0), src, c.sig.at(0), seq, SignalOp::Set, peer)
    })
}

/// As [`put_signal_pingpong`] with `signal_op` alone (no data).
pub fn signal_pingpong(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    let peer = c.peer();
    pingpong(c, iters, |seq| {
        c.rt.signal_op(c.sig.at(0), seq, SignalOp::Set, peer)
    })
}

/// The initiator puts `size` bytes and quiets, one at a time.
pub fn put_latency(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (src, peer) = (words(&c.src, size), c.peer());
    timed(c, iters, |_| {
        c.rt.put(c.big.at(0), black_box(src), peer)?;
        c.rt.quiet()
    })
}

/// The initiator gets `size` bytes, one at a time.
pub fn get_latency(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let mut scratch = c.scratch.borrow_mut();
    let (dst, peer) = (words_mut(&mut scratch, size), c.peer());
    timed(c, iters, |_| {
        c.rt.get(c.big.at(0), dst, peer)?;
        black_box(&mut *dst);
        Ok(())
    })
}

/// The initiator stores one u64 with `p` and quiets.
pub fn p_latency(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let peer = c.peer();
    timed(c, iters, |i| {
        c.rt.p(c.word.at(0), i as u64, peer)?;
        c.rt.quiet()
    })
}

/// The initiator loads one u64 with `g`.
pub fn g_latency(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let peer = c.peer();
    timed(c, iters, |_| {
        black_box(c.rt.g(c.word.at(0), peer)?);
        Ok(())
    })
}

/// The initiator issues a `put_nbi` of `size` bytes, then what `THEN` names (one of
/// [`kernels::THEN_NOTHING`], [`kernels::THEN_FENCE`], [`kernels::THEN_QUIET`]).
pub fn put_nbi_then<const THEN: u32>(
    c: &Ctx,
    size: usize,
    iters: usize,
) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (src, peer) = (words(&c.src, size), c.peer());
    let elapsed = timed(c, iters, |_| {
        c.rt.put_nbi(c.big.at(0), black_box(src), peer)?;
        match THEN {
            kernels::THEN_FENCE => c.rt.fence(),
            kernels::THEN_QUIET => c.rt.quiet(),
            _ => Ok(()),
        }
    })?;
    // Untimed: nothing stays outstanding into the next row.
    c.rt.quiet()?;
    Ok(elapsed)
}

/// The initiator runs the atomic `KIND` (a `kernels::AMO_*` code) on one u64 of the
/// target; non-fetching kinds are followed by a quiet, so that each is complete.
pub fn amo_latency<const KIND: u32>(
    c: &Ctx,
    _size: usize,
    iters: usize,
) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (rt, w, pe) = (c.rt, c.word.at(0), c.peer());
    timed(c, iters, |i| {
        let i = i as u64;
        let old = match KIND {
            kernels::AMO_FETCH => rt.atomic_fetch(w, pe)?,
            kernels::AMO_SET => rt
                .atomic_set(w, i, pe)
                .and_then(|()| rt.quiet())
                .map(|()| 0)?,
            kernels::AMO_SWAP => rt.atomic_swap(w, i, pe)?,
            kernels::AMO_COMPARE_SWAP => rt.atomic_compare_swap(w, i, i + 1, pe)?,
            kernels::AMO_FETCH_ADD => rt.atomic_fetch_add(w, 1u64, pe)?,
            kernels::AMO_ADD => rt
                .atomic_add(w, 1u64, pe)
                .and_then(|()| rt.quiet())
                .map(|()| 0)?,
            kernels::AMO_FETCH_INC => rt.atomic_fetch_inc(w, pe)?,
            kernels::AMO_INC => rt.atomic_inc(w, pe).and_then(|()| rt.quiet()).map(|()| 0)?,
            kernels::AMO_FETCH_AND => rt.atomic_fetch_and(w, !0u64, pe)?,
            kernels::AMO_AND => rt
                .atomic_and(w, !0u64, pe)
                .and_then(|()| rt.quiet())
                .map(|()| 0)?,
            kernels::AMO_FETCH_OR => rt.atomic_fetch_or(w, 1u64, pe)?,
            kernels::AMO_OR => rt
                .atomic_or(w, 1u64, pe)
                .and_then(|()| rt.quiet())
                .map(|()| 0)?,
            kernels::AMO_FETCH_XOR => rt.atomic_fetch_xor(w, 1u64, pe)?,
            _ => rt
                .atomic_xor(w, 1u64, pe)
                .and_then(|()| rt.quiet())
                .map(|()| 0)?,
        };
        black_box(old);
        Ok(())
    })
}

/// The rows whose remote side `--misalign` moves (memcpy_bw's destination stands in for
/// it).
pub const MISALIGNED: &[(&str, Initiator)] = &[
    ("memcpy_bw", Initiator::Host),
    ("put_bw", Initiator::Host),
    ("get_bw", Initiator::Host),
];

/// The initiator copies `size` bytes between two private buffers: the bandwidth a put
/// could reach.
pub fn memcpy_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let src = bytes(&c.src, 0, size);
    let mut scratch = c.scratch.borrow_mut();
    let dst = bytes_mut(&mut scratch, c.misalign, size);
    // A bandwidth row: never sampled, so the bare loop (through `timed`, the loop's code
    // changed enough to move the 8-byte copy by 9%).
    let t0 = Instant::now();
    for _ in 0..iters {
        // black_box on both sides keeps the repeated identical copies from being merged.
        black_box(&mut *dst).copy_from_slice(black_box(src));
    }
    Ok(t0.elapsed())
}

/// The initiator (and with `--bidir` the target too) issues `iters` nonblocking puts of
/// `size` bytes, then one quiet.
pub fn put_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if !c.sends() {
        return c.bw_done().map(|()| Duration::ZERO);
    }
    let (src, peer) = (bytes(&c.src, 0, size), c.peer());
    let t0 = Instant::now();
    for _ in 0..iters {
        c.rt.put_nbi(c.big_bytes.at(0), black_box(src), peer)?;
    }
    c.rt.quiet()?;
    c.bw_done()?;
    Ok(t0.elapsed())
}

/// The initiator (and with `--bidir` the target too) issues `iters` nonblocking gets of
/// `size` bytes into a local buffer, then one quiet.
pub fn get_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if !c.sends() {
        return c.bw_done().map(|()| Duration::ZERO);
    }
    let mut scratch = c.scratch.borrow_mut();
    let (dst, peer) = (bytes_mut(&mut scratch, 0, size), c.peer());
    let t0 = Instant::now();
    for _ in 0..iters {
        c.rt.get_nbi(c.big_bytes.at(0), &mut *dst, peer)?;
    }
    c.rt.quiet()?;
    c.bw_done()?;
    black_box(dst);
    Ok(t0.elapsed())
}

/// Every PE runs `iters` barriers; the initiator's time is reported.
pub fn barrier_all_latency(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    timed(c, iters, |_| c.rt.barrier_all())
}

/// Every PE runs `iters` `sync_all`s; the initiator's time is reported.
pub fn sync_all_latency(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    timed(c, iters, |_| c.rt.sync_all())
}

/// Every PE runs `iters` alltoalls of `size` bytes from `gsrc` into `big`.
pub fn alltoall_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world();
    let nelems = block_elems(c, size);
    timed(c, iters, |_| team.alltoall(&c.big, &c.gsrc, nelems))
}

/// Every PE runs `iters` fcollects of `size` bytes in all from `gsrc` into `big`.
pub fn fcollect_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world();
    let nelems = block_elems(c, size);
    timed(c, iters, |_| team.fcollect(&c.big, &c.gsrc, nelems))
}

/// Every PE runs `iters` collects (every PE the same block) of `size` bytes in all from
/// `gsrc` into `big`.
pub fn collect_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world();
    let nelems = block_elems(c, size);
    timed(c, iters, |_| team.collect(&c.big, &c.gsrc, nelems))
}

/// Every PE runs `iters` broadcasts of `size` bytes from PE 0's `gsrc` into `big`.
pub fn broadcast_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world();
    let nelems = size / ELEM;
    timed(c, iters, |_| team.broadcast(&c.big, &c.gsrc, nelems, 0))
}

/// Every PE runs `iters` sum reductions of `size` bytes of `gsrc` into `big`.
pub fn reduce_latency(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world();
    let nelems = size / ELEM;
    timed(c, iters, |_| {
        team.reduce(&c.big, &c.gsrc, nelems, symmem::collectives::Sum)
    })
}

/// Every PE runs `iters` sum reduce-scatters: `size` bytes of `gsrc` in all, each PE
/// receiving its block in `big`.
pub fn reducescatter_latency(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world();
    let nelems = block_elems(c, size);
    timed(c, iters, |_| {
        team.reducescatter(&c.big, &c.gsrc, nelems, symmem::collectives::Sum)
    })
}
