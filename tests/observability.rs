//! Observability: what `SYMMEM_DEBUG=info` prints (the configuration, how each peer is
//! reached and why, the counters at finalize), that `SYMMEM_DEBUG_SUBSYS` selects the
//! transport lines, and the exact per-path operation counters of `Runtime::counters`.

mod common;
use common::{run_scenario, Job, TWO_NODES};

/// Fails unless stderr has a line containing every one of `needles`.
fn assert_line(job: &Job, needles: &[&str]) {
    if !job
        .stderr
        .lines()
        .any(|l| needles.iter().all(|n| l.contains(n)))
    {
        job.fail(&format!("no stderr line with all of {needles:?}"));
    }
}

#[test]
fn info_prints_the_configuration_each_peer_s_path_and_the_counters() {
    let job = run_scenario(
        2,
        "hello",
        &[("SYMMEM_DEBUG", "info"), ("SYMMEM_SYMMETRIC_SIZE", "64M")],
    );
    job.assert_success();
    for (me, peer) in [(0, 1), (1, 0)] {
        assert_line(
            &job,
            &[
                &format!("PE {me} configuration: set: "),
                "SYMMEM_DEBUG=info",
                "SYMMEM_SYMMETRIC_SIZE=64M",
                "effective: 2 PEs",
                "heap 67108864 bytes",
                "P2P on",
            ],
        );
        assert_line(
            &job,
            &[&format!("PE {me} reaches PE {peer} over p2p (same node")],
        );
        // hello puts one u64 to its neighbour and gets one from itself.
        assert_line(
            &job,
            &[
                &format!("PE {me} counters: direct: put 1 (8 B), get 1 (8 B)"),
                "remote (none): put 0",
                "ring high-water 0",
            ],
        );
    }
}

#[test]
fn the_transport_subsystem_shows_each_remote_peer_s_transport_and_why() {
    let job = run_scenario(
        2,
        "hello",
        &[
            ("SYMMEM_DEBUG", "info"),
            ("SYMMEM_DEBUG_SUBSYS", "transport"),
            ("SYMMEM_SIMULATE_NODES", "2"),
        ],
    );
    job.assert_success();
    for (me, peer) in [(0, 1), (1, 0)] {
        assert_line(
            &job,
            &[
                &format!("PE {me} configuration: set: "),
                "SYMMEM_DEBUG_SUBSYS=transport",
                "SYMMEM_SIMULATE_NODES=2",
                "remote transport socket",
            ],
        );
        // The job's choice and its reason (auto: no usable RDMA device here).
        assert_line(
            &job,
            &[&format!("PE {me} reaches PE {peer} over socket (auto: ")],
        );
        assert_line(
            &job,
            &[
                &format!("PE {me} counters: "),
                "remote (socket): put 1 (8 B)",
            ],
        );
    }
    // init's own lines are not selected.
    if job.stderr.contains("symmem initialized") {
        job.fail("SYMMEM_DEBUG_SUBSYS=transport printed init's lines");
    }
}

#[test]
fn disabling_p2p_warns_for_each_same_node_peer() {
    let job = run_scenario(
        2,
        "hello",
        &[("SYMMEM_DISABLE_P2P", "1"), ("SYMMEM_DEBUG", "warn")],
    );
    job.assert_success();
    for (me, peer) in [(0, 1), (1, 0)] {
        assert_line(
            &job,
            &[
                "WARN",
                &format!("PE {me} reaches same-node PE {peer} over socket, not P2P: SYMMEM_DISABLE_P2P=1"),
            ],
        );
    }
}

/// Known numbers of puts, gets, AMOs, signals, fences and quiets to a same-node peer and
/// to a peer of the other node: exact counts on the direct and socket paths.
#[test]
fn counters_are_exact_per_path() {
    let env: Vec<(&str, &str)> = TWO_NODES
        .iter()
        .copied()
        .chain([("SYMMEM_DEBUG", "info"), ("SYMMEM_TIMEOUT", "120")])
        .collect();
    let job = run_scenario(4, "obs_counters", &env);
    job.assert_ok(4, "obs_counters");
    for me in 0..4 {
        assert_line(&job, &[&format!("PE {me} counters: direct: put ")]);
    }
}

/// Below info the direct path is not counted (it would cost the fast path), the
/// transports still are, and nothing is printed at finalize.
#[test]
fn below_info_only_the_transports_are_counted() {
    let env: Vec<(&str, &str)> = TWO_NODES
        .iter()
        .copied()
        .chain([("SYMMEM_DEBUG", "warn"), ("SYMMEM_TIMEOUT", "120")])
        .collect();
    let job = run_scenario(4, "obs_counters", &env);
    job.assert_ok(4, "obs_counters");
    if job.stderr.contains(" counters: ") {
        job.fail("counters printed below info");
    }
}
