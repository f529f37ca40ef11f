//! Litmus shapes of the memory model, run on every route (tests/litmus.rs and tests/ofi.rs
//! run this scenario on one node, across simulated nodes over sockets and ofi, and in
//! weak-ordering mode) with `SYMMEM_LITMUS_THREADS` threads per PE (1 by default);
//! `SYMMEM_LITMUS_SHAPES` picks shapes (comma-separated; all by default) and
//! `SYMMEM_LITMUS_QUIET_ROUNDS` the rounds of `quiet_third` (300 by default):
//!
//! - `mp`: message passing. Each thread of each PE sends a fresh payload to the same
//!   thread of its right neighbour and publishes it five ways (put + fence + p, put_nbi +
//!   quiet + atomic_set, put_signal, put_signal_nbi, put_nbi pieces + fence + atomic_add);
//!   the consumer waits for the flag, then every element must be this round's.
//! - `quiet_third`: quiet seen by a third PE. PE 0 streams puts to a PE of another node,
//!   quiets and flags an observer, which reads the target's copy: every element must be
//!   this round's. PE 0's other threads put, quiet and fence in a loop meanwhile (a quiet
//!   must not return on another thread's flush still in flight).
//! - `test_fence`: a target that waits only by `test` + `fence` (the OpenSHMEM idiom)
//!   and issues nothing but acknowledgements.
//! - `computing`: a target that sits in computation, reading its own memory without
//!   calling in, while the producer's get and put_signal need its progress (skipped
//!   where the transport serves peers only while the PE calls in).
//! - `atomics`: every thread of every PE adds to a counter on every PE, half of the adds
//!   fetching; each counter ends at the exact total and each thread's fetched values rise.
//! - `stream_free` (one thread): stream puts and put_signals to the right neighbour (on
//!   GPU PEs, the next PE of the node), the allocation freed at once and allocated again
//!   zeroed: nothing late lands in it (on a GPU, `free` must wait for the streams).
//!
//! A failure names the shape, the thread, the round and what was seen; a wait that never
//! ends fails after [`DEADLINE`] naming what it waited for, instead of hanging.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use symmem::{Cmp, Runtime, SignalOp, SymBuf, SymRef};

/// A symmetric buffer of the shapes.
type Buf = SymBuf<u64>;

use super::{check, check_eq, finish, key, neighbours, OrFail, Outcome};

/// The longest any litmus wait may take before it fails naming what it waited for.
const DEADLINE: Duration = Duration::from_secs(60);
/// Rounds of `mp` per thread.
const MP_ROUNDS: u64 = 90;
/// `mp`'s payload lengths (elements), by round: one word, a small message, 256 KiB.
const MP_LENS: [usize; 3] = [1, 96, 32 << 10];
/// Elements `quiet_third`'s writer streams per round (1 MiB).
const QT_LEN: usize = 128 << 10;
/// `quiet_third`'s put sizes (elements), by round: 4 KiB pieces, and the whole MiB.
const QT_PIECES: [usize; 2] = [512, QT_LEN];
/// Rounds of `quiet_third` unless `SYMMEM_LITMUS_QUIET_ROUNDS` says (the socket
/// transport's early quiet showed at rounds 93 to 279 of 300 with 4 threads).
const QT_ROUNDS: u64 = 300;
/// Rounds of `test_fence` per thread, and elements per payload.
const TF_ROUNDS: u64 = 16;
const TF_LEN: usize = 512;
/// Adds per thread to each PE's counter in `atomics`.
const AT_ADDS: u64 = 60;
/// Rounds of `stream_free`, and elements per allocation.
const SF_ROUNDS: u64 = 6;
const SF_LEN: usize = 64 << 10;

/// A litmus shape, given the threads per PE.
type Shape = fn(&Runtime, usize) -> Outcome;

/// Runs every litmus shape.
pub fn litmus(rt: &Runtime) -> Outcome {
    finish(rt, "litmus", litmus_inner(rt))
}

fn litmus_inner(rt: &Runtime) -> Outcome {
    let threads = threads()?;
    let shapes: [(&str, Shape); 6] = [
        ("mp", mp),
        ("quiet_third", quiet_third),
        ("test_fence", test_fence),
        ("computing", computing),
        ("atomics", atomics),
        ("stream_free", stream_free),
    ];
    let chosen = chosen_shapes(&shapes.map(|(name, _)| name))?;
    for (name, shape) in shapes {
        if !chosen.contains(&name) {
            continue;
        }
        let started = Instant::now();
        shape(rt, threads).map_err(|e| format!("{name} ({threads} threads per PE): {e}"))?;
        rt.barrier_all().or_fail()?;
        println!(
            "PE {}: litmus {name} with {threads} threads ok in {} ms",
            rt.my_pe(),
            started.elapsed().as_millis()
        );
    }
    Ok(())
}

/// `SYMMEM_LITMUS_SHAPES`: the shapes to run, comma-separated (all of `known` when unset).
fn chosen_shapes<'a>(known: &[&'a str]) -> Result<Vec<&'a str>, String> {
    let Ok(list) = std::env::var("SYMMEM_LITMUS_SHAPES") else {
        return Ok(known.to_vec());
    };
    list.split(',')
        .map(|name| {
            known
                .iter()
                .find(|k| **k == name.trim())
                .copied()
                .ok_or_else(|| {
                    format!("SYMMEM_LITMUS_SHAPES names {name:?}; the shapes are {known:?}")
                })
        })
        .collect()
}

/// `SYMMEM_LITMUS_THREADS`: threads per PE, 1 to 16.
fn threads() -> Result<usize, String> {
    match std::env::var("SYMMEM_LITMUS_THREADS") {
        Err(_) => Ok(1),
        Ok(v) => v
            .parse()
            .ok()
            .filter(|t| (1..=16).contains(t))
            .ok_or_else(|| format!("SYMMEM_LITMUS_THREADS={v:?} is not 1 to 16")),
    }
}

/// Runs `f(thread)` on `threads` threads of this PE; the first failure, naming its thread.
fn on_threads(threads: usize, f: impl Fn(usize) -> Outcome + Sync) -> Outcome {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn({
                    let f = &f;
                    move || f(t)
                })
            })
            .collect();
        let mut first = Ok(());
        for (t, h) in handles.into_iter().enumerate() {
            let r = h
                .join()
                .unwrap_or_else(|_| Err("panicked".to_string()))
                .map_err(|e| format!("thread {t}: {e}"));
            if first.is_ok() {
                first = r;
            }
        }
        first
    })
}

/// Spins until `ready()` (a check that may call into symmem), for at most [`DEADLINE`];
/// yields between checks so that 4 PEs of several threads share 2 cores.
fn spin_until(
    what: impl Fn() -> String,
    mut ready: impl FnMut() -> Result<bool, String>,
) -> Outcome {
    let started = Instant::now();
    let mut spins = 0u32;
    while !ready()? {
        if started.elapsed() > DEADLINE {
            return Err(format!("waited {DEADLINE:?} for {}", what()));
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) {
            std::thread::sleep(Duration::from_micros(50));
        } else {
            std::thread::yield_now();
        }
    }
    Ok(())
}

/// The buffers of one shape's threads, allocated zeroed, once every PE has them: a
/// payload area of `len` elements, and a flag and an acknowledgement counter per thread.
fn lanes(rt: &Runtime, len: usize, threads: usize) -> Result<(Buf, Buf, Buf), String> {
    let data = rt.calloc::<u64>(len).or_fail()?;
    let flag = rt.calloc::<u64>(threads).or_fail()?;
    let ack = rt.calloc::<u64>(threads).or_fail()?;
    rt.barrier_all().or_fail()?;
    Ok((data, flag, ack))
}

/// Frees `bufs` once every PE is done with them.
fn free_all<const N: usize>(rt: &Runtime, bufs: [Buf; N]) -> Outcome {
    rt.barrier_all().or_fail()?;
    for buf in bufs {
        rt.free(buf).or_fail()?;
    }
    Ok(())
}

/// The value of element `i` of the payload `from` sends to `to` in `round` on `thread`.
fn payload(from: usize, to: usize, thread: usize, round: u64, i: usize) -> u64 {
    key(&[from as u64, to as u64, thread as u64, round, i as u64])
}

/// Checks that `got` is the payload of (`from`, `to`, `thread`, `round`).
fn check_payload(got: &[u64], from: usize, to: usize, thread: usize, round: u64) -> Outcome {
    if let Some((i, &v)) = got
        .iter()
        .enumerate()
        .find(|&(i, &v)| v != payload(from, to, thread, round, i))
    {
        let stale = (1..round)
            .rev()
            .find(|&r| payload(from, to, thread, r, i) == v);
        return Err(format!(
            "round {round}: element {i} of {} from PE {from} is {v:#x}, {}",
            got.len(),
            match stale {
                Some(r) => format!("round {r}'s value (stale)"),
                None if v == 0 => "never written".to_string(),
                None => "no round's value (torn or misplaced)".to_string(),
            }
        ));
    }
    Ok(())
}

/// Message passing around the ring, each thread to the same thread of the right
/// neighbour, published five ways by round.
fn mp(rt: &Runtime, threads: usize) -> Outcome {
    let (me, _, right, left) = neighbours(rt);
    let span = *MP_LENS.iter().max().expect("lengths");
    let (data, flag, ack) = lanes(rt, span * threads, threads)?;
    on_threads(threads, |t| {
        let mut got = vec![0u64; span];
        for round in 1..=MP_ROUNDS {
            let len = MP_LENS[round as usize % MP_LENS.len()];
            let dst = data.at(t * span);
            let src: Vec<u64> = (0..len).map(|i| payload(me, right, t, round, i)).collect();
            // The consumer has checked the previous round: the payload may be rewritten.
            rt.wait_until(ack.at(t), Cmp::Ge, round - 1).or_fail()?;
            match round % 5 {
                0 => {
                    rt.put(dst, &src, right).or_fail()?;
                    rt.fence().or_fail()?;
                    rt.p(flag.at(t), round, right).or_fail()?;
                }
                1 => {
                    rt.put_nbi(dst, &src, right).or_fail()?;
                    rt.quiet().or_fail()?;
                    rt.atomic_set(flag.at(t), round, right).or_fail()?;
                }
                2 => rt
                    .put_signal(dst, &src, flag.at(t), round, SignalOp::Set, right)
                    .or_fail()?,
                3 => rt
                    .put_signal_nbi(dst, &src, flag.at(t), 1, SignalOp::Add, right)
                    .or_fail()?,
                _ => {
                    let half = len.div_ceil(2);
                    rt.put_nbi(dst, &src[..half], right).or_fail()?;
                    if half < len {
                        rt.put_nbi(data.at(t * span + half), &src[half..], right)
                            .or_fail()?;
                    }
                    rt.fence().or_fail()?;
                    rt.atomic_add(flag.at(t), 1, right).or_fail()?;
                }
            }
            // Consumer of the left neighbour's thread t.
            let seen = if round % 2 == 0 {
                rt.signal_wait_until(flag.at(t), Cmp::Ge, round).or_fail()?
            } else {
                rt.wait_until(flag.at(t), Cmp::Ge, round).or_fail()?
            };
            check_eq!(seen, round, "round {round}: the flag from PE {left}");
            rt.read_local(data.at(t * span), &mut got[..len])
                .or_fail()?;
            check_payload(&got[..len], left, me, t, round)?;
            rt.atomic_add(ack.at(t), 1, left).or_fail()?;
        }
        // Every put_signal_nbi is complete before the buffers go.
        rt.quiet().or_fail()
    })?;
    free_all(rt, [data, flag, ack])
}

/// The writer, target and observer of `quiet_third`: PE 0; a PE of another node (any
/// other PE on one node); a third PE, on the target's node where there is one.
fn third_parties(rt: &Runtime) -> Result<Option<(usize, usize, usize)>, String> {
    let n = rt.n_pes();
    if n < 3 {
        return Ok(None);
    }
    let node = |pe: usize| rt.node_of(pe).map(str::to_owned).or_fail();
    let writer = 0;
    let mut target = 1;
    for pe in 1..n {
        if node(pe)? != node(writer)? {
            target = pe;
            break;
        }
    }
    let others: Vec<usize> = (1..n).filter(|&pe| pe != target).collect();
    let mut observer = others[0];
    for &pe in &others {
        if node(pe)? == node(target)? {
            observer = pe;
            break;
        }
    }
    Ok(Some((writer, target, observer)))
}

/// Quiet seen by a third PE, with the writer's other threads quieting and fencing.
fn quiet_third(rt: &Runtime, threads: usize) -> Outcome {
    let me = rt.my_pe();
    let Some((writer, target, observer)) = third_parties(rt)? else {
        println!("PE {me}: litmus quiet_third needs 3 PEs: skipped");
        return Ok(());
    };
    let data = rt.calloc::<u64>(QT_LEN).or_fail()?;
    // The writer's other threads' own puts, 64 elements each.
    let scratch = rt.calloc::<u64>(64 * threads).or_fail()?;
    let flag = rt.calloc::<u64>(1).or_fail()?;
    let ack = rt.calloc::<u64>(1).or_fail()?;
    rt.barrier_all().or_fail()?;
    let value = |round: u64, i: usize| round << 32 | i as u64;
    let rounds = match std::env::var("SYMMEM_LITMUS_QUIET_ROUNDS") {
        Err(_) => QT_ROUNDS,
        Ok(v) => v
            .parse()
            .map_err(|_| format!("SYMMEM_LITMUS_QUIET_ROUNDS={v:?} is not a number"))?,
    };
    if me == writer {
        let done = AtomicBool::new(false);
        on_threads(threads, |t| {
            if t > 0 {
                // Puts of its own to the target, then quiet and fence, until the rounds end.
                let mut k = 0u64;
                while !done.load(Ordering::Acquire) {
                    k += 1;
                    rt.put_nbi(scratch.at(64 * t), &[k; 64], target).or_fail()?;
                    rt.quiet().or_fail()?;
                    rt.fence().or_fail()?;
                }
                return Ok(());
            }
            let result = (|| {
                let mut src = vec![0u64; QT_LEN];
                for round in 1..=rounds {
                    for (i, v) in src.iter_mut().enumerate() {
                        *v = value(round, i);
                    }
                    let piece = QT_PIECES[round as usize % QT_PIECES.len()];
                    for (k, part) in src.chunks(piece).enumerate() {
                        rt.put_nbi(data.at(k * piece), part, target).or_fail()?;
                    }
                    rt.quiet().or_fail()?;
                    rt.p(flag.at(0), round, observer).or_fail()?;
                    rt.wait_until(ack.at(0), Cmp::Ge, round).or_fail()?;
                }
                Ok(())
            })();
            done.store(true, Ordering::Release);
            result
        })?;
    } else if me == observer {
        let mut got = vec![0u64; QT_LEN];
        for round in 1..=rounds {
            rt.wait_until(flag.at(0), Cmp::Ge, round).or_fail()?;
            rt.get(data.at(0), &mut got, target).or_fail()?;
            if let Some((i, &v)) = got.iter().enumerate().find(|&(i, &v)| v != value(round, i)) {
                let wrong = got
                    .iter()
                    .enumerate()
                    .filter(|&(i, &v)| v != value(round, i))
                    .count();
                return Err(format!(
                    "round {round}: element {i} on PE {target} is {v:#x} after PE {writer}'s quiet and flag, expected {:#x} ({wrong} of {QT_LEN} elements not this round's)",
                    value(round, i)
                ));
            }
            rt.atomic_add(ack.at(0), 1, writer).or_fail()?;
        }
    }
    free_all(rt, [data, scratch, flag, ack])
}

/// Waits until this PE's `word` is at least `value` by `test` + `fence` alone, as
/// OpenSHMEM programs do: no wait call, no sleep (a yield between tests, so that 4 PEs
/// share 2 cores), failing after [`DEADLINE`] naming `what`.
fn by_test_and_fence(rt: &Runtime, word: SymRef<'_, u64>, value: u64, what: &str) -> Outcome {
    let started = Instant::now();
    while !rt.test(word, Cmp::Ge, value).or_fail()? {
        rt.fence().or_fail()?;
        if started.elapsed() > DEADLINE {
            return Err(format!("waited {DEADLINE:?} by test + fence for {what}"));
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// A target that waits only by `test` + `fence` and issues nothing of its own but
/// acknowledgements (each PE of the first half of the job sends to one of the second),
/// each thread to the same thread of its peer.
fn test_fence(rt: &Runtime, threads: usize) -> Outcome {
    let (me, n, _, _) = neighbours(rt);
    let (data, flag, ack) = lanes(rt, TF_LEN * threads, threads)?;
    // Producers are the first half of the PEs, each sending to its peer in the second
    // half: on simulated nodes, a PE of another node.
    let half = n / 2;
    let consumer = (me < half).then_some(me + half);
    let producer = (half..2 * half).contains(&me).then(|| me - half);
    on_threads(threads, |t| {
        let mut got = vec![0u64; TF_LEN];
        let dst = data.at(t * TF_LEN);
        for round in 1..=TF_ROUNDS {
            if let Some(to) = consumer {
                let src: Vec<u64> = (0..TF_LEN).map(|i| payload(me, to, t, round, i)).collect();
                let what = format!("round {}'s acknowledgement from PE {to}", round - 1);
                by_test_and_fence(rt, ack.at(t), round - 1, &what)?;
                if round % 2 == 0 {
                    rt.put_signal(dst, &src, flag.at(t), round, SignalOp::Set, to)
                        .or_fail()?;
                } else {
                    rt.put(dst, &src, to).or_fail()?;
                    rt.fence().or_fail()?;
                    rt.p(flag.at(t), round, to).or_fail()?;
                }
            } else if let Some(from) = producer {
                let what = format!("round {round}'s flag from PE {from}");
                by_test_and_fence(rt, flag.at(t), round, &what)?;
                rt.read_local(dst, &mut got).or_fail()?;
                check_payload(&got, from, me, t, round)?;
                rt.atomic_add(ack.at(t), 1, from).or_fail()?;
            }
        }
        Ok(())
    })?;
    free_all(rt, [data, flag, ack])
}

/// A target that computes without calling in while its left neighbour's get and
/// put_signal need its progress, each thread to the same thread of the right neighbour.
fn computing(rt: &Runtime, threads: usize) -> Outcome {
    let (me, _, right, left) = neighbours(rt);
    let (data, flag, ack) = lanes(rt, TF_LEN * threads, threads)?;
    on_threads(threads, |t| {
        let mut got = vec![0u64; TF_LEN];
        let dst = data.at(t * TF_LEN);
        let word = rt.local_atomic(flag.at(t)).or_fail()?;
        for round in 1..=TF_ROUNDS {
            let src: Vec<u64> = (0..TF_LEN)
                .map(|i| payload(me, right, t, round, i))
                .collect();
            // Producer: the consumer acknowledged the previous round.
            rt.wait_until(ack.at(t), Cmp::Ge, round - 1).or_fail()?;
            // A get the right neighbour serves while it computes.
            let old = rt.g(dst, right).or_fail()?;
            let want = if round == 1 {
                0
            } else {
                payload(me, right, t, round - 1, 0)
            };
            check_eq!(
                old,
                want,
                "round {round}: element 0 read back from PE {right}"
            );
            rt.put_signal(dst, &src, flag.at(t), round, SignalOp::Set, right)
                .or_fail()?;
            // Consumer: no call into symmem until the flag is seen, so peers' operations
            // must complete without this PE's help.
            spin_until(
                || format!("round {round}'s flag from PE {left} (computing, not calling in)"),
                || Ok(word.load(Ordering::Acquire) >= round),
            )?;
            rt.read_local(dst, &mut got).or_fail()?;
            check_payload(&got, left, me, t, round)?;
            rt.atomic_add(ack.at(t), 1, left).or_fail()?;
        }
        Ok(())
    })?;
    free_all(rt, [data, flag, ack])
}

/// Adds from every thread of every PE to a counter on every PE.
fn atomics(rt: &Runtime, threads: usize) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let total = rt.calloc::<u64>(1).or_fail()?;
    rt.barrier_all().or_fail()?;
    on_threads(threads, |t| {
        let mut last = vec![None::<u64>; n];
        for k in 0..AT_ADDS {
            for step in 0..n {
                let pe = (me + t + step) % n;
                if (k + step as u64).is_multiple_of(2) {
                    let old = rt.atomic_fetch_add(total.at(0), 1, pe).or_fail()?;
                    if let Some(prev) = last[pe] {
                        check!(
                            old > prev,
                            "fetch_add {k} on PE {pe} returned {old} after {prev}"
                        );
                    }
                    last[pe] = Some(old);
                } else {
                    rt.atomic_add(total.at(0), 1, pe).or_fail()?;
                }
            }
        }
        Ok(())
    })?;
    rt.barrier_all().or_fail()?;
    let got = rt.g(total.at(0), me).or_fail()?;
    check_eq!(
        got,
        (n * threads) as u64 * AT_ADDS,
        "PE {me}'s counter after every PE's {threads} threads added {AT_ADDS} each"
    );
    free_all(rt, [total])
}

/// Stream puts and put_signals to the right neighbour, the allocation freed at once and
/// allocated again, zeroed: nothing of the stream's lands in the new allocation.
fn stream_free(rt: &Runtime, _threads: usize) -> Outcome {
    let (me, _, right, left) = if rt.is_gpu() {
        // A GPU PE's stream operations reach its own node's PEs: a ring among them.
        let local = rt.local_pes();
        let i = local
            .iter()
            .position(|&pe| pe == rt.my_pe())
            .ok_or("not in its own node")?;
        let k = local.len();
        (rt.my_pe(), k, local[(i + 1) % k], local[(i + k - 1) % k])
    } else {
        neighbours(rt)
    };
    let stream = rt.create_stream().or_fail()?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    for round in 1..=SF_ROUNDS {
        let buf = rt.alloc::<u64>(2 * SF_LEN).or_fail()?;
        let src: Vec<u64> = (0..SF_LEN)
            .map(|i| payload(me, right, 0, round, i))
            .collect();
        rt.put(buf.at(SF_LEN), &src, me).or_fail()?;
        rt.put_on_stream(buf.at(0), buf.at(SF_LEN), SF_LEN / 2, right, &stream)
            .or_fail()?;
        rt.put_signal_on_stream(
            buf.at(SF_LEN / 2),
            buf.at(SF_LEN + SF_LEN / 2),
            SF_LEN / 2,
            sig.at(0),
            round,
            SignalOp::Set,
            right,
            &stream,
        )
        .or_fail()?;
        // The left neighbour's stream signalled: its data is here.
        rt.signal_wait_until_on_stream(sig.at(0), Cmp::Ge, round, &stream)
            .or_fail()?;
        stream.synchronize().or_fail()?;
        let mut got = vec![0u64; SF_LEN];
        rt.read_local(buf.at(0), &mut got).or_fail()?;
        check_payload(&got, left, me, 0, round)?;
        // Freed with the next round's stream work possibly queued behind it on a GPU.
        rt.free(buf).or_fail()?;
        let fresh = rt.calloc::<u64>(2 * SF_LEN).or_fail()?;
        rt.barrier_all().or_fail()?;
        let mut seen = vec![0u64; 2 * SF_LEN];
        rt.read_local(fresh.at(0), &mut seen).or_fail()?;
        if let Some((i, &v)) = seen.iter().enumerate().find(|&(_, &v)| v != 0) {
            return Err(format!(
                "round {round}: element {i} of a fresh zeroed allocation is {v:#x} (a stream copy landed after free)"
            ));
        }
        rt.free(fresh).or_fail()?;
    }
    rt.free(sig).or_fail()
}
