//! How the threads of a block split into groups that each handle one row at a time, and
//! what a group does to a row. The group is a [`Scope`] (a warp or the whole block, a
//! kernel's type parameter); [`RowScope`] adds what the scope alone does not say: how the
//! grid's groups are numbered and how a group's warps share a row.

use symmem_device::{
    bf16, block_dim, block_rank, grid_dim, lane_id, shfl, warp_id, warp_mask, warp_width, Block,
    Fp8E4M3, Scope, Warp, WARP_SIZE,
};

use super::wire::{dequantize, expert_fn, fp8_scales, pack_bf16, quantize, SCALE_BLOCK};

/// A scope whose groups take rows in turn: [`Warp`] or [`Block`]. Implemented for those
/// two only; each function is fixed per instance, so nothing is chosen at run time.
pub trait RowScope: Scope {
    /// Groups in one block.
    fn per_block() -> usize;

    /// This thread's group's index in its block.
    fn index_in_block() -> usize;

    /// Within the group, this thread's warp's first index and stride over the warps: a
    /// warp group is one warp; a block's warps take turns.
    fn warps_of_group() -> (usize, usize);

    /// This thread's group's index in the grid.
    #[inline(always)]
    fn id() -> usize {
        block_rank() as usize * Self::per_block() + Self::index_in_block()
    }

    /// Groups in the grid.
    #[inline(always)]
    fn count() -> usize {
        grid_dim().volume() as usize * Self::per_block()
    }
}

impl RowScope for Warp {
    #[inline(always)]
    fn per_block() -> usize {
        warps_per_block()
    }

    #[inline(always)]
    fn index_in_block() -> usize {
        warp_id() as usize
    }

    #[inline(always)]
    fn warps_of_group() -> (usize, usize) {
        (0, 1)
    }
}

impl RowScope for Block {
    #[inline(always)]
    fn per_block() -> usize {
        1
    }

    #[inline(always)]
    fn index_in_block() -> usize {
        0
    }

    #[inline(always)]
    fn warps_of_group() -> (usize, usize) {
        (warp_id() as usize, warps_per_block())
    }
}

/// Copies `nelems` elements between two buffers this thread can address, the members of
/// `S`'s group taking every `width`-th element; unlike [`Scope::copy`] it ends without the
/// group's barrier (the caller's next block barrier covers a whole loop of rows).
///
/// # Safety
/// Both ranges hold `nelems` elements and do not overlap; every member calls it with the
/// same arguments.
pub(super) unsafe fn stage<S: Scope, T: Copy>(dst: *mut T, src: *const T, nelems: usize) {
    let (mut i, width) = (S::rank() as usize, S::width() as usize);
    while i < nelems {
        // SAFETY: i < nelems; the caller guarantees both ranges.
        unsafe { dst.add(i).write(src.add(i).read()) };
        i += width;
    }
}

/// Quantizes the `hidden` bf16 elements at `src` into the fp8 wire row at `dst` (see
/// the `wire` module). The warps of `S`'s group take the row's 128-element blocks in turn;
/// in a warp each lane takes words of four elements, and the block's largest magnitude
/// is a max-reduce over the lanes with `shfl`, so the lanes share no memory.
///
/// # Safety
/// `src` holds `hidden` elements, `dst` the row's `wire_words(hidden, true)` words
/// (any address this thread can store to: local, or a peer's through `ptr`); `hidden`
/// is a multiple of 128; every member calls it with the same arguments.
pub(super) unsafe fn quantize_row<S: RowScope>(dst: *mut u32, src: *const bf16, hidden: usize) {
    let (first, stride) = S::warps_of_group();
    let (lane, lanes, mask) = (lane_id() as usize, warp_width() as usize, warp_mask());
    let words = SCALE_BLOCK / 4;
    let mut b = first;
    while b < hidden / SCALE_BLOCK {
        let block = b * SCALE_BLOCK;
        let mut amax = 0f32;
        let mut w = lane;
        while w < words {
            let mut i = 0;
            while i < 4 {
                // SAFETY: block + 4w + i < hidden, inside `src`.
                let x = unsafe { src.add(block + 4 * w + i).read() };
                amax = amax.max(x.to_f32().abs());
                i += 1;
            }
            w += lanes;
        }
        let amax = warp_max(mask, lane, lanes, amax);
        let (scale, inverse) = fp8_scales(amax);
        let mut w = lane;
        while w < words {
            let mut word = 0u32;
            let mut i = 0;
            while i < 4 {
                // SAFETY: as above.
                let x = unsafe { src.add(block + 4 * w + i).read() };
                word |= u32::from(quantize(x, inverse).to_bits()) << (8 * i);
                i += 1;
            }
            // SAFETY: b * words + w < hidden / 4, the row's element words.
            unsafe { dst.add(b * words + w).write(word) };
            w += lanes;
        }
        if lane == 0 {
            // SAFETY: the scale words follow the hidden / 4 element words.
            unsafe { dst.add(hidden / 4 + b).write(scale.to_bits()) };
        }
        b += stride;
    }
}

/// Applies expert `e` to one wire row at `src` (fp8 or bf16) and writes the `hidden`
/// bf16 results at `dst`, the members taking words in turn.
///
/// # Safety
/// `src` holds the row's `wire_words(hidden, fp8)` words, `dst` `hidden` elements (an
/// even number), not overlapping; every member calls it with the same arguments.
pub(super) unsafe fn expert_row<S: Scope>(
    dst: *mut bf16,
    src: *const u32,
    hidden: usize,
    e: u32,
    fp8: bool,
) {
    let out = dst.cast::<u32>();
    let (mut w, width) = (S::rank() as usize, S::width() as usize);
    if fp8 {
        while w < hidden / 4 {
            // SAFETY: w < hidden / 4 element words; the scale word of w's block
            // follows them.
            let (word, scale) = unsafe {
                let scale = src.add(hidden / 4 + 4 * w / SCALE_BLOCK).read();
                (src.add(w).read(), f32::from_bits(scale))
            };
            let y = |i: u32| {
                let q = Fp8E4M3::from_bits((word >> (8 * i)) as u8);
                expert_fn(dequantize(q, scale), e)
            };
            // SAFETY: elements 4w..4w+4 of `dst`, as two words.
            unsafe {
                out.add(2 * w).write(pack_bf16(y(0), y(1)));
                out.add(2 * w + 1).write(pack_bf16(y(2), y(3)));
            }
            w += width;
        }
    } else {
        while w < hidden / 2 {
            // SAFETY: w < hidden / 2 words of the row and of `dst`.
            let word = unsafe { src.add(w).read() };
            let (lo, hi) = super::wire::unpack_bf16(word);
            let packed = pack_bf16(expert_fn(lo.to_f32(), e), expert_fn(hi.to_f32(), e));
            // SAFETY: as above.
            unsafe { out.add(w).write(packed) };
            w += width;
        }
    }
}

/// Warps in this block (its last one may be partial).
fn warps_per_block() -> usize {
    block_dim().volume().div_ceil(WARP_SIZE) as usize
}

/// The largest `v` over the `lanes` lanes of `mask` (lanes `0..lanes`), on every lane: a
/// tree reduction to lane 0 with `shfl`, `log2(lanes)` rounds (a lane past the warp's end
/// reads itself, so a partial warp works), then lane 0's value to all.
fn warp_max(mask: u32, lane: usize, lanes: usize, mut v: f32) -> f32 {
    let mut offset = lanes.next_power_of_two() / 2;
    while offset > 0 {
        let from = lane + offset;
        let src = if from < lanes { from } else { lane };
        let other = shfl(mask, v, src as u32);
        v = v.max(other);
        offset /= 2;
    }
    shfl(mask, v, 0)
}
