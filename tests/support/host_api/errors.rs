//! Errors: bad PEs, out-of-bounds ranges, bad strides and lengths.

use symmem::{Cmp, Runtime, SignalOp, SymBuf};

use super::atomics::{amo_program, amo_run};
use super::{check, check_eq, expect_err, finish, key, neighbours, OrFail, Outcome};

/// The message parts an out-of-bounds error must have: the operation and target PE, the
/// range, the allocation's number, length, element size and heap offset.
fn oob<T>(
    op: &str,
    pe: usize,
    start: usize,
    end: usize,
    buf: &SymBuf<T>,
    esize: usize,
) -> Vec<String> {
    let len = buf.size_bytes() / esize;
    vec![
        format!("{op} on PE {pe}: "),
        format!("elements {start}..{end} are out of bounds"),
        format!(
            "allocation #{} of {len} elements ({esize} bytes each)",
            buf.id()
        ),
        format!("at heap offset {:#x}", buf.offset()),
    ]
}

/// Bad PEs, out-of-bounds element and byte ranges, strided overflows, zero strides,
/// short local buffers, and wrong exclude/values lengths: each an error of the right kind
/// that names the PE, the range, the allocation (number, length, offset) or the argument.
/// None of the failed calls writes anything: every PE's memory is unchanged afterwards.
///
/// A misaligned atomic cannot be expressed: atomics take a typed `SymRef<T>` whose index
/// counts whole `T`s, and every allocation is at least 64-byte aligned (checked below), so
/// there is no misaligned-atomic error to test.
pub fn errors(rt: &Runtime) -> Outcome {
    finish(rt, "errors", errors_inner(rt))
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn errors_inner(rt: &Runtime) -> Outcome {
    let (me, n, _, _) = neighbours(rt);
    const LEN: usize = 10;
    let buf = rt.alloc::<u64>(LEN).or_fail()?;
    let sig = rt.alloc::<u64>(2).or_fail()?;
    let word = |pe: usize, i: usize| key(&[13, pe as u64, i as u64]);
    let own: Vec<u64> = (0..LEN).map(|i| word(me, i)).collect();
    rt.put(buf.at(0), &own, me).or_fail()?;
    rt.put(sig.at(0), &[5, 6], me).or_fail()?;
    rt.barrier_all().or_fail()?;

    let src = [1u64; 40];
    let mut dst = [0u64; 40];
    let ex3 = [false; 3];

    // Bad PEs.
    for pe in [n, n + 7, usize::MAX] {
        let bad = |op: &str| {
            vec![
                format!("{op}: PE {pe} does not exist"),
                format!("(n_pes = {n})"),
            ]
        };
        expect_err(rt.put(buf.at(0), &src[..1], pe), "InvalidPe", &bad("put"))?;
        // A bad PE also names what was being accessed.
        expect_err(
            rt.put(buf.at(3), &src[..2], pe),
            "InvalidPe",
            &[
                "elements 3..5 of allocation #0".to_string(),
                format!("{LEN} elements"),
            ],
        )?;
        expect_err(
            rt.getmem(&buf, 4, &mut [0; 3], pe),
            "InvalidPe",
            &["bytes 4..7 of allocation #0".to_string()],
        )?;
        expect_err(
            rt.put_nbi(buf.at(0), &src[..1], pe),
            "InvalidPe",
            &bad("put_nbi"),
        )?;
        expect_err(
            rt.get(buf.at(0), &mut dst[..1], pe),
            "InvalidPe",
            &bad("get"),
        )?;
        expect_err(
            rt.get_nbi(buf.at(0), &mut dst[..1], pe),
            "InvalidPe",
            &bad("get_nbi"),
        )?;
        expect_err(rt.p(buf.at(0), 1, pe), "InvalidPe", &bad("p"))?;
        expect_err(rt.g(buf.at(0), pe), "InvalidPe", &bad("g"))?;
        expect_err(rt.putmem(&buf, 0, &[1], pe), "InvalidPe", &bad("putmem"))?;
        expect_err(
            rt.getmem(&buf, 0, &mut [0], pe),
            "InvalidPe",
            &bad("getmem"),
        )?;
        expect_err(
            rt.iput(buf.at(0), 2, &src, 1, 3, pe),
            "InvalidPe",
            &bad("iput"),
        )?;
        expect_err(
            rt.iget(&mut dst, 1, buf.at(0), 2, 3, pe),
            "InvalidPe",
            &bad("iget"),
        )?;
        let ps = rt.put_signal(buf.at(0), &src[..2], sig.at(0), 1, SignalOp::Set, pe);
        expect_err(ps, "InvalidPe", &bad("put_signal"))?;
        let ps = rt.put_signal_nbi(buf.at(0), &src[..2], sig.at(0), 1, SignalOp::Add, pe);
        expect_err(ps, "InvalidPe", &bad("put_signal_nbi"))?;
        let so = rt.signal_op(sig.at(0), 1, SignalOp::Add, pe);
        expect_err(so, "InvalidPe", &bad("signal_op"))?;
        for op in amo_program::<u64>(0, 0) {
            expect_err(
                amo_run(rt, buf.at(0), pe, 0, op),
                "InvalidPe",
                &[format!("PE {pe} does not exist")],
            )?;
        }
        expect_err(
            rt.atomic_fetch(buf.at(0), pe),
            "InvalidPe",
            &bad("atomic_fetch"),
        )?;
        expect_err(
            rt.atomic_compare_swap(buf.at(0), 0, 1, pe),
            "InvalidPe",
            &bad("atomic_compare_swap"),
        )?;
        expect_err(
            rt.atomic_fetch_xor(buf.at(0), 1, pe),
            "InvalidPe",
            &bad("atomic_fetch_xor"),
        )?;
        // Non-fetching atomics name themselves, not the fetching form they share code with.
        expect_err(
            rt.atomic_add(buf.at(0), 1, pe),
            "InvalidPe",
            &bad("atomic_add"),
        )?;
        expect_err(
            rt.atomic_inc(buf.at(0), pe),
            "InvalidPe",
            &bad("atomic_inc"),
        )?;
        expect_err(
            rt.atomic_xor(buf.at(0), 1, pe),
            "InvalidPe",
            &bad("atomic_xor"),
        )?;
        expect_err(rt.ptr(&buf, pe), "InvalidPe", &bad("ptr"))?;
        expect_err(rt.node_of(pe), "InvalidPe", &bad("node_of"))?;
        expect_err(rt.hostname_of(pe), "InvalidPe", &bad("hostname_of"))?;
    }

    // Out of bounds, element forms, against every PE.
    for pe in 0..n {
        let e = |op: &str, s: usize, end: usize| oob(op, pe, s, end, &buf, 8);
        expect_err(
            rt.put(buf.at(8), &src[..3], pe),
            "OutOfBounds",
            &e("put", 8, 11),
        )?;
        expect_err(
            rt.put(buf.at(LEN), &src[..1], pe),
            "OutOfBounds",
            &e("put", LEN, LEN + 1),
        )?;
        expect_err(
            rt.put(buf.at(LEN + 1), &[], pe),
            "OutOfBounds",
            &e("put", LEN + 1, LEN + 1),
        )?;
        expect_err(
            rt.put(buf.at(0), &src[..LEN + 1], pe),
            "OutOfBounds",
            &e("put", 0, LEN + 1),
        )?;
        expect_err(
            rt.put(buf.at(usize::MAX), &src[..2], pe),
            "OutOfBounds",
            &e("put", usize::MAX, usize::MAX),
        )?;
        expect_err(
            rt.put_nbi(buf.at(9), &src[..2], pe),
            "OutOfBounds",
            &e("put_nbi", 9, 11),
        )?;
        expect_err(
            rt.get(buf.at(9), &mut dst[..2], pe),
            "OutOfBounds",
            &e("get", 9, 11),
        )?;
        expect_err(
            rt.get_nbi(buf.at(5), &mut dst[..6], pe),
            "OutOfBounds",
            &e("get_nbi", 5, 11),
        )?;
        expect_err(
            rt.p(buf.at(LEN), 1, pe),
            "OutOfBounds",
            &e("p", LEN, LEN + 1),
        )?;
        expect_err(rt.g(buf.at(LEN), pe), "OutOfBounds", &e("g", LEN, LEN + 1))?;
        // Strided spans beyond the allocation (no overflow): 4 elements, stride 3 = 10.
        expect_err(
            rt.iput(buf.at(1), 3, &src, 1, 4, pe),
            "OutOfBounds",
            &e("iput", 1, 11),
        )?;
        expect_err(
            rt.iget(&mut dst, 1, buf.at(0), 5, 3, pe),
            "OutOfBounds",
            &e("iget", 0, 11),
        )?;
        // Every atomic.
        for op in amo_program::<u64>(0, 0) {
            let r = amo_run(rt, buf.at(LEN), pe, 0, op);
            expect_err(r, "OutOfBounds", &e("atomic", LEN, LEN + 1)[1..])?;
        }
        expect_err(
            rt.atomic_fetch_add(buf.at(LEN + 3), 1, pe),
            "OutOfBounds",
            &e("atomic_fetch_add", LEN + 3, LEN + 4),
        )?;
        expect_err(
            rt.atomic_compare_swap(buf.at(LEN), 0, 1, pe),
            "OutOfBounds",
            &e("atomic_compare_swap", LEN, LEN + 1),
        )?;
        // put_signal: a bad signal leaves the data untouched; bad data leaves the signal.
        let es = |op: &str, s: usize| oob(op, pe, s, s + 1, &sig, 8);
        let ps = rt.put_signal(buf.at(0), &src[..3], sig.at(2), 1, SignalOp::Set, pe);
        expect_err(ps, "OutOfBounds", &es("put_signal", 2))?;
        let ps = rt.put_signal_nbi(buf.at(8), &src[..3], sig.at(0), 1, SignalOp::Add, pe);
        expect_err(ps, "OutOfBounds", &e("put_signal_nbi", 8, 11))?;
        let so = rt.signal_op(sig.at(7), 1, SignalOp::Set, pe);
        expect_err(so, "OutOfBounds", &es("signal_op", 7))?;
    }
    // Operations on this PE's own copy.
    let e = |op: &str, s: usize, end: usize| oob(op, me, s, end, &buf, 8);
    expect_err(
        rt.wait_until(buf.at(LEN), Cmp::Eq, 0),
        "OutOfBounds",
        &e("wait_until", LEN, LEN + 1),
    )?;
    expect_err(
        rt.test(buf.at(LEN), Cmp::Eq, 0),
        "OutOfBounds",
        &e("test", LEN, LEN + 1),
    )?;
    expect_err(
        rt.local_atomic(buf.at(LEN)),
        "OutOfBounds",
        &e("local_atomic", LEN, LEN + 1),
    )?;
    expect_err(
        rt.read_local(buf.at(9), &mut dst[..2]),
        "OutOfBounds",
        &e("read_local", 9, 11),
    )?;
    let es = |op: &str, s: usize| oob(op, me, s, s + 1, &sig, 8);
    expect_err(
        rt.signal_fetch(sig.at(5)),
        "OutOfBounds",
        &es("signal_fetch", 5),
    )?;
    expect_err(
        rt.signal_wait_until(sig.at(2), Cmp::Eq, 1),
        "OutOfBounds",
        &es("signal_wait_until", 2),
    )?;

    // Out of bounds, byte forms.
    let size = buf.size_bytes();
    for pe in 0..n {
        let e = |op: &str, s: usize, end: usize| oob(op, pe, s, end, &buf, 1);
        expect_err(
            rt.putmem(&buf, size - 3, &[1; 4], pe),
            "OutOfBounds",
            &e("putmem", size - 3, size + 1),
        )?;
        expect_err(
            rt.putmem(&buf, size + 1, &[], pe),
            "OutOfBounds",
            &e("putmem", size + 1, size + 1),
        )?;
        expect_err(
            rt.getmem(&buf, 0, &mut [0; 81], pe),
            "OutOfBounds",
            &e("getmem", 0, size + 1),
        )?;
        expect_err(
            rt.getmem(&buf, usize::MAX, &mut [0; 1], pe),
            "OutOfBounds",
            &e("getmem", usize::MAX, usize::MAX),
        )?;
    }

    // Strided arguments: overflowing spans, zero strides, short local buffers.
    let arg =
        |op: &str, what: String| vec![format!("{op}: {what}"), format!("PE {me}, allocation #0")];
    let m = usize::MAX;
    expect_err(
        rt.iput(buf.at(0), m, &src, 1, 3, me),
        "InvalidArgument",
        &arg("iput", format!("3 elements with stride {m} overflow")),
    )?;
    expect_err(
        rt.iput(buf.at(0), 1, &src, m / 2 + 1, 3, me),
        "InvalidArgument",
        &arg(
            "iput",
            format!("3 elements with stride {} overflow", m / 2 + 1),
        ),
    )?;
    expect_err(
        rt.iget(&mut dst, 1, buf.at(0), m / 2 + 1, 3, me),
        "InvalidArgument",
        &arg(
            "iget",
            format!("3 elements with stride {} overflow", m / 2 + 1),
        ),
    )?;
    expect_err(
        rt.iget(&mut dst, m, buf.at(0), 1, 2, me),
        "InvalidArgument",
        &arg("iget", format!("2 elements with stride {m} overflow")),
    )?;
    expect_err(
        rt.iput(buf.at(0), 0, &src, 1, 3, me),
        "InvalidArgument",
        &arg(
            "iput",
            "strides must be at least 1 (dst_stride 0, src_stride 1;".into(),
        ),
    )?;
    expect_err(
        rt.iput(buf.at(0), 1, &src, 0, 3, me),
        "InvalidArgument",
        &arg(
            "iput",
            "strides must be at least 1 (dst_stride 1, src_stride 0;".into(),
        ),
    )?;
    expect_err(
        rt.iget(&mut dst, 0, buf.at(0), 1, 3, me),
        "InvalidArgument",
        &arg(
            "iget",
            "strides must be at least 1 (dst_stride 0, src_stride 1;".into(),
        ),
    )?;
    expect_err(
        rt.iget(&mut dst, 2, buf.at(0), 0, 0, me),
        "InvalidArgument",
        &arg(
            "iget",
            "strides must be at least 1 (dst_stride 2, src_stride 0;".into(),
        ),
    )?;
    expect_err(
        rt.iput(buf.at(0), 1, &src[..5], 2, 4, me),
        "InvalidArgument",
        &arg(
            "iput",
            "the local source has 5 elements but the stride pattern needs 7".into(),
        ),
    )?;
    expect_err(
        rt.iget(&mut dst[..5], 3, buf.at(0), 1, 3, me),
        "InvalidArgument",
        &arg(
            "iget",
            "the local destination has 5 elements but the stride pattern needs 7".into(),
        ),
    )?;

    // Array waits: exclude masks and value vectors of the wrong length.
    let id = buf.id();
    let exm = |op: &str| {
        vec![format!(
            "{op}: exclude mask has 3 entries for {LEN} ivars (allocation #{id})"
        )]
    };
    let vals = |op: &str| {
        vec![format!(
            "{op}: 9 comparison values for {LEN} ivars (allocation #{id})"
        )]
    };
    let v9 = [0u64; 9];
    let v10 = [0u64; LEN];
    expect_err(
        rt.wait_until_all(&buf, Some(&ex3), Cmp::Eq, 0),
        "InvalidArgument",
        &exm("wait_until_all"),
    )?;
    expect_err(
        rt.wait_until_any(&buf, Some(&ex3), Cmp::Eq, 0),
        "InvalidArgument",
        &exm("wait_until_any"),
    )?;
    expect_err(
        rt.wait_until_some(&buf, Some(&ex3), Cmp::Eq, 0),
        "InvalidArgument",
        &exm("wait_until_some"),
    )?;
    expect_err(
        rt.wait_until_all_vector(&buf, Some(&ex3), Cmp::Eq, &v10),
        "InvalidArgument",
        &exm("wait_until_all_vector"),
    )?;
    expect_err(
        rt.wait_until_any_vector(&buf, Some(&ex3), Cmp::Eq, &v10),
        "InvalidArgument",
        &exm("wait_until_any_vector"),
    )?;
    expect_err(
        rt.wait_until_some_vector(&buf, Some(&ex3), Cmp::Eq, &v10),
        "InvalidArgument",
        &exm("wait_until_some_vector"),
    )?;
    expect_err(
        rt.test_all(&buf, Some(&ex3), Cmp::Eq, 0),
        "InvalidArgument",
        &exm("test_all"),
    )?;
    expect_err(
        rt.test_any(&buf, Some(&ex3), Cmp::Eq, 0),
        "InvalidArgument",
        &exm("test_any"),
    )?;
    expect_err(
        rt.test_some(&buf, Some(&ex3), Cmp::Eq, 0),
        "InvalidArgument",
        &exm("test_some"),
    )?;
    expect_err(
        rt.test_all_vector(&buf, Some(&ex3), Cmp::Eq, &v10),
        "InvalidArgument",
        &exm("test_all_vector"),
    )?;
    expect_err(
        rt.test_any_vector(&buf, Some(&ex3), Cmp::Eq, &v10),
        "InvalidArgument",
        &exm("test_any_vector"),
    )?;
    expect_err(
        rt.test_some_vector(&buf, Some(&ex3), Cmp::Eq, &v10),
        "InvalidArgument",
        &exm("test_some_vector"),
    )?;
    expect_err(
        rt.wait_until_all_vector(&buf, None, Cmp::Eq, &v9),
        "InvalidArgument",
        &vals("wait_until_all_vector"),
    )?;
    expect_err(
        rt.wait_until_any_vector(&buf, None, Cmp::Eq, &v9),
        "InvalidArgument",
        &vals("wait_until_any_vector"),
    )?;
    expect_err(
        rt.wait_until_some_vector(&buf, None, Cmp::Eq, &v9),
        "InvalidArgument",
        &vals("wait_until_some_vector"),
    )?;
    expect_err(
        rt.test_all_vector(&buf, None, Cmp::Eq, &v9),
        "InvalidArgument",
        &vals("test_all_vector"),
    )?;
    expect_err(
        rt.test_any_vector(&buf, None, Cmp::Eq, &v9),
        "InvalidArgument",
        &vals("test_any_vector"),
    )?;
    expect_err(
        rt.test_some_vector(&buf, None, Cmp::Eq, &v9),
        "InvalidArgument",
        &vals("test_some_vector"),
    )?;
    // Even all-excluded waits check the mask length first.
    expect_err(
        rt.wait_until_any(&buf, Some(&[true; 11]), Cmp::Eq, 0),
        "InvalidArgument",
        &[format!("exclude mask has 11 entries for {LEN} ivars")],
    )?;

    // No failed call wrote anything.
    rt.barrier_all().or_fail()?;
    let mut got = vec![0u64; LEN];
    rt.read_local(buf.at(0), &mut got).or_fail()?;
    check_eq!(got, own, "this PE's buffer after the failed calls");
    let mut s = [0u64; 2];
    rt.read_local(sig.at(0), &mut s).or_fail()?;
    check_eq!(s, [5, 6], "this PE's signals after the failed calls");

    // Alignment holds by construction: even after a 1-byte, 1-aligned allocation, every
    // allocation starts on a 64-byte boundary, so typed atomics are always aligned.
    let odd = rt.alloc_aligned::<u8>(3, 1).or_fail()?;
    let a32 = rt.alloc::<u32>(3).or_fail()?;
    let a64 = rt.alloc_aligned::<i64>(3, 1).or_fail()?;
    for (what, off) in [
        ("u8", odd.offset()),
        ("u32", a32.offset()),
        ("i64", a64.offset()),
        ("u64", buf.offset()),
    ] {
        check!(
            off.is_multiple_of(64),
            "the {what} allocation is at heap offset {off:#x}"
        );
    }
    let p = rt.ptr(&a64, me).or_fail()?.ok_or("own heap not mapped")?;
    check!(
        (p.as_ptr() as usize).is_multiple_of(64),
        "pointer {p:?} is not 64-byte aligned"
    );
    rt.barrier_all().or_fail()?;
    rt.free(odd).or_fail()?;
    rt.free(a32).or_fail()?;
    rt.free(a64).or_fail()?;
    rt.free(buf).or_fail()?;
    rt.free(sig).or_fail()
}
