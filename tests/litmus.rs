//! The litmus shapes of the memory model (tests/support/host_api/litmus.rs: message
//! passing with fence, quiet, put_signal and put_signal_nbi; a quiet seen by a third PE
//! while other threads quiet and fence; a target that waits by `test` + `fence` and one
//! that computes; atomics totals; stream ops then free and alloc) on every route that
//! runs without the `ofi` feature, with 1 and 4 threads per PE: one node (every peer
//! mapped), 2 simulated nodes over sockets (direct within a node), sockets with a wire
//! that delays and splits writes by seed, and weak-ordering mode on one node and across
//! nodes. tests/ofi.rs runs the same over libfabric's `tcp;ofi_rxm` and `shm`.

mod common;

use common::{run_ok, TWO_NODES};

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
