//! Thread geometry, `sync_threads`/`sync_warp`, large and cooperative launches, and the
//! launch argument checks.

use symmem::{Dim3, Error, Runtime};
use symmem_test_kernels::threads::{self as k, exchange_value, GEOMETRY_FIELDS};
use symmem_test_kernels::{pattern, PTX};

use super::{check_eq, e2s, read_all, sym, sym_from, Outcome};

/// Threads per warp.
const WARP: u32 = symmem::device::WARP_SIZE;

/// Every `(block, thread)` index of a launch, in the order of the global thread number
/// (block-major, x fastest), computed independently of the executor.
fn indices(grid: Dim3, block: Dim3) -> Vec<(Dim3, Dim3)> {
    let all = |d: Dim3| {
        (0..d.z).flat_map(move |z| {
            (0..d.y).flat_map(move |y| (0..d.x).map(move |x| Dim3::new(x, y, z)))
        })
    };
    all(grid)
        .flat_map(|b| all(block).map(move |t| (b, t)))
        .collect()
}

/// The record [`k::geometry`] should store for thread `t` of block `b`.
fn geometry_record(grid: Dim3, block: Dim3, b: Dim3, t: Dim3) -> Vec<u32> {
    let threads = block.x * block.y * block.z;
    let rank = (t.z * block.y + t.y) * block.x + t.x;
    let block_rank = (b.z * grid.y + b.y) * grid.x + b.x;
    let warp = rank / WARP;
    let mut rec = Vec::with_capacity(GEOMETRY_FIELDS);
    for d in [t, b, block, grid] {
        rec.extend([d.x, d.y, d.z]);
    }
    rec.extend([
        rank,
        block_rank,
        rank % WARP,
        warp,
        (threads - warp * WARP).min(WARP),
    ]);
    rec
}

/// Thread geometry in 1-D, 2-D and 3-D launches, blocks with a partial last warp (48 and
/// 45 threads), and a cooperative launch: every field of every thread, exactly.
pub fn geometry(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let shapes: [(bool, Dim3, Dim3); 5] = [
        (false, 3.into(), 48.into()),
        (false, (2, 3).into(), (8, 6).into()),
        (false, (2, 2, 2).into(), (4, 3, 4).into()),
        (false, (1, 2, 1).into(), (5, 3, 3).into()),
        (true, (2, 2, 1).into(), (4, 4, 2).into()),
    ];
    for (cooperative, grid, block) in shapes {
        let all = indices(grid, block);
        let out = sym_from(rt, &vec![u32::MAX; all.len() * GEOMETRY_FIELDS])?;
        let o = sym(rt, &out)?;
        // SAFETY: `o` is a symmetric address of one record per thread of the launch, each
        // written by its thread only.
        let r = unsafe {
            if cooperative {
                rt.launch_cooperative(&m, k::geometry::KERNEL, grid, block, (o,))
            } else {
                rt.launch(&m, k::geometry::KERNEL, grid, block, (o,))
            }
        };
        r.map_err(e2s)?;
        let want: Vec<u32> = all
            .iter()
            .flat_map(|&(b, t)| geometry_record(grid, block, b, t))
            .collect();
        check_eq(
            &format!("geometry of grid {grid:?} × block {block:?} (cooperative: {cooperative})"),
            &read_all(rt, &out)?,
            &want,
        )?;
        rt.free(out).map_err(e2s)?;
    }
    Ok(())
}

/// `sync_threads` and `sync_warp` exchanging values for many rounds in blocks of 48
/// threads (a partial last warp), of 256 threads, and in a cooperative launch where the
/// blocks run at once: every sum, exactly.
pub fn thread_sync(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    for (cooperative, grid, block, rounds) in [
        (false, 2u32, 48u32, 40u32),
        (false, 1, 256, 20),
        (true, 3, 48, 20),
    ] {
        let scratch = rt.calloc::<u32>((4 * block * grid) as usize).map_err(e2s)?;
        let out = sym_from(rt, &vec![u64::MAX; (2 * block * grid) as usize])?;
        let (s, o) = (sym(rt, &scratch)?, sym(rt, &out)?);
        // SAFETY: `s` and `o` are symmetric addresses of 4 u32s per thread (each block
        // uses its own area) and two u64s per thread (each written by its thread).
        let r = unsafe {
            if cooperative {
                rt.launch_cooperative(&m, k::sync_exchange::KERNEL, grid, block, (s, rounds, o))
            } else {
                rt.launch(&m, k::sync_exchange::KERNEL, grid, block, (s, rounds, o))
            }
        };
        r.map_err(e2s)?;
        let mut want = Vec::new();
        for b in 0..grid {
            for t in 0..block {
                let (lane, base) = (t % WARP, t - t % WARP);
                let width = (block - base).min(WARP);
                let sum = |partner: &dyn Fn(u32) -> u32| {
                    (0..rounds)
                        .map(|r| exchange_value(r, b, partner(r)) as u64)
                        .sum::<u64>()
                };
                want.push(sum(&|r| (t + r) % block));
                want.push(sum(&|r| base + (lane + r) % width));
            }
        }
        check_eq(
            &format!("sums of grid {grid} × block {block} (cooperative: {cooperative})"),
            &read_all(rt, &out)?,
            &want,
        )?;
        rt.free(scratch).map_err(e2s)?;
        rt.free(out).map_err(e2s)?;
    }
    Ok(())
}

/// 16 blocks of 256 threads (more blocks than cores, the largest usual block): every
/// thread runs exactly once, adds to a counter on every PE, and each block puts its chunk
/// to the right neighbour.
pub fn big_grid(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let (blocks, threads, chunk) = (16u32, 256u32, 1024usize);
    let dst = rt
        .calloc::<u64>((n * blocks) as usize * chunk)
        .map_err(e2s)?;
    let counter = rt.calloc::<u64>(1).map_err(e2s)?;
    let data: Vec<u64> = (0..blocks)
        .flat_map(|b| (0..chunk).map(move |i| pattern(me, b, i)))
        .collect();
    let src = sym_from(rt, &data)?;
    let ran = rt.calloc::<u32>((blocks * threads) as usize).map_err(e2s)?;
    let (d, c) = (sym(rt, &dst)?, sym(rt, &counter)?);
    let (sp, rp) = (sym(rt, &src)?.cast_const(), sym(rt, &ran)?);
    // SAFETY: `d`, `c`, `sp` and `rp` are symmetric addresses of `n * blocks * chunk`
    // u64s, 1 u64, `blocks * chunk` u64s and one u32 per thread (written by its thread).
    unsafe {
        rt.launch(
            &m,
            k::big_grid::KERNEL,
            blocks,
            threads,
            (d, sp, chunk, c, rp),
        )
    }
    .map_err(e2s)?;
    check_eq(
        "runs of each thread",
        &read_all(rt, &ran)?,
        &vec![1; ran.len()],
    )?;
    rt.barrier_all().map_err(e2s)?;
    check_eq(
        "counter",
        &read_all(rt, &counter)?,
        &[(n * blocks * threads) as u64],
    )?;
    let left = (me + n - 1) % n;
    let mut want = vec![0u64; dst.len()];
    for b in 0..blocks {
        let at = (left * blocks + b) as usize * chunk;
        for (i, w) in want[at..at + chunk].iter_mut().enumerate() {
            *w = pattern(left, b, i);
        }
    }
    check_eq(
        "chunks from the left neighbour",
        &read_all(rt, &dst)?,
        &want,
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(dst).map_err(e2s)?;
    rt.free(counter).map_err(e2s)?;
    rt.free(src).map_err(e2s)?;
    rt.free(ran).map_err(e2s)
}

/// `launch_cooperative` with 8 blocks of 32 threads that wait for each other: a chain in
/// which each block waits for the next (so they finish in reverse order), then 20
/// grid-wide barriers exchanging data between blocks. Under `launch` on the CPU executor,
/// which runs blocks one after another, the first block would wait forever.
pub fn cooperative(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (blocks, threads, rounds) = (8u32, 32u32, 20u32);
    let words = rt.calloc::<u32>(blocks as usize + 2).map_err(e2s)?;
    let order = rt.alloc::<u32>(blocks as usize).map_err(e2s)?;
    let data = rt.alloc::<u64>((blocks * threads) as usize).map_err(e2s)?;
    let bad = rt.alloc::<u32>((blocks * threads) as usize).map_err(e2s)?;
    let w = sym(rt, &words)?;
    let (op, dp, bp) = (sym(rt, &order)?, sym(rt, &data)?, sym(rt, &bad)?);
    let me = rt.my_pe();
    for launch in 0..2 {
        rt.put(words.at(0), &vec![0; words.len()], me)
            .map_err(e2s)?;
        rt.put(order.at(0), &vec![u32::MAX; order.len()], me)
            .map_err(e2s)?;
        rt.put(data.at(0), &vec![0; data.len()], me).map_err(e2s)?;
        rt.put(bad.at(0), &vec![u32::MAX; bad.len()], me)
            .map_err(e2s)?;
        // SAFETY: `w`, `op`, `dp` and `bp` are symmetric addresses of `blocks + 2` u32s,
        // one u32 per block, one u64 and one u32 per thread.
        unsafe {
            rt.launch_cooperative(
                &m,
                k::coop_blocks::KERNEL,
                blocks,
                threads,
                (w, op, dp, rounds, bp),
            )
        }
        .map_err(e2s)?;
        let reverse: Vec<u32> = (0..blocks).rev().collect();
        check_eq(
            &format!("launch {launch}: order in which the blocks finished the chain"),
            &read_all(rt, &order)?,
            &reverse,
        )?;
        check_eq(
            &format!("launch {launch}: mismatches per thread"),
            &read_all(rt, &bad)?,
            &vec![0; bad.len()],
        )?;
        let mut want = vec![1u32; blocks as usize];
        want.extend([blocks, 2 * rounds * blocks]);
        check_eq(
            &format!("launch {launch}: flags, position counter, barrier counter"),
            &read_all(rt, &words)?,
            &want,
        )?;
    }
    rt.barrier_all().map_err(e2s)?;
    rt.free(words).map_err(e2s)?;
    rt.free(order).map_err(e2s)?;
    rt.free(data).map_err(e2s)?;
    rt.free(bad).map_err(e2s)
}

/// Bad launch shapes are `InvalidArgument` errors naming the problem and run nothing
/// (a block over the kernel's own `max_threads` too); the largest allowed block (1024
/// threads, and 64 for the kernel declared so) and a cooperative launch of 1024 threads run
/// every thread once.
pub fn launch_args(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let counter = rt.calloc::<u64>(1).map_err(e2s)?;
    let c = sym(rt, &counter)?;
    let bad: [(bool, Dim3, Dim3, &str); 7] = [
        (
            false,
            0.into(),
            32.into(),
            "grid Dim3 { x: 0, y: 1, z: 1 } has a zero extent",
        ),
        (false, (2, 0).into(), 32.into(), "has a zero extent"),
        (
            false,
            1.into(),
            (32, 0, 2).into(),
            "block Dim3 { x: 32, y: 0, z: 2 } has a zero extent",
        ),
        (
            false,
            1.into(),
            1025.into(),
            "has 1025 threads; at most 1024 are allowed",
        ),
        (
            false,
            1.into(),
            (32, 32, 2).into(),
            "has 2048 threads; at most 1024",
        ),
        (
            true,
            17.into(),
            256.into(),
            "is 4352 threads; a cooperative launch runs all at once, at most 4096",
        ),
        (
            true,
            2.into(),
            2048.into(),
            "has 2048 threads; at most 1024",
        ),
    ];
    for (cooperative, grid, block, needle) in bad {
        // SAFETY: `c` is a symmetric address of one u64 (the kernel never runs).
        let r = unsafe {
            if cooperative {
                rt.launch_cooperative(&m, k::count_threads::KERNEL, grid, block, (c,))
            } else {
                rt.launch(&m, k::count_threads::KERNEL, grid, block, (c,))
            }
        };
        let op = if cooperative {
            "launch_cooperative"
        } else {
            "launch"
        };
        match r {
            Err(Error::InvalidArgument { op: o, reason }) if o == op && reason.contains(needle) => {
                println!("ERROR (expected): {op}: {reason}");
            }
            other => return Err(format!("{op}({grid:?}, {block:?}): expected InvalidArgument mentioning {needle:?}, got {other:?}")),
        }
    }
    // SAFETY: as above (refused before it runs).
    match unsafe { rt.launch(&m, k::count_threads_64::KERNEL, 1, (5, 13), (c,)) } {
        Err(Error::InvalidArgument { op: "launch", reason })
            if reason == "kernel count_threads_64 was declared max_threads(64); a block of Dim3 { x: 5, y: 13, z: 1 } has 65 threads" =>
        {
            println!("ERROR (expected): launch: {reason}");
        }
        other => return Err(format!("launch of count_threads_64 with 65 threads: expected InvalidArgument naming the kernel and both counts, got {other:?}")),
    }
    check_eq(
        "counter after refused launches",
        &read_all(rt, &counter)?,
        &[0],
    )?;
    // SAFETY: as above; the kernel only adds to `c` atomically.
    unsafe {
        rt.launch(&m, k::count_threads::KERNEL, 1, 1024, (c,))
            .map_err(e2s)?;
        rt.launch_cooperative(&m, k::count_threads::KERNEL, 4, 256, (c,))
            .map_err(e2s)?;
        rt.launch(&m, k::count_threads_64::KERNEL, 3, (4, 16), (c,))
            .map_err(e2s)?;
    }
    check_eq(
        "counter after the largest launches",
        &read_all(rt, &counter)?,
        &[2048 + 3 * 64],
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(counter).map_err(e2s)
}
