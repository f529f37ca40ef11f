//! Running `device-test-pe SCENARIO` as a job of N PEs from the integration tests.
//!
//! By default the program self-launches (`--pes N`). With `SYMMEM_TEST_LAUNCHER=mpirun`
//! the tests that allow it run under Open MPI's `mpirun` instead (build with
//! `--features mpi`).
#![allow(dead_code)] // each test file uses a different subset

pub use symmem_test_harness::Job;
use symmem_test_harness::{run_job, Launcher};

/// The PE program.
pub const PE_PROGRAM: &str = env!("CARGO_BIN_EXE_device-test-pe");

/// `SYMMEM_TIMEOUT` for the jobs: a kernel or barrier still waiting after this long (a
/// signal that never comes) fails with a message naming the wait. Every scenario's
/// launches take well under a few seconds.
const WAIT_LIMIT: &str = "30";

/// Runs `scenario` on `n` PEs with the chosen launcher.
pub fn run(n: usize, scenario: &str) -> Job {
    run_with(&Launcher::from_env(Launcher::SelfLaunch), n, scenario)
}

/// Runs `scenario` on `n` self-launched PEs, whatever the launcher choice (for tests
/// that rely on the built-in launcher's exit codes).
pub fn run_self_launched(n: usize, scenario: &str) -> Job {
    run_with(&Launcher::SelfLaunch, n, scenario)
}

/// [`run_self_launched`] with extra environment `env`.
pub fn run_self_launched_with_env(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    run_env(&Launcher::SelfLaunch, n, scenario, env)
}

fn run_with(launcher: &Launcher, n: usize, scenario: &str) -> Job {
    run_env(launcher, n, scenario, &[])
}

/// Runs `scenario` on `n` PEs with the chosen launcher and extra environment `env`.
pub fn run_with_env(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    run_env(&Launcher::from_env(Launcher::SelfLaunch), n, scenario, env)
}

fn run_env(launcher: &Launcher, n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    let mut all = vec![("SYMMEM_TIMEOUT", WAIT_LIMIT)];
    all.extend_from_slice(env);
    run_job(launcher, n, PE_PROGRAM, &[scenario], &all)
}
