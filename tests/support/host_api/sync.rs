//! barrier_all and sync_all.

use symmem::Runtime;

use super::{check, check_eq, finish, key, neighbours, OrFail, Outcome};

const B_ROUNDS: u64 = 200;

/// `barrier_all` three times, then a barrier of TEAM_WORLD as the last call before
/// finalize, which every PE then enters at once: a PE that left the barrier must not look
/// to a peer still in it as one that skipped it (its barrier signals may be in flight when
/// it enters finalize: weak ordering buffers them, and so may a transport route).
pub fn barrier_then_finalize(rt: &Runtime) -> Outcome {
    for _ in 0..3 {
        rt.barrier_all().or_fail()?;
    }
    rt.team_world().barrier().or_fail()?;
    finish(rt, "barrier_then_finalize", Ok(()))
}

/// Alternating barrier_all (after put_nbi) and sync_all (after blocking puts and atomics):
/// neither lets a PE through before every PE arrived (an arrival counter on PE 0 is in
/// [n*round, n*round + n - 1] right after), and both make the round's writes visible
/// (two banks of slots, so a PE one round ahead cannot disturb the check).
pub fn barrier_sync(rt: &Runtime) -> Outcome {
    finish(rt, "barrier_sync", barrier_sync_inner(rt))
}

fn barrier_sync_inner(rt: &Runtime) -> Outcome {
    let (me, n, _, _) = neighbours(rt);
    let arrivals = rt.calloc::<u64>(1).or_fail()?;
    let slots = rt.calloc::<u64>(2 * n).or_fail()?;
    for round in 1..=B_ROUNDS {
        let bank = (round % 2) as usize * n;
        rt.atomic_inc(arrivals.at(0), 0).or_fail()?;
        let barrier = round % 2 == 0;
        for t in 0..n {
            let v = key(&[10, me as u64, t as u64, round]);
            if barrier {
                rt.put_nbi(slots.at(bank + me), &[v], t).or_fail()?;
            } else {
                rt.put(slots.at(bank + me), &[v], t).or_fail()?;
            }
        }
        if barrier {
            rt.barrier_all().or_fail()?;
        } else {
            rt.sync_all().or_fail()?;
        }
        let c = rt.atomic_fetch(arrivals.at(0), 0).or_fail()?;
        let lo = n as u64 * round;
        check!(
            (lo..lo + n as u64).contains(&c),
            "after {} of round {round} the arrival count is {c}, expected {lo}..{}",
            if barrier { "barrier_all" } else { "sync_all" },
            lo + n as u64
        );
        let mut got = vec![0u64; n];
        rt.read_local(slots.at(bank), &mut got).or_fail()?;
        for (s, g) in got.iter().enumerate() {
            check_eq!(
                *g,
                key(&[10, s as u64, me as u64, round]),
                "round {round}: slot of PE {s}"
            );
        }
    }
    rt.barrier_all().or_fail()?;
    rt.free(arrivals).or_fail()?;
    rt.free(slots).or_fail()
}
