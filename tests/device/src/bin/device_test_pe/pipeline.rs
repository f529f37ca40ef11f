//! The device-side put-with-signal pipeline (see `symmem_test_kernels::pipeline`).

use symmem::{Runtime, SignalOp};
use symmem_test_kernels::pipeline::{self as k, chunk_signal};
use symmem_test_kernels::{pattern, PTX};

use super::{check_eq, e2s, ensure, read_all, sym, Outcome};

/// u64s per chunk (256 KiB).
const CHUNK: usize = 32 * 1024;
/// Chunks per run (12 MiB).
const CHUNKS: u32 = 48;
/// Slots the chunks cycle through on the consumer.
const NSLOTS: u32 = 4;
/// Threads of the producer and of the consumer block.
const THREADS: u32 = 64;

/// PEs pair up (0 with 1, 2 with 3, …). In each run one PE of every pair produces 48
/// chunks of 256 KiB with `put_signal_nbi_block` through 4 slots and the other consumes
/// them in a kernel that waits for each chunk's signal and checks and sums every element;
/// the host checks the sum exactly, and the final signal, credit and slot contents.
/// Runs with `SignalOp::Set` and `::Add`, each pair member producing once with each.
// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
pub fn pipeline(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    ensure(n % 2 == 0, || {
        format!("the pipeline pairs PEs up; {n} PEs cannot")
    })?;
    let partner = me ^ 1;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    // The producer's chunks and the consumer's counts: every PE allocates both
    // (allocation is collective) and uses the one of its role in each run.
    let src = rt.alloc::<u64>(CHUNKS as usize * CHUNK).map_err(e2s)?;
    let out = rt.alloc::<u64>(2 * THREADS as usize).map_err(e2s)?;
    let (sp, outp) = (sym(rt, &src)?.cast_const(), sym(rt, &out)?);
    for (run, (op, even_produces)) in [
        (SignalOp::Set, true),
        (SignalOp::Add, true),
        (SignalOp::Set, false),
        (SignalOp::Add, false),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("run {run} ({op:?})");
        let slots = rt.calloc::<u64>(NSLOTS as usize * CHUNK).map_err(e2s)?;
        let sig = rt.calloc::<u64>(NSLOTS as usize).map_err(e2s)?;
        let credit = rt.calloc::<u64>(1).map_err(e2s)?;
        let (sl, sg, cr) = (sym(rt, &slots)?, sym(rt, &sig)?, sym(rt, &credit)?);
        let producing = (me % 2 == 0) == even_produces;
        if producing {
            let data: Vec<u64> = (0..CHUNKS)
                .flat_map(|c| (0..CHUNK).map(move |i| pattern(me, c, i)))
                .collect();
            rt.put(src.at(0), &data, rt.my_pe()).map_err(e2s)?;
            // SAFETY: `sl`, `sp`, `sg` and `cr` are symmetric addresses of
            // `NSLOTS * CHUNK`, `CHUNKS * CHUNK`, `NSLOTS` and 1 u64s.
            unsafe {
                rt.launch(
                    &m,
                    k::pipe_produce::KERNEL,
                    1,
                    THREADS,
                    (sl, sp, CHUNK, CHUNKS, NSLOTS, sg, cr, op, partner),
                )
            }
            .map_err(|e| format!("{name}: producer: {e}"))?;
        } else {
            rt.put(out.at(0), &[u64::MAX; 2 * THREADS as usize], rt.my_pe())
                .map_err(e2s)?;
            // SAFETY: as above; `outp` is a symmetric address of two u64s per thread,
            // each written by its thread.
            unsafe {
                rt.launch(
                    &m,
                    k::pipe_consume::KERNEL,
                    1,
                    THREADS,
                    (sl, CHUNK, CHUNKS, NSLOTS, sg, cr, op, partner, outp),
                )
            }
            .map_err(|e| format!("{name}: consumer: {e}"))?;
            let out = read_all(rt, &out)?;
            let bad: u64 = out.iter().skip(1).step_by(2).sum();
            let sum = out.iter().step_by(2).fold(0u64, |a, &s| a.wrapping_add(s));
            let want_sum = (0..CHUNKS)
                .flat_map(|c| (0..CHUNK).map(move |i| pattern(partner, c, i)))
                .fold(0u64, u64::wrapping_add);
            ensure(bad == 0 && sum == want_sum, || {
                format!("{name}: the consumer saw {bad} wrong elements; sum {sum:#x}, want {want_sum:#x}")
            })?;
        }
        rt.barrier_all().map_err(e2s)?;
        if producing {
            check_eq(
                &format!("{name}: credits"),
                &read_all(rt, &credit)?,
                &[CHUNKS as u64],
            )?;
        } else {
            // The last chunk to pass through each slot, its signal, and its contents.
            let last: Vec<u32> = (0..NSLOTS)
                .map(|s| (0..CHUNKS).filter(|c| c % NSLOTS == s).max().unwrap_or(0))
                .collect();
            let want_sig: Vec<u64> = last.iter().map(|&c| chunk_signal(op, c, NSLOTS)).collect();
            check_eq(&format!("{name}: signals"), &read_all(rt, &sig)?, &want_sig)?;
            let want: Vec<u64> = last
                .iter()
                .flat_map(|&c| (0..CHUNK).map(move |i| pattern(partner, c, i)))
                .collect();
            check_eq(
                &format!("{name}: slot contents"),
                &read_all(rt, &slots)?,
                &want,
            )?;
        }
        rt.barrier_all().map_err(e2s)?;
        rt.free(slots).map_err(e2s)?;
        rt.free(sig).map_err(e2s)?;
        rt.free(credit).map_err(e2s)?;
    }
    rt.free(src).map_err(e2s)?;
    rt.free(out).map_err(e2s)
}
