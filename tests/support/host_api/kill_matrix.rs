//! The kill -9 matrix (tests/kill_matrix.rs): the last PE is killed with SIGKILL while
//! each other PE is inside an operation of its own, named by `SYMMEM_TEST_KILL_OPS`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use symmem::collectives::Sum;
use symmem::{Cmp, Runtime};

use super::{OrFail, Outcome};

/// The operations a survivor can be in when the victim dies, by the names
/// `SYMMEM_TEST_KILL_OPS` uses.
pub const KILL_OPS: [&str; 8] = [
    "wait_until",
    "signal_wait_until",
    "barrier_all",
    "team_barrier",
    "reduce",
    "fcollect",
    "quiet",
    "alloc",
];

/// The bytes of each put the `quiet` survivor keeps outstanding to the victim.
const BIG: usize = 1 << 20;

/// How long the victim waits, once every survivor has said it is about to enter its
/// operation, before it kills itself: long enough for each to be inside (and for the
/// `quiet` survivor to have puts in flight), short next to the detection bounds.
const SETTLE: Duration = Duration::from_millis(200);

/// Milliseconds since the Unix epoch: the victim prints when it dies and each survivor
/// when it failed, so the test computes the detection time across processes.
fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Runs the matrix scenario on `rt`. Every PE allocates the same buffers and a team of all
/// PEs, then the last PE (the victim) waits until each other PE has announced that it is
/// entering its operation, waits [`SETTLE`], prints `PE <v>: SIGKILL at <unix ms>` and
/// kills itself. Survivor `p` runs the `p`-th operation of `SYMMEM_TEST_KILL_OPS` (a comma
/// list, one entry per survivor), which must fail; it prints `ERROR (PE <p> in <op>) at
/// <unix ms> after <ms> ms: <error>` and returns `Ok` for the caller to leave.
///
/// An operation that succeeds, or the `quiet` survivor on the victim's node (its puts are
/// stores into mapped memory, which cannot fail), is an `Err` of the scenario.
pub fn kill_matrix(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let victim = n - 1;
    let list = std::env::var("SYMMEM_TEST_KILL_OPS")
        .map_err(|_| "SYMMEM_TEST_KILL_OPS is not set".to_string())?;
    let ops: Vec<&str> = list.split(',').map(str::trim).collect();
    if ops.len() != n - 1 {
        return Err(format!(
            "SYMMEM_TEST_KILL_OPS={list:?}: expected {} operations, one per survivor",
            n - 1
        ));
    }
    if let Some(bad) = ops.iter().find(|op| !KILL_OPS.contains(op)) {
        return Err(format!(
            "unknown operation {bad:?}: expected one of {KILL_OPS:?}"
        ));
    }
    // The same collective calls on every PE, whatever its operation.
    let ivar = rt.calloc::<u64>(1).or_fail()?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    let ready = rt.calloc::<u64>(1).or_fail()?;
    let big = rt.calloc::<u8>(BIG).or_fail()?;
    let src = rt.calloc::<u64>(4).or_fail()?;
    let dest = rt.calloc::<u64>(4 * n).or_fail()?;
    let world = rt.team_world();
    let team = world
        .split_strided(0, 1, n)
        .or_fail()?
        .ok_or_else(|| format!("PE {me} is not in the team of all PEs"))?;
    rt.barrier_all().or_fail()?;

    if me == victim {
        rt.wait_until(ready.at(0), Cmp::Ge, (n - 1) as u64)
            .or_fail()?;
        std::thread::sleep(SETTLE);
        println!("PE {me}: SIGKILL at {}", unix_ms());
        // SAFETY: raising a signal on our own process; nothing runs after it.
        unsafe { libc::raise(libc::SIGKILL) };
        unreachable!("SIGKILL returned");
    }

    let op = ops[me];
    let payload = vec![me as u8; BIG];
    if op == "quiet" && rt.ptr(&big, victim).or_fail()?.is_some() {
        return Err(format!(
            "PE {me}: quiet needs the victim PE {victim} on another node (its puts here are stores)"
        ));
    }
    rt.atomic_inc(ready.at(0), victim).or_fail()?;
    let start = Instant::now();
    let r = match op {
        "wait_until" => rt.wait_until(ivar.at(0), Cmp::Eq, 1).map(drop),
        "signal_wait_until" => rt.signal_wait_until(sig.at(0), Cmp::Ge, 1).map(drop),
        "barrier_all" => rt.barrier_all(),
        "team_barrier" => team.barrier(),
        "reduce" => world.reduce(&dest, &src, 4, Sum),
        "fcollect" => team.fcollect(&dest, &src, 4),
        "alloc" => rt.alloc::<u64>(1).map(drop),
        "quiet" => loop {
            // Two large puts outstanding to the victim, then the quiet that completes
            // them, until one of them fails.
            let r = rt
                .put_nbi(big.at(0), &payload, victim)
                .and_then(|()| rt.put_nbi(big.at(0), &payload, victim))
                .and_then(|()| rt.quiet());
            if r.is_err() || start.elapsed() > Duration::from_secs(120) {
                break r;
            }
        },
        _ => unreachable!("checked above"),
    };
    let ms = start.elapsed().as_millis();
    match r {
        Err(e) => {
            println!(
                "ERROR (PE {me} in {op}) at {} after {ms} ms: {e}",
                unix_ms()
            );
            Ok(())
        }
        Ok(()) => Err(format!(
            "PE {me}: {op} succeeded although PE {victim} was killed"
        )),
    }
}
