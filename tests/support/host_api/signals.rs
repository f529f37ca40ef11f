//! put_signal and put_signal_nbi with every SignalOp, and signal_op, signal_fetch and
//! signal_wait_until with every Cmp and SignalOp.

use symmem::{Cmp, Runtime, SignalOp};

use super::{check, check_eq, elem, finish, key, neighbours, OrFail, Outcome, TInt};

// ---------------------------------------------------------------------------------------
// put_signal / put_signal_nbi: all-to-all, many iterations, large payloads; the receiver
// checks every element after it sees the signal.

const PS_ITERS: u64 = 60;
const PS_MAX: usize = 1 << 17; // u64 elements: 1 MiB

fn ps_len(from: usize, to: usize, it: u64) -> usize {
    const LENS: [usize; 6] = [1, 4099, PS_MAX, 17, 65_536, 30_001];
    LENS[(it as usize + from + 2 * to) % LENS.len()]
}

fn ps_seed(from: usize, to: usize, it: u64) -> u64 {
    key(&[3, from as u64, to as u64, it])
}

/// Each PE sends every PE (itself included) a message per iteration into a per-source
/// allocation, with put_signal or put_signal_nbi, SignalOp::Set or ::Add alternating; the
/// receiver waits for the signal, checks the whole payload, then acks. The sender does
/// not overwrite a payload before its ack, so every payload must be complete and current.
pub fn put_signal(rt: &Runtime) -> Outcome {
    finish(rt, "put_signal", put_signal_inner(rt))
}

fn put_signal_inner(rt: &Runtime) -> Outcome {
    let (me, n, _, _) = neighbours(rt);
    // inbox[s] is written only by PE s, so a receiver may look at it through a slice
    // between the signal and its ack.
    let inbox = (0..n)
        .map(|_| rt.alloc::<u64>(PS_MAX))
        .collect::<symmem::Result<Vec<_>>>()
        .or_fail()?;
    let sigs = rt.calloc::<u64>(n).or_fail()?; // sigs[s]: messages from PE s
    let acks = rt.calloc::<u64>(n).or_fail()?; // acks[t]: PE t consumed my message
    let mut src = vec![0u64; PS_MAX];
    let mut copy = vec![0u64; PS_MAX];
    let mut checked = 0usize;
    for it in 1..=PS_ITERS {
        for k in 1..=n {
            let t = (me + k) % n;
            let seen = rt
                .signal_wait_until(acks.at(t), Cmp::Ge, it - 1)
                .or_fail()?;
            check_eq!(seen, it - 1, "ack from PE {t}");
            let len = ps_len(me, t, it);
            let seed = ps_seed(me, t, it);
            for (i, x) in src[..len].iter_mut().enumerate() {
                *x = elem(seed, i);
            }
            // Both ops leave the signal equal to `it`.
            let (value, op) = if it % 2 == 0 {
                (it, SignalOp::Set)
            } else {
                (1, SignalOp::Add)
            };
            let sent = if it % 4 < 2 {
                rt.put_signal(inbox[me].at(0), &src[..len], sigs.at(me), value, op, t)
            } else {
                rt.put_signal_nbi(inbox[me].at(0), &src[..len], sigs.at(me), value, op, t)
            };
            sent.or_fail()?;
        }
        rt.quiet().or_fail()?;
        for k in 0..n {
            let s = (me + n - k) % n;
            let (cmp, v) = [
                (Cmp::Eq, it),
                (Cmp::Ge, it),
                (Cmp::Gt, it - 1),
                (Cmp::Ne, it - 1),
            ][it as usize % 4];
            let seen = rt.signal_wait_until(sigs.at(s), cmp, v).or_fail()?;
            check_eq!(seen, it, "signal from PE {s} in iteration {it}");
            check_eq!(rt.signal_fetch(sigs.at(s)).or_fail()?, it, "signal_fetch");
            let len = ps_len(s, me, it);
            let seed = ps_seed(s, me, it);
            // GPU heaps have no host slices: read them by copy there.
            let data: &[u64] = if it % 2 == 0 && !rt.is_gpu() {
                // SAFETY: PE s writes inbox[s] here only after this PE's ack below, and no
                // other PE writes it at all; the slice ends before the ack.
                unsafe { rt.local_slice(&inbox[s]) }.or_fail()?
            } else {
                rt.read_local(inbox[s].at(0), &mut copy[..len]).or_fail()?;
                &copy
            };
            for (i, x) in data[..len].iter().enumerate() {
                if *x != elem(seed, i) {
                    return Err(format!(
                        "iteration {it}: element {i} of {len} from PE {s} is {x:#x}, \
                         expected {:#x}, after the signal",
                        elem(seed, i)
                    ));
                }
            }
            checked += len;
            rt.signal_op(acks.at(me), it, SignalOp::Set, s).or_fail()?;
        }
    }
    rt.barrier_all().or_fail()?;
    println!("PE {me}: put_signal checked {checked} elements after their signals");
    for b in inbox {
        rt.free(b).or_fail()?;
    }
    rt.free(sigs).or_fail()?;
    rt.free(acks).or_fail()
}

// ---------------------------------------------------------------------------------------
// signal_op, signal_fetch, signal_wait_until with every Cmp and SignalOp.

/// Values that a waiter on `cmp pivot` sees: a preset and a sequence of updates, all of
/// which fail the comparison except the last. A waiter must return exactly the last.
pub(super) fn cmp_sequence<T: TInt>(cmp: Cmp, v: T) -> (T, Vec<T>) {
    let s = |k: i64| v.plus(k);
    match cmp {
        Cmp::Eq => (s(-5), vec![v.plus(T::HIGH), s(-1), s(1), v]),
        Cmp::Ne => (v, vec![v, v, v.plus(T::HIGH)]),
        Cmp::Gt => (s(-10), vec![s(-1), v, s(1)]),
        Cmp::Ge => (s(-10), vec![s(-2), s(-1), v]),
        Cmp::Lt => (s(10), vec![s(1), v, s(-1)]),
        Cmp::Le => (s(10), vec![s(2), s(1), v]),
    }
}

/// The sequences themselves must be right, or the scenarios prove nothing.
pub(super) fn check_sequence<T: TInt>(cmp: Cmp, v: T, preset: T, steps: &[T]) -> Outcome {
    let (last, rest) = steps.split_last().expect("non-empty");
    check!(
        !cmp.holds(preset, v) && rest.iter().all(|&x| !cmp.holds(x, v)) && cmp.holds(*last, v),
        "bad test sequence for {cmp:?} {v:?}"
    );
    Ok(())
}

pub(super) fn marker(from: usize, round: u64, c: usize) -> u64 {
    key(&[4, from as u64, round, c as u64])
}

/// For each Cmp, the left neighbour drives this PE's signal through values that fail the
/// comparison and then one that holds, with signal_op Set and Add (wrapping Add for
/// decreases) and put_signal for the last step; signal_wait_until must return exactly that
/// value and the data put before it must be visible. Then every PE adds to a counter on
/// every PE with put_signal(Add), and each waits until the sum is complete and checks
/// every payload.
pub fn signals(rt: &Runtime) -> Outcome {
    finish(rt, "signals", signals_inner(rt))
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn signals_inner(rt: &Runtime) -> Outcome {
    let (me, n, right, left) = neighbours(rt);
    let sig = rt.calloc::<u64>(Cmp::ALL.len()).or_fail()?;
    let data = rt.calloc::<u64>(Cmp::ALL.len()).or_fail()?;
    for (round, v) in u64::pivots().into_iter().enumerate() {
        let round = round as u64 + 1;
        for (c, &cmp) in Cmp::ALL.iter().enumerate() {
            let (preset, steps) = cmp_sequence(cmp, v);
            check_sequence(cmp, v, preset, &steps)?;
            rt.signal_op(sig.at(c), preset, SignalOp::Set, me)
                .or_fail()?;
            check_eq!(rt.signal_fetch(sig.at(c)).or_fail()?, preset, "preset");
        }
        rt.barrier_all().or_fail()?;
        for (c, &cmp) in Cmp::ALL.iter().enumerate() {
            let (preset, steps) = cmp_sequence(cmp, v);
            let mut prev = preset;
            for (k, &x) in steps.iter().enumerate() {
                let last = k + 1 == steps.len();
                let (value, op) = if (c + k) % 2 == 0 {
                    (x, SignalOp::Set)
                } else {
                    (x.wrapping_sub(prev), SignalOp::Add)
                };
                if last && c % 2 == 0 {
                    let d = [marker(me, round, c)];
                    rt.put_signal(data.at(c), &d, sig.at(c), value, op, right)
                        .or_fail()?;
                } else {
                    if last {
                        rt.put(data.at(c), &[marker(me, round, c)], right)
                            .or_fail()?;
                        rt.fence().or_fail()?;
                    }
                    rt.signal_op(sig.at(c), value, op, right).or_fail()?;
                }
                prev = x;
            }
        }
        for (c, &cmp) in Cmp::ALL.iter().enumerate() {
            let (_, steps) = cmp_sequence(cmp, v);
            let last = *steps.last().expect("non-empty");
            let seen = rt.signal_wait_until(sig.at(c), cmp, v).or_fail()?;
            check_eq!(seen, last, "signal_wait_until({cmp:?}, {v})");
            check_eq!(
                rt.g(data.at(c), me).or_fail()?,
                marker(left, round, c),
                "data put before the signal ({cmp:?})"
            );
            check_eq!(rt.signal_fetch(sig.at(c)).or_fail()?, last, "signal_fetch");
            // A condition that already holds returns at once.
            let again = rt.signal_wait_until(sig.at(c), cmp, v).or_fail()?;
            check_eq!(again, last, "second signal_wait_until({cmp:?})");
        }
        rt.barrier_all().or_fail()?;
    }

    // Many-to-one: every PE put_signals a payload into its slot on every PE and adds its
    // amount to one counter; the sum is complete only when every payload has landed.
    const SLOT: usize = 2048;
    const ROUNDS: u64 = 15;
    let slots = rt.calloc::<u64>(n * SLOT).or_fail()?;
    let counter = rt.calloc::<u64>(1).or_fail()?;
    let amount = |p: usize| 1 + p as u64 * 1000;
    let per_round: u64 = (0..n).map(amount).sum();
    for round in 1..=ROUNDS {
        for k in 0..n {
            let t = (me + k) % n;
            let seed = key(&[5, me as u64, t as u64, round]);
            let len = 1 + (seed % SLOT as u64) as usize;
            let v: Vec<u64> = (0..len).map(|i| elem(seed, i)).collect();
            let sent = if round % 2 == 0 {
                rt.put_signal(
                    slots.at(me * SLOT),
                    &v,
                    counter.at(0),
                    amount(me),
                    SignalOp::Add,
                    t,
                )
            } else {
                rt.put_signal_nbi(
                    slots.at(me * SLOT),
                    &v,
                    counter.at(0),
                    amount(me),
                    SignalOp::Add,
                    t,
                )
            };
            sent.or_fail()?;
        }
        rt.quiet().or_fail()?;
        let want = round * per_round;
        let seen = rt
            .signal_wait_until(counter.at(0), Cmp::Eq, want)
            .or_fail()?;
        check_eq!(seen, want, "counter in round {round}");
        for s in 0..n {
            let seed = key(&[5, s as u64, me as u64, round]);
            let len = 1 + (seed % SLOT as u64) as usize;
            let mut got = vec![0u64; len];
            rt.read_local(slots.at(s * SLOT), &mut got).or_fail()?;
            for (i, g) in got.iter().enumerate() {
                check_eq!(*g, elem(seed, i), "round {round}: element {i} from PE {s}");
            }
        }
        // Nobody overwrites a slot before its owner has checked it.
        rt.barrier_all().or_fail()?;
    }
    check_eq!(
        rt.signal_fetch(counter.at(0)).or_fail()?,
        ROUNDS * per_round,
        "final counter"
    );
    rt.free(slots).or_fail()?;
    rt.free(counter).or_fail()?;
    rt.free(sig).or_fail()?;
    rt.free(data).or_fail()
}
