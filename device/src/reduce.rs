//! The reduction vocabulary shared by host and device collectives: the element types
//! ([`Reducible`], [`BitwiseReducible`]) and the operators ([`Sum`], [`Prod`], [`Min`],
//! [`Max`], [`And`], [`Or`], [`Xor`]). Bitwise operators exist on integers only, so a
//! bitwise reduction of floats does not compile, on the host or in a kernel.
//!
//! # bf16 and f16
//! [`bf16`] and [`f16`](struct@f16) reduce with per-step rounding, as NCCL does for its 16-bit types:
//! every combination of two values is computed in `f32` and rounded back to the type
//! (correctly rounded, see [`crate::float`]), so a sum over `n` PEs rounds `n - 1` times,
//! the same on every PE (the collectives combine in team order) and on the host and the
//! GPU. Accumulating in `f32` and rounding once would be more accurate for long sums,
//! but would need an `f32` partial result through the all-gather and recursive-doubling
//! algorithms, doubling what they move; for the few PEs of a team the difference is at
//! most `n - 1` roundings. Convert to `f32` first (and reduce `f32`) where it matters.

use core::ops::{BitAnd, BitOr, BitXor};

use bytemuck::Pod;

use crate::float::{bf16, f16};

mod sealed {
    /// Keeps [`super::Reducible`] and [`super::ReduceOp`] closed to this crate's types.
    pub trait Sealed {}
}

/// An element type of reductions (OpenSHMEM's reduction types): `i32`, `i64`, `u32`,
/// `u64`, `f32`, `f64`, and the 16-bit floats [`bf16`] and [`f16`](struct@f16) (rounded at every
/// step, see the module docs).
pub trait Reducible: Pod + PartialOrd + sealed::Sealed {
    /// The type's code in kernel arguments (the runtime's stream-ordered reductions):
    /// 0 `i32`, 1 `i64`, 2 `u32`, 3 `u64`, 4 `f32`, 5 `f64`, 6 `bf16`, 7 `f16`.
    const CODE: u32;
    /// `a + b`, wrapping for integers.
    fn add(self, other: Self) -> Self;
    /// `a * b`, wrapping for integers.
    fn mul(self, other: Self) -> Self;
}

/// An integer element type, for the bitwise reductions ([`And`], [`Or`], [`Xor`]): floats
/// do not implement it, so a bitwise reduction of floats does not compile.
pub trait BitwiseReducible:
    Reducible + BitAnd<Output = Self> + BitOr<Output = Self> + BitXor<Output = Self>
{
}

macro_rules! reducible_int {
    ($($t:ty = $code:literal),*) => {$(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
            const CODE: u32 = $code;
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self.wrapping_mul(other)
            }
        }
        impl BitwiseReducible for $t {}
    )*};
}
reducible_int!(i32 = 0, i64 = 1, u32 = 2, u64 = 3);

macro_rules! reducible_float {
    ($($t:ty = $code:literal),*) => {$(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
            const CODE: u32 = $code;
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self + other
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self * other
            }
        }
    )*};
}
reducible_float!(f32 = 4, f64 = 5, bf16 = 6, f16 = 7);

/// A reduction operator on `T`: [`Sum`], [`Prod`], [`Min`] and [`Max`] on every
/// [`Reducible`] type; [`And`], [`Or`] and [`Xor`] on integers only.
pub trait ReduceOp<T>: Copy + sealed::Sealed {
    /// The operator's OpenSHMEM name (`sum` as in `shmem_sum_reduce`).
    const NAME: &'static str;
    /// The operator's code in kernel arguments (the runtime's stream-ordered
    /// reductions): 0 sum, 1 prod, 2 min, 3 max, 4 and, 5 or, 6 xor.
    const CODE: u32;
    /// Combines two values.
    fn apply(a: T, b: T) -> T;
}

macro_rules! reduce_op {
    ($($(#[$doc:meta])* $op:ident, $name:literal, $code:literal, $bound:ident, |$a:ident, $b:ident| $e:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
        pub struct $op;
        impl sealed::Sealed for $op {}
        impl<T: $bound> ReduceOp<T> for $op {
            const NAME: &'static str = $name;
            const CODE: u32 = $code;
            #[inline(always)]
            fn apply($a: T, $b: T) -> T {
                $e
            }
        }
    )*};
}

reduce_op! {
    /// Sum (`shmem_sum_reduce`), wrapping for integers.
    Sum, "sum", 0, Reducible, |a, b| a.add(b);
    /// Product (`shmem_prod_reduce`), wrapping for integers.
    Prod, "prod", 1, Reducible, |a, b| a.mul(b);
    /// Minimum (`shmem_min_reduce`).
    Min, "min", 2, Reducible, |a, b| if b < a { b } else { a };
    /// Maximum (`shmem_max_reduce`).
    Max, "max", 3, Reducible, |a, b| if b > a { b } else { a };
    /// Bitwise and (`shmem_and_reduce`), integers only.
    And, "and", 4, BitwiseReducible, |a, b| a & b;
    /// Bitwise or (`shmem_or_reduce`), integers only.
    Or, "or", 5, BitwiseReducible, |a, b| a | b;
    /// Bitwise exclusive or (`shmem_xor_reduce`), integers only.
    Xor, "xor", 6, BitwiseReducible, |a, b| a ^ b;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 16-bit floats round at every step: 256 + 1 + 1 in bf16 (8 significand bits)
    /// is 256 (each `+ 1` is a tie that rounds to even), where one rounding of the `f32`
    /// sum would give 258.
    #[test]
    fn sixteen_bit_sums_round_per_step() {
        let (big, one) = (bf16::from_f32(256.0), bf16::ONE);
        let acc = Sum::apply(Sum::apply(big, one), one);
        assert_eq!(acc.to_f32(), 256.0);
        assert_eq!(bf16::from_f32(256.0 + 1.0 + 1.0).to_f32(), 258.0);
        let (big, one) = (f16::from_f32(2048.0), f16::ONE);
        assert_eq!(Sum::apply(Sum::apply(big, one), one).to_f32(), 2048.0);
        assert_eq!(
            Prod::apply(f16::from_f32(3.0), f16::from_f32(0.5)).to_f32(),
            1.5
        );
        assert_eq!(Min::apply(bf16::from_f32(-2.0), bf16::ONE).to_f32(), -2.0);
        assert_eq!(Max::apply(f16::from_f32(-2.0), f16::ONE).to_f32(), 1.0);
        assert_eq!(<bf16 as Reducible>::CODE, 6);
        assert_eq!(<f16 as Reducible>::CODE, 7);
    }
}
