//! CPU binding of the PEs symrun and self-launch start (`--bind-to`, `--map-by`): each PE's
//! `Cpus_allowed_list` (from `/proc/self/status`, printed by `grep` as the PE program)
//! is one CPU of its own by default, all of the launcher's CPUs when oversubscribed or
//! with `--bind-to none`, never more than the launcher's (`taskset`); a binding that
//! cannot fit and bad values are usage errors that name them; and each PE reports its
//! binding (`SYMMEM_DEBUG=info`, `symmem-info --pes N`); a PE bound to a core is given
//! its node's spare CPUs for its helper threads.

mod common;

use std::process::{Command, Output, Stdio};

use common::{SYMRUN, TEST_PE};
use symmem::bootstrap::affinity::{Binding, CpuSet, Placement};

/// The CPUs this test process may run on (those symrun inherits).
fn my_cpus() -> CpuSet {
    CpuSet::of_this_thread().expect("sched_getaffinity")
}

/// This test process's CPUs when there are two or more (tests that bind two PEs to CPUs
/// of their own need them); otherwise says the test is skipped.
fn at_least_two_cpus() -> Option<CpuSet> {
    let mine = my_cpus();
    if mine.len() < 2 {
        eprintln!("skipped: this test process may run on only CPUs {mine}");
        return None;
    }
    Some(mine)
}

/// Runs `prefix… symrun ARGS -n N --tag-output grep Cpus_allowed_list /proc/self/status`.
fn symrun(prefix: &[&str], args: &[&str], n: usize) -> Output {
    let (program, before) = match prefix.split_first() {
        Some((p, rest)) => (*p, rest.iter().copied().chain([SYMRUN]).collect::<Vec<_>>()),
        None => (SYMRUN, Vec::new()),
    };
    Command::new(program)
        .args(before)
        .args(["-n", &n.to_string(), "--tag-output"])
        .args(args)
        .args(["grep", "Cpus_allowed_list", "/proc/self/status"])
        .stdin(Stdio::null())
        .output()
        .expect("running symrun")
}

/// Each PE's CPUs, from a successful [`symrun`].
fn pe_cpus(out: &Output, n: usize) -> Vec<CpuSet> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "symrun failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    (0..n)
        .map(|pe| {
            let prefix = format!("[PE {pe}] Cpus_allowed_list:");
            let line = stdout
                .lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{stdout}"));
            line.parse()
                .unwrap_or_else(|e| panic!("PE {pe}: {e} in:\n{stdout}"))
        })
        .collect()
}

/// A usage error (exit code 2) whose message contains `needle`.
fn assert_usage_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(needle),
        "{needle:?} missing from:\n{stderr}"
    );
}

#[test]
fn by_default_each_pe_gets_a_cpu_of_its_own() {
    let Some(mine) = at_least_two_cpus() else {
        return;
    };
    let cpus = pe_cpus(&symrun(&[], &[], 2), 2);
    assert_eq!(cpus[0].cpus(), &mine.cpus()[..1], "PE 0");
    assert_eq!(cpus[1].cpus(), &mine.cpus()[1..2], "PE 1");
    let explicit = pe_cpus(&symrun(&[], &["--bind-to", "core"], 2), 2);
    assert_eq!(explicit, cpus);
}

#[test]
fn oversubscribed_or_bind_to_none_pes_keep_all_the_launchers_cpus() {
    let mine = my_cpus();
    let n = mine.len() + 1;
    for cpus in pe_cpus(&symrun(&[], &[], n), n) {
        assert_eq!(cpus, mine, "oversubscribed");
    }
    for cpus in pe_cpus(&symrun(&[], &["--bind-to", "none"], 2), 2) {
        assert_eq!(cpus, mine, "--bind-to none");
    }
    // One node here (or the launcher's CPUs on each): a node's allowed CPUs per PE.
    for cpus in pe_cpus(&symrun(&[], &["--bind-to", "numa"], 2), 2) {
        assert!(
            !cpus.is_empty() && cpus.difference(&mine).is_empty(),
            "{cpus}"
        );
    }
}

#[test]
fn a_core_binding_that_cannot_fit_is_a_usage_error_naming_the_cpus() {
    let mine = my_cpus();
    let n = mine.len() + 2;
    let out = symrun(&[], &["--bind-to", "core"], n);
    assert_usage_error(
        &out,
        &format!(
            "symrun: --bind-to core: {n} PEs need {n} cores, but this process may run on {} (CPUs {mine})",
            mine.len()
        ),
    );
}

#[test]
fn bad_values_are_usage_errors_naming_the_accepted_ones() {
    let out = symrun(&[], &["--bind-to", "socket"], 2);
    assert_usage_error(&out, "symrun: --bind-to socket: expected core, numa, none");
    let out = symrun(&[], &["--map-by", "slot"], 2);
    assert_usage_error(&out, "symrun: --map-by slot: expected core, numa");
}

#[test]
fn pes_are_never_given_cpus_the_launcher_may_not_use() {
    if Command::new("taskset").arg("--version").output().is_err() {
        eprintln!("skipped: taskset (util-linux) is not installed");
        return;
    }
    let last = *my_cpus().cpus().last().expect("some CPU");
    let only = CpuSet::from_cpus([last]);
    let taskset = ["taskset", "-c", &last.to_string()];
    assert_eq!(
        pe_cpus(&symrun(&taskset, &[], 1), 1),
        [only.clone()].as_slice()
    );
    // Two PEs on one CPU: oversubscribed, so not bound, and still only that CPU.
    assert_eq!(pe_cpus(&symrun(&taskset, &[], 2), 2), [only.clone(), only]);
    let out = symrun(&taskset, &["--bind-to", "core"], 2);
    assert_usage_error(&out, &format!("may run on 1 (CPUs {last})"));
}

#[test]
fn each_pe_logs_its_binding_at_info() {
    let Some(mine) = at_least_two_cpus() else {
        return;
    };
    let out = Command::new(SYMRUN)
        .args(["-n", "2", TEST_PE, "hello"])
        .env("SYMMEM_DEBUG", "info")
        .env("SYMMEM_DEBUG_SUBSYS", "init")
        .env("SYMMEM_SYMMETRIC_SIZE", "16M")
        .env("SYMMEM_TEST_EXPECT_PES", "2")
        .env("SYMMEM_TEST_EXPECT_BOOTSTRAP", "tcp")
        .stdin(Stdio::null())
        .output()
        .expect("running symrun");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for pe in 0..2 {
        let line = format!(
            "PE {pe} bound to CPUs {} (symrun --bind-to core, the default for 2 PEs on {} CPUs)",
            mine.cpus()[pe],
            mine.len()
        );
        assert!(stderr.contains(&line), "{line:?} missing from:\n{stderr}");
    }
}

#[test]
fn self_launch_binds_like_symrun_and_symmem_info_shows_each_pes_cpus() {
    let Some(mine) = at_least_two_cpus() else {
        return;
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_symmem-info"));
    for (k, _) in std::env::vars() {
        if k.starts_with("SYMMEM_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .args(["--pes", "2", "--bind-to", "core"])
        .env("SYMMEM_SYMMETRIC_SIZE", "16M")
        .stdin(Stdio::null())
        .output()
        .expect("running symmem-info");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for pe in 0..2 {
        let line = format!(
            "  CPUs: bound to CPUs {} (symrun --bind-to core)\n",
            mine.cpus()[pe]
        );
        let at = stdout
            .find(&format!("PE {pe}: node "))
            .unwrap_or_else(|| panic!("no PE {pe} in:\n{stdout}"));
        assert!(
            stdout[at..].contains(&line),
            "{line:?} missing from PE {pe} in:\n{stdout}"
        );
    }
    let n = mine.len() + 1;
    let out = Command::new(env!("CARGO_BIN_EXE_symmem-info"))
        .args(["--pes", &n.to_string(), "--bind-to", "core"])
        .stdin(Stdio::null())
        .output()
        .expect("running symmem-info");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("--bind-to core: {n} PEs need {n} cores")),
        "{stderr}"
    );
}

/// A PE bound to one core is told the spare CPUs of its NUMA node for its helper threads
/// (`SYMMEM_LAUNCH_HELPER_CPUS`, which each helper thread moves to: unit-tested in the
/// bootstrap); an unbound PE is told nothing, so its helpers keep its CPUs.
#[test]
fn a_pe_bound_to_a_core_is_given_its_nodes_spare_cpus_for_its_helper_threads() {
    if at_least_two_cpus().is_none() {
        return;
    }
    let mut core = Binding::default();
    core.set("--bind-to", "core").unwrap();
    let spare = Placement::for_this_process(1, &core)
        .unwrap()
        .helper_cpus(0)
        .expect("a PE bound to one of two or more CPUs leaves some spare")
        .to_string();
    let helpers = |bind_to: &str| {
        let out = Command::new(SYMRUN)
            .args(["-n", "1", "--bind-to", bind_to, "sh", "-c"])
            .arg("echo \"helpers=${SYMMEM_LAUNCH_HELPER_CPUS-unset}\"")
            .stdin(Stdio::null())
            .output()
            .expect("running symrun");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(helpers("core"), format!("helpers={spare}"));
    assert_eq!(helpers("none"), "helpers=unset");
}
