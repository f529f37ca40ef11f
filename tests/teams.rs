//! Teams on 1, 2, 3 and 4 PEs, and on 2 simulated nodes of 2 PEs (TEAM_NODE is then each
//! node's pair; team barriers cross the socket transport): TEAM_WORLD and TEAM_NODE,
//! strided, nested and 2D splits (every `xrange` from 1 to n_pes + 1, so non-dividing ones
//! and one past the team), translation, team barriers with their data checked, slot
//! reuse past `SYMMEM_MAX_TEAMS`, the error cases (bad triplets and `xrange`, PEs that
//! disagree, destroying the predefined teams) and the team limit. The PE side is
//! tests/support/host_api/teams.rs.

mod common;

use std::time::Duration;

use common::{check_missing_pe_times_out, run_ok, run_symrun, spawn_pe, wait_output, TWO_NODES};

const LIMIT: [(&str, &str); 1] = [("SYMMEM_MAX_TEAMS", "4")];

macro_rules! on_1_to_4 {
    ($($name:ident: $scenario:literal, $env:expr;)*) => {
        $(
            mod $name {
                #[test]
                fn on_1_pe() {
                    super::run_ok(1, $scenario, &$env);
                }
                #[test]
                fn on_2_pes() {
                    super::run_ok(2, $scenario, &$env);
                }
                #[test]
                fn on_3_pes() {
                    super::run_ok(3, $scenario, &$env);
                }
                #[test]
                fn on_4_pes() {
                    super::run_ok(4, $scenario, &$env);
                }
                /// 2 nodes x 2 PEs: TEAM_NODE is each pair; teams cross the sockets.
                #[test]
                fn on_2_nodes_of_2_pes() {
                    let env: Vec<(&str, &str)> =
                        $env.iter().chain(super::TWO_NODES.iter()).copied().collect();
                    super::run_ok(4, $scenario, &env);
                }
            }
        )*
    };
}

on_1_to_4! {
    teams: "teams", [];
    errors: "team_errors", [];
    limit: "team_limit", super::LIMIT;
}

/// A split that the last PE never calls: the others time out under `SYMMEM_TIMEOUT`, and
/// the missing PE is named by at least one of them.
fn check_timeout(n: usize, env: &[(&str, &str)]) {
    check_missing_pe_times_out(n, "team_timeout", env);
}

#[test]
fn a_split_missing_a_pe_times_out_2_pes() {
    check_timeout(2, &[]);
}

#[test]
fn a_split_missing_a_pe_times_out_4_pes() {
    check_timeout(4, &[]);
}

#[test]
fn a_split_missing_a_pe_times_out_on_2_nodes_of_2_pes() {
    check_timeout(4, &TWO_NODES);
}

/// A heap too small for the runtime's reserve and the team area fails init on every PE,
/// naming both variables.
#[test]
fn a_heap_without_room_for_the_team_area_is_an_init_error() {
    // Under symrun: an MPI launch aborts the whole job on an init error (MPI_Abort), so
    // the PEs could not print theirs.
    let job = run_symrun(
        2,
        "init_error",
        &[
            ("SYMMEM_SYMMETRIC_SIZE", "64K"),
            ("SYMMEM_MAX_TEAMS", "100"),
        ],
    );
    job.assert_success();
    let errors = job.lines_with("ERROR: ");
    assert_eq!(errors.len(), 2, "{}", job.stdout);
    for e in errors {
        assert!(
            e.contains("SYMMEM_SYMMETRIC_SIZE") && e.contains("SYMMEM_MAX_TEAMS = 100"),
            "{e}"
        );
    }
}

/// Starts 2 PEs by unique id, PE 0 with `var` = `values[0]` and PE 1 with `values[1]`:
/// each must fail init with an `ERROR:` line naming `var` and `PE 0: a, PE 1: b`.
fn different_settings_fail_init(var: &str, values: [&str; 2]) {
    use std::io::Read;
    let mut root = spawn_pe(&["uid_root", "2"], &[(var, values[0])]);
    let out = root.stdout.as_mut().expect("piped stdout");
    let (mut line, mut byte) = (Vec::new(), [0u8; 1]);
    while out.read(&mut byte).expect("reading the UID line") == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).expect("UTF-8");
    let uid = line
        .strip_prefix("UID ")
        .unwrap_or_else(|| panic!("expected the UID line, got {line:?}"))
        .to_string();
    let other = spawn_pe(
        &["uid_join", "1", "2"],
        &[(var, values[1]), ("SYMMEM_TEST_UID", &uid)],
    );
    let both = format!("PE 0: {}, PE 1: {}", values[0], values[1]);
    for child in [root, other] {
        let job = wait_output(child, Duration::from_secs(60));
        let err = job.lines_with("ERROR: ").join("");
        assert!(
            err.contains(var) && err.contains(&both),
            "stdout:\n{}\nstderr:\n{}",
            job.stdout,
            job.stderr
        );
    }
}

/// PEs started with different `SYMMEM_MAX_TEAMS` (which decides where allocations start)
/// fail init, naming each PE's value.
#[test]
fn different_max_teams_on_two_pes_is_an_init_error() {
    different_settings_fail_init("SYMMEM_MAX_TEAMS", ["8", "32"]);
}

/// PEs started with different `SYMMEM_CHECK_COLLECTIVES` fail init, naming the variable
/// and each PE's value: with the check on some PEs only, those would wait for (or read
/// stale) fingerprints the others never send.
#[test]
fn different_check_collectives_on_two_pes_is_an_init_error() {
    different_settings_fail_init("SYMMEM_CHECK_COLLECTIVES", ["1", "0"]);
}
