//! The copy bounds measured on this machine ([`Calibration`]): which method copies each
//! size fastest here, rather than where it was fastest on the development machine.
//!
//! `measure` times `memcpy` against the vector copy (4 KiB to 1 MiB) and against itself in
//! slices (512 KiB to 8 MiB), each at an aligned and a misaligned destination, and against
//! non-temporal stores (1 to 32 MiB), the same buffers copied over and over as a
//! benchmark's puts do, in about 0.1 s. The result is
//! kept for the rest of the boot in a small file ([`cache_file`], in the user's runtime
//! directory), so that only the first init after a boot measures: `for_this_boot`
//! reads it, or measures under a lock (several PEs of a node start at once; one
//! measures, the others read what it wrote) and writes it. `symmem-info --calibrate`
//! measures again and rewrites it ([`calibrate_and_save`]). Delete the file to measure at
//! the next init.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::simd;

/// The vector copy's sizes measured (it starts at `MIN_VECTOR_COPY`, 2 KiB): every power
/// of two, since one size between two that it wins can lose (32 KiB on a Zen 4, at 0.6×
/// `memcpy`, between 16 and 64 KiB that it won: the first file measured every fourth).
const VECTOR_SIZES: [usize; 9] = [
    4 << 10,
    8 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
];

/// The sliced `memcpy`'s sizes measured: from twice its slice to where non-temporal stores
/// usually take over.
const SLICED_SIZES: [usize; 5] = [512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20];

/// The non-temporal stores' sizes measured.
const NT_SIZES: [usize; 7] = [
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    12 << 20,
    16 << 20,
    32 << 20,
];

/// The destination's offset past the source (mod 4 KiB) of the misaligned case: a put of
/// 8-byte-headed records, where `rep movsb` slows down on some CPUs.
const MISALIGN: usize = 8;

/// A method must be this much faster than `memcpy` to be chosen (noise, and `memcpy`'s
/// head start at sizes where it is inlined).
const MARGIN: f64 = 0.97;

/// Bytes each timing sample copies at least (many copies of a small size).
const SAMPLE_BYTES: usize = 2 << 20;

/// Timing samples per method and size, taken in turns: the fastest counts.
const SAMPLES: usize = 5;

/// How long an init waits for another process's measurement before it takes the caches'
/// guess instead of measuring beside it (two measurements at once disturb each other).
const LOCK_WAIT: Duration = Duration::from_secs(3);

/// The layout version of the file; another version is measured again (version 1 measured
/// the vector copy at every fourth power of two only, version 2 had no sliced `memcpy`).
const FILE_VERSION: u32 = 3;

/// One size's measurement: bytes per second of `memcpy` and of the other method.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// The copy's size.
    pub bytes: usize,
    /// `memcpy`, GB/s.
    pub memcpy: f64,
    /// The vector copy, the sliced `memcpy` or the non-temporal stores, GB/s.
    pub other: f64,
}

/// The bounds measured on this machine, with what was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// Sizes below this (from 2 KiB) copy with the vector copy; 0: never.
    pub vector_below: usize,
    /// Sizes from this on copy with non-temporal stores; `usize::MAX`: never.
    pub nt_from: usize,
    /// Sizes from `sliced_from` up to `sliced_below` copy with `memcpy` in slices, where
    /// neither of the other methods does; an empty band: never.
    pub sliced_from: usize,
    /// See `sliced_from`.
    pub sliced_below: usize,
    /// The vector copy against `memcpy`, both alignments together.
    pub vector: Vec<Timing>,
    /// The sliced `memcpy` against `memcpy`, both alignments together.
    pub sliced: Vec<Timing>,
    /// Non-temporal stores against `memcpy`.
    pub nt: Vec<Timing>,
}

impl Calibration {
    /// The sizes copied in slices, `[from, below)`; `None` if none.
    pub fn sliced_band(&self) -> Option<(usize, usize)> {
        (self.sliced_from < self.sliced_below).then_some((self.sliced_from, self.sliced_below))
    }

    /// The choice in words, for the init log and `symmem-info --calibrate`.
    pub fn describe(&self) -> String {
        let rows = |ts: &[Timing], what: &str| {
            ts.iter()
                .map(|t| {
                    format!(
                        "{} {what} {:.1} vs memcpy {:.1} GB/s",
                        size_text(t.bytes),
                        t.other,
                        t.memcpy
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "measured: {}; {}; {}",
            rows(&self.vector, "vector"),
            rows(&self.sliced, "sliced"),
            rows(&self.nt, "non-temporal")
        )
    }
}

/// `4K`, `16M`: a power-of-two size in words.
fn size_text(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}M", bytes >> 20)
    } else {
        format!("{}K", bytes >> 10)
    }
}

/// A page-aligned buffer of `len` bytes (plus slack for the misaligned case), every page
/// touched. Page-aligned like a heap and a user's buffer usually are: where the
/// destination sits a few bytes past the source modulo 4 KiB, `rep movsb` slows down
/// 15-25× on some CPUs, and that is the case to measure.
struct Buffer {
    bytes: Vec<u8>,
    start: usize,
}

impl Buffer {
    fn new(len: usize) -> Self {
        let mut bytes = vec![1u8; len + 8192];
        let start = bytes.as_mut_ptr().align_offset(4096);
        Buffer { bytes, start }
    }

    /// The address `offset` bytes past the aligned start.
    fn at(&mut self, offset: usize) -> *mut u8 {
        debug_assert!(self.start + offset < self.bytes.len());
        self.bytes.as_mut_ptr().wrapping_add(self.start + offset)
    }
}

/// A copy method under test.
type Method = unsafe fn(*mut u8, *const u8, usize);

/// `memcpy` as a [`Method`].
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`].
unsafe fn memcpy(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

/// Seconds per copy of `memcpy` and of `other` moving `len` bytes from `src` to `dst` over
/// and over: the fastest of [`SAMPLES`] timings each, taken in turns (each after one
/// untimed copy by its own method), so that whatever the machine's neighbours do to its
/// caches meanwhile weighs on both alike.
///
/// # Safety
/// `src` and `dst` valid for `len` bytes, not overlapping, `other` runnable on this CPU.
unsafe fn seconds_per_copy(other: Method, dst: *mut u8, src: *const u8, len: usize) -> (f64, f64) {
    // At least two copies a sample, after one untimed copy by the same method: a sample of
    // one large copy mostly timed the cache state the other method left (non-temporal
    // stores leave the destination out of the cache, and `memcpy` then measured 34 GB/s
    // at 2 MiB where it moves 50-60 over and over).
    let reps = (SAMPLE_BYTES / len).max(2);
    let time = |copy: Method| {
        // SAFETY: forwarded from the caller.
        unsafe { copy(dst, src, len) };
        let t0 = Instant::now();
        for _ in 0..reps {
            // SAFETY: forwarded from the caller.
            unsafe { copy(dst, src, len) };
            std::hint::black_box(dst);
        }
        t0.elapsed().as_secs_f64() / reps as f64
    };
    (0..SAMPLES).fold((f64::INFINITY, f64::INFINITY), |(m, o), _| {
        (m.min(time(memcpy)), o.min(time(other)))
    })
}

/// Measures the methods this CPU has against `memcpy` and picks the bounds; `l2` is the
/// vector copy's bound where it wins at every size measured (its old default).
pub(super) fn measure(
    vector_available: bool,
    nt_available: bool,
    l2: Option<usize>,
) -> Calibration {
    let largest = NT_SIZES[NT_SIZES.len() - 1];
    let mut src = Buffer::new(largest);
    let mut dst = Buffer::new(largest);
    let gbs = |bytes: usize, secs: f64| bytes as f64 / secs / 1e9;
    // `memcpy` against `other` at an aligned and at a misaligned destination: the
    // timing of both together, and `other`'s time over `memcpy`'s.
    let mut both_alignments = |other: Method, len: usize| {
        let (mut t_mem, mut t_other) = (0.0, 0.0);
        for offset in [0, MISALIGN] {
            let (d, s) = (dst.at(offset), src.at(0).cast_const());
            // SAFETY: both buffers hold `largest` + 4 KiB bytes past their aligned start,
            // more than `len` + `offset`; they are separate allocations; `other` runs on
            // this CPU (the callers check).
            let (m, o) = unsafe { seconds_per_copy(other, d, s, len) };
            t_mem += m;
            t_other += o;
        }
        let timing = Timing {
            bytes: len,
            memcpy: gbs(2 * len, t_mem),
            other: gbs(2 * len, t_other),
        };
        (timing, t_other / t_mem)
    };
    let mut vector = Vec::new();
    let mut vector_below = 0;
    if vector_available {
        vector_below = l2
            .unwrap_or(1 << 20)
            .max(VECTOR_SIZES[VECTOR_SIZES.len() - 1] * 2);
        for &len in &VECTOR_SIZES {
            // The CPU has AVX2 (`vector_available`).
            let (timing, ratio) = both_alignments(simd::vector_copy, len);
            vector.push(timing);
            if ratio >= MARGIN && vector_below > len {
                vector_below = if len == VECTOR_SIZES[0] { 0 } else { len };
            }
        }
    }
    // The slices are kept where they are not slower, ties included: from 1 MiB up,
    // `memcpy`'s speed on the development machine depended on where the process's
    // buffers lay (in half of the processes it matched the slices, in the other half it
    // was 10-12% slower), and the slices' did not.
    let mut sliced = Vec::new();
    let mut wins = Vec::new();
    for &len in &SLICED_SIZES {
        let (timing, ratio) = both_alignments(super::sliced_memcpy, len);
        sliced.push(timing);
        wins.push(ratio <= 2.0 - MARGIN);
    }
    let (sliced_from, sliced_below) = first_run_of_wins(&SLICED_SIZES, &wins);
    let mut nt = Vec::new();
    let mut nt_from = usize::MAX;
    if nt_available {
        let mut wins = Vec::new();
        for &len in &NT_SIZES {
            let (d, s) = (dst.at(0), src.at(0).cast_const());
            // SAFETY: as above; non-temporal stores exist on every x86-64 CPU
            // (`nt_available`).
            let (t_mem, t_nt) = unsafe { seconds_per_copy(simd::nt_copy, d, s, len) };
            nt.push(Timing {
                bytes: len,
                memcpy: gbs(len, t_mem),
                other: gbs(len, t_nt),
            });
            wins.push(t_nt < t_mem * MARGIN);
        }
        // From the smallest size from which they win at every larger size measured; where
        // they never win up to 32 MiB, from twice that (a copy larger than any cache).
        nt_from = match wins.iter().rposition(|w| !w) {
            None => NT_SIZES[0],
            Some(i) if i + 1 < NT_SIZES.len() => NT_SIZES[i + 1],
            Some(_) => largest * 2,
        };
    }
    Calibration {
        vector_below,
        nt_from,
        sliced_from,
        sliced_below,
        vector,
        sliced,
        nt,
    }
}

/// The band of `sizes` (ascending) where a method first won, run after run: from the
/// first size it won to the next it lost (twice the largest if it never lost again);
/// `(usize::MAX, 0)`, an empty band, if it never won.
fn first_run_of_wins(sizes: &[usize], wins: &[bool]) -> (usize, usize) {
    let Some(first) = wins.iter().position(|&w| w) else {
        return (usize::MAX, 0);
    };
    let below = match wins[first..].iter().position(|&w| !w) {
        Some(k) => sizes[first + k],
        None => sizes[sizes.len() - 1] * 2,
    };
    (sizes[first], below)
}

/// The file this boot's measurement is kept in: in the user's own directory
/// ([`symmem_bootstrap::report_file::user_dir`]: `symmem-<uid>` in `$XDG_RUNTIME_DIR`,
/// `$TMPDIR` or `/tmp`), named after the boot (`/proc/sys/kernel/random/boot_id`): a file
/// of an earlier boot is never read. `None` where there is no boot id.
pub fn cache_file() -> Option<PathBuf> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot = boot.trim();
    if boot.is_empty() || !boot.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return None;
    }
    let dir = symmem_bootstrap::report_file::user_dir(|v| std::env::var_os(v));
    Some(dir.join(format!("host-copy-{boot}")))
}

/// The file's first line: the version and this CPU's model, which the measurement is
/// only good for.
fn header() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("symmem host copies v{FILE_VERSION}: {cpu}")
}

/// The file's text: the header, the bounds, and the measurement.
fn encode(c: &Calibration) -> String {
    let mut out = format!(
        "{}\nvector_below {}\nnt_from {}\nsliced_from {}\nsliced_below {}\n",
        header(),
        c.vector_below,
        c.nt_from,
        c.sliced_from,
        c.sliced_below
    );
    for (name, rows) in [("vector", &c.vector), ("sliced", &c.sliced), ("nt", &c.nt)] {
        for t in rows {
            out += &format!("{name} {} {:.3} {:.3}\n", t.bytes, t.memcpy, t.other);
        }
    }
    out
}

/// Parses what [`encode`] wrote on this CPU; `None` for anything else.
fn decode(text: &str) -> Option<Calibration> {
    let mut lines = text.lines();
    if lines.next()? != header() {
        return None;
    }
    let mut bound = |name: &str| -> Option<usize> {
        let (key, v) = lines.next()?.split_once(' ')?;
        (key == name).then(|| v.parse().ok()).flatten()
    };
    let vector_below = bound("vector_below")?;
    let nt_from = bound("nt_from")?;
    let sliced_from = bound("sliced_from")?;
    let sliced_below = bound("sliced_below")?;
    let (mut vector, mut sliced, mut nt) = (Vec::new(), Vec::new(), Vec::new());
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let [name, bytes, memcpy, other] = f[..] else {
            return None;
        };
        let t = Timing {
            bytes: bytes.parse().ok()?,
            memcpy: memcpy.parse().ok()?,
            other: other.parse().ok()?,
        };
        match name {
            "vector" => vector.push(t),
            "sliced" => sliced.push(t),
            "nt" => nt.push(t),
            _ => return None,
        }
    }
    Some(Calibration {
        vector_below,
        nt_from,
        sliced_from,
        sliced_below,
        vector,
        sliced,
        nt,
    })
}

/// Writes `c` to `path` (its directory made if missing, and checked to be the user's own:
/// [`symmem_bootstrap::report_file::prepare_dir`]), through a temporary file renamed into
/// place so that no reader sees half of it.
fn save(path: &Path, c: &Calibration) -> Result<(), String> {
    symmem_bootstrap::report_file::prepare_dir(path)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(encode(c).as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Holds an exclusive `flock` on a file until dropped.
struct Locked(std::fs::File);

impl Locked {
    /// Takes the lock of `path`, waiting at most [`LOCK_WAIT`].
    fn take(path: &Path) -> Option<Locked> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .ok()?;
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            // SAFETY: flock on an open descriptor has no memory-safety preconditions.
            let rc = unsafe {
                libc::flock(
                    std::os::fd::AsRawFd::as_raw_fd(&f),
                    libc::LOCK_EX | libc::LOCK_NB,
                )
            };
            if rc == 0 {
                return Some(Locked(f));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: as in `take`.
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&self.0), libc::LOCK_UN) };
    }
}

/// Whether this build's copies are worth measuring: an unoptimized build's vector and
/// non-temporal loops are many times slower than the optimized ones (and than `memcpy`,
/// which is always optimized), so what it measures says nothing about the copies a
/// release build makes.
pub const MEASURABLE: bool = !cfg!(debug_assertions);

/// This boot's measurement: read from [`cache_file`], or measured now (under the file's
/// lock) and written there. `None` in an unoptimized build ([`MEASURABLE`]) and where
/// neither works (no boot id, a directory that is not the user's own, another process
/// measuring for longer than [`LOCK_WAIT`]): the caller takes the caches' guess.
pub(super) fn for_this_boot(
    vector_available: bool,
    nt_available: bool,
    l2: Option<usize>,
) -> Option<Calibration> {
    if !MEASURABLE {
        return None;
    }
    let path = cache_file()?;
    // Only in a directory of this user's that nobody else may write: a file placed there
    // by someone else would choose this user's copies.
    symmem_bootstrap::report_file::prepare_dir(&path).ok()?;
    let read = || decode(&std::fs::read_to_string(&path).ok()?);
    if let Some(c) = read() {
        return Some(c);
    }
    let _lock = Locked::take(&path.with_extension("lock"))?;
    // Another process may have measured while this one waited for the lock.
    if let Some(c) = read() {
        return Some(c);
    }
    let c = measure(vector_available, nt_available, l2);
    if let Err(e) = save(&path, &c) {
        tracing::debug!(target: "symmem_runtime::host_copy", "keeping the copy measurement: {e}");
    }
    Some(c)
}

/// Measures now and rewrites this boot's file (`symmem-info --calibrate`); returns the
/// measurement and where it went (`None` where no file can be kept, and in an
/// unoptimized build, whose measurement init would not use: [`MEASURABLE`]).
pub fn calibrate_and_save() -> (Calibration, Option<PathBuf>) {
    let c = measure(
        super::vector_copy_available(),
        super::nt_stores_available(),
        super::caches::Caches::of_cpu0().l2,
    );
    let kept = cache_file()
        .filter(|_| MEASURABLE)
        .filter(|path| match save(path, &c) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(target: "symmem_runtime::host_copy", "{e}");
                false
            }
        });
    (c, kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Calibration {
        Calibration {
            vector_below: 64 << 10,
            nt_from: 12 << 20,
            sliced_from: 1 << 20,
            sliced_below: 4 << 20,
            vector: vec![Timing {
                bytes: 4096,
                memcpy: 60.5,
                other: 90.25,
            }],
            sliced: vec![Timing {
                bytes: 2 << 20,
                memcpy: 51.5,
                other: 60.75,
            }],
            nt: vec![Timing {
                bytes: 16 << 20,
                memcpy: 6.5,
                other: 13.9,
            }],
        }
    }

    #[test]
    fn the_file_round_trips_and_refuses_another_cpu() {
        let c = sample();
        assert_eq!(decode(&encode(&c)), Some(c.clone()));
        let other = encode(&c).replacen(": ", ": another ", 1);
        assert_eq!(decode(&other), None, "another CPU's file is measured again");
        for old in ["v1:", "v2:"] {
            let older = encode(&c).replacen(&format!("v{FILE_VERSION}:"), old, 1);
            assert_eq!(
                decode(&older),
                None,
                "a file of version {old} is measured again"
            );
        }
        assert_eq!(decode(""), None);
        assert_eq!(decode(&format!("{}\nvector_below x\n", header())), None);
    }

    /// Runs in the unoptimized test build too: the bounds are checked for shape, not for
    /// what they are.
    #[test]
    fn a_measurement_picks_bounds_inside_the_sizes_measured() {
        let c = measure(
            super::super::vector_copy_available(),
            super::super::nt_stores_available(),
            Some(1 << 20),
        );
        if super::super::nt_stores_available() {
            assert_eq!(c.nt.len(), NT_SIZES.len());
            assert!(
                NT_SIZES.contains(&c.nt_from) || c.nt_from == 64 << 20,
                "{c:?}"
            );
        } else {
            assert_eq!(c.nt_from, usize::MAX);
        }
        if super::super::vector_copy_available() {
            assert_eq!(c.vector.len(), VECTOR_SIZES.len());
            assert!(
                c.vector_below == 0
                    || VECTOR_SIZES.contains(&c.vector_below)
                    || c.vector_below >= 2 << 20,
                "{c:?}"
            );
        }
        assert_eq!(c.sliced.len(), SLICED_SIZES.len());
        assert!(
            (c.sliced_from, c.sliced_below) == (usize::MAX, 0)
                || (SLICED_SIZES.contains(&c.sliced_from) && c.sliced_below > c.sliced_from),
            "{c:?}"
        );
        assert!(c
            .nt
            .iter()
            .chain(&c.vector)
            .chain(&c.sliced)
            .all(|t| t.memcpy > 0.0 && t.other > 0.0));
        assert!(c.describe().starts_with("measured: "), "{}", c.describe());
    }

    #[test]
    fn a_band_runs_from_the_first_win_to_the_next_loss() {
        let sizes = [1, 2, 4, 8];
        let band = |wins: [bool; 4]| first_run_of_wins(&sizes, &wins);
        assert_eq!(band([false; 4]), (usize::MAX, 0), "never won: no band");
        assert_eq!(band([false, true, true, false]), (2, 8));
        assert_eq!(
            band([true, false, true, true]),
            (1, 2),
            "the first run only"
        );
        assert_eq!(band([false, false, true, true]), (4, 16), "won to the end");
    }

    #[test]
    fn a_saved_measurement_is_read_back() {
        let dir =
            std::env::temp_dir().join(format!("symmem-calibrate-test-{}", std::process::id()));
        let path = dir.join("host-copy-test");
        save(&path, &sample()).unwrap();
        assert_eq!(
            decode(&std::fs::read_to_string(&path).unwrap()),
            Some(sample())
        );
        let lock = Locked::take(&path.with_extension("lock")).expect("a free lock");
        drop(lock);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
