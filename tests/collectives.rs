//! Host-API collectives on teams (broadcast, fcollect, collect, alltoall, reduce and
//! reducescatter with every operator and type) on 1, 2, 3 and 4 PEs, and on 2 simulated
//! nodes of 2 PEs (TEAM_NODE is then each node's pair and world, strided, row and column
//! teams cross the socket transport); the argument errors; a collective that one PE never
//! calls times out naming the missing PE; the stream-ordered forms (`Team::*_on_stream`,
//! the host fallback on CPU PEs) and their errors; `Team::alltoallv` and its stream form. The PE side is
//! tests/support/host_api/collectives.rs and stream_collectives.rs.

mod common;

use common::{check_missing_pe_times_out, run_ok, TWO_NODES};

macro_rules! on_1_to_4 {
    ($($name:ident: $scenario:literal;)*) => {
        $(
            mod $name {
                #[test]
                fn on_1_pe() {
                    super::run_ok(1, $scenario, &[]);
                }
                #[test]
                fn on_2_pes() {
                    super::run_ok(2, $scenario, &[]);
                }
                #[test]
                fn on_3_pes() {
                    super::run_ok(3, $scenario, &[]);
                }
                #[test]
                fn on_4_pes() {
                    super::run_ok(4, $scenario, &[]);
                }
                /// 2 nodes x 2 PEs: teams cross the sockets.
                #[test]
                fn on_2_nodes_of_2_pes() {
                    super::run_ok(4, $scenario, &super::TWO_NODES);
                }
            }
        )*
    };
}

on_1_to_4! {
    collectives: "collectives";
    errors: "collective_errors";
    stream: "stream_collectives";
    stream_errors: "stream_collective_errors";
    stream_alltoallv: "stream_alltoallv";
}

/// One node with P2P off: every PE reaches the others over the socket transport, so the
/// reductions take the recursive-doubling (4 PEs: world) and the all-gather (3 PEs: world;
/// reducescatter) algorithms within a node too.
#[test]
fn collectives_on_3_pes_without_p2p() {
    run_ok(3, "collectives", &NO_P2P);
}

/// See [`collectives_on_3_pes_without_p2p`].
#[test]
fn collectives_on_4_pes_without_p2p() {
    run_ok(4, "collectives", &NO_P2P);
}

/// P2P off: the remote transport within one node.
const NO_P2P: [(&str, &str); 2] = [
    ("SYMMEM_DISABLE_P2P", "1"),
    ("SYMMEM_REMOTE_TRANSPORT", "socket"),
];

/// A broadcast that the last PE never calls: the others time out under `SYMMEM_TIMEOUT`,
/// and the missing PE is named by at least one of them.
fn check_timeout(n: usize, env: &[(&str, &str)]) {
    check_missing_pe_times_out(n, "collective_timeout", env);
}

#[test]
fn a_broadcast_missing_a_pe_times_out_2_pes() {
    check_timeout(2, &[]);
}

#[test]
fn a_broadcast_missing_a_pe_times_out_4_pes() {
    check_timeout(4, &[]);
}

#[test]
fn a_broadcast_missing_a_pe_times_out_on_2_nodes_of_2_pes() {
    check_timeout(4, &TWO_NODES);
}

/// Members that pass different `nelems`, roots, operators, element types, `dest` or
/// collectives all get the same `TeamMismatch` naming the PEs and the argument (scenario
/// `collective_mismatch`) under `SYMMEM_CHECK_COLLECTIVES=1`; within one node each PE
/// loads the others' fingerprints through the P2P mapping.
#[test]
fn mismatched_arguments_are_verified_2_pes() {
    run_ok(2, "collective_mismatch", &[CHECK]);
}

/// See [`mismatched_arguments_are_verified_2_pes`].
#[test]
fn mismatched_arguments_are_verified_3_pes() {
    run_ok(3, "collective_mismatch", &[CHECK]);
}

/// Across 2 simulated nodes the check runs under `SYMMEM_CHECK_COLLECTIVES=1` (puts of
/// the fingerprints over the socket transport).
#[test]
fn mismatched_arguments_are_verified_on_2_nodes_of_2_pes() {
    run_ok(
        4,
        "collective_mismatch",
        &[TWO_NODES[0], TWO_NODES[1], CHECK],
    );
}

/// P2P off under `SYMMEM_CHECK_COLLECTIVES=1`: the recursive-doubling (4 PEs) and
/// all-gather (3 PEs) reductions verify their arguments too.
#[test]
fn mismatched_arguments_are_verified_without_p2p_3_and_4_pes() {
    for n in [3, 4] {
        run_ok(n, "collective_mismatch", &[NO_P2P[0], NO_P2P[1], CHECK]);
    }
}

/// The collectives stay right with the check on across nodes.
#[test]
fn collectives_checked_on_2_nodes_of_2_pes() {
    run_ok(4, "collectives", &[TWO_NODES[0], TWO_NODES[1], CHECK]);
}

/// Verify host collectives across nodes too.
const CHECK: (&str, &str) = ("SYMMEM_CHECK_COLLECTIVES", "1");

/// Only the last PE passes a bad argument to each collective (and an overflowing count
/// to `alloc_aligned`): every PE returns the same error naming it, at once, and the next
/// correct collective works everywhere (scenario `collective_one_bad`). Before, the last
/// PE returned at once while the others waited for it in the entry barrier, until the
/// timeout or until its next collective, which they then paired with this one.
fn check_one_bad(n: usize, env: &[(&str, &str)]) {
    let env: Vec<(&str, &str)> = [("SYMMEM_TIMEOUT", "30")]
        .into_iter()
        .chain(env.iter().copied())
        .collect();
    run_ok(n, "collective_one_bad", &env);
}

#[test]
fn one_pe_with_bad_arguments_2_pes() {
    check_one_bad(2, &[]);
}

#[test]
fn one_pe_with_bad_arguments_4_pes() {
    check_one_bad(4, &[]);
}

/// Without P2P the verdict and alert travel over the socket transport.
#[test]
fn one_pe_with_bad_arguments_on_2_nodes_of_2_pes() {
    check_one_bad(4, &TWO_NODES);
}

/// Under the check the verdict rides in the fingerprints every member compares; a PE
/// that syncs where the others call a collective is named by the barrier epoch.
#[test]
fn one_pe_with_bad_arguments_checked_2_and_4_pes() {
    for n in [2, 4] {
        check_one_bad(n, &[CHECK]);
    }
}

/// See [`one_pe_with_bad_arguments_checked_2_and_4_pes`], across nodes.
#[test]
fn one_pe_with_bad_arguments_checked_on_2_nodes_of_2_pes() {
    check_one_bad(4, &[TWO_NODES[0], TWO_NODES[1], CHECK]);
}

/// Every pair of different collectives on TEAM_WORLD (barrier_all, sync_all, team
/// barrier and sync, broadcast, reduce, fcollect, alltoall) on 2 PEs of one node, in one
/// job: where they share a barrier, each PE fails naming both PEs and both operations
/// (the synchronizations meet each other), and the team works afterwards. The pairs that
/// share no barrier here are tests/hang_report.rs's.
#[test]
fn mismatched_pairs_fail_naming_both_on_one_node() {
    run_ok(2, "collective_pairs", &[]);
}

/// [`mismatched_pairs_fail_naming_both_on_one_node`] across 2 simulated nodes, where
/// `barrier_all` and `sync_all` are TEAM_WORLD's barrier: every pair shares it.
#[test]
fn mismatched_pairs_fail_naming_both_across_nodes() {
    run_ok(2, "collective_pairs", &TWO_NODES);
}

/// 2 nodes of 2 PEs: the last PE differs, and the PEs that never hear from it directly
/// learn of it from their partners in the barrier's later rounds.
#[test]
fn mismatched_pairs_fail_on_every_pe_of_2_nodes_of_2_pes() {
    run_ok(4, "collective_pairs", &TWO_NODES);
}
