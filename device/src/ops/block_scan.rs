//! Block-wide helpers built on shared memory, warp shuffles and the block barrier: an
//! exclusive and an inclusive prefix sum, and a histogram. Every thread of the block must
//! call them (the `_block` rule), in the same order.
//!
//! The scan adds within each warp with five `shfl_up` steps, publishes each warp's total
//! in a 32-entry shared array, and every thread adds the totals of the warps before its
//! own: two `sync_threads`, for any block size (a partial last warp included).

use super::shared::SharedSlice;
use super::warp::{shfl_up, warp_mask};
use super::{block_dim, lane_id, sync_threads, warp_id};
use crate::geometry::WARP_SIZE;

crate::shared! {
    /// Each warp's total during a scan, as bits.
    static WARP_TOTALS: [u64; 32];
}

mod sealed {
    pub trait Sealed {}
}

/// A value the block scans add: 32- and 64-bit integers (wrapping) and floats.
pub trait Scannable: super::warp::WarpValue + sealed::Sealed {
    /// The sum of nothing.
    #[doc(hidden)]
    const ZERO: Self;
    /// `self + other`, wrapping for integers.
    #[doc(hidden)]
    fn plus(self, other: Self) -> Self;
}

macro_rules! scannable {
    ($($t:ty, $zero:expr, |$a:ident, $b:ident| $sum:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Scannable for $t {
            const ZERO: Self = $zero;
            #[inline(always)]
            fn plus(self, other: Self) -> Self {
                let ($a, $b) = (self, other);
                $sum
            }
        }
    )*};
}

scannable! {
    u32, 0, |a, b| a.wrapping_add(b);
    i32, 0, |a, b| a.wrapping_add(b);
    u64, 0, |a, b| a.wrapping_add(b);
    i64, 0, |a, b| a.wrapping_add(b);
    f32, 0.0, |a, b| a + b;
    f64, 0.0, |a, b| a + b;
}

/// This thread's inclusive sum within its warp, the sum of the warps before its own, and
/// the block's total.
#[inline(always)]
fn scan<T: Scannable>(v: T) -> (T, T, T) {
    let (lane, warp, mask) = (lane_id(), warp_id(), warp_mask());
    let mut sum = v;
    let mut delta = 1;
    while delta < WARP_SIZE {
        let below = shfl_up(mask, sum, delta);
        if lane >= delta {
            sum = sum.plus(below);
        }
        delta *= 2;
    }
    let totals = WARP_TOTALS.slice();
    if mask >> lane == 1 {
        // The warp's last lane holds its total.
        totals.set(warp as usize, sum.to_bits());
    }
    sync_threads();
    let (mut before, mut total) = (T::ZERO, T::ZERO);
    for w in 0..block_dim().volume().div_ceil(WARP_SIZE) {
        let t = T::from_bits(totals.get(w as usize));
        if w < warp {
            before = before.plus(t);
        }
        total = total.plus(t);
    }
    // Nobody overwrites the totals (the next scan) before every thread has read them.
    sync_threads();
    (sum, before, total)
}

/// The sum of `v` over the threads of the block up to and including this one (by
/// `thread_rank`). Every thread of the block must call it.
#[inline(always)]
pub fn scan_inclusive_block<T: Scannable>(v: T) -> T {
    let (sum, before, _) = scan(v);
    before.plus(sum)
}

/// The sum of `v` over the threads of the block before this one (by `thread_rank`; 0 on
/// thread 0), and the block's total. Every thread of the block must call it.
#[inline(always)]
pub fn scan_exclusive_block<T: Scannable>(v: T) -> (T, T) {
    let (sum, before, total) = scan(v);
    // This lane's exclusive sum within the warp: the inclusive sum of the lane below.
    let below = shfl_up(warp_mask(), sum, 1);
    let within = if lane_id() == 0 { T::ZERO } else { below };
    (before.plus(within), total)
}

/// Counts the `keys` of every thread of the block into `bins`, which it zeroes first:
/// afterwards every thread sees `bins[k]` = how many keys equal to `k` the block's threads
/// passed. Every thread of the block must call it (with any number of keys). A key
/// outside `bins` panics, naming it and the number of bins.
#[inline(always)]
pub fn histogram_block(bins: SharedSlice<u32>, keys: impl IntoIterator<Item = u32>) {
    bins.fill_block(0);
    for key in keys {
        if key as usize >= bins.len() {
            bad_key(key, bins.len());
        }
        bins.fetch_add(key as usize, 1);
    }
    sync_threads();
}

#[cold]
#[inline(never)]
fn bad_key(key: u32, bins: usize) -> ! {
    panic!("histogram_block: key {key} is outside the {bins} bins")
}
