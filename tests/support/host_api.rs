//! Host API scenarios (tests/host_api.rs runs them on 2 and 4 PEs): every RMA, signal,
//! wait, atomic, ordering and local-view operation, every `Cmp` and `SignalOp`, the error
//! cases, `SYMMEM_TIMEOUT`, a peer dying during a wait, and a random stress test.
//!
//! Every scenario checks its results exactly and returns `Err` on the first mismatch. The
//! values written identify (writer, target, round, index), so stale or reordered data is
//! never mistaken for fresh data. Scenarios that overlap in time use ack counters rather
//! than sleeps, so nothing depends on timing. On success each PE prints
//! `PE <me>: <scenario> ok`.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use symmem::{Cmp, Error, Runtime, SignalOp, SymBuf, SymInt, SymRef};

/// The result of a scenario.
pub type Outcome = Result<(), String>;

/// `Result<T, symmem::Error>` → `Result<T, String>` naming the line that failed.
trait OrFail<T> {
    fn or_fail(self) -> Result<T, String>;
}

impl<T> OrFail<T> for symmem::Result<T> {
    #[track_caller]
    fn or_fail(self) -> Result<T, String> {
        let at = std::panic::Location::caller();
        self.map_err(|e| format!("line {}: unexpected error: {e}", at.line()))
    }
}

macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!("line {}: {}", line!(), format!($($fmt)+)));
        }
    };
}

macro_rules! check_eq {
    ($got:expr, $want:expr, $($fmt:tt)+) => {{
        let (got, want) = (&$got, &$want);
        if got != want {
            return Err(format!(
                "line {}: {}: got {:?}, expected {:?}",
                line!(),
                format!($($fmt)+),
                got,
                want
            ));
        }
    }};
}

/// Prefixes a failure with the PE and scenario; prints the success line.
fn finish(rt: &Runtime, name: &str, r: Outcome) -> Outcome {
    match r {
        Ok(()) => {
            println!("PE {}: {name} ok", rt.my_pe());
            Ok(())
        }
        Err(e) => Err(format!("PE {}: {name}: {e}", rt.my_pe())),
    }
}

/// The splitmix64 finalizer.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A hash of a tuple of numbers.
fn key(parts: &[u64]) -> u64 {
    parts.iter().fold(0x243F_6A88_85A3_08D3, |h, &p| mix(h ^ p))
}

/// Element `i` of a stream identified by `seed`: cheap, and different for every seed.
#[inline]
fn elem(seed: u64, i: usize) -> u64 {
    seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

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

/// The integer types of atomics and waits, with the arithmetic the tests model them with.
pub trait TInt: SymInt {
    /// The type's name, for messages.
    const NAME: &'static str;
    /// A step that changes bits above the low half: 2^32 for 64-bit types, 2^16 else.
    const HIGH: i64;
    /// `v as Self` (truncating, so models computed in 64 bits match 32-bit wrapping).
    fn of(v: i64) -> Self;
    /// Comparison pivots: values that probe sign, width and range.
    fn pivots() -> Vec<Self>;
    /// Wrapping addition.
    fn wadd(self, o: Self) -> Self;
    /// Bitwise and.
    fn band(self, o: Self) -> Self;
    /// Bitwise or.
    fn bor(self, o: Self) -> Self;
    /// Bitwise xor.
    fn bxor(self, o: Self) -> Self;
    /// Bitwise not.
    fn bnot(self) -> Self;
    /// `self + k` (wrapping).
    fn plus(self, k: i64) -> Self {
        self.wadd(Self::of(k))
    }
}

macro_rules! tint {
    ($t:ty, $high:expr, [$($p:expr),*]) => {
        impl TInt for $t {
            const NAME: &'static str = stringify!($t);
            const HIGH: i64 = $high;
            fn of(v: i64) -> Self {
                v as $t
            }
            fn pivots() -> Vec<Self> {
                vec![$($p),*]
            }
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn band(self, o: Self) -> Self {
                self & o
            }
            fn bor(self, o: Self) -> Self {
                self | o
            }
            fn bxor(self, o: Self) -> Self {
                self ^ o
            }
            fn bnot(self) -> Self {
                !self
            }
        }
    };
}

tint!(u32, 1 << 16, [100, 0xFFFF_FF00]);
tint!(u64, 1 << 32, [100, 0x1_0000_0005, 0xFFFF_FFFF_FFFF_FF00]);
// Signed pivots: 0 (where -1 and 1 are on opposite sides only under a signed compare),
// a negative value, and one near MIN.
tint!(i32, 1 << 16, [0, -1_000_000, i32::MIN + 100]);
tint!(i64, 1 << 32, [0, -5_000_000_000, i64::MIN + 100]);

fn neighbours(rt: &Runtime) -> (usize, usize, usize, usize) {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    (me, n, (me + 1) % n, (me + n - 1) % n)
}

// ---------------------------------------------------------------------------------------
// RMA: put, get, p, g, put_nbi, get_nbi, putmem, getmem, iput, iget.

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

// ---------------------------------------------------------------------------------------
// put_signal / put_signal_nbi: all-to-all, many iterations, large payloads; the receiver
// checks every element after it sees the signal.

const PS_ITERS: u64 = 60;
const PS_MAX: usize = 1 << 17; // u64 elements: 1 MiB

fn ps_len(from: usize, to: usize, it: u64) -> usize {
    const LENS: [usize; 6] = [1, 4099, PS_MAX, 17, 65_536, 30_001];
    LENS[(it as usize + from + 2 * to) % LENS.len()]
}

fn ps_seed(from: usize, to: usize, it: u64) -> u64 {
    key(&[3, from as u64, to as u64, it])
}

/// Each PE sends every PE (itself included) a message per iteration into a per-source
/// allocation, with put_signal or put_signal_nbi, SignalOp::Set or ::Add alternating; the
/// receiver waits for the signal, checks the whole payload, then acks. The sender does
/// not overwrite a payload before its ack, so every payload must be complete and current.
pub fn put_signal(rt: &Runtime) -> Outcome {
    finish(rt, "put_signal", put_signal_inner(rt))
}

fn put_signal_inner(rt: &Runtime) -> Outcome {
    let (me, n, _, _) = neighbours(rt);
    // inbox[s] is written only by PE s, so a receiver may look at it through a slice
    // between the signal and its ack.
    let inbox = (0..n)
        .map(|_| rt.alloc::<u64>(PS_MAX))
        .collect::<symmem::Result<Vec<_>>>()
        .or_fail()?;
    let sigs = rt.calloc::<u64>(n).or_fail()?; // sigs[s]: messages from PE s
    let acks = rt.calloc::<u64>(n).or_fail()?; // acks[t]: PE t consumed my message
    let mut src = vec![0u64; PS_MAX];
    let mut copy = vec![0u64; PS_MAX];
    let mut checked = 0usize;
    for it in 1..=PS_ITERS {
        for k in 1..=n {
            let t = (me + k) % n;
            let seen = rt
                .signal_wait_until(acks.at(t), Cmp::Ge, it - 1)
                .or_fail()?;
            check_eq!(seen, it - 1, "ack from PE {t}");
            let len = ps_len(me, t, it);
            let seed = ps_seed(me, t, it);
            for (i, x) in src[..len].iter_mut().enumerate() {
                *x = elem(seed, i);
            }
            // Both ops leave the signal equal to `it`.
            let (value, op) = if it % 2 == 0 {
                (it, SignalOp::Set)
            } else {
                (1, SignalOp::Add)
            };
            let sent = if it % 4 < 2 {
                rt.put_signal(inbox[me].at(0), &src[..len], sigs.at(me), value, op, t)
            } else {
                rt.put_signal_nbi(inbox[me].at(0), &src[..len], sigs.at(me), value, op, t)
            };
            sent.or_fail()?;
        }
        rt.quiet().or_fail()?;
        for k in 0..n {
            let s = (me + n - k) % n;
            let (cmp, v) = [
                (Cmp::Eq, it),
                (Cmp::Ge, it),
                (Cmp::Gt, it - 1),
                (Cmp::Ne, it - 1),
            ][it as usize % 4];
            let seen = rt.signal_wait_until(sigs.at(s), cmp, v).or_fail()?;
            check_eq!(seen, it, "signal from PE {s} in iteration {it}");
            check_eq!(rt.signal_fetch(sigs.at(s)).or_fail()?, it, "signal_fetch");
            let len = ps_len(s, me, it);
            let seed = ps_seed(s, me, it);
            let data: &[u64] = if it % 2 == 0 {
                // SAFETY: PE s writes inbox[s] here only after this PE's ack below, and no
                // other PE writes it at all; the slice ends before the ack.
                unsafe { rt.local_slice(&inbox[s]) }.or_fail()?
            } else {
                rt.read_local(inbox[s].at(0), &mut copy[..len]).or_fail()?;
                &copy
            };
            for (i, x) in data[..len].iter().enumerate() {
                if *x != elem(seed, i) {
                    return Err(format!(
                        "iteration {it}: element {i} of {len} from PE {s} is {x:#x}, \
                         expected {:#x}, after the signal",
                        elem(seed, i)
                    ));
                }
            }
            checked += len;
            rt.signal_op(acks.at(me), it, SignalOp::Set, s).or_fail()?;
        }
    }
    rt.barrier_all().or_fail()?;
    println!("PE {me}: put_signal checked {checked} elements after their signals");
    for b in inbox {
        rt.free(b).or_fail()?;
    }
    rt.free(sigs).or_fail()?;
    rt.free(acks).or_fail()
}

// ---------------------------------------------------------------------------------------
// signal_op, signal_fetch, signal_wait_until with every Cmp and SignalOp.

/// Values that a waiter on `cmp pivot` sees: a preset and a sequence of updates, all of
/// which fail the comparison except the last. A waiter must return exactly the last.
fn cmp_sequence<T: TInt>(cmp: Cmp, v: T) -> (T, Vec<T>) {
    let s = |k: i64| v.plus(k);
    match cmp {
        Cmp::Eq => (s(-5), vec![v.plus(T::HIGH), s(-1), s(1), v]),
        Cmp::Ne => (v, vec![v, v, v.plus(T::HIGH)]),
        Cmp::Gt => (s(-10), vec![s(-1), v, s(1)]),
        Cmp::Ge => (s(-10), vec![s(-2), s(-1), v]),
        Cmp::Lt => (s(10), vec![s(1), v, s(-1)]),
        Cmp::Le => (s(10), vec![s(2), s(1), v]),
    }
}

/// The sequences themselves must be right, or the scenarios prove nothing.
fn check_sequence<T: TInt>(cmp: Cmp, v: T, preset: T, steps: &[T]) -> Outcome {
    let (last, rest) = steps.split_last().expect("non-empty");
    check!(
        !cmp.holds(preset, v) && rest.iter().all(|&x| !cmp.holds(x, v)) && cmp.holds(*last, v),
        "bad test sequence for {cmp:?} {v:?}"
    );
    Ok(())
}

fn marker(from: usize, round: u64, c: usize) -> u64 {
    key(&[4, from as u64, round, c as u64])
}

/// For each Cmp, the left neighbour drives this PE's signal through values that fail the
/// comparison and then one that holds, with signal_op Set and Add (wrapping Add for
/// decreases) and put_signal for the last step; signal_wait_until must return exactly that
/// value and the data put before it must be visible. Then every PE adds to a counter on
/// every PE with put_signal(Add), and each waits until the sum is complete and checks
/// every payload.
pub fn signals(rt: &Runtime) -> Outcome {
    finish(rt, "signals", signals_inner(rt))
}

fn signals_inner(rt: &Runtime) -> Outcome {
    let (me, n, right, left) = neighbours(rt);
    let sig = rt.calloc::<u64>(Cmp::ALL.len()).or_fail()?;
    let data = rt.calloc::<u64>(Cmp::ALL.len()).or_fail()?;
    for (round, v) in u64::pivots().into_iter().enumerate() {
        let round = round as u64 + 1;
        for (c, &cmp) in Cmp::ALL.iter().enumerate() {
            let (preset, steps) = cmp_sequence(cmp, v);
            check_sequence(cmp, v, preset, &steps)?;
            rt.signal_op(sig.at(c), preset, SignalOp::Set, me)
                .or_fail()?;
            check_eq!(rt.signal_fetch(sig.at(c)).or_fail()?, preset, "preset");
        }
        rt.barrier_all().or_fail()?;
        for (c, &cmp) in Cmp::ALL.iter().enumerate() {
            let (preset, steps) = cmp_sequence(cmp, v);
            let mut prev = preset;
            for (k, &x) in steps.iter().enumerate() {
                let last = k + 1 == steps.len();
                let (value, op) = if (c + k) % 2 == 0 {
                    (x, SignalOp::Set)
                } else {
                    (x.wrapping_sub(prev), SignalOp::Add)
                };
                if last && c % 2 == 0 {
                    let d = [marker(me, round, c)];
                    rt.put_signal(data.at(c), &d, sig.at(c), value, op, right)
                        .or_fail()?;
                } else {
                    if last {
                        rt.put(data.at(c), &[marker(me, round, c)], right)
                            .or_fail()?;
                        rt.fence().or_fail()?;
                    }
                    rt.signal_op(sig.at(c), value, op, right).or_fail()?;
                }
                prev = x;
            }
        }
        for (c, &cmp) in Cmp::ALL.iter().enumerate() {
            let (_, steps) = cmp_sequence(cmp, v);
            let last = *steps.last().expect("non-empty");
            let seen = rt.signal_wait_until(sig.at(c), cmp, v).or_fail()?;
            check_eq!(seen, last, "signal_wait_until({cmp:?}, {v})");
            check_eq!(
                rt.g(data.at(c), me).or_fail()?,
                marker(left, round, c),
                "data put before the signal ({cmp:?})"
            );
            check_eq!(rt.signal_fetch(sig.at(c)).or_fail()?, last, "signal_fetch");
            // A condition that already holds returns at once.
            let again = rt.signal_wait_until(sig.at(c), cmp, v).or_fail()?;
            check_eq!(again, last, "second signal_wait_until({cmp:?})");
        }
        rt.barrier_all().or_fail()?;
    }

    // Many-to-one: every PE put_signals a payload into its slot on every PE and adds its
    // amount to one counter; the sum is complete only when every payload has landed.
    const SLOT: usize = 2048;
    const ROUNDS: u64 = 15;
    let slots = rt.calloc::<u64>(n * SLOT).or_fail()?;
    let counter = rt.calloc::<u64>(1).or_fail()?;
    let amount = |p: usize| 1 + p as u64 * 1000;
    let per_round: u64 = (0..n).map(amount).sum();
    for round in 1..=ROUNDS {
        for k in 0..n {
            let t = (me + k) % n;
            let seed = key(&[5, me as u64, t as u64, round]);
            let len = 1 + (seed % SLOT as u64) as usize;
            let v: Vec<u64> = (0..len).map(|i| elem(seed, i)).collect();
            let sent = if round % 2 == 0 {
                rt.put_signal(
                    slots.at(me * SLOT),
                    &v,
                    counter.at(0),
                    amount(me),
                    SignalOp::Add,
                    t,
                )
            } else {
                rt.put_signal_nbi(
                    slots.at(me * SLOT),
                    &v,
                    counter.at(0),
                    amount(me),
                    SignalOp::Add,
                    t,
                )
            };
            sent.or_fail()?;
        }
        rt.quiet().or_fail()?;
        let want = round * per_round;
        let seen = rt
            .signal_wait_until(counter.at(0), Cmp::Eq, want)
            .or_fail()?;
        check_eq!(seen, want, "counter in round {round}");
        for s in 0..n {
            let seed = key(&[5, s as u64, me as u64, round]);
            let len = 1 + (seed % SLOT as u64) as usize;
            let mut got = vec![0u64; len];
            rt.read_local(slots.at(s * SLOT), &mut got).or_fail()?;
            for (i, g) in got.iter().enumerate() {
                check_eq!(*g, elem(seed, i), "round {round}: element {i} from PE {s}");
            }
        }
        // Nobody overwrites a slot before its owner has checked it.
        rt.barrier_all().or_fail()?;
    }
    check_eq!(
        rt.signal_fetch(counter.at(0)).or_fail()?,
        ROUNDS * per_round,
        "final counter"
    );
    rt.free(slots).or_fail()?;
    rt.free(counter).or_fail()?;
    rt.free(sig).or_fail()?;
    rt.free(data).or_fail()
}

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

// ---------------------------------------------------------------------------------------
// Atomics on u32, u64, i32, i64.

/// One atomic operation of a per-source program, with its operands.
#[derive(Clone, Copy, Debug)]
enum Amo<T> {
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
fn amo_program<T: TInt>(p: usize, t: usize) -> Vec<Amo<T>> {
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
fn amo_run<T: TInt>(
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

// ---------------------------------------------------------------------------------------
// fence / quiet: producer puts data, orders, sets a flag; consumer waits and checks.

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
        let got: &[u64] = match it % 3 {
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

// ---------------------------------------------------------------------------------------
// barrier_all and sync_all.

const B_ROUNDS: u64 = 200;

/// Alternating barrier_all (after put_nbi) and sync_all (after blocking puts and atomics):
/// neither lets a PE through before every PE arrived (an arrival counter on PE 0 is in
/// [n*round, n*round + n - 1] right after), and both make the round's writes visible
/// (two banks of slots, so a PE one round ahead cannot disturb the check).
pub fn barrier_sync(rt: &Runtime) -> Outcome {
    finish(rt, "barrier_sync", barrier_sync_inner(rt))
}

fn barrier_sync_inner(rt: &Runtime) -> Outcome {
    let (me, n, _, _) = neighbours(rt);
    let arrivals = rt.calloc::<u64>(1).or_fail()?;
    let slots = rt.calloc::<u64>(2 * n).or_fail()?;
    for round in 1..=B_ROUNDS {
        let bank = (round % 2) as usize * n;
        rt.atomic_inc(arrivals.at(0), 0).or_fail()?;
        let barrier = round % 2 == 0;
        for t in 0..n {
            let v = key(&[10, me as u64, t as u64, round]);
            if barrier {
                rt.put_nbi(slots.at(bank + me), &[v], t).or_fail()?;
            } else {
                rt.put(slots.at(bank + me), &[v], t).or_fail()?;
            }
        }
        if barrier {
            rt.barrier_all().or_fail()?;
        } else {
            rt.sync_all().or_fail()?;
        }
        let c = rt.atomic_fetch(arrivals.at(0), 0).or_fail()?;
        let lo = n as u64 * round;
        check!(
            (lo..lo + n as u64).contains(&c),
            "after {} of round {round} the arrival count is {c}, expected {lo}..{}",
            if barrier { "barrier_all" } else { "sync_all" },
            lo + n as u64
        );
        let mut got = vec![0u64; n];
        rt.read_local(slots.at(bank), &mut got).or_fail()?;
        for (s, g) in got.iter().enumerate() {
            check_eq!(
                *g,
                key(&[10, s as u64, me as u64, round]),
                "round {round}: slot of PE {s}"
            );
        }
    }
    rt.barrier_all().or_fail()?;
    rt.free(arrivals).or_fail()?;
    rt.free(slots).or_fail()
}

// ---------------------------------------------------------------------------------------
// Local views: read_local, local_atomic, local_slice, local_slice_mut.

/// The owner fills its copy through local_slice_mut while nobody else touches it; after a
/// barrier everyone reads it (remote gets, owner's local_slice); peers put into an inbox
/// that the owner reads through local_slice and read_local after a barrier; local_atomic
/// updates race with peers' AMOs and the sum is exact; and a local_atomic load observes a
/// peer's atomic_set without any barrier.
pub fn local_views(rt: &Runtime) -> Outcome {
    finish(rt, "local_views", local_views_inner(rt))
}

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

// ---------------------------------------------------------------------------------------
// Errors.

fn kind(e: &Error) -> &'static str {
    match e {
        Error::InvalidPe { .. } => "InvalidPe",
        Error::OutOfBounds { .. } => "OutOfBounds",
        Error::InvalidArgument { .. } => "InvalidArgument",
        Error::ForeignAllocation { .. } => "ForeignAllocation",
        Error::Timeout { .. } => "Timeout",
        Error::PeerFailed { .. } => "PeerFailed",
        _ => "other",
    }
}

/// Checks that `r` is an error of `want_kind` whose message contains every needle.
#[track_caller]
fn expect_err<R: Debug>(r: symmem::Result<R>, want_kind: &str, needles: &[String]) -> Outcome {
    let line = std::panic::Location::caller().line();
    match r {
        Ok(v) => Err(format!(
            "line {line}: succeeded with {v:?}, expected a {want_kind} error"
        )),
        Err(e) => {
            let s = e.to_string();
            if kind(&e) != want_kind {
                return Err(format!(
                    "line {line}: {s:?} is a {}, expected {want_kind}",
                    kind(&e)
                ));
            }
            match needles.iter().find(|n| !s.contains(n.as_str())) {
                Some(n) => Err(format!("line {line}: {s:?} lacks {n:?}")),
                None => Ok(()),
            }
        }
    }
}

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

// ---------------------------------------------------------------------------------------
// SYMMEM_TIMEOUT and dead peers.

/// Run with SYMMEM_TIMEOUT=1: each PE waits (wait_until, signal_wait_until or
/// wait_until_any, by PE) for a value nobody will write, and must get a Timeout error
/// naming SYMMEM_TIMEOUT after about a second. Only bootstrap collectives (alloc, free,
/// finalize) synchronize the PEs, so nothing else is bound by the 1 s limit.
pub fn wait_timeout(rt: &Runtime) -> Outcome {
    finish(rt, "wait_timeout", wait_timeout_inner(rt))
}

fn wait_timeout_inner(rt: &Runtime) -> Outcome {
    let me = rt.my_pe();
    check_eq!(
        rt.config().timeout,
        Some(Duration::from_secs(1)),
        "SYMMEM_TIMEOUT"
    );
    let ivars = rt.alloc::<i64>(3).or_fail()?;
    let sig = rt.alloc::<u64>(1).or_fail()?;
    for i in 0..3 {
        rt.atomic_set(ivars.at(i), -1, me).or_fail()?;
    }
    rt.signal_op(sig.at(0), 5, SignalOp::Set, me).or_fail()?;
    let start = Instant::now();
    let (op, what, r) = match me % 3 {
        0 => (
            "wait_until",
            format!("allocation #{}[1] Eq 7 (last seen -1)", ivars.id()),
            rt.wait_until(ivars.at(1), Cmp::Eq, 7).map(drop),
        ),
        1 => (
            "signal_wait_until",
            format!("signal #{}[0] Gt 5 (last seen 5)", sig.id()),
            rt.signal_wait_until(sig.at(0), Cmp::Gt, 5).map(drop),
        ),
        _ => (
            "wait_until_any",
            format!("ivars of allocation #{}", ivars.id()),
            rt.wait_until_any(&ivars, None, Cmp::Ge, 0).map(drop),
        ),
    };
    let elapsed = start.elapsed();
    let msg = r
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default();
    expect_err(
        r,
        "Timeout",
        &[format!(
            "{op} on PE {me} timed out after 1s (SYMMEM_TIMEOUT) waiting for {what}"
        )],
    )?;
    check!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(10),
        "{op} gave up after {elapsed:?} with SYMMEM_TIMEOUT=1"
    );
    println!("ERROR after {} ms: {msg}", elapsed.as_millis());
    rt.free(ivars).or_fail()?;
    rt.free(sig).or_fail()
}

/// Run under symrun with SYMMEM_TIMEOUT=10: the last PE waits until every other PE is
/// about to wait, then kills itself with SIGKILL. The others wait (wait_until,
/// signal_wait_until or wait_until_all, by PE) for values that will never come, and must
/// fail with an error naming the dead PE well within the timeout. They print
/// `ERROR in <op> after <ms> ms: <error>` and exit with code 3.
pub fn kill_wait(rt: &Runtime) -> Outcome {
    let (me, n, _, _) = neighbours(rt);
    let victim = n - 1;
    let ivars = rt.calloc::<u64>(4).or_fail()?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    let ready = rt.calloc::<u64>(1).or_fail()?;
    if me == victim {
        rt.wait_until(ready.at(0), Cmp::Eq, (n - 1) as u64)
            .or_fail()?;
        // SAFETY: raising a signal on our own process; nothing runs after it.
        unsafe { libc::raise(libc::SIGKILL) };
        unreachable!("SIGKILL returned");
    }
    rt.atomic_inc(ready.at(0), victim).or_fail()?;
    let start = Instant::now();
    let (op, r) = match me % 3 {
        0 => (
            "wait_until",
            rt.wait_until(ivars.at(2), Cmp::Eq, 42).map(drop),
        ),
        1 => (
            "signal_wait_until",
            rt.signal_wait_until(sig.at(0), Cmp::Ge, 1).map(drop),
        ),
        _ => (
            "wait_until_all",
            rt.wait_until_all(&ivars, None, Cmp::Ne, 0),
        ),
    };
    let ms = start.elapsed().as_millis();
    match r {
        Err(e) => {
            println!("ERROR in {op} after {ms} ms: {e}");
            // Exit at once: finalize would only report the same failure again.
            std::process::exit(3);
        }
        Ok(()) => Err(format!("PE {me}: {op} returned although nobody wrote")),
    }
}

// ---------------------------------------------------------------------------------------
// Stress: random puts and atomics to random peers, checked exactly.

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
            // SAFETY: between the two barriers around this check nobody writes `region`.
            let mine = unsafe { rt.local_slice(&region) }.or_fail()?;
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
