//! Put-with-signal at every scope with both signal operations, signal operations and
//! waits with every comparison, and `wait_until`/`test` on every integer type.

use std::fmt::Debug;

use symmem::device::Kernel;
use symmem::{Cmp, Pod, Runtime, SignalOp};
use symmem_test_kernels::rma::put_target;
use symmem_test_kernels::signal as k;
use symmem_test_kernels::{pattern, PTX};

use super::{check_eq, e2s, ensure, read_all, sym, sym_from, Outcome};

/// Untouched u64s after the last region.
const GUARD: usize = 64;
/// Threads of the consumer block.
const CONSUMERS: usize = 64;

/// Every put-with-signal form: thread scope (64 threads, 64 u64s each), warp scope (2
/// blocks of 48 threads, 1003 u64s per warp) and block scope (3 blocks of 128 threads,
/// 5003 u64s per block), each with `Set` and `Add`, blocking and `_nbi`. A consumer kernel
/// on every target waits for the signals and checks every element; the host then checks
/// the whole buffer and the exact signal words.
pub fn put_signal(rt: &Runtime) -> Outcome {
    type Producer = Kernel<(*mut u64, *const u64, usize, *mut u64, SignalOp, u32)>;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let scopes: [(&str, u32, u32, u32, usize, Producer); 3] = [
        ("thread", 1, 64, 64, 64, k::ps_put_threads::KERNEL),
        ("warp", 2, 48, 4, 1003, k::ps_put_warps::KERNEL),
        ("block", 3, 128, 3, 5003, k::ps_put_blocks::KERNEL),
    ];
    for (scope, grid, block, units, len, producer) in scopes {
        for op in [SignalOp::Set, SignalOp::Add] {
            for nbi in [0, 1] {
                let name = format!("put_signal at {scope} scope, {op:?}, nbi = {nbi}");
                let regions = (n * units) as usize;
                let dst = rt.calloc::<u64>(regions * len + GUARD).map_err(e2s)?;
                let sig = rt.calloc::<u64>(regions + 1).map_err(e2s)?;
                let data: Vec<u64> = (0..units)
                    .flat_map(|u| (0..len).map(move |i| pattern(me, u, i)))
                    .collect();
                let src = sym_from(rt, &data)?;
                let out_buf = sym_from(rt, &[u64::MAX; 2 * CONSUMERS])?;
                let (d, s) = (sym(rt, &dst)?, sym(rt, &sig)?);
                let (srcp, outp) = (sym(rt, &src)?.cast_const(), sym(rt, &out_buf)?);
                // SAFETY: `d`, `s`, `srcp` and `outp` are symmetric addresses of
                // `regions * len + GUARD`, `regions + 1`, `units * len` and
                // `2 * CONSUMERS` u64s; each consumer thread writes its own two `outp`
                // entries.
                unsafe {
                    rt.launch(&m, producer, grid, block, (d, srcp, len, s, op, nbi))
                        .map_err(|e| format!("{name}: producer: {e}"))?;
                    rt.launch(
                        &m,
                        k::ps_consume::KERNEL,
                        1,
                        CONSUMERS as u32,
                        (d, len, units, s, op, outp),
                    )
                    .map_err(|e| format!("{name}: consumer: {e}"))?;
                }
                let out = read_all(rt, &out_buf)?;
                let checked: u64 = out.iter().step_by(2).sum();
                let bad: u64 = out.iter().skip(1).step_by(2).sum();
                ensure(checked == units as u64 * len as u64 && bad == 0, || {
                    format!(
                        "{name}: the consumer checked {checked} elements (want {}), {bad} wrong",
                        units as usize * len
                    )
                })?;
                let mut want = vec![0u64; dst.len()];
                let mut want_sig = vec![0u64; sig.len()];
                for r in 0..n * units {
                    let (src_pe, u) = (r / units, r % units);
                    if put_target(src_pe, u, n) != me {
                        continue;
                    }
                    let at = r as usize * len;
                    for (i, w) in want[at..at + len].iter_mut().enumerate() {
                        *w = pattern(src_pe, u, i);
                    }
                    match op {
                        SignalOp::Set => want_sig[r as usize] = r as u64 + 1,
                        SignalOp::Add => want_sig[regions] += r as u64 + 1,
                    }
                }
                check_eq(&format!("{name}: data"), &read_all(rt, &dst)?, &want)?;
                check_eq(&format!("{name}: signals"), &read_all(rt, &sig)?, &want_sig)?;
                rt.barrier_all().map_err(e2s)?;
                rt.free(dst).map_err(e2s)?;
                rt.free(sig).map_err(e2s)?;
                rt.free(src).map_err(e2s)?;
                rt.free(out_buf).map_err(e2s)?;
            }
        }
    }
    Ok(())
}

/// `signal_op` (Set and Add, to the neighbour, every PE and this PE), `signal_fetch`
/// before and after, and `signal_wait_until` with every comparison, waited on by six
/// threads at once; three times in a row. The words start as `0 0 0 0 MAX MAX 100`.
pub fn signal_cmp(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes() as u64);
    let total = n * (n + 1) / 2;
    let initial = [0, 0, 0, 0, u64::MAX, u64::MAX, 100];
    let seen = [7, 9, total, total, 3, 4];
    let fin = [7, 9, total, total, 3, 4, 110];
    let want: Vec<u64> = initial.iter().chain(&seen).chain(&fin).copied().collect();
    let m = rt.load_module(&PTX).map_err(e2s)?;
    for round in 0..3 {
        let sig = rt.calloc::<u64>(7).map_err(e2s)?;
        rt.put(sig.at(4), &initial[4..], me).map_err(e2s)?;
        let out = sym_from(rt, &vec![u64::MAX; want.len()])?;
        let (s, outp) = (sym(rt, &sig)?, sym(rt, &out)?);
        // SAFETY: `s` and `outp` are symmetric addresses of 7 and 20 u64s; each element
        // of `outp` is written by one thread (or thread 0 alone).
        unsafe { rt.launch(&m, k::signal_cmp::KERNEL, 1, 8, (s, outp)) }.map_err(e2s)?;
        check_eq(
            &format!("round {round}: fetched before, seen by waits, fetched after"),
            &read_all(rt, &out)?,
            &want,
        )?;
        rt.barrier_all().map_err(e2s)?;
        rt.free(sig).map_err(e2s)?;
        rt.free(out).map_err(e2s)?;
    }
    Ok(())
}

/// The multi-word waits and tests (`wait_until_any`, `_all_vector`, `_some`, `test_*`):
/// 20 rounds in which every PE sends every other PE a region and its signal, in an order
/// that differs by PE and round, and takes the regions in the order they arrive (kernel
/// `wait_many`). Every region is checked exactly once per round, every wait and test
/// gives the right answer, and how often arrival order differed from PE order is printed.
pub fn wait_many(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (len, rounds) = (256usize, 20u32);
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let data = rt.calloc::<u64>(n * len).map_err(e2s)?;
    let sigs = rt.calloc::<u64>(n).map_err(e2s)?;
    let acks = rt.calloc::<u64>(n).map_err(e2s)?;
    let status = rt.calloc::<i32>(n).map_err(e2s)?;
    let indices = rt.calloc::<usize>(n).map_err(e2s)?;
    let out = rt.calloc::<u64>(3).map_err(e2s)?;
    let args = (
        sym(rt, &data)?,
        len,
        sym(rt, &sigs)?,
        sym(rt, &acks)?,
        sym(rt, &status)?,
        sym(rt, &indices)?,
        rounds,
        sym(rt, &out)?,
    );
    rt.barrier_all().map_err(e2s)?;
    // SAFETY: every pointer is a symmetric address of the size the kernel's doc names.
    unsafe { rt.launch(&m, k::wait_many::KERNEL, 1, 1, args) }.map_err(e2s)?;
    let got = read_all(rt, &out)?;
    println!(
        "PE {me}: wait_many: {} regions, {} taken out of PE order",
        got[0], got[2]
    );
    check_eq(
        "regions checked, mismatches",
        &got[..2],
        &[(n as u64 - 1) * rounds as u64, 0],
    )?;
    rt.barrier_all().map_err(e2s)?;
    for b in [data, sigs, acks, out] {
        rt.free(b).map_err(e2s)?;
    }
    rt.free(status).map_err(e2s)?;
    rt.free(indices).map_err(e2s)
}

/// One type's `wait_cmp` run: `table` rows are `init, value, mid, fin` for `Cmp::ALL`.
/// Every `test` gives false on `init` and `mid` and true on `fin`, and `wait_until`
/// returns exactly `fin`.
fn wait_case<T: Pod + PartialOrd + Debug>(
    rt: &Runtime,
    name: &str,
    table: [[T; 4]; 6],
    kernel: Kernel<(*mut T, *const T, *mut T, *mut u32)>,
) -> Outcome {
    // The table must make every check meaningful; judged with Rust's own operators, not
    // with the `Cmp` under test.
    let holds = |c: usize, ivar: T, value: T| match c {
        0 => ivar == value,
        1 => ivar != value,
        2 => ivar > value,
        3 => ivar >= value,
        4 => ivar < value,
        _ => ivar <= value,
    };
    for (c, [init, value, mid, fin]) in table.into_iter().enumerate() {
        ensure(
            !holds(c, init, value) && !holds(c, mid, value) && holds(c, fin, value),
            || {
                format!(
                    "{name}: table row for {:?} does not discriminate",
                    Cmp::ALL[c]
                )
            },
        )?;
    }
    // Loaded here rather than once per scenario: symmem does not export the module's
    // type, so a function cannot take it as an argument.
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let ivar = rt.calloc::<T>(6).map_err(e2s)?;
    let flat: Vec<T> = table.iter().flatten().copied().collect();
    let table_buf = sym_from(rt, &flat)?;
    let seen = rt.calloc::<T>(6).map_err(e2s)?;
    let flags = sym_from(rt, &[u32::MAX; 18])?;
    let (iv, tp) = (sym(rt, &ivar)?, sym(rt, &table_buf)?.cast_const());
    let (sp, fp) = (sym(rt, &seen)?, sym(rt, &flags)?);
    // SAFETY: `iv`, `tp`, `sp` and `fp` are symmetric addresses of 6, 24 and 6 T and 18
    // u32s; each element of `sp` and `fp` is written by one thread.
    unsafe { rt.launch(&m, kernel, 1, 6, (iv, tp, sp, fp)) }.map_err(|e| format!("{name}: {e}"))?;
    check_eq(
        &format!("{name}: test on init, mid, fin"),
        &read_all(rt, &flags)?,
        &[0, 0, 1].repeat(6),
    )?;
    let fins: Vec<T> = table.iter().map(|row| row[3]).collect();
    check_eq(
        &format!("{name}: values wait_until returned"),
        &read_all(rt, &seen)?,
        &fins,
    )?;
    check_eq(
        &format!("{name}: final words"),
        &read_all(rt, &ivar)?,
        &fins,
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(ivar).map_err(e2s)?;
    rt.free(table_buf).map_err(e2s)?;
    rt.free(seen).map_err(e2s)?;
    rt.free(flags).map_err(e2s)
}

/// `wait_until` and `test` with every comparison on u32, i32, u64 and i64, with values
/// that tell signed from unsigned and 64-bit from 32-bit comparisons.
pub fn wait_test(rt: &Runtime) -> Outcome {
    const H: u32 = 0x8000_0000;
    wait_case::<u32>(
        rt,
        "u32",
        [
            [0, H, H - 1, H],
            [u32::MAX - 1, u32::MAX - 1, u32::MAX - 1, u32::MAX],
            [0, H - 1, H - 1, H],
            [1, u32::MAX - 1, H - 1, u32::MAX],
            [u32::MAX, H, H, H - 1],
            [u32::MAX, H, H + 1, H],
        ],
        k::wait_cmp_u32::KERNEL,
    )?;
    wait_case::<i32>(
        rt,
        "i32",
        [
            [0, -5, 5, -5],
            [-7, -7, -7, 7],
            [-30, -10, -10, -9],
            [i32::MIN, -10, -11, -10],
            [5, -10, -10, -11],
            [i32::MAX, -1, 0, i32::MIN],
        ],
        k::wait_cmp_i32::KERNEL,
    )?;
    const T32: u64 = 1 << 32;
    const H64: u64 = 1 << 63;
    wait_case::<u64>(
        rt,
        "u64",
        [
            [0, 1 << 40, 1 << 41, 1 << 40],
            [u64::MAX, u64::MAX, u64::MAX, T32],
            [0, T32 - 1, T32 - 1, T32],
            [5, H64, H64 - 1, H64],
            [u64::MAX, 2 * T32, 2 * T32, 2 * T32 - 1],
            [u64::MAX, H64, H64 + 1, 3],
        ],
        k::wait_cmp_u64::KERNEL,
    )?;
    wait_case::<i64>(
        rt,
        "i64",
        [
            [0, -(1 << 40), 1 << 40, -(1 << 40)],
            [i64::MIN, i64::MIN, i64::MIN, -1],
            [i64::MIN, -(1 << 35), -(1 << 35), -(1 << 35) + 1],
            [-(1 << 50), 1 << 33, (1 << 33) - 1, 1 << 33],
            [i64::MAX, -(1 << 33), -(1 << 33), -(1 << 33) - 1],
            [0, -1, 0, i64::MIN],
        ],
        k::wait_cmp_i64::KERNEL,
    )
}
