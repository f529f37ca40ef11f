//! wait_until and test with every Cmp on u32, u64, i32, i64, and their _all, _any, _some
//! and _vector forms with exclude masks.

use symmem::{Cmp, Runtime, SymBuf};

use super::signals::{check_sequence, cmp_sequence, marker};
use super::{check, check_eq, finish, neighbours, OrFail, Outcome, TInt};

// ---------------------------------------------------------------------------------------
// wait_until and test: every Cmp on u32, u64, i32, i64.

/// For each type, pivot and Cmp: `test` agrees with the comparison on every value of the
/// sequence (checked locally, deterministic), then the left neighbour drives this PE's
/// ivar through the sequence with atomic_set, p, put and atomic_swap, and wait_until must
/// return exactly the final value, with the data the neighbour put before it visible.
pub fn wait_test(rt: &Runtime) -> Outcome {
    let all = || -> Outcome {
        wait_test_t::<u32>(rt)?;
        wait_test_t::<u64>(rt)?;
        wait_test_t::<i32>(rt)?;
        wait_test_t::<i64>(rt)
    };
    finish(rt, "wait_test", all())
}

fn wait_test_t<T: TInt>(rt: &Runtime) -> Outcome {
    let (me, _, right, left) = neighbours(rt);
    let ivars = rt.calloc::<T>(Cmp::ALL.len()).or_fail()?;
    let data = rt.calloc::<u64>(Cmp::ALL.len()).or_fail()?;
    let ty = T::NAME;
    for (round, v) in T::pivots().into_iter().enumerate() {
        let round = round as u64 + 1;
        for (c, &cmp) in Cmp::ALL.iter().enumerate() {
            let (preset, steps) = cmp_sequence(cmp, v);
            check_sequence(cmp, v, preset, &steps)?;
            for &x in std::iter::once(&preset).chain(&steps) {
                rt.atomic_set(ivars.at(c), x, me).or_fail()?;
                let holds = rt.test(ivars.at(c), cmp, v).or_fail()?;
                check_eq!(holds, cmp.holds(x, v), "{ty}: test({x:?} {cmp:?} {v:?})");
            }
            rt.p(ivars.at(c), preset, me).or_fail()?;
        }
        rt.barrier_all().or_fail()?;
        for (c, &cmp) in Cmp::ALL.iter().enumerate() {
            let (preset, steps) = cmp_sequence(cmp, v);
            let mut prev = preset;
            for (k, &x) in steps.iter().enumerate() {
                if k + 1 == steps.len() {
                    rt.put(data.at(c), &[marker(me, round, c)], right)
                        .or_fail()?;
                    if c % 2 == 0 {
                        rt.fence().or_fail()?;
                    } else {
                        rt.quiet().or_fail()?;
                    }
                }
                match (c + k) % 4 {
                    0 => rt.atomic_set(ivars.at(c), x, right).or_fail()?,
                    1 => rt.p(ivars.at(c), x, right).or_fail()?,
                    2 => rt.put(ivars.at(c), &[x], right).or_fail()?,
                    _ => {
                        let old = rt.atomic_swap(ivars.at(c), x, right).or_fail()?;
                        check_eq!(old, prev, "{ty}: atomic_swap returned");
                    }
                }
                prev = x;
            }
        }
        for (c, &cmp) in Cmp::ALL.iter().enumerate() {
            let (_, steps) = cmp_sequence(cmp, v);
            let last = *steps.last().expect("non-empty");
            let seen = rt.wait_until(ivars.at(c), cmp, v).or_fail()?;
            check_eq!(seen, last, "{ty}: wait_until({cmp:?} {v:?})");
            check_eq!(
                rt.g(data.at(c), me).or_fail()?,
                marker(left, round, c),
                "{ty}: data put before the update ({cmp:?})"
            );
            check!(
                rt.test(ivars.at(c), cmp, v).or_fail()?,
                "{ty}: test after the wait"
            );
            let again = rt.wait_until(ivars.at(c), cmp, v).or_fail()?;
            check_eq!(again, last, "{ty}: second wait_until({cmp:?})");
        }
        rt.barrier_all().or_fail()?;
    }
    rt.free(ivars).or_fail()?;
    rt.free(data).or_fail()
}

// ---------------------------------------------------------------------------------------
// wait_until_all/any/some, their _vector forms, test_all/any/some(+_vector), exclude masks.

const K: usize = 8;

fn mask(excluded: &[usize]) -> Vec<bool> {
    (0..K).map(|i| excluded.contains(&i)).collect()
}

fn only(included: &[usize]) -> Vec<bool> {
    (0..K).map(|i| !included.contains(&i)).collect()
}

/// Checks every test_* form, for every Cmp, several pivots and several masks, against the
/// known contents `cur` of this PE's ivars.
fn check_tests<T: TInt>(rt: &Runtime, ivars: &SymBuf<T>, cur: &[T]) -> Outcome {
    let ty = T::NAME;
    let masks: Vec<Option<Vec<bool>>> = vec![
        None,
        Some(mask(&[])),
        Some(mask(&[0, 2, 4, 6])),
        Some(mask(&[0, 1, 2, 3])),
        Some(mask(&[0, 1, 2, 3, 4, 5, 6, 7])),
    ];
    let base = cur[0];
    let pivots = [base, base.plus(1), base.plus(-5), base.plus(2)];
    let vector: Vec<T> = cur
        .iter()
        .enumerate()
        .map(|(i, &x)| x.plus((i % 3) as i64 - 1))
        .collect();
    for &cmp in &Cmp::ALL {
        for m in &masks {
            let ex = m.as_deref();
            let inc = |i: usize| ex.is_none_or(|e| !e[i]);
            let holding = |vals: &dyn Fn(usize) -> T| -> Vec<usize> {
                (0..K)
                    .filter(|&i| inc(i) && cmp.holds(cur[i], vals(i)))
                    .collect()
            };
            let included = (0..K).filter(|&i| inc(i)).count();
            for &p in &pivots {
                let want = holding(&|_| p);
                let all = rt.test_all(ivars, ex, cmp, p).or_fail()?;
                check_eq!(
                    all,
                    want.len() == included,
                    "{ty}: test_all({cmp:?} {p:?}, {ex:?})"
                );
                let any = rt.test_any(ivars, ex, cmp, p).or_fail()?;
                check!(
                    any.map_or(want.is_empty(), |i| want.contains(&i)),
                    "{ty}: test_any({cmp:?} {p:?}, {ex:?}) = {any:?}, holding {want:?}"
                );
                // Fair: as many calls as elements hold return each of them once.
                let mut turns = Vec::new();
                for _ in 0..want.len() {
                    turns.extend(rt.test_any(ivars, ex, cmp, p).or_fail()?);
                }
                turns.sort_unstable();
                check_eq!(
                    turns,
                    want,
                    "{ty}: {} calls of test_any({cmp:?} {p:?}, {ex:?})",
                    want.len()
                );
                let some = rt.test_some(ivars, ex, cmp, p).or_fail()?;
                check_eq!(some, want, "{ty}: test_some({cmp:?} {p:?}, {ex:?})");
            }
            let want = holding(&|i| vector[i]);
            let all = rt.test_all_vector(ivars, ex, cmp, &vector).or_fail()?;
            check_eq!(
                all,
                want.len() == included,
                "{ty}: test_all_vector({cmp:?}, {ex:?})"
            );
            let any = rt.test_any_vector(ivars, ex, cmp, &vector).or_fail()?;
            check!(
                any.map_or(want.is_empty(), |i| want.contains(&i)),
                "{ty}: test_any_vector({cmp:?}, {ex:?}) = {any:?}, holding {want:?}"
            );
            let some = rt.test_some_vector(ivars, ex, cmp, &vector).or_fail()?;
            check_eq!(some, want, "{ty}: test_some_vector({cmp:?}, {ex:?})");
        }
    }
    Ok(())
}

/// The left neighbour changes this PE's ivars in steps; after each step it waits for this
/// PE's ack, so each wait has exactly one right answer.
pub fn wait_arrays(rt: &Runtime) -> Outcome {
    let all = || -> Outcome {
        wait_arrays_t::<u32>(rt)?;
        wait_arrays_t::<u64>(rt)?;
        wait_arrays_t::<i32>(rt)?;
        wait_arrays_t::<i64>(rt)
    };
    finish(rt, "wait_arrays", all())
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn wait_arrays_t<T: TInt>(rt: &Runtime) -> Outcome {
    let (me, _, right, left) = neighbours(rt);
    let ty = T::NAME;
    let ivars = rt.alloc::<T>(K).or_fail()?;
    let data = rt.calloc::<u64>(1).or_fail()?;
    let ack = rt.calloc::<u64>(1).or_fail()?;
    // Negative for the signed types; 255 below u32::MAX for u32, so offsets stay within
    // -10..=99 to avoid wrapping.
    let base = T::pivots()[1];
    let val = |k: i64| base.plus(k);
    for i in 0..K {
        rt.atomic_set(ivars.at(i), base, me).or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    let mut cur = vec![base; K];
    check_tests(rt, &ivars, &cur)?;

    // Everything excluded: the waits return at once although nothing holds.
    let none = [true; K];
    let never = vec![val(99); K];
    rt.wait_until_all(&ivars, Some(&none), Cmp::Eq, val(99))
        .or_fail()?;
    check_eq!(
        rt.wait_until_any(&ivars, Some(&none), Cmp::Eq, val(99))
            .or_fail()?,
        None,
        "{ty}: wait_until_any, all excluded"
    );
    check_eq!(
        rt.wait_until_some(&ivars, Some(&none), Cmp::Eq, val(99))
            .or_fail()?,
        Vec::<usize>::new(),
        "{ty}: wait_until_some, all excluded"
    );
    rt.wait_until_all_vector(&ivars, Some(&none), Cmp::Eq, &never)
        .or_fail()?;
    check_eq!(
        rt.wait_until_any_vector(&ivars, Some(&none), Cmp::Eq, &never)
            .or_fail()?,
        None,
        "{ty}: wait_until_any_vector, all excluded"
    );
    check_eq!(
        rt.wait_until_some_vector(&ivars, Some(&none), Cmp::Eq, &never)
            .or_fail()?,
        Vec::<usize>::new(),
        "{ty}: wait_until_some_vector, all excluded"
    );
    // Conditions that already hold return at once.
    rt.wait_until_all(&ivars, None, Cmp::Eq, base).or_fail()?;
    rt.wait_until_all_vector(&ivars, None, Cmp::Le, &never)
        .or_fail()?;
    // The left neighbour changes this PE's ivars only after these checks.
    rt.barrier_all().or_fail()?;

    let vals: Vec<T> = (0..K).map(|i| val(i as i64 * 3 - 10)).collect();
    let steps: Vec<Vec<(usize, T)>> = vec![
        vec![(5, val(1))],
        vec![(2, val(1)), (6, val(2))],
        vals.iter().copied().enumerate().collect(),
    ];
    for (s, changes) in steps.iter().enumerate() {
        let step = s as u64 + 1;
        // As the left neighbour of `right`: data first, then the ivars.
        rt.put(data.at(0), &[marker(me, step, 0)], right)
            .or_fail()?;
        rt.fence().or_fail()?;
        for (j, &(i, x)) in changes.iter().enumerate() {
            if j % 2 == 0 {
                rt.atomic_set(ivars.at(i), x, right).or_fail()?;
            } else {
                rt.p(ivars.at(i), x, right).or_fail()?;
            }
        }
        // As the waiter: the same changes arrive from the left neighbour.
        for &(i, x) in changes {
            cur[i] = x;
        }
        match s {
            0 => {
                let any = rt.wait_until_any(&ivars, None, Cmp::Eq, val(1)).or_fail()?;
                check_eq!(any, Some(5), "{ty}: wait_until_any");
                let some = rt
                    .wait_until_some(&ivars, None, Cmp::Ge, val(1))
                    .or_fail()?;
                check_eq!(some, vec![5], "{ty}: wait_until_some");
                rt.wait_until_all(&ivars, Some(&only(&[5])), Cmp::Eq, val(1))
                    .or_fail()?;
            }
            1 => {
                rt.wait_until_all(&ivars, Some(&only(&[2, 6])), Cmp::Ge, val(1))
                    .or_fail()?;
                let some = rt.wait_until_some(&ivars, None, Cmp::Gt, base).or_fail()?;
                check_eq!(some, vec![2, 5, 6], "{ty}: wait_until_some");
                let any = rt
                    .wait_until_any(&ivars, Some(&mask(&[2, 5])), Cmp::Gt, val(1))
                    .or_fail()?;
                check_eq!(any, Some(6), "{ty}: wait_until_any with exclusions");
                let some = rt
                    .wait_until_some(&ivars, Some(&mask(&[5])), Cmp::Ne, base)
                    .or_fail()?;
                check_eq!(some, vec![2, 6], "{ty}: wait_until_some with exclusions");
            }
            _ => {
                rt.wait_until_all_vector(&ivars, None, Cmp::Eq, &vals)
                    .or_fail()?;
                // Only element 4 equals its value.
                let shifted: Vec<T> = vals
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| if i == 4 { x } else { x.plus(1) })
                    .collect();
                let any = rt
                    .wait_until_any_vector(&ivars, None, Cmp::Eq, &shifted)
                    .or_fail()?;
                check_eq!(any, Some(4), "{ty}: wait_until_any_vector");
                let some = rt
                    .wait_until_some_vector(&ivars, None, Cmp::Eq, &shifted)
                    .or_fail()?;
                check_eq!(some, vec![4], "{ty}: wait_until_some_vector");
                let some = rt
                    .wait_until_some_vector(&ivars, Some(&mask(&[1])), Cmp::Le, &vals)
                    .or_fail()?;
                check_eq!(
                    some,
                    vec![0, 2, 3, 4, 5, 6, 7],
                    "{ty}: wait_until_some_vector"
                );
                let any = rt
                    .wait_until_any_vector(&ivars, Some(&mask(&[0, 1, 2, 3, 4])), Cmp::Lt, &shifted)
                    .or_fail()?;
                check!(
                    matches!(any, Some(5..=7)),
                    "{ty}: wait_until_any_vector with exclusions = {any:?}"
                );
                rt.wait_until_all_vector(&ivars, Some(&mask(&[4])), Cmp::Lt, &shifted)
                    .or_fail()?;
            }
        }
        check_eq!(
            rt.g(data.at(0), me).or_fail()?,
            marker(left, step, 0),
            "{ty}: data put before step {step}"
        );
        check_tests(rt, &ivars, &cur)?;
        rt.atomic_inc(ack.at(0), left).or_fail()?;
        rt.wait_until(ack.at(0), Cmp::Ge, step).or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    rt.free(ivars).or_fail()?;
    rt.free(data).or_fail()?;
    rt.free(ack).or_fail()
}
