//! The `moe_dispatch` example at small sizes: 4 self-launched PEs, 2 simulated nodes × 2
//! PEs over sockets with fp8 dispatch, fp8 under weak ordering and a seeded schedule, the
//! capacity-overflow policies and the deterministic mode under two timings; the kernels'
//! block instances (`moe_dispatch_block`, `moe_expert_block`, the default) everywhere but
//! over the simulated nodes, which run the warp instances (`--scope warp`). The example
//! checks every step bit for bit against its host reference (fp8 also within its error
//! bound of bf16) and exits non-zero on any mismatch.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use symmem_test_harness::{wait_job, Job};

/// Longest a run may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(120);

/// Small sizes: a run takes a few seconds on CPU PEs of a debug build.
const SMALL: [&str; 8] = [
    "--tokens",
    "48",
    "--experts",
    "8",
    "--hidden",
    "16",
    "--iters",
    "1",
];

/// `target/<profile>/examples/moe_dispatch`, next to this test's `deps` directory.
fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    let bin = profile.join("examples").join("moe_dispatch");
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test` builds it; with a filtered run, build it first with `cargo build --example moe_dispatch`",
        bin.display()
    );
    bin
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Job {
    let mut cmd = Command::new(example());
    cmd.args(args)
        .env("SYMMEM_TIMEOUT", "60")
        .env("SYMMEM_BOOTSTRAP_TIMEOUT", "60")
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    wait_job(cmd.spawn().expect("starting moe_dispatch"), LIMIT)
}

/// Every PE of a 4-PE job printed its passed check.
fn assert_passed(job: &Job) {
    job.assert_success();
    for pe in 0..4 {
        let prefix = format!("PE {pe} of 4 (");
        if !job
            .stdout
            .lines()
            .any(|l| l.starts_with(&prefix) && l.contains("moe check passed"))
        {
            job.fail(&format!("no passed check from PE {pe} of 4"));
        }
    }
}

/// The number after `dropped tokens accounted: ` on PE 0's line.
fn dropped(job: &Job) -> u64 {
    let line = job
        .lines_with("PE 0 of 4")
        .into_iter()
        .next()
        .unwrap_or_else(|| job.fail("no line from PE 0"));
    line.rsplit(": ")
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| job.fail("no dropped-token count"))
}

#[test]
fn four_pes_by_default_device_and_baseline_agree_with_the_reference() {
    let job = run(&SMALL, &[]);
    assert_passed(&job);
    for path in ["device ", "host-a2a "] {
        assert!(
            job.stdout.lines().any(|l| l.starts_with(path)),
            "no {path}row in the table:\n{}",
            job.stdout
        );
    }
    assert_eq!(dropped(&job), 0, "auto capacity drops nothing");
}

/// `SMALL` with fp8 dispatch, which needs whole 128-element scale blocks.
fn small_fp8() -> Vec<&'static str> {
    let mut args = SMALL.to_vec();
    args[5] = "128";
    args.extend(["--dispatch", "fp8"]);
    args
}

#[test]
fn two_nodes_of_two_pes_over_sockets_with_warp_puts_and_fp8() {
    let mut args = small_fp8();
    args.extend([
        "--pes",
        "4",
        "--scope",
        "warp",
        "--blocks",
        "3",
        "--threads",
        "40",
    ]);
    let job = run(
        &args,
        &[
            ("SYMMEM_SIMULATE_NODES", "2"),
            ("SYMMEM_REMOTE_TRANSPORT", "socket"),
        ],
    );
    assert_passed(&job);
}

/// fp8 rows quantized straight into the peers' slots by whole blocks of a partial last
/// warp, with puts and signals delivered out of order and a seeded lane schedule.
#[test]
fn fp8_by_block_under_weak_ordering() {
    let mut args = small_fp8();
    args.extend([
        "--mode",
        "device",
        "--blocks",
        "2",
        "--threads",
        "37",
        "--json",
    ]);
    let job = run(
        &args,
        &[("SYMMEM_ORDERING", "weak"), ("SYMMEM_EXEC_SEED", "5")],
    );
    assert_passed(&job);
    assert!(
        job.stdout
            .lines()
            .any(|l| l.contains("\"dispatch\":\"fp8\"") && l.contains("\"fp8_error_of_bound\":")),
        "the device row reports its fp8 error:\n{}",
        job.stdout
    );
}

/// Four experts, a skewed router and room for 8 tokens per expert: the hot experts
/// overflow.
const OVERFLOW: [&str; 9] = [
    "--pes",
    "4",
    "--experts",
    "4",
    "--skew",
    "2",
    "--capacity",
    "8",
    "--json",
];

#[test]
fn capacity_overflow_errors_naming_the_expert_or_drops_and_still_checks() {
    let mut args = SMALL.to_vec();
    args.extend(OVERFLOW);
    args.extend(["--mode", "device", "--on-overflow", "error"]);
    let job = run(&args, &[]);
    if job.status.success() {
        job.fail("an overflow with --on-overflow error must fail");
    }
    let named = job.stderr.lines().any(|l| {
        l.contains("capacity overflow: expert ")
            && l.contains(" on PE ")
            && l.contains("capacity of 8")
    });
    if !named {
        job.fail("no error naming the expert, its PE and the capacity");
    }

    let mut args = SMALL.to_vec();
    args.extend(OVERFLOW);
    args.extend(["--on-overflow", "drop"]);
    let job = run(&args, &[]);
    assert_passed(&job);
    let n = dropped(&job);
    assert!(n > 0, "the skewed run drops tokens:\n{}", job.stdout);
    assert!(
        job.stdout
            .lines()
            .any(|l| l.contains("\"path\":\"device\"") && !l.contains("\"dropped\":0,")),
        "the device row reports its drops:\n{}",
        job.stdout
    );
}

/// The digest lines (`PE p: ... results digest X`) of a job, sorted by PE.
fn digests(job: &Job) -> Vec<String> {
    let mut lines: Vec<String> = job
        .stdout
        .lines()
        .filter(|l| l.contains("results digest "))
        .map(str::to_owned)
        .collect();
    lines.sort();
    if lines.is_empty() || !lines.len().is_multiple_of(4) {
        job.fail("want one digest line per PE and run");
    }
    lines
}

/// The deterministic mode with overflowing experts, three dispatch blocks of two warps
/// each: two runs with different timing (weak ordering and a seeded lane schedule, then
/// two simulated nodes over sockets with warp puts and another seed) check every step
/// against the host model of the (source PE, token) receive order and print the same
/// digest of their receive buffers, drops and combined tokens on every PE.
#[test]
fn deterministic_mode_gives_the_same_bits_under_different_timing() {
    let mut args = SMALL.to_vec();
    args.extend(OVERFLOW);
    args.extend([
        "--on-overflow",
        "drop",
        "--mode",
        "device",
        "--deterministic",
        "--blocks",
        "3",
        "--threads",
        "40",
    ]);
    let weak = run(
        &args,
        &[("SYMMEM_ORDERING", "weak"), ("SYMMEM_EXEC_SEED", "5")],
    );
    assert_passed(&weak);
    assert!(dropped(&weak) > 0, "the skewed run drops tokens");
    args.extend(["--scope", "warp"]);
    let nodes = run(
        &args,
        &[
            ("SYMMEM_SIMULATE_NODES", "2"),
            ("SYMMEM_REMOTE_TRANSPORT", "socket"),
            ("SYMMEM_EXEC_SEED", "11"),
        ],
    );
    assert_passed(&nodes);
    assert_eq!(
        digests(&weak),
        digests(&nodes),
        "the two runs' results differ"
    );
}

/// A bad binding option is a usage error (exit code 2) naming the values it takes, before
/// any PE starts, as with symrun and the other examples.
#[test]
fn a_bad_binding_is_a_usage_error() {
    for (args, needle) in [
        (
            &["--pes", "2", "--bind-to", "socket"][..],
            "--bind-to socket: expected core, numa, none",
        ),
        (
            &["--map-by", "slot"][..],
            "--map-by slot: expected core, numa",
        ),
    ] {
        let job = run(args, &[]);
        if job.status.code() != Some(2) || !job.stderr.contains(needle) {
            job.fail(&format!("{args:?}: want exit code 2 and {needle:?}"));
        }
    }
}
