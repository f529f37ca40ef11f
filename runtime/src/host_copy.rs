//! The host's copies for puts and gets on mapped heaps, by size.
//!
//! Three methods, each where it measured fastest on the 2-core AMD EPYC development
//! machine (glibc 2.36; one core copying the same buffers over and over, as
//! `symmem-perf`'s `put_bw` does):
//!
//! - Below [`MIN_VECTOR_COPY`] (2 KiB), the platform's `memcpy`: inlined for fixed sizes,
//!   and as fast as anything at every relative alignment.
//! - From there to a core's L2 cache (1 MiB here), the runtime's vector copy: 32-byte
//!   loads and stores four at a time, the destination aligned first. `memcpy` copies
//!   these sizes with `rep movsb`, which moved 3–4 GB/s where the destination sat 1 or 8
//!   bytes (mod 64) past the source (a put of 8-byte-headed records, a `putmem` at an
//!   odd offset) and 41–48 GB/s at 16 bytes past it. The vector loop moved 44–97 GB/s at
//!   those offsets, and on aligned buffers it matched or beat `rep movsb` (4 KiB: 116
//!   against 97 GB/s; 64 KiB: 57 against 56). From the L2 size on `memcpy` is a vector
//!   loop of its own, as fast.
//! - From a threshold on, non-temporal stores (`vmovntdq`, or `movntdq` without AVX2),
//!   which go around the caches: a copy that does not fit in the last-level cache would
//!   only evict what is there and then wait for the write-backs. `memcpy` moved 38.0,
//!   34.5, 28.4, 27.0, 21.0, 19.6 GB/s at 6, 8, 10, 12, 14, 16 MiB; non-temporal stores
//!   27.6, 27.7, 27.0, 27.5, 25.9, 27.9 GB/s. They cross at about 12 MiB, 3/8 of the
//!   32 MiB L3, which is the default threshold ([`HostCopy::new`]).
//!
//! `SYMMEM_VECTOR_COPY_BELOW` and `SYMMEM_NT_COPY_THRESHOLD` move the bounds or turn a
//! method off.

use crate::config::{CopyBound, MIN_NT_COPY, MIN_VECTOR_COPY};

/// Which method copies how much: `memcpy` below [`MIN_VECTOR_COPY`] bytes, the vector
/// copy from there to `vector_below`, `memcpy` again up to `nt_from`, non-temporal
/// stores from there on (0 and `usize::MAX` turn the vector copy and the non-temporal
/// stores off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HostCopy {
    vector_below: usize,
    nt_from: usize,
}

/// The default non-temporal threshold as a fraction of the last-level cache: where the
/// two methods crossed on the development machine (see the module's doc).
const AUTO_NUMERATOR: usize = 3;
const AUTO_DENOMINATOR: usize = 8;

/// The vector copy's default upper bound where sysfs does not tell the L2's size (a
/// container without `/sys`): the development machine's L2. Up to there the vector copy
/// measured at least as fast as `memcpy` at every alignment, so a wrong guess costs little.
const FALLBACK_VECTOR_BELOW: usize = 1 << 20;

impl HostCopy {
    /// The copies the two settings ask for; `auto` from this machine's caches.
    pub(crate) fn new(vector: CopyBound, nt: CopyBound) -> Self {
        Self::for_caches(vector, nt, &Caches::of_cpu0())
    }

    /// [`Self::new`] on a machine with `caches`.
    fn for_caches(vector: CopyBound, nt: CopyBound, caches: &Caches) -> Self {
        let vector_below = match vector {
            _ if !vector_copy_available() => 0,
            CopyBound::Auto => caches.l2.unwrap_or(FALLBACK_VECTOR_BELOW),
            CopyBound::Off => 0,
            CopyBound::At(bytes) => bytes,
        };
        let nt_from = match nt {
            _ if !nt_stores_available() => usize::MAX,
            CopyBound::Auto => match caches.last_level {
                Some(llc) if llc > 0 => llc / AUTO_DENOMINATOR * AUTO_NUMERATOR,
                _ => usize::MAX,
            },
            CopyBound::Off => usize::MAX,
            CopyBound::At(bytes) => bytes,
        };
        Self {
            vector_below,
            nt_from,
        }
    }

    /// One line for the init log: which method copies which sizes.
    pub(crate) fn describe(&self) -> String {
        let mut bands = vec![(0, "memcpy")];
        if self.vector_below > MIN_VECTOR_COPY {
            bands.push((MIN_VECTOR_COPY, "the 32-byte vector copy"));
            if self.vector_below < self.nt_from {
                bands.push((self.vector_below, "memcpy"));
            }
        }
        if self.nt_from != usize::MAX {
            bands.push((self.nt_from.max(MIN_NT_COPY), "non-temporal stores"));
        }
        let bands: Vec<String> = bands
            .iter()
            .map(|(from, method)| format!("{method} from {from} bytes"))
            .collect();
        format!("host copies by size: {}", bands.join(", "))
    }

    /// Copies `len` bytes from `src` to `dst` with the method for `len`. A copy by
    /// non-temporal stores ends with a store fence, so stores after it (a signal, a flag)
    /// are ordered after the data, as after `memcpy`.
    ///
    /// # Safety
    /// As [`std::ptr::copy_nonoverlapping`]: `src` valid for `len` bytes of reads, `dst`
    /// for `len` bytes of writes, not overlapping.
    #[inline(always)]
    pub(crate) unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) {
        // The constant tests first: for `p`, `g` and other fixed small sizes they fold
        // away, and with them the loads of the bounds.
        if len >= MIN_NT_COPY && len >= self.nt_from {
            // SAFETY: forwarded from the caller; `nt_from` is finite only where the
            // stores exist.
            unsafe { simd::nt_copy(dst, src, len) }
        } else if len >= MIN_VECTOR_COPY && len < self.vector_below {
            // SAFETY: forwarded from the caller; `vector_below` is non-zero only where
            // the CPU has AVX2.
            unsafe { simd::vector_copy(dst, src, len) }
        } else {
            // SAFETY: forwarded from the caller.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
        }
    }
}

/// Whether this build has the non-temporal copy (x86-64, where SSE2 is always there).
fn nt_stores_available() -> bool {
    cfg!(target_arch = "x86_64")
}

/// Whether this CPU runs the vector copy (x86-64 with AVX2).
fn vector_copy_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The data cache sizes that set the automatic bounds.
#[derive(Debug, Default)]
struct Caches {
    /// A core's level-2 cache, in bytes.
    l2: Option<usize>,
    /// The largest data or unified cache (the last level), in bytes.
    last_level: Option<usize>,
}

impl Caches {
    /// CPU 0's caches, from sysfs (none where it is not readable).
    fn of_cpu0() -> Self {
        let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache") else {
            return Self::default();
        };
        let mut caches = Self::default();
        for entry in dir.flatten() {
            let path = entry.path();
            let is_index = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("index"));
            let read = |file| std::fs::read_to_string(path.join(file)).ok();
            if !is_index || read("type").is_some_and(|t| t.trim() == "Instruction") {
                continue;
            }
            let Some(size) = read("size").and_then(|s| parse_cache_size(&s)) else {
                continue;
            };
            if read("level").is_some_and(|l| l.trim() == "2") {
                caches.l2 = Some(size);
            }
            caches.last_level = caches.last_level.max(Some(size));
        }
        caches
    }
}

/// A sysfs cache size (`32768K`, `1M`, `512`) in bytes.
fn parse_cache_size(text: &str) -> Option<usize> {
    let t = text.trim();
    let (digits, unit) = match t.as_bytes().last()? {
        b'K' => (&t[..t.len() - 1], 1 << 10),
        b'M' => (&t[..t.len() - 1], 1 << 20),
        b'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

#[cfg(target_arch = "x86_64")]
mod simd {
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
    pub(super) unsafe fn nt_copy(dst: *mut u8, src: *const u8, len: usize) {
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
            pub(super) unsafe fn $name(mut dst: *mut u8, mut src: *const u8, mut len: usize) {
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
mod simd {
    /// No non-temporal copy on this architecture: `memcpy` (never reached: the
    /// threshold is infinite here).
    ///
    /// # Safety
    /// As [`std::ptr::copy_nonoverlapping`].
    pub(super) unsafe fn nt_copy(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }

    /// No vector copy on this architecture: `memcpy` (never reached: its bound is 0
    /// here).
    ///
    /// # Safety
    /// As [`std::ptr::copy_nonoverlapping`].
    pub(super) unsafe fn vector_copy(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_cache_sizes_parse() {
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("1M"), Some(1 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("x"), None);
        assert_eq!(parse_cache_size(""), None);
    }

    #[test]
    fn the_automatic_bounds_come_from_the_caches() {
        let epyc = Caches {
            l2: Some(1 << 20),
            last_level: Some(32 << 20),
        };
        let auto = HostCopy::for_caches(CopyBound::Auto, CopyBound::Auto, &epyc);
        let nt_want = if nt_stores_available() {
            12 << 20
        } else {
            usize::MAX
        };
        let vector_want = if vector_copy_available() { 1 << 20 } else { 0 };
        assert_eq!(auto.nt_from, nt_want, "3/8 of the last-level cache");
        assert_eq!(auto.vector_below, vector_want, "the L2");
        let unknown = HostCopy::for_caches(CopyBound::Auto, CopyBound::Auto, &Caches::default());
        let fallback = if vector_copy_available() {
            FALLBACK_VECTOR_BELOW
        } else {
            0
        };
        assert_eq!(
            (unknown.vector_below, unknown.nt_from),
            (fallback, usize::MAX)
        );
        let off = HostCopy::for_caches(CopyBound::Off, CopyBound::Off, &epyc);
        assert_eq!((off.vector_below, off.nt_from), (0, usize::MAX));
        assert_eq!(off.describe(), "host copies by size: memcpy from 0 bytes");
    }

    #[test]
    fn every_method_copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
        let none = Caches::default();
        let by_size = HostCopy::for_caches(
            CopyBound::At(MIN_VECTOR_COPY + 1000),
            CopyBound::At(MIN_NT_COPY),
            &none,
        );
        let memcpy = HostCopy::for_caches(CopyBound::Off, CopyBound::Off, &none);
        type Copy<'a> = Box<dyn Fn(*mut u8, *const u8, usize) + 'a>;
        #[allow(unused_mut)] // pushed to on x86-64 only
        let mut methods: Vec<Copy<'_>> = vec![
            // SAFETY: the loop below passes ranges inside two separate vectors.
            Box::new(|d, s, n| unsafe { simd::nt_copy(d, s, n) }),
            // SAFETY: as above.
            Box::new(|d, s, n| unsafe { by_size.copy(d, s, n) }),
            // SAFETY: as above.
            Box::new(|d, s, n| unsafe { memcpy.copy(d, s, n) }),
        ];
        // Both widths, whichever `nt_copy` picks here, and the vector copy.
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: as above.
            methods.push(Box::new(|d, s, n| unsafe { simd::nt_copy_sse2(d, s, n) }));
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: as above, on a CPU with AVX2.
                methods.push(Box::new(|d, s, n| unsafe { simd::nt_copy_avx2(d, s, n) }));
                // SAFETY: as above, on a CPU with AVX2.
                methods.push(Box::new(|d, s, n| unsafe { simd::vector_copy(d, s, n) }));
            }
        }
        for copy in methods {
            for len in [
                0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 2048, 3000, 4096,
                5000,
            ] {
                for (s_off, d_off) in [(0, 0), (1, 0), (0, 3), (5, 11), (16, 8), (32, 48)] {
                    let mut dst = vec![0xAAu8; 8192];
                    // Both ranges lie inside their vectors (offsets + len < 8192), which
                    // do not overlap.
                    copy(
                        dst.as_mut_ptr().wrapping_add(d_off),
                        src.as_ptr().wrapping_add(s_off),
                        len,
                    );
                    assert_eq!(&dst[d_off..d_off + len], &src[s_off..s_off + len]);
                    assert!(
                        dst[..d_off].iter().all(|&b| b == 0xAA),
                        "{len} {s_off} {d_off}"
                    );
                    assert!(dst[d_off + len..].iter().all(|&b| b == 0xAA));
                }
            }
        }
    }
}
