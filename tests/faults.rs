//! Failure behaviour: dead PEs, missing ranks, bad configuration, leftover resources.

mod common;
use std::time::Duration;

use common::{run_symrun, spawn_pe, test_pe, wait_output, SYMRUN};

/// Entries of /dev/shm whose name mentions symmem.
fn shm_entries() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("symmem"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn killed_pe_is_named_by_the_others_within_the_timeout() {
    let shm_before = shm_entries();
    let job = run_symrun(4, "kill", &[("SYMMEM_BOOTSTRAP_TIMEOUT", "20")]);
    // symrun reports the first failure: PE 3 killed by SIGKILL → 128 + 9.
    assert_eq!(
        job.status.code(),
        Some(137),
        "stdout:\n{}\nstderr:\n{}",
        job.stdout,
        job.stderr
    );
    assert!(job.stderr.contains("symrun: PE 3"), "{}", job.stderr);
    let errors = job.lines_with("ERROR");
    assert_eq!(
        errors.len(),
        3,
        "each survivor reports the failure:\n{}\n{}",
        job.stdout,
        job.stderr
    );
    for e in errors {
        assert!(e.contains("PE 3 failed while PE"), "{e}");
    }
    assert!(
        job.elapsed < Duration::from_secs(20),
        "took {:?}",
        job.elapsed
    );
    // The heap lived in memfds: nothing is left behind in /dev/shm.
    assert_eq!(shm_entries(), shm_before);
}

#[test]
fn no_pe_survives_a_killed_run() {
    // Tags this job's PEs: other tests (run in parallel) use the same scenario.
    let tag = "SYMMEM_TEST_TAG=no_pe_survives_a_killed_run";
    let job = run_symrun(4, "kill", &[tag.split_once('=').unwrap()]);
    assert!(!job.status.success());
    // symrun reaps every child before it exits; no test PE process of this job remains.
    let ours = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let read = |f: &str| std::fs::read(e.path().join(f)).unwrap_or_default();
            let has = |hay: &[u8], needle: &str| {
                hay.windows(needle.len()).any(|w| w == needle.as_bytes())
            };
            read("cmdline").starts_with(test_pe().as_bytes()) && has(&read("environ"), tag)
        })
        .count();
    assert_eq!(ours, 0, "leftover PE processes");
}

#[test]
fn unique_id_init_across_three_separate_processes() {
    let mut root = spawn_pe(&["uid_root", "3"], &[]);
    let uid = read_uid_line(&mut root);
    let others: Vec<_> = (1..3)
        .map(|r| {
            spawn_pe(
                &["uid_join", &r.to_string(), "3"],
                &[("SYMMEM_TEST_UID", &uid)],
            )
        })
        .collect();
    for child in std::iter::once(root).chain(others) {
        let job = wait_output(child, Duration::from_secs(60));
        job.assert_success();
        assert!(job.stdout.contains("put_get ok"), "{}", job.stdout);
    }
}

/// Reads the `UID ...` line that rank 0 prints, leaving the rest of its output piped.
fn read_uid_line(root: &mut std::process::Child) -> String {
    use std::io::Read;
    let out = root.stdout.as_mut().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).unwrap();
    line.strip_prefix("UID ")
        .unwrap_or_else(|| panic!("expected UID line, got {line:?}"))
        .to_string()
}

#[test]
fn bootstrap_times_out_naming_the_rank_that_never_started() {
    let env = [("SYMMEM_BOOTSTRAP_TIMEOUT", "2")];
    let mut root = spawn_pe(&["uid_root", "3"], &env);
    let uid = read_uid_line(&mut root);
    let one = spawn_pe(
        &["uid_join", "1", "3"],
        &[env[0], ("SYMMEM_TEST_UID", &uid)],
    );
    // Rank 2 is never started.
    for child in [root, one] {
        let job = wait_output(child, Duration::from_secs(30));
        assert!(!job.status.success());
        let err = job.lines_with("ERROR:").join("\n");
        assert!(
            err.contains("rank(s) 2 never arrived") && err.contains("SYMMEM_BOOTSTRAP_TIMEOUT"),
            "{err}\n{}",
            job.stderr
        );
        assert!(
            job.elapsed < Duration::from_secs(10),
            "took {:?}",
            job.elapsed
        );
    }
}

/// Where the fault tests kill a PE, in the order init passes them: symmem's testing-only
/// `SYMMEM_TEST_EXIT_AT` points (see `symmem_bootstrap::fault`), then `first_alloc` (the
/// test program dies after init, while the others make their first allocation).
const DEATH_POINTS: &[&str] = &[
    "rendezvous_join",
    "rendezvous",
    "topology",
    "heap_connect",
    "heap_serve",
    "heap_served_one",
    "heap_receive",
    "init_barrier",
    "first_alloc",
];

/// The bootstrap deadline in the fault-at-init tests. Survivors must be done well before
/// it: a failure found by a timeout, not by watching the victim, fails the test.
const FAULT_TIMEOUT: &str = "30";

/// Checks that `victim` died at `point`, from its stderr.
fn assert_died_at(stderr: &str, victim: usize, point: &str, context: &str) {
    let marker = if point == "first_alloc" {
        "first_alloc: process".to_string()
    } else {
        format!("SYMMEM_TEST_EXIT_AT={point}: process")
    };
    assert!(
        stderr.contains(&marker),
        "{context}: PE {victim} did not die at {point}:\n{stderr}"
    );
}

/// Checks a survivor's error: it names the victim as the failed PE and no other PE.
fn assert_names_victim(error: &str, victim: usize, n: usize, context: &str) {
    assert!(
        error.contains(&format!("PE {victim} failed")),
        "{context}: the error does not name PE {victim}: {error}"
    );
    for pe in (0..n).filter(|&p| p != victim) {
        assert!(
            !error.contains(&format!("PE {pe} failed")),
            "{context}: the error blames PE {pe}, not PE {victim}: {error}"
        );
    }
    assert!(
        !error.contains("timed out"),
        "{context}: found by a timeout, not by watching PE {victim}: {error}"
    );
}

#[test]
fn a_pe_killed_at_any_init_step_is_named_by_every_survivor_under_symrun() {
    let victim = 1;
    for point in DEATH_POINTS {
        let context = format!("symrun, PE {victim} killed at {point}");
        let victim_s = victim.to_string();
        let job = run_symrun(
            3,
            "init_fault",
            &[
                ("SYMMEM_BOOTSTRAP_TIMEOUT", FAULT_TIMEOUT),
                ("SYMMEM_TEST_VICTIM", &victim_s),
                ("SYMMEM_TEST_VICTIM_AT", point),
            ],
        );
        if job.status.code() != Some(137) {
            job.fail(&format!("{context}: symrun should exit 137 (SIGKILL)"));
        }
        assert!(
            job.stderr.contains(&format!("symrun: PE {victim} ")),
            "{context}: {}",
            job.stderr
        );
        assert_died_at(&job.stderr, victim, point, &context);
        let errors = job.lines_with("ERROR");
        if errors.len() != 2 {
            job.fail(&format!("{context}: expected one error from each survivor"));
        }
        for e in errors {
            assert_names_victim(e, victim, 3, &context);
        }
        assert!(
            job.elapsed < Duration::from_secs(20),
            "{context}: took {:?}",
            job.elapsed
        );
    }
}

/// Runs a 3-rank unique-id job in which `victim` dies at `point`; each other rank must
/// fail naming it. With `late` set, that rank starts only after the victim is dead.
fn unique_id_job_with_a_victim(victim: usize, point: &str, late: Option<usize>) {
    let context = format!("unique id, rank {victim} killed at {point}");
    let victim_s = victim.to_string();
    let env = [
        ("SYMMEM_BOOTSTRAP_TIMEOUT", FAULT_TIMEOUT),
        ("SYMMEM_TEST_VICTIM", victim_s.as_str()),
        ("SYMMEM_TEST_VICTIM_AT", point),
    ];
    let mut root = spawn_pe(&["uid_root", "3"], &env);
    let uid = read_uid_line(&mut root);
    let mut ranks = vec![(0, root)];
    let mut jobs = Vec::new();
    for r in 1..3 {
        if Some(r) == late {
            // The victim is gone before this rank starts.
            let at = ranks.iter().position(|(r, _)| *r == victim).unwrap();
            let (v, child) = ranks.remove(at);
            jobs.push((v, wait_output(child, Duration::from_secs(60))));
        }
        let mut env = env.to_vec();
        env.push(("SYMMEM_TEST_UID", &uid));
        ranks.push((r, spawn_pe(&["uid_join", &r.to_string(), "3"], &env)));
    }
    jobs.extend(
        ranks
            .into_iter()
            .map(|(r, child)| (r, wait_output(child, Duration::from_secs(60)))),
    );
    for (rank, job) in &jobs {
        if *rank == victim {
            use std::os::unix::process::ExitStatusExt;
            if job.status.signal() != Some(9) {
                job.fail(&format!("{context}: the victim was not killed"));
            }
            assert_died_at(&job.stderr, victim, point, &context);
            continue;
        }
        let context = format!("{context}, survivor rank {rank}");
        if job.status.success() {
            job.fail(&format!("{context}: succeeded"));
        }
        let errors = job.lines_with("ERROR: ");
        if errors.len() != 1 {
            job.fail(&format!("{context}: expected one ERROR line"));
        }
        assert_names_victim(errors[0], victim, 3, &context);
        assert!(
            job.elapsed < Duration::from_secs(20),
            "{context}: took {:?}",
            job.elapsed
        );
    }
}

#[test]
fn killed_rank_is_named_in_unique_id_mode_too() {
    // No launcher watches these processes: the rendezvous (in rank 0) sees rank 2's
    // connection drop, and rank 0 and 1 see its pidfd once they know its pid.
    for point in DEATH_POINTS {
        unique_id_job_with_a_victim(2, point, None);
    }
}

#[test]
fn killed_rank_0_is_named_in_unique_id_mode() {
    // Rank 0 hosts the rendezvous, which dies with it. Not at rendezvous_join: a rank
    // that finds no rendezvous cannot tell a dead rank 0 from one not started yet, and
    // waits for SYMMEM_BOOTSTRAP_TIMEOUT (as for any rank that never arrives).
    for point in &DEATH_POINTS[1..] {
        unique_id_job_with_a_victim(0, point, None);
    }
}

#[test]
fn a_rank_that_starts_after_another_died_in_the_rendezvous_names_it() {
    // Rank 0 has given up by the time rank 2 starts, but its rendezvous stays up (within
    // the join deadline) until rank 2 has joined and been told that rank 1 failed.
    unique_id_job_with_a_victim(1, "rendezvous_join", Some(2));
}

#[test]
fn bad_environment_value_names_the_variable() {
    for (var, value) in [
        ("SYMMEM_SYMMETRIC_SIZE", "lots"),
        ("SYMMEM_BOOTSTRAP", "pigeon"),
        ("SYMMEM_TIMEOUT", "-5"),
    ] {
        let job = run_symrun(2, "init_error", &[(var, value)]);
        // symrun itself validates the environment first.
        assert_eq!(job.status.code(), Some(2), "{var}={value}");
        assert!(
            job.stderr.contains(var) && job.stderr.contains(value),
            "{}",
            job.stderr
        );
        let child = spawn_pe(&["init_error"], &[(var, value)]);
        let job = wait_output(child, Duration::from_secs(30));
        job.assert_success();
        let err = job.lines_with("ERROR:").join("");
        assert!(err.contains(var) && err.contains(value), "{err}");
    }
}

#[test]
fn mpi_launch_without_the_mpi_feature_fails_loudly() {
    if cfg!(feature = "mpi") {
        eprintln!(
            "skipped: this binary has the mpi feature; the mpirun test run covers MPI launches"
        );
        return;
    }
    let child = spawn_pe(&["init_error"], &[("OMPI_COMM_WORLD_SIZE", "4")]);
    let job = wait_output(child, Duration::from_secs(30));
    job.assert_success();
    let err = job.lines_with("ERROR:").join("");
    assert!(
        err.contains("OMPI_COMM_WORLD_SIZE=4") && err.contains("--features mpi"),
        "{err}"
    );
}

#[test]
fn symrun_rejects_bad_usage_and_reports_the_first_failing_code() {
    let out = std::process::Command::new(SYMRUN)
        .args(["-n", "0", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("positive number of PEs"));
    let out = std::process::Command::new(SYMRUN)
        .args([
            "-n",
            "3",
            "--tag-output",
            "sh",
            "-c",
            "echo hi; exit $SYMMEM_LAUNCH_RANK",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        [1, 2].contains(&out.status.code().unwrap()),
        "{:?}",
        out.status
    );
    for pe in 0..3 {
        assert!(stdout.contains(&format!("[PE {pe}] hi")), "{stdout}");
    }
}

#[test]
fn a_pe_that_finalizes_instead_of_joining_a_barrier_is_named_at_once() {
    let job = run_symrun(
        4,
        "finalize_in_barrier",
        &[("SYMMEM_BOOTSTRAP_TIMEOUT", "60")],
    );
    assert_eq!(job.status.code(), Some(3), "{}\n{}", job.stdout, job.stderr);
    let errors = job.lines_with("ERROR");
    assert_eq!(errors.len(), 3, "{}\n{}", job.stdout, job.stderr);
    for e in errors {
        assert!(
            e.contains("PE 0 failed") || e.contains("failed while PE"),
            "{e}"
        );
    }
    assert!(
        job.stdout.contains("PE 0 failed while") && job.stdout.contains("entered finalize"),
        "{}",
        job.stdout
    );
    // Far below the 60 s bootstrap deadline the others would otherwise wait for.
    assert!(
        job.elapsed < Duration::from_secs(20),
        "took {:?}",
        job.elapsed
    );
}

#[test]
fn a_pe_that_finalizes_instead_of_joining_a_team_barrier_is_named_at_once() {
    let job = run_symrun(
        4,
        "finalize_in_team_barrier",
        &[("SYMMEM_BOOTSTRAP_TIMEOUT", "30")],
    );
    assert_eq!(job.status.code(), Some(3), "{}\n{}", job.stdout, job.stderr);
    let errors = job.lines_with("ERROR");
    assert_eq!(errors.len(), 3, "{}\n{}", job.stdout, job.stderr);
    for e in &errors {
        // Those waiting for PE 0 name it; those waiting for one that failed on PE 0
        // name PE 0 as the root cause too.
        assert!(e.contains("PE 0 failed while PE"), "{e}");
        assert!(!e.contains("timed out"), "{e}");
    }
    assert!(
        errors
            .iter()
            .any(|e| e.contains("was in team_barrier") && e.contains("entered finalize")),
        "{}",
        job.stdout
    );
    // Far below the 30 s bootstrap deadline after which PE 0's finalize would give up.
    assert!(
        job.elapsed < Duration::from_secs(15),
        "took {:?}",
        job.elapsed
    );
}

#[test]
fn alloc_free_and_finalize_wait_for_a_late_pe_past_the_bootstrap_deadline() {
    // One PE is 2.5 s late for each collective, with a 2 s bootstrap deadline: on one
    // node, and on 2 nodes of 2 PEs (the arrival barrier over the socket transport).
    for nodes in [&[][..], &common::TWO_NODES[..]] {
        let mut env = vec![("SYMMEM_BOOTSTRAP_TIMEOUT", "2")];
        env.extend_from_slice(nodes);
        let job = run_symrun(4, "late_collectives", &env);
        job.assert_success();
        assert_eq!(
            job.stdout.matches("late_collectives ok").count(),
            4,
            "{nodes:?}: {}",
            job.stdout
        );
    }
}

#[test]
fn a_pe_that_dies_instead_of_allocating_is_named_at_once() {
    let job = run_symrun(4, "die_before_alloc", &[("SYMMEM_BOOTSTRAP_TIMEOUT", "30")]);
    assert_eq!(
        job.status.code(),
        Some(137),
        "{}\n{}",
        job.stdout,
        job.stderr
    );
    let errors = job.lines_with("ERROR");
    assert_eq!(errors.len(), 3, "{}\n{}", job.stdout, job.stderr);
    for e in errors {
        assert_names_victim(e, 3, 4, "a PE killed before alloc");
        assert!(e.contains("was in alloc"), "{e}");
    }
    assert!(
        job.elapsed < Duration::from_secs(15),
        "took {:?}",
        job.elapsed
    );
}

#[test]
fn a_pe_that_panics_is_named_by_the_others_at_once() {
    let job = run_symrun(
        3,
        "panic_with_runtime",
        &[("SYMMEM_BOOTSTRAP_TIMEOUT", "60")],
    );
    assert!(!job.status.success());
    let errors = job.lines_with("ERROR");
    assert_eq!(errors.len(), 2, "{}\n{}", job.stdout, job.stderr);
    for e in errors {
        assert!(e.contains("PE 1 failed"), "{e}");
    }
    assert!(
        job.elapsed < Duration::from_secs(20),
        "took {:?}",
        job.elapsed
    );
}

#[test]
fn a_pe_that_leaves_because_another_died_is_not_blamed_by_a_barrier() {
    // A (PE 0) dies while B (PE 1) waits for it; B drops its runtime; only then does C
    // (PE 2) enter barrier_all, whose first round waits for B. The order is fixed by the
    // scenario (C waits for B's marker file), so C always finds B in finalize rather
    // than A dead, and must still name A: the cause B recorded wins.
    let dir = std::env::temp_dir();
    for round in 0..3 {
        let marker = dir.join(format!(
            "symmem-cascade-{}-{round}.marker",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&marker);
        let job = run_symrun(
            3,
            "cascade_to_barrier",
            &[
                ("SYMMEM_BOOTSTRAP_TIMEOUT", "60"),
                ("SYMMEM_TEST_MARKER", marker.to_str().unwrap()),
            ],
        );
        let _ = std::fs::remove_file(&marker);
        let context = format!("round {round}");
        if job.status.code() != Some(137) {
            job.fail(&format!(
                "{context}: symrun should report PE 0's SIGKILL (137)"
            ));
        }
        for (who, op) in [(1, "wait_until"), (2, "barrier_all")] {
            let errors = job.lines_with(&format!("ERROR (PE {who} in {op}): "));
            if errors.len() != 1 {
                job.fail(&format!("{context}: expected one error from PE {who}"));
            }
            assert_names_victim(errors[0], 0, 3, &format!("{context}, PE {who}"));
        }
        let c = job.lines_with("ERROR (PE 2 in barrier_all): ")[0];
        assert!(
            c.contains("PE 1 entered finalize") && c.contains("failure of PE 0"),
            "{context}: C should say that B left because of A: {c}"
        );
        assert!(
            job.elapsed < Duration::from_secs(20),
            "{context}: took {:?}",
            job.elapsed
        );
    }
}
