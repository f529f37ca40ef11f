//! Launches `my_kernels::ring` on every PE: each PE sends its row to its right neighbour
//! and waits for the row of its left one. `cargo run --example ring -- --pes 2`.

use std::process::ExitCode;

use symmem::{Cmp, Runtime, SelfLaunch, SymBuf};

/// u64s per row.
const N: usize = 256;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ring: {e}");
            ExitCode::FAILURE
        }
    }
}

/// This PE's address of `buf`: the symmetric address a kernel takes.
fn sym<T>(rt: &Runtime, buf: &SymBuf<T>) -> symmem::Result<*mut T> {
    let own = rt.ptr(buf, rt.my_pe())?;
    Ok(own.expect("a PE's own heap is always mapped").as_ptr())
}

fn run() -> symmem::Result<ExitCode> {
    if let SelfLaunch::Finished(code) = symmem::self_launch()? {
        return Ok(ExitCode::from(code.clamp(0, 255) as u8));
    }
    let rt = symmem::init()?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let module = rt.load_module(&my_kernels::PTX)?;
    let src = rt.alloc::<u64>(N)?;
    let dst = rt.calloc::<u64>(N)?;
    let sig = rt.calloc::<u64>(1)?;
    let row: Vec<u64> = (0..N as u64).map(|i| ((me as u64) << 32) | i).collect();
    rt.put(src.at(0), &row, me)?;
    rt.barrier_all()?;
    let (dst_p, src_p, sig_p) = (sym(&rt, &dst)?, sym(&rt, &src)?, sym(&rt, &sig)?);
    // SAFETY: symmetric addresses of live allocations of `N` (dst, src) and 1 (sig) u64s.
    unsafe {
        rt.launch(
            &module,
            my_kernels::ring::KERNEL,
            1,
            64,
            (dst_p, src_p.cast_const(), N, sig_p),
        )?
    };
    rt.signal_wait_until(sig.at(0), Cmp::Eq, 1)?;
    let mut got = vec![0u64; N];
    rt.get(dst.at(0), &mut got, me)?;
    let left = (me + n - 1) % n;
    let want: Vec<u64> = (0..N as u64).map(|i| ((left as u64) << 32) | i).collect();
    rt.barrier_all()?;
    if got != want {
        eprintln!("PE {me}: the row from PE {left} is wrong");
        return Ok(ExitCode::FAILURE);
    }
    println!("PE {me} of {n}: ring ok, {N} u64s from PE {left}");
    Ok(ExitCode::SUCCESS)
}
