//! The PE side of the device-API tests: `device-test-pe [--pes N] SCENARIO`.
//!
//! Each scenario launches kernels from `symmem-test-kernels` on the CPU executor and
//! checks the results exactly; it exits non-zero on any mismatch.

use std::process::ExitCode;

use symmem::{Runtime, SelfLaunch};
use symmem_test_kernels as k;

type Outcome = Result<(), String>;

fn main() -> ExitCode {
    match symmem::self_launch() {
        Ok(SelfLaunch::Finished(code)) => return ExitCode::from(code.clamp(0, 255) as u8),
        Ok(SelfLaunch::InJob) => {}
        Err(e) => {
            eprintln!("device-test-pe: {e}");
            return ExitCode::FAILURE;
        }
    }
    let scenario = std::env::args().skip(1).find(|a| !a.starts_with("--")).unwrap_or_default();
    let result = symmem::init().map_err(|e| format!("init: {e}")).and_then(|rt| {
        let r = match scenario.as_str() {
            "ring_put_signal" => ring_put_signal(&rt),
            other => Err(format!("unknown scenario {other:?}")),
        };
        r.and_then(|()| rt.finalize().map_err(|e| format!("finalize: {e}")))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("FAILED: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn e2s(e: symmem::Error) -> String {
    e.to_string()
}

/// A symmetric address of `buf` (this PE's copy), for kernel arguments.
fn sym<T>(rt: &Runtime, buf: &symmem::SymBuf<T>) -> Result<*mut T, String> {
    Ok(rt.ptr(buf, rt.my_pe()).map_err(e2s)?.expect("own heap is mapped").as_ptr())
}

/// A block puts to the right neighbour with put_signal_block; the neighbour's kernel waits
/// for the signal and then every element is checked.
fn ring_put_signal(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let len = 10_000usize;
    let dst = rt.calloc::<u64>(len).map_err(e2s)?;
    let sig = rt.calloc::<u64>(1).map_err(e2s)?;
    let src: Vec<u64> = (0..len as u64).map(|i| i * 7 + me as u64 * 1_000_000).collect();
    let (d, s) = (sym(rt, &dst)?, sym(rt, &sig)?);
    let srcp = src.as_ptr();
    // SAFETY: `d` and `s` are symmetric addresses of live allocations with `len` and 1
    // elements; `srcp` points at `len` readable u64s that outlive the launch.
    unsafe {
        rt.launch(1, 64, || k::ring_put_signal(d, srcp, len, s)).map_err(e2s)?;
        rt.launch(1, 1, || k::wait_signal(s, 1)).map_err(e2s)?;
    }
    let left = (me + n - 1) % n;
    let mut got = vec![0u64; len];
    rt.read_local(dst.at(0), &mut got).map_err(e2s)?;
    for (i, g) in got.iter().enumerate() {
        let want = i as u64 * 7 + left as u64 * 1_000_000;
        if *g != want {
            return Err(format!("PE {me}: element {i} is {g}, want {want}"));
        }
    }
    rt.barrier_all().map_err(e2s)?;
    println!("PE {me}: ring_put_signal ok");
    Ok(())
}
