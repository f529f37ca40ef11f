//! The kill -9 matrix: one PE of 4 is killed with SIGKILL while each of the 3 survivors is
//! inside a different operation, for every launcher × transport cell.
//!
//! Launchers: `symrun`; Open MPI's `mpirun --enable-recovery` over the `pmix` bootstrap;
//! the same `mpirun` over the `mpi` bootstrap (only with `--features mpi`); the `env`
//! bootstrap (each process started by hand with `SYMMEM_ROOT_ADDR`, `SYMMEM_ROOT_PORT`,
//! `SYMMEM_WORLD_SIZE` and `JOB_COMPLETION_INDEX`, as a Kubernetes indexed job would).
//! Transports: one node (every peer mapped, the dead one found through its pidfd); 2
//! simulated nodes over sockets; 2 simulated nodes over libfabric's `tcp;ofi_rxm` (only
//! with `--features ofi`, under `symrun`).
//!
//! The operations (`SYMMEM_TEST_KILL_OPS`, see tests/support/host_api/kill_matrix.rs):
//! `wait_until`, `signal_wait_until`, `barrier_all`, a team barrier, `reduce` and
//! `fcollect`, `quiet` with large puts outstanding to the victim (on 2 nodes only: on one
//! node a put is a store into the victim's mapped heap, and a quiet has nothing to wait
//! for), and `alloc`. One node: 6 operations in 2 jobs; 2 nodes: 3 jobs, in which PEs 0
//! and 1 (the other node) and PE 2 (the victim's node) cover every operation on the far
//! side and some on the near side.
//!
//! Every survivor must print an error naming the victim (PE 3) and its operation within
//! [`DETECT_BOUND`] of the kill, then leave through finalize (which must fail at once, not
//! wait for the dead PE) within [`LEAVE_BOUND`]. `SYMMEM_TIMEOUT` is 60 s, a safety net far
//! above the bounds: an error found by a timeout names no dead PE and fails the test.
//! Each test prints its cell's detection times (`--nocapture` shows them).

mod common;

use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{open_mpi, run_symrun, test_pe, wait_output, Job, FOREIGN_LAUNCH_VARS, TWO_NODES};
use symmem_test_harness::OmpiSession;

/// The victim: the last of [`N`] PEs.
const VICTIM: usize = N - 1;
/// PEs per job: 3 survivors, so 3 operations per job.
const N: usize = 4;

/// The dead-peer time the jobs run with (`SYMMEM_DEAD_PEER_TIMEOUT`, seconds): it bounds
/// the detection of a peer whose host goes silent. A killed process's kernel closes its
/// connections at once, so no cell here should need it; it is set low so that a cell that
/// did would still end quickly.
const DEAD_PEER_SECS: &str = "3";

/// Time from the kill to every survivor's error: the dead-peer time plus a margin for a
/// loaded 2-core machine.
const DETECT_BOUND: Duration = Duration::from_secs(3 + 5);

/// Time from a survivor's error to the end of its finalize.
const LEAVE_BOUND: Duration = Duration::from_secs(5);

/// The variables of every job: the safety-net timeouts, the dead-peer time, the test PE's
/// expectations.
fn base_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("SYMMEM_TIMEOUT", "60"),
        ("SYMMEM_BOOTSTRAP_TIMEOUT", "60"),
        ("SYMMEM_DEAD_PEER_TIMEOUT", DEAD_PEER_SECS),
        ("SYMMEM_SYMMETRIC_SIZE", "64M"),
        ("SYMMEM_TEST_EXPECT_PES", "4"),
        ("RUST_BACKTRACE", "0"),
    ]
}

/// One node: the 6 operations that can wait for a mapped peer, 3 per job.
const ONE_NODE_JOBS: [[&str; 3]; 2] = [
    ["wait_until", "signal_wait_until", "alloc"],
    ["barrier_all", "team_barrier", "reduce"],
];

/// 2 nodes (PEs 0 and 1 on node 0, PEs 2 and 3 on node 1): every operation by a PE of the
/// other node (`wait_until` through `signal_wait_until`, which waits the same way), and
/// `wait_until`, `alloc` and `fcollect` by the victim's node-mate.
const TWO_NODE_JOBS: [[&str; 3]; 3] = [
    ["quiet", "signal_wait_until", "wait_until"],
    ["barrier_all", "team_barrier", "alloc"],
    ["reduce", "alloc", "fcollect"],
];

/// The name under which the runtime reports `op` (the `op` of its errors).
fn runtime_names(op: &str) -> &'static [&'static str] {
    match op {
        "wait_until" => &["wait_until"],
        "signal_wait_until" => &["signal_wait_until"],
        "barrier_all" => &["barrier_all"],
        "team_barrier" => &["team_barrier"],
        "reduce" => &["team_reduce"],
        "fcollect" => &["team_fcollect"],
        // The puts or the quiet that completes them: the socket transport names the quiet,
        // the ofi transport the put whose completion failed.
        "quiet" => &["quiet", "put_nbi", "put"],
        "alloc" => &["alloc"],
        other => panic!("no operation {other}"),
    }
}

/// Whether `error`, survivor `pe`'s error in `op`, names the victim and the operation: a
/// dead peer (`PE 3 failed while PE p was in <op>: ...`) or a failed transfer (`<op> from
/// PE p to PE 3 over <transport>: ...`).
fn names_victim_and_op(error: &str, pe: usize, op: &str) -> bool {
    runtime_names(op).iter().any(|name| {
        error.starts_with(&format!("PE {VICTIM} failed while PE {pe} was in {name}: "))
            || error.starts_with(&format!("{name} from PE {pe} to PE {VICTIM} over "))
    })
}

/// The number after `key` in `line` (up to the next space).
fn number_after(line: &str, key: &str) -> Option<u128> {
    line.split(key).nth(1)?.split(' ').next()?.parse().ok()
}

/// Checks one job of `cell` whose survivors ran `ops`, from the PEs' output: the victim
/// died, every survivor named it and its operation within [`DETECT_BOUND`] of the kill and
/// left within [`LEAVE_BOUND`]. Returns the detection time of each survivor.
fn check_job(cell: &str, ops: &[&str; 3], job: &Job) -> Vec<u128> {
    let context = format!("{cell}, operations {ops:?}");
    let kill = format!("PE {VICTIM}: SIGKILL at ");
    let Some(killed_at) = job.stdout.lines().find_map(|l| {
        l.strip_prefix(&kill)
            .and_then(|t| t.trim().parse::<u128>().ok())
    }) else {
        job.fail(&format!("{context}: the victim never killed itself"));
    };
    let mut detected = Vec::new();
    for (pe, op) in ops.iter().enumerate() {
        let head = format!("ERROR (PE {pe} in {op}) at ");
        let errors = job.lines_with(&head);
        if errors.len() != 1 {
            job.fail(&format!(
                "{context}: PE {pe} printed {} errors in {op}",
                errors.len()
            ));
        }
        let line = errors[0];
        let error = line.split_once(" ms: ").map_or("", |(_, e)| e);
        if !names_victim_and_op(error, pe, op) {
            job.fail(&format!(
                "{context}: PE {pe}'s error does not name PE {VICTIM} and {op}: {error}"
            ));
        }
        let at = number_after(line, " at ").expect("the error's time");
        let ms = at.saturating_sub(killed_at);
        if ms > DETECT_BOUND.as_millis() {
            job.fail(&format!(
                "{context}: PE {pe} found the death in {op} after {ms} ms (bound {DETECT_BOUND:?})"
            ));
        }
        detected.push(ms);
        let left = format!("LEFT (PE {pe}) after ");
        let Some(left_ms) = job
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(&left).and_then(|r| number_after(r, "")))
        else {
            job.fail(&format!(
                "{context}: PE {pe} did not leave through finalize"
            ));
        };
        if left_ms > LEAVE_BOUND.as_millis() {
            job.fail(&format!(
                "{context}: PE {pe}'s finalize took {left_ms} ms after the failure"
            ));
        }
    }
    detected
}

/// Runs every job of `jobs` in `cell`, `run(env)` starting one; prints the detection times.
fn run_cell(
    cell: &str,
    transport: &[(&'static str, &'static str)],
    jobs: &[[&'static str; 3]],
    run: impl Fn(&[(&str, &str)]) -> Job,
) {
    let mut summary = Vec::new();
    for ops in jobs {
        let list = ops.join(",");
        let mut env = base_env();
        env.extend_from_slice(transport);
        env.push(("SYMMEM_TEST_KILL_OPS", &list));
        let job = run(&env);
        let ms = check_job(cell, ops, &job);
        for (pe, (op, ms)) in ops.iter().zip(ms).enumerate() {
            summary.push(format!("PE {pe} in {op}: {ms} ms"));
        }
        summary.push(format!("(job {:.1} s)", job.elapsed.as_secs_f64()));
    }
    println!("kill matrix, {cell}: {}", summary.join(", "));
}

/// The transport variables of a cell.
fn one_node() -> Vec<(&'static str, &'static str)> {
    Vec::new()
}

fn over_sockets() -> Vec<(&'static str, &'static str)> {
    TWO_NODES.to_vec()
}

#[cfg(feature = "ofi")]
fn over_ofi() -> Vec<(&'static str, &'static str)> {
    vec![
        ("SYMMEM_SIMULATE_NODES", "2"),
        ("SYMMEM_REMOTE_TRANSPORT", "ofi"),
        ("SYMMEM_OFI_PROVIDER", "tcp;ofi_rxm"),
    ]
}

// symrun.

fn symrun(env: &[(&str, &str)]) -> Job {
    let job = run_symrun(N, "kill_matrix", env);
    // symrun reports the first failure: the victim's SIGKILL, 128 + 9.
    if job.status.code() != Some(137) {
        job.fail("symrun should exit 137 (the victim's SIGKILL)");
    }
    job
}

#[test]
fn symrun_one_node() {
    run_cell("symrun, one node", &one_node(), &ONE_NODE_JOBS, symrun);
}

#[test]
fn symrun_two_nodes_over_sockets() {
    run_cell("symrun, sockets", &over_sockets(), &TWO_NODE_JOBS, symrun);
}

#[cfg(feature = "ofi")]
#[test]
fn symrun_two_nodes_over_ofi() {
    run_cell("symrun, ofi tcp", &over_ofi(), &TWO_NODE_JOBS, symrun);
}

// symrun with a bootstrap that reports no failure (`SYMMEM_TEST_BLIND_BOOTSTRAP=1`), as the
// MPI bootstrap's: the other node's survivors must learn of the death from the transport.
// Cheap, and in every build, unlike the `mpi` feature's cells.

/// The variables of a cell whose bootstrap is blind to failures.
fn blind(transport: Vec<(&'static str, &'static str)>) -> Vec<(&'static str, &'static str)> {
    let mut env = transport;
    env.push(("SYMMEM_TEST_BLIND_BOOTSTRAP", "1"));
    env
}

#[test]
fn symrun_blind_bootstrap_two_nodes_over_sockets() {
    run_cell(
        "symrun, blind bootstrap, sockets",
        &blind(over_sockets()),
        &TWO_NODE_JOBS,
        symrun,
    );
}

// Over ofi, a PE with nothing outstanding to the dead PE learns of its death from the
// transport alone when the bootstrap does not report it (the MPI bootstrap, or this blind
// one): while its wait is slow it probes its peers every second, and tcp;ofi_rxm refuses
// every operation to a peer whose process is gone (EAGAIN, no failed completion), which
// after SYMMEM_DEAD_PEER_TIMEOUT (3 s here) fails naming that peer. The victim's node-mate
// leaves after its own error, saying goodbye, so it is not taken for the dead one. Before
// the probes, the other node's PEs waited until SYMMEM_TIMEOUT.
#[cfg(feature = "ofi")]
#[test]
fn symrun_blind_bootstrap_two_nodes_over_ofi() {
    let mut env = blind(over_ofi());
    // A short safety net: the hang ends as a timeout, which fails the check.
    env.push(("SYMMEM_TIMEOUT", "10"));
    run_cell(
        "symrun, blind bootstrap, ofi tcp",
        &env,
        &TWO_NODE_JOBS[1..2],
        symrun,
    );
}

// Open MPI's mpirun.

/// Runs the scenario under `mpirun --enable-recovery` (which lets the survivors run after
/// a rank dies, so each must find out by itself) over `bootstrap`.
fn mpirun(bootstrap: &'static str, env: &[(&str, &str)]) -> Job {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--enable-recovery", "-n", "4", "--oversubscribe"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    for var in FOREIGN_LAUNCH_VARS {
        cmd.env_remove(var);
    }
    let expect = if bootstrap == "mpi" { "mpi" } else { "tcp" };
    let vars = [
        ("SYMMEM_BOOTSTRAP", bootstrap),
        ("SYMMEM_TEST_EXPECT_BOOTSTRAP", expect),
    ];
    for &(k, v) in env.iter().chain(&vars) {
        // `-x NAME` exports mpirun's own value of NAME to every process.
        cmd.env(k, v).args(["-x", k]);
    }
    cmd.arg(test_pe())
        .arg("kill_matrix")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let _session = OmpiSession::apply(&mut cmd);
    let child = cmd.spawn().expect("starting mpirun");
    // Open MPI 4.1's mpirun with --enable-recovery exits 0 although a rank was killed and
    // the others exited 3: its status says nothing here; the PEs' output is checked.
    wait_output(child, Duration::from_secs(90))
}

#[test]
fn mpirun_pmix_one_node() {
    if open_mpi().is_some() {
        run_cell(
            "mpirun + pmix, one node",
            &one_node(),
            &ONE_NODE_JOBS,
            |env| mpirun("pmix", env),
        );
    }
}

#[test]
fn mpirun_pmix_two_nodes_over_sockets() {
    if open_mpi().is_some() {
        run_cell(
            "mpirun + pmix, sockets",
            &over_sockets(),
            &TWO_NODE_JOBS,
            |env| mpirun("pmix", env),
        );
    }
}

#[cfg(feature = "mpi")]
#[test]
fn mpirun_mpi_one_node() {
    if open_mpi().is_some() {
        run_cell(
            "mpirun + mpi, one node",
            &one_node(),
            &ONE_NODE_JOBS,
            |env| mpirun("mpi", env),
        );
    }
}

#[cfg(feature = "mpi")]
#[test]
fn mpirun_mpi_two_nodes_over_sockets() {
    if open_mpi().is_some() {
        run_cell(
            "mpirun + mpi, sockets",
            &over_sockets(),
            &TWO_NODE_JOBS,
            |env| mpirun("mpi", env),
        );
    }
}

// The env bootstrap.

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts the 4 ranks by hand with the env bootstrap's variables (a Kubernetes indexed
/// job's `JOB_COMPLETION_INDEX` as the rank) and a cleared environment, and merges their
/// output into one job: the victim must die of SIGKILL and each survivor exit with 3.
fn env_bootstrap(env: &[(&str, &str)]) -> Job {
    let port = free_port().to_string();
    let children: Vec<_> = (0..N)
        .map(|rank| {
            let mut cmd = Command::new(test_pe());
            cmd.arg("kill_matrix")
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .envs(env.iter().copied())
                .env("JOB_COMPLETION_INDEX", rank.to_string())
                .env("SYMMEM_ROOT_ADDR", "127.0.0.1")
                .env("SYMMEM_ROOT_PORT", &port)
                .env("SYMMEM_WORLD_SIZE", N.to_string())
                .env("SYMMEM_JOB_SECRET", "kill-matrix")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd.spawn().expect("starting symmem-test-pe")
        })
        .collect();
    let jobs: Vec<Job> = children
        .into_iter()
        .map(|c| wait_output(c, Duration::from_secs(90)))
        .collect();
    for (rank, job) in jobs.iter().enumerate() {
        let ok = if rank == VICTIM {
            job.status.signal() == Some(libc::SIGKILL)
        } else {
            job.status.code() == Some(3)
        };
        if !ok {
            job.fail(&format!(
                "env bootstrap: rank {rank} ended with {}",
                job.status
            ));
        }
    }
    let victim = &jobs[VICTIM];
    Job {
        status: victim.status,
        stdout: jobs.iter().map(|j| j.stdout.as_str()).collect(),
        stderr: jobs.iter().map(|j| j.stderr.as_str()).collect(),
        elapsed: jobs.iter().map(|j| j.elapsed).max().unwrap_or_default(),
    }
}

#[test]
fn env_bootstrap_one_node() {
    run_cell(
        "env bootstrap, one node",
        &one_node(),
        &ONE_NODE_JOBS,
        env_bootstrap,
    );
}

#[test]
fn env_bootstrap_two_nodes_over_sockets() {
    run_cell(
        "env bootstrap, sockets",
        &over_sockets(),
        &TWO_NODE_JOBS,
        env_bootstrap,
    );
}
