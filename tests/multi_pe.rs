//! Multi-PE tests of the host data path and allocation, on 2 and 4 PEs, under symrun or
//! (with `SYMMEM_TEST_LAUNCHER=mpirun`) mpirun.

mod common;
use common::{run_scenario, test_pe};

#[test]
fn put_get_2_pes() {
    run_scenario(2, "put_get", &[]).assert_success();
}

#[test]
fn put_get_4_pes() {
    let job = run_scenario(4, "put_get", &[]);
    job.assert_success();
    assert_eq!(
        job.stdout.matches("put_get ok").count(),
        4,
        "{}",
        job.stdout
    );
}

#[test]
fn barrier_orders_memory_2_pes() {
    run_scenario(2, "barrier", &[]).assert_success();
}

#[test]
fn barrier_orders_memory_4_pes() {
    let job = run_scenario(4, "barrier", &[]);
    job.assert_success();
    assert_eq!(job.stdout.matches("barrier ok").count(), 4);
}

/// A PE that reaches `barrier_all`/`sync_all` 5 s after the others, with
/// `SYMMEM_BOOTSTRAP_TIMEOUT=3`: the barrier is no bootstrap call, so nobody fails; on one
/// node and on 2 nodes of 2 PEs (TEAM_WORLD's barrier over the socket transport).
#[test]
fn a_late_pe_is_waited_for_past_the_bootstrap_timeout() {
    for env in [&[][..], &common::TWO_NODES[..]] {
        let mut all = vec![("SYMMEM_BOOTSTRAP_TIMEOUT", "3")];
        all.extend_from_slice(env);
        let job = run_scenario(4, "late_barrier", &all);
        job.assert_success();
        assert_eq!(
            job.stdout.matches("late_barrier ok").count(),
            4,
            "{env:?}: {}",
            job.stdout
        );
    }
}

#[test]
fn mismatched_allocation_fails_on_every_pe() {
    let job = run_scenario(4, "alloc_mismatch", &[]);
    job.assert_success();
    let errors = job.lines_with("ERROR:");
    assert_eq!(
        errors.len(),
        4,
        "every PE reports the mismatch:\n{}",
        job.stdout
    );
    for e in errors {
        assert!(
            e.contains("call #0")
                && e.contains("PE 0 called alloc(1024 bytes")
                && e.contains("PE 1, 2, 3 called alloc(2048 bytes"),
            "{e}"
        );
    }
}

#[test]
fn out_of_memory_names_the_variable() {
    let job = run_scenario(2, "oom", &[("SYMMEM_SYMMETRIC_SIZE", "1M")]);
    job.assert_success();
    let errors = job.lines_with("ERROR:");
    assert_eq!(errors.len(), 2, "{}", job.stdout);
    for e in errors {
        assert!(
            // One byte more than 1 MiB less the runtime's 64 KiB reserve and the team
            // area (SYMMEM_MAX_TEAMS = 32 slots of 2688 bytes on 2 PEs: barrier flags,
            // epoch, exchange buffers, the collectives' scratch, and the two fingerprint
            // buffers and alert words of the host collectives; then 64 bytes of the
            // arrival barrier of alloc, free and finalize).
            e.contains("SYMMEM_SYMMETRIC_SIZE") && e.contains("requested 896961 bytes"),
            "{e}"
        );
    }
}

#[test]
fn bad_arguments_are_errors_naming_the_problem() {
    run_scenario(2, "bad_args", &[]).assert_success();
}

#[test]
fn reinit_in_one_process_2_pes() {
    let job = run_scenario(2, "reinit", &[]);
    job.assert_success();
    assert_eq!(
        job.lines_with("ERROR:").len(),
        4,
        "stale handles refused:\n{}",
        job.stdout
    );
}

#[test]
fn reinit_in_one_process_4_pes() {
    run_scenario(4, "reinit", &[]).assert_success();
}

#[test]
fn two_nodes_map_only_their_own_peers() {
    run_scenario(4, "two_nodes", &[]).assert_success();
}

#[test]
fn heap_is_an_anonymous_memfd_mapped_by_every_peer() {
    run_scenario(4, "heap_is_memfd", &[]).assert_success();
}

/// Runs the `split_namespace` scenario on 2 PEs under symrun with PE 1 started by
/// `unshare <flags>`; skips (saying so) where `unshare` is not permitted.
fn run_with_pe_1_unshared(flags: &[&str]) {
    // `unshare` needs CAP_SYS_ADMIN (root, or a CI container that grants it).
    let can_unshare = std::process::Command::new("unshare")
        .args(flags)
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    if !can_unshare {
        eprintln!(
            "skipped: `unshare {}` is not permitted here",
            flags.join(" ")
        );
        return;
    }
    // Under symrun (the launcher this test is about), PE 1 in new namespaces.
    let pe = test_pe();
    let script = format!(
        r#"if [ "$SYMMEM_LAUNCH_RANK" = 1 ]; then exec unshare {} '{pe}' split_namespace; else exec '{pe}' split_namespace; fi"#,
        flags.join(" ")
    );
    let job = symmem_test_harness::run_job(
        &symmem_test_harness::Launcher::Symrun(common::SYMRUN.into()),
        2,
        "sh",
        &["-c", &script],
        &[],
    );
    job.assert_success();
    assert_eq!(
        job.stdout.matches("split_namespace ok").count(),
        2,
        "{}",
        job.stdout
    );
}

#[test]
fn same_hostname_but_another_ipc_namespace_is_another_node() {
    run_with_pe_1_unshared(&["-i"]);
}

#[test]
fn same_hostname_but_another_pid_namespace_is_another_node() {
    // A pid names the same process only within one PID namespace, and the heap exchange
    // and the peer watch go by pid: such PEs must not count as one node.
    run_with_pe_1_unshared(&["-p", "-f"]);
}
