//! Several runtimes in one process (tests/several_runtimes.rs runs these): job A joins the
//! launcher's job with `init`, job B is made with a unique id that PE 0 creates and
//! broadcasts over A (`Runtime::broadcast_unique_id`). Each runtime's data carries its own tag, so data that crossed from
//! one runtime's heap into the other's would be caught, and every value is checked exactly.
//! What a runtime owns in the process (its memfds, its threads, its fds) is compared
//! before it was made and after it was dropped, while the other runtime lives on.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use symmem::collectives::Sum;
use symmem::{Error, Runtime};

use crate::{e2s, ensure, Outcome};

/// Words each PE puts to each PE per round.
const WORDS: usize = 64;
/// Rounds of the workload: enough for the two runtimes' rounds to overlap in time.
const ROUNDS: usize = 20;
/// Longest wait for a dropped runtime's threads to end.
const RELEASE_WAIT: Duration = Duration::from_secs(10);

/// Job A from the launcher, job B from a unique id on a second thread: both run the
/// workload at the same time; B finalizes first, then A, still alive, works on and checks
/// that B's memfds, threads and fds are gone; then A finalizes.
pub fn two_jobs_two_threads() -> Outcome {
    let a = symmem::init().map_err(|e| format!("init A: {e}"))?;
    let (me, n) = (a.my_pe(), a.n_pes());
    let alone = Resources::now();
    let id = a.broadcast_unique_id().map_err(e2s)?;
    let b_thread = std::thread::spawn(move || -> Result<BTreeSet<String>, String> {
        let b = symmem::init_with_unique_id(me, n, &id).map_err(|e| format!("init B: {e}"))?;
        ensure(b.my_pe() == me && b.n_pes() == n, || {
            "B: wrong rank or size".into()
        })?;
        let with_b = Resources::now().memfds;
        workload(&b, 2).map_err(|e| format!("B: {e}"))?;
        b.finalize().map_err(|e| format!("finalize B: {e}"))?;
        Ok(with_b)
    });
    workload(&a, 1).map_err(|e| format!("A: {e}"))?;
    let with_b = b_thread.join().map_err(|_| "B's thread panicked")??;
    let b_memfds: Vec<&String> = with_b.difference(&alone.memfds).collect();
    ensure(b_memfds.iter().any(|m| m.contains("symmem-heap-")), || {
        format!(
            "B's heap memfd not seen: {with_b:?} (A alone: {:?})",
            alone.memfds
        )
    })?;
    alone.wait_until_back("B")?;
    workload(&a, 3).map_err(|e| format!("A after B: {e}"))?;
    a.finalize().map_err(|e| format!("finalize A: {e}"))?;
    println!("PE {me}: two_jobs_two_threads ok");
    Ok(())
}

/// Jobs A and B on one thread, used in turns; a handle of one is refused by the other; A
/// is finalized first, its memfds go, and B works on.
pub fn two_jobs_one_thread() -> Outcome {
    let a = symmem::init().map_err(|e| format!("init A: {e}"))?;
    let (me, n) = (a.my_pe(), a.n_pes());
    let a_memfds = Resources::now().memfds;
    let id = a.broadcast_unique_id().map_err(e2s)?;
    let b = symmem::init_with_unique_id(me, n, &id).map_err(|e| format!("init B: {e}"))?;
    let both = Resources::now().memfds;
    for turn in 0..3 {
        workload(&a, 10 + turn).map_err(|e| format!("A, turn {turn}: {e}"))?;
        workload(&b, 20 + turn).map_err(|e| format!("B, turn {turn}: {e}"))?;
    }
    let of_a = a.calloc::<u64>(1).map_err(e2s)?;
    match b.put(of_a.at(0), &[1], me) {
        Err(e @ Error::ForeignAllocation { .. }) => println!("ERROR: {e}"),
        other => return Err(format!("B accepted A's allocation: {other:?}")),
    }
    a.finalize().map_err(|e| format!("finalize A: {e}"))?;
    let left = Resources::now().memfds;
    let b_only: BTreeSet<String> = both.difference(&a_memfds).cloned().collect();
    ensure(left == b_only, || {
        format!("after A's finalize the memfds are {left:?}; B's alone are {b_only:?}")
    })?;
    workload(&b, 30).map_err(|e| format!("B after A: {e}"))?;
    b.finalize().map_err(|e| format!("finalize B: {e}"))?;
    println!("PE {me}: two_jobs_one_thread ok");
    Ok(())
}

/// A second `init` while the first runtime lives fails at once, naming the launcher and
/// the unique id; the first works on; once it is finalized, `init` works again.
pub fn second_launcher_init() -> Outcome {
    let a = symmem::init().map_err(|e| format!("init: {e}"))?;
    let me = a.my_pe();
    match symmem::init() {
        Err(e) => println!("ERROR: {e}"),
        Ok(_) => return Err("a second init in the launcher's job succeeded".into()),
    }
    workload(&a, 1)?;
    a.finalize().map_err(|e| format!("finalize: {e}"))?;
    let again = symmem::init().map_err(|e| format!("init after finalize: {e}"))?;
    workload(&again, 2)?;
    again.finalize().map_err(|e| format!("finalize: {e}"))?;
    println!("PE {me}: second_launcher_init ok");
    Ok(())
}

/// The word PE `from` puts at index `i` of its block on PE `to` in `round`, in the
/// runtime tagged `tag`.
fn value(tag: usize, from: usize, to: usize, round: usize, i: usize) -> u64 {
    ((tag as u64) << 48)
        | ((from as u64) << 36)
        | ((to as u64) << 24)
        | ((round as u64) << 12)
        | i as u64
}

/// [`ROUNDS`] rounds on `rt`: puts to every PE, a barrier, a check of what arrived, a get
/// back from the next PE, and a sum reduction; all data tagged `tag`.
fn workload(rt: &Runtime, tag: usize) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let buf = rt.calloc::<u64>(n * WORDS).map_err(e2s)?;
    let sum_src = rt.calloc::<u64>(1).map_err(e2s)?;
    let sum_dest = rt.calloc::<u64>(1).map_err(e2s)?;
    let next = (me + 1) % n;
    for round in 0..ROUNDS {
        for pe in 0..n {
            let words: Vec<u64> = (0..WORDS).map(|i| value(tag, me, pe, round, i)).collect();
            rt.put(buf.at(me * WORDS), &words, pe).map_err(e2s)?;
        }
        rt.put(sum_src.at(0), &[(tag * 1000 + me + round) as u64], me)
            .map_err(e2s)?;
        rt.barrier_all().map_err(e2s)?;
        let mut got = vec![0; n * WORDS];
        rt.read_local(buf.at(0), &mut got).map_err(e2s)?;
        for (k, &v) in got.iter().enumerate() {
            let want = value(tag, k / WORDS, me, round, k % WORDS);
            ensure(v == want, || {
                format!("round {round}: word {k} is {v:#x}, want {want:#x}")
            })?;
        }
        let mut back = vec![0; WORDS];
        rt.get(buf.at(me * WORDS), &mut back, next).map_err(e2s)?;
        let want: Vec<u64> = (0..WORDS).map(|i| value(tag, me, next, round, i)).collect();
        ensure(back == want, || {
            format!("round {round}: get from PE {next}")
        })?;
        rt.team_world()
            .reduce(&sum_dest, &sum_src, 1, Sum)
            .map_err(e2s)?;
        let mut sum = [0u64];
        rt.read_local(sum_dest.at(0), &mut sum).map_err(e2s)?;
        let want: u64 = (0..n).map(|p| (tag * 1000 + p + round) as u64).sum();
        ensure(sum[0] == want, || {
            format!("round {round}: sum {} want {want}", sum[0])
        })?;
        // Nobody overwrites a block or the sum's source before everyone has read them.
        rt.barrier_all().map_err(e2s)?;
    }
    Ok(())
}

/// What the runtimes of this process hold in it, as `/proc/self` shows.
#[derive(Debug, PartialEq)]
struct Resources {
    /// The names of the symmem memfds mapped here (each runtime's carry its job id).
    memfds: BTreeSet<String>,
    /// This process's threads.
    threads: usize,
    /// Its open fds.
    fds: usize,
}

impl Resources {
    fn now() -> Self {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let memfds = maps
            .lines()
            .filter_map(|l| {
                l.split_whitespace()
                    .find(|w| w.starts_with("/memfd:symmem-"))
            })
            .map(str::to_string)
            .collect();
        let count = |dir: &str| std::fs::read_dir(dir).map_or(0, |d| d.count());
        Resources {
            memfds,
            threads: count("/proc/self/task"),
            fds: count("/proc/self/fd"),
        }
    }

    /// Waits until the process holds what it held at `self` again (threads of a dropped
    /// runtime may take a moment to end), or fails naming the difference and `whose`.
    fn wait_until_back(&self, whose: &str) -> Outcome {
        let deadline = Instant::now() + RELEASE_WAIT;
        loop {
            let now = Resources::now();
            if now == *self {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{whose} was dropped, but the process holds {now:?}, not {self:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
