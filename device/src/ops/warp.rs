//! Warp intrinsics: `activemask`, `ballot`, `shfl` (idx, up, down, xor) on 32- and 64-bit
//! values, `match_any`/`match_all`, `popc`.
//!
//! Every lane of `mask` must call the same intrinsic with the same `mask`, and the calling
//! lane must be in it (CUDA's `__*_sync` rule). On the CPU executor the fibers of the
//! warp really meet and exchange their values, and a broken rule fails the launch with a
//! message instead of leaving a value undefined: a lane outside the mask calling, a mask
//! naming a lane that has exited or that the warp does not have (a partial last warp), a
//! shuffle reading a lane outside the mask, or lanes disagreeing on the mask.

use super::{block_dim, warp_id};
use crate::geometry::WARP_SIZE;
use crate::group_arch as arch;

/// Every lane of a full warp.
pub const ALL_LANES: u32 = u32::MAX;

/// Which lane a shuffle reads (PTX `shfl.sync` modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShflMode {
    /// Lane `b`.
    Idx,
    /// Lane `lane - b` (this lane's own value below `b`).
    Up,
    /// Lane `lane + b` (this lane's own value past lane 31).
    Down,
    /// Lane `lane ^ b`.
    Xor,
}

impl ShflMode {
    /// The public function's name, for messages.
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn name(self) -> &'static str {
        match self {
            ShflMode::Idx => "shfl",
            ShflMode::Up => "shfl_up",
            ShflMode::Down => "shfl_down",
            ShflMode::Xor => "shfl_xor",
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A value the warp intrinsics move or compare: 32- and 64-bit integers and floats (a
/// 64-bit value is shuffled as two 32-bit halves on the GPU).
pub trait WarpValue: Copy + sealed::Sealed {
    /// Whether it has 64 bits.
    #[doc(hidden)]
    const WIDE: bool;
    /// Its bits, zero-extended.
    #[doc(hidden)]
    fn to_bits(self) -> u64;
    /// The value of the low bits of `bits`.
    #[doc(hidden)]
    fn from_bits(bits: u64) -> Self;
}

macro_rules! warp_value {
    ($($t:ty, $wide:literal, |$v:ident| $to:expr, |$b:ident| $from:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl WarpValue for $t {
            const WIDE: bool = $wide;
            #[inline(always)]
            fn to_bits(self) -> u64 {
                let $v = self;
                $to
            }
            #[inline(always)]
            fn from_bits($b: u64) -> Self {
                $from
            }
        }
    )*};
}

warp_value! {
    u32, false, |v| v as u64, |b| b as u32;
    i32, false, |v| v as u32 as u64, |b| b as u32 as i32;
    f32, false, |v| v.to_bits() as u64, |b| f32::from_bits(b as u32);
    u64, true, |v| v, |b| b;
    i64, true, |v| v as u64, |b| b as i64;
    f64, true, |v| v.to_bits(), |b| f64::from_bits(b);
}

/// The lanes this thread's warp has: [`ALL_LANES`], or the low `warp_width()` lanes in a
/// block's partial last warp. The mask to pass when every thread of the warp takes part.
#[inline(always)]
pub fn warp_mask() -> u32 {
    let threads = block_dim().volume();
    let width = (threads - warp_id() * WARP_SIZE).min(WARP_SIZE);
    if width >= WARP_SIZE {
        ALL_LANES
    } else {
        (1u32 << width) - 1
    }
}

/// `__activemask()`: the lanes of this warp executing this call together. On the CPU
/// executor, every lane of the warp that has not exited (a GPU may name fewer inside a
/// divergent branch; to be portable, build a mask with [`ballot`]).
#[inline(always)]
pub fn active_mask() -> u32 {
    arch::active_mask()
}

/// `__ballot_sync(mask, pred)`: the lanes of `mask` whose `pred` is true.
#[inline(always)]
pub fn ballot(mask: u32, pred: bool) -> u32 {
    arch::ballot(mask, pred)
}

/// `__shfl_sync(mask, v, src_lane)`: `v` of lane `src_lane % 32`, which must be in
/// `mask`.
#[inline(always)]
pub fn shfl<T: WarpValue>(mask: u32, v: T, src_lane: u32) -> T {
    T::from_bits(arch::shfl(
        mask,
        v.to_bits(),
        T::WIDE,
        ShflMode::Idx,
        src_lane,
    ))
}

/// `__shfl_up_sync(mask, v, delta)`: `v` of lane `lane - delta`; lanes below `delta`
/// get their own `v`.
#[inline(always)]
pub fn shfl_up<T: WarpValue>(mask: u32, v: T, delta: u32) -> T {
    T::from_bits(arch::shfl(mask, v.to_bits(), T::WIDE, ShflMode::Up, delta))
}

/// `__shfl_down_sync(mask, v, delta)`: `v` of lane `lane + delta`; lanes whose
/// `lane + delta` is past 31 get their own `v`.
#[inline(always)]
pub fn shfl_down<T: WarpValue>(mask: u32, v: T, delta: u32) -> T {
    T::from_bits(arch::shfl(
        mask,
        v.to_bits(),
        T::WIDE,
        ShflMode::Down,
        delta,
    ))
}

/// `__shfl_xor_sync(mask, v, lane_mask)`: `v` of lane `lane ^ lane_mask` (a butterfly).
#[inline(always)]
pub fn shfl_xor<T: WarpValue>(mask: u32, v: T, lane_mask: u32) -> T {
    T::from_bits(arch::shfl(
        mask,
        v.to_bits(),
        T::WIDE,
        ShflMode::Xor,
        lane_mask,
    ))
}

/// `__match_any_sync(mask, v)`: the lanes of `mask` whose `v` equals this lane's (by
/// bits: `-0.0` and `0.0` differ, a NaN matches the same NaN).
#[inline(always)]
pub fn match_any<T: WarpValue>(mask: u32, v: T) -> u32 {
    arch::match_any(mask, v.to_bits(), T::WIDE)
}

/// `__match_all_sync(mask, v, &pred)`: `Some(mask)` if every lane of `mask` has this
/// lane's `v` (by bits), else `None`.
#[inline(always)]
pub fn match_all<T: WarpValue>(mask: u32, v: T) -> Option<u32> {
    let m = arch::match_all(mask, v.to_bits(), T::WIDE);
    (m != 0).then_some(m)
}

/// `__popc(x)`: the number of set bits (a lane count of a mask).
#[inline(always)]
pub fn popc(x: u32) -> u32 {
    x.count_ones()
}
