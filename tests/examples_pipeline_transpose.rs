//! The `put_signal_pipeline` and `transpose` examples as jobs, with small sizes: on 4 PEs
//! of one node, and as 2 simulated nodes × 2 PEs (the socket transport between them;
//! there the fused transpose must fall back to get+transpose and say so). Each run must
//! report the world size and exact results.
//!
//! `cargo test` builds the examples into `target/<profile>/examples/` before running
//! tests; a filtered run (`cargo test --test examples_pipeline_transpose`) may not, so
//! build them first with `cargo build --example put_signal_pipeline --example transpose`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use symmem_test_harness::{run_job, wait_job, Job, Launcher};

/// `SYMMEM_TIMEOUT` for the jobs: a wait that never ends fails, naming it, after this.
const WAIT_LIMIT: &str = "30";

/// The example binary `name`, next to this test's `deps/` directory.
fn example(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    let path: PathBuf = profile_dir.join("examples").join(name);
    assert!(
        path.is_file(),
        "example binary {} not found: build it with `cargo build --example {name}` (a plain `cargo test` builds it)",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

/// Runs example `name` with `args` on `n` self-launched PEs and extra `env`.
fn run_example(name: &str, n: usize, args: &[&str], env: &[(&str, &str)]) -> Job {
    let mut all = vec![("SYMMEM_TIMEOUT", WAIT_LIMIT)];
    all.extend_from_slice(env);
    let job = run_job(&Launcher::SelfLaunch, n, &example(name), args, &all);
    job.assert_success();
    job
}

/// Panics unless stdout has a line containing `text`.
fn expect_line(job: &Job, text: &str) {
    if !job.stdout.lines().any(|l| l.contains(text)) {
        job.fail(&format!("no line containing {text:?}"));
    }
}

/// The pipeline's checks: world size, one exact row per CPU-PE variant, the final check.
fn check_pipeline(job: &Job, chunks: usize) {
    expect_line(job, "put_signal_pipeline: 4 PEs (cpu), pairs 0->2 1->3");
    for variant in ["sync copy", "put+quiet+flag+quiet", "put_signal_nbi"] {
        let exact = job
            .stdout
            .lines()
            .filter(|l| l.starts_with(variant))
            .filter(|l| l.ends_with(&format!("exact ({} chunks x 2)", 2 * chunks)))
            .count();
        if exact != 1 {
            job.fail(&format!(
                "expected one exact row for {variant}, found {exact}"
            ));
        }
    }
    expect_line(job, "stream variant: skipped (CPU PEs");
    expect_line(job, "check: every chunk exact on 4 PEs");
}

const PIPELINE_ARGS: &[&str] = &[
    "--chunk-kib",
    "4",
    "--chunks",
    "24",
    "--compute-us",
    "20",
    "--reps",
    "2",
];

#[test]
fn pipeline_on_4_pes() {
    let job = run_example("put_signal_pipeline", 4, PIPELINE_ARGS, &[]);
    check_pipeline(&job, 24);
}

#[test]
fn pipeline_on_2_nodes_triple_buffered() {
    let mut args = PIPELINE_ARGS.to_vec();
    args.extend(["--buffers", "3"]);
    let job = run_example(
        "put_signal_pipeline",
        4,
        &args,
        &[("SYMMEM_SIMULATE_NODES", "2")],
    );
    check_pipeline(&job, 24);
    expect_line(&job, "3 buffers");
}

#[test]
fn pipeline_self_launches_4_pes_by_default() {
    let mut cmd = Command::new(example("put_signal_pipeline"));
    cmd.args(PIPELINE_ARGS)
        .env("SYMMEM_TIMEOUT", WAIT_LIMIT)
        .env("SYMMEM_BOOTSTRAP_TIMEOUT", "60")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let job = wait_job(
        cmd.spawn().expect("start the example"),
        Duration::from_secs(120),
    );
    job.assert_success();
    check_pipeline(&job, 24);
}

#[test]
fn pipeline_rejects_bad_options() {
    let out = Command::new(example("put_signal_pipeline"))
        .args(["--buffers", "5"])
        .output()
        .expect("run the example");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--buffers 5: expected 2 or 3"), "{err}");
    let help = Command::new(example("put_signal_pipeline"))
        .arg("--help")
        .output()
        .expect("run the example");
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--compute-us <US>"));
}

const TRANSPOSE_ARGS: &[&str] = &["--sizes", "64,128", "--iters", "2"];

/// The transpose's checks: world size, one exact row per variant and size.
fn check_transpose(job: &Job, fused: &str) {
    expect_line(job, "transpose: 4 PEs (cpu), kernels on the CPU executor");
    for variant in ["alltoall+transpose", "get+transpose", fused] {
        for n in ["64", "128"] {
            let found = job.stdout.lines().any(|l| {
                let cols: Vec<&str> = l.split("  ").filter(|c| !c.trim().is_empty()).collect();
                l.starts_with(variant)
                    && cols.get(1).is_some_and(|c| c.trim() == n)
                    && l.ends_with("exact")
            });
            if !found {
                job.fail(&format!("no exact row for {variant} at n = {n}"));
            }
        }
    }
    expect_line(job, "check: every variant exact on 4 PEs");
}

#[test]
fn transpose_on_4_pes_uses_fused_loads() {
    let job = run_example("transpose", 4, TRANSPOSE_ARGS, &[]);
    check_transpose(&job, "fused (ptr loads)");
    assert!(
        !job.stderr.contains("fused variant unavailable"),
        "{}",
        job.stderr
    );
}

#[test]
fn transpose_on_2_nodes_falls_back_to_get() {
    let job = run_example(
        "transpose",
        4,
        TRANSPOSE_ARGS,
        &[("SYMMEM_SIMULATE_NODES", "2")],
    );
    check_transpose(&job, "fused -> get (fallback)");
    if !job.stderr.contains(
        "fused variant unavailable: not every PE is P2P reachable (PE 0 has no direct pointer to PE [2, 3])",
    ) {
        job.fail("no fallback line on stderr");
    }
}

#[test]
fn transpose_rejects_a_size_the_pes_do_not_divide() {
    let job = run_job(
        &Launcher::SelfLaunch,
        4,
        &example("transpose"),
        &["--sizes", "30"],
        &[("SYMMEM_TIMEOUT", WAIT_LIMIT)],
    );
    assert_eq!(job.status.code(), Some(2), "{}", job.stderr);
    assert!(
        job.stderr
            .contains("--sizes 30 is not a multiple of the 4 PEs"),
        "{}",
        job.stderr
    );
}
