//! Thread geometry, `sync_threads`/`sync_warp`, large and cooperative launches, and the
//! launch argument checks.

use symmem::{Dim3, Error, Runtime};
use symmem_test_kernels::pattern;
use symmem_test_kernels::threads::{self as k, exchange_value, GEOMETRY_FIELDS};

use super::{check_eq, e2s, read_all, sym, Outcome};

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
    let shapes: [(bool, Dim3, Dim3); 5] = [
        (false, 3.into(), 48.into()),
        (false, (2, 3).into(), (8, 6).into()),
        (false, (2, 2, 2).into(), (4, 3, 4).into()),
        (false, (1, 2, 1).into(), (5, 3, 3).into()),
        (true, (2, 2, 1).into(), (4, 4, 2).into()),
    ];
    for (cooperative, grid, block) in shapes {
        let all = indices(grid, block);
        let mut out = vec![u32::MAX; all.len() * GEOMETRY_FIELDS];
        let o = out.as_mut_ptr();
        // SAFETY: `o` holds one record per thread of the launch, each written by its
        // thread only, and outlives the launch.
        let r = unsafe {
            if cooperative {
                rt.launch_closure_cooperative(grid, block, || k::geometry(o))
            } else {
                rt.launch_closure(grid, block, || k::geometry(o))
            }
        };
        r.map_err(e2s)?;
        let want: Vec<u32> = all
            .iter()
            .flat_map(|&(b, t)| geometry_record(grid, block, b, t))
            .collect();
        check_eq(
            &format!("geometry of grid {grid:?} × block {block:?} (cooperative: {cooperative})"),
            &out,
            &want,
        )?;
    }
    Ok(())
}

/// `sync_threads` and `sync_warp` exchanging values for many rounds in blocks of 48
/// threads (a partial last warp), of 256 threads, and in a cooperative launch where the
/// blocks run at once: every sum, exactly.
pub fn thread_sync(rt: &Runtime) -> Outcome {
    for (cooperative, grid, block, rounds) in [
        (false, 2u32, 48u32, 40u32),
        (false, 1, 256, 20),
        (true, 3, 48, 20),
    ] {
        let mut scratch = vec![0u32; (4 * block * grid) as usize];
        let mut out = vec![u64::MAX; (2 * block * grid) as usize];
        let (s, o) = (scratch.as_mut_ptr(), out.as_mut_ptr());
        // SAFETY: `s` holds 4 u32s per thread (each block uses its own area) and `o` two
        // u64s per thread; both outlive the launch.
        let r = unsafe {
            if cooperative {
                rt.launch_closure_cooperative(grid, block, || k::sync_exchange(s, rounds, o))
            } else {
                rt.launch_closure(grid, block, || k::sync_exchange(s, rounds, o))
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
            &out,
            &want,
        )?;
    }
    Ok(())
}

/// 16 blocks of 256 threads (more blocks than cores, the largest usual block): every
/// thread runs exactly once, adds to a counter on every PE, and each block puts its chunk
/// to the right neighbour.
pub fn big_grid(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let (blocks, threads, chunk) = (16u32, 256u32, 1024usize);
    let dst = rt
        .calloc::<u64>((n * blocks) as usize * chunk)
        .map_err(e2s)?;
    let counter = rt.calloc::<u64>(1).map_err(e2s)?;
    let src: Vec<u64> = (0..blocks)
        .flat_map(|b| (0..chunk).map(move |i| pattern(me, b, i)))
        .collect();
    let mut ran = vec![0u32; (blocks * threads) as usize];
    let (d, c) = (sym(rt, &dst)?, sym(rt, &counter)?);
    let (sp, rp) = (src.as_ptr(), ran.as_mut_ptr());
    // SAFETY: `d` and `c` are symmetric addresses of `n * blocks * chunk` and 1 u64s;
    // `sp` holds `blocks * chunk` u64s, `rp` one u32 per thread (written by its thread);
    // all outlive the launch.
    unsafe { rt.launch_closure(blocks, threads, || k::big_grid(d, sp, chunk, c, rp)) }
        .map_err(e2s)?;
    check_eq("runs of each thread", &ran, &vec![1; ran.len()])?;
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
    rt.free(counter).map_err(e2s)
}

/// `launch_cooperative` with 8 blocks of 32 threads that wait for each other: a chain in
/// which each block waits for the next (so they finish in reverse order), then 20
/// grid-wide barriers exchanging data between blocks. Under `launch`, which runs blocks
/// one after another, the first block would wait forever.
pub fn cooperative(rt: &Runtime) -> Outcome {
    let (blocks, threads, rounds) = (8u32, 32u32, 20u32);
    let words = rt.calloc::<u32>(blocks as usize + 2).map_err(e2s)?;
    let w = sym(rt, &words)?;
    for launch in 0..2 {
        rt.put(words.at(0), &vec![0; words.len()], rt.my_pe())
            .map_err(e2s)?;
        let mut order = vec![u32::MAX; blocks as usize];
        let mut data = vec![0u64; (blocks * threads) as usize];
        let mut bad = vec![u32::MAX; (blocks * threads) as usize];
        let (op, dp, bp) = (order.as_mut_ptr(), data.as_mut_ptr(), bad.as_mut_ptr());
        // SAFETY: `w` is a symmetric address of `blocks + 2` u32s; `op` holds one u32
        // per block, `dp` one u64 and `bp` one u32 per thread; all outlive the launch.
        unsafe {
            rt.launch_closure_cooperative(blocks, threads, || k::coop_blocks(w, op, dp, rounds, bp))
        }
        .map_err(e2s)?;
        let reverse: Vec<u32> = (0..blocks).rev().collect();
        check_eq(
            &format!("launch {launch}: order in which the blocks finished the chain"),
            &order,
            &reverse,
        )?;
        check_eq(
            &format!("launch {launch}: mismatches per thread"),
            &bad,
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
    rt.free(words).map_err(e2s)
}

/// Bad launch shapes are `InvalidArgument` errors naming the problem and run nothing;
/// the largest allowed block (1024 threads) and a cooperative launch of 1024 threads run
/// every thread once.
pub fn launch_args(rt: &Runtime) -> Outcome {
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
                rt.launch_closure_cooperative(grid, block, || k::count_threads(c))
            } else {
                rt.launch_closure(grid, block, || k::count_threads(c))
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
    check_eq(
        "counter after refused launches",
        &read_all(rt, &counter)?,
        &[0],
    )?;
    // SAFETY: as above; the kernel only adds to `c` atomically.
    unsafe {
        rt.launch_closure(1, 1024, || k::count_threads(c))
            .map_err(e2s)?;
        rt.launch_closure_cooperative(4, 256, || k::count_threads(c))
            .map_err(e2s)?;
    }
    check_eq(
        "counter after the largest launches",
        &read_all(rt, &counter)?,
        &[2048],
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(counter).map_err(e2s)
}
