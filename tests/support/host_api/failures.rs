//! SYMMEM_TIMEOUT and dead peers.

use std::time::{Duration, Instant};

use symmem::{Cmp, Runtime, SignalOp};

use super::{check, check_eq, expect_err, finish, neighbours, OrFail, Outcome};

/// Run with SYMMEM_TIMEOUT=1: each PE waits (wait_until, signal_wait_until or
/// wait_until_any, by PE) for a value nobody will write, and must get a Timeout error
/// naming SYMMEM_TIMEOUT after about a second. Only bootstrap collectives (alloc, free,
/// finalize) synchronize the PEs, so nothing else is bound by the 1 s limit.
pub fn wait_timeout(rt: &Runtime) -> Outcome {
    finish(rt, "wait_timeout", wait_timeout_inner(rt))
}

fn wait_timeout_inner(rt: &Runtime) -> Outcome {
    let me = rt.my_pe();
    check_eq!(
        rt.config().timeout,
        Some(Duration::from_secs(1)),
        "SYMMEM_TIMEOUT"
    );
    let ivars = rt.alloc::<i64>(3).or_fail()?;
    let sig = rt.alloc::<u64>(1).or_fail()?;
    for i in 0..3 {
        rt.atomic_set(ivars.at(i), -1, me).or_fail()?;
    }
    rt.signal_op(sig.at(0), 5, SignalOp::Set, me).or_fail()?;
    let start = Instant::now();
    let (op, what, r) = match me % 3 {
        0 => (
            "wait_until",
            format!("allocation #{}[1] Eq 7 (last seen -1)", ivars.id()),
            rt.wait_until(ivars.at(1), Cmp::Eq, 7).map(drop),
        ),
        1 => (
            "signal_wait_until",
            format!("signal #{}[0] Gt 5 (last seen 5)", sig.id()),
            rt.signal_wait_until(sig.at(0), Cmp::Gt, 5).map(drop),
        ),
        _ => (
            "wait_until_any",
            format!("ivars of allocation #{}", ivars.id()),
            rt.wait_until_any(&ivars, None, Cmp::Ge, 0).map(drop),
        ),
    };
    let elapsed = start.elapsed();
    let msg = r
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default();
    expect_err(
        r,
        "Timeout",
        &[format!(
            "{op} on PE {me} timed out after 1s (SYMMEM_TIMEOUT) waiting for {what}"
        )],
    )?;
    check!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(10),
        "{op} gave up after {elapsed:?} with SYMMEM_TIMEOUT=1"
    );
    println!("ERROR after {} ms: {msg}", elapsed.as_millis());
    rt.free(ivars).or_fail()?;
    rt.free(sig).or_fail()
}

/// Run under symrun with SYMMEM_TIMEOUT=10: the last PE waits until every other PE is
/// about to wait, then kills itself with SIGKILL. The others wait (wait_until,
/// signal_wait_until or wait_until_all, by PE) for values that will never come, and must
/// fail with an error naming the dead PE well within the timeout. They print
/// `ERROR in <op> after <ms> ms: <error>` and exit with code 3.
pub fn kill_wait(rt: &Runtime) -> Outcome {
    let (me, n, _, _) = neighbours(rt);
    let victim = n - 1;
    let ivars = rt.calloc::<u64>(4).or_fail()?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    let ready = rt.calloc::<u64>(1).or_fail()?;
    if me == victim {
        rt.wait_until(ready.at(0), Cmp::Eq, (n - 1) as u64)
            .or_fail()?;
        // SAFETY: raising a signal on our own process; nothing runs after it.
        unsafe { libc::raise(libc::SIGKILL) };
        unreachable!("SIGKILL returned");
    }
    rt.atomic_inc(ready.at(0), victim).or_fail()?;
    let start = Instant::now();
    let (op, r) = match me % 3 {
        0 => (
            "wait_until",
            rt.wait_until(ivars.at(2), Cmp::Eq, 42).map(drop),
        ),
        1 => (
            "signal_wait_until",
            rt.signal_wait_until(sig.at(0), Cmp::Ge, 1).map(drop),
        ),
        _ => (
            "wait_until_all",
            rt.wait_until_all(&ivars, None, Cmp::Ne, 0),
        ),
    };
    let ms = start.elapsed().as_millis();
    match r {
        Err(e) => {
            println!("ERROR in {op} after {ms} ms: {e}");
            // Exit at once: finalize would only report the same failure again.
            std::process::exit(3);
        }
        Ok(()) => Err(format!("PE {me}: {op} returned although nobody wrote")),
    }
}
