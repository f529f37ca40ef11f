//! The first symmem program: a ring of puts and a barrier.
//!
//! Each PE puts a greeting (its PE number and a value) into its right neighbour's inbox,
//! waits at `barrier_all`, and prints what arrived in its own inbox.
//!
//! ```text
//! cargo run --release --example hello -- --pes 4        # self-launch 4 PEs
//! cargo run --release --bin symrun -- -n 4 --tag-output target/release/examples/hello
//! torchrun --nproc-per-node 4 --no-python target/release/examples/hello
//! srun -n 4 --mpi=none target/release/examples/hello       # Slurm without PMI
//! mpiexec.hydra -n 4 target/release/examples/hello         # MPICH's Hydra (PMI-1)
//! ```

#[path = "support/launch.rs"]
mod launch;

use std::process::ExitCode;

use clap::Parser;
use launch::{SelfLaunchArgs, Start};

/// The first symmem program: a ring of puts and a barrier, on N PEs (--pes N, or a launcher's).
#[derive(Parser)]
#[command(name = "hello", version)]
struct Args {
    /// The job's PEs.
    #[command(flatten)]
    launch: SelfLaunchArgs,
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hello: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> symmem::Result<ExitCode> {
    if let Start::Done(code) = launch::start(&Args::parse().launch, None)? {
        return Ok(code);
    }
    let rt = symmem::init()?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    // inbox[0] = sender PE, inbox[1] = its greeting value.
    let inbox = rt.calloc::<u64>(2)?;
    let right = (me + 1) % n;
    rt.put(inbox.at(0), &[me as u64, 1000 + me as u64], right)?;
    rt.barrier_all()?;

    let mut got = [0u64; 2];
    rt.get(inbox.at(0), &mut got, me)?;
    let left = (me + n - 1) % n;
    println!(
        "PE {me} of {n} (host {}, {} PEs on its node): received {} from PE {}",
        rt.hostname_of(me)?,
        rt.local_pes().len(),
        got[1],
        got[0]
    );
    if got != [left as u64, 1000 + left as u64] {
        eprintln!("PE {me}: expected greeting {} from PE {left}", 1000 + left);
        return Ok(ExitCode::FAILURE);
    }
    rt.free(inbox)?;
    rt.finalize()?;
    Ok(ExitCode::SUCCESS)
}
