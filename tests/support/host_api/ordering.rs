//! fence / quiet: producer puts data, orders, sets a flag; consumer waits and checks.

use symmem::{Cmp, Runtime};

use super::{check_eq, elem, finish, key, neighbours, OrFail, Outcome};

const FQ_ITERS: u64 = 300;
const FQ_LEN: usize = 4096;

/// Each PE produces for its right neighbour and consumes from its left: every iteration
/// the producer writes a fresh payload with a different put form, then fence, quiet or
/// both, then sets the flag with atomic_set or a plain p; the consumer waits on the flag,
/// checks every element, and acks.
pub fn fence_quiet(rt: &Runtime) -> Outcome {
    finish(rt, "fence_quiet", fence_quiet_inner(rt))
}

fn fence_quiet_inner(rt: &Runtime) -> Outcome {
    let (me, _, right, left) = neighbours(rt);
    let data = rt.calloc::<u64>(FQ_LEN).or_fail()?;
    let flag = rt.calloc::<u64>(1).or_fail()?;
    let ack = rt.calloc::<u64>(1).or_fail()?;
    let mut copy = vec![0u64; FQ_LEN];
    for it in 1..=FQ_ITERS {
        // Producer: the consumer has checked iteration it-1.
        rt.wait_until(ack.at(0), Cmp::Ge, it - 1).or_fail()?;
        let seed = key(&[9, me as u64, it]);
        let v: Vec<u64> = (0..FQ_LEN).map(|i| elem(seed, i)).collect();
        match it % 4 {
            0 => rt.put(data.at(0), &v, right).or_fail()?,
            1 => {
                rt.put_nbi(data.at(0), &v[..FQ_LEN / 2], right).or_fail()?;
                rt.put_nbi(data.at(FQ_LEN / 2), &v[FQ_LEN / 2..], right)
                    .or_fail()?;
            }
            2 => rt
                .putmem(&data, 0, bytemuck::cast_slice(&v[..]), right)
                .or_fail()?,
            _ => {
                rt.iput(data.at(0), 2, &v, 2, FQ_LEN / 2, right).or_fail()?;
                rt.iput(data.at(1), 2, &v[1..], 2, FQ_LEN / 2, right)
                    .or_fail()?;
            }
        }
        match it % 3 {
            0 => rt.fence().or_fail()?,
            1 => rt.quiet().or_fail()?,
            _ => {
                rt.fence().or_fail()?;
                rt.quiet().or_fail()?;
            }
        }
        if it % 2 == 0 {
            rt.atomic_set(flag.at(0), it, right).or_fail()?;
        } else {
            rt.p(flag.at(0), it, right).or_fail()?;
        }
        // Consumer.
        let cmp = if it % 2 == 0 { Cmp::Eq } else { Cmp::Ge };
        let seen = rt.wait_until(flag.at(0), cmp, it).or_fail()?;
        check_eq!(seen, it, "flag");
        let seed = key(&[9, left as u64, it]);
        // GPU heaps have no host slices: read them by copy there.
        let how = if rt.is_gpu() && it % 3 == 0 {
            1
        } else {
            it % 3
        };
        let got: &[u64] = match how {
            0 => {
                // SAFETY: the producer writes `data` here only after this PE's ack below.
                unsafe { rt.local_slice(&data) }.or_fail()?
            }
            1 => {
                rt.read_local(data.at(0), &mut copy).or_fail()?;
                &copy
            }
            _ => {
                rt.getmem(&data, 0, bytemuck::cast_slice_mut(&mut copy[..]), me)
                    .or_fail()?;
                &copy
            }
        };
        for (i, g) in got.iter().enumerate() {
            if *g != elem(seed, i) {
                return Err(format!(
                    "iteration {it}: element {i} is {g:#x} after the flag, expected {:#x}",
                    elem(seed, i)
                ));
            }
        }
        rt.atomic_add(ack.at(0), 1, left).or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    rt.free(data).or_fail()?;
    rt.free(flag).or_fail()?;
    rt.free(ack).or_fail()
}
