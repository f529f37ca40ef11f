//! Launching the test PE program (`symmem-test-pe`) from the facade's integration tests.
//!
//! `SYMMEM_TEST_LAUNCHER=mpirun` runs the launcher-agnostic tests under Open MPI's
//! `mpirun` (build with `--features mpi`); otherwise they run under `symrun`.
#![allow(dead_code)] // each test file uses a different subset

use std::process::{Command, Stdio};
use std::time::Duration;

pub use symmem_test_harness::Job;
use symmem_test_harness::{run_job, wait_job, Launcher};

pub const TEST_PE: &str = env!("CARGO_BIN_EXE_symmem-test-pe");
pub const SYMRUN: &str = env!("CARGO_BIN_EXE_symrun");

fn symrun() -> Launcher {
    Launcher::Symrun(SYMRUN.into())
}

/// Runs `symmem-test-pe SCENARIO` on `n` PEs with the chosen launcher.
pub fn run_scenario(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    run_job(&Launcher::from_env(symrun()), n, TEST_PE, &[scenario], env)
}

/// Runs `symmem-test-pe SCENARIO` on `n` PEs under `symrun`, whatever the launcher choice.
pub fn run_symrun(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    run_job(&symrun(), n, TEST_PE, &[scenario], env)
}

/// Runs the test PE program directly (no launcher), e.g. for unique-id init.
pub fn spawn_pe(args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let mut cmd = Command::new(TEST_PE);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "SYMMEM_LAUNCH_ADDR",
        "SYMMEM_LAUNCH_NONCE",
        "SYMMEM_LAUNCH_RANK",
        "SYMMEM_LAUNCH_SIZE",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawning symmem-test-pe")
}

/// Waits for a child started by [`spawn_pe`], killing it if it overstays `limit`.
pub fn wait_output(child: std::process::Child, limit: Duration) -> Job {
    wait_job(child, limit)
}
