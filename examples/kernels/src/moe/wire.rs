//! How token rows travel between PEs, and what an expert computes: the numbers of the MoE
//! example, shared by its kernels and the host program's reference, so both round the same
//! values the same way.
//!
//! # Rows on the wire
//! A token is `H` [`bf16`] elements. A row in flight is a run of u32 *words*:
//! - **bf16** ([`wire_words`] = `H / 2`): the token's elements as they are, two per word
//!   (element `2w` in the low half of word `w`);
//! - **fp8** ([`wire_words`] = `H / 4 + H / 128`): the token quantized to [`Fp8E4M3`] with
//!   one f32 scale per [`SCALE_BLOCK`] elements (DeepEP's dispatch format): first the
//!   elements, four per word (element `4w + i` in byte `i` of word `w`), then the scales
//!   as f32 bits. A block's scale is `amax / 448` and its elements are `x * (448 / amax)`
//!   rounded to E4M3 ([`fp8_scales`], [`quantize`]); the expert reads `q * scale`
//!   ([`dequantize`]). `amax` is the block's largest magnitude, at least [`MIN_AMAX`].
//!
//! # Rounding (what makes the host reference exact)
//! Every step is IEEE f32 arithmetic with one rounding per operation (no fused
//! multiply-add: Rust does not contract `a * b + c`, and the PTX keeps `mul.rn`/`add.rn`)
//! and conversions that are the same integer code on the host and the GPU. An expert
//! output is `bf16(x * scale_e + shift_e)` ([`expert_fn`]); a combined element is the f32
//! sum, in choice order, of `weight * output` over the token's kept choices, rounded to
//! bf16 once. A host computing the same operations in the same order gets the same bits.

use symmem_device::{bf16, Fp8E4M3};

/// Elements per fp8 scale.
pub const SCALE_BLOCK: usize = 128;

/// The largest finite [`Fp8E4M3`]: a block's largest magnitude maps to it.
pub const FP8_MAX: f32 = 448.0;

/// The smallest `amax` a scale is computed from (DeepEP's clamp), so an all-zero block
/// gets a finite scale.
pub const MIN_AMAX: f32 = 1e-4;

/// u32 words of one row in flight for `hidden` elements: fp8 (`true`) or bf16.
pub const fn wire_words(hidden: usize, fp8: bool) -> usize {
    if fp8 {
        hidden / 4 + hidden / SCALE_BLOCK
    } else {
        hidden / 2
    }
}

/// Why `hidden` cannot be a row of this format, if it cannot: bf16 rows hold whole words
/// (an even `hidden`), fp8 rows whole scale blocks (a multiple of [`SCALE_BLOCK`]).
pub const fn hidden_error(hidden: usize, fp8: bool) -> Option<&'static str> {
    if hidden == 0 {
        Some("the hidden size must be at least 1")
    } else if fp8 && !hidden.is_multiple_of(SCALE_BLOCK) {
        Some("fp8 dispatch needs a hidden size that is a multiple of 128 (one scale per 128 elements)")
    } else if !hidden.is_multiple_of(2) {
        Some("bf16 rows need an even hidden size (two elements per word)")
    } else {
        None
    }
}

/// `(scale, inverse)` of a block whose largest magnitude is `amax`: the scale the expert
/// multiplies by and the factor the dispatch multiplies by.
#[inline(always)]
pub fn fp8_scales(amax: f32) -> (f32, f32) {
    let amax = if amax > MIN_AMAX { amax } else { MIN_AMAX };
    (amax / FP8_MAX, FP8_MAX / amax)
}

/// `x` quantized with a block's `inverse` scale.
#[inline(always)]
pub fn quantize(x: bf16, inverse: f32) -> Fp8E4M3 {
    Fp8E4M3::from_f32(x.to_f32() * inverse)
}

/// The value an expert reads for `q` of a block with `scale`.
#[inline(always)]
pub fn dequantize(q: Fp8E4M3, scale: f32) -> f32 {
    q.to_f32() * scale
}

/// The multiplier of expert `e` in [`expert_fn`]: 1, 1.25, 1.5 or 1.75.
#[inline(always)]
pub fn expert_scale(e: u32) -> f32 {
    1.0 + (e % 4) as f32 * 0.25
}

/// The offset of expert `e`: `e / 8 - 1`, different for every expert.
#[inline(always)]
fn expert_shift(e: u32) -> f32 {
    e as f32 * 0.125 - 1.0
}

/// The stand-in expert function of expert `e` on one element: `bf16(x * scale_e +
/// shift_e)`, different for every expert, so a row processed by the wrong expert shows
/// up in the check.
#[inline(always)]
pub fn expert_fn(x: f32, e: u32) -> bf16 {
    bf16::from_f32(x * expert_scale(e) + expert_shift(e))
}

/// Two bf16 elements as one word (`lo` in the low half).
#[inline(always)]
pub fn pack_bf16(lo: bf16, hi: bf16) -> u32 {
    u32::from(lo.to_bits()) | u32::from(hi.to_bits()) << 16
}

/// The two bf16 elements of a word.
#[inline(always)]
pub fn unpack_bf16(word: u32) -> (bf16, bf16) {
    (
        bf16::from_bits(word as u16),
        bf16::from_bits((word >> 16) as u16),
    )
}

/// Encodes `row` (`hidden` elements) as an fp8 wire row in `wire` ([`wire_words`] words):
/// the host's form of what the dispatch kernel's warps do one block each.
///
/// # Panics
/// If `row.len()` is not a multiple of [`SCALE_BLOCK`] or `wire` has another length.
pub fn encode_fp8_row(row: &[bf16], wire: &mut [u32]) {
    assert!(
        row.len().is_multiple_of(SCALE_BLOCK) && wire.len() == wire_words(row.len(), true),
        "an fp8 row of {} elements is {} words, not {}",
        row.len(),
        wire_words(row.len(), true),
        wire.len()
    );
    let (data, scales) = wire.split_at_mut(row.len() / 4);
    for (b, block) in row.chunks_exact(SCALE_BLOCK).enumerate() {
        let amax = block.iter().fold(0f32, |m, x| m.max(x.to_f32().abs()));
        let (scale, inverse) = fp8_scales(amax);
        scales[b] = scale.to_bits();
        for (w, four) in block.chunks_exact(4).enumerate() {
            data[b * SCALE_BLOCK / 4 + w] = four
                .iter()
                .enumerate()
                .map(|(i, &x)| u32::from(quantize(x, inverse).to_bits()) << (8 * i))
                .fold(0, |a, b| a | b);
        }
    }
}

/// Element `i` of the fp8 wire row `wire` of `hidden` elements, as the expert reads it.
#[inline(always)]
pub fn fp8_element(wire: &[u32], hidden: usize, i: usize) -> f32 {
    let q = Fp8E4M3::from_bits((wire[i / 4] >> (8 * (i % 4))) as u8);
    dequantize(q, f32::from_bits(wire[hidden / 4 + i / SCALE_BLOCK]))
}
