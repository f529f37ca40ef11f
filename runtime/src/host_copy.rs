//! The host's copies for puts and gets on mapped heaps, by size.
//!
//! Below a threshold a copy is the platform's `memcpy`: source and destination stay in
//! the caches, where small and medium copies run fastest, and the peer that reads the data
//! next finds it in the shared last-level cache. From the threshold on, the copy writes
//! with non-temporal stores (`vmovntdq`, or `movntdq` without AVX2), which go around the
//! caches: a copy that does not fit in the last-level cache would only evict what is there
//! and then wait for the write-backs.
//!
//! Measured on the 2-core AMD EPYC development machine (32 MiB L3, one core copying the
//! same buffers over and over, as `symmem-perf`'s `put_bw` does): `memcpy` 38.0, 34.5,
//! 28.4, 27.0, 21.0, 19.6 GB/s at 6, 8, 10, 12, 14, 16 MiB; non-temporal stores
//! 27.6, 27.7, 27.0, 27.5, 25.9, 27.9 GB/s. They cross at about 12 MiB, 3/8 of the L3,
//! which is the default threshold ([`HostCopy::auto`]). `rep movsb` (the CPU has ERMS and
//! FSRM) measured within 5% of `memcpy` below 8 MiB and no faster above it, so it is not
//! used. `SYMMEM_NT_COPY_THRESHOLD` sets the threshold, or turns the stores off.

use crate::config::{NtCopy, MIN_NT_COPY};

/// Which method copies how much: `memcpy` below `nt_from` bytes, non-temporal stores
/// from it on (`usize::MAX`: never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HostCopy {
    nt_from: usize,
}

/// The default threshold as a fraction of the last-level cache: where the two methods
/// crossed on the development machine (see the module's doc).
const AUTO_NUMERATOR: usize = 3;
const AUTO_DENOMINATOR: usize = 8;

impl HostCopy {
    /// The copies `setting` asks for; `auto` from this machine's last-level cache.
    pub(crate) fn new(setting: NtCopy) -> Self {
        match setting {
            NtCopy::Auto => Self::auto(last_level_cache_bytes()),
            NtCopy::Off => Self {
                nt_from: usize::MAX,
            },
            NtCopy::From(bytes) => Self {
                nt_from: if nt_stores_available() {
                    bytes
                } else {
                    usize::MAX
                },
            },
        }
    }

    /// The default for a last-level cache of `llc` bytes (unknown: never).
    fn auto(llc: Option<usize>) -> Self {
        let nt_from = match llc {
            Some(llc) if llc > 0 && nt_stores_available() => {
                llc / AUTO_DENOMINATOR * AUTO_NUMERATOR
            }
            _ => usize::MAX,
        };
        Self { nt_from }
    }

    /// One line for the init log: the threshold, or why there is none.
    pub(crate) fn describe(&self) -> String {
        if self.nt_from == usize::MAX {
            "host copies: memcpy at every size".to_string()
        } else {
            format!(
                "host copies: memcpy below {} bytes, non-temporal stores from there on",
                self.nt_from
            )
        }
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
        // The constant test first: for `p`, `g` and other fixed small sizes it folds
        // away, and with it the load of the threshold.
        if len >= MIN_NT_COPY && len >= self.nt_from {
            // SAFETY: forwarded from the caller; `nt_from` is finite only where the
            // stores exist.
            unsafe { nt::copy(dst, src, len) }
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

/// The size of the largest cache CPU 0 sees (the last level), from sysfs.
fn last_level_cache_bytes() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(|e| {
        let path = e.ok()?.path();
        let name = path.file_name()?.to_str()?;
        if !name.starts_with("index") {
            return None;
        }
        let kind = std::fs::read_to_string(path.join("type")).ok()?;
        if kind.trim() == "Instruction" {
            return None;
        }
        parse_cache_size(&std::fs::read_to_string(path.join("size")).ok()?)
    })
    .max()
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
mod nt {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_loadu_si256, _mm256_stream_si256, _mm_loadu_si128, _mm_sfence,
        _mm_stream_si128,
    };

    /// Copies `len` bytes by non-temporal stores, then `sfence`: 32-byte stores where the
    /// CPU has AVX2, else 16-byte ones. On the development machine (AMD EPYC, 16 MiB
    /// copies, the two alternating in one process) the 32-byte loop moved 5–20% more in
    /// each of 8 pairs (e.g. 19.7 against 15.6 GB/s, 24.1 against 21.7).
    ///
    /// # Safety
    /// As [`std::ptr::copy_nonoverlapping`].
    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: forwarded from the caller; the CPU has AVX2.
            unsafe { copy_avx2(dst, src, len) }
        } else {
            // SAFETY: forwarded from the caller.
            unsafe { copy_sse2(dst, src, len) }
        }
    }

    /// Defines `$name`, [`copy`] with `$vec`-wide loads and streaming stores: the head up
    /// to the destination's first `$vec`-aligned byte and the tail by `memcpy`, the body
    /// four vectors at a time, then `sfence`.
    macro_rules! nt_copy_by {
        ($(#[$attr:meta])* $name:ident, $vec:ty, $load:ident, $stream:ident) => {
            $(#[$attr])*
            pub(super) unsafe fn $name(mut dst: *mut u8, mut src: *const u8, mut len: usize) {
                const WIDTH: usize = std::mem::size_of::<$vec>();
                const STEP: usize = 4 * WIDTH;
                let head = dst.align_offset(WIDTH).min(len);
                // SAFETY: the caller's ranges hold `len` bytes; `head <= len`, and every
                // step below stays within what is left of them. The streaming store gets
                // a `WIDTH`-aligned destination (after the head, `dst` advances by
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
                        $stream(t, a);
                        $stream(t.add(1), b);
                        $stream(t.add(2), c);
                        $stream(t.add(3), d);
                        dst = dst.add(STEP);
                        src = src.add(STEP);
                        len -= STEP;
                    }
                    std::ptr::copy_nonoverlapping(src, dst, len);
                    // Non-temporal stores are weakly ordered: fence them before whatever
                    // the caller stores next (a signal after a put).
                    _mm_sfence();
                }
            }
        };
    }

    nt_copy_by!(
        /// [`copy`] with 16-byte stores (SSE2, part of x86-64).
        ///
        /// # Safety
        /// As [`std::ptr::copy_nonoverlapping`].
        copy_sse2,
        __m128i,
        _mm_loadu_si128,
        _mm_stream_si128
    );

    nt_copy_by!(
        /// [`copy`] with 32-byte stores.
        ///
        /// # Safety
        /// As [`std::ptr::copy_nonoverlapping`], on a CPU with AVX2.
        #[target_feature(enable = "avx2")]
        copy_avx2,
        __m256i,
        _mm256_loadu_si256,
        _mm256_stream_si256
    );
}

#[cfg(not(target_arch = "x86_64"))]
mod nt {
    /// No non-temporal copy on this architecture: `memcpy` (never reached: the
    /// threshold is infinite here).
    ///
    /// # Safety
    /// As [`std::ptr::copy_nonoverlapping`].
    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
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
    fn the_default_is_three_eighths_of_the_last_level_cache() {
        let want = if nt_stores_available() {
            12 << 20
        } else {
            usize::MAX
        };
        assert_eq!(HostCopy::auto(Some(32 << 20)).nt_from, want);
        assert_eq!(HostCopy::auto(None).nt_from, usize::MAX);
        assert_eq!(HostCopy::new(NtCopy::Off).nt_from, usize::MAX);
    }

    #[test]
    fn every_method_copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
        let by_size = HostCopy::new(NtCopy::From(MIN_NT_COPY));
        type Copy<'a> = Box<dyn Fn(*mut u8, *const u8, usize) + 'a>;
        #[allow(unused_mut)] // pushed to on x86-64 only
        let mut methods: Vec<Copy<'_>> = vec![
            // SAFETY: the loop below passes ranges inside two separate vectors.
            Box::new(|d, s, n| unsafe { nt::copy(d, s, n) }),
            // SAFETY: as above.
            Box::new(|d, s, n| unsafe { by_size.copy(d, s, n) }),
            // SAFETY: as above.
            Box::new(|d, s, n| unsafe { HostCopy::new(NtCopy::Off).copy(d, s, n) }),
        ];
        // Both widths, whichever `nt::copy` picks here.
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: as above.
            methods.push(Box::new(|d, s, n| unsafe { nt::copy_sse2(d, s, n) }));
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: as above, on a CPU with AVX2.
                methods.push(Box::new(|d, s, n| unsafe { nt::copy_avx2(d, s, n) }));
            }
        }
        for copy in methods {
            for len in [
                0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 4096, 5000,
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
