//! The run functions of the device-initiated rows (kernels of `benches/kernels`, on the
//! GPU or the CPU executor), the stream-ordered row and the GPU copy baseline. Each
//! kernel loops over its operation; the host times the whole launch.

use std::time::{Duration, Instant};

use symmem::{Cmp, SignalOp, SymBuf};
use symmem_bench_kernels as kernels;

use crate::ctx::{block_elems, words, words_mut, Ctx, Role};
use crate::initiator::{Initiator, GRID_BLOCKS};
use crate::sizes::{ELEM, ROTATION_WINDOW};

/// The initiator a device benchmark's const parameter names.
fn device_initiator(code: u8) -> Initiator {
    [Initiator::Thread, Initiator::Warp, Initiator::Block]
        .into_iter()
        .find(|i| *i as u8 == code)
        .expect("device benchmarks name a device initiator")
}

/// A symmetric address of this PE's copy of `buf`, for kernel arguments.
fn sym(c: &Ctx, buf: &SymBuf<u64>) -> symmem::Result<*mut u64> {
    let p = c.rt.ptr(buf, c.rt.my_pe())?;
    Ok(p.expect("a PE's own heap is always mapped").as_ptr())
}

/// Times one launch of `kernel` from the benchmark module with the initiator's block size
/// on this PE (a GPU launch on a GPU PE, the CPU executor otherwise).
fn time_launch<A: symmem::device::KernelArgs>(
    c: &Ctx,
    initiator: Initiator,
    kernel: symmem::device::Kernel<A>,
    args: A,
) -> symmem::Result<Duration> {
    let (threads, _) = initiator.launch();
    let blocks = if initiator == Initiator::Grid {
        GRID_BLOCKS
    } else {
        1
    };
    let t0 = Instant::now();
    // SAFETY: the kernels get symmetric addresses of live allocations of `c` and (on CPU
    // PEs) local buffers of `c` that outlive the launch, with sizes within them.
    unsafe { c.rt.launch(&c.module, kernel, blocks, threads, args)? };
    Ok(t0.elapsed())
}

/// The source of device transfers: host memory on a CPU PE (as the host rows use), the
/// symmetric copy on a GPU PE (device code cannot read host memory there).
fn device_src(c: &Ctx, size: usize) -> symmem::Result<*const u64> {
    Ok(if c.rt.is_gpu() {
        sym(c, &c.gsrc)?.cast_const()
    } else {
        words(&c.src, size).as_ptr()
    })
}

/// A kernel on PE 0 puts `size` bytes and quiets, `iters` times.
pub fn device_put<const I: u8>(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let initiator = device_initiator(I);
    let (_, scope) = initiator.launch();
    let (dst, src, peer) = (sym(c, &c.big)?, device_src(c, size)?, c.peer() as u32);
    time_launch(
        c,
        initiator,
        kernels::bench_put::KERNEL,
        (dst, src, size / ELEM, iters, peer, scope),
    )
}

/// A grid on PE 0 puts `size` bytes, `iters` times back to back.
pub fn device_put_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (dst, src, peer) = (sym(c, &c.big)?, device_src(c, size)?, c.peer() as u32);
    let n = size / ELEM;
    time_launch(
        c,
        Initiator::Grid,
        kernels::bench_put_bw::KERNEL,
        (dst, src, n, iters, peer, n),
    )
}

/// [`device_put_bw`] through [`ROTATION_WINDOW`] bytes: iteration `i` puts the `i`-th
/// `size` bytes of the window, so the copies stream from and to HBM, not the L2 cache.
pub fn device_put_bw_rotating(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let w = c.window()?;
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (dst, src, peer) = (
        sym(c, &w.dst)?,
        sym(c, &w.src)?.cast_const(),
        c.peer() as u32,
    );
    time_launch(
        c,
        Initiator::Grid,
        kernels::bench_put_bw::KERNEL,
        (dst, src, size / ELEM, iters, peer, ROTATION_WINDOW / ELEM),
    )
}

/// A kernel on PE 0 gets `size` bytes, `iters` times.
pub fn device_get<const I: u8>(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let initiator = device_initiator(I);
    let (_, scope) = initiator.launch();
    let mut scratch = c.scratch.borrow_mut();
    let dst = if c.rt.is_gpu() {
        sym(c, &c.gsrc)?
    } else {
        words_mut(&mut scratch, size).as_mut_ptr()
    };
    let (src, peer) = (sym(c, &c.big)?.cast_const(), c.peer() as u32);
    time_launch(
        c,
        initiator,
        kernels::bench_get::KERNEL,
        (dst, src, size / ELEM, iters, peer, scope),
    )
}

/// A kernel thread on PE 0 fetch-adds to one u64 of PE 1, `iters` times.
pub fn device_fetch_add(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (word, peer) = (sym(c, &c.word)?, c.peer() as u32);
    time_launch(
        c,
        Initiator::Thread,
        kernels::bench_fetch_add::KERNEL,
        (word, iters, peer),
    )
}

/// Every PE's kernel runs `iters` block-scope team barriers on TEAM_WORLD.
pub fn device_team_barrier(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_barrier::KERNEL,
        (team, iters, kernels::BLOCK),
    )
}

/// Every PE's kernel runs `iters` block-scope sum reductions of `size` bytes of `gsrc`
/// into `big` on TEAM_WORLD.
pub fn device_team_reduce(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?.cast_const());
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_reduce::KERNEL,
        (team, dst, src, size / ELEM, iters, kernels::BLOCK),
    )
}

/// Every PE's kernel runs `iters` block-scope alltoalls of `size` bytes in all from
/// `gsrc` into `big` on TEAM_WORLD.
pub fn device_team_alltoall(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?.cast_const());
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_alltoall::KERNEL,
        (team, dst, src, block_elems(c, size), iters, kernels::BLOCK),
    )
}

/// Every PE's kernel runs `iters` block-scope fcollects of `size` bytes in all from
/// `gsrc` into `big` on TEAM_WORLD.
pub fn device_team_fcollect(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?.cast_const());
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_fcollect::KERNEL,
        (team, dst, src, block_elems(c, size), iters, kernels::BLOCK),
    )
}

/// Kernels on PE 0 and PE 1 ping-pong `size` bytes with a signal, `iters` round trips.
pub fn device_pingpong<const I: u8>(
    c: &Ctx,
    size: usize,
    iters: usize,
) -> symmem::Result<Duration> {
    c.reset_signal()?;
    if c.role() == Role::Idle {
        return Ok(Duration::ZERO);
    }
    let initiator = device_initiator(I);
    let (_, scope) = initiator.launch();
    let (dst, sig) = (sym(c, &c.big)?, sym(c, &c.sig)?);
    let (src, peer) = (device_src(c, size)?, c.peer() as u32);
    let first = u32::from(c.role() == Role::Initiator);
    let elapsed = time_launch(
        c,
        initiator,
        kernels::bench_pingpong::KERNEL,
        (dst, src, size / ELEM, sig, iters, peer, scope, first),
    )?;
    Ok(if c.role() == Role::Initiator {
        elapsed
    } else {
        Duration::ZERO
    })
}

/// PE 0 and PE 1 ping-pong `size` bytes with stream-ordered put_signal and signal waits:
/// the host queues every operation, then synchronizes the stream once.
pub fn stream_pingpong(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let rt = c.rt;
    c.reset_signal()?;
    if c.role() == Role::Idle {
        return Ok(Duration::ZERO);
    }
    let n = size / ELEM;
    let t0 = Instant::now();
    for i in 0..iters {
        let seq = i as u64 + 1;
        let send = || {
            rt.put_signal_on_stream(
                c.big.at(0),
                c.gsrc.at(0),
                n,
                c.sig.at(0),
                seq,
                SignalOp::Set,
                c.peer(),
                &c.stream,
            )
        };
        let wait = || rt.signal_wait_until_on_stream(c.sig.at(0), Cmp::Ge, seq, &c.stream);
        if c.role() == Role::Initiator {
            send()?;
            wait()?;
        } else {
            wait()?;
            send()?;
        }
    }
    c.stream.synchronize()?;
    Ok(if c.role() == Role::Initiator {
        t0.elapsed()
    } else {
        Duration::ZERO
    })
}

/// PE 0 copies `size` bytes between two buffers of its GPU with `cuMemcpyDtoD`.
pub fn dtod_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?);
    dtod_copies(dst, src, size, size, iters)
}

/// [`dtod_bw`] through [`ROTATION_WINDOW`] bytes, as [`device_put_bw_rotating`] moves.
pub fn dtod_bw_rotating(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let w = c.window()?;
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (dst, src) = (sym(c, &w.dst)?, sym(c, &w.src)?);
    dtod_copies(dst, src, size, ROTATION_WINDOW, iters)
}

/// `iters` copies of `size` bytes from `src` to `dst` with `cuMemcpyDtoDAsync`, copy `i`
/// at offset `i × size` modulo `window` (a multiple of `size`), then one synchronization.
fn dtod_copies(
    dst: *mut u64,
    src: *mut u64,
    size: usize,
    window: usize,
    iters: usize,
) -> symmem::Result<Duration> {
    let slots = (window / size).max(1);
    let t0 = Instant::now();
    for i in 0..iters {
        let at = ((i % slots) * size) as u64;
        // SAFETY: two device buffers of this PE's context of at least `window` bytes
        // each; `at + size <= window`.
        let rc = unsafe {
            cudarc::driver::sys::cuMemcpyDtoDAsync_v2(
                dst as u64 + at,
                src as u64 + at,
                size,
                std::ptr::null_mut(),
            )
        };
        if rc != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return Err(symmem::Error::InvalidArgument {
                op: "dtod_bw",
                reason: format!("cuMemcpyDtoDAsync failed: {rc:?}"),
            });
        }
    }
    // SAFETY: the default stream of the current context (the runtime bound it).
    let rc = unsafe { cudarc::driver::sys::cuStreamSynchronize(std::ptr::null_mut()) };
    if rc != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        return Err(symmem::Error::InvalidArgument {
            op: "dtod_bw",
            reason: format!("cuStreamSynchronize failed: {rc:?}"),
        });
    }
    Ok(t0.elapsed())
}

/// The initiator's kernel thread runs `p` + quiet (`OP` = [`kernels::PG_P`]) or `g`
/// ([`kernels::PG_G`]) of one u64 of the target, `iters` times.
pub fn device_pg<const OP: u32>(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (word, peer) = (sym(c, &c.word)?, c.peer() as u32);
    time_launch(
        c,
        Initiator::Thread,
        kernels::bench_pg::KERNEL,
        (word, iters, peer, OP),
    )
}

/// The initiator's kernel thread issues `put_nbi`s of `size` bytes, each followed by
/// what `THEN` names (a `kernels::THEN_*` code), `iters` times.
pub fn device_put_nbi<const THEN: u32>(
    c: &Ctx,
    size: usize,
    iters: usize,
) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (dst, src, peer) = (sym(c, &c.big)?, device_src(c, size)?, c.peer() as u32);
    time_launch(
        c,
        Initiator::Thread,
        kernels::bench_put_nbi::KERNEL,
        (dst, src, size / ELEM, iters, peer, THEN),
    )
}

/// The initiator's kernel thread runs the atomic `KIND` (a `kernels::AMO_*` code) on one
/// u64 of the target, `iters` times.
pub fn device_amo<const KIND: u32>(
    c: &Ctx,
    _size: usize,
    iters: usize,
) -> symmem::Result<Duration> {
    if c.role() != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (word, peer) = (sym(c, &c.word)?, c.peer() as u32);
    time_launch(
        c,
        Initiator::Thread,
        kernels::bench_amo::KERNEL,
        (word, iters, peer, KIND),
    )
}

/// A kernel on the initiator (and with `--bidir` on the target too, towards the
/// initiator) issues `iters` back-to-back `put_nbi`s (`GET` = 0) or `get_nbi`s (`GET` =
/// 1) of `size` bytes at the initiator's scope, then one quiet.
pub fn device_rma_bw<const I: u8, const GET: u32>(
    c: &Ctx,
    size: usize,
    iters: usize,
) -> symmem::Result<Duration> {
    if !c.sends() {
        return c.bw_done().map(|()| Duration::ZERO);
    }
    let initiator = device_initiator(I);
    let (_, scope) = initiator.launch();
    let mut scratch = c.scratch.borrow_mut();
    let (dst, src) = if GET == 0 {
        (sym(c, &c.big)?, device_src(c, size)?)
    } else if c.rt.is_gpu() {
        (sym(c, &c.gsrc)?, sym(c, &c.big)?.cast_const())
    } else {
        let local = words_mut(&mut scratch, size).as_mut_ptr();
        (local, sym(c, &c.big)?.cast_const())
    };
    let peer = c.peer() as u32;
    let t0 = Instant::now();
    time_launch(
        c,
        initiator,
        kernels::bench_rma_bw::KERNEL,
        (dst, src, size / ELEM, iters, peer, scope, GET),
    )?;
    c.bw_done()?;
    Ok(t0.elapsed())
}

/// Every PE's kernel runs `iters` block-scope broadcasts of `size` bytes of `gsrc` on
/// PE 0 into `big` on TEAM_WORLD.
pub fn device_team_broadcast(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?.cast_const());
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_broadcast::KERNEL,
        (team, dst, src, size / ELEM, iters, kernels::BLOCK),
    )
}

/// Kernel threads on the initiator and the target ping-pong `signal_op`s, `iters` round
/// trips.
pub fn device_signal_pingpong(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    c.reset_signal()?;
    if c.role() == Role::Idle {
        return Ok(Duration::ZERO);
    }
    let (sig, peer) = (sym(c, &c.sig)?, c.peer() as u32);
    let first = u32::from(c.role() == Role::Initiator);
    let elapsed = time_launch(
        c,
        Initiator::Thread,
        kernels::bench_signal_pingpong::KERNEL,
        (sig, iters, peer, first),
    )?;
    Ok(if c.role() == Role::Initiator {
        elapsed
    } else {
        Duration::ZERO
    })
}

/// Every PE's kernel runs `iters` block-scope `team_sync`s on TEAM_WORLD.
pub fn device_team_sync(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_sync::KERNEL,
        (team, iters, kernels::BLOCK),
    )
}

/// Every PE's kernel runs `iters` block-scope sum reduce-scatters of `size` bytes of
/// `gsrc` in all (each PE's block into `big`) on TEAM_WORLD.
pub fn device_team_reducescatter(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?.cast_const());
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_reducescatter::KERNEL,
        (team, dst, src, block_elems(c, size), iters, kernels::BLOCK),
    )
}

/// Every PE's kernel runs `iters` block-scope collects of `size` bytes in all from
/// `gsrc` into `big` on TEAM_WORLD.
pub fn device_team_collect(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?.cast_const());
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_collect::KERNEL,
        (team, dst, src, block_elems(c, size), iters, kernels::BLOCK),
    )
}
