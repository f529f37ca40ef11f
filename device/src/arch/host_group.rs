//! CPU-executor primitives of thread groups: a block's shared memory, warp exchanges and
//! block-scope atomics. The executor keeps each block's memory and lets the fibers of a
//! warp meet (see [`Executor::warp_exchange`](crate::host::Executor::warp_exchange));
//! every fiber of a block runs on one OS thread, so block-scope atomics are plain Rust
//! atomics.

use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

use crate::arch::{current, obey};
use crate::ops::ShflMode;

/// The calling block's memory of the `shared!` array `key`: `size` bytes aligned to
/// `align`.
#[inline]
pub fn block_shared(key: usize, size: usize, align: usize) -> *mut u8 {
    let ctx = current();
    obey(ctx.executor.block_shared(ctx, key, size, align))
}

/// The calling block's dynamic shared memory: address and bytes.
#[inline]
pub fn dynamic_shared() -> (*mut u8, usize) {
    let ctx = current();
    ctx.executor.dynamic_shared(ctx)
}

/// The lanes of this warp that have not exited.
#[inline]
pub fn active_mask() -> u32 {
    let ctx = current();
    ctx.executor.active_mask(ctx)
}

/// Every lane's `value` once the lanes of `mask` have all called it.
fn exchange(mask: u32, value: u64) -> [u64; 32] {
    let ctx = current();
    obey(ctx.executor.warp_exchange(ctx, mask, value))
}

/// The lanes of `mask` whose value satisfies `keep`.
fn lanes_where(mask: u32, values: &[u64; 32], keep: impl Fn(u64) -> bool) -> u32 {
    (0..32)
        .filter(|&l| mask & (1 << l) != 0 && keep(values[l as usize]))
        .fold(0, |m, l| m | 1 << l)
}

/// `vote.sync.ballot`: the lanes of `mask` whose `pred` is true.
pub fn ballot(mask: u32, pred: bool) -> u32 {
    let values = exchange(mask, pred as u64);
    lanes_where(mask, &values, |v| v != 0)
}

/// `shfl.sync`: the value `bits` of the lane that `mode` and `b` name (this lane's own
/// when that lane is past the warp's end, as CUDA does for up and down). Reading a lane
/// outside `mask` panics: CUDA leaves its value undefined.
pub fn shfl(mask: u32, bits: u64, _wide: bool, mode: ShflMode, b: u32) -> u64 {
    let lane = crate::arch::lane_id();
    let src = match mode {
        ShflMode::Idx => b % 32,
        ShflMode::Up => lane.checked_sub(b).unwrap_or(lane),
        ShflMode::Down => Some(lane.saturating_add(b))
            .filter(|&s| s < 32)
            .unwrap_or(lane),
        ShflMode::Xor => lane ^ (b % 32),
    };
    let values = exchange(mask, bits);
    assert!(
        mask & (1 << src) != 0,
        "{}: lane {lane} reads lane {src}, which is not in the mask {mask:#010x} (CUDA leaves that value undefined)",
        mode.name()
    );
    values[src as usize]
}

/// `match.any.sync`: the lanes of `mask` whose value equals this lane's.
pub fn match_any(mask: u32, bits: u64, _wide: bool) -> u32 {
    let values = exchange(mask, bits);
    lanes_where(mask, &values, |v| v == bits)
}

/// `match.all.sync`: `mask` if every lane of it has this lane's value, else 0.
pub fn match_all(mask: u32, bits: u64, _wide: bool) -> u32 {
    let values = exchange(mask, bits);
    if lanes_where(mask, &values, |v| v == bits) == mask {
        mask
    } else {
        0
    }
}

macro_rules! cta_atomics {
    ($t:ty, $atomic:ty, $add:ident, $exch:ident, $cas:ident, $min:ident, $max:ident) => {
        #[doc = concat!("Block-scope relaxed add on a `", stringify!($t), "` (wrapping); returns the old value.")]
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline]
        pub unsafe fn $add(p: *mut $t, v: $t) -> $t {
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe { <$atomic>::from_ptr(p) }.fetch_add(v, Ordering::Relaxed)
        }

        #[doc = concat!("Block-scope relaxed exchange of a `", stringify!($t), "`; returns the old value.")]
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline]
        pub unsafe fn $exch(p: *mut $t, v: $t) -> $t {
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe { <$atomic>::from_ptr(p) }.swap(v, Ordering::Relaxed)
        }

        #[doc = concat!("Block-scope relaxed compare-and-swap of a `", stringify!($t), "`; returns the old value.")]
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline]
        pub unsafe fn $cas(p: *mut $t, cond: $t, v: $t) -> $t {
            // SAFETY: the caller guarantees `p` is valid and aligned.
            match unsafe { <$atomic>::from_ptr(p) }.compare_exchange(
                cond,
                v,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(old) | Err(old) => old,
            }
        }

        #[doc = concat!("Block-scope relaxed minimum of a `", stringify!($t), "`; returns the old value.")]
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline]
        pub unsafe fn $min(p: *mut $t, v: $t) -> $t {
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe { <$atomic>::from_ptr(p) }.fetch_min(v, Ordering::Relaxed)
        }

        #[doc = concat!("Block-scope relaxed maximum of a `", stringify!($t), "`; returns the old value.")]
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline]
        pub unsafe fn $max(p: *mut $t, v: $t) -> $t {
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe { <$atomic>::from_ptr(p) }.fetch_max(v, Ordering::Relaxed)
        }
    };
}

cta_atomics!(
    u32,
    AtomicU32,
    cta_add_u32,
    cta_exch_u32,
    cta_cas_u32,
    cta_min_u32,
    cta_max_u32
);
cta_atomics!(
    i32,
    AtomicI32,
    cta_add_i32,
    cta_exch_i32,
    cta_cas_i32,
    cta_min_i32,
    cta_max_i32
);
cta_atomics!(
    u64,
    AtomicU64,
    cta_add_u64,
    cta_exch_u64,
    cta_cas_u64,
    cta_min_u64,
    cta_max_u64
);
cta_atomics!(
    i64,
    AtomicI64,
    cta_add_i64,
    cta_exch_i64,
    cta_cas_i64,
    cta_min_i64,
    cta_max_i64
);
