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
//! Those bounds fit that machine, not every one: on a 2-core Intel Xeon VM sharing a
//! 48 MiB L3, glibc's `memcpy` beat the vector copy 1.5–2.5× at 4 KiB, and non-temporal
//! stores beat `memcpy` 2× at 16 MiB, below the 18 MiB that 3/8 of its L3 gave. So `auto`
//! takes the bounds measured on the machine itself ([`calibrate`]: about 0.1 s, once per
//! boot, kept in a file), and the caches' guess above only where nothing can be measured
//! or kept.
//!
//! A fourth method, chosen by measurement or by `SYMMEM_SLICED_COPY_FROM` (never by the
//! caches' guess): `memcpy` in slices of [`SLICE`] bytes. glibc
//! copies a size below a core's L2 with `rep movsb`, which writes whole cache lines
//! without reading them first, and a larger one with a vector loop that does; on the
//! development machine a 2 MiB copy by 256 KiB `memcpy`s moved 58–63 GB/s, one
//! `memcpy` 51–63 (depending on where the process's buffers lay), and Open MPI's
//! one-sided puts, whose datatype engine copies contiguous data in 128 KiB `memcpy`s
//! (`opal_datatype_memop_block_size`), had been ahead of symmem there. Where it pays
//! depends on the CPU and its `memcpy`, so `auto` uses it only in the band where it
//! measured no slower.
//!
//! `SYMMEM_VECTOR_COPY_BELOW`, `SYMMEM_NT_COPY_THRESHOLD` and `SYMMEM_SLICED_COPY_FROM`
//! move the bounds or turn a method off; a size given there wins over the measurement.

mod caches;
pub mod calibrate;
mod simd;

use crate::config::{CopyBound, MIN_NT_COPY, MIN_VECTOR_COPY};
use caches::Caches;
use calibrate::Calibration;

/// Which method copies how much: `memcpy` below [`MIN_VECTOR_COPY`] bytes, the vector
/// copy from there to `vector_below`, `memcpy` again up to `nt_from`, non-temporal
/// stores from there on (0 and `usize::MAX` turn the vector copy and the non-temporal
/// stores off); between `slices_from` and `slices_below`, where no other method is
/// chosen, `memcpy` in [`SLICE`]-byte slices (an empty band: never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HostCopy {
    vector_below: usize,
    nt_from: usize,
    slices_from: usize,
    slices_below: usize,
}

/// The slice of the sliced `memcpy`: below a core's L2 on current x86 CPUs (512 KiB to
/// 2 MiB), where glibc's `memcpy` uses `rep movsb`. On the development machine slices of
/// 64 KiB to 512 KiB moved the same (59–61 GB/s at 2 MiB).
pub(crate) const SLICE: usize = 256 << 10;

/// The copy methods, as [`HostCopy::method`] picks them by size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Memcpy,
    Vector,
    Sliced,
    NonTemporal,
}

impl Method {
    /// The method in words, for the init log.
    fn name(self) -> &'static str {
        match self {
            Method::Memcpy => "memcpy",
            Method::Vector => "the 32-byte vector copy",
            Method::Sliced => "memcpy in 256 KiB slices",
            Method::NonTemporal => "non-temporal stores",
        }
    }
}

/// `memcpy` of `len` bytes as one `memcpy` per [`SLICE`] bytes.
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`].
unsafe fn sliced_memcpy(dst: *mut u8, src: *const u8, len: usize) {
    let mut done = 0;
    while done < len {
        let n = SLICE.min(len - done);
        // SAFETY: `done + n <= len`: within both of the caller's ranges.
        unsafe { std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), n) };
        done += n;
    }
}

/// What the `auto` bounds of a [`HostCopy`] came from, for the init log.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Basis {
    /// Measured on this machine (now or earlier this boot).
    Measured(Calibration),
    /// Guessed from the caches' sizes: nothing could be measured or kept, or no bound is
    /// `auto`.
    Caches,
}

impl Basis {
    /// The basis in words, after [`HostCopy::describe`].
    pub(crate) fn describe(&self) -> String {
        match self {
            Basis::Measured(m) => format!("auto bounds {}", m.describe()),
            Basis::Caches if !calibrate::MEASURABLE => {
                "auto bounds from the cache sizes (an unoptimized build: not measured)".into()
            }
            Basis::Caches => "auto bounds from the cache sizes (nothing measured)".into(),
        }
    }
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
    /// The copies the two settings ask for; `auto` as measured on this machine this boot
    /// ([`calibrate::for_this_boot`]), else from its caches' sizes.
    pub(crate) fn new(vector: CopyBound, nt: CopyBound, sliced: CopyBound) -> (Self, Basis) {
        let caches = Caches::of_cpu0();
        let auto = [vector, nt, sliced].contains(&CopyBound::Auto);
        let measured = auto
            .then(|| {
                calibrate::for_this_boot(vector_copy_available(), nt_stores_available(), caches.l2)
            })
            .flatten();
        let copy = Self::choose(vector, nt, sliced, measured.as_ref(), &caches);
        (copy, measured.map_or(Basis::Caches, Basis::Measured))
    }

    /// [`Self::new`] with `measured` (if any) on a machine with `caches`.
    fn choose(
        vector: CopyBound,
        nt: CopyBound,
        sliced: CopyBound,
        measured: Option<&Calibration>,
        caches: &Caches,
    ) -> Self {
        let vector_below = match vector {
            _ if !vector_copy_available() => 0,
            CopyBound::Auto => match measured {
                Some(m) => m.vector_below,
                None => caches.l2.unwrap_or(FALLBACK_VECTOR_BELOW),
            },
            CopyBound::Off => 0,
            CopyBound::At(bytes) => bytes,
        };
        let nt_from = match nt {
            _ if !nt_stores_available() => usize::MAX,
            CopyBound::Auto => match (measured, caches.last_level) {
                (Some(m), _) => m.nt_from,
                (None, Some(llc)) if llc > 0 => llc / AUTO_DENOMINATOR * AUTO_NUMERATOR,
                (None, _) => usize::MAX,
            },
            CopyBound::Off => usize::MAX,
            CopyBound::At(bytes) => bytes,
        };
        // The other methods, checked first, take the sizes they are given for; a size given
        // here slices from there on, and only a measurement says where the slices win.
        let (slices_from, slices_below) = match sliced {
            CopyBound::Auto => {
                measured.map_or((usize::MAX, 0), |m| (m.sliced_from, m.sliced_below))
            }
            CopyBound::Off => (usize::MAX, 0),
            CopyBound::At(bytes) => (bytes, usize::MAX),
        };
        Self {
            vector_below,
            nt_from,
            slices_from,
            slices_below,
        }
    }

    /// The method for a copy of `len` bytes. The tests against constants come first: for
    /// `p`, `g` and other fixed small sizes they fold away, and with them the loads of the
    /// bounds.
    #[inline(always)]
    fn method(&self, len: usize) -> Method {
        if len >= MIN_NT_COPY && len >= self.nt_from {
            Method::NonTemporal
        } else if len >= MIN_VECTOR_COPY && len < self.vector_below {
            Method::Vector
        } else if len > SLICE && len >= self.slices_from && len < self.slices_below {
            Method::Sliced
        } else {
            Method::Memcpy
        }
    }

    /// One line for the init log: which method copies which sizes.
    pub(crate) fn describe(&self) -> String {
        // The method can change only at a bound: name it at each, where it changes.
        let mut at = vec![
            0,
            MIN_VECTOR_COPY,
            self.vector_below,
            self.slices_from.max(SLICE + 1),
            self.slices_below,
            self.nt_from.max(MIN_NT_COPY),
        ];
        at.sort_unstable();
        at.dedup();
        let mut bands: Vec<String> = Vec::new();
        let mut last = None;
        for from in at.into_iter().filter(|&b| b != usize::MAX) {
            let m = self.method(from);
            if last != Some(m) {
                bands.push(format!("{} from {from} bytes", m.name()));
                last = Some(m);
            }
        }
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
        match self.method(len) {
            // SAFETY: forwarded from the caller; `nt_from` is finite only where the
            // stores exist.
            Method::NonTemporal => unsafe { simd::nt_copy(dst, src, len) },
            // SAFETY: forwarded from the caller; `vector_below` is non-zero only where
            // the CPU has AVX2.
            Method::Vector => unsafe { simd::vector_copy(dst, src, len) },
            // SAFETY: forwarded from the caller.
            Method::Sliced => unsafe { sliced_memcpy(dst, src, len) },
            // SAFETY: forwarded from the caller.
            Method::Memcpy => unsafe { std::ptr::copy_nonoverlapping(src, dst, len) },
        }
    }
}

/// Whether this build has the non-temporal copy (x86-64, where SSE2 is always there).
pub(crate) fn nt_stores_available() -> bool {
    cfg!(target_arch = "x86_64")
}

/// Whether this CPU runs the vector copy (x86-64 with AVX2).
pub(crate) fn vector_copy_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_automatic_bounds_come_from_the_caches() {
        let epyc = Caches {
            l2: Some(1 << 20),
            last_level: Some(32 << 20),
        };
        let auto = HostCopy::choose(
            CopyBound::Auto,
            CopyBound::Auto,
            CopyBound::Auto,
            None,
            &epyc,
        );
        let nt_want = if nt_stores_available() {
            12 << 20
        } else {
            usize::MAX
        };
        let vector_want = if vector_copy_available() { 1 << 20 } else { 0 };
        assert_eq!(auto.nt_from, nt_want, "3/8 of the last-level cache");
        assert_eq!(auto.vector_below, vector_want, "the L2");
        let unknown = HostCopy::choose(
            CopyBound::Auto,
            CopyBound::Auto,
            CopyBound::Auto,
            None,
            &Caches::default(),
        );
        let fallback = if vector_copy_available() {
            FALLBACK_VECTOR_BELOW
        } else {
            0
        };
        assert_eq!(
            (unknown.vector_below, unknown.nt_from),
            (fallback, usize::MAX)
        );
        let off = HostCopy::choose(CopyBound::Off, CopyBound::Off, CopyBound::Auto, None, &epyc);
        assert_eq!((off.vector_below, off.nt_from), (0, usize::MAX));
        assert_eq!(off.describe(), "host copies by size: memcpy from 0 bytes");
    }

    #[test]
    fn auto_takes_the_measurement_and_a_size_given_wins() {
        let epyc = Caches {
            l2: Some(1 << 20),
            last_level: Some(32 << 20),
        };
        let measured = Calibration {
            vector_below: 64 << 10,
            nt_from: 16 << 20,
            sliced_from: 1 << 20,
            sliced_below: 4 << 20,
            vector: Vec::new(),
            sliced: Vec::new(),
            nt: Vec::new(),
        };
        let auto = HostCopy::choose(
            CopyBound::Auto,
            CopyBound::Auto,
            CopyBound::Auto,
            Some(&measured),
            &epyc,
        );
        let given = HostCopy::choose(
            CopyBound::At(8 << 10),
            CopyBound::Off,
            CopyBound::Auto,
            Some(&measured),
            &epyc,
        );
        if vector_copy_available() {
            assert_eq!(auto.vector_below, 64 << 10);
            assert_eq!(given.vector_below, 8 << 10);
        }
        if nt_stores_available() {
            assert_eq!(auto.nt_from, 16 << 20);
        }
        assert_eq!(given.nt_from, usize::MAX);
        for copy in [auto, given] {
            assert_eq!(copy.method(1 << 20), Method::Sliced);
            assert_eq!(copy.method((4 << 20) - 1), Method::Sliced);
            assert_eq!(copy.method(512 << 10), Method::Memcpy, "below the band");
            assert_eq!(copy.method(4 << 20), Method::Memcpy, "above the band");
        }
        if vector_copy_available() && nt_stores_available() {
            assert_eq!(
                auto.describe(),
                "host copies by size: memcpy from 0 bytes, the 32-byte vector copy from \
                 2048 bytes, memcpy from 65536 bytes, memcpy in 256 KiB slices from \
                 1048576 bytes, memcpy from 4194304 bytes, non-temporal stores from \
                 16777216 bytes"
            );
        }
        let unmeasured =
            HostCopy::choose(CopyBound::Off, CopyBound::Off, CopyBound::Auto, None, &epyc);
        assert_eq!(
            unmeasured.method(2 << 20),
            Method::Memcpy,
            "no measurement, no slices"
        );
        let bound = |sliced| {
            HostCopy::choose(
                CopyBound::Auto,
                CopyBound::Off,
                sliced,
                Some(&measured),
                &epyc,
            )
        };
        let given = bound(CopyBound::At(512 << 10));
        assert_eq!(
            given.method(600 << 10),
            Method::Sliced,
            "from the size given"
        );
        assert_eq!(given.method(64 << 20), Method::Sliced, "and on, up");
        assert_eq!(
            bound(CopyBound::Off).method(2 << 20),
            Method::Memcpy,
            "off: never, whatever was measured"
        );
    }

    #[test]
    fn a_band_of_slices_gives_way_to_the_other_methods() {
        let none = Caches::default();
        let wide = Calibration {
            vector_below: 128 << 10,
            nt_from: 8 << 20,
            sliced_from: 64 << 10,
            sliced_below: 64 << 20,
            vector: Vec::new(),
            sliced: Vec::new(),
            nt: Vec::new(),
        };
        let copy = HostCopy::choose(
            CopyBound::Auto,
            CopyBound::Auto,
            CopyBound::Auto,
            Some(&wide),
            &none,
        );
        if vector_copy_available() {
            assert_eq!(copy.method(100 << 10), Method::Vector);
        }
        assert_eq!(
            copy.method(SLICE),
            Method::Memcpy,
            "one slice is one memcpy"
        );
        assert_eq!(copy.method(SLICE + 8), Method::Sliced);
        assert_eq!(copy.method(4 << 20), Method::Sliced);
        if nt_stores_available() {
            assert_eq!(copy.method(8 << 20), Method::NonTemporal);
        }
    }

    #[test]
    fn the_sliced_memcpy_copies_across_its_slices() {
        let len = 3 * SLICE + 12_345;
        let src: Vec<u8> = (0..len + 64).map(|i| (i * 13 + 5) as u8).collect();
        for (s_off, d_off) in [(0, 0), (1, 0), (0, 8), (5, 11)] {
            let mut dst = vec![0xAAu8; len + 64];
            // SAFETY: both ranges lie inside their vectors (offset + len < len + 64),
            // which do not overlap.
            unsafe { sliced_memcpy(dst.as_mut_ptr().add(d_off), src.as_ptr().add(s_off), len) };
            assert!(
                dst[d_off..d_off + len] == src[s_off..s_off + len],
                "{s_off} {d_off}"
            );
            assert!(dst[..d_off]
                .iter()
                .chain(&dst[d_off + len..])
                .all(|&b| b == 0xAA));
        }
    }

    #[test]
    fn every_method_copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
        let none = Caches::default();
        let by_size = HostCopy::choose(
            CopyBound::At(MIN_VECTOR_COPY + 1000),
            CopyBound::At(MIN_NT_COPY),
            CopyBound::Off,
            None,
            &none,
        );
        let memcpy = HostCopy::choose(CopyBound::Off, CopyBound::Off, CopyBound::Off, None, &none);
        type Copy<'a> = Box<dyn Fn(*mut u8, *const u8, usize) + 'a>;
        #[allow(unused_mut)] // pushed to on x86-64 only
        let mut methods: Vec<Copy<'_>> = vec![
            // SAFETY: the loop below passes ranges inside two separate vectors.
            Box::new(|d, s, n| unsafe { simd::nt_copy(d, s, n) }),
            // SAFETY: as above.
            Box::new(|d, s, n| unsafe { by_size.copy(d, s, n) }),
            // SAFETY: as above.
            Box::new(|d, s, n| unsafe { memcpy.copy(d, s, n) }),
            // SAFETY: as above.
            Box::new(|d, s, n| unsafe { sliced_memcpy(d, s, n) }),
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
