//! Running `device-test-pe SCENARIO` as a job of N PEs from the integration tests.
//!
//! By default the program self-launches (`--pes N`). With `SYMMEM_TEST_LAUNCHER=mpirun`
//! the tests that allow it run under Open MPI's `mpirun` instead (build with
//! `--features mpi`). Every PE checks that the job has the size and bootstrap the test
//! asked for, so N one-PE jobs started by a foreign launcher cannot pass.
#![allow(dead_code)] // each test file uses a different subset

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The PE program.
pub const PE_PROGRAM: &str = env!("CARGO_BIN_EXE_device-test-pe");

/// `SYMMEM_TIMEOUT` for the jobs: a kernel or barrier still waiting after this long (a
/// signal that never comes) fails with a message naming the wait. Every scenario's
/// launches take well under a few seconds.
const WAIT_LIMIT: &str = "30";

/// A job that takes longer than this is hung: it is killed and the test fails.
const HANG_LIMIT: Duration = Duration::from_secs(120);

/// How a job's PEs are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// `device-test-pe --pes N`: the built-in launcher.
    SelfLaunch,
    /// `mpirun -np N --oversubscribe device-test-pe`.
    Mpirun,
}

/// The launcher chosen by `SYMMEM_TEST_LAUNCHER` (`mpirun`; `symrun` or unset: self-launch).
pub fn launcher() -> Launcher {
    match std::env::var("SYMMEM_TEST_LAUNCHER").as_deref() {
        Ok("mpirun") => Launcher::Mpirun,
        Ok("symrun") | Err(_) => Launcher::SelfLaunch,
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
    /// Lines of stdout starting with `prefix`.
    pub fn lines_with(&self, prefix: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }

    /// Panics with the job's output.
    pub fn fail(&self, why: &str) -> ! {
        panic!(
            "{why} ({}, after {:?}):\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }

    /// Panics unless the job succeeded and every one of its `n` PEs reported `scenario ok`.
    pub fn assert_ok(&self, n: usize, scenario: &str) -> &Self {
        if !self.status.success() {
            self.fail("job failed");
        }
        for pe in 0..n {
            let line = format!("PE {pe}: {scenario} ok");
            if !self.stdout.lines().any(|l| l == line) {
                self.fail(&format!("no line {line:?}"));
            }
        }
        self
    }
}

/// Runs `scenario` on `n` PEs with the chosen launcher.
pub fn run(n: usize, scenario: &str) -> Job {
    run_with(launcher(), n, scenario)
}

/// Runs `scenario` on `n` self-launched PEs, whatever the launcher choice (for tests
/// that rely on the built-in launcher's exit codes).
pub fn run_self_launched(n: usize, scenario: &str) -> Job {
    run_with(Launcher::SelfLaunch, n, scenario)
}

fn run_with(launcher: Launcher, n: usize, scenario: &str) -> Job {
    let n_s = n.to_string();
    let (mut cmd, bootstrap) = match launcher {
        Launcher::SelfLaunch => {
            let mut c = Command::new(PE_PROGRAM);
            c.args(["--pes", &n_s, scenario]);
            (c, "tcp")
        }
        Launcher::Mpirun => {
            let mut c = Command::new("mpirun");
            c.args(["-np", &n_s, "--oversubscribe", PE_PROGRAM, scenario])
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
            (c, "mpi")
        }
    };
    cmd.env("SYMMEM_BOOTSTRAP_TIMEOUT", "60")
        .env("SYMMEM_TIMEOUT", WAIT_LIMIT)
        .env("SYMMEM_TEST_EXPECT_PES", &n_s)
        .env("SYMMEM_TEST_EXPECT_BOOTSTRAP", bootstrap)
        // Deliberate kernel panics print their message, not pages of backtrace.
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {launcher:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let (done, finished) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let hung = finished.recv_timeout(HANG_LIMIT).is_err();
        if hung {
            // SAFETY: signalling the launcher we started, which is still running (the
            // main thread has not reported it finished); its PEs die with it.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        hung
    });
    let out = child.wait_with_output().expect("waiting for the job");
    let _ = done.send(());
    let hung = watchdog.join().expect("watchdog");
    let job = Job {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    };
    if hung {
        job.fail(&format!(
            "{scenario} on {n} PEs hung: killed after {HANG_LIMIT:?}"
        ));
    }
    job
}
