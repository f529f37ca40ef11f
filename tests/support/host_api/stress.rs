//! Stress: random puts and atomics to random peers, checked exactly.

use std::fmt::Debug;

use symmem::Runtime;

use super::{check_eq, elem, finish, key, mix, neighbours, OrFail, Outcome};

/// A deterministic PRNG (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const S_EPOCHS: usize = 3;
const S_OPS: usize = 3000;
const S_REGION: usize = 8192; // bytes per source on each target
const S_MAX_PUT: usize = 2048;
const S_SEED: u64 = 0x5EED_5EED_0F5E_75ED;

/// One random operation. Everything is drawn before anything is executed, so a replay of
/// the stream draws the same numbers whatever the target.
#[derive(Debug)]
enum SOp {
    Add {
        t: usize,
        amount: u64,
        fetch: bool,
    },
    Inc {
        t: usize,
        fetch: bool,
    },
    Shared {
        t: usize,
        amount: i64,
        x: i64,
    },
    Cas {
        t: usize,
        new: u32,
        fail_first: bool,
    },
    Put {
        t: usize,
        off: usize,
        len: usize,
        seed: u64,
        how: usize,
    },
}

fn s_rng(pe: usize) -> Rng {
    Rng(key(&[S_SEED, pe as u64]))
}

fn s_next(rng: &mut Rng, n: usize) -> SOp {
    let t = rng.below(n);
    match rng.below(100) {
        0..=29 => {
            let shift = rng.below(64) as u32;
            SOp::Add {
                t,
                amount: rng.next() >> shift,
                fetch: rng.below(2) == 0,
            }
        }
        30..=44 => SOp::Inc {
            t,
            fetch: rng.below(2) == 0,
        },
        45..=54 => SOp::Shared {
            t,
            amount: (rng.next() as i64) >> 20,
            x: rng.next() as i64,
        },
        55..=59 => SOp::Cas {
            t,
            new: rng.next() as u32,
            fail_first: rng.below(2) == 0,
        },
        _ => {
            let len = 1 + rng.below(S_MAX_PUT);
            let off = rng.below(S_REGION - len + 1);
            SOp::Put {
                t,
                off,
                len,
                seed: rng.next(),
                how: rng.below(4),
            }
        }
    }
}

fn s_bytes(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (elem(seed, i) >> 56) as u8).collect()
}

/// What one target must hold, as computed from every source's stream.
struct Shadow {
    add: Vec<u64>,
    inc: Vec<u64>,
    cas: Vec<u32>,
    sum: i64,
    xor: i64,
    region: Vec<u8>,
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01B3)
    })
}

/// 4 PEs (or 2) each run a few thousand random operations, from a seeded splitmix64
/// stream per PE, on random targets: adds of random amounts and incs into per-source
/// counters (fetching forms check the returned running total exactly), signed adds and
/// xors into shared words, compare-and-swaps on per-source words, and puts of random
/// slices (put, put_nbi, putmem, two puts) into per-source regions. After each epoch every
/// PE replays every PE's stream and checks all of its counters and regions exactly.
pub fn stress(rt: &Runtime) -> Outcome {
    finish(rt, "stress", stress_inner(rt))
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn stress_inner(rt: &Runtime) -> Outcome {
    let (me, n, _, _) = neighbours(rt);
    let add = rt.calloc::<u64>(n).or_fail()?;
    let inc = rt.calloc::<u64>(n).or_fail()?;
    let cas = rt.calloc::<u32>(n).or_fail()?;
    let shared = rt.calloc::<i64>(2).or_fail()?;
    let region = rt.calloc::<u8>(n * S_REGION).or_fail()?;

    // What this PE has sent to each target (for the fetching forms' exact results).
    let mut sent_add = vec![0u64; n];
    let mut sent_inc = vec![0u64; n];
    let mut sent_cas = vec![0u32; n];
    let mut rng = s_rng(me);
    // Every source's stream, replayed for what it sent to this PE.
    let mut replay: Vec<Rng> = (0..n).map(s_rng).collect();
    let mut shadow = Shadow {
        add: vec![0; n],
        inc: vec![0; n],
        cas: vec![0; n],
        sum: 0,
        xor: 0,
        region: vec![0; n * S_REGION],
    };
    let mut counts = [0usize; 5];
    for epoch in 0..S_EPOCHS {
        for i in 0..S_OPS {
            let op = s_next(&mut rng, n);
            match op {
                SOp::Add { t, amount, fetch } => {
                    counts[0] += 1;
                    if fetch {
                        let old = rt.atomic_fetch_add(add.at(me), amount, t).or_fail()?;
                        check_eq!(old, sent_add[t], "op {i}: fetch_add on PE {t}");
                    } else {
                        rt.atomic_add(add.at(me), amount, t).or_fail()?;
                    }
                    sent_add[t] = sent_add[t].wrapping_add(amount);
                }
                SOp::Inc { t, fetch } => {
                    counts[1] += 1;
                    if fetch {
                        let old = rt.atomic_fetch_inc(inc.at(me), t).or_fail()?;
                        check_eq!(old, sent_inc[t], "op {i}: fetch_inc on PE {t}");
                    } else {
                        rt.atomic_inc(inc.at(me), t).or_fail()?;
                    }
                    sent_inc[t] += 1;
                }
                SOp::Shared { t, amount, x } => {
                    counts[2] += 1;
                    rt.atomic_add(shared.at(0), amount, t).or_fail()?;
                    rt.atomic_xor(shared.at(1), x, t).or_fail()?;
                }
                SOp::Cas { t, new, fail_first } => {
                    counts[3] += 1;
                    if fail_first {
                        let cond = sent_cas[t].wrapping_add(1);
                        let old = rt.atomic_compare_swap(cas.at(me), cond, new, t).or_fail()?;
                        check_eq!(old, sent_cas[t], "op {i}: failing compare_swap on PE {t}");
                    }
                    let old = rt
                        .atomic_compare_swap(cas.at(me), sent_cas[t], new, t)
                        .or_fail()?;
                    check_eq!(old, sent_cas[t], "op {i}: compare_swap on PE {t}");
                    sent_cas[t] = new;
                }
                SOp::Put {
                    t,
                    off,
                    len,
                    seed,
                    how,
                } => {
                    counts[4] += 1;
                    let data = s_bytes(seed, len);
                    let at = me * S_REGION + off;
                    match how {
                        0 => rt.put(region.at(at), &data, t).or_fail()?,
                        1 => {
                            rt.put_nbi(region.at(at), &data, t).or_fail()?;
                            // Orders it before any later, possibly overlapping put.
                            rt.fence().or_fail()?;
                        }
                        2 => rt.putmem(&region, at, &data, t).or_fail()?,
                        _ => {
                            let h = len / 2;
                            rt.put(region.at(at + h), &data[h..], t).or_fail()?;
                            rt.put(region.at(at), &data[..h], t).or_fail()?;
                        }
                    }
                }
            }
            if i % 97 == 0 {
                rt.quiet().or_fail()?;
            }
        }
        rt.quiet().or_fail()?;
        rt.barrier_all().or_fail()?;

        // Replay every stream's epoch, keeping what was sent to this PE.
        for (s, r) in replay.iter_mut().enumerate() {
            for _ in 0..S_OPS {
                match s_next(r, n) {
                    SOp::Add { t, amount, .. } if t == me => {
                        shadow.add[s] = shadow.add[s].wrapping_add(amount)
                    }
                    SOp::Inc { t, .. } if t == me => shadow.inc[s] += 1,
                    SOp::Shared { t, amount, x } if t == me => {
                        shadow.sum = shadow.sum.wrapping_add(amount);
                        shadow.xor ^= x;
                    }
                    SOp::Cas { t, new, .. } if t == me => shadow.cas[s] = new,
                    SOp::Put {
                        t, off, len, seed, ..
                    } if t == me => {
                        let at = s * S_REGION + off;
                        shadow.region[at..at + len].copy_from_slice(&s_bytes(seed, len));
                    }
                    _ => {}
                }
            }
        }
        let mut got = vec![0u64; n];
        rt.read_local(add.at(0), &mut got).or_fail()?;
        check_eq!(got, shadow.add, "epoch {epoch}: add counters");
        rt.read_local(inc.at(0), &mut got).or_fail()?;
        check_eq!(got, shadow.inc, "epoch {epoch}: inc counters");
        let mut got = vec![0u32; n];
        rt.read_local(cas.at(0), &mut got).or_fail()?;
        check_eq!(got, shadow.cas, "epoch {epoch}: compare_swap words");
        let mut got = [0i64; 2];
        rt.read_local(shared.at(0), &mut got).or_fail()?;
        check_eq!(
            got,
            [shadow.sum, shadow.xor],
            "epoch {epoch}: shared sum and xor"
        );
        {
            // GPU heaps have no host slices: read them by copy there.
            let copy;
            let mine = if rt.is_gpu() {
                let mut v = vec![bytemuck::Zeroable::zeroed(); region.len()];
                rt.read_local(region.at(0), &mut v).or_fail()?;
                copy = v;
                &copy[..]
            } else {
                // SAFETY: between the two barriers around this check nobody writes
                // `region`.
                unsafe { rt.local_slice(&region) }.or_fail()?
            };
            if let Some(i) = (0..mine.len()).find(|&i| mine[i] != shadow.region[i]) {
                return Err(format!(
                    "epoch {epoch}: byte {} of the region of PE {} is {}, expected {}",
                    i % S_REGION,
                    i / S_REGION,
                    mine[i],
                    shadow.region[i]
                ));
            }
        }
        // The sender's view: what it sent to each PE is what that PE holds for it.
        for t in 0..n {
            check_eq!(
                rt.g(add.at(me), t).or_fail()?,
                sent_add[t],
                "epoch {epoch}: my add counter on PE {t}"
            );
            check_eq!(
                rt.atomic_fetch(inc.at(me), t).or_fail()?,
                sent_inc[t],
                "epoch {epoch}: my inc counter on PE {t}"
            );
            check_eq!(
                rt.atomic_fetch(cas.at(me), t).or_fail()?,
                sent_cas[t],
                "epoch {epoch}: my compare_swap word on PE {t}"
            );
        }
        rt.barrier_all().or_fail()?;
    }
    println!(
        "PE {me}: stress ran {counts:?} (add, inc, shared, cas, put) ops; region checksum {:#018x}",
        fnv(&shadow.region)
    );
    rt.free(add).or_fail()?;
    rt.free(inc).or_fail()?;
    rt.free(cas).or_fail()?;
    rt.free(shared).or_fail()?;
    rt.free(region).or_fail()
}
