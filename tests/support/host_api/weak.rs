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

use symmem::{Cmp, Runtime, SignalOp};

use super::{finish, neighbours, OrFail, Outcome};

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
