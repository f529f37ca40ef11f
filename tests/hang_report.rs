//! The hang report (`SYMMEM_HANG_REPORT`, issue 52): 2 CPU PEs hang in a known way, PE 0
//! gathers every PE's wait record over the side path after 1 s and writes one report,
//! naming the root, to `SYMMEM_HANG_REPORT_FILE`; every wait still ends at
//! `SYMMEM_TIMEOUT` (3 s) and the job finishes. A report can also be asked for with
//! SIGUSR1, hang or not.

mod common;

use common::run_scenario;

/// Runs `api_<scenario>` on 2 PEs with the hang report on; returns the JSON report lines
/// and the job's stderr (where the text report is logged).
fn hang_reports(scenario: &str) -> (Vec<String>, String) {
    hang_reports_with(scenario, &[])
}

/// [`hang_reports`] with `env` added.
fn hang_reports_with(scenario: &str, env: &[(&str, &str)]) -> (Vec<String>, String) {
    hang_reports_on(2, scenario, env)
}

/// [`hang_reports_with`] on `n` PEs.
fn hang_reports_on(n: usize, scenario: &str, env: &[(&str, &str)]) -> (Vec<String>, String) {
    let file = std::env::temp_dir().join(format!(
        "symmem-hang-{scenario}-{}-{}.jsonl",
        env.len(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&file);
    let path = file.to_str().expect("a UTF-8 temporary path");
    let mut all = vec![
        ("SYMMEM_TIMEOUT", "3"),
        ("SYMMEM_HANG_REPORT", "1"),
        ("SYMMEM_HANG_REPORT_FILE", path),
    ];
    all.extend_from_slice(env);
    let job = run_scenario(n, &format!("api_{scenario}"), &all);
    job.assert_success();
    assert_eq!(
        job.stdout
            .lines()
            .filter(|l| l.ends_with(&format!(": {scenario} ok")))
            .count(),
        n,
        "every PE finishes:\n{}",
        job.stdout
    );
    let lines = take_reports(&file, &job.stderr);
    // The report as people read it, for the book's chapter.
    eprintln!("{}", job.stderr);
    (lines, job.stderr)
}

/// The JSON report lines in `file`, which is then removed; a missing file fails the test
/// with the job's `stderr`.
fn take_reports(file: &std::path::Path, stderr: &str) -> Vec<String> {
    let lines = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("no hang report in {}: {e}\n{stderr}", file.display()))
        .lines()
        .map(str::to_string)
        .collect();
    let _ = std::fs::remove_file(file);
    lines
}

/// Asserts that exactly one report came, from PE 0, and that it contains each of `want`.
fn one_report(lines: &[String], stderr: &str, want: &[&str]) {
    assert_eq!(lines.len(), 1, "one report per hang: {lines:#?}");
    for w in want {
        assert!(lines[0].contains(w), "the report lacks {w:?}: {}", lines[0]);
    }
    assert!(lines[0].starts_with("{\"reporter\":0,"), "{}", lines[0]);
    assert_eq!(
        stderr.matches("hang report from PE").count(),
        1,
        "one text report:\n{stderr}"
    );
}

#[test]
fn a_forgotten_signal_names_the_pe_in_user_code() {
    let (lines, stderr) = hang_reports("hang_forgotten_signal");
    one_report(
        &lines,
        &stderr,
        &[
            "\"root\":[1],\"reason\":\"in user code\"",
            "\"chain\":[0,1]",
            "{\"pe\":0,\"state\":\"waiting\",\"op\":\"signal_wait_until\"",
            "{\"pe\":1,\"state\":\"outside\"",
        ],
    );
    assert!(stderr.contains("root: PE 1 is in user code"), "{stderr}");
}

/// The forgotten signal, waited for in a kernel (the CPU executor's device
/// `signal_wait_until`): PE 0's device wait record shows it waiting in `device wait_until`
/// on the signal's word, and the kernel's slow wait asks for the report.
#[test]
fn a_forgotten_signal_in_a_kernel_names_the_pe_in_user_code() {
    let (lines, stderr) = hang_reports("hang_device_signal");
    one_report(
        &lines,
        &stderr,
        &[
            "\"root\":[1],\"reason\":\"in user code\"",
            "\"chain\":[0,1]",
            "{\"pe\":0,\"state\":\"waiting\",\"op\":\"device wait_until\"",
            "the word at heap offset",
            "is 0, waiting for == 1 (any PE may write it)",
            "{\"pe\":1,\"state\":\"outside\"",
        ],
    );
    assert!(stderr.contains("root: PE 1 is in user code"), "{stderr}");
}

#[test]
fn a_skipped_barrier_names_the_pe_not_in_it() {
    let (lines, stderr) = hang_reports("hang_barrier_skipped");
    one_report(
        &lines,
        &stderr,
        &[
            "\"root\":[1],\"reason\":\"signal nobody will write\"",
            "\"chain\":[0,1]",
            "not in barrier_all (PE 0 waits for it there)",
            "\"op\":\"barrier_all\"",
            "\"team\":\"TEAM_WORLD\",\"members\":[0,1]",
        ],
    );
}

#[test]
fn mismatched_collectives_are_named() {
    let (lines, stderr) = hang_reports("hang_mismatched_collectives");
    one_report(
        &lines,
        &stderr,
        &[
            "\"root\":[0,1],\"reason\":\"mismatched collectives\"",
            "PE 0 in barrier_all (TEAM_WORLD",
            "PE 1 in team_broadcast (TEAM_WORLD",
        ],
    );
}

#[test]
fn a_stopped_pe_is_not_answering() {
    let (lines, stderr) = hang_reports("hang_stopped_pe");
    one_report(
        &lines,
        &stderr,
        &[
            "\"root\":[1],\"reason\":\"not answering\"",
            "{\"pe\":1,\"state\":\"not answering\"",
        ],
    );
    assert!(
        stderr.contains("PE 1 not answering: dead or stopped"),
        "{stderr}"
    );
}

/// A forgotten signal across two simulated nodes over the socket transport: the side
/// path reaches the other node's PE.
#[test]
fn a_forgotten_signal_across_nodes_names_the_pe_in_user_code() {
    let (lines, stderr) = hang_reports_with("hang_forgotten_signal", &common::TWO_NODES);
    one_report(
        &lines,
        &stderr,
        &[
            "\"root\":[1],\"reason\":\"in user code\"",
            "\"chain\":[0,1]",
        ],
    );
}

/// A loop of `test` calls is a wait: PE 0 is shown polling, and PE 1, in user code, is
/// the root.
#[test]
fn a_loop_of_tests_is_shown_as_a_wait() {
    let (lines, stderr) = hang_reports("hang_test_loop");
    one_report(
        &lines,
        &stderr,
        &[
            "\"root\":[1],\"reason\":\"in user code\"",
            "{\"pe\":0,\"state\":\"waiting\",\"op\":\"test (polled in a loop)\"",
        ],
    );
}

/// A quiet blocked inside the socket transport (its target on another node is stopped)
/// is shown as a wait for that PE, which does not answer.
#[test]
fn a_quiet_blocked_in_the_transport_names_its_peer() {
    let mut env = common::TWO_NODES.to_vec();
    env.push(("SYMMEM_TIMEOUT", "0"));
    let (lines, stderr) = hang_reports_with("hang_quiet_stopped_peer", &env);
    one_report(
        &lines,
        &stderr,
        &[
            "\"root\":[1],\"reason\":\"not answering\"",
            "{\"pe\":0,\"state\":\"waiting\",\"op\":\"quiet\",\"detail\":\"the socket transport's answer from PE 1\",\"peer\":1",
        ],
    );
}

/// Three PEs: two in `barrier_all`, the third in user code, is the root.
#[test]
fn a_pe_missing_from_a_barrier_of_three_is_the_root() {
    let (lines, stderr) = hang_reports_on(3, "hang_barrier_three", &[]);
    one_report(
        &lines,
        &stderr,
        &[
            "\"root\":[2],\"reason\":\"in user code\"",
            "\"chain\":[0,2]",
            "\"team\":\"TEAM_WORLD\",\"members\":[0,1,2]",
        ],
    );
}

/// SIGUSR1 to PE 0's process makes one report each time, from PE 0: "no hang" while both
/// PEs are in user code, then, while PE 0 waits for a signal, the root (PE 1, in user
/// code); `SYMMEM_HANG_REPORT` (60 s) never fires on its own.
#[test]
fn sigusr1_asks_for_one_report_hang_or_not() {
    let file = std::env::temp_dir().join(format!("symmem-hang-asked-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let path = file.to_str().expect("a UTF-8 temporary path");
    let job = run_scenario(
        2,
        "api_hang_asked",
        &[
            ("SYMMEM_TIMEOUT", "30"),
            ("SYMMEM_HANG_REPORT", "60"),
            ("SYMMEM_HANG_REPORT_FILE", path),
        ],
    );
    job.assert_success();
    let lines = take_reports(&file, &job.stderr);
    eprintln!("{}", job.stderr);
    assert_eq!(lines.len(), 2, "one report per signal: {lines:#?}");
    assert!(
        lines[0].starts_with(
            "{\"reporter\":0,\"trigger\":\"asked\",\"root\":[],\"reason\":\"no hang\""
        ),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("\"chain\":[]"), "{}", lines[0]);
    for want in [
        "{\"reporter\":0,\"trigger\":\"asked\",\"root\":[1],\"reason\":\"in user code\"",
        "\"chain\":[0,1]",
        "{\"pe\":0,\"state\":\"waiting\",\"op\":\"signal_wait_until\"",
        "{\"pe\":1,\"state\":\"outside\"",
    ] {
        assert!(
            lines[1].contains(want),
            "the report lacks {want:?}: {}",
            lines[1]
        );
    }
    assert_eq!(
        job.stderr
            .matches("hang report from PE 0 (asked for)")
            .count(),
        2,
        "two text reports:\n{}",
        job.stderr
    );
    assert!(
        job.stderr.contains(
            "hang report from PE 0 (asked for): no hang: every PE is outside symmem or running"
        ),
        "{}",
        job.stderr
    );
}

/// Mismatched collectives across two simulated nodes: PE 0 in `barrier_all`, PE 1 in
/// TEAM_WORLD's `team_broadcast`. Across nodes both run TEAM_WORLD's barrier, where they
/// paired silently (both returned Ok, PE 1 with a `dest` nobody wrote); now the barrier
/// carries each call's identity and both PEs fail at once, naming both PEs and both
/// operations, with no hang to report; TEAM_WORLD works afterwards.
#[test]
fn mismatched_collectives_across_nodes_are_named() {
    common::run_ok(2, "mismatched_collectives_named", &common::TWO_NODES);
}

/// On one node `barrier_all` and `sync_all` have a barrier of their own, which no
/// TEAM_WORLD operation meets: each such pair blocks, and the hang report names the
/// mismatch and both operations. Every pair runs as its own job (a timed-out barrier
/// leaves the two barriers apart), four at once: a sample of the twelve pairs.
#[test]
fn pairs_sharing_no_barrier_are_reported_as_mismatched() {
    // Four of the twelve pairs (each of `barrier_all` and `sync_all` against a team
    // barrier and a data collective), side by side: every pair costs a job and a timeout.
    let pairs = [
        "barrier_all,team_sync",
        "barrier_all,team_alltoall",
        "sync_all,team_barrier",
        "sync_all,team_reduce",
    ];
    for (batch, pairs) in pairs.chunks(4).enumerate() {
        std::thread::scope(|s| {
            let jobs: Vec<_> = pairs
                .iter()
                .enumerate()
                .map(|(i, pair)| {
                    let i = batch * 4 + i;
                    s.spawn(move || {
                        let file = std::env::temp_dir()
                            .join(format!("symmem-hang-pair-{i}-{}.jsonl", std::process::id()));
                        let _ = std::fs::remove_file(&file);
                        let path = file.to_str().expect("a UTF-8 temporary path");
                        common::run_ok(
                            2,
                            "collective_pair_hangs",
                            &[
                                ("SYMMEM_TIMEOUT", "5"),
                                ("SYMMEM_HANG_REPORT", "1"),
                                ("SYMMEM_HANG_REPORT_FILE", path),
                                ("SYMMEM_TEST_PAIR", pair),
                            ],
                        );
                        let report = std::fs::read_to_string(&file)
                            .unwrap_or_else(|e| panic!("{pair}: no hang report in {path}: {e}"));
                        let _ = std::fs::remove_file(&file);
                        let (a, b) = pair.split_once(',').expect("a,b");
                        for want in [
                            "\"reason\":\"mismatched collectives\"".to_string(),
                            format!("PE 0 in {a} (TEAM_WORLD"),
                            format!("PE 1 in {b} (TEAM_WORLD"),
                        ] {
                            assert!(
                                report.contains(&want),
                                "{pair}: the report lacks {want:?}: {report}"
                            );
                        }
                    })
                })
                .collect();
            for j in jobs {
                j.join().expect("a pair's job");
            }
        });
    }
}
