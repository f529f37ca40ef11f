//! Scenarios for the remote transport (run on simulated nodes, see tests/host_api.rs).

use std::time::Instant;

use symmem::{Cmp, Runtime, SignalOp};

use super::{check, finish, OrFail, Outcome};

/// Payload of each large put_signal: 3 MiB + 8 bytes, so it spans several transport
/// chunks and ends in a partial one.
const LARGE: usize = (3 << 20) / 8 + 1;
const LARGE_ROUNDS: u64 = 6;

/// Each PE put_signals a large payload to its right neighbour, round after round, with
/// the signal set to the round; the receiver checks every element of the payload as soon
/// as the signal shows the round. The data must never lag behind the signal.
pub fn put_signal_large(rt: &Runtime) -> Outcome {
    finish(rt, "put_signal_large", put_signal_large_inner(rt))
}

fn put_signal_large_inner(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let data = rt.calloc::<u64>(LARGE).or_fail()?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    let ack = rt.calloc::<u64>(1).or_fail()?;
    let mut src = vec![0u64; LARGE];
    let mut got = vec![0u64; LARGE];
    for round in 1..=LARGE_ROUNDS {
        for (i, v) in src.iter_mut().enumerate() {
            *v = (me as u64) << 48 | round << 32 | i as u64;
        }
        rt.put_signal(data.at(0), &src, sig.at(0), round, SignalOp::Set, right)
            .or_fail()?;
        rt.signal_wait_until(sig.at(0), Cmp::Ge, round).or_fail()?;
        rt.read_local(data.at(0), &mut got).or_fail()?;
        for (i, &v) in got.iter().enumerate() {
            let want = (left as u64) << 48 | round << 32 | i as u64;
            check!(
                v == want,
                "round {round}: element {i} from PE {left} is {v:#x}, expected {want:#x} (data behind its signal)"
            );
        }
        // The left neighbour may overwrite `data` only after this PE has checked it.
        rt.atomic_add(ack.at(0), 1, left).or_fail()?;
        rt.wait_until(ack.at(0), Cmp::Ge, round).or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    rt.free(data).or_fail()?;
    rt.free(sig).or_fail()?;
    rt.free(ack).or_fail()
}

/// Elements the writer of `quiet_visibility` streams per round (512 KiB), in puts of
/// one of `VISIBILITY_PIECES` elements (4 KiB, and 256 KiB: transports may send large
/// pieces another way).
const VISIBILITY_LEN: usize = 64 << 10;
const VISIBILITY_PIECES: [usize; 2] = [512, 32 << 10];
const VISIBILITY_ROUNDS: u64 = 12;

/// Quiet makes writes visible to every PE, not only to later operations of the writer:
/// PE 0 streams puts (small or large, by round) to a PE of another node (the target), quiets, then sets a flag on a
/// third PE, on the target's node but not PE 0's (the observer), over a connection of its
/// own. The observer waits for the flag, then reads the target's copy through the
/// node's shared memory, which shows exactly what the target has applied so far: every
/// element must be this round's. A transport whose quiet returned once the writes were
/// merely sent would fail here, whatever order its own connections keep.
pub fn quiet_visibility(rt: &Runtime) -> Outcome {
    finish(rt, "quiet_visibility", quiet_visibility_inner(rt))
}

fn quiet_visibility_inner(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let node = |pe: usize| rt.node_of(pe).map(str::to_owned).or_fail();
    let writer = 0;
    let mut target = None;
    for pe in 1..n {
        if node(pe)? != node(writer)? {
            target = Some(pe);
            break;
        }
    }
    let target = target.ok_or("quiet_visibility needs a PE on a node other than PE 0's")?;
    let mut observer = None;
    for pe in 1..n {
        if pe != target && node(pe)? == node(target)? {
            observer = Some(pe);
            break;
        }
    }
    let observer = observer.ok_or("quiet_visibility needs two PEs on a node other than PE 0's")?;
    let data = rt.calloc::<u64>(VISIBILITY_LEN).or_fail()?;
    let flag = rt.calloc::<u64>(1).or_fail()?;
    let ack = rt.calloc::<u64>(1).or_fail()?;
    let value = |round: u64, i: usize| round << 32 | i as u64;
    let mut src = vec![0u64; VISIBILITY_LEN];
    let mut got = vec![0u64; VISIBILITY_LEN];
    for round in 1..=VISIBILITY_ROUNDS {
        if me == writer {
            for (i, v) in src.iter_mut().enumerate() {
                *v = value(round, i);
            }
            let piece = VISIBILITY_PIECES[round as usize % VISIBILITY_PIECES.len()];
            for (k, part) in src.chunks(piece).enumerate() {
                rt.put_nbi(data.at(k * piece), part, target).or_fail()?;
            }
            rt.quiet().or_fail()?;
            rt.p(flag.at(0), round, observer).or_fail()?;
            rt.wait_until(ack.at(0), Cmp::Ge, round).or_fail()?;
        } else if me == observer {
            rt.wait_until(flag.at(0), Cmp::Ge, round).or_fail()?;
            rt.get(data.at(0), &mut got, target).or_fail()?;
            for (i, &v) in got.iter().enumerate() {
                check!(
                    v == value(round, i),
                    "round {round}: element {i} on PE {target} is {v:#x} after PE {writer}'s quiet and flag, expected {:#x}",
                    value(round, i)
                );
            }
            rt.atomic_add(ack.at(0), 1, writer).or_fail()?;
        }
    }
    rt.barrier_all().or_fail()?;
    rt.free(data).or_fail()?;
    rt.free(flag).or_fail()?;
    rt.free(ack).or_fail()
}

/// Run under symrun on 2 simulated nodes: the last PE kills itself (SIGKILL) while the
/// PEs of the other node stream large puts to it and quiet (and those of its own node wait
/// on it). Each survivor must fail with an error naming
/// the dead PE, print `ERROR in transfer after <ms> ms: <error>` and exit with code 3.
pub fn kill_transfer(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let victim = n - 1;
    let buf = rt.calloc::<u64>(1 << 18).or_fail()?;
    let started = rt.calloc::<u64>(1).or_fail()?;
    if me == victim {
        rt.wait_until(started.at(0), Cmp::Ge, (n - 1) as u64)
            .or_fail()?;
        std::thread::sleep(std::time::Duration::from_millis(50));
        // SAFETY: raising a signal on our own process; nothing runs after it.
        unsafe { libc::raise(libc::SIGKILL) };
        unreachable!("SIGKILL returned");
    }
    let src = vec![me as u64; 1 << 18];
    let start = Instant::now();
    rt.atomic_add(started.at(0), 1, victim).or_fail()?;
    let mapped = rt.ptr(&buf, victim).or_fail()?.is_some();
    let err = loop {
        if mapped {
            // A same-node PE writes the victim's heap directly, which cannot fail: it
            // waits for the victim instead, and the liveness watch names it.
            match rt.wait_until(started.at(0), Cmp::Eq, u64::MAX) {
                Err(e) => break e,
                Ok(_) => {
                    return Err(format!(
                        "PE {me}: wait_until returned although nobody wrote"
                    ))
                }
            }
        }
        let r = rt.put(buf.at(0), &src, victim).and_then(|()| rt.quiet());
        if let Err(e) = r {
            break e;
        }
        check!(
            start.elapsed().as_secs() < 60,
            "a minute of transfers to a killed PE {victim} without an error"
        );
    };
    println!(
        "ERROR in transfer after {} ms: {err}",
        start.elapsed().as_millis()
    );
    // Leave the job only after the other survivors had time to find the dead PE on their
    // own: this exit skips the runtime's drop, so it records no failure cause, and a
    // survivor on the victim's node that heard of this exit from the bootstrap before its
    // pidfd watch saw the victim die would blame this PE (seen once in CI).
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::process::exit(3);
}
