//! Put and get at thread, warp and block scope, blocking and `_nbi`, and `p`/`g` (see
//! `symmem_test_kernels::rma` for the units and regions).

use symmem::device::Kernel;
use symmem::Runtime;
use symmem_test_kernels::rma::{self as k, put_target};
use symmem_test_kernels::{pattern, PTX};

use super::{check_eq, e2s, read_all, sym, sym_from, Outcome};

/// Untouched u64s after the last region: a put that writes past its end shows there.
const GUARD: usize = 64;

/// A launch of a put (or get) kernel: `(dst, src or got)`, symmetric addresses.
type Phase<'a> = &'a dyn Fn(*mut u64, *mut u64) -> symmem::Result<()>;

/// One put phase and one get phase over `units` units of `len` u64s, checked exactly:
/// this PE's whole buffer (each region holds its writer's pattern or zero, the guard
/// zero) after the puts, and every element each unit got.
fn run_case(
    rt: &Runtime,
    name: &str,
    units: u32,
    len: usize,
    put: Phase<'_>,
    get: Phase<'_>,
) -> Outcome {
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let dst = rt
        .calloc::<u64>(n as usize * units as usize * len + GUARD)
        .map_err(e2s)?;
    let data: Vec<u64> = (0..units)
        .flat_map(|u| (0..len).map(move |i| pattern(me, u, i)))
        .collect();
    let src = sym_from(rt, &data)?;
    let got = rt.calloc::<u64>(units as usize * len).map_err(e2s)?;
    let d = sym(rt, &dst)?;
    put(d, sym(rt, &src)?).map_err(|e| format!("{name} put: {e}"))?;
    rt.barrier_all().map_err(e2s)?;
    let mut want = vec![0u64; dst.len()];
    for s in 0..n {
        for u in (0..units).filter(|&u| put_target(s, u, n) == me) {
            let region = (s * units + u) as usize * len;
            for (i, w) in want[region..region + len].iter_mut().enumerate() {
                *w = pattern(s, u, i);
            }
        }
    }
    check_eq(
        &format!("{name}: this PE's buffer after the puts"),
        &read_all(rt, &dst)?,
        &want,
    )?;
    get(d, sym(rt, &got)?).map_err(|e| format!("{name} get: {e}"))?;
    let writer = (me + 1) % n;
    let want: Vec<u64> = (0..units)
        .flat_map(|u| (0..len).map(move |i| pattern(writer, u, i)))
        .collect();
    check_eq(&format!("{name}: gotten data"), &read_all(rt, &got)?, &want)?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(dst).map_err(e2s)?;
    rt.free(src).map_err(e2s)?;
    rt.free(got).map_err(e2s)
}

/// Every put/get form at every scope, then [`bytes`]. Thread scope: 2 blocks of 32 threads, 100 u64s
/// each, with `put`/`get`, `put_nbi`/`get_nbi` and `p`/`g`. Warp scope: 2 blocks of 48
/// threads (a full and a 16-lane warp each), 1003 u64s per warp. Block scope: 3 blocks of
/// 256 threads, 10007 u64s per block.
pub fn rma(rt: &Runtime) -> Outcome {
    type Put = Kernel<(*mut u64, *const u64, usize, u32)>;
    type Get = Kernel<(*mut u64, *mut u64, usize, u32)>;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let scopes: [(&str, u32, u32, u32, usize, Put, Get); 3] = [
        (
            "thread",
            2,
            32,
            64,
            100,
            k::rma_put_threads::KERNEL,
            k::rma_get_threads::KERNEL,
        ),
        (
            "warp",
            2,
            48,
            4,
            1003,
            k::rma_put_warps::KERNEL,
            k::rma_get_warps::KERNEL,
        ),
        (
            "block",
            3,
            256,
            3,
            10_007,
            k::rma_put_blocks::KERNEL,
            k::rma_get_blocks::KERNEL,
        ),
    ];
    for (scope, grid, block, units, len, put, get) in scopes {
        for nbi in [0, 1] {
            let name = format!("{scope} scope, nbi = {nbi}");
            // SAFETY (both launches): `d` is a symmetric address of `n * units * len`
            // u64s; `s` and `g` are symmetric addresses of `units * len` u64s of this PE,
            // read (`s`) or written (`g`) by one unit each.
            let put_phase = |d: *mut u64, s: *mut u64| unsafe {
                rt.launch(&m, put, grid, block, (d, s.cast_const(), len, nbi))
            };
            let get_phase = |d: *mut u64, g: *mut u64| unsafe {
                rt.launch(&m, get, grid, block, (d, g, len, nbi))
            };
            run_case(rt, &name, units, len, &put_phase, &get_phase)?;
        }
    }
    let len = 100;
    // SAFETY: as above; `p`/`g` touch the same regions element by element.
    let p_phase = |d: *mut u64, _: *mut u64| unsafe {
        rt.launch(&m, k::rma_p_threads::KERNEL, 2, 32, (d, len))
    };
    // SAFETY: as above.
    let g_phase = |d: *mut u64, g: *mut u64| unsafe {
        rt.launch(&m, k::rma_g_threads::KERNEL, 2, 32, (d, g, len))
    };
    run_case(rt, "thread scope, p and g", 64, len, &p_phase, &g_phase)?;
    bytes(rt)
}

/// Byte copies by a warp and by a block of 96 threads whose offsets and lengths put the
/// 16-byte vector body, the head and tail, and the unequal-alignment fallback to work:
/// what lands on the right neighbour, and what comes back from it, checked byte by byte,
/// the bytes around them too.
fn bytes(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let left = (me + n - 1) % n;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    const ROOM: usize = 4096;
    let byte = |pe: usize, i: usize| (pe * 131 + i * 7 + 1) as u8;
    let src = sym_from(rt, &(0..ROOM).map(|i| byte(me, i)).collect::<Vec<u8>>())?;
    let cases = [
        (0, 0, 1),
        (0, 0, 15),
        (0, 0, 16),
        (0, 0, 33),
        (3, 3, 29),
        (3, 3, 100),
        (5, 9, 77),
        (15, 15, 1000),
        (8, 0, 64),
        (1, 1, 3001),
    ];
    for warp in [0u32, 1] {
        for (doff, soff, len) in cases {
            let name = format!(
                "{} bytes from offset {soff} to {doff} by a {}",
                len,
                if warp == 1 { "warp" } else { "block" }
            );
            let dst = rt.calloc::<u8>(ROOM + 16).map_err(e2s)?;
            let got = rt.calloc::<u8>(ROOM + 16).map_err(e2s)?;
            let (d, s, g) = (sym(rt, &dst)?, sym(rt, &src)?, sym(rt, &got)?);
            // SAFETY: `d` and `g` are symmetric addresses of ROOM + 16 bytes and `s` of
            // ROOM; every case's offset plus length stays inside them.
            unsafe {
                rt.launch(
                    &m,
                    k::rma_bytes::KERNEL,
                    1,
                    96,
                    (d, s.cast_const(), g, doff, soff, len, warp),
                )
            }
            .map_err(|e| format!("{name}: {e}"))?;
            rt.barrier_all().map_err(e2s)?;
            let mut want = vec![0u8; ROOM + 16];
            for i in 0..len {
                want[doff + i] = byte(left, soff + i);
            }
            check_eq(
                &format!("{name}: what the left neighbour put here"),
                &read_all(rt, &dst)?,
                &want,
            )?;
            let mut want = vec![0u8; ROOM + 16];
            for i in 0..len {
                want[doff + i] = byte(me, soff + i);
            }
            check_eq(
                &format!("{name}: what came back"),
                &read_all(rt, &got)?,
                &want,
            )?;
            rt.barrier_all().map_err(e2s)?;
            rt.free(dst).map_err(e2s)?;
            rt.free(got).map_err(e2s)?;
        }
    }
    rt.free(src).map_err(e2s)
}
