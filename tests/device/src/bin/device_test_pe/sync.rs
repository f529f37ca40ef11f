//! `fence`, `quiet`, `quiet_block` and the device barriers (thread, warp and block forms),
//! repeated many times.

use symmem::Runtime;
use symmem_test_kernels::sync as k;
use symmem_test_kernels::{pattern, PTX};

use super::{check_eq, e2s, ensure, read_all, sym, sym_from, Outcome};

/// One producer/consumer ring run over `rounds` rounds of `len` u64s. `launch(data, src,
/// flags)` runs the kernel (all three are symmetric addresses) and returns its counts:
/// wrong values seen (data or flags) and elements checked. Checks those, then the last
/// round's data and the final flag and acknowledgement.
fn flag_ring(
    rt: &Runtime,
    name: &str,
    len: usize,
    rounds: u32,
    launch: &dyn Fn(*mut u64, *const u64, *mut u64) -> Result<(u64, u64), String>,
) -> Outcome {
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let left = (me + n - 1) % n;
    let data = rt.calloc::<u64>(len).map_err(e2s)?;
    let flags = rt.calloc::<u64>(2).map_err(e2s)?;
    let rounds_data: Vec<u64> = (1..=rounds)
        .flat_map(|r| (0..len).map(move |i| pattern(me, r, i)))
        .collect();
    let src = sym_from(rt, &rounds_data)?;
    let (d, s, f) = (
        sym(rt, &data)?,
        sym(rt, &src)?.cast_const(),
        sym(rt, &flags)?,
    );
    let (bad, checked) = launch(d, s, f)?;
    ensure(bad == 0 && checked == rounds as u64 * len as u64, || {
        format!(
            "{name}: {bad} wrong values in {checked} checked (want {})",
            rounds as usize * len
        )
    })?;
    rt.barrier_all().map_err(e2s)?;
    let want: Vec<u64> = (0..len).map(|i| pattern(left, rounds, i)).collect();
    check_eq(
        &format!("{name}: last round's data"),
        &read_all(rt, &data)?,
        &want,
    )?;
    check_eq(
        &format!("{name}: flag and acknowledgement"),
        &read_all(rt, &flags)?,
        &[rounds as u64; 2],
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(data).map_err(e2s)?;
    rt.free(flags).map_err(e2s)?;
    rt.free(src).map_err(e2s)
}

/// Data, then `fence` (or `quiet`, or `quiet_block`), then a flag: the consumer waits for
/// the flag and must see every element of the round, over hundreds of rounds around the
/// ring, each acknowledged before the next overwrites the data.
pub fn fence_quiet(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    for (name, mode, len, rounds) in [
        ("p + fence + p", 0u32, 64usize, 300u32),
        ("put_nbi + quiet + p", 1, 256, 300),
    ] {
        flag_ring(rt, name, len, rounds, &|d, s, f| {
            let out = sym_from(rt, &[u64::MAX; 3])?;
            let o = sym(rt, &out)?;
            // SAFETY: `d`, `s`, `f` and `o` are symmetric addresses of `len`,
            // `rounds * len`, 2 and 3 u64s.
            unsafe {
                rt.launch(
                    &m,
                    k::fence_flag::KERNEL,
                    1,
                    1,
                    (d, s, len, f, rounds, mode, o),
                )
            }
            .map_err(e2s)?;
            let got = read_all(rt, &out)?;
            rt.free(out).map_err(e2s)?;
            Ok((got[0] + got[1], got[2]))
        })?;
    }
    let threads = 64;
    flag_ring(
        rt,
        "put_nbi by a block + quiet_block + p",
        1000,
        100,
        &|d, s, f| {
            let out = sym_from(rt, &vec![u64::MAX; 2 * threads])?;
            let o = sym(rt, &out)?;
            // SAFETY: as above; `o` holds 2 u64s per thread, each written by its thread.
            unsafe {
                rt.launch(
                    &m,
                    k::quiet_block_flag::KERNEL,
                    1,
                    threads as u32,
                    (d, s, 1000, f, 100, o),
                )
            }
            .map_err(e2s)?;
            let got = read_all(rt, &out)?;
            rt.free(out).map_err(e2s)?;
            Ok((
                got.iter().step_by(2).sum(),
                got.iter().skip(1).step_by(2).sum(),
            ))
        },
    )
}

/// `barrier_all`/`sync_all` by one thread per PE (300 iterations, twice, the values
/// continuing across launches and a host barrier) and `barrier_all_block` /
/// `sync_all_block` / `quiet_block` by a 32-thread block (100 iterations, twice): no
/// thread ever sees a value of an earlier iteration.
pub fn barriers(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let n = rt.n_pes();
    let slots = rt.calloc::<u64>(n).map_err(e2s)?;
    let bad = rt.calloc::<u64>(1).map_err(e2s)?;
    let (s, b) = (sym(rt, &slots)?, sym(rt, &bad)?);
    let iters = 300;
    for launch in 0..2u64 {
        rt.put(bad.at(0), &[u64::MAX], rt.my_pe()).map_err(e2s)?;
        let base = launch * iters as u64;
        // SAFETY: `s` and `b` are symmetric addresses of `n` u64s and one u64.
        unsafe { rt.launch(&m, k::barrier_rounds::KERNEL, 1, 1, (s, base, iters, b)) }
            .map_err(e2s)?;
        let stale = read_all(rt, &bad)?[0];
        ensure(stale == 0, || {
            format!("barrier_rounds launch {launch}: {stale} stale values")
        })?;
        rt.barrier_all().map_err(e2s)?;
        check_eq(
            "slots after barrier_rounds",
            &read_all(rt, &slots)?,
            &vec![base + iters as u64; n],
        )?;
        // Nobody starts the next launch's stores before every PE has checked.
        rt.barrier_all().map_err(e2s)?;
    }
    let threads = 32usize;
    let block_slots = rt.calloc::<u64>(n * threads).map_err(e2s)?;
    let block_bad = rt.calloc::<u64>(threads).map_err(e2s)?;
    let (s, b) = (sym(rt, &block_slots)?, sym(rt, &block_bad)?);
    let iters = 100;
    for launch in 0..2u64 {
        rt.put(block_bad.at(0), &vec![u64::MAX; threads], rt.my_pe())
            .map_err(e2s)?;
        let base = launch * iters as u64;
        // SAFETY: `s` and `b` are symmetric addresses of `n * threads` u64s and one u64
        // per thread, each written by its thread.
        unsafe {
            rt.launch(
                &m,
                k::barrier_rounds_block::KERNEL,
                1,
                threads as u32,
                (s, base, iters, b),
            )
        }
        .map_err(e2s)?;
        check_eq(
            &format!("barrier_rounds_block launch {launch}: stale values per thread"),
            &read_all(rt, &block_bad)?,
            &vec![0; threads],
        )?;
        rt.barrier_all().map_err(e2s)?;
        check_eq(
            "slots after barrier_rounds_block",
            &read_all(rt, &block_slots)?,
            &vec![base + iters as u64; n * threads],
        )?;
        rt.barrier_all().map_err(e2s)?;
    }
    rt.free(slots).map_err(e2s)?;
    rt.free(bad).map_err(e2s)?;
    rt.free(block_slots).map_err(e2s)?;
    rt.free(block_bad).map_err(e2s)?;
    barriers_warp(rt, &m)
}

/// `barrier_rounds_warp` in a 48-thread block (its first warp, full) and a 20-thread
/// block (a partial warp), twice each, as the thread and block forms above.
fn barriers_warp(rt: &Runtime, m: &symmem::Module) -> Outcome {
    let n = rt.n_pes();
    for (block, lanes) in [(48u32, 32usize), (20, 20)] {
        let slots = rt.calloc::<u64>(n * lanes).map_err(e2s)?;
        let bad = rt.calloc::<u64>(lanes).map_err(e2s)?;
        let (s, b) = (sym(rt, &slots)?, sym(rt, &bad)?);
        let iters = 100;
        for launch in 0..2u64 {
            rt.put(bad.at(0), &vec![u64::MAX; lanes], rt.my_pe())
                .map_err(e2s)?;
            let base = launch * iters as u64;
            // SAFETY: `s` and `b` are symmetric addresses of `n * lanes` u64s and one u64
            // per lane, each written by its lane.
            unsafe {
                rt.launch(
                    m,
                    k::barrier_rounds_warp::KERNEL,
                    1,
                    block,
                    (s, base, iters, b),
                )
            }
            .map_err(e2s)?;
            check_eq(
                &format!(
                    "barrier_rounds_warp ({block} threads) launch {launch}: stale values per lane"
                ),
                &read_all(rt, &bad)?,
                &vec![0; lanes],
            )?;
            rt.barrier_all().map_err(e2s)?;
            check_eq(
                "slots after barrier_rounds_warp",
                &read_all(rt, &slots)?,
                &vec![base + iters as u64; n * lanes],
            )?;
            rt.barrier_all().map_err(e2s)?;
        }
        rt.free(slots).map_err(e2s)?;
        rt.free(bad).map_err(e2s)?;
    }
    Ok(())
}

/// Deliberately wrong programs for the weak-ordering tests (tests/device/tests/
/// weak_ordering.rs): a put and then its flag (`p`, or a second `put`) with no fence, or
/// the flag's `signal_op` before the put, 30 rounds around the ring. Prints
/// `PE i: stale <mode> S of R` per mode (the rounds in which the consumer saw the flag
/// before the data); the test decides what is expected.
pub fn flag_without_fence(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let left = (me + n - 1) % n;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (len, rounds) = (64usize, 30u32);
    for mode in 0..4u32 {
        let data = rt.calloc::<u64>(len).map_err(e2s)?;
        let flags = rt.calloc::<u64>(2).map_err(e2s)?;
        let rounds_data: Vec<u64> = (1..=rounds)
            .flat_map(|r| (0..len).map(move |i| pattern(me, r, i)))
            .collect();
        let src = sym_from(rt, &rounds_data)?;
        let out = sym_from(rt, &[u64::MAX])?;
        let (d, s, f, o) = (
            sym(rt, &data)?,
            sym(rt, &src)?.cast_const(),
            sym(rt, &flags)?,
            sym(rt, &out)?,
        );
        // SAFETY: `d`, `s`, `f` and `o` are symmetric addresses of `len`, `rounds * len`,
        // 2 and 1 u64s.
        unsafe {
            rt.launch(
                &m,
                k::flag_without_fence::KERNEL,
                1,
                1,
                (d, s, len, f, rounds, mode, o),
            )
        }
        .map_err(e2s)?;
        let stale = read_all(rt, &out)?[0];
        println!("PE {me}: stale {mode} {stale} of {rounds}");
        rt.barrier_all().map_err(e2s)?;
        // After the barrier every round has landed, however late.
        let want: Vec<u64> = (0..len).map(|i| pattern(left, rounds, i)).collect();
        check_eq("last round's data", &read_all(rt, &data)?, &want)?;
        rt.barrier_all().map_err(e2s)?;
        for b in [data, flags, src, out] {
            rt.free(b).map_err(e2s)?;
        }
    }
    Ok(())
}

/// A `put_nbi` source changed before `quiet` (kernel `nbi_source_reused`): undetectable in
/// the default mode (prints `PE i: reuse undetected`); with `SYMMEM_ORDERING=weak` the
/// launch fails naming the op, the buffer and the PEs, printed as `ERROR (expected): …`.
/// Every PE then waits in `sync_all` for the others to have seen theirs, so that none
/// exits while a peer's kernel still runs (which that peer would report instead).
pub fn nbi_source_reused(rt: &Runtime) -> Outcome {
    let me = rt.my_pe();
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let len = 512usize;
    let data = rt.calloc::<u64>(len).map_err(e2s)?;
    let src = sym_from(rt, &(0..len as u64).collect::<Vec<_>>())?;
    let (d, s) = (sym(rt, &data)?, sym(rt, &src)?);
    // SAFETY: `d` and `s` are symmetric addresses of `len` u64s each.
    let launched = unsafe { rt.launch(&m, k::nbi_source_reused::KERNEL, 1, 1, (d, s, len)) };
    match launched {
        Ok(()) => println!("PE {me}: reuse undetected"),
        Err(e) => {
            println!("ERROR (expected): PE {me}: {e}");
            rt.sync_all().map_err(e2s)?;
            return Ok(());
        }
    }
    rt.barrier_all().map_err(e2s)?;
    rt.free(data).map_err(e2s)?;
    rt.free(src).map_err(e2s)
}

/// A `get_nbi` destination read before `quiet` (kernel `get_nbi_read_early`): prints
/// `PE i: early E late L`, the wrong elements read before and after the quiet; the test
/// decides what is expected.
pub fn get_nbi_read_early(rt: &Runtime) -> Outcome {
    let me = rt.my_pe();
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let len = 256usize;
    let dst = rt.calloc::<u64>(len).map_err(e2s)?;
    let data: Vec<u64> = (0..len).map(|i| pattern(me as u32, 0, i)).collect();
    let src = sym_from(rt, &data)?;
    let out = sym_from(rt, &[u64::MAX; 2])?;
    rt.barrier_all().map_err(e2s)?;
    let (d, s, o) = (sym(rt, &dst)?, sym(rt, &src)?.cast_const(), sym(rt, &out)?);
    // SAFETY: `d`, `s` and `o` are symmetric addresses of `len`, `len` and 2 u64s.
    unsafe { rt.launch(&m, k::get_nbi_read_early::KERNEL, 1, 1, (d, s, len, o)) }.map_err(e2s)?;
    let counts = read_all(rt, &out)?;
    println!("PE {me}: early {} late {}", counts[0], counts[1]);
    rt.barrier_all().map_err(e2s)?;
    for b in [dst, src, out] {
        rt.free(b).map_err(e2s)?;
    }
    Ok(())
}
