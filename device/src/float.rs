//! Narrow floating-point element types for ML data: [`bf16`] and [`f16`](struct@f16) (16 bits), and
//! the two 8-bit formats of the OCP FP8 specification, [`Fp8E4M3`] and [`Fp8E5M2`].
//!
//! Each is a `#[repr(transparent)]` newtype over its bits and `bytemuck::Pod`, so it is an
//! element type of symmetric buffers (`SymBuf<bf16>`), host and device RMA, collectives
//! that move data, and kernel arguments, on the host and in PTX alike. [`bf16`] and
//! [`f16`](struct@f16) are also [`Reducible`](crate::Reducible) (see [`reduce`](mod@crate::reduce)).
//!
//! # Conversions
//! `from_f32` rounds to nearest, ties to even (IEEE 754's default, CUDA's
//! `__float2bfloat16_rn` and `__float2half_rn`), subnormals included; `to_f32` is exact.
//! [`bf16`] and [`f16`](struct@f16) overflow to infinity and keep NaN a NaN. The FP8 conversions
//! saturate, as PTX's `cvt.rn.satfinite` and NVIDIA's `__NV_SATFINITE` do: a finite value
//! beyond the largest finite one, or an infinity, becomes the largest finite value of its
//! sign (448 for E4M3, 57344 for E5M2), and NaN stays NaN (E4M3 has no infinity and one
//! NaN per sign, `S.1111.111`; E5M2 decodes its infinities `S.11111.00` as infinities).
//!
//! The conversions are integer arithmetic on the bits, the same code on the host and on
//! the GPU, so a value converted in a kernel and on the CPU executor is the same bit for bit.
//!
//! # Arithmetic
//! [`bf16`] and [`f16`](struct@f16) add, subtract, multiply and divide through `f32`, rounding the
//! result back to the type: every operation is correctly rounded, since `f32` carries
//! more than twice the significand bits plus two of either type, which makes the double
//! rounding harmless (Figueroa, "When is double rounding innocuous?", 1995).

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, Div, Mul, Neg, Sub};

/// A binary floating-point format narrower than `f32`, as the conversions need it.
struct Format {
    /// Exponent bits.
    exp_bits: u32,
    /// Stored significand (mantissa) bits.
    man_bits: u32,
    /// The largest finite magnitude, as bits (sign clear).
    max_finite: u32,
    /// What a magnitude beyond `max_finite`, or an infinity, becomes: the infinity, or
    /// `max_finite` for the saturating FP8 conversions.
    overflow: u32,
    /// The quiet NaN a NaN becomes (sign clear).
    nan: u32,
    /// Whether an all-ones exponent means infinity (mantissa zero) or NaN (IEEE formats
    /// and E5M2); otherwise only the all-ones magnitude is NaN (E4M3).
    ieee_specials: bool,
}

impl Format {
    /// The exponent bias.
    const fn bias(&self) -> i32 {
        (1 << (self.exp_bits - 1)) - 1
    }

    /// Bits of the magnitude.
    const fn mag_mask(&self) -> u32 {
        (1 << (self.exp_bits + self.man_bits)) - 1
    }

    /// Whether magnitude bits `mag` are a NaN.
    const fn is_nan(&self, mag: u32) -> bool {
        if self.ieee_specials {
            mag >> self.man_bits == (1 << self.exp_bits) - 1
                && mag & ((1 << self.man_bits) - 1) != 0
        } else {
            mag == self.mag_mask()
        }
    }

    /// `x` rounded to nearest (ties to even) in this format, as bits.
    const fn encode(&self, x: f32) -> u32 {
        let bits = x.to_bits();
        let sign = (bits >> 31) << (self.exp_bits + self.man_bits);
        let a = bits & 0x7FFF_FFFF;
        if a > 0x7F80_0000 {
            return sign | self.nan;
        }
        if a == 0x7F80_0000 {
            return sign | self.overflow;
        }
        // `a` is `sig * 2^(exp - 23)`, with `sig`'s leading one at bit 23 for normals.
        let (sig, exp) = if a >= 0x0080_0000 {
            ((a & 0x007F_FFFF) | 0x0080_0000, (a >> 23) as i32 - 127)
        } else {
            (a, -126)
        };
        let min_exp = 1 - self.bias();
        // The bits below the format's last significand bit go; a normal result keeps its
        // leading one in `q`, so `base` holds the biased exponent minus one and a carry
        // out of the significand moves to the next binade by itself (to infinity, or the
        // overflow check, from the largest binade; to the least normal from a subnormal).
        let (shift, base) = if exp >= min_exp {
            (
                23 - self.man_bits,
                ((exp + self.bias() - 1) as u32) << self.man_bits,
            )
        } else {
            (23 - self.man_bits + (min_exp - exp) as u32, 0)
        };
        if shift > 24 {
            // Below half the least subnormal: zero.
            return sign;
        }
        let q = sig >> shift;
        let rem = sig & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        let q = if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        };
        let mag = base + q;
        if mag > self.max_finite {
            sign | self.overflow
        } else {
            sign | mag
        }
    }

    /// The value of bits `code`, exactly.
    const fn decode(&self, code: u32) -> f32 {
        let sign = ((code >> (self.exp_bits + self.man_bits)) & 1) << 31;
        let mag = code & self.mag_mask();
        if self.is_nan(mag) {
            return f32::from_bits(sign | 0x7FC0_0000);
        }
        let exp = (mag >> self.man_bits) as i32;
        let man = mag & ((1 << self.man_bits) - 1);
        if self.ieee_specials && exp == (1 << self.exp_bits) - 1 {
            return f32::from_bits(sign | 0x7F80_0000);
        }
        if exp == 0 {
            // Subnormal: `man * 2^-man_bits * 2^(1 - bias)`; both powers of two are
            // normal f32s and each product is representable (bf16's subnormals are f32
            // subnormals), so both are exact.
            let v = man as f32 * pow2(-(self.man_bits as i32)) * pow2(1 - self.bias());
            return f32::from_bits(sign | v.to_bits());
        }
        let e32 = (exp - self.bias() + 127) as u32;
        f32::from_bits(sign | (e32 << 23) | (man << (23 - self.man_bits)))
    }
}

impl Format {
    /// Whether this is bf16, which has f32's exponent range: its conversions are then
    /// f32's bits rounded at bit 16 ([`bf16_encode`], [`bf16_decode`]), a few integer
    /// operations instead of [`Format::encode`]'s general path, with the same results.
    const fn is_bf16(&self) -> bool {
        self.exp_bits == 8 && self.man_bits == 7
    }
}

/// `BF16.encode(x)` by rounding f32's bits at bit 16, ties to even: a carry out of the
/// kept significand moves to the next binade or to infinity by itself, and f32's
/// subnormals are bf16's, so one addition rounds every finite value; NaN becomes the quiet
/// NaN of its sign.
#[inline(always)]
const fn bf16_encode(x: f32) -> u32 {
    let bits = x.to_bits();
    if bits & 0x7FFF_FFFF > 0x7F80_0000 {
        return (bits >> 16 & 0x8000) | BF16.nan;
    }
    (bits + 0x7FFF + (bits >> 16 & 1)) >> 16
}

/// `BF16.decode(code)`: the bits in f32's high half (exact), NaN as the quiet NaN of its
/// sign.
#[inline(always)]
const fn bf16_decode(code: u32) -> f32 {
    if BF16.is_nan(code & BF16.mag_mask()) {
        return f32::from_bits((code & 0x8000) << 16 | 0x7FC0_0000);
    }
    f32::from_bits(code << 16)
}

/// 2^k as an `f32`, for `-126 <= k <= 127`.
const fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// bfloat16 (1 sign, 8 exponent, 7 significand bits).
const BF16: Format = Format {
    exp_bits: 8,
    man_bits: 7,
    max_finite: 0x7F7F,
    overflow: 0x7F80,
    nan: 0x7FC0,
    ieee_specials: true,
};

/// IEEE 754 binary16 (1 sign, 5 exponent, 10 significand bits).
const F16: Format = Format {
    exp_bits: 5,
    man_bits: 10,
    max_finite: 0x7BFF,
    overflow: 0x7C00,
    nan: 0x7E00,
    ieee_specials: true,
};

/// OCP FP8 E4M3 (bias 7, no infinities, NaN `S.1111.111`, largest 448).
const E4M3: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    max_finite: 0x7E,
    overflow: 0x7E,
    nan: 0x7F,
    ieee_specials: false,
};

/// OCP FP8 E5M2 (bias 15, IEEE-style infinities and NaNs, largest 57344).
const E5M2: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    max_finite: 0x7B,
    overflow: 0x7B,
    nan: 0x7E,
    ieee_specials: true,
};

/// Defines one narrow float type over `$bits` with format `$fmt`.
macro_rules! narrow_float {
    ($(#[$doc:meta])* $name:ident, $bits:ty, $fmt:ident) => {
        $(#[$doc])*
        #[allow(non_camel_case_types)] // named as the primitive types it stands beside
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name($bits);

        impl $name {
            /// Positive zero.
            pub const ZERO: Self = Self(0);
            /// One.
            pub const ONE: Self = Self::from_f32(1.0);
            /// The largest finite value.
            pub const MAX: Self = Self($fmt.max_finite as $bits);
            /// The most negative finite value.
            pub const MIN: Self = Self(($fmt.max_finite | ($fmt.mag_mask() + 1)) as $bits);
            /// A quiet NaN.
            pub const NAN: Self = Self($fmt.nan as $bits);

            /// The value with these bits.
            #[inline(always)]
            pub const fn from_bits(bits: $bits) -> Self {
                Self(bits)
            }

            /// The value's bits.
            #[inline(always)]
            pub const fn to_bits(self) -> $bits {
                self.0
            }

            /// `x` rounded to nearest, ties to even (see the module docs for overflow
            /// and NaN).
            #[inline]
            pub const fn from_f32(x: f32) -> Self {
                if $fmt.is_bf16() {
                    Self(bf16_encode(x) as $bits)
                } else {
                    Self($fmt.encode(x) as $bits)
                }
            }

            /// The value as an `f32` (exact).
            #[inline]
            pub const fn to_f32(self) -> f32 {
                if $fmt.is_bf16() {
                    bf16_decode(self.0 as u32)
                } else {
                    $fmt.decode(self.0 as u32)
                }
            }

            /// The value as an `f64` (exact).
            #[inline]
            pub const fn to_f64(self) -> f64 {
                self.to_f32() as f64
            }

            /// Whether the value is a NaN.
            #[inline]
            pub const fn is_nan(self) -> bool {
                $fmt.is_nan(self.0 as u32 & $fmt.mag_mask())
            }
        }

        impl From<$name> for f32 {
            #[inline]
            fn from(x: $name) -> f32 {
                x.to_f32()
            }
        }

        impl From<$name> for f64 {
            #[inline]
            fn from(x: $name) -> f64 {
                x.to_f64()
            }
        }

        /// Compares the values, as `f32` does: NaN equals nothing, `-0 == +0`.
        impl PartialEq for $name {
            #[inline]
            fn eq(&self, other: &Self) -> bool {
                self.to_f32() == other.to_f32()
            }
        }

        /// Orders the values, as `f32` does (NaN is unordered).
        impl PartialOrd for $name {
            #[inline]
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                self.to_f32().partial_cmp(&other.to_f32())
            }
        }

        impl Neg for $name {
            type Output = Self;
            #[inline]
            fn neg(self) -> Self {
                Self(self.0 ^ (($fmt.mag_mask() + 1) as $bits))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.to_f32(), f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }
    };
}

narrow_float! {
    /// bfloat16: 1 sign, 8 exponent and 7 significand bits; `f32`'s range at 3 decimal
    /// digits (CUDA's `__nv_bfloat16`, torch's `bfloat16`).
    bf16, u16, BF16
}

narrow_float! {
    /// IEEE 754 binary16: 1 sign, 5 exponent and 10 significand bits, largest 65504
    /// (CUDA's `__half`, torch's `float16`).
    f16, u16, F16
}

narrow_float! {
    /// OCP FP8 E4M3: 1 sign, 4 exponent and 3 significand bits, bias 7, largest 448, no
    /// infinities, NaN `S.1111.111` (CUDA's `__nv_fp8_e4m3`, torch's `float8_e4m3fn`).
    Fp8E4M3, u8, E4M3
}

narrow_float! {
    /// OCP FP8 E5M2: 1 sign, 5 exponent and 2 significand bits, bias 15, largest 57344,
    /// IEEE infinities and NaNs (CUDA's `__nv_fp8_e5m2`, torch's `float8_e5m2`).
    Fp8E5M2, u8, E5M2
}

/// The arithmetic of a 16-bit type: through `f32`, rounded back (correctly rounded; see
/// the module docs).
macro_rules! arithmetic {
    ($($t:ident),*) => {$(
        impl $t {
            /// Positive infinity.
            pub const INFINITY: Self = Self::from_f32(f32::INFINITY);
            /// Negative infinity.
            pub const NEG_INFINITY: Self = Self::from_f32(f32::NEG_INFINITY);
        }
        arithmetic!(@op $t, Add, add, +);
        arithmetic!(@op $t, Sub, sub, -);
        arithmetic!(@op $t, Mul, mul, *);
        arithmetic!(@op $t, Div, div, /);
    )*};
    (@op $t:ident, $tr:ident, $f:ident, $o:tt) => {
        impl $tr for $t {
            type Output = Self;
            #[inline]
            fn $f(self, other: Self) -> Self {
                Self::from_f32(self.to_f32() $o other.to_f32())
            }
        }
    };
}
arithmetic!(bf16, f16);

impl Fp8E5M2 {
    /// Positive infinity (decoding only: conversions from `f32` saturate).
    pub const INFINITY: Self = Self(0x7C);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bf16's fast conversions agree with the general path: every bf16 decoded, and
    /// encoded from each f32 at and around every rounding boundary (a bf16 value, half an
    /// ulp above it, one bit either side of that, the next value's bits minus one), of
    /// both signs. (Checked once over all 2^32 f32s as well.)
    #[test]
    fn bf16_fast_conversions_match_the_general_path() {
        for code in 0..=u16::MAX as u32 {
            assert_eq!(
                bf16_decode(code).to_bits(),
                BF16.decode(code).to_bits(),
                "decode {code:#06x}"
            );
            for low in [0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF] {
                let x = f32::from_bits(code << 16 | low);
                assert_eq!(
                    bf16_encode(x),
                    BF16.encode(x),
                    "encode {:#010x}",
                    x.to_bits()
                );
            }
        }
    }

    /// The largest finite bf16, (2 - 2^-7) * 2^127.
    const MAX_BF16: f32 = f32::from_bits(0x7F7F_0000);

    /// Known encodings of each format (value, bits), exact both ways.
    #[test]
    fn exact_values_round_trip() {
        let bf: &[(f32, u16)] = &[
            (0.0, 0x0000),
            (-0.0, 0x8000),
            (1.0, 0x3F80),
            (-2.0, 0xC000),
            (3.140625, 0x4049),
            (MAX_BF16, 0x7F7F),
            (f32::from_bits(0x0001_0000), 0x0001), // least subnormal
            (f32::INFINITY, 0x7F80),
        ];
        for &(v, b) in bf {
            assert_eq!(bf16::from_f32(v).to_bits(), b, "bf16 {v}");
            assert_eq!(
                bf16::from_bits(b).to_f32().to_bits(),
                v.to_bits(),
                "bf16 {b:#x}"
            );
        }
        let h: &[(f32, u16)] = &[
            (0.0, 0x0000),
            (-0.0, 0x8000),
            (1.0, 0x3C00),
            (-2.0, 0xC000),
            (65504.0, 0x7BFF),
            (6.103_515_6e-5, 0x0400),     // least normal, 2^-14
            (5.960_464_5e-8, 0x0001),     // least subnormal, 2^-24
            (1023.0 * pow2(-24), 0x03FF), // largest subnormal
            (0.333_251_95, 0x3555),
            (f32::NEG_INFINITY, 0xFC00),
        ];
        for &(v, b) in h {
            assert_eq!(f16::from_f32(v).to_bits(), b, "f16 {v}");
            assert_eq!(
                f16::from_bits(b).to_f32().to_bits(),
                v.to_bits(),
                "f16 {b:#x}"
            );
        }
        // OCP FP8 spec, table 1 and 2.
        let e4: &[(f32, u8)] = &[
            (0.0, 0x00),
            (-0.0, 0x80),
            (1.0, 0x38),
            (448.0, 0x7E),
            (-448.0, 0xFE),
            (0.015_625, 0x08),     // least normal, 2^-6
            (0.001_953_125, 0x01), // least subnormal, 2^-9
            (0.013_671_875, 0x07), // largest subnormal, 7 * 2^-9
            (240.0, 0x77),
        ];
        for &(v, b) in e4 {
            assert_eq!(Fp8E4M3::from_f32(v).to_bits(), b, "e4m3 {v}");
            assert_eq!(
                Fp8E4M3::from_bits(b).to_f32().to_bits(),
                v.to_bits(),
                "e4m3 {b:#x}"
            );
        }
        let e5: &[(f32, u8)] = &[
            (0.0, 0x00),
            (1.0, 0x3C),
            (57344.0, 0x7B),
            (-57344.0, 0xFB),
            (6.103_515_6e-5, 0x04), // least normal, 2^-14
            (1.525_878_9e-5, 0x01), // least subnormal, 2^-16
            (4.577_636_7e-5, 0x03), // largest subnormal, 3 * 2^-16
            (-1.5, 0xBE),
        ];
        for &(v, b) in e5 {
            assert_eq!(Fp8E5M2::from_f32(v).to_bits(), b, "e5m2 {v}");
            assert_eq!(
                Fp8E5M2::from_bits(b).to_f32().to_bits(),
                v.to_bits(),
                "e5m2 {b:#x}"
            );
        }
    }

    /// Every bit pattern decodes to a value that encodes back to the same bits (NaNs to
    /// a NaN, infinities to themselves or, in E5M2, the largest finite), and decoding is monotonic over the positive finite patterns.
    #[test]
    fn every_pattern_round_trips() {
        fn check(name: &str, count: u32, dec: impl Fn(u32) -> f32, enc: impl Fn(f32) -> u32) {
            let mut last = -1.0f32;
            for b in 0..count {
                let v = dec(b);
                if v.is_nan() {
                    assert!(dec(enc(v)).is_nan(), "{name} {b:#x}");
                    continue;
                }
                if v.is_infinite() {
                    // Infinity itself (16-bit types) or the saturated largest finite (E5M2).
                    let back = dec(enc(v));
                    assert!(
                        back.is_sign_negative() == v.is_sign_negative(),
                        "{name} {b:#x}"
                    );
                    continue;
                }
                assert_eq!(enc(v), b, "{name} {b:#x} = {v}");
                if b < count / 2 && v.is_finite() {
                    assert!(v > last, "{name} {b:#x} not above the pattern before");
                    last = v;
                }
            }
        }
        check(
            "bf16",
            1 << 16,
            |b| bf16::from_bits(b as u16).to_f32(),
            |v| bf16::from_f32(v).to_bits() as u32,
        );
        check(
            "f16",
            1 << 16,
            |b| f16::from_bits(b as u16).to_f32(),
            |v| f16::from_f32(v).to_bits() as u32,
        );
        check(
            "e4m3",
            1 << 8,
            |b| Fp8E4M3::from_bits(b as u8).to_f32(),
            |v| Fp8E4M3::from_f32(v).to_bits() as u32,
        );
        check(
            "e5m2",
            1 << 8,
            |b| Fp8E5M2::from_bits(b as u8).to_f32(),
            |v| Fp8E5M2::from_f32(v).to_bits() as u32,
        );
    }

    /// Halfway cases round to the even neighbour; just above or below halfway to the
    /// nearer one; the least subnormal's half rounds to zero, just above it up.
    #[test]
    fn rounding_is_to_nearest_even() {
        // bf16: 1 + 2^-8 is halfway between 1 (even) and 1 + 2^-7.
        assert_eq!(bf16::from_f32(1.0 + 1.0 / 256.0).to_bits(), 0x3F80);
        assert_eq!(bf16::from_f32(1.0 + 3.0 / 256.0).to_bits(), 0x3F82);
        assert_eq!(
            bf16::from_f32(f32::from_bits(0x3F80_8001)).to_bits(),
            0x3F81
        );
        // f16: 1 + 2^-11 halfway to 1; 2049 -> 2048, 2051 -> 2052.
        assert_eq!(f16::from_f32(1.0 + 1.0 / 2048.0).to_bits(), 0x3C00);
        assert_eq!(f16::from_f32(2049.0).to_f32(), 2048.0);
        assert_eq!(f16::from_f32(2051.0).to_f32(), 2052.0);
        assert_eq!(f16::from_f32(pow2(-25)).to_bits(), 0x0000);
        assert_eq!(f16::from_f32(pow2(-25) * 1.0001).to_bits(), 0x0001);
        assert_eq!(f16::from_f32(3.0 * pow2(-25)).to_bits(), 0x0002);
        // 65520 is halfway between 65504 and 2^16: even is 2^16, beyond the range.
        assert_eq!(f16::from_f32(65519.0).to_bits(), 0x7BFF);
        assert_eq!(f16::from_f32(65520.0).to_bits(), 0x7C00);
        // E4M3: 17 is halfway between 16 (even) and 18; 19 between 18 and 20 (even).
        assert_eq!(Fp8E4M3::from_f32(17.0).to_f32(), 16.0);
        assert_eq!(Fp8E4M3::from_f32(19.0).to_f32(), 20.0);
        assert_eq!(Fp8E4M3::from_f32(pow2(-10)).to_bits(), 0x00);
        assert_eq!(Fp8E4M3::from_f32(3.0 * pow2(-10)).to_bits(), 0x02);
        // The largest subnormal rounds up into the least normal.
        assert_eq!(Fp8E4M3::from_f32(7.5 * pow2(-9)).to_bits(), 0x08);
        // E5M2: 1.125 halfway between 1 (even) and 1.25; 1.375 between 1.25 and 1.5 (even).
        assert_eq!(Fp8E5M2::from_f32(1.125).to_f32(), 1.0);
        assert_eq!(Fp8E5M2::from_f32(1.375).to_f32(), 1.5);
    }

    /// FP8 conversions saturate; 16-bit ones overflow to infinity; NaN stays NaN.
    #[test]
    fn overflow_and_nan() {
        for v in [464.0, 480.0, 1e9, f32::INFINITY] {
            assert_eq!(Fp8E4M3::from_f32(v).to_bits(), 0x7E, "e4m3 {v}");
            assert_eq!(Fp8E4M3::from_f32(-v).to_bits(), 0xFE, "e4m3 -{v}");
        }
        for v in [61440.0, 1e9, f32::INFINITY] {
            assert_eq!(Fp8E5M2::from_f32(v).to_bits(), 0x7B, "e5m2 {v}");
            assert_eq!(Fp8E5M2::from_f32(-v).to_bits(), 0xFB, "e5m2 -{v}");
        }
        assert_eq!(Fp8E5M2::INFINITY.to_f32(), f32::INFINITY);
        assert!(Fp8E4M3::from_bits(0x7F).is_nan() && Fp8E4M3::from_bits(0xFF).is_nan());
        assert!(
            !Fp8E4M3::from_bits(0x78).is_nan(),
            "E4M3 has no infinity: 0x78 is 256"
        );
        assert_eq!(Fp8E4M3::from_bits(0x78).to_f32(), 256.0);
        assert!(Fp8E5M2::from_bits(0x7D).is_nan());
        assert_eq!(bf16::from_f32(3.4e38).to_bits(), 0x7F80);
        assert_eq!(f16::from_f32(1e5).to_bits(), 0x7C00);
        assert_eq!(f16::from_f32(-1e5).to_bits(), 0xFC00);
        for nan in [f32::NAN, -f32::NAN, f32::from_bits(0x7F80_0001)] {
            assert!(bf16::from_f32(nan).is_nan());
            assert!(f16::from_f32(nan).is_nan());
            assert!(Fp8E4M3::from_f32(nan).is_nan());
            assert!(Fp8E5M2::from_f32(nan).is_nan());
        }
        assert!(bf16::NAN != bf16::NAN);
        assert_eq!(bf16::MAX.to_f32(), MAX_BF16);
        assert_eq!(f16::MIN.to_f32(), -65504.0);
        assert_eq!(Fp8E4M3::MIN.to_f32(), -448.0);
    }

    /// The 16-bit arithmetic is correctly rounded: it equals the exactly computed result
    /// (in f64) rounded once.
    #[test]
    fn arithmetic_rounds_once() {
        let vals = [1.0f32, 3.0, 0.1, 1e-3, 333.3, -7.25, 65000.0, 1e-6];
        for &a in &vals {
            for &b in &vals {
                let (x, y) = (f16::from_f32(a), f16::from_f32(b));
                let exact = x.to_f64() + y.to_f64();
                // f64 holds the exact sum of two f16s; one rounding to f32 then f16 is
                // innocuous (f32 has 24 >= 2 * 11 + 2 bits).
                assert_eq!((x + y).to_bits(), f16::from_f32(exact as f32).to_bits());
                let (x, y) = (bf16::from_f32(a), bf16::from_f32(b));
                assert_eq!(
                    (x * y).to_bits(),
                    bf16::from_f32((x.to_f64() * y.to_f64()) as f32).to_bits()
                );
            }
        }
        assert_eq!((-bf16::ONE).to_f32(), -1.0);
        assert_eq!((f16::from_f32(1.0) / f16::from_f32(3.0)).to_bits(), 0x3555);
    }
}
