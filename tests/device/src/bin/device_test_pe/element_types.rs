//! The narrow floats converted in kernels and put at every scope (bits equal to the host's
//! conversions), `f32`/`f64` atomic fetch, set and swap from kernels and from the host, and
//! strided `iput`/`iget` at every scope with the warp and block barriers (see
//! `symmem_test_kernels::element_types`).

use symmem::device::Kernel;
use symmem::{bf16, f16, Fp8E4M3, Fp8E5M2, Pod, Runtime};
use symmem_test_kernels::collective::THREADS;
use symmem_test_kernels::element_types::{self as k, swap_value};
use symmem_test_kernels::{pattern, PTX};

use super::{check_eq, e2s, read_all, sym, sym_from, Outcome};

/// The scopes: thread, warp, block.
const SCOPES: [u32; 3] = [0, 1, 2];

/// f32 inputs of the conversions from PE `pe`: every special case of the formats (ties,
/// subnormals, overflow, infinities, NaN, signed zeros) and a spread of ordinary values.
fn inputs(pe: u32) -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        1.0 + 1.0 / 256.0,
        17.0,
        19.0,
        448.0,
        464.0,
        57344.0,
        65520.0,
        1e-7,
        6e-8,
        2e-3,
        1e9,
        -1e9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
    ];
    v.extend((0..300).map(|i| ((i as f32) - 150.0) * (0.37 + pe as f32) / 7.0));
    v
}

/// Bit patterns, for exact comparison (NaN included).
fn bits<T: Pod>(v: &[T]) -> Vec<u8> {
    // SAFETY: a `Pod` slice is initialised bytes with no padding, readable as u8s.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        .to_vec()
}

/// One narrow type at every scope: the left neighbour's inputs, converted and put by the
/// kernel, must be the host's conversions bit for bit.
fn narrow<T: Pod>(
    rt: &Runtime,
    name: &str,
    kernel: Kernel<(*mut T, *mut T, *const f32, usize, u32)>,
    conv: fn(f32) -> T,
) -> Outcome {
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let left = (me + n - 1) % n;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let vals = sym_from(rt, &inputs(me))?;
    let len = vals.len();
    let dst = rt.calloc::<T>(len).map_err(e2s)?;
    let stage = rt.calloc::<T>(len).map_err(e2s)?;
    let want: Vec<T> = inputs(left).into_iter().map(conv).collect();
    for scope in SCOPES {
        rt.put(dst.at(0), &vec![T::zeroed(); len], rt.my_pe())
            .map_err(e2s)?;
        rt.barrier_all().map_err(e2s)?;
        let (d, s, v) = (sym(rt, &dst)?, sym(rt, &stage)?, sym(rt, &vals)?);
        // SAFETY: `d`, `s` and `v` are symmetric addresses of `len` elements each.
        unsafe { rt.launch(&m, kernel, 1, THREADS, (d, s, v.cast_const(), len, scope)) }
            .map_err(e2s)?;
        rt.barrier_all().map_err(e2s)?;
        check_eq(
            &format!("{name} put at scope {scope}: bits"),
            &bits(&read_all(rt, &dst)?),
            &bits(&want),
        )?;
    }
    rt.barrier_all().map_err(e2s)?;
    rt.free(vals).map_err(e2s)?;
    rt.free(dst).map_err(e2s)?;
    rt.free(stage).map_err(e2s)
}

/// Every narrow type, converted in kernels and put at every scope.
pub fn narrow_floats(rt: &Runtime) -> Outcome {
    narrow(rt, "bf16", k::put_bf16::KERNEL, bf16::from_f32)?;
    narrow(rt, "f16", k::put_f16::KERNEL, f16::from_f32)?;
    narrow(rt, "e4m3", k::put_e4m3::KERNEL, Fp8E4M3::from_f32)?;
    narrow(rt, "e5m2", k::put_e5m2::KERNEL, Fp8E5M2::from_f32)
}

/// A float type for [`float_amo`]: the host atomics and the conversions it needs.
trait AmoFloat: symmem::SymWord + PartialEq + PartialOrd {
    fn of(v: f64) -> Self;
}

impl AmoFloat for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
}

impl AmoFloat for f64 {
    fn of(v: f64) -> Self {
        v
    }
}

/// The device swaps, set and fetch of `amo_f*` with host atomics around them: the host
/// sets each PE's word (`atomic_set`), the kernel's 48 threads swap into the right
/// neighbour's word, and the left neighbour's old values plus this PE's final word must be
/// its initial value plus every value swapped in, exactly; the device `atomic_set` of the
/// left neighbour must be what the device `atomic_fetch` saw; a host `atomic_swap` and
/// `atomic_fetch` on the right neighbour then see and leave the expected values.
fn float_amo<T: AmoFloat>(
    rt: &Runtime,
    kernel: Kernel<(*mut T, *mut T, *mut T, *mut T, T)>,
) -> Outcome {
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let name = std::any::type_name::<T>();
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let threads = THREADS as usize;
    let word = rt.calloc::<T>(1).map_err(e2s)?;
    let old = rt.calloc::<T>(threads).map_err(e2s)?;
    let last = rt.calloc::<T>(1).map_err(e2s)?;
    let seen = rt.calloc::<T>(1).map_err(e2s)?;
    let init = |pe: u32| T::of(-(pe as f64) - 0.25);
    rt.atomic_set(word.at(0), init(me), rt.my_pe())
        .map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let set_to = |pe: u32| T::of(pe as f64 * 3.0 + 0.125);
    let (w, o, l, s) = (
        sym(rt, &word)?,
        sym(rt, &old)?,
        sym(rt, &last)?,
        sym(rt, &seen)?,
    );
    // SAFETY: `w`, `l`, `s` are symmetric addresses of one element, `o` of one per thread.
    unsafe { rt.launch(&m, kernel, 1, THREADS, (w, o, l, s, set_to(me))) }.map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let final_word = rt.atomic_fetch(word.at(0), rt.my_pe()).map_err(e2s)?;
    let mut theirs = vec![T::zeroed(); threads];
    rt.get(old.at(0), &mut theirs, left as usize).map_err(e2s)?;
    theirs.push(final_word);
    let mut want: Vec<T> = (0..THREADS).map(|t| T::of(swap_value(left, t))).collect();
    want.push(init(me));
    let sorted = |mut v: Vec<T>| {
        v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
        v
    };
    check_eq(
        &format!("{name} swaps: old values and the final word"),
        &sorted(theirs),
        &sorted(want),
    )?;
    check_eq(
        &format!("{name} device atomic_fetch after the left's atomic_set"),
        &read_all(rt, &seen)?,
        &[set_to(left)],
    )?;
    rt.barrier_all().map_err(e2s)?;
    // Host swap on the right neighbour's `last` (which holds our `set_to`).
    let got = rt
        .atomic_swap(last.at(0), T::of(0.5), right as usize)
        .map_err(e2s)?;
    check_eq(
        &format!("{name} host atomic_swap's old value"),
        &[got],
        &[set_to(me)],
    )?;
    let now = rt.atomic_fetch(last.at(0), right as usize).map_err(e2s)?;
    check_eq(
        &format!("{name} host atomic_fetch after it"),
        &[now],
        &[T::of(0.5)],
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(word).map_err(e2s)?;
    rt.free(old).map_err(e2s)?;
    rt.free(last).map_err(e2s)?;
    rt.free(seen).map_err(e2s)
}

/// f32 and f64 atomic fetch, set and swap, from kernels and the host.
pub fn float_atomics(rt: &Runtime) -> Outcome {
    float_amo::<f32>(rt, k::amo_f32::KERNEL)?;
    float_amo::<f64>(rt, k::amo_f64::KERNEL)
}

/// Strided put and get at every scope, for a few stride pairs: this PE's `dst` holds the
/// left neighbour's strided source at every `dstride`-th element and nothing between or
/// after (a guard), and `got` holds this PE's own source, gathered back.
pub fn strided(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe() as u32, rt.n_pes() as u32);
    let left = (me + n - 1) % n;
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let nelems = 37usize;
    let source = |pe: u32| -> Vec<u64> { (0..nelems * 4).map(|i| pattern(pe, 7, i)).collect() };
    let src = sym_from(rt, &source(me))?;
    let dst = rt.calloc::<u64>(nelems * 4 + 16).map_err(e2s)?;
    let got = rt.calloc::<u64>(nelems).map_err(e2s)?;
    for (dstride, sst) in [(1usize, 1usize), (3, 2), (2, 4), (4, 1)] {
        for scope in SCOPES {
            let what = format!("iput/iget dst stride {dstride}, src stride {sst}, scope {scope}");
            rt.put(dst.at(0), &vec![0; dst.len()], rt.my_pe())
                .map_err(e2s)?;
            rt.put(got.at(0), &vec![0; nelems], rt.my_pe())
                .map_err(e2s)?;
            rt.barrier_all().map_err(e2s)?;
            let (d, s, g) = (sym(rt, &dst)?, sym(rt, &src)?, sym(rt, &got)?);
            // SAFETY: `d` holds `(nelems - 1) * dstride + 1` u64s and more, `s`
            // `(nelems - 1) * sst + 1`, `g` `nelems`: symmetric addresses.
            unsafe {
                rt.launch(
                    &m,
                    k::strided::KERNEL,
                    1,
                    THREADS,
                    (d, s.cast_const(), g, nelems, dstride, sst, scope),
                )
            }
            .map_err(|e| format!("{what}: {e}"))?;
            let theirs = source(left);
            let mut want = vec![0u64; dst.len()];
            for i in 0..nelems {
                want[i * dstride] = theirs[i * sst];
            }
            check_eq(&format!("{what}: dst"), &read_all(rt, &dst)?, &want)?;
            let mine = source(me);
            let want: Vec<u64> = (0..nelems).map(|i| mine[i * sst]).collect();
            check_eq(&format!("{what}: got"), &read_all(rt, &got)?, &want)?;
            rt.barrier_all().map_err(e2s)?;
        }
    }
    rt.free(src).map_err(e2s)?;
    rt.free(dst).map_err(e2s)?;
    rt.free(got).map_err(e2s)
}
