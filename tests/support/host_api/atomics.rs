//! Atomics on u32, u64, i32, i64.

use std::fmt::Debug;

use symmem::{Runtime, SymRef};

use super::{check, check_eq, finish, key, neighbours, OrFail, Outcome, TInt};

/// One atomic operation of a per-source program, with its operands.
#[derive(Clone, Copy, Debug)]
pub(super) enum Amo<T> {
    Set(T),
    Fetch,
    Swap(T),
    CasFail(T),
    CasOk(T),
    FetchAdd(T),
    Add(T),
    FetchInc,
    Inc,
    FetchAnd(T),
    And(T),
    FetchOr(T),
    Or(T),
    FetchXor(T),
    Xor(T),
}

/// The program PE `p` runs on its own slot of PE `t`: every atomic, with operands that
/// cover high bits and (for signed types) negative values.
pub(super) fn amo_program<T: TInt>(p: usize, t: usize) -> Vec<Amo<T>> {
    let r = |k: u64| T::of(key(&[6, p as u64, t as u64, k]) as i64);
    vec![
        Amo::Set(r(0)),
        Amo::Fetch,
        Amo::Swap(r(1)),
        Amo::CasFail(r(2)),
        Amo::CasOk(r(3)),
        Amo::FetchAdd(r(4)),
        Amo::Add(T::of(-7)),
        Amo::FetchInc,
        Amo::Inc,
        Amo::FetchAnd(r(5).bor(r(6))),
        Amo::FetchOr(r(7)),
        Amo::And(r(8).bor(r(9))),
        Amo::Or(r(10).band(r(11))),
        Amo::FetchXor(r(12)),
        Amo::Xor(r(13)),
        Amo::FetchAdd(T::of(-123_456)),
        Amo::Fetch,
    ]
}

/// The model: (value the operation must return, if it returns one; the new value).
fn amo_model<T: TInt>(cur: T, op: Amo<T>) -> (Option<T>, T) {
    match op {
        Amo::Set(v) => (None, v),
        Amo::Fetch => (Some(cur), cur),
        Amo::Swap(v) | Amo::CasOk(v) => (Some(cur), v),
        Amo::CasFail(_) => (Some(cur), cur),
        Amo::FetchAdd(d) => (Some(cur), cur.wadd(d)),
        Amo::Add(d) => (None, cur.wadd(d)),
        Amo::FetchInc => (Some(cur), cur.plus(1)),
        Amo::Inc => (None, cur.plus(1)),
        Amo::FetchAnd(m) => (Some(cur), cur.band(m)),
        Amo::And(m) => (None, cur.band(m)),
        Amo::FetchOr(m) => (Some(cur), cur.bor(m)),
        Amo::Or(m) => (None, cur.bor(m)),
        Amo::FetchXor(m) => (Some(cur), cur.bxor(m)),
        Amo::Xor(m) => (None, cur.bxor(m)),
    }
}

/// Runs one operation; `cur` is the slot's current value (for the compare-and-swaps).
pub(super) fn amo_run<T: TInt>(
    rt: &Runtime,
    r: SymRef<'_, T>,
    pe: usize,
    cur: T,
    op: Amo<T>,
) -> symmem::Result<Option<T>> {
    Ok(match op {
        Amo::Set(v) => rt.atomic_set(r, v, pe).map(|()| None)?,
        Amo::Fetch => Some(rt.atomic_fetch(r, pe)?),
        Amo::Swap(v) => Some(rt.atomic_swap(r, v, pe)?),
        Amo::CasFail(v) => Some(rt.atomic_compare_swap(r, cur.plus(1), v, pe)?),
        Amo::CasOk(v) => Some(rt.atomic_compare_swap(r, cur, v, pe)?),
        Amo::FetchAdd(d) => Some(rt.atomic_fetch_add(r, d, pe)?),
        Amo::Add(d) => rt.atomic_add(r, d, pe).map(|()| None)?,
        Amo::FetchInc => Some(rt.atomic_fetch_inc(r, pe)?),
        Amo::Inc => rt.atomic_inc(r, pe).map(|()| None)?,
        Amo::FetchAnd(m) => Some(rt.atomic_fetch_and(r, m, pe)?),
        Amo::And(m) => rt.atomic_and(r, m, pe).map(|()| None)?,
        Amo::FetchOr(m) => Some(rt.atomic_fetch_or(r, m, pe)?),
        Amo::Or(m) => rt.atomic_or(r, m, pe).map(|()| None)?,
        Amo::FetchXor(m) => Some(rt.atomic_fetch_xor(r, m, pe)?),
        Amo::Xor(m) => rt.atomic_xor(r, m, pe).map(|()| None)?,
    })
}

const A_ADD: usize = 0;
const A_INC: usize = 1;
const A_AND: usize = 2;
const A_OR: usize = 3;
const A_XOR: usize = 4;
const A_CAS: usize = 5;
const A_SRC: usize = 6;
const A_REPS: u64 = 200;
const A_CAS_REPS: u64 = 100;

fn a_amount<T: TInt>(p: usize, t: usize, k: u64) -> T {
    T::of(key(&[7, p as u64, t as u64, k]) as i64)
}

fn a_xor<T: TInt>(p: usize, t: usize, k: u64) -> T {
    T::of(key(&[8, p as u64, t as u64, k]) as i64)
}

/// A bit of its own for every (source, target) pair with up to 4 PEs, plus a high bit.
fn a_bit<T: TInt>(p: usize, t: usize) -> T {
    T::of(((1u64 << ((p + 4 * t) % 32)) | (1u64 << (40 + p))) as i64)
}

/// What PE `t`'s slots must hold when every PE has run its part.
fn a_expected<T: TInt>(n: usize, t: usize) -> Vec<T> {
    let mut want = vec![T::of(0); A_SRC + n];
    want[A_AND] = T::of(-1);
    for p in 0..n {
        for k in 0..A_REPS {
            want[A_ADD] = want[A_ADD].wadd(a_amount(p, t, k));
            want[A_XOR] = want[A_XOR].bxor(a_xor(p, t, k));
        }
        want[A_AND] = want[A_AND].band(a_bit::<T>(p, t).bnot());
        want[A_OR] = want[A_OR].bor(a_bit(p, t));
        want[A_SRC + p] = amo_program::<T>(p, t)
            .into_iter()
            .fold(T::of(0), |cur, op| amo_model(cur, op).1);
    }
    want[A_INC] = T::of((n as u64 * A_REPS) as i64);
    want[A_CAS] = T::of((n as u64 * A_CAS_REPS) as i64);
    want
}

/// Every PE applies every atomic to every PE (itself included): contended adds of
/// distinct amounts, incs, ands and ors of distinct bits, xors, compare-and-swap increment
/// loops, and a per-source program whose every returned value is known exactly.
pub fn atomics(rt: &Runtime) -> Outcome {
    let all = || -> Outcome {
        atomics_t::<u32>(rt)?;
        atomics_t::<u64>(rt)?;
        atomics_t::<i32>(rt)?;
        atomics_t::<i64>(rt)
    };
    finish(rt, "atomics", all())
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn atomics_t<T: TInt>(rt: &Runtime) -> Outcome {
    let (me, n, right, _) = neighbours(rt);
    let ty = T::NAME;
    let slots = rt.calloc::<T>(A_SRC + n).or_fail()?;
    rt.atomic_set(slots.at(A_AND), T::of(-1), me).or_fail()?;
    rt.barrier_all().or_fail()?;
    // Every PE walks the targets in the same order, so they contend for the same words.
    for r in 0..A_REPS {
        for t in 0..n {
            let amt = a_amount::<T>(me, t, r);
            let x = a_xor::<T>(me, t, r);
            if r % 2 == 0 {
                rt.atomic_fetch_add(slots.at(A_ADD), amt, t).or_fail()?;
                rt.atomic_inc(slots.at(A_INC), t).or_fail()?;
                rt.atomic_fetch_xor(slots.at(A_XOR), x, t).or_fail()?;
            } else {
                rt.atomic_add(slots.at(A_ADD), amt, t).or_fail()?;
                rt.atomic_fetch_inc(slots.at(A_INC), t).or_fail()?;
                rt.atomic_xor(slots.at(A_XOR), x, t).or_fail()?;
            }
        }
    }
    for t in 0..n {
        let bit = a_bit::<T>(me, t);
        if me % 2 == 0 {
            rt.atomic_and(slots.at(A_AND), bit.bnot(), t).or_fail()?;
            let old = rt.atomic_fetch_or(slots.at(A_OR), bit, t).or_fail()?;
            check!(
                old.band(bit) == T::of(0),
                "{ty}: my OR bit was set before me"
            );
        } else {
            let old = rt
                .atomic_fetch_and(slots.at(A_AND), bit.bnot(), t)
                .or_fail()?;
            check!(
                old.band(bit) == bit,
                "{ty}: my AND bit was cleared before me"
            );
            rt.atomic_or(slots.at(A_OR), bit, t).or_fail()?;
        }
    }
    // Increment through compare-and-swap: a failed CAS returns the current value, which
    // is the next attempt's condition.
    let mut cas_failures = 0u64;
    for _ in 0..A_CAS_REPS {
        for t in 0..n {
            let mut cur = rt.atomic_fetch(slots.at(A_CAS), t).or_fail()?;
            loop {
                let old = rt
                    .atomic_compare_swap(slots.at(A_CAS), cur, cur.plus(1), t)
                    .or_fail()?;
                if old == cur {
                    break;
                }
                cas_failures += 1;
                cur = old;
            }
        }
    }
    // The per-source program: this PE is the only writer of its slot on each target.
    for t in 0..n {
        let mut cur = T::of(0);
        for (i, op) in amo_program::<T>(me, t).into_iter().enumerate() {
            let (want, next) = amo_model(cur, op);
            let got = amo_run(rt, slots.at(A_SRC + me), t, cur, op).or_fail()?;
            if want.is_some() {
                check_eq!(got, want, "{ty}: step {i} ({op:?}) on PE {t}");
            }
            cur = next;
        }
    }
    rt.barrier_all().or_fail()?;
    for pe in [me, right] {
        let want = a_expected::<T>(n, pe);
        for (i, w) in want.iter().enumerate() {
            let got = rt.atomic_fetch(slots.at(i), pe).or_fail()?;
            check_eq!(got, *w, "{ty}: slot {i} on PE {pe}");
        }
    }
    let mut local = vec![T::of(0); A_SRC + n];
    rt.read_local(slots.at(0), &mut local).or_fail()?;
    check_eq!(
        local,
        a_expected::<T>(n, me),
        "{ty}: read_local of the slots"
    );
    // A failing compare-and-swap leaves the value alone.
    let v = rt.atomic_fetch(slots.at(A_CAS), right).or_fail()?;
    let old = rt
        .atomic_compare_swap(slots.at(A_CAS), v.plus(3), T::of(9), right)
        .or_fail()?;
    check_eq!(old, v, "{ty}: failed compare_swap result");
    rt.barrier_all().or_fail()?;
    check_eq!(
        rt.atomic_fetch(slots.at(A_CAS), me).or_fail()?,
        T::of((n as u64 * A_CAS_REPS) as i64),
        "{ty}: after the failed compare_swap"
    );
    rt.barrier_all().or_fail()?;
    println!("PE {me}: {ty} compare_swap increments retried {cas_failures} times");
    rt.free(slots).or_fail()
}
