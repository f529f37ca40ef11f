//! The ofi (libfabric) transport, for real, on this machine's providers (Debian's
//! libfabric 1.17): the host-API suites on 2 simulated nodes of 2 PEs over `tcp;ofi_rxm`
//! (every operation between the nodes is a libfabric RMA or atomic), a killed PE named by
//! every survivor, and the errors of a provider that is not there and of `shm`, which
//! fails the suites here. Built and run with `cargo test --features ofi --test ofi` (test-all.sh installs
//! libfabric-dev).
#![cfg(feature = "ofi")]

mod common;

use common::{check_killed_mid_transfer, run_ok, run_symrun};

/// 2 simulated nodes over ofi on `provider`.
fn over(provider: &'static str) -> [(&'static str, &'static str); 3] {
    [
        ("SYMMEM_SIMULATE_NODES", "2"),
        ("SYMMEM_REMOTE_TRANSPORT", "ofi"),
        ("SYMMEM_OFI_PROVIDER", provider),
    ]
}

const TCP: &str = "tcp;ofi_rxm";

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
    signals_over_tcp: "signals";
    waits_over_tcp: "wait_test";
    wait_arrays_over_tcp: "wait_arrays";
    every_atomic_on_every_type_over_tcp: "atomics";
    fence_and_quiet_over_tcp: "fence_quiet";
    barrier_and_sync_over_tcp: "barrier_sync";
    local_views_over_tcp: "local_views";
    argument_errors_over_tcp: "errors";
    stress_over_tcp: "stress";
    teams_over_tcp: "teams";
    collectives_over_tcp: "collectives";
    stream_collectives_over_tcp: "stream_collectives";
}

/// libfabric's shared-memory provider fails the suites here (see `UNSUPPORTED` in
/// transport/src/ofi): asking for it is an error on every PE, saying why.
#[test]
fn shm_is_refused_on_every_pe_with_the_reason() {
    let mut env = vec![("SYMMEM_TIMEOUT", "20")];
    env.extend(over("shm"));
    let job = run_symrun(2, "init_error", &env);
    job.assert_success();
    let errors = job.lines_with("ERROR: ");
    assert_eq!(errors.len(), 2, "{}\n{}", job.stdout, job.stderr);
    for e in errors {
        assert!(e.contains("provider \"shm\" is not supported"), "{e}");
        assert!(e.contains("SIGSEGV"), "{e}");
    }
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
