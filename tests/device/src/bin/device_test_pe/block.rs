//! Shared memory (static and dynamic), warp intrinsics, block-scope atomics and the
//! block-wide scan and histogram, checked exactly; their misuses, refused with messages.

use symmem::{Error, LaunchConfig, Runtime};
use symmem_test_kernels::block::{
    self as k, scan_input, ATOMIC_FIELDS, BINS, SCAN_FIELDS, WARP_FIELDS, WIDE,
};
use symmem_test_kernels::PTX;

use super::{check_eq, e2s, ensure, expect_kernel_failed, read_all, sym, sym_from, Outcome};

/// The key of element `i` of [`shared_hist`](k::shared_hist)'s input.
fn hist_key(i: u32) -> u32 {
    (i * 7 + i / 3) % BINS as u32
}

/// Every shared-memory, warp and block helper with its values checked: scans in blocks
/// of 1, 32, 45, 100, 256 and 1024 threads; each warp intrinsic in full warps; a
/// histogram and block atomics in static shared arrays (blocks of 45 and 128 threads);
/// dynamic shared memory of 512 bytes and of the whole 48 KiB; a request over 48 KiB
/// refused, naming the kernel and size.
pub fn shared_warp(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    scans(rt, &m)?;
    warps(rt, &m)?;
    histograms(rt, &m)?;
    dynamic(rt, &m)
}

fn scans(rt: &Runtime, m: &symmem::Module) -> Outcome {
    for (grid, block) in [
        (1u32, 1u32),
        (2, 32),
        (3, 45),
        (1, 100),
        (2, 256),
        (1, 1024),
    ] {
        let out = sym_from(rt, &vec![u64::MAX; (grid * block) as usize * SCAN_FIELDS])?;
        let o = sym(rt, &out)?;
        // SAFETY: `o` is a symmetric address of one record per thread of the launch.
        unsafe { rt.launch(m, k::block_scan::KERNEL, grid, block, (o,)) }.map_err(e2s)?;
        let mut want = Vec::new();
        for b in 0..grid {
            let v: Vec<u32> = (0..block).map(|t| scan_input(b * block + t)).collect();
            let total = v.iter().fold(0u64, |s, &x| s.wrapping_add(x as u64 * WIDE));
            let (mut narrow, mut wide) = (0u32, 0u64);
            for &x in &v {
                let excl = narrow;
                narrow = narrow.wrapping_add(x);
                wide = wide.wrapping_add(x as u64 * WIDE);
                want.extend([narrow as u64, excl as u64, wide, total]);
            }
        }
        check_eq(
            &format!("scans of grid {grid} × block {block}"),
            &read_all(rt, &out)?,
            &want,
        )?;
        rt.free(out).map_err(e2s)?;
    }
    Ok(())
}

fn warps(rt: &Runtime, m: &symmem::Module) -> Outcome {
    let (grid, block) = (2u32, 96u32);
    let out = sym_from(rt, &vec![u64::MAX; (grid * block) as usize * WARP_FIELDS])?;
    let o = sym(rt, &out)?;
    // SAFETY: `o` is a symmetric address of one record per thread of the launch.
    unsafe { rt.launch(m, k::warp_ops::KERNEL, grid, block, (o,)) }.map_err(e2s)?;
    let thirds = (0..32u32)
        .filter(|l| l.is_multiple_of(3))
        .fold(0u64, |m, l| m | 1 << l);
    let mut want = Vec::new();
    for g in 0..grid * block {
        let l = g % 32;
        let src = (g - l + (l + 5) % 32) as u64;
        want.extend([
            thirds,
            src * WIDE,
            if l >= 3 { l - 3 } else { l } as u64,
            if l + 2 < 32 { l + 2 } else { l } as u64,
            ((l ^ 1) as f64 + 0.5).to_bits(),
            0xf << (l / 4 * 4),
            u32::MAX as u64,
            0,
            u32::MAX as u64,
            thirds.count_ones() as u64,
            if l < 16 { 15 - l } else { 47 - l } as u64,
        ]);
    }
    check_eq("warp intrinsics", &read_all(rt, &out)?, &want)?;
    rt.free(out).map_err(e2s)
}

fn histograms(rt: &Runtime, m: &symmem::Module) -> Outcome {
    let per_thread = 5u32;
    for (grid, block) in [(3u32, 45u32), (2, 128)] {
        let n = grid * block * per_thread;
        let keys = sym_from(rt, &(0..n).map(hist_key).collect::<Vec<_>>())?;
        let record = BINS + ATOMIC_FIELDS;
        let out = sym_from(rt, &vec![u64::MAX; grid as usize * record])?;
        let (kp, o) = (sym(rt, &keys)?.cast_const(), sym(rt, &out)?);
        // SAFETY: `kp` holds `per_thread` keys per thread of the launch; `o` one record
        // per block.
        unsafe { rt.launch(m, k::shared_hist::KERNEL, grid, block, (kp, per_thread, o)) }
            .map_err(e2s)?;
        let got = read_all(rt, &out)?;
        for b in 0..grid {
            let mine: Vec<u32> = (b * block * per_thread..(b + 1) * block * per_thread)
                .map(hist_key)
                .collect();
            let mut want = vec![0u64; BINS];
            for &key in &mine {
                want[key as usize] += 1;
            }
            let min = *mine.iter().min().expect("keys") as i64 - 10;
            let max = *mine.iter().max().expect("keys") as i64 - 10;
            want.extend([min as u64, max as u64, 1]);
            let rec = &got[b as usize * record..(b as usize + 1) * record];
            check_eq(
                &format!("bins, min, max and claims of block {b} of {grid} × {block}"),
                &rec[..record - 1],
                &want,
            )?;
            let claimant = rec[record - 1];
            ensure((1..=block as u64).contains(&claimant), || {
                format!(
                    "block {b}: the compare-and-swap word holds {claimant}, not a thread rank + 1"
                )
            })?;
        }
        rt.free(keys).map_err(e2s)?;
        rt.free(out).map_err(e2s)?;
    }
    Ok(())
}

fn dynamic(rt: &Runtime, m: &symmem::Module) -> Outcome {
    let (grid, block) = (2u32, 64u32);
    let max = symmem::device::MAX_SHARED_BYTES;
    for bytes in [block * 8, max] {
        let all = grid * block;
        let out = sym_from(rt, &vec![u64::MAX; (all + grid) as usize])?;
        let o = sym(rt, &out)?;
        let config = LaunchConfig::new(grid, block).shared_bytes(bytes);
        // SAFETY: `o` is a symmetric address of one u64 per thread plus one per block.
        unsafe { rt.launch_with(m, k::dyn_shared::KERNEL, config, (o,)) }.map_err(e2s)?;
        let mut want: Vec<u64> = (0..all)
            .map(|g| (((g % block + 1) % block) * 7 + g / block) as u64)
            .collect();
        want.extend(std::iter::repeat_n(bytes as u64 / 8, grid as usize));
        check_eq(
            &format!("dynamic shared memory of {bytes} bytes"),
            &read_all(rt, &out)?,
            &want,
        )?;
        rt.free(out).map_err(e2s)?;
    }
    let config = LaunchConfig::new(1, 32).shared_bytes(max + 1);
    // SAFETY: refused before it runs.
    match unsafe { rt.launch_with(m, k::dyn_shared::KERNEL, config, (std::ptr::null_mut(),)) } {
        Err(Error::InvalidArgument { op: "launch_with", reason })
            if reason.contains("kernel dyn_shared asks for 49153 bytes of dynamic shared memory") =>
        {
            println!("ERROR (expected): launch_with: {reason}");
            Ok(())
        }
        other => Err(format!(
            "a launch with {} bytes of dynamic shared memory: expected InvalidArgument naming the kernel and size, got {other:?}",
            max + 1
        )),
    }
}

/// Misuses the CPU executor refuses, each failing its launch with `KernelFailed` naming
/// the first thread and what was wrong: a shared index past the end, a lane calling a
/// shuffle whose mask leaves it out, a lane exiting before its warp shuffles with every
/// lane, a histogram key outside the bins, and `shared!` arrays plus dynamic shared
/// memory over 48 KiB.
pub fn shared_warp_misuse(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let cases: [(u32, u32, &str); 4] = [
        (
            0,
            0,
            "shared memory index 64 is out of bounds: the shared slice has 64 elements",
        ),
        (
            1,
            1,
            "warp 0: lane 1 called a warp intrinsic with the mask 0x00000001, which does not name it",
        ),
        (
            2,
            4,
            "warp 0: the mask 0xffffffff names lanes 0x00000008, which have exited",
        ),
        (3, 0, "histogram_block: key 64 is outside the 64 bins"),
    ];
    for (mode, thread, needle) in cases {
        // SAFETY: the kernel takes no pointers.
        let r = unsafe { rt.launch(&m, k::group_misuse::KERNEL, 1, 32, (mode,)) };
        let text = expect_kernel_failed(rt, r, (0, 0, 0), (thread, 0, 0), &[needle])?;
        println!("ERROR (expected): {text}");
    }
    let keys = rt.calloc::<u32>(32).map_err(e2s)?;
    let out = rt.calloc::<u64>(BINS + ATOMIC_FIELDS).map_err(e2s)?;
    let (kp, o) = (sym(rt, &keys)?.cast_const(), sym(rt, &out)?);
    let config = LaunchConfig::new(1, 32).shared_bytes(symmem::device::MAX_SHARED_BYTES);
    // SAFETY: `kp` holds one key per thread, `o` one record; it fails at its first
    // shared! array.
    let r = unsafe { rt.launch_with(&m, k::shared_hist::KERNEL, config, (kp, 1, o)) };
    let text = expect_kernel_failed(
        rt,
        r,
        (0, 0, 0),
        (0, 0, 0),
        &["256 bytes of shared! arrays and 49152 bytes of dynamic shared memory (shared_bytes), more than the 49152 bytes"],
    )?;
    println!("ERROR (expected): {text}");
    rt.free(keys).map_err(e2s)?;
    rt.free(out).map_err(e2s)
}
