//! The ring example and the identity queries (`my_pe`, `n_pes`, `ptr`), on one node and
//! split into two nodes, where device operations on the other node fail the launch.

use symmem::Runtime;
use symmem_test_kernels::{failure as kf, pattern, proxy as kp, ring as k, PTX};

use super::{check_eq, e2s, ensure, expect_kernel_failed, read_all, sym, sym_from, Outcome};

/// A block puts to the right neighbour with put_signal_block; the neighbour's kernel waits
/// for the signal and then every element is checked.
pub fn ring_put_signal(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let len = 10_000usize;
    let dst = rt.calloc::<u64>(len).map_err(e2s)?;
    let sig = rt.calloc::<u64>(1).map_err(e2s)?;
    let data: Vec<u64> = (0..len as u64)
        .map(|i| i * 7 + me as u64 * 1_000_000)
        .collect();
    let src = sym_from(rt, &data)?;
    let (d, s, srcp) = (sym(rt, &dst)?, sym(rt, &sig)?, sym(rt, &src)?.cast_const());
    // SAFETY: `d`, `srcp` and `s` are symmetric addresses of live allocations of `len`,
    // `len` and 1 u64s.
    unsafe {
        rt.launch(&m, k::ring_put_signal::KERNEL, 1, 64, (d, srcp, len, s))
            .map_err(e2s)?;
        rt.launch(&m, k::wait_signal::KERNEL, 1, 1, (s, 1u64))
            .map_err(e2s)?;
    }
    let left = (me + n - 1) % n;
    let want: Vec<u64> = (0..len as u64)
        .map(|i| i * 7 + left as u64 * 1_000_000)
        .collect();
    check_eq("ring data", &read_all(rt, &dst)?, &want)?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(dst).map_err(e2s)?;
    rt.free(sig).map_err(e2s)?;
    rt.free(src).map_err(e2s)
}

/// Threads of the `identity` launch.
const IDENTITY_THREADS: u32 = 32;

/// Runs the `identity` kernel on a block of [`IDENTITY_THREADS`] and checks what every thread saw:
/// `my_pe`, `n_pes`, `ptr(buf, pe)` equal to the host's `Runtime::ptr` (null exactly for
/// PEs on another node), and the values stored through those pointers. Returns the PEs
/// whose pointer was null.
fn check_identity(rt: &Runtime) -> Result<Vec<usize>, String> {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let buf = rt.calloc::<u64>(n).map_err(e2s)?;
    let threads = IDENTITY_THREADS as usize;
    let ids_buf = sym_from(rt, &vec![u32::MAX; 2 * threads])?;
    let ptrs_buf = sym_from(rt, &vec![u64::MAX; n])?;
    let (b, idp, ptrp) = (sym(rt, &buf)?, sym(rt, &ids_buf)?, sym(rt, &ptrs_buf)?);
    // SAFETY: `b`, `idp` and `ptrp` are symmetric addresses of `n` u64s, 2 u32s per
    // thread and `n` u64s; each element of `idp` and `ptrp` is written by one thread.
    unsafe { rt.launch(&m, k::identity::KERNEL, 1, IDENTITY_THREADS, (b, idp, ptrp)) }
        .map_err(e2s)?;
    let (ids, ptrs) = (read_all(rt, &ids_buf)?, read_all(rt, &ptrs_buf)?);
    let want_ids: Vec<u32> = (0..threads).flat_map(|_| [me as u32, n as u32]).collect();
    check_eq("my_pe/n_pes per thread", &ids, &want_ids)?;
    let mut unreachable = Vec::new();
    for (pe, &got) in ptrs.iter().enumerate() {
        let host = rt
            .ptr(&buf, pe)
            .map_err(e2s)?
            .map_or(0, |p| p.as_ptr() as u64);
        ensure(got == host, || {
            format!("PE {me}: device ptr(buf, {pe}) = {got:#x}, host ptr = {host:#x}")
        })?;
        if host == 0 {
            unreachable.push(pe);
        }
    }
    ensure(ptrs[me] == b as u64, || {
        "ptr to this PE is not the symmetric address".into()
    })?;
    rt.barrier_all().map_err(e2s)?;
    let want: Vec<u64> = (0..n)
        .map(|s| {
            if unreachable.contains(&s) {
                0
            } else {
                pattern(s as u32, me as u32, 0)
            }
        })
        .collect();
    check_eq("values stored through ptr", &read_all(rt, &buf)?, &want)?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(buf).map_err(e2s)?;
    rt.free(ids_buf).map_err(e2s)?;
    rt.free(ptrs_buf).map_err(e2s)?;
    Ok(unreachable)
}

/// `my_pe`, `n_pes` and `ptr` on one node: every peer is reachable.
pub fn identity(rt: &Runtime) -> Outcome {
    let unreachable = check_identity(rt)?;
    ensure(unreachable.is_empty(), || {
        format!("PEs {unreachable:?} are unreachable on one node")
    })
}

/// The PEs per node of the `two_nodes` split: half the job, at least one.
fn per_node() -> Result<usize, String> {
    let size: usize = std::env::var(super::EXPECT_PES)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or("SYMMEM_TEST_EXPECT_PES is not set")?;
    Ok((size / 2).max(1))
}

/// Before init: puts this process on node `testnode{rank / per_node}` through
/// `SYMMEM_NODE_ID`, so the job splits into two "nodes" that share no memory.
pub fn split_into_two_nodes() -> Outcome {
    let rank = ["SYMMEM_LAUNCH_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"]
        .iter()
        .find_map(|name| std::env::var(name).ok()?.parse::<usize>().ok())
        .ok_or("cannot tell this process's rank before init")?;
    // Edition 2021: set before init starts any thread that reads the environment.
    std::env::set_var("SYMMEM_NODE_ID", format!("testnode{}", rank / per_node()?));
    Ok(())
}

/// On two nodes (see [`split_into_two_nodes`]): `ptr` is null exactly for the other
/// node's PEs. Every kind of device operation on a PE that does not exist fails the launch
/// with `KernelFailed` naming the thread that issued it, its block and the PE, without
/// touching memory; on the other node's PEs it goes through the proxy channel and succeeds.
pub fn two_nodes(rt: &Runtime) -> Outcome {
    let (me, n, per_node) = (rt.my_pe(), rt.n_pes(), per_node()?);
    let unreachable = check_identity(rt)?;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let want: Vec<usize> = (0..n)
        .filter(|&pe| pe / per_node != me / per_node)
        .collect();
    ensure(unreachable == want, || {
        format!("unreachable PEs {unreachable:?}, want {want:?}")
    })?;
    let buf = rt.calloc::<u64>(2).map_err(e2s)?;
    let b = sym(rt, &buf)?;
    let other = want[0];
    for op in 0..kf::REMOTE_OPS {
        let needle = format!("PE {n} does not exist");
        // Thread 37 of block 1 (a 2 × 64 grid) issues the operation.
        // SAFETY: `b` is a symmetric address of 2 u64s; the failing operation is
        // refused before it touches memory.
        let r = unsafe { rt.launch(&m, kf::remote_op::KERNEL, 2, 64, (b, op, n as u32, 64 + 37)) };
        let text = expect_kernel_failed(rt, r, (1, 0, 0), (37, 0, 0), &[&needle])
            .map_err(|e| format!("op {op} on PE {n}: {e}"))?;
        if op == 0 {
            println!("ERROR (expected): {text}");
        }
    }
    check_eq(
        "buffer after refused operations",
        &read_all(rt, &buf)?,
        &[0, 0],
    )?;
    rt.barrier_all().map_err(e2s)?;
    for op in 0..kf::REMOTE_OPS {
        // SAFETY: as above; the other node's PE is reached through the proxy channel.
        unsafe {
            rt.launch(
                &m,
                kf::remote_op::KERNEL,
                2,
                64,
                (b, op, other as u32, 64 + 37),
            )
        }
        .map_err(|e| format!("op {op} on PE {other} through the proxy: {e}"))?;
    }
    rt.barrier_all().map_err(e2s)?;
    rt.free(buf).map_err(e2s)
}

/// Threads of the flood: 2 blocks of 64.
const FLOOD_GRID: u32 = 2;
const FLOOD_BLOCK: u32 = 64;
/// `p`s per thread.
const FLOOD_ROUNDS: u32 = 16;

/// Every thread of every PE stores `FLOOD_ROUNDS` values with `p` to its partner on the
/// other node (PE `me + n/2`), through the proxy channel; run with a tiny ring
/// (`SYMMEM_PROXY_SLOTS`) so threads wait for slots. Every value and the count of
/// finished threads arrive.
pub fn proxy_flood(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let partner = (me + n / 2) % n;
    let threads = (FLOOD_GRID * FLOOD_BLOCK) as usize;
    let per_pe = threads * FLOOD_ROUNDS as usize;
    let dst = rt.calloc::<u64>(n * per_pe).map_err(e2s)?;
    let count = rt.calloc::<u64>(1).map_err(e2s)?;
    ensure(rt.ptr(&count, partner).map_err(e2s)?.is_none(), || {
        format!("PE {partner} must be on the other node (run with SYMMEM_SIMULATE_NODES=2)")
    })?;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (d, c) = (sym(rt, &dst)?, sym(rt, &count)?);
    rt.barrier_all().map_err(e2s)?;
    // SAFETY: `d` holds `n * per_pe` u64s and `c` one, on every PE.
    unsafe {
        rt.launch(
            &m,
            kp::proxy_flood::KERNEL,
            FLOOD_GRID,
            FLOOD_BLOCK,
            (d, c, partner as u32, FLOOD_ROUNDS),
        )
    }
    .map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let got = read_all(rt, &dst)?;
    // The partner's region holds its values; every other region is untouched.
    let want: Vec<u64> = (0..n * per_pe)
        .map(|j| {
            let (from, i) = (j / per_pe, j % per_pe);
            if from == partner {
                pattern(from as u32, 7, i)
            } else {
                0
            }
        })
        .collect();
    check_eq("flooded values", &got, &want)?;
    check_eq(
        "finished threads",
        &read_all(rt, &count)?,
        &[threads as u64],
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(count).map_err(e2s)?;
    rt.free(dst).map_err(e2s)
}
