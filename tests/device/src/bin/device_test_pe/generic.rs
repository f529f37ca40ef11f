//! Generic kernels launched through each instance's descriptor, the scope-generic
//! operations at every scope, and typed symmetric slices (`Runtime::sym_slice`): every
//! element checked, and out-of-bounds ranges refused naming the operation, PE and range
//! (see `symmem_test_kernels::generic`).

use symmem::device::{DeviceTeam, Kernel, SymSlice};
use symmem::{Pod, Runtime, SymBuf};
use symmem_test_kernels::generic::{self as k, THREADS};
use symmem_test_kernels::{pattern, PTX};

use super::{check_eq, e2s, ensure, expect_kernel_failed, read_all, sym_from, Outcome};

/// `slice_rma`'s arguments: dst, src, got, echo, sig.
type RmaArgs<T> = (
    SymSlice<T>,
    SymSlice<T>,
    SymSlice<T>,
    SymSlice<T>,
    SymSlice<u64>,
);

/// `slice_elems`'s arguments: a, out, got, count.
type ElemsArgs<T> = (SymSlice<T>, SymSlice<T>, SymSlice<T>, SymSlice<u64>);

/// `scope_collectives`' arguments: team, mine, local, all, bcast.
type CollectiveArgs = (
    DeviceTeam,
    SymSlice<u64>,
    SymSlice<u64>,
    SymSlice<u64>,
    SymSlice<u64>,
);

/// Elements each PE moves in `slice_rma`: divisible by every instance's chunk count, and
/// not a multiple of the 16-byte vector width for u8.
const LEN: usize = 200;

/// `slice_rma` (four instances: u64/thread/4, u32/warp/2, f64/block/8, u8/block/1),
/// `slice_elems` (u32 times 3, f64 times 2) and `scope_collectives` at every scope.
pub fn generic_kernels(rt: &Runtime) -> Outcome {
    slice_rma::<u64>(rt, k::slice_rma_u64_thread_4::KERNEL, 4, |i| i as u64)?;
    slice_rma::<u32>(rt, k::slice_rma_u32_warp_2::KERNEL, 2, |i| i as u32)?;
    slice_rma::<f64>(rt, k::slice_rma_f64_block_8::KERNEL, 8, |i| i as f64 + 0.25)?;
    slice_rma::<u8>(rt, k::slice_rma_u8_block_1::KERNEL, 1, |i| i as u8)?;
    slice_elems::<u32>(rt, "u32", k::slice_elems_u32_3::KERNEL, 3, |i| i as u32 + 7)?;
    slice_elems::<f64>(rt, "f64", k::slice_elems_f64_2::KERNEL, 2.0, |i| {
        i as f64 * 0.5
    })?;
    for (scope, kernel) in [
        ("thread", k::scope_collectives_thread::KERNEL),
        ("warp", k::scope_collectives_warp::KERNEL),
        ("block", k::scope_collectives_block::KERNEL),
    ] {
        scope_collectives(rt, scope, kernel)?;
    }
    Ok(())
}

/// The value element `i` of PE `pe`'s source holds, from the pattern's low bits.
fn value<T>(pe: usize, i: usize, conv: fn(u64) -> T) -> T {
    conv(pattern(pe as u32, 0, i) & 0xff_ffff)
}

/// One `slice_rma` instance (`chunks`: its const parameter): `dst` holds the left neighbour's source, `got` this PE's
/// own (read back from the right neighbour), `echo` the left neighbour's `got`, i.e. the
/// left neighbour's source; each signal word counts one put.
fn slice_rma<T: Pod + PartialEq + std::fmt::Debug>(
    rt: &Runtime,
    kernel: Kernel<RmaArgs<T>>,
    chunks: usize,
    elem: fn(usize) -> T,
) -> Outcome {
    let what = kernel.name();
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let left = (me + n - 1) % n;
    let conv = |pe: usize| -> Vec<T> { (0..LEN).map(|i| elem(i + 1000 * pe)).collect() };
    let src = sym_from(rt, &conv(me))?;
    let dst = rt.calloc::<T>(LEN).map_err(e2s)?;
    let got = rt.calloc::<T>(LEN).map_err(e2s)?;
    let echo = rt.calloc::<T>(LEN).map_err(e2s)?;
    let sig = rt.calloc::<u64>(8).map_err(e2s)?;
    let args = (
        rt.sym_slice(&dst).map_err(e2s)?,
        rt.sym_slice(&src).map_err(e2s)?,
        rt.sym_slice(&got).map_err(e2s)?,
        rt.sym_slice(&echo).map_err(e2s)?,
        rt.sym_slice(&sig).map_err(e2s)?,
    );
    rt.barrier_all().map_err(e2s)?;
    // SAFETY: every slice is a live symmetric allocation of this PE.
    unsafe { rt.launch(&m, kernel, 1, THREADS, args) }.map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    check_eq(
        &format!("slice_rma {what}: dst"),
        &read_all(rt, &dst)?,
        &conv(left),
    )?;
    check_eq(
        &format!("slice_rma {what}: got"),
        &read_all(rt, &got)?,
        &conv(me),
    )?;
    check_eq(
        &format!("slice_rma {what}: echo"),
        &read_all(rt, &echo)?,
        &conv(left),
    )?;
    let mut want_sig = vec![0u64; 8];
    want_sig[..chunks].fill(1);
    check_eq(
        &format!("slice_rma {what}: signals"),
        &read_all(rt, &sig)?,
        &want_sig,
    )?;
    rt.barrier_all().map_err(e2s)?;
    for buf in [src, dst, got, echo] {
        rt.free(buf).map_err(e2s)?;
    }
    rt.free(sig).map_err(e2s)
}

/// One `slice_elems` instance on `THREADS - 5` elements (so some threads have none):
/// `out` = the left neighbour's `a` times `k`, `got` = the right neighbour's `a`,
/// `count` = the left neighbour's threads with an element.
fn slice_elems<T: Pod + PartialEq + std::fmt::Debug + std::ops::Mul<Output = T>>(
    rt: &Runtime,
    what: &str,
    kernel: Kernel<ElemsArgs<T>>,
    times: T,
    elem: fn(usize) -> T,
) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let len = THREADS as usize - 5;
    let a_of = |pe: usize| -> Vec<T> { (0..len).map(|i| elem(i + 100 * pe)).collect() };
    let a = sym_from(rt, &a_of(me))?;
    let out = rt.calloc::<T>(len).map_err(e2s)?;
    let got = rt.calloc::<T>(len).map_err(e2s)?;
    let count = rt.calloc::<u64>(1).map_err(e2s)?;
    let args = (
        rt.sym_slice(&a).map_err(e2s)?,
        rt.sym_slice(&out).map_err(e2s)?,
        rt.sym_slice(&got).map_err(e2s)?,
        rt.sym_slice(&count).map_err(e2s)?,
    );
    rt.barrier_all().map_err(e2s)?;
    // SAFETY: every slice is a live symmetric allocation of this PE.
    unsafe { rt.launch(&m, kernel, 1, THREADS, args) }.map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let want_out: Vec<T> = a_of(left).into_iter().map(|v| v * times).collect();
    check_eq(
        &format!("slice_elems {what}: out"),
        &read_all(rt, &out)?,
        &want_out,
    )?;
    check_eq(
        &format!("slice_elems {what}: got"),
        &read_all(rt, &got)?,
        &a_of(right),
    )?;
    check_eq(
        &format!("slice_elems {what}: count"),
        &read_all(rt, &count)?,
        &[len as u64],
    )?;
    rt.barrier_all().map_err(e2s)?;
    for buf in [a, out, got] {
        rt.free(buf).map_err(e2s)?;
    }
    rt.free(count).map_err(e2s)
}

/// `scope_collectives` at one scope over TEAM_WORLD: `local` = this PE's `mine`, `all` =
/// every PE's `mine` in order, `bcast` = PE 0's.
fn scope_collectives(rt: &Runtime, scope: &str, kernel: Kernel<CollectiveArgs>) -> Outcome {
    const NE: usize = 37;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let mine_of = |pe: usize| -> Vec<u64> { (0..NE).map(|i| value(pe, i, |v| v)).collect() };
    let mine = sym_from(rt, &mine_of(me))?;
    let local = rt.calloc::<u64>(NE).map_err(e2s)?;
    let all = rt.calloc::<u64>(NE * n).map_err(e2s)?;
    let bcast = rt.calloc::<u64>(NE).map_err(e2s)?;
    let team = rt.team_world().device().map_err(e2s)?;
    let args = (
        team,
        rt.sym_slice(&mine).map_err(e2s)?,
        rt.sym_slice(&local).map_err(e2s)?,
        rt.sym_slice(&all).map_err(e2s)?,
        rt.sym_slice(&bcast).map_err(e2s)?,
    );
    rt.barrier_all().map_err(e2s)?;
    // SAFETY: the team handle is this PE's; every slice is a live symmetric allocation.
    unsafe { rt.launch(&m, kernel, 1, THREADS, args) }.map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    check_eq(
        &format!("{scope} copy"),
        &read_all(rt, &local)?,
        &mine_of(me),
    )?;
    let want_all: Vec<u64> = (0..n).flat_map(mine_of).collect();
    check_eq(
        &format!("{scope} fcollect"),
        &read_all(rt, &all)?,
        &want_all,
    )?;
    check_eq(
        &format!("{scope} broadcast"),
        &read_all(rt, &bcast)?,
        &mine_of(0),
    )?;
    rt.barrier_all().map_err(e2s)?;
    for buf in [mine, local, all, bcast] {
        rt.free(buf).map_err(e2s)?;
    }
    Ok(())
}

/// Out-of-bounds slice operations: a thread `put` of 4 elements at 6 of an 8-element
/// slice, and a warp `put_nbi` of 8 at 1, fail the launch in the calling thread, naming
/// the operation, scope, PE, range and length; an in-bounds put at the end succeeds; a
/// host `sym_slice_range` past the allocation is refused naming the range.
pub fn slice_bounds(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let right = ((me + 1) % n) as u32;
    let dst: SymBuf<u64> = rt.calloc::<u64>(8).map_err(e2s)?;
    let src = sym_from(rt, &(1..=8u64).collect::<Vec<_>>())?;
    let (d, s) = (
        rt.sym_slice(&dst).map_err(e2s)?,
        rt.sym_slice(&src).map_err(e2s)?,
    );
    rt.barrier_all().map_err(e2s)?;
    // SAFETY: both slices are live symmetric allocations of this PE.
    let r = unsafe { rt.launch(&m, k::slice_put_at::KERNEL, 1, 32, (d, s, 6, 4, right)) };
    let want = format!(
        "SymSlice::put (thread) on PE {right}: elements 6..10 are out of bounds of a symmetric slice of 8 elements"
    );
    let text = expect_kernel_failed(rt, r, (0, 0, 0), (0, 0, 0), &[&want, "generic.rs"])?;
    println!("ERROR (expected): {text}");
    let r = unsafe { rt.launch(&m, k::slice_put_warp_at::KERNEL, 1, 32, (d, s, 1, right)) };
    let want = format!(
        "SymSlice::put_nbi (warp) on PE {right}: elements 1..9 are out of bounds of a symmetric slice of 8 elements"
    );
    let e = match r {
        Ok(()) => return Err("a warp put past the slice succeeded".into()),
        Err(e) => e.to_string(),
    };
    ensure(e.contains(&want), || format!("expected {want:?} in: {e}"))?;
    println!("ERROR (expected): {e}");
    rt.barrier_all().map_err(e2s)?;
    // The last 4 elements exactly: in bounds.
    // SAFETY: as above.
    unsafe { rt.launch(&m, k::slice_put_at::KERNEL, 1, 32, (d, s, 4, 4, right)) }
        .map_err(|e| format!("an in-bounds put at the end failed: {e}"))?;
    rt.barrier_all().map_err(e2s)?;
    check_eq(
        "put at the end",
        &read_all(rt, &dst)?,
        &[0, 0, 0, 0, 1, 2, 3, 4],
    )?;
    let e = match rt.sym_slice_range(&dst, 5..9) {
        Ok(_) => return Err("sym_slice_range(5..9) of 8 elements succeeded".into()),
        Err(e) => e.to_string(),
    };
    ensure(
        e.contains("sym_slice on PE") && e.contains("elements 5..9"),
        || format!("sym_slice_range error does not name the range: {e}"),
    )?;
    println!("ERROR (expected): {e}");
    let part = rt.sym_slice_range(&dst, 2..=5).map_err(e2s)?;
    ensure(part.len() == 4, || {
        format!("2..=5 has {} elements", part.len())
    })?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(dst).map_err(e2s)?;
    rt.free(src).map_err(e2s)
}
