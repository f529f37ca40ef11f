//! The PE side of the device-API tests: `device-test-pe [--pes N] SCENARIO`, or
//! `device-test-pe --list-gpu`.
//!
//! Each scenario loads `symmem-test-kernels` (`Runtime::load_module`), launches its
//! kernels with `Runtime::launch` (on the CPU executor on CPU PEs, on the GPU with
//! `SYMMEM_DEVICE=cuda`) and checks the results exactly; it prints `PE i: SCENARIO ok`
//! and exits 0, or prints `FAILED: ...` and exits non-zero. Scenarios that expect an
//! error print it on stdout as `ERROR...`. A PE whose check fails exits at once, without
//! finalizing, so that peers waiting for it fail promptly instead of hanging.
//!
//! Kernels on a GPU PE reach only device memory, so every buffer a kernel reads or writes
//! is a symmetric allocation: the host fills it with `put` and reads it back with `get`
//! from its own PE. `--list-gpu` prints the scenarios that may run on GPU PEs of one node,
//! one per line, and `--list-gpu-2-nodes` those that also run with every PE's partner on
//! the other node (`SYMMEM_SIMULATE_NODES=2`: device operations through the proxy
//! channel); the others check what only the CPU executor does, or use host atomics and
//! waits on the heap, and refuse to run on a GPU PE.
//!
//! With `--pes N` the program self-launches N PEs; under another launcher (mpirun) the
//! test sets `SYMMEM_TEST_EXPECT_PES`, which every PE checks against the job's size (and
//! `SYMMEM_TEST_EXPECT_BOOTSTRAP` against the bootstrap in use).

#[path = "device_test_pe/alltoallv.rs"]
mod alltoallv;
#[path = "device_test_pe/amo.rs"]
mod amo;
#[path = "device_test_pe/block.rs"]
mod block;
#[path = "device_test_pe/collective.rs"]
mod collective;
#[path = "device_test_pe/element_types.rs"]
mod element_types;
#[path = "device_test_pe/failure.rs"]
mod failure;
#[path = "device_test_pe/generic.rs"]
mod generic;
#[path = "device_test_pe/pipeline.rs"]
mod pipeline;
#[path = "device_test_pe/ring.rs"]
mod ring;
#[path = "device_test_pe/rma.rs"]
mod rma;
#[path = "device_test_pe/several.rs"]
mod several;
#[path = "device_test_pe/signal.rs"]
mod signal;
#[path = "device_test_pe/stream_launch.rs"]
mod stream_launch;
#[path = "device_test_pe/sync.rs"]
mod sync;
#[path = "device_test_pe/threads.rs"]
mod threads;

use std::process::ExitCode;

use symmem::{Error, Runtime, SelfLaunch, SymBuf};

/// A scenario's result: `Err` carries what was wrong.
type Outcome = Result<(), String>;

/// A scenario: runs on an initialised runtime, checks, and says what was wrong.
type Scenario = fn(&Runtime) -> Outcome;

/// Where a scenario may run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Runs {
    /// On GPU PEs of one node (`--list-gpu`) and of two (`--list-gpu-2-nodes`).
    Gpu,
    /// On GPU PEs of one node only.
    GpuOneNode,
    /// On GPU PEs, with `SYMMEM_SIMULATE_NODES=2` only (`--list-gpu-2-nodes`).
    GpuTwoNodes,
    /// On the CPU executor only.
    CpuOnly,
}

/// Marks a scenario that may run on GPU PEs, on one node or two.
const GPU: Runs = Runs::Gpu;
/// Marks a scenario that only makes sense on the CPU executor.
const CPU_ONLY: Runs = Runs::CpuOnly;

/// Every scenario: name, function, and where it may run.
const SCENARIOS: &[(&str, Scenario, Runs)] = &[
    ("ring_put_signal", ring::ring_put_signal, GPU),
    // Every PE's P2P pointer: one node only.
    ("identity", ring::identity, Runs::GpuOneNode),
    // Asserts `KernelFailed` naming block and thread: a CPU-executor error (a GPU traps).
    ("two_nodes", ring::two_nodes, CPU_ONLY),
    // Needs SYMMEM_SIMULATE_NODES=2 (remote partners).
    ("proxy_flood", ring::proxy_flood, Runs::GpuTwoNodes),
    ("rma", rma::rma, GPU),
    ("put_signal", signal::put_signal, GPU),
    ("signal_cmp", signal::signal_cmp, GPU),
    ("wait_many", signal::wait_many, GPU),
    ("wait_test", signal::wait_test, GPU),
    ("atomics", amo::atomics, GPU),
    ("narrow_floats", element_types::narrow_floats, GPU),
    // Host atomics on the heap check the device ones (host AMOs on a GPU heap launch the
    // helper kernel, which a running kernel's stream would not wait for): CPU PEs.
    ("float_atomics", element_types::float_atomics, CPU_ONLY),
    ("strided", element_types::strided, GPU),
    ("generic_kernels", generic::generic_kernels, GPU),
    // Asserts the CPU executor's messages (a GPU records the operation, file and line).
    ("slice_bounds", generic::slice_bounds, CPU_ONLY),
    ("launch_on_stream", stream_launch::launch_on_stream, GPU),
    // The unsigned half of `atomics`, for the 2-node suite (each retry crosses the proxy).
    ("atomics_unsigned", amo::atomics_unsigned, CPU_ONLY),
    ("fence_quiet", sync::fence_quiet, GPU),
    ("barriers", sync::barriers, GPU),
    ("team_collectives", collective::team_collectives, GPU),
    // The runtime's own all-to-all-v kernel, launched directly.
    ("runtime_alltoallv", alltoallv::alltoallv, GPU),
    // Asserts `KernelFailed` naming the thread (a GPU trap kills the context).
    (
        "team_collective_errors",
        collective::team_collective_errors,
        CPU_ONLY,
    ),
    ("geometry", threads::geometry, GPU),
    ("thread_sync", threads::thread_sync, GPU),
    ("big_grid", threads::big_grid, GPU),
    ("cooperative", threads::cooperative, GPU),
    // Asserts the CPU executor's error texts and its 4096-thread cooperative limit.
    ("launch_args", threads::launch_args, CPU_ONLY),
    ("shared_warp", block::shared_warp, GPU),
    // Asserts the CPU executor's messages for misuses a GPU leaves undefined.
    ("shared_warp_misuse", block::shared_warp_misuse, CPU_ONLY),
    ("pipeline", pipeline::pipeline, GPU),
    // Asserts `KernelFailed` from a panicking kernel thread (a GPU trap kills the context).
    ("kernel_panic", failure::kernel_panic, CPU_ONLY),
    // Host atomics and waits on the heap, and `KernelFailed` naming the dead PE.
    ("kill_in_wait", failure::kill_in_wait, CPU_ONLY),
    // A device wait for a live, silent PE fails at its deadline, naming both PEs.
    ("silent_peer", failure::silent_peer, Runs::GpuOneNode),
    (
        "kill_in_team_barrier",
        failure::kill_in_team_barrier,
        CPU_ONLY,
    ),
    ("early_exit", failure::early_exit, Runs::GpuOneNode),
    // A peer process that exits while a kernel waits for it fails the launch at once.
    (
        "peer_exits_in_kernel_wait",
        failure::peer_exits_in_kernel_wait,
        Runs::GpuOneNode,
    ),
    // A device `g` through the proxy to a killed PE of another node (2 simulated nodes).
    ("kill_remote", failure::kill_remote, CPU_ONLY),
    // Deliberately missing fences, for the weak-ordering tests (they decide what to expect).
    ("flag_without_fence", sync::flag_without_fence, CPU_ONLY),
    ("nbi_source_reused", sync::nbi_source_reused, CPU_ONLY),
    ("get_nbi_read_early", sync::get_nbi_read_early, CPU_ONLY),
    // A second runtime from a unique id launching kernels beside the first, on another
    // thread (GPU PEs: two runtimes on one GPU, not yet run on one).
    ("two_runtimes", several::two_runtimes, CPU_ONLY),
];

/// The environment variable with the number of PEs the job must have.
const EXPECT_PES: &str = "SYMMEM_TEST_EXPECT_PES";

/// Writes one `FAILED: …` line to stderr in a single write, so that lines of PEs sharing
/// the stderr pipe never interleave (`eprintln!` writes each formatted piece separately).
macro_rules! fail_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let list = |wanted: &[Runs]| {
        for (name, _, runs) in SCENARIOS {
            if wanted.contains(runs) {
                println!("{name}");
            }
        }
        ExitCode::SUCCESS
    };
    if args.iter().any(|a| a == "--list-gpu") {
        return list(&[Runs::Gpu, Runs::GpuOneNode]);
    }
    if args.iter().any(|a| a == "--list-gpu-2-nodes") {
        return list(&[Runs::Gpu, Runs::GpuTwoNodes]);
    }
    // A self-launched job expects the number of PEs it was asked for. Set before any
    // thread exists, and inherited by the PEs.
    if let Some(n) = args
        .iter()
        .position(|a| a == "--pes")
        .and_then(|i| args.get(i + 1))
    {
        if std::env::var_os(EXPECT_PES).is_none() {
            std::env::set_var(EXPECT_PES, n);
        }
    }
    match symmem::self_launch() {
        Ok(SelfLaunch::Finished(code)) => return ExitCode::from(code.clamp(0, 255) as u8),
        Ok(SelfLaunch::InJob) => {}
        Err(e) => {
            eprintln!("device-test-pe: {e}");
            return ExitCode::FAILURE;
        }
    }
    let wanted = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_default();
    // `a+b+c` runs scenarios a, b and c in turn in one job (one init), a barrier apart.
    let mut scenarios = Vec::new();
    for scenario in wanted.split('+') {
        let Some(&found) = SCENARIOS.iter().find(|(name, ..)| *name == scenario) else {
            let known: Vec<&str> = SCENARIOS.iter().map(|(n, ..)| *n).collect();
            eprintln!("unknown scenario {scenario:?}; known: {}", known.join(" "));
            return ExitCode::from(2);
        };
        scenarios.push(found);
    }
    if scenarios.len() > 1 && scenarios.iter().any(|(name, ..)| *name == "two_nodes") {
        eprintln!("two_nodes runs alone (it splits the job into two nodes itself)");
        return ExitCode::from(2);
    }
    if wanted == "two_nodes" {
        if let Err(msg) = ring::split_into_two_nodes() {
            fail_line!("FAILED: {msg}");
            return ExitCode::FAILURE;
        }
    }
    let rt = match init() {
        Ok(rt) => rt,
        Err(msg) => {
            fail_line!("FAILED: {msg}");
            return ExitCode::FAILURE;
        }
    };
    for (i, &(name, run, runs)) in scenarios.iter().enumerate() {
        let result = if rt.is_gpu() && runs == Runs::CpuOnly {
            Err(format!(
                "{name} is a CPU-only scenario and this is a GPU PE ({})",
                rt.device_description()
            ))
        } else {
            run(&rt).and_then(|()| match i + 1 < scenarios.len() {
                true => rt
                    .barrier_all()
                    .map_err(|e| format!("the barrier after {name}: {e}")),
                false => Ok(()),
            })
        };
        if let Err(msg) = result {
            fail_line!("FAILED: PE {}: {name}: {msg}", rt.my_pe());
            // Exit without finalizing: peers may be waiting for this PE in another
            // operation (a barrier, a signal), and they detect an exited PE at once.
            std::process::exit(1);
        }
        println!("PE {}: {name} ok", rt.my_pe());
    }
    match rt.finalize() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fail_line!("FAILED: finalize: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `symmem::init`, then the check that the job is the one the test launched: an MPI
/// binary started by a foreign mpirun would otherwise pass as N one-PE jobs.
fn init() -> Result<Runtime, String> {
    let rt = symmem::init().map_err(|e| format!("init: {e}"))?;
    let expected: usize = std::env::var(EXPECT_PES)
        .map_err(|_| format!("{EXPECT_PES} is not set (use --pes N)"))?
        .parse()
        .map_err(|_| format!("bad {EXPECT_PES}"))?;
    ensure(rt.n_pes() == expected, || {
        format!("n_pes = {}, but the test launched {expected}", rt.n_pes())
    })?;
    let kind = rt.bootstrap_kind().to_string();
    match std::env::var("SYMMEM_TEST_EXPECT_BOOTSTRAP") {
        Ok(want) if want != kind => Err(format!("bootstrap is {kind}, the test expected {want}")),
        _ => Ok(rt),
    }
}

/// An error as text.
fn e2s(e: symmem::Error) -> String {
    e.to_string()
}

/// `Ok` if `cond` holds, else `Err` with the message.
fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Outcome {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

/// Checks `got` against `want` element by element, naming the first difference.
fn check_eq<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], want: &[T]) -> Outcome {
    ensure(got.len() == want.len(), || {
        format!("{what}: {} elements, want {}", got.len(), want.len())
    })?;
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: element {i} is {:?}, want {:?}",
            got[i], want[i]
        )),
    }
}

/// A symmetric address of `buf` (this PE's copy), for kernel arguments.
fn sym<T>(rt: &Runtime, buf: &SymBuf<T>) -> Result<*mut T, String> {
    Ok(rt
        .ptr(buf, rt.my_pe())
        .map_err(e2s)?
        .ok_or("own heap is not mapped")?
        .as_ptr())
}

/// This PE's copy of `buf`, copied out with `get` (a GPU heap is reached by copies only).
fn read_all<T: symmem::Pod>(rt: &Runtime, buf: &SymBuf<T>) -> Result<Vec<T>, String> {
    let mut out = vec![T::zeroed(); buf.len()];
    rt.get(buf.at(0), &mut out, rt.my_pe()).map_err(e2s)?;
    Ok(out)
}

/// A new symmetric allocation holding `data` on this PE, for a kernel's input or output
/// (a GPU kernel cannot reach host memory). Collective: every PE calls it with the same
/// length at the same point.
fn sym_from<T: symmem::Pod>(rt: &Runtime, data: &[T]) -> Result<SymBuf<T>, String> {
    let buf = rt.alloc::<T>(data.len()).map_err(e2s)?;
    rt.put(buf.at(0), data, rt.my_pe()).map_err(e2s)?;
    Ok(buf)
}

/// Checks that a launch failed with `KernelFailed` on this PE, first in `block` and
/// `thread`, with a message containing every one of `needles`; returns the error's text.
fn expect_kernel_failed(
    rt: &Runtime,
    result: symmem::Result<()>,
    block: (u32, u32, u32),
    thread: (u32, u32, u32),
    needles: &[&str],
) -> Result<String, String> {
    let want = || {
        format!(
            "KernelFailed on PE {} in block {block:?} thread {thread:?} mentioning {needles:?}",
            rt.my_pe()
        )
    };
    let e = match result {
        Ok(()) => return Err(format!("the launch succeeded; expected {}", want())),
        Err(e) => e,
    };
    let text = e.to_string();
    match e {
        Error::KernelFailed {
            pe,
            block: b,
            thread: t,
            message,
        } if pe == rt.my_pe()
            && b == block
            && t == thread
            && needles.iter().all(|n| message.contains(n)) =>
        {
            Ok(text)
        }
        _ => Err(format!("expected {}, got: {text}", want())),
    }
}
