//! The hang report (`SYMMEM_HANG_REPORT`, issue 52): 2 CPU PEs hang in a known way, PE 0
//! gathers every PE's wait record over the side path after 1 s and writes one report,
//! naming the root, to `SYMMEM_HANG_REPORT_FILE`; every wait still ends at
//! `SYMMEM_TIMEOUT` (3 s) and the job finishes.

mod common;

use common::run_scenario;

/// Runs `api_<scenario>` on 2 PEs with the hang report on; returns the JSON report lines
/// and the job's stderr (where the text report is logged).
fn hang_reports(scenario: &str) -> (Vec<String>, String) {
    hang_reports_with(scenario, &[])
}

/// [`hang_reports`] with `env` added.
fn hang_reports_with(scenario: &str, env: &[(&str, &str)]) -> (Vec<String>, String) {
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
    let job = run_scenario(2, &format!("api_{scenario}"), &all);
    job.assert_success();
    assert_eq!(
        job.stdout
            .lines()
            .filter(|l| l.ends_with(&format!(": {scenario} ok")))
            .count(),
        2,
        "both PEs finish:\n{}",
        job.stdout
    );
    let lines: Vec<String> = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("no hang report in {path}: {e}\n{}", job.stderr))
        .lines()
        .map(str::to_string)
        .collect();
    let _ = std::fs::remove_file(&file);
    // The report as people read it, for the book's chapter.
    eprintln!("{}", job.stderr);
    (lines, job.stderr)
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
/// leaves the two barriers apart), four at once.
#[test]
fn pairs_sharing_no_barrier_are_reported_as_mismatched() {
    let team_ops = [
        "team_barrier",
        "team_sync",
        "team_broadcast",
        "team_reduce",
        "team_fcollect",
        "team_alltoall",
    ];
    let pairs: Vec<String> = ["barrier_all", "sync_all"]
        .iter()
        .flat_map(|a| team_ops.iter().map(move |b| format!("{a},{b}")))
        .collect();
    // Four jobs at a time: all twelve at once on a 2-core machine delayed the reports.
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
                                ("SYMMEM_TIMEOUT", "3"),
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
