//! Aligned allocation: the *address* of an `alloc_aligned` block is aligned, on every PE,
//! for its own heap and for every same-node peer's mapping, up to `symmem::MAX_ALIGN`;
//! above it every PE fails with an error naming the limit, and all stay in step.

use symmem::{Runtime, SymBuf, MAX_ALIGN};

use super::{check, check_eq, expect_err, finish, key, OrFail, Outcome};

/// `alloc_aligned` with every power of two from 8 bytes to [`MAX_ALIGN`] (what Sandia
/// OpenSHMEM's `shmemalign` test asks, 8 B … 8 MiB, and more), each after a small block
/// that the first fit must skip: the block's address is a multiple of the alignment on
/// every PE, through this PE's pointer and every mapped peer's (`Runtime::ptr`), and the
/// block is usable from end to end. Then alignments above the limit (and a non-power of
/// two) fail on every PE with an `InvalidArgument` naming the operation, the alignment and
/// the limit, and a mismatch (one PE asking above the limit, the others not) fails on
/// every PE too: nobody is left waiting, and the next allocation works everywhere.
pub fn align(rt: &Runtime) -> Outcome {
    finish(rt, "align", align_inner(rt))
}

fn align_inner(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    check!(MAX_ALIGN >= 8 << 20, "MAX_ALIGN is only {MAX_ALIGN} bytes");
    let mut align = 8usize;
    let mut round = 0u64;
    while align <= MAX_ALIGN {
        // A small block first, so the aligned one never starts where the free space does.
        let pad = rt.alloc::<u8>(1 + round as usize).or_fail()?;
        let len = 257 + round as usize;
        let buf = rt.alloc_aligned::<u64>(len, align).or_fail()?;
        check!(
            buf.offset().is_multiple_of(align),
            "alloc_aligned(align {align}) is at heap offset {:#x}",
            buf.offset()
        );
        for pe in 0..n {
            if let Some(p) = rt.ptr(&buf, pe).or_fail()? {
                check!(
                    (p.as_ptr() as usize).is_multiple_of(align),
                    "alloc_aligned(align {align}): PE {pe}'s block is at {p:?} here (PE {me}), not {align}-byte aligned"
                );
            }
        }
        check!(
            rt.ptr(&buf, me).or_fail()?.is_some(),
            "no pointer to this PE's own block"
        );
        fill_and_check(rt, &buf, round)?;
        rt.free(buf).or_fail()?;
        rt.free(pad).or_fail()?;
        align *= 2;
        round += 1;
    }

    // Above the limit: every PE gets the same error, and nobody waits for anybody.
    for too_big in [MAX_ALIGN * 2, 1 << 30] {
        expect_err(
            rt.alloc_aligned::<u8>(64, too_big),
            "InvalidArgument",
            &[
                "alloc_aligned".to_string(),
                format!("alignment {too_big}"),
                format!("{MAX_ALIGN}"),
            ],
        )?;
    }
    expect_err(
        rt.alloc_aligned::<u8>(64, 3 << 20),
        "InvalidArgument",
        &["alloc_aligned".to_string(), "alignment 3145728".to_string()],
    )?;
    // PE 0 asks above the limit, the others for 4 KiB: every PE fails.
    let asked = if me == 0 { MAX_ALIGN * 4 } else { 4096 };
    match rt.alloc_aligned::<u8>(64, asked) {
        Ok(b) => {
            return Err(format!(
                "line {}: alloc_aligned(align {asked}) succeeded at offset {:#x} while PE 0 asked for {}",
                line!(),
                b.offset(),
                MAX_ALIGN * 4
            ))
        }
        Err(e) => check!(
            e.to_string().contains("alignment") || e.to_string().contains("align"),
            "the error names no alignment: {e}"
        ),
    }
    rt.barrier_all().or_fail()?;
    // Still in step: the largest alignment works again on every PE.
    let last = rt.alloc_aligned::<u8>(4096, MAX_ALIGN).or_fail()?;
    let p = rt.ptr(&last, me).or_fail()?.ok_or("own heap not mapped")?;
    check!(
        (p.as_ptr() as usize).is_multiple_of(MAX_ALIGN),
        "alloc_aligned(align {MAX_ALIGN}) after the errors is at {p:?}"
    );
    rt.free(last).or_fail()
}

/// Every PE writes its words into every PE's `buf` (first and last included), then reads
/// back what every PE wrote into its own.
fn fill_and_check(rt: &Runtime, buf: &SymBuf<u64>, round: u64) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let len = buf.len();
    let word =
        |from: usize, to: usize, i: usize| key(&[29, round, from as u64, to as u64, i as u64]);
    // Each PE writes one slot per writer: index `writer`, and the last `n` words.
    for to in 0..n {
        rt.p(buf.at(me), word(me, to, me), to).or_fail()?;
        rt.p(buf.at(len - n + me), word(me, to, len - n + me), to)
            .or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    let mut got = vec![0u64; len];
    rt.read_local(buf.at(0), &mut got).or_fail()?;
    for from in 0..n {
        check_eq!(
            got[from],
            word(from, me, from),
            "word {from} from PE {from}"
        );
        let i = len - n + from;
        check_eq!(got[i], word(from, me, i), "word {i} from PE {from}");
    }
    rt.barrier_all().or_fail()
}
