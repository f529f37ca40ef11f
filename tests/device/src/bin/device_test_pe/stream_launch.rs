//! `Runtime::launch_on_stream`: a typed launch queued on a stream, checked after the
//! stream's synchronize; and the launch's own checks failing the call.

use symmem::Runtime;
use symmem_test_kernels::collective::THREADS;
use symmem_test_kernels::element_types as k;
use symmem_test_kernels::{pattern, PTX};

use super::{check_eq, e2s, ensure, read_all, sym, sym_from, Outcome};

/// The `strided` kernel (contiguous, block scope) launched on a stream twice, with the
/// stream synchronized before each check; then a block over CUDA's limit is refused by
/// the call, naming the operation. Prints the error as `ERROR (expected): …`.
pub fn launch_on_stream(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let left = (me + n - 1) % n;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let stream = rt.create_stream().map_err(e2s)?;
    let nelems = 100usize;
    for round in 0..2u32 {
        let src = sym_from(
            rt,
            &(0..nelems)
                .map(|i| pattern(me, round, i))
                .collect::<Vec<_>>(),
        )?;
        let dst = rt.calloc::<u64>(nelems).map_err(e2s)?;
        let got = rt.calloc::<u64>(nelems).map_err(e2s)?;
        let (d, s, g) = (sym(rt, &dst)?, sym(rt, &src)?, sym(rt, &got)?);
        // SAFETY: `d`, `s` and `g` are symmetric addresses of `nelems` u64s, alive until
        // the stream is synchronized below.
        unsafe {
            rt.launch_on_stream(
                &m,
                k::strided::KERNEL,
                1,
                THREADS,
                (d, s.cast_const(), g, nelems, 1usize, 1usize, 2u32),
                &stream,
            )
        }
        .map_err(e2s)?;
        stream.synchronize().map_err(e2s)?;
        rt.barrier_all().map_err(e2s)?;
        let want: Vec<u64> = (0..nelems).map(|i| pattern(left, round, i)).collect();
        check_eq(&format!("round {round}: dst"), &read_all(rt, &dst)?, &want)?;
        let want: Vec<u64> = (0..nelems).map(|i| pattern(me, round, i)).collect();
        check_eq(&format!("round {round}: got"), &read_all(rt, &got)?, &want)?;
        rt.barrier_all().map_err(e2s)?;
        rt.free(src).map_err(e2s)?;
        rt.free(dst).map_err(e2s)?;
        rt.free(got).map_err(e2s)?;
    }
    let null = std::ptr::null_mut::<u64>();
    // SAFETY: the launch is refused before any thread runs.
    let refused = unsafe {
        rt.launch_on_stream(
            &m,
            k::strided::KERNEL,
            1,
            2048,
            (null, null.cast_const(), null, 0usize, 1usize, 1usize, 2u32),
            &stream,
        )
    };
    match refused {
        Err(e) => {
            let text = e.to_string();
            ensure(text.contains("launch_on_stream"), || {
                format!("the refused launch's error does not name launch_on_stream: {text}")
            })?;
            println!("ERROR (expected): {text}");
            Ok(())
        }
        Ok(()) => Err("a block of 2048 threads was launched on a stream".into()),
    }
}
