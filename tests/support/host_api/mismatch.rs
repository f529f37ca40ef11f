//! Mismatched collectives (issue 52): two PEs calling different collectives must never
//! pair silently. A barrier carries its call's identity, so where the calls share a
//! barrier (every team collective on one team; across nodes also `barrier_all` and
//! `sync_all`, which are TEAM_WORLD's barrier there) every PE fails naming both PEs and
//! both operations, and the team works afterwards; where they do not (on one node,
//! `barrier_all` and `sync_all` have a barrier of their own) they block, and the hang
//! report names the mismatch (`collective_pair_hangs`).

use symmem::collectives::Sum;
use symmem::{Runtime, SymBuf};

use super::{check, check_eq, expect_err, finish, OrFail, Outcome};

/// The operations paired, by the names errors give them.
const OPS: [&str; 8] = [
    "barrier_all",
    "sync_all",
    "team_barrier",
    "team_sync",
    "team_broadcast",
    "team_reduce",
    "team_fcollect",
    "team_alltoall",
];

/// The pure synchronizations: one barrier, which may meet each other (OpenSHMEM's
/// `sync_all` is `team_sync` on TEAM_WORLD; a barrier adds a quiet on its own PE).
fn is_sync(op: &str) -> bool {
    matches!(
        op,
        "barrier_all" | "sync_all" | "team_barrier" | "team_sync"
    )
}

/// Whether `op` runs the barrier of `barrier_all` rather than TEAM_WORLD's where every
/// PE is on one node.
fn own_barrier(op: &str) -> bool {
    matches!(op, "barrier_all" | "sync_all")
}

/// Calls `op` on TEAM_WORLD with `dest` and `src` (each at least `n_pes` words).
fn call(rt: &Runtime, op: &str, dest: &SymBuf<u64>, src: &SymBuf<u64>) -> symmem::Result<()> {
    let world = rt.team_world();
    match op {
        "barrier_all" => rt.barrier_all(),
        "sync_all" => rt.sync_all(),
        "team_barrier" => world.barrier(),
        "team_sync" => world.sync(),
        "team_broadcast" => world.broadcast(dest, src, 1, 0),
        "team_reduce" => world.reduce(dest, src, 1, Sum),
        "team_fcollect" => world.fcollect(dest, src, 1),
        "team_alltoall" => world.alltoall(dest, src, 1),
        _ => unreachable!("not an operation of OPS: {op}"),
    }
}

/// Checks that TEAM_WORLD still works: a sum reduce gives the right value.
fn team_works(rt: &Runtime, dest: &SymBuf<u64>, src: &SymBuf<u64>, after: &str) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    rt.put(src.at(0), &[me as u64 + 1], me).or_fail()?;
    rt.team_world().reduce(dest, src, 1, Sum).or_fail()?;
    let mut got = [0u64];
    rt.read_local(dest.at(0), &mut got).or_fail()?;
    check_eq!(got[0], (n * (n + 1) / 2) as u64, "sum after {after}");
    rt.barrier_all().or_fail()
}

/// Every ordered pair of [`OPS`] that shares a barrier on this job's layout: the PEs but
/// the last call the first operation, the last PE the second. Pairs of two
/// synchronizations complete; every other pair fails on every PE with a `TeamMismatch`
/// naming an operation of each side and a PE that called it, and TEAM_WORLD works
/// afterwards. On one node the pairs of `barrier_all` or `sync_all` with a TEAM_WORLD
/// operation meet in no barrier and are left to `collective_pair_hangs`.
pub fn collective_pairs(rt: &Runtime) -> Outcome {
    finish(rt, "collective_pairs", collective_pairs_inner(rt))
}

fn collective_pairs_inner(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    check!(n >= 2, "needs 2 PEs");
    let one_node = rt.team_node().n_pes() == n;
    let dest = rt.calloc::<u64>(n).or_fail()?;
    let src = rt.calloc::<u64>(n).or_fail()?;
    let last = n - 1;
    let (mut paired, mut failed) = (0, 0);
    for a in OPS {
        for b in OPS {
            if a == b || (one_node && own_barrier(a) != own_barrier(b)) {
                continue;
            }
            let mine = if me == last { b } else { a };
            let r = call(rt, mine, &dest, &src);
            if is_sync(a) && is_sync(b) {
                r.map_err(|e| format!("{a} on PEs 0..{last} with {b} on PE {last}: {e}"))?;
                paired += 1;
            } else {
                let (other, at) = if me == last { (a, last - 1) } else { (b, last) };
                expect_err(
                    r,
                    "TeamMismatch",
                    &[
                        format!("PE {at} called {other} while PE {me} called {mine}"),
                        "mismatched collectives".to_string(),
                    ],
                )
                .map_err(|e| format!("{a} on PEs 0..{last} with {b} on PE {last}: {e}"))?;
                failed += 1;
            }
            team_works(rt, &dest, &src, &format!("{a} with {b}"))?;
        }
    }
    check!(
        paired > 0 && failed > 0,
        "{paired} pairs met, {failed} failed"
    );
    rt.free(src).or_fail()?;
    rt.free(dest).or_fail()
}

/// One pair that shares no barrier on one node, from `SYMMEM_TEST_PAIR` (`a,b`): PE 0
/// calls `a`, PE 1 calls `b`; both time out at `SYMMEM_TIMEOUT`, and the hang report
/// (`SYMMEM_HANG_REPORT`) names the mismatch.
pub fn collective_pair_hangs(rt: &Runtime) -> Outcome {
    finish(rt, "collective_pair_hangs", collective_pair_hangs_inner(rt))
}

fn collective_pair_hangs_inner(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    check!(rt.config().timeout.is_some(), "needs SYMMEM_TIMEOUT set");
    let pair = std::env::var("SYMMEM_TEST_PAIR").map_err(|e| format!("SYMMEM_TEST_PAIR: {e}"))?;
    let Some((a, b)) = pair.split_once(',') else {
        return Err(format!("SYMMEM_TEST_PAIR {pair:?} is not `a,b`"));
    };
    check!(
        OPS.contains(&a) && OPS.contains(&b),
        "{pair:?}: not operations of {OPS:?}"
    );
    let dest = rt.calloc::<u64>(2).or_fail()?;
    let src = rt.calloc::<u64>(2).or_fail()?;
    let mine = if rt.my_pe() == 0 { a } else { b };
    expect_err(
        call(rt, mine, &dest, &src),
        "Timeout",
        &[format!("{mine} on PE {}", rt.my_pe())],
    )
}

/// PE 0 calls `barrier_all` while PE 1 calls TEAM_WORLD's `team_broadcast`, across two
/// nodes (where `barrier_all` is TEAM_WORLD's barrier): both fail at once naming both
/// PEs and both operations (before the barrier carried its call's identity, both
/// returned Ok, PE 1 with a `dest` nobody wrote), and afterwards TEAM_WORLD and
/// `barrier_all` work.
pub fn mismatched_collectives_named(rt: &Runtime) -> Outcome {
    finish(
        rt,
        "mismatched_collectives_named",
        mismatched_collectives_named_inner(rt),
    )
}

fn mismatched_collectives_named_inner(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    check!(rt.team_node().n_pes() == 1, "runs on 2 nodes");
    let dest = rt.calloc::<u64>(2).or_fail()?;
    let src = rt.calloc::<u64>(2).or_fail()?;
    if rt.my_pe() == 0 {
        expect_err(
            rt.barrier_all(),
            "TeamMismatch",
            &["barrier_all: the PEs of the team disagree: PE 1 called team_broadcast while PE 0 called barrier_all, at barrier #".to_string(),
              " of TEAM_WORLD".to_string()],
        )?;
    } else {
        expect_err(
            rt.team_world().broadcast(&dest, &src, 1, 0),
            "TeamMismatch",
            &["team_broadcast: the PEs of the team disagree: PE 0 called barrier_all while PE 1 called team_broadcast, at barrier #".to_string()],
        )?;
    }
    team_works(rt, &dest, &src, "the mismatch")?;
    rt.free(src).or_fail()?;
    rt.free(dest).or_fail()
}
