//! The host API on 2 and 4 PEs: every RMA, signal, wait, atomic, ordering and local-view
//! operation with every `Cmp` and `SignalOp`, the error cases, `SYMMEM_TIMEOUT`, a peer
//! killed during a wait, and a random stress test. The PE side is
//! tests/support/host_api.rs (a file per group under tests/support/host_api/); each
//! scenario checks its results exactly.
//!
//! Everything except the kill test honours `SYMMEM_TEST_LAUNCHER=mpirun`.
//!
//! Use after free is a compile error (`free` consumes the non-`Clone` `SymBuf`), proved by
//! the `compile_fail` doctest on `SymBuf`. A misaligned atomic cannot be written at all:
//! atomics take a typed `SymRef<T>` indexed in whole elements, and allocations are at
//! least 64-byte aligned (the `errors` scenario checks that alignment).

mod common;
use std::time::Duration;

use common::{check_killed_mid_transfer, run_ok, run_scenario, run_symrun, TWO_NODES};

macro_rules! on_2_and_4 {
    ($($name:ident),* $(,)?) => {
        mod on_2_pes {
            $(
                #[test]
                fn $name() {
                    super::run_ok(2, stringify!($name), &[]);
                }
            )*
        }
        mod on_4_pes {
            $(
                #[test]
                fn $name() {
                    super::run_ok(4, stringify!($name), &[]);
                }
            )*
        }
        /// 2 nodes x 1 PE: everything crosses the socket transport.
        mod on_2_nodes_of_1_pe {
            $(
                #[test]
                fn $name() {
                    super::run_ok(2, stringify!($name), &super::TWO_NODES);
                }
            )*
        }
        /// 2 nodes x 2 PEs: direct within a node, sockets across.
        mod on_2_nodes_of_2_pes {
            $(
                #[test]
                fn $name() {
                    super::run_ok(4, stringify!($name), &super::TWO_NODES);
                }
            )*
        }
    };
}

// put, get, p, g, put_nbi, get_nbi, putmem, getmem, iput, iget.
// put_signal(_nbi) with Set and Add: every payload element checked after its signal.
// signal_op, signal_fetch, signal_wait_until: every Cmp and SignalOp.
// wait_until and test: every Cmp on u32, u64, i32, i64.
// wait_until/test _all/_any/_some(_vector), exclude masks, all excluded.
// Every atomic on every type, with exact final values.
// fence and quiet between data and flag.
// barrier_all and sync_all.
// read_local, local_atomic, local_slice, local_slice_mut.
// Error cases.
// alloc_aligned up to MAX_ALIGN: every PE's address aligned, own and mapped; above it an
// error on every PE.
// Handles from before a finalize.
// Random puts and atomics to random peers.
// Stream-ordered get_on_stream and the transfers with a local operand outside the heap
// (put_on_stream_from, get_on_stream_into, put_signal_on_stream_from), and their errors.
on_2_and_4!(
    rma,
    put_signal,
    signals,
    wait_test,
    wait_arrays,
    atomics,
    fence_quiet,
    barrier_sync,
    local_views,
    errors,
    align,
    foreign,
    stress,
    stream_rma,
);

fn check_timeout(n: usize) {
    let job = run_scenario(n, "api_wait_timeout", &[("SYMMEM_TIMEOUT", "1")]);
    job.assert_success();
    let errors = job.lines_with("ERROR after ");
    assert_eq!(errors.len(), n, "every PE timed out:\n{}", job.stdout);
    for e in errors {
        assert!(
            e.contains("timed out after 1s (SYMMEM_TIMEOUT) waiting for"),
            "{e}"
        );
    }
    assert_eq!(
        job.stdout.matches("wait_timeout ok").count(),
        n,
        "{}",
        job.stdout
    );
}

#[test]
fn wait_until_times_out_naming_symmem_timeout_2_pes() {
    check_timeout(2);
}

#[test]
fn wait_until_times_out_naming_symmem_timeout_4_pes() {
    check_timeout(4);
}

/// The last PE kills itself while the others wait for values only it could write: each
/// survivor fails naming it, in milliseconds rather than after SYMMEM_TIMEOUT=10.
fn check_kill(n: usize) {
    check_kill_job(n, "api_kill_wait", &[]);
}

/// Runs `scenario`, `api_kill_wait` on some bootstrap, on `n` PEs with `env`, and checks
/// [`check_kill`]'s outcome.
fn check_kill_job(n: usize, scenario: &str, env: &[(&str, &str)]) {
    let env: Vec<(&str, &str)> = std::iter::once(("SYMMEM_TIMEOUT", "10"))
        .chain(env.iter().copied())
        .collect();
    let job = run_symrun(n, scenario, &env);
    let victim = n - 1;
    assert_eq!(
        job.status.code(),
        Some(137),
        "symrun reports the SIGKILL of PE {victim}\nstdout:\n{}\nstderr:\n{}",
        job.stdout,
        job.stderr
    );
    let errors = job.lines_with("ERROR in ");
    assert_eq!(
        errors.len(),
        n - 1,
        "every survivor reports the failure:\n{}\n{}",
        job.stdout,
        job.stderr
    );
    let ops = ["wait_until", "signal_wait_until", "wait_until_all"];
    let mut seen = Vec::new();
    for e in errors {
        // "ERROR in OP after MS ms: PE V failed while PE ME was in OP: ..."
        let (head, msg) = e.split_once(": ").expect("ERROR line format");
        let words: Vec<&str> = head.split(' ').collect();
        let (op, ms) = (words[2], words[4].parse::<u64>().expect("milliseconds"));
        let me: usize = msg
            .split("while PE ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no PE number in {msg:?}"));
        assert_eq!(op, ops[me % 3], "{e}");
        assert!(
            msg.starts_with(&format!("PE {victim} failed while PE {me} was in {op}")),
            "{e}"
        );
        assert!(!msg.contains("timed out"), "{e}");
        assert!(
            ms < 5000,
            "detected after {ms} ms, SYMMEM_TIMEOUT is 10 s: {e}"
        );
        seen.push(me);
    }
    seen.sort();
    assert_eq!(seen, (0..victim).collect::<Vec<_>>());
    assert!(
        job.elapsed < Duration::from_secs(30),
        "took {:?}",
        job.elapsed
    );
}

#[test]
fn wait_until_names_a_killed_peer_2_pes() {
    check_kill(2);
}

#[test]
fn wait_until_names_a_killed_peer_4_pes() {
    check_kill(4);
}

/// `check_kill` on 3 PEs as 2 nodes over sockets (PEs 0 and 1 on one, PE 2 on the
/// other), on a bootstrap that never reports a failure (as MPI's does not): PEs 0 and 1
/// cannot watch PE 2's process on the other node, so only the socket transport's lost
/// connection tells them, and each must still name PE 2 in milliseconds rather than
/// wait for SYMMEM_TIMEOUT. (The victim is alone on its node: a survivor there would
/// exit on its own error, and a PE that loses two remote peers names the lower one,
/// not necessarily the one that died first.)
#[test]
fn wait_until_names_a_killed_remote_peer_that_the_bootstrap_does_not_report() {
    check_kill_job(3, "api_kill_wait_blind", &TWO_NODES);
}

#[test]
fn put_signal_never_shows_the_signal_before_large_data_across_sockets() {
    run_ok(2, "put_signal_large", &TWO_NODES);
    run_ok(4, "put_signal_large", &TWO_NODES);
}

/// A quiet's writes are visible to a third PE that learns of the quiet from the writer
/// (see the scenario), across sockets.
#[test]
fn quiet_makes_writes_visible_to_every_pe_across_sockets() {
    run_ok(4, "quiet_visibility", &TWO_NODES);
}

#[test]
fn put_signal_large_on_one_node() {
    run_ok(2, "put_signal_large", &[]);
}

/// Every put and get of 4 KiB or more (the lowest threshold) copied by non-temporal
/// stores, then every one by `memcpy` (the vector copy off), then every one of 512 KiB or
/// more by `memcpy` in slices (`put_signal_large` puts 3 MiB and 8 bytes): the data is
/// exact, and a signal or flag after it never shows before the data (the non-temporal
/// copy's fence). The other tests run the default methods of an unoptimized build, which
/// measures nothing (the vector copy from 2 KiB to the L2, no slices).
#[test]
fn puts_and_gets_by_non_temporal_stores_by_memcpy_and_in_slices() {
    let nt = [("SYMMEM_NT_COPY_THRESHOLD", "4K")];
    let memcpy = [
        ("SYMMEM_VECTOR_COPY_BELOW", "off"),
        ("SYMMEM_NT_COPY_THRESHOLD", "off"),
        ("SYMMEM_SLICED_COPY_FROM", "off"),
    ];
    let sliced = [
        ("SYMMEM_SLICED_COPY_FROM", "512K"),
        ("SYMMEM_NT_COPY_THRESHOLD", "off"),
    ];
    for scenario in ["rma", "put_signal", "put_signal_large", "fence_quiet"] {
        run_ok(2, scenario, &nt);
        run_ok(2, scenario, &memcpy);
        run_ok(2, scenario, &sliced);
    }
}

/// The last PE dies while the others stream puts to it over sockets: every survivor fails
/// within seconds, naming it, and nobody hangs.
#[test]
fn a_peer_killed_mid_transfer_is_named_by_every_survivor() {
    check_killed_mid_transfer(&TWO_NODES);
}

/// The stream transfers in weak-ordering mode on 3 PEs: every peer behind the reordering
/// transport, so a CPU stream's put must be complete (quieted) before its next operation.
#[test]
fn stream_rma_in_weak_ordering() {
    run_ok(3, "stream_rma", &[("SYMMEM_ORDERING", "weak")]);
}
