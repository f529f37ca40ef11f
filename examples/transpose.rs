//! Distributed transpose with accumulation, the benchmark of the reference doc (§3): an
//! `n × n` f64 matrix distributed by column blocks over the PEs; each PE adds its column
//! block of the transpose to an output block it already holds. Three variants, each
//! checked exactly against a host reference (the values are small integers):
//!
//! - `alltoall`: `Team::alltoall` of the blocks, then one local transpose-and-accumulate
//!   kernel (`transpose_staged`);
//! - `get`: one kernel that, PE by PE, `get_block`s the remote block into a staging buffer
//!   and transposes it, interleaved (`transpose_get`);
//! - `fused`: one kernel that loads every remote block through `ptr(a, pe)` and transposes
//!   and accumulates in place, no staging (`transpose_fused`). Only when every PE is P2P
//!   reachable; otherwise the `get` kernel runs in its place and a line on stderr says so.
//!
//! The kernels are `symmem_example_kernels::transpose`: PTX on GPU PEs, the CPU executor
//! on CPU PEs, one source. PE 0 prints aggregate GB/s (matrix bytes / time) per variant.
//!
//! ```text
//! cargo run --release --example transpose                           # 4 PEs
//! cargo run --release --example transpose -- --sizes 512,2048 --iters 5
//! SYMMEM_SIMULATE_NODES=2 cargo run --release --example transpose  # fused falls back
//! ```

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use support::launch::{SelfLaunchArgs, Start};
use support::{all_reduce, positive};
use symmem::collectives::Sum;
use symmem::{Module, Runtime, SymBuf};
use symmem_example_kernels::transpose::{transpose_fused, transpose_get, transpose_staged};
use symmem_example_kernels::PTX;

/// Distributed transpose with accumulation (alltoall | get | fused).
///
/// Aggregate GB/s = n * n * 8 bytes / wall time of the slowest PE. The fused variant needs a
/// P2P pointer to every PE (same node); otherwise get+transpose runs in its place. 4 PEs
/// are self-launched without --pes or a launcher.
#[derive(Parser)]
#[command(name = "transpose", version)]
struct Args {
    /// The job's PEs.
    #[command(flatten)]
    launch: SelfLaunchArgs,
    /// Matrix orders n, comma-separated, each a multiple of the PE count; the matrix is
    /// n x n f64
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "256,512,1024", value_parser = positive)]
    sizes: Vec<usize>,
    /// Timed runs per variant and size; the best is reported
    #[arg(long, value_name = "K", default_value_t = 3, value_parser = positive)]
    iters: usize,
    /// Threads per block of the kernels
    #[arg(long, value_name = "T", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Blocks per launch, at most n / PEs (0: 4 on CPU PEs, 264 on GPUs)
    #[arg(long, value_name = "G", default_value_t = 0)]
    grid: u32,
}

/// One way of computing the transpose.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Alltoall,
    Get,
    Fused,
}

/// A matrix size's buffers and kernel arguments.
struct Setup<'rt> {
    rt: &'rt Runtime,
    module: &'rt Module,
    nb: usize,
    grid: u32,
    threads: u32,
    a: SymBuf<f64>,
    recv: SymBuf<f64>,
    staging: SymBuf<f64>,
    out: SymBuf<f64>,
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("transpose: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `M[r][c]`: small integers, so every sum is exact in f64.
fn m(r: usize, c: usize) -> f64 {
    ((r * 37 + c * 11) % 4093) as f64
}

/// The initial value of `out[r][c]` (what the transpose accumulates into).
fn init(r: usize, c: usize) -> f64 {
    ((r + 3 * c) % 17) as f64
}

/// One row of the table: variant `v` on an `n` x `n` matrix, its best time and check.
fn print_row(v: Variant, fused_ok: bool, n: usize, best: Duration, bad: u64) {
    let name = match v {
        Variant::Alltoall => "alltoall+transpose",
        Variant::Get => "get+transpose",
        Variant::Fused if fused_ok => "fused (ptr loads)",
        Variant::Fused => "fused -> get (fallback)",
    };
    let bytes = (n * n * 8) as f64;
    let check = if bad == 0 {
        "exact".to_string()
    } else {
        format!("WRONG ({bad} elements)")
    };
    println!(
        "{name:<24} {n:>6} {:>9.1} {:>10.3} {:>9.2}  {check}",
        bytes / (1 << 20) as f64,
        best.as_secs_f64() * 1e3,
        bytes / best.as_secs_f64() / 1e9,
    );
}

fn run() -> symmem::Result<ExitCode> {
    let args = Args::parse();
    let (sizes, iters, threads, grid) = (args.sizes, args.iters, args.threads, args.grid);
    if let Start::Done(code) = support::launch::start(&args.launch, Some(4))? {
        return Ok(code);
    }
    let rt = symmem::init()?;
    let (me, n_pes) = (rt.my_pe(), rt.n_pes());
    if let Some(&bad) = sizes.iter().find(|&&s| s % n_pes != 0) {
        if me == 0 {
            eprintln!("transpose: --sizes {bad} is not a multiple of the {n_pes} PEs");
        }
        return Ok(ExitCode::from(2));
    }
    let module = rt.load_module(&PTX)?;
    let grid = match grid {
        0 if module.on_gpu() => 264,
        0 => 4,
        g => g,
    };
    let scratch = rt.calloc::<u64>(1)?;
    if me == 0 {
        println!(
            "transpose: {n_pes} PEs ({}), kernels on {}, grid {grid} x {threads} threads, best of {iters}",
            rt.device_description(),
            if module.on_gpu() { "the GPU" } else { "the CPU executor" }
        );
        println!(
            "{:<24} {:>6} {:>9} {:>10} {:>9}  check",
            "variant", "n", "MiB", "best ms", "GB/s"
        );
    }
    let mut all_exact = true;
    for (step, &n) in sizes.iter().enumerate() {
        if me == 0 {
            eprintln!("progress: {}/{}: n = {n}", step + 1, sizes.len());
        }
        let nb = n / n_pes;
        let setup = Setup {
            rt: &rt,
            module: &module,
            nb,
            grid: grid.min(nb as u32),
            threads,
            a: rt.alloc::<f64>(n * nb)?,
            recv: rt.alloc::<f64>(n * nb)?,
            staging: rt.alloc::<f64>(nb * nb)?,
            out: rt.alloc::<f64>(n * nb)?,
        };
        let a: Vec<f64> = (0..n * nb).map(|i| m(i / nb, me * nb + i % nb)).collect();
        rt.put(setup.a.at(0), &a, me)?;
        // Fused needs a direct pointer to every PE, from every PE.
        let unreachable: Vec<usize> = (0..n_pes)
            .filter(|&j| matches!(rt.ptr(&setup.a, j), Ok(None)))
            .collect();
        let fused_ok = all_reduce(&rt, &scratch, &[unreachable.len() as u64], Sum)?[0] == 0;
        if !fused_ok && me == 0 && step == 0 {
            eprintln!(
                "transpose: fused variant unavailable: not every PE is P2P reachable (PE 0 has no direct pointer to PE {:?}); running get+transpose in its place",
                unreachable
            );
        }
        for v in [Variant::Alltoall, Variant::Get, Variant::Fused] {
            let (best, bad) = setup.time(v, fused_ok, iters)?;
            let bad = all_reduce(&rt, &scratch, &[bad], Sum)?[0];
            all_exact &= bad == 0;
            if me == 0 {
                print_row(v, fused_ok, n, best, bad);
            }
        }
        rt.barrier_all()?;
        rt.free(setup.out)?;
        rt.free(setup.staging)?;
        rt.free(setup.recv)?;
        rt.free(setup.a)?;
    }
    if me == 0 {
        println!(
            "check: {} on {n_pes} PEs",
            if all_exact {
                "every variant exact"
            } else {
                "MISMATCHES"
            }
        );
    }
    rt.free(scratch)?;
    rt.finalize()?;
    Ok(if all_exact {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

impl Setup<'_> {
    /// Runs `v` `iters` times from a fresh output; returns the best time (common start to
    /// the slowest PE's end) and the wrong elements this PE saw over all runs.
    fn time(&self, v: Variant, fused_ok: bool, iters: usize) -> symmem::Result<(Duration, u64)> {
        let rt = self.rt;
        let (me, nb) = (rt.my_pe(), self.nb);
        let n = nb * rt.n_pes();
        let fresh: Vec<f64> = (0..n * nb).map(|i| init(i / nb, i % nb)).collect();
        // out[r][c] = init + M^T[r][me·nb + c] = init + M[me·nb + c][r].
        let expected: Vec<f64> = (0..n * nb)
            .map(|i| init(i / nb, i % nb) + m(me * nb + i % nb, i / nb))
            .collect();
        let mut got = vec![0f64; n * nb];
        let (mut best, mut bad) = (Duration::MAX, 0u64);
        for _ in 0..iters {
            rt.put(self.out.at(0), &fresh, me)?;
            rt.barrier_all()?;
            let start = Instant::now();
            self.once(v, fused_ok)?;
            rt.barrier_all()?;
            best = best.min(start.elapsed());
            rt.get(self.out.at(0), &mut got, me)?;
            bad += got.iter().zip(&expected).filter(|(g, e)| g != e).count() as u64;
        }
        Ok((best, bad))
    }

    /// One transpose with variant `v`.
    fn once(&self, v: Variant, fused_ok: bool) -> symmem::Result<()> {
        let rt = self.rt;
        let (a, out) = (rt.sym_slice(&self.a)?, rt.sym_slice(&self.out)?);
        let nb = self.nb;
        // The launches' arguments are typed slices of live symmetric allocations; the
        // kernels check every range they use against them.
        match v {
            Variant::Alltoall => {
                rt.team_world().alltoall(&self.recv, &self.a, nb * nb)?;
                let recv = rt.sym_slice(&self.recv)?;
                let blocks = rt.n_pes();
                // SAFETY: the slices are of live allocations.
                unsafe {
                    rt.launch(
                        self.module,
                        transpose_staged::KERNEL,
                        self.grid,
                        self.threads,
                        (recv, out, nb, blocks),
                    )
                }
            }
            // SAFETY: the slices are of live allocations; every PE's copy of `a` is
            // reachable through `ptr`, as `fused_ok` says.
            Variant::Fused if fused_ok => unsafe {
                rt.launch(
                    self.module,
                    transpose_fused::KERNEL,
                    self.grid,
                    self.threads,
                    (a, out, nb),
                )
            },
            Variant::Get | Variant::Fused => {
                let staging = rt.sym_slice(&self.staging)?;
                // SAFETY: the slices are of live allocations.
                unsafe {
                    rt.launch(
                        self.module,
                        transpose_get::KERNEL,
                        self.grid,
                        self.threads,
                        (a, staging, out, nb),
                    )
                }
            }
        }
    }
}
