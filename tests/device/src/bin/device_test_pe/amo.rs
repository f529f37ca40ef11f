//! Every device atomic on u32, i32, u64 and i64, contended by every thread of every PE on
//! every PE, with exact final values (see `symmem_test_kernels::amo` for the layout).

use std::fmt::Debug;

use symmem::device::Kernel;
use symmem::{Pod, Runtime};
use symmem_test_kernels::amo::{self as k, *};
use symmem_test_kernels::PTX;

use super::{check_eq, e2s, read_all, sym, sym_from, Outcome};

/// Launch shape: 2 blocks of 64 threads per PE.
const GRID: u32 = 2;
const BLOCK: u32 = 64;
const PER_PE: usize = (GRID * BLOCK) as usize;

/// The integer operations the expected values need, with wrap-around like the device's.
trait Int: Pod + Ord + Debug {
    const BITS: u32;
    const SIGNED: bool;
    /// `v` truncated to this type (two's complement).
    fn wrap(v: i128) -> Self;
    fn add(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn not(self) -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            const BITS: u32 = <$t>::BITS;
            const SIGNED: bool = <$t>::MIN != 0;
            fn wrap(v: i128) -> Self { v as $t }
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn and(self, o: Self) -> Self { self & o }
            fn or(self, o: Self) -> Self { self | o }
            fn xor(self, o: Self) -> Self { self ^ o }
            fn not(self) -> Self { !self }
        }
    )*};
}
int!(u32, i32, u64, i64);

/// A well-mixed 64-bit value of `x` (splitmix64).
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `v` made negative for signed types and moved above 2^32 for 64-bit ones, so that a
/// sign or width mistake changes the results.
fn typed<T: Int>(v: i128) -> T {
    let wide = if T::BITS == 64 { v << 32 | v } else { v };
    T::wrap(if T::SIGNED { -wide } else { wide })
}

/// Thread `gid`'s values: add amount, or mask, and mask, xor mask, token. Amounts and
/// tokens are distinct and tokens never zero.
fn thread_vals<T: Int>(gid: usize) -> [T; VALS_PER_THREAD] {
    let g = gid as i128;
    let bit = |k: i128| T::wrap(1i128 << (k % T::BITS as i128));
    [
        typed(3 * g + 1),
        bit(7 * g + 3).or(bit(13 * g + 5)),
        bit(5 * g + 1).not(),
        T::wrap(mix(gid as u64) as i128),
        typed((g + 1) * 1_000_003),
    ]
}

/// PE `s`'s SOLO values `a b c d e f` (`f != a`).
fn solo_vals<T: Int>(s: usize) -> [T; SOLO_VALUES] {
    let s = s as i128;
    [
        typed(0x1234_5678 + s),
        typed(0x11 + 2 * s),
        T::wrap(0xF0i128 << s).not(),
        T::wrap(0x0100_0001i128 << s),
        T::wrap(mix(999 + s as u64) as i128),
        typed(77 + s),
    ]
}

/// What PE `s`'s thread 0 sees on its SOLO word of any PE, and the word's final value.
fn solo_expected<T: Int>(s: usize) -> ([T; SOLO_RESULTS], T) {
    let [a, b, c, d, e, f] = solo_vals::<T>(s);
    let one = T::wrap(1);
    let x1 = a.add(b);
    let x2 = x1.and(c);
    let x3 = x2.or(d);
    let x4 = x3.xor(e);
    let x5 = x4.add(one);
    // The second pass (add, and, or, xor, inc from `a`) ends where the first did.
    ([a, a, x1, x2, x3, x4, x5, f, f, a, x5], x5)
}

/// Sorted copy.
fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

/// One type: run the kernel and check this PE's words and results exactly.
fn amo_case<T: Int>(
    rt: &Runtime,
    name: &str,
    kernel: Kernel<(*mut T, *mut T, *const T, *const T, *mut T)>,
) -> Outcome {
    // Loaded here rather than once per scenario: symmem does not export the module's
    // type, so a function cannot take it as an argument.
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let all = n * PER_PE;
    let slots = rt.calloc::<T>(SLOTS_SHARED + n).map_err(e2s)?;
    let res = rt.calloc::<T>(3 * all).map_err(e2s)?;
    rt.put(slots.at(AND), &[T::wrap(-1)], me).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let vals: Vec<T> = (0..PER_PE)
        .flat_map(|g| thread_vals::<T>(me * PER_PE + g))
        .collect();
    let vals = sym_from(rt, &vals)?;
    let solo = sym_from(rt, &solo_vals::<T>(me))?;
    let solo_out = rt.calloc::<T>(n * SOLO_RESULTS).map_err(e2s)?;
    let (sp, rp) = (sym(rt, &slots)?, sym(rt, &res)?);
    let (vp, solop) = (sym(rt, &vals)?.cast_const(), sym(rt, &solo)?.cast_const());
    let outp = sym(rt, &solo_out)?;
    // SAFETY: `sp`, `rp`, `vp`, `solop` and `outp` are symmetric addresses of
    // `SLOTS_SHARED + n`, `3 * all`, `VALS_PER_THREAD * PER_PE`, `SOLO_VALUES` and
    // `SOLO_RESULTS * n` T; `outp` is written by thread 0 only.
    unsafe { rt.launch(&m, kernel, GRID, BLOCK, (sp, rp, vp, solop, outp)) }
        .map_err(|e| format!("{name}: {e}"))?;
    rt.barrier_all().map_err(e2s)?;

    let every: Vec<[T; VALS_PER_THREAD]> = (0..all).map(thread_vals::<T>).collect();
    let fold = |k: usize, init: T, f: fn(T, T) -> T| every.iter().fold(init, |acc, v| f(acc, v[k]));
    let mut want = vec![
        fold(0, T::wrap(0), T::add),
        T::wrap(all as i128),
        fold(1, T::wrap(0), T::or),
        fold(2, T::wrap(-1), T::and),
        fold(3, T::wrap(0), T::xor),
    ];
    let got = read_all(rt, &slots)?;
    want.extend_from_slice(&got[SWAP..=CAS]); // checked below, as permutations
    want.extend((0..n).map(|s| solo_expected::<T>(s).1));
    check_eq(&format!("{name}: final words"), &got, &want)?;
    let results = read_all(rt, &res)?;
    let mut with_initial: Vec<T> = every.iter().map(|v| v[4]).collect();
    with_initial.push(T::wrap(0));
    let with_initial = sorted(&with_initial);
    let mut swapped = results[..all].to_vec();
    swapped.push(got[SWAP]);
    check_eq(
        &format!("{name}: values replaced by swap, and the last token"),
        &sorted(&swapped),
        &with_initial,
    )?;
    let tickets: Vec<T> = (0..all).map(|i| T::wrap(i as i128)).collect();
    check_eq(
        &format!("{name}: fetch_inc tickets"),
        &sorted(&results[all..2 * all]),
        &tickets,
    )?;
    check_eq(
        &format!("{name}: ticket word"),
        &[got[TICKET]],
        &[T::wrap(all as i128)],
    )?;
    let mut replaced = results[2 * all..].to_vec();
    replaced.push(got[CAS]);
    check_eq(
        &format!("{name}: values replaced by compare_swap, and the last token"),
        &sorted(&replaced),
        &with_initial,
    )?;
    let want_solo: Vec<T> = (0..n).flat_map(|_| solo_expected::<T>(me).0).collect();
    check_eq(
        &format!("{name}: thread 0's fetched values on every PE"),
        &read_all(rt, &solo_out)?,
        &want_solo,
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(slots).map_err(e2s)?;
    rt.free(res).map_err(e2s)?;
    rt.free(vals).map_err(e2s)?;
    rt.free(solo).map_err(e2s)?;
    rt.free(solo_out).map_err(e2s)
}

/// Every atomic on the unsigned types: the half of [`atomics`] that the 2-node suite runs,
/// where every compare-and-swap retry crosses the proxy and the socket transport.
pub fn atomics_unsigned(rt: &Runtime) -> Outcome {
    amo_case::<u32>(rt, "u32", k::amo_u32::KERNEL)?;
    amo_case::<u64>(rt, "u64", k::amo_u64::KERNEL)
}

/// Every atomic on every integer type.
pub fn atomics(rt: &Runtime) -> Outcome {
    amo_case::<u32>(rt, "u32", k::amo_u32::KERNEL)?;
    amo_case::<i32>(rt, "i32", k::amo_i32::KERNEL)?;
    amo_case::<u64>(rt, "u64", k::amo_u64::KERNEL)?;
    amo_case::<i64>(rt, "i64", k::amo_i64::KERNEL)
}
