//! Device `printf`, opt-in: the [`printf!`](crate::printf!) macro prints with C's format
//! syntax from a kernel, on a GPU through CUDA's device `vprintf` (the driver prints the
//! buffer on the host when the launch ends, in no particular order between threads) and on
//! the CPU executor through the host's standard output, formatted here.
//!
//! Without the crate feature `printf` the macro evaluates its arguments and prints nothing,
//! so a kernel keeps its prints in the source at no cost: `vprintf` adds a call and a
//! local argument buffer to every kernel that uses it, and every thread that runs it prints.
//!
//! Conversions: `%d %i %u %x %X %o %c %s %p %f %F %e %E %g %G %%` with flags `-`, `+`, `0`,
//! a width and a precision; length modifiers (`l`, `ll`, `h`, `z`) are accepted and
//! ignored, since each argument carries its type ([`Arg`]): integers of 32 or 64 bits,
//! `f32` (passed as `f64`, as C does) and `f64`, raw pointers, and C strings (`c"…"`,
//! `&CStr`) for `%s`. At most [`MAX_ARGS`] arguments.

use core::ffi::CStr;

/// The most arguments one [`printf!`](crate::printf!) takes.
pub const MAX_ARGS: usize = 16;

/// One argument of [`printf!`](crate::printf!), as `vprintf` lays it out: 4 bytes for a
/// 32-bit integer, 8 for the rest, each aligned to its size.
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    /// `i32` (also `i8`, `i16`).
    I32(i32),
    /// `u32` (also `u8`, `u16`).
    U32(u32),
    /// `i64` or `isize`.
    I64(i64),
    /// `u64` or `usize`.
    U64(u64),
    /// `f64` (also `f32`).
    F64(f64),
    /// A pointer, for `%p`.
    Ptr(*const u8),
    /// A NUL-terminated string, for `%s`.
    Str(*const u8),
}

macro_rules! arg_from {
    ($($t:ty => $variant:ident as $as:ty),* $(,)?) => {$(
        impl From<$t> for Arg {
            #[inline(always)]
            fn from(v: $t) -> Self {
                Arg::$variant(v as $as)
            }
        }
    )*};
}

arg_from!(
    i8 => I32 as i32, i16 => I32 as i32, i32 => I32 as i32,
    u8 => U32 as u32, u16 => U32 as u32, u32 => U32 as u32,
    i64 => I64 as i64, isize => I64 as i64,
    u64 => U64 as u64, usize => U64 as u64,
    f32 => F64 as f64, f64 => F64 as f64,
);

impl<T> From<*const T> for Arg {
    #[inline(always)]
    fn from(p: *const T) -> Self {
        Arg::Ptr(p.cast())
    }
}

impl<T> From<*mut T> for Arg {
    #[inline(always)]
    fn from(p: *mut T) -> Self {
        Arg::Ptr(p.cast_const().cast())
    }
}

impl From<&CStr> for Arg {
    #[inline(always)]
    fn from(s: &CStr) -> Self {
        Arg::Str(s.as_ptr().cast())
    }
}

/// Prints from a kernel thread with C's `printf` syntax, when the crate feature `printf` is
/// on; otherwise evaluates the arguments and prints nothing. See [`printf`](mod@crate::printf).
///
/// ```ignore
/// symmem_device::printf!("PE %d thread %u: %f\n", my_pe() as i32, thread_rank(), x);
/// symmem_device::printf!("%s\n", c"a C string");
/// ```
#[macro_export]
macro_rules! printf {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {
        $crate::printf::print(
            // SAFETY: a literal with one NUL, at its end.
            unsafe { ::core::ffi::CStr::from_bytes_with_nul_unchecked(concat!($fmt, "\0").as_bytes()) },
            &[$($crate::printf::Arg::from($arg)),*],
        )
    };
}

/// What [`printf!`](crate::printf!) calls: prints `format` with `args` (nothing without the
/// `printf` feature).
#[inline(always)]
pub fn print<const N: usize>(format: &CStr, args: &[Arg; N]) {
    const {
        assert!(
            N <= MAX_ARGS,
            "printf! takes at most MAX_ARGS (16) arguments"
        )
    };
    #[cfg(feature = "printf")]
    crate::arch::printf(format, args);
    #[cfg(not(feature = "printf"))]
    let _ = (format, args);
}

/// The argument buffer of CUDA's `vprintf`: each argument at the next offset aligned to its
/// size. Returns the buffer (in 8-byte words).
#[cfg(all(feature = "printf", target_arch = "nvptx64"))]
#[inline(always)]
pub(crate) fn vprintf_args(args: &[Arg]) -> [u64; MAX_ARGS] {
    let mut buf = [0u64; MAX_ARGS];
    let bytes = buf.as_mut_ptr().cast::<u8>();
    let mut at = 0usize;
    for a in args {
        let (value, size) = match *a {
            Arg::I32(v) => (v as u32 as u64, 4),
            Arg::U32(v) => (v as u64, 4),
            Arg::I64(v) => (v as u64, 8),
            Arg::U64(v) => (v, 8),
            Arg::F64(v) => (v.to_bits(), 8),
            Arg::Ptr(p) | Arg::Str(p) => (p as u64, 8),
        };
        at = at.next_multiple_of(size);
        // SAFETY: at most MAX_ARGS arguments of at most 8 bytes, each aligned to its size,
        // fit in the buffer's MAX_ARGS words.
        unsafe {
            if size == 4 {
                bytes.add(at).cast::<u32>().write(value as u32);
            } else {
                bytes.add(at).cast::<u64>().write(value);
            }
        }
        at += size;
    }
    buf
}

/// `format` with `args`, formatted as C's `printf` does (for the CPU executor), appended
/// to `out`.
#[cfg(all(feature = "host", not(target_arch = "nvptx64")))]
pub fn format_into(out: &mut host_format::String, format: &CStr, args: &[Arg]) {
    host_format::format_into(out, format.to_bytes(), args)
}

#[cfg(all(feature = "host", not(target_arch = "nvptx64")))]
#[path = "printf_host.rs"]
mod host_format;
