//! This machine's data cache sizes, from sysfs: the fallback bounds where the copies
//! cannot be measured.

/// The data cache sizes that set the automatic bounds.
#[derive(Debug, Default)]
pub(super) struct Caches {
    /// A core's level-2 cache, in bytes.
    pub l2: Option<usize>,
    /// The largest data or unified cache (the last level), in bytes.
    pub last_level: Option<usize>,
}

impl Caches {
    /// CPU 0's caches, from sysfs (none where it is not readable).
    pub fn of_cpu0() -> Self {
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
}
