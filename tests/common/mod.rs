//! Launching the test PE program (`symmem-test-pe`) from the facade's integration tests.
//!
//! `SYMMEM_TEST_LAUNCHER=mpirun` runs the launcher-agnostic tests under Open MPI's
//! `mpirun` (build with `--features mpi`), `SYMMEM_TEST_LAUNCHER=mpirun-pmix` under the
//! same `mpirun` over the `pmix` bootstrap; otherwise they run under `symrun`.
#![allow(dead_code)] // each test file uses a different subset

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

pub use symmem_test_harness::Job;
use symmem_test_harness::{run_job, wait_job, Launcher};

pub const SYMRUN: &str = env!("CARGO_BIN_EXE_symrun");

/// The test PE program (package `symmem-test-pe`, tests/pe/): another package's binary,
/// which cargo builds only when asked, so the first call builds it (`cargo build -p
/// symmem-test-pe`, a no-op when up to date) with this test's `mpi` and `ofi` features,
/// into this test's target directory and profile.
pub fn test_pe() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(build_test_pe)
}

fn build_test_pe() -> String {
    // This test runs as <target dir>/<profile dir>/deps/<test>-<hash>.
    let exe = std::env::current_exe().expect("the test program's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test program lies in <target>/<profile>/deps");
    let target_dir = profile_dir.parent().expect("a target directory");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(name) => name,
    };
    // The MPI bootstrap and every remote transport this build has behind a feature.
    let transports = symmem::remote_transports().filter_map(|t| t.feature.filter(|_| t.built));
    let features: Vec<&str> = cfg!(feature = "mpi")
        .then_some("mpi")
        .into_iter()
        .chain(transports)
        .collect();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "-p",
            "symmem-test-pe",
            "--profile",
            profile,
        ])
        .args(["--features", &features.join(","), "--target-dir"])
        .arg(target_dir)
        .status()
        .expect("starting cargo to build symmem-test-pe");
    assert!(status.success(), "cargo build -p symmem-test-pe failed");
    let pe = profile_dir.join("symmem-test-pe");
    pe.to_str().expect("a UTF-8 target path").to_string()
}

fn symrun() -> Launcher {
    Launcher::Symrun(SYMRUN.into())
}

/// Runs `symmem-test-pe SCENARIO` on `n` PEs with the chosen launcher.
pub fn run_scenario(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    run_job(
        &Launcher::from_env(symrun()),
        n,
        test_pe(),
        &[scenario],
        env,
    )
}

/// Runs `symmem-test-pe SCENARIO` on `n` PEs under `symrun`, whatever the launcher choice.
pub fn run_symrun(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    run_job(&symrun(), n, test_pe(), &[scenario], env)
}

/// Runs the test PE program directly (no launcher), e.g. for unique-id init.
pub fn spawn_pe(args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let mut cmd = Command::new(test_pe());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "SYMMEM_LAUNCH_ADDR",
        "SYMMEM_LAUNCH_SECRET",
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

/// Two simulated nodes over the socket transport (see `SYMMEM_SIMULATE_NODES`): within a
/// node PEs map each other's heaps, across nodes every operation is a socket request.
pub const TWO_NODES: [(&str, &str); 2] = [
    ("SYMMEM_SIMULATE_NODES", "2"),
    ("SYMMEM_REMOTE_TRANSPORT", "socket"),
];

/// `SYMMEM_TIMEOUT` for scenarios that must succeed: far above any run's time here, it
/// only turns a hang into a failed test with a message.
const SAFETY_NET: (&str, &str) = ("SYMMEM_TIMEOUT", "120");

/// Runs the `api_<scenario>` scenario on `n` PEs with `env`; every PE must succeed and
/// print `<scenario> ok`.
pub fn run_ok(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    let env: Vec<(&str, &str)> = std::iter::once(SAFETY_NET)
        .chain(env.iter().copied())
        .collect();
    let job = run_scenario(n, &format!("api_{scenario}"), &env);
    job.assert_success();
    let oks = job
        .stdout
        .lines()
        .filter(|l| l.ends_with(&format!(": {scenario} ok")))
        .count();
    assert_eq!(oks, n, "every PE reports success:\n{}", job.stdout);
    job
}

/// Runs the `api_<scenario>` scenario, in which the last PE skips a collective call, on
/// `n` PEs with `SYMMEM_TIMEOUT=1`: every other PE times out, at least one names the
/// missing PE, and every PE prints `<scenario> ok`.
pub fn check_missing_pe_times_out(n: usize, scenario: &str, env: &[(&str, &str)]) {
    let env: Vec<(&str, &str)> = std::iter::once(("SYMMEM_TIMEOUT", "1"))
        .chain(env.iter().copied())
        .collect();
    let job = run_scenario(n, &format!("api_{scenario}"), &env);
    job.assert_success();
    let errors = job.lines_with("ERROR: ");
    assert_eq!(
        errors.len(),
        n - 1,
        "every other PE timed out:\n{}",
        job.stdout
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains(&format!("waiting for PE {} (team PE", n - 1))),
        "the missing PE is named:\n{}",
        job.stdout
    );
    assert_eq!(job.stdout.matches(&format!("{scenario} ok")).count(), n);
}

/// Whether a survivor's `ERROR ... PE d failed while PE r was in ...` line names a PE
/// other than the reporter (`d != r`), with `d < n`. Under launchers that kill the other
/// ranks when one dies (Hydra, plain mpirun), `d` may be a rank the launcher killed.
pub fn names_another_pe(line: &str, n: usize) -> bool {
    let named = (0..n).find(|pe| line.contains(&format!("PE {pe} failed while PE")));
    let reporter = line
        .split(" was in ")
        .next()
        .and_then(|head| head.rsplit("while PE ").next())
        .and_then(|pe| pe.trim().parse::<usize>().ok());
    matches!((named, reporter), (Some(dead), Some(me)) if dead != me)
}

/// Variables that symrun or a launcher sets for its processes: the launcher tests remove
/// them from the environment of the launcher they start, so none leaks into its job.
pub const FOREIGN_LAUNCH_VARS: [&str; 16] = [
    "SYMMEM_LAUNCH_ADDR",
    "SYMMEM_LAUNCH_SECRET",
    "SYMMEM_LAUNCH_RANK",
    "SYMMEM_LAUNCH_SIZE",
    "SYMMEM_BOOTSTRAP",
    "SYMMEM_PMIX_LIB",
    "RANK",
    "WORLD_SIZE",
    "JOB_COMPLETION_INDEX",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_RANK",
    "PMI_FD",
    "PMI_PORT",
    "PMI_SIZE",
];

/// The environment of every PE a launcher test starts on `n` (decimal) ranks: the test PE
/// fails unless the world has `n` PEs, the bootstrap times out after 20 s, and the info
/// log names the bootstrap each init used.
pub fn launched_pe_env(n: &str) -> [(&'static str, &str); 5] {
    [
        ("SYMMEM_TEST_EXPECT_PES", n),
        ("SYMMEM_BOOTSTRAP_TIMEOUT", "20"),
        ("SYMMEM_SYMMETRIC_SIZE", "16M"),
        ("SYMMEM_DEBUG", "info"),
        ("RUST_BACKTRACE", "0"),
    ]
}

/// Checks a `node_layout` job of `n` PEs that a PMI-1 launcher placed on one node: every PE
/// has all of them as local PEs, and every init logged node 0 from `PMI_process_mapping`.
pub fn check_one_node_from_process_mapping(job: &Job, n: usize) {
    let all: Vec<usize> = (0..n).collect();
    check_launched(job, n, "pmi", n, |r| format!("PE {r} local {all:?}"));
    let from_mapping = "the launcher's node, 0 (PMI-1 PMI_process_mapping)";
    let logged = job.stderr.matches(from_mapping).count();
    if logged != n {
        job.fail(&format!(
            "{logged} PEs logged {from_mapping:?}, expected {n}"
        ));
    }
}

/// Checks that a job a launcher started succeeded, that rank r printed `want(r)`, and
/// that `inits` inits logged `bootstrap: <bootstrap>`, so that n one-PE jobs cannot pass.
pub fn check_launched(
    job: &Job,
    n: usize,
    bootstrap: &str,
    inits: usize,
    want: impl Fn(usize) -> String,
) {
    job.assert_success();
    for rank in 0..n {
        let want = want(rank);
        if !job.stdout.lines().any(|l| l == want) {
            job.fail(&format!("rank {rank} did not print {want:?}"));
        }
    }
    let tag = format!("bootstrap: {bootstrap}");
    let logged = job.stderr.matches(&tag).count();
    if logged != inits {
        job.fail(&format!("{logged} inits logged `{tag}`, expected {inits}"));
    }
}

/// The last of 4 PEs dies while the others stream puts to it (`api_kill_transfer`) on the
/// transport `env` chooses: every survivor fails within seconds, naming it, and nobody
/// hangs.
pub fn check_killed_mid_transfer(env: &[(&str, &str)]) {
    let n = 4;
    let mut env = env.to_vec();
    env.push(("SYMMEM_TIMEOUT", "20"));
    let job = run_symrun(n, "api_kill_transfer", &env);
    assert_eq!(
        job.status.code(),
        Some(137),
        "{}\n{}",
        job.stdout,
        job.stderr
    );
    let errors = job.lines_with("ERROR in transfer");
    assert_eq!(errors.len(), n - 1, "{}\n{}", job.stdout, job.stderr);
    for e in errors {
        assert!(e.contains("PE 3"), "the error names the dead PE: {e}");
        let ms: u64 = e
            .split(" after ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|v| v.parse().ok())
            .expect("ms");
        assert!(ms < 15_000, "detected after {ms} ms: {e}");
    }
    assert!(
        job.elapsed < Duration::from_secs(40),
        "took {:?}",
        job.elapsed
    );
}

/// `mpirun`, when it is Open MPI's and libpmix loads; else `None` after printing why the
/// test is skipped.
pub fn open_mpi() -> Option<&'static str> {
    let version = Command::new("mpirun").arg("--version").output();
    match version {
        Ok(out) if String::from_utf8_lossy(&out.stdout).contains("Open MPI") => {}
        Ok(out) => {
            println!(
                "SKIPPED: mpirun is not Open MPI's: {}",
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .next()
                    .unwrap_or("")
            );
            return None;
        }
        Err(e) => {
            println!("SKIPPED: no mpirun ({e}); install Debian's openmpi-bin");
            return None;
        }
    }
    if !libpmix_present() {
        return None;
    }
    Some("mpirun")
}

/// Whether the dynamic loader knows `libpmix.so.2` (`ldconfig -p`); prints why the test is
/// skipped when it does not.
pub fn libpmix_present() -> bool {
    // ldconfig is in /sbin, which a user's PATH may lack.
    let cache = ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .iter()
        .find_map(|l| Command::new(l).arg("-p").output().ok());
    let known =
        cache.is_some_and(|out| String::from_utf8_lossy(&out.stdout).contains("libpmix.so.2"));
    if !known {
        println!("SKIPPED: libpmix.so.2 is not in the loader cache (install libpmix2)");
    }
    known
}
