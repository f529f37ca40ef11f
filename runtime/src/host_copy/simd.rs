//! The runtime's own copies: by non-temporal stores, and by 32-byte vectors through the
//! caches (x86-64; elsewhere both are `memcpy`, never reached).

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_loadu_si256, _mm256_store_si256, _mm256_stream_si256,
        _mm_loadu_si128, _mm_sfence, _mm_stream_si128,
    };

    /// Copies `len` bytes by non-temporal stores, then `sfence`: 32-byte stores where the
    /// CPU has AVX2, else 16-byte ones. On the development machine (AMD EPYC, 16 MiB
    /// copies, the two alternating in one process) the 32-byte loop moved 5–20% more in
    /// each of 8 pairs (e.g. 19.7 against 15.6 GB/s, 24.1 against 21.7).
    ///
    /// # Safety
    /// As [`std::ptr::copy_nonoverlapping`].
    pub(in crate::host_copy) unsafe fn nt_copy(dst: *mut u8, src: *const u8, len: usize) {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: forwarded from the caller; the CPU has AVX2.
            unsafe { nt_copy_avx2(dst, src, len) }
        } else {
            // SAFETY: forwarded from the caller.
            unsafe { nt_copy_sse2(dst, src, len) }
        }
    }

    /// Defines `$name`, a copy by `$vec`-wide loads and `$store`s: the head up to the
    /// destination's first `$vec`-aligned byte and the tail by `memcpy`, the body four
    /// vectors at a time, then `$finish` if given.
    macro_rules! copy_by {
        ($(#[$attr:meta])* $name:ident, $vec:ty, $load:ident, $store:ident $(, $finish:expr)?) => {
            $(#[$attr])*
            pub(in crate::host_copy) unsafe fn $name(mut dst: *mut u8, mut src: *const u8, mut len: usize) {
                const WIDTH: usize = std::mem::size_of::<$vec>();
                const STEP: usize = 4 * WIDTH;
                let head = dst.align_offset(WIDTH).min(len);
                // SAFETY: the caller's ranges hold `len` bytes; `head <= len`, and every
                // step below stays within what is left of them. The store gets a
                // `WIDTH`-aligned destination (after the head, `dst` advances by
                // multiples of `WIDTH`); the load takes any alignment; the caller
                // guarantees the instructions exist.
                unsafe {
                    std::ptr::copy_nonoverlapping(src, dst, head);
                    dst = dst.add(head);
                    src = src.add(head);
                    len -= head;
                    while len >= STEP {
                        let s = src.cast::<$vec>();
                        let (a, b) = ($load(s), $load(s.add(1)));
                        let (c, d) = ($load(s.add(2)), $load(s.add(3)));
                        let t = dst.cast::<$vec>();
                        $store(t, a);
                        $store(t.add(1), b);
                        $store(t.add(2), c);
                        $store(t.add(3), d);
                        dst = dst.add(STEP);
                        src = src.add(STEP);
                        len -= STEP;
                    }
                    std::ptr::copy_nonoverlapping(src, dst, len);
                    $($finish;)?
                }
            }
        };
    }

    copy_by!(
        /// [`nt_copy`] with 16-byte stores (SSE2, part of x86-64).
        ///
        /// # Safety
        /// As [`std::ptr::copy_nonoverlapping`].
        nt_copy_sse2,
        __m128i,
        _mm_loadu_si128,
        _mm_stream_si128,
        // Non-temporal stores are weakly ordered: fence them before whatever the caller
        // stores next (a signal after a put).
        _mm_sfence()
    );

    copy_by!(
        /// [`nt_copy`] with 32-byte stores.
        ///
        /// # Safety
        /// As [`std::ptr::copy_nonoverlapping`], on a CPU with AVX2.
        #[target_feature(enable = "avx2")]
        nt_copy_avx2,
        __m256i,
        _mm256_loadu_si256,
        _mm256_stream_si256,
        // As in `nt_copy_sse2`.
        _mm_sfence()
    );

    copy_by!(
        /// Copies `len` bytes through the caches by 32-byte loads and aligned stores.
        /// Ordinary stores, so no fence: they are ordered as `memcpy`'s are.
        ///
        /// # Safety
        /// As [`std::ptr::copy_nonoverlapping`], on a CPU with AVX2.
        #[target_feature(enable = "avx2")]
        vector_copy,
        __m256i,
        _mm256_loadu_si256,
        _mm256_store_si256
    );
}

#[cfg(not(target_arch = "x86_64"))]
mod other {
    /// No non-temporal copy on this architecture: `memcpy` (never reached: the
    /// threshold is infinite here).
    ///
    /// # Safety
    /// As [`std::ptr::copy_nonoverlapping`].
    pub(in crate::host_copy) unsafe fn nt_copy(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }

    /// No vector copy on this architecture: `memcpy` (never reached: its bound is 0
    /// here).
    ///
    /// # Safety
    /// As [`std::ptr::copy_nonoverlapping`].
    pub(in crate::host_copy) unsafe fn vector_copy(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) use x86::{nt_copy, vector_copy};

#[cfg(all(test, target_arch = "x86_64"))]
pub(super) use x86::{nt_copy_avx2, nt_copy_sse2};

#[cfg(not(target_arch = "x86_64"))]
pub(super) use other::{nt_copy, vector_copy};
