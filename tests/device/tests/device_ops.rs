//! Every device operation at every scope, in kernels on the CPU executor, on 2 and 4 PEs
//! (self-launched, or under mpirun with `SYMMEM_TEST_LAUNCHER=mpirun`), checked exactly
//! by the PE program `device-test-pe` (tests/device/src/bin).

mod common;
use common::{run, Job};

/// Runs `scenario` on `n` PEs and asserts that every PE reported success.
fn ok(n: usize, scenario: &str) -> Job {
    let job = run(n, scenario);
    job.assert_ok(n, scenario);
    job
}

/// Asserts that the `n` PEs printed `per_pe` expected-error lines each, and that each of
/// `needles` is in exactly `n` of them (once per PE).
fn expected_errors(job: &Job, n: usize, per_pe: usize, needles: &[&str]) {
    let errors = job.lines_with("ERROR (expected");
    if errors.len() != n * per_pe {
        job.fail(&format!("want {per_pe} expected-error lines per PE"));
    }
    for needle in needles {
        if errors.iter().filter(|e| e.contains(needle)).count() != n {
            job.fail(&format!(
                "want one expected-error line per PE mentioning {needle:?}"
            ));
        }
    }
}

/// A test module per scenario, with a 2-PE and a 4-PE test.
macro_rules! scenarios {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        mod $name {
            #[test]
            fn two_pes() {
                super::ok(2, stringify!($name));
            }

            #[test]
            fn four_pes() {
                super::ok(4, stringify!($name));
            }
        }
    )*};
}

scenarios! {
    /// Static and dynamic shared memory, warp intrinsics, block-scope atomics, block scan
    /// and histogram, every value checked; dynamic shared memory over 48 KiB refused.
    shared_warp;
    /// Misuses of shared memory and warp intrinsics fail the launch, naming the thread
    /// and what was wrong.
    shared_warp_misuse;
    /// The ring example: put_signal_block to the neighbour, a kernel waits for the signal.
    ring_put_signal;
    /// my_pe, n_pes, and ptr to every peer (compared with the host's), written through.
    identity;
    /// A second runtime, from a unique id the first broadcasts, launching the ring,
    /// identity and team-collective kernels on another thread while the first does: each
    /// kernel sees its own runtime's state and heaps.
    two_runtimes;
    /// put/get/p/g, _nbi, _warp (with partial warps), _block; every element and a guard.
    rma;
    /// put_signal(_nbi) at thread, warp and block scope with Set and Add; a consumer
    /// kernel waits for every signal and checks every element.
    put_signal;
    /// signal_op, signal_fetch and signal_wait_until with every comparison.
    signal_cmp;
    /// wait_until_any/_all_vector/_some and the tests: regions taken in arrival order.
    wait_many;
    /// wait_until and test with every comparison on u32, i32, u64, i64.
    wait_test;
    /// Every atomic on every type, contended by all threads of all PEs: exact results.
    atomics;
    /// Data, then fence / quiet / quiet_block, then a flag, for hundreds of rounds.
    fence_quiet;
    /// barrier_all, sync_all and their _warp and _block forms, hundreds of times, across
    /// launches.
    barriers;
    /// Thread geometry in 1-D, 2-D and 3-D launches with partial warps, and cooperative.
    geometry;
    /// sync_threads and sync_warp exchanging values, in 48- and 256-thread blocks.
    thread_sync;
    /// 16 blocks of 256 threads with launch: every thread once, puts, atomics.
    big_grid;
    /// launch_cooperative with blocks waiting for each other and grid barriers.
    cooperative;
    /// The device-side put_signal_nbi_block pipeline: 48 chunks of 256 KiB, Set and Add.
    pipeline;
    /// bf16, f16, FP8 E4M3 and E5M2 converted in kernels (specials included) and put at
    /// every scope: the bits equal the host's conversions.
    narrow_floats;
    /// f32 and f64 atomic swap, set and fetch from 48 threads per PE, and from the host.
    float_atomics;
    /// iput/iget at every scope with four stride pairs, around barrier_all(_warp/_block).
    strided;
    /// Generic kernels (type, scope and const parameters) launched through each
    /// instance's descriptor; the scope-generic operations at every scope; typed
    /// symmetric slices' put/get/_nbi/put_signal/p/g/atomics/element access.
    generic_kernels;
}

/// Slice operations out of bounds fail the launch naming the operation, scope, PE,
/// range and the slice's length; `sym_slice_range` past an allocation is refused.
#[test]
fn slice_bounds() {
    let job = ok(2, "slice_bounds");
    expected_errors(
        &job,
        2,
        3,
        &[
            "SymSlice::put (thread)",
            "SymSlice::put_nbi (warp)",
            "sym_slice on PE",
        ],
    );
}

/// `launch_on_stream`: a typed launch on a stream, checked after synchronize, and a block
/// over CUDA's limit refused by the call on every PE.
#[test]
fn launch_on_stream() {
    let job = ok(2, "launch_on_stream");
    expected_errors(&job, 2, 1, &["launch_on_stream"]);
}

/// The new element types' operations with every PE's neighbour on the other node (2
/// simulated nodes of 1 PE), so they go through the proxy channel, and on 2 nodes of 2 PEs
/// (half the neighbours remote).
mod element_types_remote {
    use super::common::run_with_env;

    const TWO_NODES: [(&str, &str); 1] = [("SYMMEM_SIMULATE_NODES", "2")];

    #[test]
    fn strided_on_2_nodes_of_1_pe() {
        run_with_env(2, "strided", &TWO_NODES).assert_ok(2, "strided");
    }

    #[test]
    fn strided_on_2_nodes_of_2_pes() {
        run_with_env(4, "strided", &TWO_NODES).assert_ok(4, "strided");
    }

    #[test]
    fn float_atomics_on_2_nodes_of_1_pe() {
        run_with_env(2, "float_atomics", &TWO_NODES).assert_ok(2, "float_atomics");
    }

    #[test]
    fn narrow_floats_on_2_nodes_of_1_pe() {
        run_with_env(2, "narrow_floats", &TWO_NODES).assert_ok(2, "narrow_floats");
    }
}

/// Device collectives on a team (barrier/sync, broadcast, fcollect, collect, alltoall,
/// reduce and reducescatter with every operator and type, in place and not) at thread,
/// warp and block scope, on TEAM_WORLD and on the columns of a 2-D split ({0, 2}, {1, 3}),
/// with host and device barriers alternating on each team: on 1, 2, 3 (not a power of
/// two) and 4 PEs, and on 2 simulated nodes × 2 PEs, where each column's two PEs reach each
/// other only through the proxy channel.
mod team_collectives {
    const SCENARIO: &str = "team_collectives";

    #[test]
    fn one_pe() {
        super::ok(1, SCENARIO);
    }

    #[test]
    fn two_pes() {
        super::ok(2, SCENARIO);
    }

    #[test]
    fn three_pes() {
        super::ok(3, SCENARIO);
    }

    #[test]
    fn four_pes() {
        super::ok(4, SCENARIO);
    }

    #[test]
    fn on_2_nodes_of_2_pes() {
        let job = super::common::run_with_env(4, SCENARIO, &[("SYMMEM_SIMULATE_NODES", "2")]);
        job.assert_ok(4, SCENARIO);
    }

    /// A broadcast root outside the team and a foreign team handle fail the launch with
    /// `KernelFailed` naming them, on every PE, and leave the team usable.
    #[test]
    fn errors_3_pes() {
        let job = super::ok(3, "team_collective_errors");
        super::expected_errors(
            &job,
            3,
            2,
            &[
                "team PE 3, which is not in the team",
                "team handle that does not describe a team of this PE",
            ],
        );
    }
}

/// The runtime's `stream_team_alltoallv` kernel (what `Team::alltoallv_on_stream` queues
/// on GPU PEs) launched on the CPU executor: uneven, zero, too many and negative splits,
/// on TEAM_WORLD and the columns of a 2-D split; on 2 simulated nodes × 2 PEs each
/// column's rows and splits cross the proxy channel.
mod runtime_alltoallv {
    const SCENARIO: &str = "runtime_alltoallv";

    #[test]
    fn two_pes() {
        super::ok(2, SCENARIO);
    }

    #[test]
    fn three_pes() {
        super::ok(3, SCENARIO);
    }

    #[test]
    fn four_pes() {
        super::ok(4, SCENARIO);
    }

    #[test]
    fn on_2_nodes_of_2_pes() {
        let job = super::common::run_with_env(4, SCENARIO, &[("SYMMEM_SIMULATE_NODES", "2")]);
        job.assert_ok(4, SCENARIO);
    }
}

/// Scenarios whose kernels interleave their threads at barriers and waits, under seeded
/// lane schedules (`SYMMEM_EXEC_SEED`) instead of thread index order: a correct kernel
/// passes under every schedule.
mod under_seeds {
    use super::common::run_with_env;

    /// Seeds each scenario runs under.
    const SEEDS: [&str; 4] = ["1", "2", "1234", "18446744073709551615"];

    macro_rules! seeded {
        ($($name:ident),* $(,)?) => {$(
            #[test]
            fn $name() {
                for seed in SEEDS {
                    let job = run_with_env(2, stringify!($name), &[("SYMMEM_EXEC_SEED", seed)]);
                    job.assert_ok(2, stringify!($name));
                }
            }
        )*};
    }

    seeded!(
        thread_sync,
        rma,
        put_signal,
        cooperative,
        barriers,
        team_collectives
    );
}

/// Calls `$m!` with the scenarios that run on 2 simulated nodes × 2 PEs.
macro_rules! two_node_scenarios {
    ($m:ident) => {
        $m!(
            atomics_unsigned,
            ring_put_signal,
            rma,
            put_signal,
            signal_cmp,
            wait_many,
            wait_test,
            fence_quiet,
            barriers,
            geometry,
            thread_sync,
            big_grid,
            cooperative,
            pipeline,
        );
    };
}

/// The scenarios again on 4 PEs as 2 simulated nodes × 2 PEs (`SYMMEM_SIMULATE_NODES=2`):
/// within a node device operations use P2P pointers, across nodes they go through each
/// PE's proxy channel and the socket transport. Left out: `identity` (it asserts a P2P
/// pointer to every PE; `two_nodes` checks the split instead) and the signed half of
/// `atomics`, which runs as `atomics_unsigned` (u32 and u64): every thread of every PE
/// contends on shared words and each compare-and-swap retry crosses the proxy, so all four
/// types took 40–47 s on 2 loaded cores, and over 120 s beside a full CI build.
mod on_2_nodes_of_2_pes {
    use super::common::run_with_env;

    const TWO_NODES: [(&str, &str); 1] = [("SYMMEM_SIMULATE_NODES", "2")];

    macro_rules! two_nodes {
        ($($name:ident),* $(,)?) => {$(
            #[test]
            fn $name() {
                let job = run_with_env(4, stringify!($name), &TWO_NODES);
                job.assert_ok(4, stringify!($name));
            }
        )*};
    }

    two_node_scenarios!(two_nodes);
}

/// The 2-node scenarios again with the ofi transport (libfabric's `tcp;ofi_rxm`) behind
/// every PE's proxy channel instead of the socket transport (`--features ofi`): device
/// operations to the other node become libfabric RMA and atomics.
#[cfg(feature = "ofi")]
mod on_2_nodes_over_ofi {
    use super::common::run_with_env;

    const OVER_OFI: [(&str, &str); 3] = [
        ("SYMMEM_SIMULATE_NODES", "2"),
        ("SYMMEM_REMOTE_TRANSPORT", "ofi"),
        ("SYMMEM_OFI_PROVIDER", "tcp;ofi_rxm"),
    ];

    /// Every scenario in one job (one init over ofi, the costly part, instead of one per
    /// scenario); a failure names its scenario. Run one alone with `device-test-pe NAME`.
    macro_rules! over_ofi {
        ($($name:ident),* $(,)?) => {
            #[test]
            fn every_two_node_scenario_in_one_job() {
                let names = [$(stringify!($name)),*];
                let job = run_with_env(4, &names.join("+"), &OVER_OFI);
                for name in names {
                    job.assert_ok(4, name);
                }
            }
        };
    }

    two_node_scenarios!(over_ofi);
}

/// A full proxy ring applies back-pressure and loses nothing: 128 threads per PE each
/// store 16 values through a ring of 2 slots (`SYMMEM_PROXY_SLOTS=2`) to a PE on the other
/// node, over the socket transport; every value and every thread's count arrive.
#[test]
fn proxy_full_ring_back_pressure() {
    let env = [("SYMMEM_SIMULATE_NODES", "2"), ("SYMMEM_PROXY_SLOTS", "2")];
    let job = common::run_with_env(4, "proxy_flood", &env);
    job.assert_ok(4, "proxy_flood");
}

/// Errors of `two_nodes`: one per PE, for a put to a PE that does not exist (the other
/// node's PEs are reached through the proxy channel).
const TWO_NODE_ERRORS: [&str; 1] = ["does not exist"];

/// Errors of `launch_args`, one per PE each.
const LAUNCH_ERRORS: [&str; 8] = [
    "launch: grid Dim3 { x: 0, y: 1, z: 1 } has a zero extent",
    "launch: grid Dim3 { x: 2, y: 0, z: 1 } has a zero extent",
    "launch: block Dim3 { x: 32, y: 0, z: 2 } has a zero extent",
    "launch: block Dim3 { x: 1025, y: 1, z: 1 } has 1025 threads; at most 1024 are allowed",
    "launch: block Dim3 { x: 32, y: 32, z: 2 } has 2048 threads; at most 1024 are allowed",
    "launch_cooperative: grid Dim3 { x: 17, y: 1, z: 1 } × block Dim3 { x: 256, y: 1, z: 1 } is 4352 threads; a cooperative launch runs all at once, at most 4096",
    "launch_cooperative: block Dim3 { x: 2048, y: 1, z: 1 } has 2048 threads; at most 1024 are allowed",
    "launch: kernel count_threads_64 was declared max_threads(64); a block of Dim3 { x: 5, y: 13, z: 1 } has 65 threads",
];

/// `ptr` is null exactly for the other node's PEs (nodes of one PE each); every kind of
/// device operation on them goes through the proxy channel, and on a PE that does not
/// exist fails the launch naming the block, the thread and the PE.
#[test]
fn two_nodes_2_pes() {
    let job = ok(2, "two_nodes");
    expected_errors(&job, 2, 1, &TWO_NODE_ERRORS);
}

/// As [`two_nodes_2_pes`] with nodes {0, 1} and {2, 3}.
#[test]
fn two_nodes_4_pes() {
    let job = ok(4, "two_nodes");
    expected_errors(&job, 4, 1, &TWO_NODE_ERRORS);
    // Each PE's refused put went to PE 4, from block 1 thread 37.
    for pe in 0..4 {
        let line = format!(
            "kernel failed on PE {pe} in block (1, 0, 0) thread (37, 0, 0): symmem device: PE 4 does not exist"
        );
        if !job.stdout.contains(&line) {
            job.fail(&format!("no error {line:?}"));
        }
    }
}

/// Zero extents, blocks over 1024 threads and cooperative launches over 4096 threads are
/// refused and run nothing; 1024-thread blocks run.
#[test]
fn launch_argument_errors_2_pes() {
    let job = ok(2, "launch_args");
    expected_errors(&job, 2, LAUNCH_ERRORS.len(), &LAUNCH_ERRORS);
}

/// As [`launch_argument_errors_2_pes`] on 4 PEs.
#[test]
fn launch_argument_errors_4_pes() {
    let job = ok(4, "launch_args");
    expected_errors(&job, 4, LAUNCH_ERRORS.len(), &LAUNCH_ERRORS);
}
