//! Local views: read_local, local_atomic, local_slice, local_slice_mut.

use std::time::{Duration, Instant};

use symmem::Runtime;

use super::{check, check_eq, elem, finish, key, neighbours, OrFail, Outcome};

/// The owner fills its copy through local_slice_mut while nobody else touches it; after a
/// barrier everyone reads it (remote gets, owner's local_slice); peers put into an inbox
/// that the owner reads through local_slice and read_local after a barrier; local_atomic
/// updates race with peers' AMOs and the sum is exact; and a local_atomic load observes a
/// peer's atomic_set without any barrier.
pub fn local_views(rt: &Runtime) -> Outcome {
    finish(rt, "local_views", local_views_inner(rt))
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn local_views_inner(rt: &Runtime) -> Outcome {
    use std::sync::atomic::Ordering;
    let (me, n, right, left) = neighbours(rt);
    const L: usize = 5000;
    const M: usize = 777;
    let pat = |pe: usize, i: usize| elem(key(&[11, pe as u64]), i);

    let mut own = rt.alloc::<u64>(L).or_fail()?;
    {
        // SAFETY: between the allocation and the barrier below no PE accesses `own`.
        let s = unsafe { rt.local_slice_mut(&mut own) }.or_fail()?;
        check_eq!(s.len(), L, "local_slice_mut length");
        for (i, x) in s.iter_mut().enumerate() {
            *x = pat(me, i);
        }
    }
    rt.barrier_all().or_fail()?;
    for k in 0..n {
        let pe = (me + k) % n;
        let mut got = vec![0u64; L];
        rt.get(own.at(0), &mut got, pe).or_fail()?;
        for (i, g) in got.iter().enumerate() {
            check_eq!(
                *g,
                pat(pe, i),
                "element {i} of PE {pe}'s local_slice_mut writes"
            );
        }
    }
    {
        // SAFETY: until the next barrier every PE only reads `own`.
        let s = unsafe { rt.local_slice(&own) }.or_fail()?;
        for (i, g) in s.iter().enumerate() {
            check_eq!(*g, pat(me, i), "own element {i} through local_slice");
        }
    }
    rt.barrier_all().or_fail()?;

    let inbox = rt.calloc::<u32>(n * M).or_fail()?;
    let ipat = |from: usize, to: usize, i: usize| {
        (elem(key(&[12, from as u64, to as u64]), i) >> 32) as u32
    };
    for k in 0..n {
        let t = (me + k) % n;
        let v: Vec<u32> = (0..M).map(|i| ipat(me, t, i)).collect();
        rt.put(inbox.at(me * M), &v, t).or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    {
        // SAFETY: every put into `inbox` happened before the barrier; until the next
        // barrier nobody writes it.
        let s = unsafe { rt.local_slice(&inbox) }.or_fail()?;
        for (i, g) in s.iter().enumerate() {
            check_eq!(
                *g,
                ipat(i / M, me, i % M),
                "inbox element {i} through local_slice"
            );
        }
    }
    let mut part = [0u32; 5];
    rt.read_local(inbox.at(left * M + 3), &mut part).or_fail()?;
    let want: Vec<u32> = (3..8).map(|i| ipat(left, me, i)).collect();
    check_eq!(part.to_vec(), want, "read_local of the inbox");
    rt.barrier_all().or_fail()?;

    // local_atomic updates race with peers' AMOs.
    const R: u64 = 200;
    let ctr = rt.calloc::<u64>(1).or_fail()?;
    let ictr = rt.calloc::<i32>(1).or_fail()?;
    let flag = rt.calloc::<i64>(1).or_fail()?;
    let a = rt.local_atomic(ctr.at(0)).or_fail()?;
    let ia = rt.local_atomic(ictr.at(0)).or_fail()?;
    for k in 0..R {
        for t in (0..n).filter(|&t| t != me) {
            rt.atomic_add(ctr.at(0), k + 1 + me as u64 * 1000, t)
                .or_fail()?;
            rt.atomic_add(ictr.at(0), -(k as i32) - 1, t).or_fail()?;
        }
        a.fetch_add(7, Ordering::SeqCst);
        ia.fetch_sub(3, Ordering::SeqCst);
    }
    rt.barrier_all().or_fail()?;
    let peers: Vec<u64> = (0..n as u64).filter(|&p| p != me as u64).collect();
    let want: u64 = peers
        .iter()
        .map(|p| R * (R + 1) / 2 + R * p * 1000)
        .sum::<u64>()
        + 7 * R;
    check_eq!(
        a.load(Ordering::Acquire),
        want,
        "u64 counter via local_atomic"
    );
    let iwant = -((R * (R + 1) / 2) as i32) * peers.len() as i32 - 3 * R as i32;
    check_eq!(
        ia.load(Ordering::Acquire),
        iwant,
        "i32 counter via local_atomic"
    );
    check_eq!(
        rt.atomic_fetch(ctr.at(0), me).or_fail()?,
        want,
        "the same via atomic_fetch"
    );

    // A peer's atomic_set becomes visible to a local_atomic load without a barrier.
    let fa = rt.local_atomic(flag.at(0)).or_fail()?;
    rt.atomic_set(flag.at(0), -(me as i64) - 42, right)
        .or_fail()?;
    let want = -(left as i64) - 42;
    let deadline = Instant::now() + Duration::from_secs(60);
    while fa.load(Ordering::Acquire) != want {
        check!(
            Instant::now() < deadline,
            "the flag from PE {left} never arrived"
        );
        std::thread::yield_now();
    }
    rt.barrier_all().or_fail()?;
    rt.free(own).or_fail()?;
    rt.free(inbox).or_fail()?;
    rt.free(ctr).or_fail()?;
    rt.free(ictr).or_fail()?;
    rt.free(flag).or_fail()
}
