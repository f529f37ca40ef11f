//! A device-initiated put/signal pipeline: on GPU PEs (the kernels' PTX, loaded from the
//! kernel crate) or on the CPU executor (the same kernels' host build), one source.
//!
//! PEs pair up: each even PE's producer kernel sends `CHUNKS` chunks to the next PE with
//! `put_signal_nbi_block`, signalling each chunk; that PE's consumer kernel waits on each
//! chunk's signal and sums the chunk while later chunks are still arriving. The consumer's
//! host checks every sum. Needs an even number of PEs. `SYMMEM_DEVICE=cuda` (or `auto` on
//! a machine with a GPU) runs it on GPUs.
//!
//! ```text
//! cargo run --release --example device_pipeline -- --pes 2
//! ```

#[path = "support/launch.rs"]
mod launch;

use std::process::ExitCode;

use clap::Parser;
use launch::{SelfLaunchArgs, Start};

use symmem::{Runtime, SymBuf};
use symmem_example_kernels::{pipeline_consume, pipeline_produce, PTX};

const CHUNKS: usize = 64;
const CHUNK_LEN: usize = 4096;
const THREADS: u32 = 128;

/// A device-initiated put/signal pipeline between pairs of PEs (an even number: --pes N,
/// or a launcher's).
#[derive(Parser)]
#[command(name = "device_pipeline", version)]
struct Args {
    /// The job's PEs.
    #[command(flatten)]
    launch: SelfLaunchArgs,
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("device_pipeline: {e}");
            ExitCode::FAILURE
        }
    }
}

fn sym<T>(rt: &Runtime, buf: &SymBuf<T>) -> symmem::Result<*mut T> {
    Ok(rt
        .ptr(buf, rt.my_pe())?
        .expect("own heap is mapped")
        .as_ptr())
}

fn run() -> symmem::Result<ExitCode> {
    if let Start::Done(code) = launch::start(&Args::parse().launch, None)? {
        return Ok(code);
    }
    let rt = symmem::init()?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let module = rt.load_module(&PTX)?;
    if n % 2 != 0 {
        eprintln!("device_pipeline pairs PEs up: run it with an even number of PEs (--pes 2)");
        return Ok(ExitCode::FAILURE);
    }
    let inbox = rt.alloc::<u64>(CHUNKS * CHUNK_LEN)?;
    // The producer's source is symmetric memory too, so kernels reach it on a GPU PE.
    let source = rt.alloc::<u64>(CHUNKS * CHUNK_LEN)?;
    let signals = rt.calloc::<u64>(CHUNKS)?;
    let sums = rt.calloc::<u64>(CHUNKS)?;
    let (inbox_p, sig_p, sums_p) = (sym(&rt, &inbox)?, sym(&rt, &signals)?, sym(&rt, &sums)?);
    let source_p = sym(&rt, &source)?;
    let start = std::time::Instant::now();
    let mut ok = true;
    if me % 2 == 0 {
        let data: Vec<u64> = (0..(CHUNKS * CHUNK_LEN) as u64)
            .map(|i| i ^ ((me as u64) << 40))
            .collect();
        rt.put(source.at(0), &data, me)?;
        // SAFETY: `inbox_p`, `source_p` and `sig_p` are symmetric addresses of live
        // allocations of the sizes passed.
        unsafe {
            rt.launch(
                &module,
                pipeline_produce::KERNEL,
                1,
                THREADS,
                (
                    inbox_p,
                    source_p.cast_const(),
                    CHUNK_LEN,
                    CHUNKS,
                    sig_p,
                    me as u32 + 1,
                ),
            )?
        };
        println!(
            "PE {me}: sent {CHUNKS} chunks of {} KiB to PE {} in {:.2?}",
            CHUNK_LEN * 8 / 1024,
            me + 1,
            start.elapsed()
        );
    } else {
        // SAFETY: symmetric addresses of live allocations of the sizes passed.
        unsafe {
            rt.launch(
                &module,
                pipeline_consume::KERNEL,
                1,
                THREADS,
                (inbox_p.cast_const(), CHUNK_LEN, CHUNKS, sig_p, sums_p),
            )?
        };
        let elapsed = start.elapsed();
        let mut got = vec![0u64; CHUNKS];
        rt.get(sums.at(0), &mut got, me)?;
        let producer = me as u64 - 1;
        let expected = |c: usize| -> u64 {
            (0..CHUNK_LEN as u64)
                .map(|i| (c as u64 * CHUNK_LEN as u64 + i) ^ (producer << 40))
                .fold(0u64, u64::wrapping_add)
        };
        let bad = (0..CHUNKS).filter(|&c| got[c] != expected(c)).count();
        ok = bad == 0;
        println!("PE {me} ({}): consumed {CHUNKS} chunks from PE {producer} in {elapsed:.2?}; {} of {CHUNKS} sums correct", rt.device_description(), CHUNKS - bad);
    }
    rt.barrier_all()?;
    rt.free(sums)?;
    rt.free(source)?;
    rt.free(signals)?;
    rt.free(inbox)?;
    rt.finalize()?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
