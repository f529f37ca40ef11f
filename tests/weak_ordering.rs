//! The weak-ordering mode (`SYMMEM_ORDERING=weak`, transport/src/weak.rs) from
//! host code: deliberately wrong programs (tests/support/host_api/weak.rs: a flag with no
//! fence, a signal before its data, an nbi source reused or an nbi result read before
//! quiet) pass in the default mode and are caught in weak mode within [`MAX_SEEDS`] seeds; correct programs
//! (a selection of the host-API suite) pass in weak mode under several seeds, on one node
//! (every peer through the direct transport) and on two simulated nodes (sockets too).

mod common;
use common::{run_ok, Job, TWO_NODES};

/// Seeds a bug gets to show in weak mode (each run takes a few ms of delays).
const MAX_SEEDS: u64 = 20;

/// Rounds in which a consumer saw the flag before the data, over every PE.
fn stale(job: &Job) -> u64 {
    job.stdout
        .lines()
        .filter_map(|l| l.split(": stale ").nth(1))
        .map(|rest| {
            rest.split(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .expect("`stale N of R`")
        })
        .sum()
}

/// The weak-mode environment with `seed`.
fn weak(seed: &str) -> [(&'static str, &str); 2] {
    [("SYMMEM_ORDERING", "weak"), ("SYMMEM_ORDERING_SEED", seed)]
}

/// Runs the bug `scenario` in weak mode under seeds 1, 2, … until a consumer sees stale
/// data; returns the seed that caught it.
fn caught_in_weak_mode(scenario: &str) -> u64 {
    for seed in 1..=MAX_SEEDS {
        let s = seed.to_string();
        if stale(&run_ok(2, scenario, &weak(&s))) > 0 {
            eprintln!("{scenario}: caught with SYMMEM_ORDERING_SEED={seed}");
            return seed;
        }
    }
    panic!("{scenario}: weak ordering did not catch the bug in {MAX_SEEDS} seeds");
}

/// Runs the bug `scenario` in the default mode: x86 keeps the stores in order.
fn passes_by_default(scenario: &str) {
    for _ in 0..2 {
        let job = run_ok(2, scenario, &[]);
        assert_eq!(
            stale(&job),
            0,
            "{scenario} in the default mode:\n{}",
            job.stdout
        );
    }
}

#[test]
fn put_then_p_without_fence_passes_by_default_and_is_caught_in_weak_mode() {
    passes_by_default("bug_put_then_p");
    caught_in_weak_mode("bug_put_then_p");
}

#[test]
fn flag_by_a_second_put_without_fence_passes_by_default_and_is_caught_in_weak_mode() {
    passes_by_default("bug_put_then_put");
    caught_in_weak_mode("bug_put_then_put");
}

/// In the default mode the consumer may look between the producer's signal and its data
/// even on x86: a real race, usually won, but how often depends on the scheduler (a loaded
/// machine loses it every time), so the default run is only required to complete, and how
/// much stale data it saw is printed. Weak mode must catch it.
#[test]
fn signal_before_its_data_is_a_race_by_default_and_is_caught_in_weak_mode() {
    let job = run_ok(2, "bug_signal_first", &[]);
    eprintln!(
        "bug_signal_first in the default mode: {} stale reads",
        stale(&job)
    );
    caught_in_weak_mode("bug_signal_first");
}

/// A `put_nbi` and a `put_signal_nbi` source (in the symmetric heap) changed before
/// `quiet`: unseen in the default mode, where each quiet succeeds; reported by each quiet
/// in weak mode, naming the op, the buffer's address, its size and the target PE. The
/// check does not depend on the delivery order, so the first seed catches it.
#[test]
fn a_put_nbi_source_reused_before_quiet_passes_by_default_and_is_reported_in_weak_mode() {
    let job = run_ok(2, "bug_nbi_source_reused", &[]);
    let undetected = job
        .stdout
        .lines()
        .filter(|l| l.ends_with(" reuse undetected"));
    assert_eq!(undetected.count(), 4, "two ops on each PE:\n{}", job.stdout);
    assert!(job.lines_with("ERROR").is_empty(), "{}", job.stdout);
    let caught = (1..=MAX_SEEDS).find_map(|seed| {
        let job = run_ok(2, "bug_nbi_source_reused", &weak(&seed.to_string()));
        let errors: Vec<String> = job
            .lines_with("ERROR (expected)")
            .into_iter()
            .map(str::to_owned)
            .collect();
        (!errors.is_empty()).then_some((seed, job.stdout, errors))
    });
    let Some((seed, stdout, errors)) = caught else {
        panic!("weak ordering did not report the reuse in {MAX_SEEDS} seeds");
    };
    eprintln!("bug_nbi_source_reused: caught with SYMMEM_ORDERING_SEED={seed}");
    assert_eq!(errors.len(), 4, "one error per op and PE:\n{stdout}");
    for e in &errors {
        let op = if e.contains("put_signal_nbi of ") {
            "put_signal_nbi"
        } else {
            "put_nbi"
        };
        for needle in [
            &format!("a {op} of 512 bytes"),
            "changed before the quiet",
            "(address 0x",
            "heap offset 0x",
            "to PE ",
            &format!("SYMMEM_ORDERING_SEED={seed}"),
        ] {
            assert!(e.contains(needle), "{needle:?} missing from {e}");
        }
    }
    for op in ["a put_nbi of", "a put_signal_nbi of"] {
        assert_eq!(
            errors.iter().filter(|e| e.contains(op)).count(),
            2,
            "{op} on each PE:\n{stdout}"
        );
    }
}

/// `(early, late)` wrong elements summed over the PEs of a `bug_get_nbi_read_early` job.
fn early_late(job: &Job) -> (u64, u64) {
    let mut sum = (0, 0);
    for l in job.stdout.lines() {
        let Some(rest) = l.split(": early ").nth(1) else {
            continue;
        };
        let mut words = rest.split(' ');
        let early: u64 = words.next().and_then(|w| w.parse().ok()).expect("early E");
        let late: u64 = words.nth(1).and_then(|w| w.parse().ok()).expect("late L");
        sum = (sum.0 + early, sum.1 + late);
    }
    sum
}

/// A `get_nbi` result (in the symmetric heap) read before `quiet`: complete at once in
/// the default mode; in weak mode it holds junk until the quiet, which fills it.
#[test]
fn a_get_nbi_result_read_before_quiet_passes_by_default_and_is_caught_in_weak_mode() {
    let job = run_ok(2, "bug_get_nbi_read_early", &[]);
    assert_eq!(early_late(&job), (0, 0), "default mode:\n{}", job.stdout);
    let caught = (1..=MAX_SEEDS).find(|seed| {
        let job = run_ok(2, "bug_get_nbi_read_early", &weak(&seed.to_string()));
        let (early, late) = early_late(&job);
        assert_eq!(late, 0, "quiet fills the destination:\n{}", job.stdout);
        early > 0
    });
    let Some(seed) = caught else {
        panic!("weak ordering did not hide a get_nbi result in {MAX_SEEDS} seeds");
    };
    eprintln!("bug_get_nbi_read_early: caught with SYMMEM_ORDERING_SEED={seed}");
}

/// Host-API scenarios that are correct programs: they pass in weak mode, where every
/// missing fence they had would show.
macro_rules! correct_in_weak_mode {
    ($($name:ident),* $(,)?) => {
        mod correct_in_weak_mode {
            $(
                #[test]
                fn $name() {
                    for seed in ["1", "2"] {
                        super::run_ok(2, stringify!($name), &super::weak(seed));
                    }
                    super::run_ok(4, stringify!($name), &super::weak("3"));
                }
            )*
        }
    };
}

correct_in_weak_mode!(
    rma,
    put_signal,
    signals,
    wait_test,
    wait_arrays,
    atomics,
    fence_quiet,
    barrier_sync,
    local_views,
    stress,
);

/// Weak ordering over both inner transports: direct within a simulated node, sockets
/// across.
#[test]
fn correct_programs_pass_in_weak_mode_across_two_nodes() {
    let mut env = weak("4").to_vec();
    env.extend(TWO_NODES);
    for scenario in ["put_signal", "fence_quiet", "atomics"] {
        run_ok(4, scenario, &env);
    }
}

/// A barrier as the last call before finalize, every PE then finalizing at once, under
/// seeds 1 to 20 on 2 and 4 PEs of one node and on 2 simulated nodes. Finalize used to
/// announce itself (the flag that lets a peer still in a barrier fail at once when its
/// partner skipped it) before its quiet delivered the barrier's last signals, which weak
/// ordering holds for up to a millisecond: a peer still waiting for such a signal saw the
/// announcement and failed, "it entered finalize instead of this barrier", in about a
/// third of these runs (the CI's weak-mode pass of `stream_collectives` hit it too).
#[test]
fn a_barrier_just_before_finalize_passes_in_weak_mode() {
    for seed in 1..=20u64 {
        let s = seed.to_string();
        run_ok(2, "barrier_then_finalize", &weak(&s));
        run_ok(4, "barrier_then_finalize", &weak(&s));
        if seed <= 5 {
            let mut env = weak(&s).to_vec();
            env.extend(TWO_NODES);
            run_ok(4, "barrier_then_finalize", &env);
        }
    }
}
