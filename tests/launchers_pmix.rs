//! The `pmix` bootstrap under a real PMIx launcher: Open MPI's `mpirun` (Debian 12's
//! `openmpi-bin` 4.1.4, whose processes get `PMIX_RANK`, `PMIX_NAMESPACE` and
//! `PMIX_SERVER_URI*` from its PMIx 4.2 server), and its failures without one.
//!
//! Each run checks that every PE printed its own `PE r of n` line (with
//! `SYMMEM_TEST_EXPECT_PES` making the test PE fail when the world size is wrong), so n
//! one-PE jobs cannot pass, and that the info log names the `pmix` bootstrap n times. The
//! test program is built without the `mpi` feature in `cargo test`; under `--features mpi`
//! (which prefers MPI under `mpirun`) `SYMMEM_BOOTSTRAP=pmix` names PMIx. Without Open
//! MPI's `mpirun` or `libpmix.so.2` the launcher tests print `SKIPPED: <why>` and pass.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use symmem_test_harness::OmpiSession;

use common::{
    check_launched, launched_pe_env, libpmix_present, names_another_pe, open_mpi, spawn_pe,
    test_pe, wait_output, Job, FOREIGN_LAUNCH_VARS,
};

/// Runs `scenario` on `n` PEs under Open MPI's `mpirun` with mpirun options `opts` and
/// extra variables `env`.
fn run_mpirun(mpirun: &str, opts: &[&str], n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    let n_s = n.to_string();
    let mut cmd = Command::new(mpirun);
    cmd.args(opts)
        .args(["-n", &n_s])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    for var in FOREIGN_LAUNCH_VARS {
        cmd.env_remove(var);
    }
    let mut vars = launched_pe_env(&n_s).to_vec();
    if cfg!(feature = "mpi") {
        // A build with the `mpi` feature prefers MPI under mpirun; name PMIx.
        vars.push(("SYMMEM_BOOTSTRAP", "pmix"));
    }
    vars.extend_from_slice(env);
    for (k, v) in vars {
        // `-x NAME` exports mpirun's own value of NAME to every process.
        cmd.env(k, v).args(["-x", k]);
    }
    cmd.arg(test_pe())
        .arg(scenario)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let _session = OmpiSession::apply(&mut cmd);
    let child = cmd.spawn().expect("starting mpirun");
    wait_output(child, Duration::from_secs(90))
}

#[test]
fn mpirun_hello_on_1_2_and_4_pes() {
    let Some(mpirun) = open_mpi() else { return };
    for n in [1, 2, 4] {
        let job = run_mpirun(mpirun, &[], n, "hello", &[]);
        check_launched(&job, n, "pmix", n, |r| format!("PE {r} of {n}"));
        if !job.stderr.contains("PMIX_NAMESPACE=") {
            job.fail("the info log does not name PMIX_NAMESPACE");
        }
    }
}

#[test]
fn mpirun_pmix_hostname_puts_the_pes_on_one_node() {
    let Some(mpirun) = open_mpi() else { return };
    let job = run_mpirun(mpirun, &[], 2, "node_layout", &[]);
    check_launched(&job, 2, "pmix", 2, |r| format!("PE {r} local [0, 1]"));
    let from_pmix = "(PMIx PMIX_HOSTNAME), and the kernel boot id";
    let logged = job.stderr.matches(from_pmix).count();
    if logged != 2 {
        job.fail(&format!("{logged} PEs logged {from_pmix:?}, expected 2"));
    }
}

#[test]
fn mpirun_put_get_on_4_pes() {
    let Some(mpirun) = open_mpi() else { return };
    let job = run_mpirun(mpirun, &[], 4, "put_get", &[]);
    check_launched(&job, 4, "pmix", 4, |r| format!("PE {r}: put_get ok"));
}

#[test]
fn mpirun_reinit_reuses_the_pmix_session() {
    // init, finalize, init twice more: PMIx_Init once, each init publishes its rendezvous
    // under its own key, PMIx_Finalize when the process exits.
    let Some(mpirun) = open_mpi() else { return };
    let job = run_mpirun(mpirun, &[], 3, "reinit", &[]);
    check_launched(&job, 3, "pmix", 9, |r| format!("PE {r}: reinit ok"));
}

#[test]
fn a_killed_pe_is_named_by_every_survivor_under_mpirun() {
    // `--enable-recovery`: mpirun lets the survivors run after a rank dies, so each must
    // find out by itself. (By default mpirun also kills the survivors as soon as it sees
    // the death; they usually name the dead rank first, but that is a race.)
    let Some(mpirun) = open_mpi() else { return };
    let job = run_mpirun(mpirun, &["--enable-recovery"], 4, "kill", &[]);
    let errors = job.lines_with("ERROR");
    if errors.len() != 3 {
        job.fail(&format!(
            "{} survivors reported the failure, expected 3",
            errors.len()
        ));
    }
    for e in &errors {
        if !e.contains("PE 3 failed while PE") {
            job.fail(&format!("a survivor does not name PE 3: {e}"));
        }
    }
    if job.elapsed >= Duration::from_secs(20) {
        job.fail(&format!("took {:?}", job.elapsed));
    }
}

#[test]
fn a_killed_pe_ends_the_job_under_mpirun_by_default() {
    // Without --enable-recovery mpirun ends the job itself. Two orders are seen: mpirun
    // reports rank 3's signal first, or every survivor names PE 3 and exits before mpirun
    // reports (it then reports a survivor's exit). Either way rank 3 is named. Every
    // survivor that reports before mpirun kills it names a dead PE (PE 3, or one that
    // mpirun killed first).
    let Some(mpirun) = open_mpi() else { return };
    let job = run_mpirun(mpirun, &[], 4, "kill", &[]);
    if job.status.success() {
        job.fail("mpirun exited 0 after a rank was killed");
    }
    let errors = job.lines_with("ERROR");
    let survivors_name_3 = errors.len() == 3 && errors.iter().all(|e| e.contains("PE 3 failed"));
    if !job.stderr.contains("rank 3") && !survivors_name_3 {
        job.fail("neither mpirun nor every survivor names rank 3");
    }
    for e in job.lines_with("ERROR") {
        if !names_another_pe(e, 4) {
            job.fail(&format!("a survivor does not name another, dead PE: {e}"));
        }
    }
}

#[test]
fn a_pe_killed_before_the_fence_fails_the_others_at_once() {
    // Rank 3 dies before the PMIx fence (SYMMEM_TEST_EXIT_AT=launcher_exchange, set for
    // it alone through mpirun's second app context); with --enable-recovery mpirun keeps
    // the others running. Depending on when the server learns of the death, their fence
    // fails at once (PMIX_ERR_PARTIAL_SUCCESS), or blocks until the bootstrap timeout
    // (the error names the fence step), or completes without rank 3, after which the TCP
    // rendezvous names rank 3 at the timeout. Every survivor fails within the timeout,
    // saying why.
    let Some(mpirun) = open_mpi() else { return };
    let mut cmd = Command::new(mpirun);
    cmd.arg("--enable-recovery")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    for var in FOREIGN_LAUNCH_VARS {
        cmd.env_remove(var);
    }
    let mut vars = vec![
        ("SYMMEM_TEST_EXPECT_PES", "4"),
        ("SYMMEM_BOOTSTRAP_TIMEOUT", "8"),
        ("SYMMEM_SYMMETRIC_SIZE", "16M"),
        ("RUST_BACKTRACE", "0"),
    ];
    if cfg!(feature = "mpi") {
        vars.push(("SYMMEM_BOOTSTRAP", "pmix"));
    }
    for (k, v) in vars {
        cmd.env(k, v).args(["-x", k]);
    }
    cmd.args(["-n", "3", test_pe(), "hello", ":", "-n", "1"])
        .args([
            "-x",
            "SYMMEM_TEST_EXIT_AT=launcher_exchange",
            test_pe(),
            "hello",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let _session = OmpiSession::apply(&mut cmd);
    let job = wait_output(
        cmd.spawn().expect("starting mpirun"),
        Duration::from_secs(90),
    );
    if !job
        .stderr
        .contains("SYMMEM_TEST_EXIT_AT=launcher_exchange: process")
    {
        job.fail("rank 3 did not die before the fence");
    }
    let out = format!("{}{}", job.stdout, job.stderr);
    let failures: Vec<&str> = out.lines().filter(|l| l.contains("FAILED: ")).collect();
    if failures.len() != 3 {
        job.fail(&format!("{} survivors failed, expected 3", failures.len()));
    }
    for f in failures {
        let fence = f.contains("PMIx_Fence") && f.contains("ended before reaching the fence");
        let blocked = f.contains("Fence") && f.contains("SYMMEM_BOOTSTRAP_TIMEOUT");
        let rendezvous = f.contains("rank(s) 3 never arrived");
        if !(fence || blocked || rendezvous) {
            job.fail(&format!(
                "a survivor's error explains neither the fence nor rank 3: {f}"
            ));
        }
    }
    // The survivors fail at the 8 s timeout at most. The whole job usually ends within
    // 10 s, but one run on this loaded 2-core machine took 41 s (mpirun's teardown, not
    // pinned down); a hang is what this bound is for.
    if job.elapsed >= Duration::from_secs(75) {
        job.fail(&format!("took {:?}", job.elapsed));
    }
}

/// Runs the test PE alone with `env` (PMIx variables of a job that does not exist).
fn run_alone(env: &[(&str, &str)]) -> Job {
    let mut vars = vec![
        ("SYMMEM_TEST_EXPECT_PES", "2"),
        ("SYMMEM_BOOTSTRAP_TIMEOUT", "20"),
        ("SYMMEM_SYMMETRIC_SIZE", "16M"),
        ("RUST_BACKTRACE", "0"),
        // Blank counts as unset: no other launcher's variables apply.
        ("RANK", ""),
        ("WORLD_SIZE", ""),
        ("PMI_FD", ""),
        ("PMI_PORT", ""),
        ("SLURM_PROCID", ""),
        ("JOB_COMPLETION_INDEX", ""),
    ];
    vars.extend_from_slice(env);
    wait_output(spawn_pe(&["hello"], &vars), Duration::from_secs(60))
}

/// The one `FAILED: ` line of a job that must fail.
fn failure(job: &Job) -> String {
    if job.status.success() {
        job.fail("the PE succeeded");
    }
    let out = format!("{}{}", job.stdout, job.stderr);
    match out.lines().find(|l| l.contains("FAILED: ")) {
        Some(l) => l.to_string(),
        None => job.fail("no FAILED: line"),
    }
}

/// PMIx variables pointing at a server that is not there (port 1 refuses connections).
const NO_SERVER: [(&str, &str); 3] = [
    ("PMIX_NAMESPACE", "symmem-test-nowhere"),
    ("PMIX_RANK", "0"),
    (
        "PMIX_SERVER_URI4",
        "symmem-test-nowhere.0;tcp4://127.0.0.1:1",
    ),
];

#[test]
fn a_missing_libpmix_is_named() {
    let mut env = NO_SERVER.to_vec();
    env.push(("SYMMEM_PMIX_LIB", "libpmix-symmem-test-missing.so.2"));
    if cfg!(feature = "mpi") {
        // A build with the `mpi` feature prefers MPI when PMIx variables are set.
        env.push(("SYMMEM_BOOTSTRAP", "pmix"));
    }
    let job = run_alone(&env);
    let line = failure(&job);
    for want in ["libpmix-symmem-test-missing.so.2", "SYMMEM_PMIX_LIB"] {
        if !line.contains(want) {
            job.fail(&format!("the error does not name {want}: {line}"));
        }
    }
}

#[test]
fn pmix_init_without_a_server_fails_fast_naming_the_call() {
    if !libpmix_present() {
        return;
    }
    let mut env = NO_SERVER.to_vec();
    env.push(("SYMMEM_BOOTSTRAP", "pmix"));
    let job = run_alone(&env);
    let line = failure(&job);
    for want in [
        "PMIx_Init",
        "UNREACHABLE",
        "PMIX_NAMESPACE=symmem-test-nowhere",
    ] {
        if !line.contains(want) {
            job.fail(&format!("the error does not name {want}: {line}"));
        }
    }
    if job.elapsed >= Duration::from_secs(20) {
        job.fail(&format!("took {:?}", job.elapsed));
    }
}

#[test]
fn forcing_pmix_outside_a_pmix_job_says_how_to_launch() {
    let job = run_alone(&[
        ("SYMMEM_BOOTSTRAP", "pmix"),
        ("PMIX_RANK", ""),
        ("PMIX_NAMESPACE", ""),
    ]);
    let line = failure(&job);
    if !(line.contains("SYMMEM_BOOTSTRAP=pmix") && line.contains("mpirun")) {
        job.fail(&format!("the error does not say how to launch: {line}"));
    }
}
