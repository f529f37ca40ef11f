//! The litmus shapes of the memory model (tests/support/host_api/litmus.rs: message
//! passing with fence, quiet, put_signal and put_signal_nbi; a quiet seen by a third PE
//! while other threads quiet and fence; a target that waits by `test` + `fence` and one
//! that computes; atomics totals; stream ops then free and alloc) on every route that
//! runs without the `ofi` feature, with 1 and 4 threads per PE: one node (every peer
//! mapped), 2 simulated nodes over sockets (direct within a node), sockets with a wire
//! that cuts and delays writes and reads by seed (`SYMMEM_SOCKET_FAULTS`), and
//! weak-ordering mode on one node and across nodes. tests/ofi.rs runs the same over
//! libfabric's `tcp;ofi_rxm` and `shm`.

mod common;

use common::{run_ok, run_scenario, TWO_NODES};

/// Runs the litmus scenario on 4 PEs with `threads` threads each, over `env`.
fn litmus(threads: &str, env: &[(&str, &str)]) {
    let env: Vec<(&str, &str)> = [("SYMMEM_LITMUS_THREADS", threads)]
        .into_iter()
        .chain(env.iter().copied())
        .collect();
    run_ok(4, "litmus", &env);
}

/// 2 simulated nodes of 2 PEs over sockets.
fn two_nodes_and(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    TWO_NODES.iter().chain(extra).copied().collect()
}

#[test]
fn on_one_node_with_one_thread() {
    litmus("1", &[]);
}

#[test]
fn on_one_node_with_four_threads() {
    litmus("4", &[]);
}

#[test]
fn over_sockets_with_one_thread() {
    litmus("1", &TWO_NODES);
}

#[test]
fn over_sockets_with_four_threads() {
    litmus("4", &TWO_NODES);
}

#[test]
fn in_weak_ordering_on_one_node() {
    litmus(
        "2",
        &[("SYMMEM_ORDERING", "weak"), ("SYMMEM_ORDERING_SEED", "7")],
    );
}

#[test]
fn in_weak_ordering_over_sockets() {
    litmus(
        "2",
        &two_nodes_and(&[("SYMMEM_ORDERING", "weak"), ("SYMMEM_ORDERING_SEED", "11")]),
    );
}

/// Seeds of the socket transport's injected faults that every run tries;
/// `SYMMEM_TEST_FAULT_SEED` replays one instead.
const FAULT_SEEDS: [u64; 2] = [0x5eed_0001, 0x5eed_0002];

/// Over sockets whose writes and reads are cut short and delayed at points drawn from a
/// seed, with 4 threads per PE: interleavings that need a slow network or many cores
/// (a quiet racing another thread's flush, a put_signal split mid-payload) show up on
/// 2 cores. A failure names its seed, which `SYMMEM_TEST_FAULT_SEED` replays.
#[test]
fn over_sockets_with_injected_faults() {
    let seeds: Vec<u64> = match std::env::var("SYMMEM_TEST_FAULT_SEED") {
        Ok(s) => vec![s.parse().expect("SYMMEM_TEST_FAULT_SEED is a number")],
        Err(_) => FAULT_SEEDS.to_vec(),
    };
    for seed in seeds {
        let seed_text = seed.to_string();
        let env = two_nodes_and(&[("SYMMEM_LITMUS_THREADS", "4"), ("SYMMEM_TIMEOUT", "120")]);
        let mut env: Vec<(&str, &str)> = env;
        env.push(("SYMMEM_SOCKET_FAULTS", &seed_text));
        let job = run_scenario(4, "api_litmus", &env);
        let oks = job
            .stdout
            .lines()
            .filter(|l| l.ends_with(": litmus ok"))
            .count();
        assert!(
            job.status.success() && oks == 4,
            "litmus over sockets with SYMMEM_SOCKET_FAULTS={seed} failed (replay with SYMMEM_TEST_FAULT_SEED={seed}):\n{}\n{}",
            job.stdout,
            job.stderr
        );
    }
}
