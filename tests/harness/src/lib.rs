//! Starting multi-PE test jobs and collecting their output, for every test package.
//!
//! A job is a PE program started as N PEs by [`Launcher::Symrun`], by its own `--pes N`
//! ([`Launcher::SelfLaunch`]) or by Open MPI's `mpirun` ([`Launcher::Mpirun`], chosen with
//! `SYMMEM_TEST_LAUNCHER=mpirun`, over MPI; [`Launcher::MpirunPmix`], chosen with
//! `SYMMEM_TEST_LAUNCHER=mpirun-pmix`, over the `pmix` bootstrap). Every job gets `SYMMEM_TEST_EXPECT_PES` and
//! `SYMMEM_TEST_EXPECT_BOOTSTRAP`, which the PE programs check, so N one-PE jobs started by
//! a foreign launcher cannot pass. A job that outlives [`HANG_LIMIT`] is killed and fails.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A job still running after this long is hung: it is killed and its test fails.
pub const HANG_LIMIT: Duration = Duration::from_secs(120);

/// A session directory of its own for one `mpirun`, removed when dropped.
///
/// Open MPI 4.1 puts every `mpirun`'s session under `/tmp/ompi.<host>.<uid>`, creates that
/// directory if it is missing and removes it when it is empty at exit. Two `mpirun`s of
/// tests running side by side race there: one finds the directory missing, the other
/// creates it, and the first one's `mkdir` fails with "File exists" and `orte_init` aborts
/// the job. A fresh `orte_tmpdir_base` per job takes the race away.
pub struct OmpiSession(PathBuf);

impl OmpiSession {
    /// Creates a fresh directory and points `cmd`'s Open MPI (`OMPI_MCA_orte_tmpdir_base`)
    /// at it.
    pub fn apply(cmd: &mut Command) -> OmpiSession {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "symmem-test-ompi.{}.{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        cmd.env("OMPI_MCA_orte_tmpdir_base", &dir);
        OmpiSession(dir)
    }
}

impl Drop for OmpiSession {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How a job's PEs are started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// `symrun -n N PROGRAM ARGS` (the path of the `symrun` binary).
    Symrun(PathBuf),
    /// `PROGRAM --pes N ARGS`: the program launches itself.
    SelfLaunch,
    /// `mpirun -np N --oversubscribe PROGRAM ARGS` (build with `--features mpi`).
    Mpirun,
    /// The same `mpirun` command with `SYMMEM_BOOTSTRAP=pmix`: the PEs join through PMIx
    /// (any build; the CI runs it without the `mpi` feature).
    MpirunPmix,
}

impl Launcher {
    /// `Mpirun` when `SYMMEM_TEST_LAUNCHER=mpirun`, `MpirunPmix` when it is `mpirun-pmix`,
    /// else `default`.
    pub fn from_env(default: Launcher) -> Launcher {
        match std::env::var("SYMMEM_TEST_LAUNCHER").as_deref() {
            Ok("mpirun") => Launcher::Mpirun,
            Ok("mpirun-pmix") => Launcher::MpirunPmix,
            Ok("symrun") | Err(_) => default,
            Ok(other) => {
                panic!("SYMMEM_TEST_LAUNCHER={other}: expected symrun, mpirun or mpirun-pmix")
            }
        }
    }

    /// The bootstrap the PEs must report.
    fn bootstrap(&self) -> &'static str {
        match self {
            // The pmix bootstrap joins the TCP rendezvous that rank 0 publishes.
            Launcher::Symrun(_) | Launcher::SelfLaunch | Launcher::MpirunPmix => "tcp",
            Launcher::Mpirun => "mpi",
        }
    }

    /// The command that starts `program args` as `n` PEs.
    fn command(&self, n: usize, program: &str, args: &[&str]) -> Command {
        let n = n.to_string();
        match self {
            Launcher::Symrun(symrun) => {
                let mut c = Command::new(symrun);
                c.args(["-n", &n, "--kill-grace", "10", program]).args(args);
                c
            }
            Launcher::SelfLaunch => {
                let mut c = Command::new(program);
                c.args(["--pes", &n]).args(args);
                c
            }
            Launcher::Mpirun | Launcher::MpirunPmix => {
                let mut c = Command::new("mpirun");
                c.args(["-np", &n, "--oversubscribe", program])
                    .args(args)
                    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                    .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
                if *self == Launcher::MpirunPmix {
                    c.env("SYMMEM_BOOTSTRAP", "pmix");
                }
                c
            }
        }
    }
}

/// The result of one job.
pub struct Job {
    /// The launcher's (or program's) exit status.
    pub status: ExitStatus,
    /// Everything the PEs printed on stdout.
    pub stdout: String,
    /// Everything the PEs and the launcher printed on stderr.
    pub stderr: String,
    /// Wall time of the job.
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

    /// Panics with `why` and the job's output.
    pub fn fail(&self, why: &str) -> ! {
        panic!(
            "{why} ({}, after {:?}):\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }

    /// Panics with the job's output unless it succeeded.
    pub fn assert_success(&self) -> &Self {
        if !self.status.success() {
            self.fail("job failed");
        }
        self
    }

    /// Panics unless the job succeeded and each of its `n` PEs printed `PE i: {what} ok`.
    pub fn assert_ok(&self, n: usize, what: &str) -> &Self {
        self.assert_success();
        for pe in 0..n {
            let line = format!("PE {pe}: {what} ok");
            if !self.stdout.lines().any(|l| l == line) {
                self.fail(&format!("no line {line:?}"));
            }
        }
        self
    }
}

/// Runs `program args` as `n` PEs under `launcher`, with `env` on top of the defaults
/// (`SYMMEM_BOOTSTRAP_TIMEOUT=60`, short panic messages).
pub fn run_job(
    launcher: &Launcher,
    n: usize,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Job {
    let mut cmd = launcher.command(n, program, args);
    cmd.env("SYMMEM_BOOTSTRAP_TIMEOUT", "60")
        .env("SYMMEM_TEST_EXPECT_PES", n.to_string())
        .env("SYMMEM_TEST_EXPECT_BOOTSTRAP", launcher.bootstrap())
        // Deliberate panics print their message, not pages of backtrace.
        .env("RUST_BACKTRACE", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let _session = matches!(launcher, Launcher::Mpirun | Launcher::MpirunPmix)
        .then(|| OmpiSession::apply(&mut cmd));
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {launcher:?}: {e}"));
    wait_job(child, HANG_LIMIT)
}

/// Collects a started child's output, killing it (and failing) if it runs past `limit`.
pub fn wait_job(child: Child, limit: Duration) -> Job {
    let start = Instant::now();
    let pid = child.id() as libc::pid_t;
    let (done, finished) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let hung = finished.recv_timeout(limit).is_err();
        if hung {
            // SAFETY: kill(2) on the child we started; it has not been reaped (the waiting
            // thread has not reported back), so the pid still names it.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        hung
    });
    let out = child.wait_with_output().expect("waiting for the job");
    let _ = done.send(());
    let hung = watchdog.join().expect("watchdog thread");
    let job = Job {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    };
    if hung {
        job.fail(&format!("hung: killed after {limit:?}"));
    }
    job
}
