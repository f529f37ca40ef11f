//! Deliberately wrong programs for the weak-ordering mode (tests/weak_ordering.rs runs
//! them): each publishes data with a flag but forgets what orders the two. On x86 CPU PEs
//! in the default mode they (usually) work, because stores become visible in program
//! order; a GPU, or `SYMMEM_ORDERING=weak`, shows the consumer the flag before the data.
//!
//! Each PE produces for its right neighbour and consumes from its left for [`ROUNDS`]
//! rounds, each acknowledged before the next overwrites the data. The consumer counts the
//! rounds in which some element was not yet that round's after the flag said it was, and
//! prints `PE <me>: stale <count> of <rounds>` before the usual success line: the test
//! decides what is expected.
//!
//! Two more misuse the nonblocking forms ([`bug_nbi_source_reused`],
//! [`bug_get_nbi_read_early`]): the host API copies at the call, so they work everywhere
//! in the default mode, but a GPU would not wait for the copy.

use symmem::{Cmp, Runtime, SignalOp};

use super::{check_eq, elem, finish, neighbours, OrFail, Outcome};

/// Rounds per run: enough that a reordering shows within a few seeds.
const ROUNDS: u64 = 30;
/// u64s of data per round.
const LEN: usize = 64;

/// What the producer forgets.
#[derive(Clone, Copy)]
enum Bug {
    /// `put(data)` then `p(flag)`: no fence.
    PutThenP,
    /// `put(data)` then a second `put` for the flag: no fence.
    PutThenPut,
    /// `signal_op(flag)` before `put(data)`.
    SignalFirst,
}

/// `put(data); p(flag)` with no fence between.
pub fn bug_put_then_p(rt: &Runtime) -> Outcome {
    finish(rt, "bug_put_then_p", run(rt, Bug::PutThenP))
}

/// `put(data); put(flag)` with no fence between.
pub fn bug_put_then_put(rt: &Runtime) -> Outcome {
    finish(rt, "bug_put_then_put", run(rt, Bug::PutThenPut))
}

/// `signal_op(flag); put(data)`: the signal before its data.
pub fn bug_signal_first(rt: &Runtime) -> Outcome {
    finish(rt, "bug_signal_first", run(rt, Bug::SignalFirst))
}

fn run(rt: &Runtime, bug: Bug) -> Outcome {
    let (me, _, right, left) = neighbours(rt);
    let data = rt.calloc::<u64>(LEN).or_fail()?;
    let flag = rt.calloc::<u64>(1).or_fail()?;
    let ack = rt.calloc::<u64>(1).or_fail()?;
    let mut got = vec![0u64; LEN];
    let mut stale = 0;
    for r in 1..=ROUNDS {
        // Producer: the consumer has checked round r - 1.
        rt.wait_until(ack.at(0), Cmp::Ge, r - 1).or_fail()?;
        let v = vec![r; LEN];
        match bug {
            Bug::PutThenP => {
                rt.put(data.at(0), &v, right).or_fail()?;
                rt.p(flag.at(0), r, right).or_fail()?;
            }
            Bug::PutThenPut => {
                rt.put(data.at(0), &v, right).or_fail()?;
                rt.put(flag.at(0), &[r], right).or_fail()?;
            }
            Bug::SignalFirst => {
                rt.signal_op(flag.at(0), r, SignalOp::Set, right)
                    .or_fail()?;
                rt.put(data.at(0), &v, right).or_fail()?;
            }
        }
        // Consumer.
        rt.wait_until(flag.at(0), Cmp::Ge, r).or_fail()?;
        rt.read_local(data.at(0), &mut got).or_fail()?;
        if got.iter().any(|&x| x != r) {
            stale += 1;
        }
        rt.atomic_add(ack.at(0), 1, left).or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    println!("PE {me}: stale {stale} of {ROUNDS}");
    rt.free(data).or_fail()?;
    rt.free(flag).or_fail()?;
    rt.free(ack).or_fail()
}

/// A `put_nbi`, then a `put_signal_nbi`, from a source in this PE's symmetric heap that
/// the program changes before the `quiet` that completes each. Each quiet prints
/// `ERROR (expected): PE <me>: <error>` if it fails and `PE <me>: <op> reuse undetected`
/// if not; the test decides which is expected. The error leaves the runtime usable, so
/// every PE goes on to the same barrier and checks what arrived (the source as it was at
/// each call: weak mode copies it there too) whatever the mode: no PE leaves early.
pub fn bug_nbi_source_reused(rt: &Runtime) -> Outcome {
    finish(rt, "bug_nbi_source_reused", nbi_source_reused(rt))
}

fn nbi_source_reused(rt: &Runtime) -> Outcome {
    let (me, _, right, left) = neighbours(rt);
    let first: Vec<u64> = (0..LEN).map(|i| elem(me as u64, i)).collect();
    let src = rt.calloc::<u64>(LEN).or_fail()?;
    let data = rt.calloc::<u64>(LEN).or_fail()?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    rt.put(src.at(0), &first, me).or_fail()?;
    rt.barrier_all().or_fail()?;
    for (round, op) in ["put_nbi", "put_signal_nbi"].into_iter().enumerate() {
        {
            // SAFETY: no PE writes this PE's `src` while the slice lives: peers never
            // touch it, and this PE changes it only after the slice is gone.
            let s = unsafe { rt.local_slice(&src) }.or_fail()?;
            match op {
                "put_nbi" => rt.put_nbi(data.at(0), s, right),
                _ => rt.put_signal_nbi(data.at(0), s, sig.at(0), 1, SignalOp::Add, right),
            }
            .or_fail()?;
        }
        // The bug: the source changes before the quiet that completes the put.
        rt.p(src.at(0), reused(me, round), me).or_fail()?;
        match rt.quiet() {
            Ok(()) => println!("PE {me}: {op} reuse undetected"),
            Err(e) => println!("ERROR (expected): PE {me}: {e}"),
        }
    }
    rt.barrier_all().or_fail()?;
    // The second put sent the source after the first change.
    let mut want: Vec<u64> = (0..LEN).map(|i| elem(left as u64, i)).collect();
    want[0] = reused(left, 0);
    let mut got = vec![0u64; LEN];
    rt.read_local(data.at(0), &mut got).or_fail()?;
    check_eq!(got, want, "what PE {left}'s two puts delivered");
    check_eq!(rt.signal_fetch(sig.at(0)).or_fail()?, 1, "the signal");
    rt.barrier_all().or_fail()?;
    rt.free(src).or_fail()?;
    rt.free(data).or_fail()?;
    rt.free(sig).or_fail()
}

/// What PE `pe` writes into its source's first element after the `round`th nbi put.
fn reused(pe: usize, round: usize) -> u64 {
    u64::MAX - (pe * 2 + round) as u64
}

/// A `get_nbi` from the right neighbour into a destination in this PE's symmetric heap,
/// read before and after the `quiet` that completes it. Prints `PE <me>: early E late L`,
/// the wrong elements read at each point; the test decides what is expected.
pub fn bug_get_nbi_read_early(rt: &Runtime) -> Outcome {
    finish(rt, "bug_get_nbi_read_early", get_nbi_read_early(rt))
}

fn get_nbi_read_early(rt: &Runtime) -> Outcome {
    let (me, _, right, _) = neighbours(rt);
    let mine: Vec<u64> = (0..LEN).map(|i| elem(me as u64, i)).collect();
    let want: Vec<u64> = (0..LEN).map(|i| elem(right as u64, i)).collect();
    let src = rt.calloc::<u64>(LEN).or_fail()?;
    let mut dst = rt.calloc::<u64>(LEN).or_fail()?;
    rt.put(src.at(0), &mine, me).or_fail()?;
    rt.barrier_all().or_fail()?;
    {
        // SAFETY: no PE reads or writes this PE's `dst` while the slice lives: peers never
        // touch it, and this PE reads it only after the slice is gone.
        let d = unsafe { rt.local_slice_mut(&mut dst) }.or_fail()?;
        rt.get_nbi(src.at(0), d, right).or_fail()?;
    }
    let wrong = |rt: &Runtime| -> Result<usize, String> {
        let mut got = vec![0u64; LEN];
        rt.read_local(dst.at(0), &mut got).or_fail()?;
        Ok(got.iter().zip(&want).filter(|(g, w)| g != w).count())
    };
    // The bug: the result is read before the quiet that completes the get.
    let early = wrong(rt)?;
    rt.quiet().or_fail()?;
    let late = wrong(rt)?;
    println!("PE {me}: early {early} late {late}");
    rt.barrier_all().or_fail()?;
    // A correct use: `free` completes a get_nbi (it begins with a barrier), so its late
    // result never lands in the next allocation at the same offset.
    {
        // SAFETY: as above.
        let d = unsafe { rt.local_slice_mut(&mut dst) }.or_fail()?;
        rt.get_nbi(src.at(0), d, right).or_fail()?;
    }
    rt.free(dst).or_fail()?;
    let next = rt.calloc::<u64>(LEN).or_fail()?;
    rt.quiet().or_fail()?;
    let mut got = vec![u64::MAX; LEN];
    rt.read_local(next.at(0), &mut got).or_fail()?;
    check_eq!(
        got,
        vec![0u64; LEN],
        "a calloc after freeing a get_nbi destination"
    );
    rt.barrier_all().or_fail()?;
    rt.free(src).or_fail()?;
    rt.free(next).or_fail()
}
