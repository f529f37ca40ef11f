//! Launching the test PE program (`symmem-test-pe`) from integration tests.
//!
//! `SYMMEM_TEST_LAUNCHER=mpirun` runs the launcher-agnostic tests under Open MPI's
//! `mpirun` (build with `--features mpi`); otherwise they run under `symrun`.
#![allow(dead_code)] // each test file uses a different subset

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const TEST_PE: &str = env!("CARGO_BIN_EXE_symmem-test-pe");
pub const SYMRUN: &str = env!("CARGO_BIN_EXE_symrun");

/// How the multi-PE tests start their PEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Symrun,
    Mpirun,
}

pub fn launcher() -> Launcher {
    match std::env::var("SYMMEM_TEST_LAUNCHER").as_deref() {
        Ok("mpirun") => Launcher::Mpirun,
        Ok("symrun") | Err(_) => Launcher::Symrun,
        Ok(other) => panic!("SYMMEM_TEST_LAUNCHER={other}: expected symrun or mpirun"),
    }
}

/// The result of one job.
pub struct Job {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Job {
    fn from(out: Output, elapsed: Duration) -> Self {
        Job {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed,
        }
    }

    /// Panics with the job's output unless it succeeded.
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.status.success(),
            "job failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Lines of stdout starting with `prefix`.
    pub fn lines_with(&self, prefix: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }
}

/// Runs `symmem-test-pe SCENARIO` on `n` PEs with the chosen launcher.
pub fn run_scenario(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    run_with(launcher(), n, scenario, env)
}

/// Runs `symmem-test-pe SCENARIO` on `n` PEs under `symrun`, whatever the launcher choice.
pub fn run_symrun(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    run_with(Launcher::Symrun, n, scenario, env)
}

fn run_with(launcher: Launcher, n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    let n_s = n.to_string();
    let mut cmd = match launcher {
        Launcher::Symrun => {
            let mut c = Command::new(SYMRUN);
            c.args(["-n", &n_s, "--kill-grace", "10", TEST_PE, scenario]);
            c
        }
        Launcher::Mpirun => {
            let mut c = Command::new("mpirun");
            c.args(["-np", &n_s, "--oversubscribe", TEST_PE, scenario])
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
            c
        }
    };
    let expect_bootstrap = match launcher {
        Launcher::Symrun => "tcp",
        Launcher::Mpirun => "mpi",
    };
    cmd.env("SYMMEM_TEST_EXPECT_PES", &n_s)
        .env("SYMMEM_TEST_EXPECT_BOOTSTRAP", expect_bootstrap)
        .env("SYMMEM_BOOTSTRAP_TIMEOUT", "60");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot start {launcher:?}: {e}"));
    Job::from(out, start.elapsed())
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

/// Waits for a child with a deadline, killing it if it overstays.
pub fn wait_output(child: std::process::Child, limit: Duration) -> Job {
    let start = Instant::now();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        while start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY-free check: signal 0 only tests whether the process still exists.
            if unsafe { libc::kill(pid as i32, 0) } != 0 {
                return;
            }
        }
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let out = child
        .wait_with_output()
        .expect("waiting for symmem-test-pe");
    let _ = watchdog.join();
    Job::from(out, start.elapsed())
}
