//! GPU (nvptx64) primitives of thread groups: a block's shared memory (`.shared`), warp
//! intrinsics (`vote`, `shfl`, `match`, `activemask`, all `.sync` forms of sm_70+) and
//! block-scope atomics (`atom.relaxed.cta`, inline PTX: LLVM would emit GPU scope).
//! Addresses are generic: shared memory is converted with `cvta.shared` once, so one
//! pointer type serves every operation.

use core::arch::{asm, global_asm};

use crate::ops::ShflMode;

// The block's dynamic shared memory, sized at launch (`sharedMemBytes`); 16-byte aligned,
// as CUDA aligns `extern __shared__` arrays.
global_asm!(".extern .shared .align 16 .b8 symmem_dynamic_shared[];");

/// The calling block's dynamic shared memory: its generic address and size in bytes
/// (`%dynamic_smem_size`).
#[inline(always)]
pub fn dynamic_shared() -> (*mut u8, usize) {
    let (p, n): (u64, u32);
    // SAFETY: an address conversion and a special-register read: no memory access.
    unsafe {
        asm!(
            "cvta.shared.u64 {p}, symmem_dynamic_shared;",
            "mov.u32 {n}, %dynamic_smem_size;",
            p = out(reg64) p,
            n = out(reg32) n,
            options(pure, nomem, nostack)
        )
    };
    (p as *mut u8, n as usize)
}

/// `activemask.b32`: the lanes of this warp executing it together.
#[inline(always)]
pub fn active_mask() -> u32 {
    let m: u32;
    // SAFETY: reads which lanes are active; no memory access.
    unsafe { asm!("activemask.b32 {m};", m = out(reg32) m, options(nomem, nostack)) };
    m
}

/// `vote.sync.ballot.b32`: the lanes of `mask` whose `pred` is true.
#[inline(always)]
pub fn ballot(mask: u32, pred: bool) -> u32 {
    let d: u32;
    // SAFETY: a warp vote among the lanes of `mask` (caller contract: each calls it).
    unsafe {
        asm!(
            "{{ .reg .pred %p; setp.ne.u32 %p, {v}, 0; vote.sync.ballot.b32 {d}, %p, {m}; }}",
            d = out(reg32) d,
            v = in(reg32) pred as u32,
            m = in(reg32) mask,
            options(nostack)
        )
    };
    d
}

/// One `shfl.sync` of 32 bits.
#[inline(always)]
fn shfl32(mask: u32, a: u32, mode: ShflMode, b: u32) -> u32 {
    let d: u32;
    // SAFETY: a warp shuffle among the lanes of `mask` (caller contract: each calls it).
    // `c` packs the clamp (lane 31, or 0 for up) with a segment mask of 0: the whole warp.
    unsafe {
        match mode {
            ShflMode::Idx => asm!("shfl.sync.idx.b32 {d}, {a}, {b}, 31, {m};",
                d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, m = in(reg32) mask, options(nostack)),
            ShflMode::Up => asm!("shfl.sync.up.b32 {d}, {a}, {b}, 0, {m};",
                d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, m = in(reg32) mask, options(nostack)),
            ShflMode::Down => asm!("shfl.sync.down.b32 {d}, {a}, {b}, 31, {m};",
                d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, m = in(reg32) mask, options(nostack)),
            ShflMode::Xor => asm!("shfl.sync.bfly.b32 {d}, {a}, {b}, 31, {m};",
                d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, m = in(reg32) mask, options(nostack)),
        }
    };
    d
}

/// `shfl.sync`: the value `bits` of the lane that `mode` and `b` name; a 64-bit value
/// (`wide`) takes two shuffles.
#[inline(always)]
pub fn shfl(mask: u32, bits: u64, wide: bool, mode: ShflMode, b: u32) -> u64 {
    let lo = shfl32(mask, bits as u32, mode, b) as u64;
    if wide {
        lo | (shfl32(mask, (bits >> 32) as u32, mode, b) as u64) << 32
    } else {
        lo
    }
}

/// `match.any.sync`: the lanes of `mask` whose value equals this lane's.
#[inline(always)]
pub fn match_any(mask: u32, bits: u64, wide: bool) -> u32 {
    let d: u32;
    // SAFETY: a warp match among the lanes of `mask` (caller contract: each calls it).
    unsafe {
        if wide {
            asm!("match.any.sync.b64 {d}, {a}, {m};",
                d = out(reg32) d, a = in(reg64) bits, m = in(reg32) mask, options(nostack))
        } else {
            asm!("match.any.sync.b32 {d}, {a}, {m};",
                d = out(reg32) d, a = in(reg32) bits as u32, m = in(reg32) mask, options(nostack))
        }
    };
    d
}

/// `match.all.sync`: `mask` if every lane of it has this lane's value, else 0.
#[inline(always)]
pub fn match_all(mask: u32, bits: u64, wide: bool) -> u32 {
    let d: u32;
    // SAFETY: a warp match among the lanes of `mask` (caller contract: each calls it).
    unsafe {
        if wide {
            asm!("match.all.sync.b64 {d}, {a}, {m};",
                d = out(reg32) d, a = in(reg64) bits, m = in(reg32) mask, options(nostack))
        } else {
            asm!("match.all.sync.b32 {d}, {a}, {m};",
                d = out(reg32) d, a = in(reg32) bits as u32, m = in(reg32) mask, options(nostack))
        }
    };
    d
}

macro_rules! cta_atom {
    ($name:ident, $op:literal, $t:ty, $reg:ident) => {
        #[doc = concat!("`atom.relaxed.cta.", $op, "`: returns the old value; atomic among the threads of this block.")]
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline(always)]
        pub unsafe fn $name(p: *mut $t, v: $t) -> $t {
            let old: $t;
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe {
                asm!(
                    concat!("atom.relaxed.cta.", $op, " {o}, [{p}], {v};"),
                    o = out($reg) old,
                    p = in(reg64) p,
                    v = in($reg) v,
                    options(nostack)
                )
            };
            old
        }
    };
}

macro_rules! cta_cas {
    ($name:ident, $op:literal, $t:ty, $reg:ident) => {
        #[doc = concat!("`atom.relaxed.cta.", $op, "`: stores `v` if `*p == cond`; returns the old value.")]
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline(always)]
        pub unsafe fn $name(p: *mut $t, cond: $t, v: $t) -> $t {
            let old: $t;
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe {
                asm!(
                    concat!("atom.relaxed.cta.", $op, " {o}, [{p}], {c}, {v};"),
                    o = out($reg) old,
                    p = in(reg64) p,
                    c = in($reg) cond,
                    v = in($reg) v,
                    options(nostack)
                )
            };
            old
        }
    };
}

cta_atom!(cta_add_u32, "add.u32", u32, reg32);
cta_atom!(cta_add_i32, "add.s32", i32, reg32);
cta_atom!(cta_add_u64, "add.u64", u64, reg64);
cta_atom!(cta_add_i64, "add.u64", i64, reg64);
cta_atom!(cta_exch_u32, "exch.b32", u32, reg32);
cta_atom!(cta_exch_i32, "exch.b32", i32, reg32);
cta_atom!(cta_exch_u64, "exch.b64", u64, reg64);
cta_atom!(cta_exch_i64, "exch.b64", i64, reg64);
cta_atom!(cta_min_u32, "min.u32", u32, reg32);
cta_atom!(cta_min_i32, "min.s32", i32, reg32);
cta_atom!(cta_min_u64, "min.u64", u64, reg64);
cta_atom!(cta_min_i64, "min.s64", i64, reg64);
cta_atom!(cta_max_u32, "max.u32", u32, reg32);
cta_atom!(cta_max_i32, "max.s32", i32, reg32);
cta_atom!(cta_max_u64, "max.u64", u64, reg64);
cta_atom!(cta_max_i64, "max.s64", i64, reg64);
cta_cas!(cta_cas_u32, "cas.b32", u32, reg32);
cta_cas!(cta_cas_i32, "cas.b32", i32, reg32);
cta_cas!(cta_cas_u64, "cas.b64", u64, reg64);
cta_cas!(cta_cas_i64, "cas.b64", i64, reg64);
