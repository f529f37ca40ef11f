//! The ofi (libfabric) transport, for real, on this machine's providers (Debian's
//! libfabric 1.17): the host-API suites on 2 simulated nodes of 2 PEs over `tcp;ofi_rxm`
//! (every operation between the nodes is a libfabric RMA or atomic), a killed PE named by
//! every survivor, the errors of a provider that is not there, and the RMA and AMO suites
//! over libfabric's `shm` provider, and the litmus shapes (tests/litmus.rs) over both and
//! with no progress thread (`SYMMEM_OFI_PROGRESS=manual`). Built and run with `cargo test --features ofi --test ofi` (test-all.sh installs
//! libfabric-dev).
#![cfg(feature = "ofi")]

mod common;

use common::{check_killed_mid_transfer, run_ok, run_symrun, Job};

/// 2 simulated nodes over ofi on `provider`.
fn over(provider: &'static str) -> [(&'static str, &'static str); 3] {
    [
        ("SYMMEM_SIMULATE_NODES", "2"),
        ("SYMMEM_REMOTE_TRANSPORT", "ofi"),
        ("SYMMEM_OFI_PROVIDER", provider),
    ]
}

const TCP: &str = "tcp;ofi_rxm";

/// Checks that each of the 4 PEs of `job` logged a line with `expected`; `context` names
/// the run in the failure.
fn every_pe_logs(job: &Job, expected: &str, context: &str) {
    let said = job.stderr.lines().filter(|l| l.contains(expected)).count();
    assert_eq!(
        said, 4,
        "every PE {context} logs {expected:?}:\n{}",
        job.stderr
    );
}

macro_rules! over_tcp {
    ($($name:ident: $scenario:literal;)*) => {
        $(
            #[test]
            fn $name() {
                run_ok(4, $scenario, &over(TCP));
            }
        )*
    };
}

over_tcp! {
    rma_over_tcp: "rma";
    put_signal_over_tcp: "put_signal";
    put_signal_large_over_tcp: "put_signal_large";
    quiet_visibility_over_tcp: "quiet_visibility";
    signals_over_tcp: "signals";
    waits_over_tcp: "wait_test";
    wait_arrays_over_tcp: "wait_arrays";
    every_atomic_on_every_type_over_tcp: "atomics";
    fence_and_quiet_over_tcp: "fence_quiet";
    barrier_and_sync_over_tcp: "barrier_sync";
    mismatched_collectives_over_tcp: "collective_pairs";
    local_views_over_tcp: "local_views";
    argument_errors_over_tcp: "errors";
    stress_over_tcp: "stress";
    teams_over_tcp: "teams";
    collectives_over_tcp: "collectives";
    stream_collectives_over_tcp: "stream_collectives";
}

const SHM: &str = "shm";

macro_rules! over_shm {
    ($($name:ident: $scenario:literal;)*) => {
        $(
            #[test]
            fn $name() {
                run_ok(4, $scenario, &over(SHM));
            }
        )*
    };
}

// libfabric's shared-memory provider: the RMA and AMO suites. Its non-fetching atomics go
// as fetching ones (shim.c: 1.17's shm frees their buffers twice, which lost atomic
// updates, delivered wrong signal values and crashed fi_cq_read before).
over_shm! {
    rma_over_shm: "rma";
    put_signal_over_shm: "put_signal";
    signals_over_shm: "signals";
    every_atomic_on_every_type_over_shm: "atomics";
    fence_and_quiet_over_shm: "fence_quiet";
    quiet_visibility_over_shm: "quiet_visibility";
    stress_over_shm: "stress";
}

/// Every PE its own node, so each has three remote peers hammering its heap over shm (the
/// case that crashed in fi_cq_read).
#[test]
fn atomics_from_three_peers_over_shm() {
    let mut env = over(SHM).to_vec();
    env[0] = ("SYMMEM_SIMULATE_NODES", "4");
    run_ok(4, "atomics", &env);
}

/// The last PE dies while the others stream puts to it over ofi: every survivor fails
/// naming it (from the failed completion's target), and nobody hangs.
#[test]
fn a_peer_killed_mid_transfer_is_named_by_every_survivor() {
    check_killed_mid_transfer(&over(TCP));
}

/// A provider libfabric does not have is an error at init on every PE, naming the
/// variable, the provider and what `fi_getinfo` offers instead.
#[test]
fn a_missing_provider_is_named_with_what_libfabric_offers() {
    let env = [
        ("SYMMEM_SIMULATE_NODES", "2"),
        ("SYMMEM_REMOTE_TRANSPORT", "ofi"),
        ("SYMMEM_OFI_PROVIDER", "nosuchfabric"),
        ("SYMMEM_TIMEOUT", "20"),
    ];
    let job = run_symrun(2, "init_error", &env);
    job.assert_success();
    let errors = job.lines_with("ERROR: ");
    assert_eq!(
        errors.len(),
        2,
        "every PE fails init:\n{}\n{}",
        job.stdout,
        job.stderr
    );
    for pe in 0..2 {
        let line = errors
            .iter()
            .find(|l| l.contains(&format!("PE {pe}: ")))
            .unwrap_or_else(|| panic!("PE {pe} names itself: {errors:?}"));
        assert!(line.contains("SYMMEM_REMOTE_TRANSPORT=ofi"), "{line}");
        assert!(line.contains("\"nosuchfabric\""), "{line}");
        assert!(
            line.contains("fi_getinfo offers: ") && line.contains("tcp;ofi_rxm"),
            "{line}"
        );
    }
}

/// Where the provider keeps reads and writes behind earlier writes and applies a peer's
/// operations in order (tcp;ofi_rxm and shm), writes that stream to a peer complete at
/// transmit, with no reply from the target, and a read makes them visible before a
/// quiet, a fence or an unordered operation behind them: every PE says so in its init
/// log, and the fence/quiet suite (a strided put of single-element writes, then a fence,
/// a quiet or both, then the flag) passes with it. That suite's flag goes to the writes'
/// own target, which applies them in order anyway; `quiet_visibility` (above) is the
/// test that fails without the flush.
#[test]
fn streamed_writes_complete_at_transmit_and_are_flushed_before_the_flag() {
    for provider in [TCP, SHM] {
        let mut env = over(provider).to_vec();
        env.push(("SYMMEM_DEBUG", "info"));
        let job = run_ok(4, "fence_quiet", &env);
        let expected = "writes that stream to a peer at transmit";
        every_pe_logs(&job, expected, &format!("over {provider}"));
    }
}

/// Where the provider keeps no order between a write and an atomic after it (tcp;ofi_rxm),
/// small put_signals and signals travel as messages the target applies; where it keeps
/// every order (shm), as atomics. Each PE's init log says which, and the put_signal suite
/// passes either way (above). Over tcp each PE also says that its messages are
/// authenticated and their senders checked against the provider's source, and none of
/// the job's messages is refused.
#[test]
fn signals_travel_as_messages_only_where_the_provider_keeps_no_order() {
    for (provider, expected) in [
        (TCP, "signals come as messages this PE applies"),
        (SHM, "signals come as atomics"),
    ] {
        let mut env = over(provider).to_vec();
        env.push(("SYMMEM_DEBUG", "info"));
        let job = run_ok(4, "put_signal", &env);
        every_pe_logs(&job, expected, &format!("over {provider}"));
        if provider == TCP {
            // Every message is sealed, checked against its source, and accepted.
            let checked = "ofi messages authenticated (HMAC-SHA256 under the job key), their senders checked against the provider's source (FI_SOURCE)";
            every_pe_logs(&job, checked, "over tcp");
            assert!(
                !job.stderr.contains("dropped a message"),
                "no message of the job is refused:\n{}",
                job.stderr
            );
        }
    }
}

/// `SYMMEM_OFI_PROGRESS=poll`: the progress thread polls a completion queue without a
/// wait object (no signal per completion). Every PE says so in its init log, and the
/// suites in which peers' operations need this PE's progress (RMA, put_signal, every
/// atomic, writes made visible before a flag) pass with it.
#[test]
fn a_polling_progress_thread_serves_every_operation() {
    for scenario in ["rma", "put_signal", "atomics", "quiet_visibility"] {
        let mut env = over(TCP).to_vec();
        env.extend([("SYMMEM_OFI_PROGRESS", "poll"), ("SYMMEM_DEBUG", "info")]);
        let job = run_ok(4, scenario, &env);
        let expected = "polling: SYMMEM_OFI_PROGRESS=poll";
        every_pe_logs(&job, expected, &format!("running {scenario}"));
    }
}

/// `SYMMEM_OFI_PROGRESS=auto` (the default) polls only where each PE's progress thread
/// can have a CPU of its own (a spare CPU per PE from symrun's helper CPUs, else two CPUs
/// of the process per PE; the 2 simulated nodes share the machine), and each PE's log says
/// what it counted and chose.
#[test]
fn auto_progress_polls_only_with_a_cpu_per_progress_thread_and_says_why() {
    let mut env = over(TCP).to_vec();
    env.extend([("SYMMEM_OFI_PROGRESS", "auto"), ("SYMMEM_DEBUG", "info")]);
    let job = run_ok(4, "rma", &env);
    let lines: Vec<&str> = job
        .stderr
        .lines()
        .filter(|l| l.contains("SYMMEM_OFI_PROGRESS=auto: "))
        .collect();
    assert_eq!(lines.len(), 4, "every PE says why:\n{}", job.stderr);
    for line in lines {
        let rest = line
            .split("SYMMEM_OFI_PROGRESS=auto: ")
            .nth(1)
            .unwrap_or("");
        let (cpus, counted) = rest.split_once(' ').unwrap_or(("", ""));
        let cpus: usize = cpus
            .parse()
            .unwrap_or_else(|_| panic!("the CPUs counted: {line}"));
        let needed = if counted
            .starts_with("spare CPUs for the progress threads of 4 PEs on this machine")
        {
            4
        } else if counted.starts_with("CPUs shared with 4 PEs on this machine") {
            8
        } else {
            panic!("spare or shared CPUs, and the 4 PEs of the machine: {line}");
        };
        let chose = if cpus >= needed {
            "polling: "
        } else {
            "blocked on the provider's wait object: "
        };
        assert!(line.contains(chose), "{cpus} CPUs, {needed} needed: {line}");
    }
}

/// The litmus shapes (tests/litmus.rs runs them on the other routes) on 4 PEs of 2
/// simulated nodes over `provider`, with `threads` threads per PE, and `extra` settings.
fn litmus_over(
    provider: &'static str,
    threads: &'static str,
    extra: &[(&'static str, &'static str)],
) {
    let mut env = over(provider).to_vec();
    // Fewer rounds of the third-PE shape than over sockets, whose race it was sized for.
    env.extend([
        ("SYMMEM_LITMUS_THREADS", threads),
        ("SYMMEM_LITMUS_QUIET_ROUNDS", "60"),
    ]);
    env.extend_from_slice(extra);
    run_ok(4, "litmus", &env);
}

#[test]
fn litmus_over_tcp_with_one_thread() {
    litmus_over(TCP, "1", &[]);
}

#[test]
fn litmus_over_tcp_with_four_threads() {
    litmus_over(TCP, "4", &[]);
}

#[test]
fn litmus_over_shm_with_four_threads() {
    litmus_over(SHM, "4", &[]);
}

/// `SYMMEM_OFI_ASSUME_ORDER=weakest`: efa's order (sends after sends only) on tcp;ofi_rxm
/// and shm, so that every same-peer RMA or atomic that must follow an earlier one waits for
/// it (per peer) and signals go as messages, also on shm, whose own order needs neither.
/// A short run of the shapes on each.
#[test]
fn litmus_assuming_the_weakest_order_over_tcp_and_shm() {
    for provider in [TCP, SHM] {
        let mut env = over(provider).to_vec();
        env.extend([
            ("SYMMEM_OFI_ASSUME_ORDER", "weakest"),
            ("SYMMEM_LITMUS_THREADS", "2"),
            ("SYMMEM_LITMUS_QUIET_ROUNDS", "30"),
            ("SYMMEM_DEBUG", "info"),
        ]);
        let job = run_ok(4, "litmus", &env);
        every_pe_logs(&job, "relies only on sends staying behind sends", provider);
        every_pe_logs(&job, "come as messages this PE applies", provider);
    }
}

/// `SYMMEM_OFI_PROGRESS=manual`: no progress thread, so peers' operations complete only
/// while the target's threads call in. A target that waits by `test` + `fence` alone (and
/// whose fences have nothing outstanding) must still apply them: before every drain
/// polled, it never read its completion queue and waited forever for round 1's flag; 2
/// PEs on 2 nodes and 4 PEs with 4 threads each (a waiting thread sleeping in its wait
/// while another quiets in a loop). The computing target is left out: with no thread,
/// nobody serves a PE that does not call in.
#[test]
fn litmus_with_manual_progress_where_only_calls_drive_it() {
    let shapes = "mp,quiet_third,test_fence,atomics,stream_free";
    let mut env = over(TCP).to_vec();
    env.extend([
        ("SYMMEM_OFI_PROGRESS", "manual"),
        ("SYMMEM_LITMUS_SHAPES", shapes),
        ("SYMMEM_LITMUS_QUIET_ROUNDS", "60"),
        ("SYMMEM_DEBUG", "info"),
    ]);
    let job = run_ok(2, "litmus", &env);
    assert_eq!(
        job.stderr
            .lines()
            .filter(|l| l.contains("progress from the application's threads only"))
            .count(),
        2,
        "every PE logs that it runs without a progress thread:\n{}",
        job.stderr
    );
    env.pop();
    env.push(("SYMMEM_LITMUS_THREADS", "4"));
    run_ok(4, "litmus", &env);
}

/// Each PE's init log names the libfabric domain it opens and why (here tcp's
/// interfaces, whose NUMA nodes sysfs does not give: libfabric's first, the same on every
/// PE); `SYMMEM_OFI_DOMAIN` pins one (`lo` reaches every PE of the 2 simulated nodes),
/// and one the provider does not offer fails init on every PE, naming those it offers.
#[test]
fn each_pe_names_its_domain_and_a_pinned_one_is_taken_or_named_missing() {
    let mut env = over(TCP).to_vec();
    env.push(("SYMMEM_DEBUG", "info"));
    let job = run_ok(2, "barrier_sync", &env);
    let domains: Vec<&str> = job
        .stderr
        .lines()
        .filter_map(|l| l.split("ofi domain ").nth(1))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    assert_eq!(
        domains.len(),
        2,
        "every PE names its domain:\n{}",
        job.stderr
    );
    assert!(
        domains.iter().all(|d| *d == domains[0]),
        "one fabric, no NUMA nodes: the same domain on every PE: {domains:?}"
    );
    env.push(("SYMMEM_OFI_DOMAIN", "lo"));
    let job = run_ok(2, "barrier_sync", &env);
    let pinned = "ofi domain lo (tcp;ofi_rxm): SYMMEM_OFI_DOMAIN=lo";
    let said = job.stderr.lines().filter(|l| l.contains(pinned)).count();
    assert_eq!(said, 2, "every PE logs {pinned:?}:\n{}", job.stderr);
    let env = [
        ("SYMMEM_SIMULATE_NODES", "2"),
        ("SYMMEM_REMOTE_TRANSPORT", "ofi"),
        ("SYMMEM_OFI_PROVIDER", TCP),
        ("SYMMEM_OFI_DOMAIN", "nosuchnic"),
        ("SYMMEM_TIMEOUT", "20"),
    ];
    let job = run_symrun(2, "init_error", &env);
    job.assert_success();
    let errors = job.lines_with("ERROR: ");
    assert_eq!(
        errors.len(),
        2,
        "every PE fails init:\n{}\n{}",
        job.stdout,
        job.stderr
    );
    for line in errors {
        assert!(
            line.contains(
                "SYMMEM_OFI_DOMAIN=\"nosuchnic\": the provider offers no such domain; it offers "
            ) && line.contains("lo (fabric 127.0.0.1/32"),
            "{line}"
        );
    }
}
