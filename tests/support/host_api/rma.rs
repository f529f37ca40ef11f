//! RMA: put, get, p, g, put_nbi, get_nbi, putmem, getmem, iput, iget.

use symmem::Runtime;

use super::{check, check_eq, elem, finish, key, neighbours, OrFail, Outcome};

const RL: usize = 1000; // u64 elements per source region
const RB: usize = 301; // bytes per source region of the byte buffer
const RS: usize = 64; // i32 elements per source region of the strided buffer
const SENTINEL: i32 = -7;

fn rma_pat(from: usize, to: usize, i: usize) -> u64 {
    elem(key(&[1, from as u64, to as u64]), i)
}

fn byte_pat(from: usize, to: usize, i: usize) -> u8 {
    (rma_pat(from, to, i) >> 56) as u8 | 1 // never 0, so untouched bytes stand out
}

fn int_pat(from: usize, to: usize, i: usize) -> i32 {
    -((rma_pat(from, to, i) >> 34) as i32) - 1 // negative, never the sentinel's pattern
}

/// Every PE writes a region of every PE's buffers (itself included) with each put form,
/// then reads every region of every PE back with each get form.
pub fn rma(rt: &Runtime) -> Outcome {
    finish(rt, "rma", rma_inner(rt))
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn rma_inner(rt: &Runtime) -> Outcome {
    let (me, n, right, _) = neighbours(rt);
    let buf = rt.calloc::<u64>(n * RL).or_fail()?;
    let bytes = rt.calloc::<u8>(n * RB).or_fail()?;
    let strided = rt.alloc::<i32>(n * RS).or_fail()?;
    let fill = vec![SENTINEL; n * RS];
    rt.put(strided.at(0), &fill, me).or_fail()?;
    rt.barrier_all().or_fail()?;

    for k in 0..n {
        let t = (me + k) % n;
        let v: Vec<u64> = (0..RL).map(|i| rma_pat(me, t, i)).collect();
        let base = me * RL;
        rt.put(buf.at(base), &v[..300], t).or_fail()?;
        rt.put_nbi(buf.at(base + 300), &v[300..600], t).or_fail()?;
        for (i, &x) in v.iter().enumerate().take(610).skip(600) {
            rt.p(buf.at(base + i), x, t).or_fail()?;
        }
        rt.put_nbi(buf.at(base + 610), &v[610..800], t).or_fail()?;
        rt.put(buf.at(base + 800), &v[800..], t).or_fail()?;
        // Bytes 1..300 of the region: odd offset, odd length, edges untouched.
        let b: Vec<u8> = (1..RB - 1).map(|i| byte_pat(me, t, i)).collect();
        rt.putmem(&bytes, me * RB + 1, &b, t).or_fail()?;
        // Strided: element 3k of the region gets src[2k], k < 20; the rest keep SENTINEL.
        let src: Vec<i32> = (0..40).map(|i| int_pat(me, t, i)).collect();
        rt.iput(strided.at(me * RS), 3, &src, 2, 20, t).or_fail()?;
    }
    rt.quiet().or_fail()?;
    rt.barrier_all().or_fail()?;

    // This PE's own copy, region by region.
    for s in 0..n {
        let mut got = vec![0u64; RL];
        rt.read_local(buf.at(s * RL), &mut got).or_fail()?;
        for (i, g) in got.iter().enumerate() {
            check_eq!(*g, rma_pat(s, me, i), "element {i} of the region of PE {s}");
        }
        let mut b = vec![0u8; RB];
        rt.getmem(&bytes, s * RB, &mut b, me).or_fail()?;
        check!(
            b[0] == 0 && b[RB - 1] == 0,
            "putmem wrote outside its range: {b:?}"
        );
        for (i, g) in b.iter().enumerate().take(RB - 1).skip(1) {
            check_eq!(*g, byte_pat(s, me, i), "byte {i} of the region of PE {s}");
        }
        let mut st = vec![0i32; RS];
        rt.read_local(strided.at(s * RS), &mut st).or_fail()?;
        for (i, g) in st.iter().enumerate() {
            let want = if i % 3 == 0 && i / 3 < 20 {
                int_pat(s, me, 2 * (i / 3))
            } else {
                SENTINEL
            };
            check_eq!(*g, want, "strided element {i} of the region of PE {s}");
        }
    }

    // Every PE's copy, through every get form.
    for k in 0..n {
        let pe = (me + k) % n;
        let mut all = vec![0u64; n * RL];
        rt.get(buf.at(0), &mut all, pe).or_fail()?;
        for (i, g) in all.iter().enumerate() {
            check_eq!(
                *g,
                rma_pat(i / RL, pe, i % RL),
                "get of element {i} on PE {pe}"
            );
        }
        let mut part = vec![0u64; 333];
        let s = (pe + 1) % n;
        rt.get_nbi(buf.at(s * RL + 17), &mut part, pe).or_fail()?;
        rt.quiet().or_fail()?;
        for (j, g) in part.iter().enumerate() {
            check_eq!(*g, rma_pat(s, pe, 17 + j), "get_nbi element {j} on PE {pe}");
        }
        for i in [0, 1, RL - 1, RL / 2 + 3] {
            let g = rt.g(buf.at(s * RL + i), pe).or_fail()?;
            check_eq!(g, rma_pat(s, pe, i), "g of element {i} on PE {pe}");
        }
        let mut b = vec![0u8; 99];
        rt.getmem(&bytes, s * RB + 5, &mut b, pe).or_fail()?;
        for (j, g) in b.iter().enumerate() {
            check_eq!(*g, byte_pat(s, pe, 5 + j), "getmem byte {j} on PE {pe}");
        }
        // iget: dst[2k] = remote[3k]; odd dst elements keep their own sentinel.
        let mut dst = vec![12345i32; 39];
        rt.iget(&mut dst, 2, strided.at(s * RS), 3, 20, pe)
            .or_fail()?;
        for (j, g) in dst.iter().enumerate() {
            let want = if j % 2 == 0 { int_pat(s, pe, j) } else { 12345 };
            check_eq!(*g, want, "iget element {j} from PE {pe}");
        }
        // Stride 1 on both sides is a plain contiguous copy.
        let mut dst = vec![0i32; 7];
        rt.iget(&mut dst, 1, strided.at(s * RS + 1), 1, 7, pe)
            .or_fail()?;
        let want: Vec<i32> = (1..8)
            .map(|i| {
                if i % 3 == 0 {
                    int_pat(s, pe, 2 * (i / 3))
                } else {
                    SENTINEL
                }
            })
            .collect();
        check_eq!(dst, want, "contiguous iget from PE {pe}");
    }

    // Zero-length transfers at the very end of an allocation are no-ops, not errors.
    rt.put(buf.at(n * RL), &[], right).or_fail()?;
    rt.get(buf.at(n * RL), &mut [], right).or_fail()?;
    rt.putmem(&bytes, n * RB, &[], right).or_fail()?;
    rt.getmem(&bytes, n * RB, &mut [], right).or_fail()?;
    rt.iput(strided.at(n * RS), 5, &[], 5, 0, right).or_fail()?;
    rt.barrier_all().or_fail()?;

    // A large transfer (8 MiB) to the right neighbour and back, with non-u64 element types.
    let big_len = 1 << 20;
    let big = rt.alloc::<u64>(big_len).or_fail()?;
    let v: Vec<u64> = (0..big_len)
        .map(|i| elem(key(&[2, me as u64]), i))
        .collect();
    rt.put(big.at(0), &v, right).or_fail()?;
    let floats = rt.calloc::<f64>(n).or_fail()?;
    rt.p(floats.at(me), me as f64 * -1.25, right).or_fail()?;
    rt.barrier_all().or_fail()?;
    let mut got = vec![0u64; big_len];
    rt.get(big.at(0), &mut got, right).or_fail()?;
    // Written by this PE: the right neighbour's left neighbour.
    let wseed = key(&[2, me as u64]);
    for (i, g) in got.iter().enumerate() {
        check_eq!(
            *g,
            elem(wseed, i),
            "element {i} of the 8 MiB buffer on PE {right}"
        );
    }
    let left = (me + n - 1) % n;
    check_eq!(
        rt.g(floats.at(left), me).or_fail()?,
        left as f64 * -1.25,
        "f64 from PE {left}"
    );
    rt.barrier_all().or_fail()?;
    for b in [buf, big] {
        rt.free(b).or_fail()?;
    }
    rt.free(bytes).or_fail()?;
    rt.free(strided).or_fail()?;
    rt.free(floats).or_fail()
}
