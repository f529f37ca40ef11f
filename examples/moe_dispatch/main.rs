//! Device-initiated MoE token dispatch and combine (the kernels are in
//! `examples/kernels/src/moe/`), bf16 tokens (or fp8 dispatch), checked bit for bit against
//! a host reference and timed against a host-driven alltoall baseline. `--help` explains
//! the parameters.
//!
//! ```text
//! cargo run --release --example moe_dispatch                  # 4 PEs by default
//! cargo run --release --example moe_dispatch -- --pes 2 --tokens 4096 --experts 8 --json
//! cargo run --release --example moe_dispatch -- --pes 2 --preset deepep-low-latency --experts 16 --dispatch fp8
//! SYMMEM_SIMULATE_NODES=2 cargo run --release --example moe_dispatch   # 2 nodes x 2 PEs
//! ```

mod args;
mod baseline;
mod check;
mod device_path;
mod order;
mod report;
mod routing;

use std::error::Error;
use std::process::ExitCode;
use std::time::Instant;

use symmem::bootstrap::launcher::{self, LaunchOptions};
use symmem::bootstrap::select::decide;
use symmem::bootstrap::vars::process_env;
use symmem::bootstrap::Plan;
use symmem::{Runtime, SelfLaunch};
use symmem_example_kernels::PTX;

use args::{Dispatch, Mode, Overflow, Params};
use baseline::Baseline;
use check::{check_drops, Output, Reference};
use clap::Parser;
use device_path::{DevicePath, Geometry};
use order::ReceiveOrder;
use report::{Row, Times};
use routing::{token_values, Router, Routes, Shape};

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("moe_dispatch: {e}");
            ExitCode::FAILURE
        }
    }
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Outside any job and without `--pes`, starts [`args::DEFAULT_PES`] PEs of this program
/// and returns the job's exit code; `None` when this process should go on as a PE.
fn launch_default_job(params: &Params) -> Res<Option<i32>> {
    if params.launch.pes.is_some() {
        return Ok(None);
    }
    let config = symmem::Config::from_env()?;
    if decide(config.bootstrap, &process_env)?.plan != Plan::Single {
        return Ok(None);
    }
    params.validate(args::DEFAULT_PES)?;
    let opts = LaunchOptions {
        n_pes: args::DEFAULT_PES,
        program: std::env::current_exe()?.into_os_string(),
        args: std::env::args_os().skip(1).collect(),
        tag_output: false,
        timeout: config.bootstrap_timeout,
        kill_grace: symmem::DEFAULT_KILL_GRACE,
        binding: params.launch.binding.binding()?,
    };
    Ok(Some(launcher::run(&opts)?))
}

fn run() -> Res<ExitCode> {
    let mut params = Params::parse();
    params.apply_preset();
    // A binding the options cannot describe is a usage error, like clap's own, before
    // any PE starts.
    if let Err(why) = params.launch.binding.binding() {
        eprintln!("error: {why}\n\nFor more information, try '--help'.");
        return Ok(ExitCode::from(2));
    }
    // Bad parameters fail once, before any PE starts, when the job's size is known here.
    if std::env::var_os(launcher::ENV_RANK).is_none() {
        if let Some(n) = params.launch.pes {
            params.validate(n)?;
        }
    }
    if let SelfLaunch::Finished(code) = symmem::self_launch()? {
        return Ok(exit_code(code));
    }
    if let Some(code) = launch_default_job(&params)? {
        return Ok(exit_code(code));
    }
    let rt = symmem::init()?;
    params.validate(rt.n_pes())?;
    let rows = run_all(&rt, &params)?;
    if rt.my_pe() == 0 {
        print!("{}", report::table(&rows));
        if params.json {
            for r in &rows {
                println!("{}", r.json());
            }
        }
    }
    let dropped: u64 = rows.iter().map(|r| r.dropped).sum();
    println!(
        "PE {} of {} ({}): moe check passed: {} runs x {} steps equal the host reference; dropped tokens accounted: {dropped}",
        rt.my_pe(),
        rt.n_pes(),
        rt.device_description(),
        rows.len(),
        params.iters + 1
    );
    rt.finalize()?;
    Ok(ExitCode::SUCCESS)
}

/// Every run (tokens × experts × path), each checked after every step.
fn run_all(rt: &Runtime, params: &Params) -> Res<Vec<Row>> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let module = rt.load_module(&PTX)?;
    let device = if params.deterministic {
        "device-det"
    } else {
        "device"
    };
    let paths: &[&str] = match params.mode {
        Mode::Both => &[device, "host-a2a"],
        Mode::Device => &[device],
        Mode::Baseline => &["host-a2a"],
    };
    let total = params.tokens.len() * params.experts.len() * paths.len();
    let mut rows = Vec::with_capacity(total);
    let started = Instant::now();
    for &tokens in &params.tokens {
        for &experts in &params.experts {
            let shape = Shape {
                n_pes: n,
                tokens,
                experts,
                hidden: params.hidden,
                top_k: params.top_k,
                capacity: params.capacity_for(tokens, n),
                fp8: params.dispatch == Dispatch::Fp8,
            };
            let router = Router::new(experts, params.skew, params.seed);
            let routes = router.routes(&shape, me);
            let values = token_values(&shape, me, params.seed);
            let loads = router.loads(&shape);
            let reference = Reference::new(shape, &routes, &values);
            for &path in paths {
                if me == 0 {
                    eprintln!(
                        "moe_dispatch: run {}/{total}: {path}, {n} PEs, T={tokens} E={experts} k={} H={} {} capacity {} ({:.1?} so far)",
                        rows.len() + 1,
                        shape.top_k,
                        shape.hidden,
                        params.dispatch,
                        shape.capacity,
                        started.elapsed()
                    );
                }
                let run = Run {
                    rt,
                    shape: &shape,
                    routes: &routes,
                    reference: &reference,
                    loads: &loads,
                    policy: params.on_overflow,
                };
                let (times, dropped, fp8_error) = if path == device {
                    let (blocks, threads) = params.geometry(module.on_gpu());
                    let geometry = Geometry {
                        scope: params.scope,
                        blocks,
                        threads,
                        deterministic: params.deterministic,
                    };
                    let dev = DevicePath::new(rt, &module, shape, geometry, &routes, &values)?;
                    let order = ReceiveOrder::new(&shape, &router, params.seed, me);
                    let mut first_digest = None;
                    // A failed step ends the job: no collective free after it, which the
                    // other PEs (still in the step's collectives) could not match.
                    let result = run.steps(params.iters, path, || {
                        let t = dev.step()?;
                        let output = dev.collect(&loads)?;
                        let recv = dev.received()?;
                        let digest = order.digest(&output, &recv);
                        if params.deterministic {
                            order.check(path, me, &output.kept, &recv)?;
                            if *first_digest.get_or_insert(digest) != digest {
                                return Err(format!("{path}: PE {me}: a step's results differ from the first step's").into());
                            }
                        } else {
                            first_digest.get_or_insert(digest);
                        }
                        Ok((t, output))
                    })?;
                    if let Some(digest) = first_digest {
                        println!("PE {me}: {path} T={tokens} E={experts}: first step's results digest {digest:016x}");
                    }
                    dev.free()?;
                    result
                } else {
                    let base = Baseline::new(rt, shape, &routes, &values)?;
                    let result = run.steps(params.iters, path, || Ok(base.step()?))?;
                    base.free()?;
                    result
                };
                rows.push(Row {
                    path,
                    pes: n,
                    tokens,
                    experts,
                    top_k: shape.top_k,
                    hidden: shape.hidden,
                    dispatch: params.dispatch,
                    capacity: shape.capacity,
                    scope: if path == device {
                        let (blocks, threads) = params.geometry(module.on_gpu());
                        format!("{} {blocks}x{threads}", params.scope)
                    } else {
                        "-".into()
                    },
                    dropped,
                    fp8_error,
                    median: report::slowest_pe_medians(rt, &times)?,
                });
            }
        }
    }
    Ok(rows)
}

/// What every step of one run is checked against.
struct Run<'a> {
    rt: &'a Runtime,
    shape: &'a Shape,
    routes: &'a Routes,
    reference: &'a Reference<'a>,
    loads: &'a [u64],
    policy: Overflow,
}

impl Run<'_> {
    /// A warm-up step and `iters` timed steps of `step`, each checked; returns the timed
    /// steps' times, the tokens the job dropped per step and the largest fp8 error as a
    /// fraction of its bound.
    fn steps(
        &self,
        iters: usize,
        path: &str,
        mut step: impl FnMut() -> Res<(Times, Output)>,
    ) -> Res<(Vec<Times>, u64, f32)> {
        let me = self.rt.my_pe();
        let mut times = Vec::with_capacity(iters);
        let (mut dropped, mut fp8_error) = (0, 0f32);
        for i in 0..=iters {
            let (t, output) = step()?;
            fp8_error = fp8_error.max(self.reference.check(path, me, &output)?);
            dropped = check_drops(
                self.rt,
                path,
                self.shape,
                self.routes,
                &output.kept,
                self.loads,
                self.policy,
            )?;
            if i > 0 {
                times.push(t);
            }
        }
        Ok((times, dropped, fp8_error))
    }
}
