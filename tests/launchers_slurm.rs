//! symmem under a real single-node Slurm (Debian 12's `slurm-wlm` 22.05 and `munge`),
//! started by `scripts/slurm-single-node.sh`, which `scripts/test-all.sh` runs before the
//! tests and whose `SLURM_CONF` it passes on as `SYMMEM_TEST_SLURM_CONF`:
//!
//! - `srun --mpi=pmi2`: Slurm's agent gives each task `PMI_FD`, `PMI_RANK`, `PMI_SIZE`, and
//!   the `pmi` bootstrap speaks PMI-1 on that descriptor;
//! - `srun --mpi=pmix` (Slurm's `pmix_v4` plugin): `PMIX_*`, and the `pmix` bootstrap
//!   speaks PMIx through libpmix;
//! - `srun --mpi=none`: no PMI at all; the `env` bootstrap's Slurm fallback rendezvouses at
//!   the first host of `SLURM_STEP_NODELIST` on the first of `SLURM_STEP_RESV_PORTS`.
//!
//! Each test checks that every PE printed its own line (with `SYMMEM_TEST_EXPECT_PES`
//! making the test PE fail when the world size is wrong), so n one-PE jobs cannot pass,
//! and that every PE logged the expected bootstrap. When Slurm could not be started, the
//! tests print `SKIPPED: <why>` (the reason test-all.sh recorded in
//! `SYMMEM_TEST_SLURM_SKIP`) and pass; they never pass without running otherwise.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{
    check_launched, check_one_node_from_process_mapping, launched_pe_env, test_pe, wait_output,
    Job, FOREIGN_LAUNCH_VARS,
};

/// The `slurm.conf` of the running single-node Slurm, or `None` after printing why the
/// test is skipped.
fn slurm() -> Option<String> {
    if let Ok(conf) = std::env::var("SYMMEM_TEST_SLURM_CONF") {
        return Some(conf);
    }
    match std::env::var("SYMMEM_TEST_SLURM_SKIP") {
        Ok(why) => println!("SKIPPED: Slurm did not start here: {why}"),
        Err(_) => println!(
            "SKIPPED: no single-node Slurm; start one with `scripts/slurm-single-node.sh start DIR` \
             and export SYMMEM_TEST_SLURM_CONF=DIR/slurm.conf (scripts/test-all.sh does both)"
        ),
    }
    None
}

/// Runs `scenario` on `n` tasks with `srun --mpi=<mpi>`, overcommitting the 2 cores.
fn run_srun(conf: &str, mpi: &str, n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    let n_s = n.to_string();
    let mut cmd = Command::new("srun");
    cmd.args(["-n", &n_s, "-O", "--mpi", mpi, "--kill-on-bad-exit=1"])
        .arg(test_pe())
        .arg(scenario)
        .env("SLURM_CONF", conf)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // srun passes its environment on: no other launcher's variables may leak in.
    for var in FOREIGN_LAUNCH_VARS {
        cmd.env_remove(var);
    }
    cmd.envs(launched_pe_env(&n_s)).envs(env.iter().copied());
    let child = cmd.spawn().expect("starting srun");
    wait_output(child, Duration::from_secs(90))
}

/// The bootstrap to name on a build with the `mpi` feature, which prefers MPI under a PMIx
/// launcher (whether Open MPI's `MPI_Init` works under `srun --mpi=pmix` is not tested).
/// Under `srun --mpi=pmi2` no such setting is needed: an `mpi` build linking Open MPI, which
/// cannot use PMI-1, picks the `pmi` bootstrap itself.
const PMIX_ON_MPI_BUILDS: &[(&str, &str)] = if cfg!(feature = "mpi") {
    &[("SYMMEM_BOOTSTRAP", "pmix")]
} else {
    &[]
};

#[test]
fn srun_pmi2_hello_on_2_and_4_tasks() {
    let Some(conf) = slurm() else { return };
    for n in [2, 4] {
        let job = run_srun(&conf, "pmi2", n, "hello", &[]);
        check_launched(&job, n, "pmi", n, |r| format!("PE {r} of {n}"));
    }
}

#[test]
fn srun_pmi2_put_get_on_4_tasks() {
    let Some(conf) = slurm() else { return };
    let job = run_srun(&conf, "pmi2", 4, "put_get", &[]);
    check_launched(&job, 4, "pmi", 4, |r| format!("PE {r}: put_get ok"));
}

#[test]
fn srun_pmi2_process_mapping_puts_the_tasks_on_one_node() {
    let Some(conf) = slurm() else { return };
    let job = run_srun(&conf, "pmi2", 2, "node_layout", &[]);
    check_one_node_from_process_mapping(&job, 2);
}

#[test]
fn srun_without_a_pmi_plugin_uses_the_slurm_variables() {
    let Some(conf) = slurm() else { return };
    let job = run_srun(&conf, "none", 4, "put_get", &[]);
    check_launched(&job, 4, "env (Slurm srun (no PMI plugin))", 4, |r| {
        format!("PE {r}: put_get ok")
    });
}

#[test]
fn srun_pmix_hello_on_2_and_4_tasks() {
    let Some(conf) = slurm() else { return };
    for n in [2, 4] {
        let job = run_srun(&conf, "pmix", n, "hello", PMIX_ON_MPI_BUILDS);
        check_launched(&job, n, "pmix", n, |r| format!("PE {r} of {n}"));
    }
}

#[test]
fn srun_pmix_put_get_on_4_tasks() {
    let Some(conf) = slurm() else { return };
    let job = run_srun(&conf, "pmix", 4, "put_get", PMIX_ON_MPI_BUILDS);
    check_launched(&job, 4, "pmix", 4, |r| format!("PE {r}: put_get ok"));
}
