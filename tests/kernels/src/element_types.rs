//! The narrow floats (`bf16`, `f16`, `Fp8E4M3`, `Fp8E5M2`) converted in kernels and moved
//! with put at every scope; `f32`/`f64` atomic fetch, set and swap; strided `iput`/`iget`
//! at every scope with the warp and block barriers. Scopes as in [`crate::collective`]
//! (`0` thread 0, `1` warp 1 of a [`THREADS`]-thread block, `2` the whole block).

use symmem_device::*;

use crate::collective::{calls, scope_sync, THREADS};

/// Converts `n` f32s of `vals` (sym) to `T` with `conv` into this PE's `stage` (sym), the
/// calling threads splitting the elements, then puts `stage` into `dst` (sym) on the
/// right neighbour at `scope`.
#[inline(always)]
unsafe fn convert_put<T: Copy>(
    dst: *mut T,
    stage: *mut T,
    vals: *const f32,
    n: usize,
    scope: u32,
    conv: fn(f32) -> T,
) {
    if !calls(scope) {
        return;
    }
    let right = (my_pe() + 1) % n_pes();
    let (first, step) = match scope {
        0 => (0, 1),
        1 => (lane_id() as usize, warp_width() as usize),
        _ => (thread_rank() as usize, THREADS as usize),
    };
    let mut i = first;
    while i < n {
        stage.add(i).write(conv(vals.add(i).read()));
        i += step;
    }
    scope_sync(scope);
    match scope {
        0 => put(dst, stage, n, right),
        1 => put_warp(dst, stage, n, right),
        _ => put_block(dst, stage, n, right),
    }
}

/// A value swapped in by thread `t` of PE `pe`: distinct and exact in `f32`.
#[inline(always)]
pub const fn swap_value(pe: u32, t: u32) -> f64 {
    (pe * 1000 + t) as f64 + 0.5
}

/// Every thread swaps [`swap_value`] into `word` on the right neighbour and records the
/// old value in `old[t]` (sym); then thread 0 `atomic_set`s `set_to` into `last` on the
/// right neighbour, `barrier_all`, and `atomic_fetch`es its own `last` into `seen`.
#[inline(always)]
unsafe fn float_amo<T: DeviceWord>(
    word: *mut T,
    old: *mut T,
    last: *mut T,
    seen: *mut T,
    set_to: T,
    conv: fn(f64) -> T,
) {
    let (me, t) = (my_pe(), thread_rank());
    let right = (me + 1) % n_pes();
    old.add(t as usize)
        .write(atomic_swap(word, conv(swap_value(me, t)), right));
    sync_threads();
    if t == 0 {
        atomic_set(last, set_to, right);
        barrier_all();
        seen.write(atomic_fetch(last, me));
    }
}

kernel! {
    /// `vals` (sym, `n` f32s) converted to bf16 in this PE's `stage` and put into `dst` on
    /// the right neighbour (both sym, `n` bf16s) at `scope`.
    pub fn put_bf16(dst: *mut bf16, stage: *mut bf16, vals: *const f32, n: usize, scope: u32) {
        convert_put(dst, stage, vals, n, scope, bf16::from_f32);
    }

    /// [`put_bf16`] with f16.
    pub fn put_f16(dst: *mut f16, stage: *mut f16, vals: *const f32, n: usize, scope: u32) {
        convert_put(dst, stage, vals, n, scope, f16::from_f32);
    }

    /// [`put_bf16`] with FP8 E4M3.
    pub fn put_e4m3(dst: *mut Fp8E4M3, stage: *mut Fp8E4M3, vals: *const f32, n: usize, scope: u32) {
        convert_put(dst, stage, vals, n, scope, Fp8E4M3::from_f32);
    }

    /// [`put_bf16`] with FP8 E5M2.
    pub fn put_e5m2(dst: *mut Fp8E5M2, stage: *mut Fp8E5M2, vals: *const f32, n: usize, scope: u32) {
        convert_put(dst, stage, vals, n, scope, Fp8E5M2::from_f32);
    }

    /// f32 atomics: every thread swaps into `word` on the right neighbour, old values in
    /// `old` (one per thread); thread 0 sets `last` there to `set_to`, `barrier_all`, and
    /// fetches its own `last` into `seen` (all sym).
    pub fn amo_f32(word: *mut f32, old: *mut f32, last: *mut f32, seen: *mut f32, set_to: f32) {
        float_amo(word, old, last, seen, set_to, |v| v as f32);
    }

    /// [`amo_f32`] on f64.
    pub fn amo_f64(word: *mut f64, old: *mut f64, last: *mut f64, seen: *mut f64, set_to: f64) {
        float_amo(word, old, last, seen, set_to, |v| v);
    }

    /// Strided RMA at `scope`: `iput` `n` elements of `src` (sym, every `sst`-th) into
    /// `dst` (sym, every `dstride`-th) on the right neighbour, the barrier of the scope
    /// (`barrier_all`, `barrier_all_warp`, `barrier_all_block`), then `iget` them back
    /// from there, every `dstride`-th, into `got` (sym, contiguous), and
    /// `sync_all` at the scope (`sync_all_warp`, `sync_all_block`) so that no PE's next
    /// launch writes a `dst` another still reads.
    pub fn strided(dst: *mut u64, src: *const u64, got: *mut u64, n: usize, dstride: usize, sst: usize, scope: u32) {
        if !calls(scope) {
            return;
        }
        let right = (my_pe() + 1) % n_pes();
        match scope {
            0 => {
                iput(dst, src, dstride, sst, n, right);
                barrier_all();
                iget(got, dst.cast_const(), 1, dstride, n, right);
                sync_all();
            }
            1 => {
                iput_warp(dst, src, dstride, sst, n, right);
                barrier_all_warp();
                iget_warp(got, dst.cast_const(), 1, dstride, n, right);
                sync_all_warp();
            }
            _ => {
                iput_block(dst, src, dstride, sst, n, right);
                barrier_all_block();
                iget_block(got, dst.cast_const(), 1, dstride, n, right);
                sync_all_block();
            }
        }
    }
}
