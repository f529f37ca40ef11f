//! The weak-ordering mode (`SYMMEM_ORDERING=weak`) from kernels on the CPU executor:
//! device operations to peers go through the proxy ring to the reordering transport. A
//! deliberately wrong kernel (a put and then its flag with no fence, the flag set by `p`,
//! by a second `put` or by a relaxed `atomic_fetch_add`; the signal before its data)
//! passes in the default mode (the signal-first kernel only usually) and is caught in
//! weak mode within
//! [`MAX_SEEDS`] seeds; correct scenarios of the device-op suite pass in weak mode under
//! several seeds.

mod common;
use common::{run_with_env, Job};

/// Seeds the bug gets to show in weak mode.
const MAX_SEEDS: u64 = 20;

/// Rounds, over every PE, in which a consumer of `mode` saw the flag before the data.
fn stale(job: &Job, mode: u32) -> u64 {
    let tag = format!(": stale {mode} ");
    job.stdout
        .lines()
        .filter_map(|l| l.split(tag.as_str()).nth(1))
        .map(|rest| {
            rest.split(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .expect("`stale MODE N of R`")
        })
        .sum()
}

/// The weak-mode environment with `seed`.
fn weak(seed: &str) -> [(&'static str, &str); 2] {
    [("SYMMEM_ORDERING", "weak"), ("SYMMEM_ORDERING_SEED", seed)]
}

fn ok(n: usize, scenario: &str, env: &[(&str, &str)]) -> Job {
    let job = run_with_env(n, scenario, env);
    job.assert_ok(n, scenario);
    job
}

/// Modes 0 and 1 (the flag by `p` or by a second `put`, no fence) pass by default and are
/// caught in weak mode. Mode 2 (the signal before its data) is a real race even on x86:
/// usually won, but how often depends on the scheduler (a loaded machine loses it every
/// time), so by default it is only run and its stale reads printed. Mode 3 (the flag by
/// a relaxed `atomic_fetch_add`) is correct on x86 only because a locked RMW is a full
/// barrier there, which the language does not promise for a relaxed one, so it is
/// printed too. Weak mode must catch all four.
#[test]
fn put_then_flag_without_fence_passes_by_default_and_is_caught_in_weak_mode() {
    let job = ok(2, "flag_without_fence", &[]);
    for mode in 0..2 {
        if stale(&job, mode) != 0 {
            job.fail(&format!("mode {mode} saw stale data in the default mode"));
        }
    }
    eprintln!(
        "in the default mode: mode 2 (signal first) {} stale reads, mode 3 (AMO flag) {}",
        stale(&job, 2),
        stale(&job, 3)
    );
    let mut caught = [None; 4];
    for seed in 1..=MAX_SEEDS {
        let job = ok(2, "flag_without_fence", &weak(&seed.to_string()));
        for (mode, c) in caught.iter_mut().enumerate() {
            if c.is_none() && stale(&job, mode as u32) > 0 {
                *c = Some(seed);
            }
        }
        if caught.iter().all(Option::is_some) {
            eprintln!(
                "caught: p flag with seed {:?}, put flag with seed {:?}, signal first with seed {:?}, AMO flag with seed {:?}",
                caught[0], caught[1], caught[2], caught[3]
            );
            return;
        }
    }
    panic!("weak ordering did not catch every mode in {MAX_SEEDS} seeds: {caught:?}");
}

#[test]
fn a_put_nbi_source_reused_before_quiet_is_reported_in_weak_mode() {
    let job = ok(2, "nbi_source_reused", &[]);
    if job
        .lines_with("PE ")
        .iter()
        .filter(|l| l.ends_with("reuse undetected"))
        .count()
        != 2
    {
        job.fail("the default mode cannot see the reuse");
    }
    let job = ok(2, "nbi_source_reused", &weak("1"));
    let errors = job.lines_with("ERROR (expected)");
    if errors.len() != 2 {
        job.fail("want one expected error per PE");
    }
    for e in errors {
        for needle in [
            "put_nbi of 4096 bytes",
            "changed before the quiet",
            "address 0x",
            "to PE ",
        ] {
            if !e.contains(needle) {
                job.fail(&format!("{needle:?} missing from {e}"));
            }
        }
    }
}

/// `(early, late)` wrong elements summed over the PEs of a `get_nbi_read_early` job.
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

#[test]
fn a_get_nbi_result_read_before_quiet_passes_by_default_and_is_caught_in_weak_mode() {
    let job = ok(2, "get_nbi_read_early", &[]);
    if early_late(&job) != (0, 0) {
        job.fail("the default mode completes get_nbi at once");
    }
    let job = ok(2, "get_nbi_read_early", &weak("1"));
    let (early, late) = early_late(&job);
    if early == 0 || late != 0 {
        job.fail("weak mode fills a get_nbi destination only at quiet");
    }
}

/// Device-op scenarios that are correct programs pass in weak mode. (`identity` is left
/// out: it checks `ptr` to peers, which weak mode withholds by design.)
macro_rules! correct_in_weak_mode {
    ($($name:ident),* $(,)?) => {
        mod correct_in_weak_mode {
            $(
                #[test]
                fn $name() {
                    for seed in ["1", "2"] {
                        super::ok(2, stringify!($name), &super::weak(seed));
                    }
                    super::ok(4, stringify!($name), &super::weak("3"));
                }
            )*
        }
    };
}

correct_in_weak_mode!(
    ring_put_signal,
    rma,
    put_signal,
    signal_cmp,
    wait_many,
    wait_test,
    atomics,
    fence_quiet,
    barriers,
    pipeline,
    geometry,
    thread_sync,
    big_grid,
    cooperative,
);
