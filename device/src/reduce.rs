//! The reduction vocabulary shared by host and device collectives: the element types
//! ([`Reducible`], [`BitwiseReducible`]) and the operators ([`Sum`], [`Prod`], [`Min`],
//! [`Max`], [`And`], [`Or`], [`Xor`]). Bitwise operators exist on integers only, so a
//! bitwise reduction of floats does not compile, on the host or in a kernel.

use core::ops::{BitAnd, BitOr, BitXor};

use bytemuck::Pod;

mod sealed {
    /// Keeps [`super::Reducible`] and [`super::ReduceOp`] closed to this crate's types.
    pub trait Sealed {}
}

/// An element type of reductions (OpenSHMEM's reduction types): `i32`, `i64`, `u32`,
/// `u64`, `f32` and `f64`.
pub trait Reducible: Pod + PartialOrd + sealed::Sealed {
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
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
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
reducible_int!(i32, i64, u32, u64);

macro_rules! reducible_float {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
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
reducible_float!(f32, f64);

/// A reduction operator on `T`: [`Sum`], [`Prod`], [`Min`] and [`Max`] on every
/// [`Reducible`] type; [`And`], [`Or`] and [`Xor`] on integers only.
pub trait ReduceOp<T>: Copy + sealed::Sealed {
    /// The operator's OpenSHMEM name (`sum` as in `shmem_sum_reduce`).
    const NAME: &'static str;
    /// Combines two values.
    fn apply(a: T, b: T) -> T;
}

macro_rules! reduce_op {
    ($($(#[$doc:meta])* $op:ident, $name:literal, $bound:ident, |$a:ident, $b:ident| $e:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
        pub struct $op;
        impl sealed::Sealed for $op {}
        impl<T: $bound> ReduceOp<T> for $op {
            const NAME: &'static str = $name;
            #[inline(always)]
            fn apply($a: T, $b: T) -> T {
                $e
            }
        }
    )*};
}

reduce_op! {
    /// Sum (`shmem_sum_reduce`), wrapping for integers.
    Sum, "sum", Reducible, |a, b| a.add(b);
    /// Product (`shmem_prod_reduce`), wrapping for integers.
    Prod, "prod", Reducible, |a, b| a.mul(b);
    /// Minimum (`shmem_min_reduce`).
    Min, "min", Reducible, |a, b| if b < a { b } else { a };
    /// Maximum (`shmem_max_reduce`).
    Max, "max", Reducible, |a, b| if b > a { b } else { a };
    /// Bitwise and (`shmem_and_reduce`), integers only.
    And, "and", BitwiseReducible, |a, b| a & b;
    /// Bitwise or (`shmem_or_reduce`), integers only.
    Or, "or", BitwiseReducible, |a, b| a | b;
    /// Bitwise exclusive or (`shmem_xor_reduce`), integers only.
    Xor, "xor", BitwiseReducible, |a, b| a ^ b;
}
