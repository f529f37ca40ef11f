//! A set of CPUs: parsed from and written as a Linux CPU list (`0-3,8`), read from and
//! applied to the calling thread's affinity mask (`sched_getaffinity`/`sched_setaffinity`).

use std::fmt;
use std::str::FromStr;

/// Bits per word of the kernel's affinity mask (an array of `unsigned long`).
const WORD_BITS: usize = libc::c_ulong::BITS as usize;

/// The largest mask `sched_getaffinity` is asked to fill, in bits: far above any machine.
const MAX_MASK_BITS: usize = 1 << 20;

/// A set of CPU numbers, sorted and without repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSet(Vec<usize>);

impl CpuSet {
    /// The set of `cpus` (in any order, repeats ignored).
    pub fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> Self {
        let mut v: Vec<usize> = cpus.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        CpuSet(v)
    }

    /// The CPUs the calling thread may run on (`sched_getaffinity`): at init, before any
    /// other thread starts, those of the process.
    pub fn of_this_thread() -> std::io::Result<Self> {
        let mut words = 1024 / WORD_BITS;
        loop {
            let mut mask: Vec<libc::c_ulong> = vec![0; words];
            // SAFETY: `mask` is writable for `words` words, the byte length passed; the
            // kernel writes at most that much.
            let rc = unsafe {
                libc::sched_getaffinity(
                    0,
                    words * std::mem::size_of::<libc::c_ulong>(),
                    mask.as_mut_ptr().cast(),
                )
            };
            if rc == 0 {
                return Ok(Self::from_mask(&mask));
            }
            let err = std::io::Error::last_os_error();
            // EINVAL: the kernel's mask is larger than ours.
            if err.raw_os_error() != Some(libc::EINVAL) || words * WORD_BITS >= MAX_MASK_BITS {
                return Err(err);
            }
            words *= 2;
        }
    }

    /// Restricts the calling thread to these CPUs (`sched_setaffinity`); threads it
    /// starts afterwards inherit them.
    pub fn bind_this_thread(&self) -> std::io::Result<()> {
        let mask = self.mask();
        // SAFETY: `mask` is readable for the byte length passed.
        let rc = unsafe {
            libc::sched_setaffinity(
                0,
                std::mem::size_of_val(mask.as_slice()),
                mask.as_ptr().cast(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// The kernel's mask of this set: bit `cpu % WORD_BITS` of word `cpu / WORD_BITS`.
    /// Built before a fork, so that the child only passes it to `sched_setaffinity`.
    pub(crate) fn mask(&self) -> Vec<libc::c_ulong> {
        let words = self.0.last().map_or(1, |&max| max / WORD_BITS + 1);
        let mut mask = vec![0; words];
        for &cpu in &self.0 {
            mask[cpu / WORD_BITS] |= 1 << (cpu % WORD_BITS);
        }
        mask
    }

    fn from_mask(mask: &[libc::c_ulong]) -> Self {
        CpuSet(
            (0..mask.len() * WORD_BITS)
                .filter(|&cpu| mask[cpu / WORD_BITS] & (1 << (cpu % WORD_BITS)) != 0)
                .collect(),
        )
    }

    /// The CPUs, ascending.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// How many CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No CPU at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(
            self.0
                .iter()
                .copied()
                .filter(|c| other.0.binary_search(c).is_ok())
                .collect(),
        )
    }

    /// The CPUs of this set that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(
            self.0
                .iter()
                .copied()
                .filter(|c| other.0.binary_search(c).is_err())
                .collect(),
        )
    }
}

/// A CPU list as Linux writes it (`/sys/.../cpulist`, `Cpus_allowed_list`): `0-3,8,10-11`;
/// the empty set is `none`.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            if start != self.0[0] {
                f.write_str(",")?;
            }
            match end - start {
                0 => write!(f, "{start}")?,
                _ => write!(f, "{start}-{end}")?,
            }
            i += 1;
        }
        Ok(())
    }
}

/// Parses a Linux CPU list: comma-separated CPUs and ranges (`0-3,8`); an empty list (a
/// memoryless node's `cpulist`) is the empty set. The error names the bad part.
impl FromStr for CpuSet {
    type Err = String;

    fn from_str(list: &str) -> Result<Self, String> {
        let mut cpus = Vec::new();
        let number = |s: &str| match s.trim().parse::<usize>() {
            Ok(cpu) if cpu < MAX_MASK_BITS => Ok(cpu),
            Ok(cpu) => Err(format!("CPU list {list:?}: CPU {cpu} is out of range")),
            Err(_) => Err(format!("CPU list {list:?}: {s:?} is not a CPU number")),
        };
        for part in list.trim().split(',').filter(|p| !p.trim().is_empty()) {
            match part.split_once('-') {
                None => cpus.push(number(part)?),
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a > b {
                        return Err(format!("CPU list {list:?}: range {part:?} runs backwards"));
                    }
                    cpus.extend(a..=b);
                }
            }
        }
        Ok(CpuSet::from_cpus(cpus))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(list: &str) -> CpuSet {
        list.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn lists_parse_and_print_as_ranges() {
        for (text, cpus, printed) in [
            ("0", vec![0], "0"),
            ("0-3", vec![0, 1, 2, 3], "0-3"),
            ("0-1,4,6-7\n", vec![0, 1, 4, 6, 7], "0-1,4,6-7"),
            ("5,1,2,3", vec![1, 2, 3, 5], "1-3,5"),
            ("", vec![], "none"),
            ("\n", vec![], "none"),
        ] {
            let s = set(text);
            assert_eq!(s.cpus(), cpus.as_slice(), "{text:?}");
            assert_eq!(s.to_string(), printed, "{text:?}");
            if !s.is_empty() {
                assert_eq!(set(&s.to_string()), s, "{text:?} round trip");
            }
        }
    }

    #[test]
    fn bad_lists_name_the_bad_part() {
        for (text, part) in [("0-x", "\"x\""), ("3-1", "\"3-1\""), ("a", "\"a\"")] {
            let err = text.parse::<CpuSet>().unwrap_err();
            assert!(err.contains(part), "{text}: {err}");
        }
    }

    #[test]
    fn masks_round_trip_across_words() {
        let s = CpuSet::from_cpus([0, 3, 63, 64, 130]);
        let mask = s.mask();
        assert_eq!(mask.len(), 130 / WORD_BITS + 1);
        assert_eq!(CpuSet::from_mask(&mask), s);
    }

    #[test]
    fn set_operations() {
        let a = set("0-5");
        let b = set("4-9");
        assert_eq!(a.intersection(&b).to_string(), "4-5");
        assert_eq!(a.difference(&b).to_string(), "0-3");
    }

    #[test]
    fn this_thread_runs_somewhere_and_rebinding_to_the_same_set_works() {
        let mine = CpuSet::of_this_thread().expect("sched_getaffinity");
        assert!(!mine.is_empty());
        mine.bind_this_thread()
            .expect("sched_setaffinity to the same CPUs");
        assert_eq!(CpuSet::of_this_thread().expect("sched_getaffinity"), mine);
    }
}
