//! Handles from before a finalize, refused by the next runtime.

use symmem::{Cmp, Runtime, SignalOp, SymBuf};

use super::atomics::{amo_program, amo_run};
use super::{check_eq, expect_err, finish, neighbours, OrFail, Outcome};

/// Handles from a finalized runtime are refused by a new one with ForeignAllocation
/// naming the operation and the allocation, by every operation (free included), while
/// the new runtime's own allocations (at the same offsets) work.
pub fn foreign(check_world: fn(&Runtime) -> Outcome) -> Outcome {
    let rt = symmem::init().map_err(|e| format!("first init: {e}"))?;
    check_world(&rt)?;
    let right = (rt.my_pe() + 1) % rt.n_pes();
    let old = rt.calloc::<u64>(4).or_fail()?;
    let old_sig = rt.calloc::<u64>(1).or_fail()?;
    rt.put(old.at(0), &[7], right).or_fail()?;
    rt.barrier_all().or_fail()?;
    rt.finalize().map_err(|e| format!("finalize: {e}"))?;

    let rt = symmem::init().map_err(|e| format!("second init: {e}"))?;
    check_world(&rt)?;
    let r = foreign_checks(&rt, old, old_sig);
    finish(&rt, "foreign", r)?;
    rt.finalize().map_err(|e| format!("second finalize: {e}"))
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn foreign_checks(rt: &Runtime, old: SymBuf<u64>, old_sig: SymBuf<u64>) -> Outcome {
    let (me, n, right, left) = neighbours(rt);
    let (id, sig_id) = (old.id(), old_sig.id());
    let f = |op: &str| {
        vec![
            format!("{op}: allocation #{id} belongs to runtime instance"),
            "allocated before a finalize".to_string(),
        ]
    };
    let fs = |op: &str| {
        vec![format!(
            "{op}: allocation #{sig_id} belongs to runtime instance"
        )]
    };
    let mut d = [0u64; 1];
    for pe in [me, right] {
        expect_err(rt.put(old.at(0), &[1], pe), "ForeignAllocation", &f("put"))?;
        expect_err(
            rt.put_nbi(old.at(0), &[1], pe),
            "ForeignAllocation",
            &f("put_nbi"),
        )?;
        expect_err(
            rt.get(old.at(0), &mut d, pe),
            "ForeignAllocation",
            &f("get"),
        )?;
        expect_err(
            rt.get_nbi(old.at(0), &mut d, pe),
            "ForeignAllocation",
            &f("get_nbi"),
        )?;
        expect_err(rt.p(old.at(0), 1, pe), "ForeignAllocation", &f("p"))?;
        expect_err(rt.g(old.at(0), pe), "ForeignAllocation", &f("g"))?;
        expect_err(
            rt.putmem(&old, 0, &[1], pe),
            "ForeignAllocation",
            &f("putmem"),
        )?;
        expect_err(
            rt.getmem(&old, 0, &mut [0], pe),
            "ForeignAllocation",
            &f("getmem"),
        )?;
        expect_err(
            rt.iput(old.at(0), 1, &[1], 1, 1, pe),
            "ForeignAllocation",
            &f("iput"),
        )?;
        expect_err(
            rt.iget(&mut d, 1, old.at(0), 1, 1, pe),
            "ForeignAllocation",
            &f("iget"),
        )?;
        expect_err(rt.ptr(&old, pe), "ForeignAllocation", &f("ptr"))?;
        expect_err(
            rt.atomic_fetch(old.at(0), pe),
            "ForeignAllocation",
            &f("atomic_fetch"),
        )?;
        expect_err(
            rt.atomic_fetch_add(old.at(0), 1, pe),
            "ForeignAllocation",
            &f("atomic_fetch_add"),
        )?;
        expect_err(
            rt.atomic_compare_swap(old.at(0), 0, 1, pe),
            "ForeignAllocation",
            &f("atomic_compare_swap"),
        )?;
        for op in amo_program::<u64>(0, 0) {
            expect_err(
                amo_run(rt, old.at(0), pe, 0, op),
                "ForeignAllocation",
                &[format!("allocation #{id} belongs")],
            )?;
        }
        let ps = rt.put_signal(old.at(0), &[1], old_sig.at(0), 1, SignalOp::Set, pe);
        expect_err(ps, "ForeignAllocation", &fs("put_signal"))?;
        let so = rt.signal_op(old_sig.at(0), 1, SignalOp::Add, pe);
        expect_err(so, "ForeignAllocation", &fs("signal_op"))?;
    }
    expect_err(
        rt.signal_fetch(old_sig.at(0)),
        "ForeignAllocation",
        &fs("signal_fetch"),
    )?;
    expect_err(
        rt.signal_wait_until(old_sig.at(0), Cmp::Eq, 0),
        "ForeignAllocation",
        &fs("signal_wait_until"),
    )?;
    expect_err(
        rt.wait_until(old.at(0), Cmp::Eq, 0),
        "ForeignAllocation",
        &f("wait_until"),
    )?;
    expect_err(
        rt.test(old.at(0), Cmp::Eq, 0),
        "ForeignAllocation",
        &f("test"),
    )?;
    expect_err(
        rt.wait_until_all(&old, None, Cmp::Eq, 0),
        "ForeignAllocation",
        &f("wait_until_all"),
    )?;
    expect_err(
        rt.test_some_vector(&old, None, Cmp::Eq, &[0; 4]),
        "ForeignAllocation",
        &f("test_some_vector"),
    )?;
    expect_err(
        rt.local_atomic(old.at(0)),
        "ForeignAllocation",
        &f("local_atomic"),
    )?;
    expect_err(
        rt.read_local(old.at(0), &mut d),
        "ForeignAllocation",
        &f("read_local"),
    )?;
    // SAFETY: the call fails before it creates a slice.
    expect_err(
        unsafe { rt.local_slice(&old) },
        "ForeignAllocation",
        &f("local_slice"),
    )?;

    // The new runtime's allocations work, even where the old ones were.
    let new = rt.calloc::<u64>(4).or_fail()?;
    check_eq!(
        (new.id(), new.offset()),
        (id, old.offset()),
        "the new allocation's place"
    );
    rt.put(new.at(1), &[me as u64 + 100], right).or_fail()?;
    rt.barrier_all().or_fail()?;
    check_eq!(
        rt.g(new.at(1), me).or_fail()?,
        left as u64 + 100,
        "new allocation"
    );
    check_eq!(
        rt.g(new.at(0), me).or_fail()?,
        0,
        "calloc of the new allocation"
    );
    check_eq!(rt.n_pes(), n, "n_pes");
    rt.barrier_all().or_fail()?;
    rt.free(new).or_fail()?;
    // free consumes the stale handles, and refuses them.
    expect_err(
        rt.free(old),
        "ForeignAllocation",
        &[format!("free: allocation #{id} belongs")],
    )?;
    expect_err(
        rt.free(old_sig),
        "ForeignAllocation",
        &[format!("free: allocation #{sig_id} belongs")],
    )
}
