//! Failing kernels on the CPU executor: a panicking thread fails its launch without
//! hanging the threads that wait for it, and a kernel waiting for a PE that dies fails
//! naming that PE.

mod common;
use std::time::Duration;

use common::{run, run_self_launched};

/// One thread of a 64-thread block (and of a 2-D 8×8 block, and of a cooperative launch)
/// panics while its siblings wait in a signal wait, `sync_warp` and `sync_threads`: every
/// launch fails with `KernelFailed` naming the block and thread, and the PE goes on.
fn kernel_panic(n: usize) {
    let job = run(n, "kernel_panic");
    job.assert_ok(n, "kernel_panic");
    let errors = job.lines_with("ERROR (expected");
    for pe in 0..n {
        for (where_, count) in [
            ("block (1, 0, 0) thread (37, 0, 0)", 2),
            ("block (1, 1, 0) thread (5, 4, 0)", 1),
        ] {
            let needle = format!("kernel failed on PE {pe} in {where_}: deliberate kernel panic");
            if errors.iter().filter(|e| e.contains(&needle)).count() != count {
                job.fail(&format!("want {count} line(s) with {needle:?}"));
            }
        }
    }
    if errors.len() != 3 * n {
        job.fail("want 3 expected-error lines per PE");
    }
}

#[test]
fn kernel_panic_2_pes() {
    kernel_panic(2);
}

#[test]
fn kernel_panic_4_pes() {
    kernel_panic(4);
}

/// Under a seeded lane schedule the same failures name the seed, so the interleaving
/// that failed can be replayed with it.
#[test]
fn kernel_panic_names_its_seed_2_pes() {
    let job = common::run_with_env(2, "kernel_panic", &[("SYMMEM_EXEC_SEED", "77")]);
    job.assert_ok(2, "kernel_panic");
    let errors = job.lines_with("ERROR (expected");
    let seeded = errors
        .iter()
        .filter(|e| e.contains("deliberate kernel panic [lane schedule: SYMMEM_EXEC_SEED=77]"))
        .count();
    if errors.len() != 6 || seeded != 6 {
        job.fail("want 3 expected-error lines per PE, each naming SYMMEM_EXEC_SEED=77");
    }
}

/// The last PE raises SIGKILL while every other PE's kernel waits for a signal from it:
/// each survivor's launch fails naming the dead PE (thread 0 of block 0 was waiting), the
/// survivors exit 3 and the job exits 137 (the killed PE's status), well within the
/// deadline.
fn kill_in_wait(n: usize) {
    kill_in(n, "kill_in_wait");
}

/// Runs `scenario`, in which the last PE raises SIGKILL while the others wait for it in a
/// kernel, and checks what [`kill_in_wait`] says.
fn kill_in(n: usize, scenario: &str) {
    let job = run_self_launched(n, scenario);
    let victim = n - 1;
    if job.status.code() != Some(137) {
        job.fail("want exit status 137 (SIGKILL of the victim)");
    }
    if !job.stderr.contains(&format!("PE {victim} (pid"))
        || !job.stderr.contains("killed by signal 9")
    {
        job.fail("the launcher does not name the killed PE");
    }
    let errors = job.lines_with("ERROR after");
    if errors.len() != n - 1 {
        job.fail("want one error line per survivor");
    }
    for pe in 0..victim {
        let needle = format!(
            "kernel failed on PE {pe} in block (0, 0, 0) thread (0, 0, 0): PE {victim} failed while PE {pe} was in a kernel wait"
        );
        if !errors.iter().any(|e| e.contains(&needle)) {
            job.fail(&format!("no line with {needle:?}"));
        }
    }
    if job.elapsed >= Duration::from_secs(20) {
        job.fail("the failure took too long to detect");
    }
}

#[test]
fn kernel_waiting_for_a_killed_pe_fails_2_pes() {
    kill_in_wait(2);
}

#[test]
fn kernel_waiting_for_a_killed_pe_fails_4_pes() {
    kill_in_wait(4);
}

/// As [`kill_in_wait`], the survivors waiting in a device `team_barrier_block` on
/// TEAM_WORLD (3 PEs: one survivor waits for the victim directly, the other through it).
#[test]
fn device_team_barrier_with_a_killed_pe_fails_3_pes() {
    kill_in(3, "kill_in_team_barrier");
}

/// A device `g` through the proxy channel to a PE of another node that was killed fails
/// the launch naming that PE within the deadline (no hang). Two diagnoses race, and both
/// are right: the proxy thread's transport sees the connection reset and marks its ring
/// failed (naming the op and the transport), or the kernel wait hears from the bootstrap
/// that PE 1 is gone.
#[test]
fn device_op_through_the_proxy_to_a_killed_pe_fails_naming_it() {
    let job =
        common::run_self_launched_with_env(2, "kill_remote", &[("SYMMEM_SIMULATE_NODES", "2")]);
    if job.status.code() != Some(137) {
        job.fail("want exit status 137 (SIGKILL of the victim)");
    }
    let errors = job.lines_with("ERROR after");
    let prefix = "kernel failed on PE 0 in block (0, 0, 0) thread (0, 0, 0): ";
    let by_proxy = "symmem device: PE 0's proxy channel failed issuing a request to PE 1 on the remote transport (PE 0's proxy thread: device-initiated get of 8 bytes to PE 1 failed on the socket transport:";
    let by_bootstrap = "PE 1 failed while PE 0 was in a kernel wait";
    let named = |e: &str| {
        e.split_once(prefix)
            .is_some_and(|(_, rest)| rest.starts_with(by_proxy) || rest.starts_with(by_bootstrap))
    };
    if errors.len() != 1 || !named(errors[0]) {
        job.fail(&format!(
            "want one error line with {prefix:?} then {by_proxy:?} or {by_bootstrap:?}"
        ));
    }
    if job.elapsed >= Duration::from_secs(20) {
        job.fail("the failure took too long to detect");
    }
}

/// A kernel of PE 0 waiting in a device `sync_all` for PE 1, alive but silent, fails at
/// the deadline (`SYMMEM_TIMEOUT=2`) with a message naming both PEs, the wait and the
/// flag's value, and not much later.
#[test]
fn a_device_wait_for_a_silent_peer_fails_at_its_deadline_naming_both_pes() {
    let job = common::run_with_env(2, "silent_peer", &[("SYMMEM_TIMEOUT", "2")]);
    let errors = job.lines_with("ERROR (expected)");
    let needle = "PE 0's device sync_all for PE 1: the word at heap offset";
    if errors.len() != 1 || !errors[0].contains(needle) || !errors[0].contains("timed out after 2s")
    {
        job.fail(&format!(
            "want one expected-error line naming {needle:?} and the 2 s deadline"
        ));
    }
    if !job.status.success() {
        job.fail("want both PEs to exit 0");
    }
    if job.elapsed >= Duration::from_secs(15) {
        job.fail("the timeout took too long");
    }
}

/// A peer process that exits while a kernel waits for it fails the launch within
/// seconds (not at the 60 s deadline), naming the peer: the scenario the GPU bundle runs
/// for the host's failed-peer word. Self-launched whatever the launcher choice: a peer
/// that exits with status 0 is seen through its pidfd, which the MPI bootstrap under
/// mpirun does not exchange (mpirun itself reports it only at the end of the job).
#[test]
fn a_peer_that_exits_during_a_kernel_wait_fails_it_at_once_naming_the_peer() {
    let job = common::run_self_launched(2, "peer_exits_in_kernel_wait");
    let errors = job.lines_with("ERROR (expected)");
    if errors.len() != 1 || !errors[0].contains("PE 1 failed while PE 0") {
        job.fail("want one expected-error line naming PE 1 as the failed peer");
    }
    if !job.status.success() {
        job.fail("want both PEs to exit 0");
    }
    if job.elapsed >= Duration::from_secs(20) {
        job.fail("the failure took too long to surface");
    }
}

/// Threads that return before their siblings' `sync_threads` count as arrived: the
/// launch completes instead of hanging.
#[test]
fn threads_that_exit_early_do_not_hang_their_block_2_pes() {
    run(2, "early_exit").assert_ok(2, "early_exit");
}
