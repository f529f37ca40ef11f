//! Transfer sizes: the default sweeps, `-b/-e/-f` sweeps, and parsing and printing sizes
//! with binary suffixes.

/// Largest transfer measured (the size of the transfer buffers).
pub const MAX_SIZE: usize = 16 << 20;

/// Transfer sizes of the point-to-point sweeps: 8 B to 16 MiB in ×8 steps.
pub const SWEEP: &[usize] = &[8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, MAX_SIZE];

/// Sizes of the data-moving collectives: 64 B to 2 MiB in ×8 steps (at least 8 bytes per
/// PE's block with up to 8 PEs).
pub const COLLECTIVE_SWEEP: &[usize] = &[64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20];

/// Sizes of the reductions: 8 B to 32 KiB in ×8 steps.
pub const REDUCE_SIZES: &[usize] = &[8, 64, 512, 4 << 10, 32 << 10];

/// Bytes each side of the rotating bandwidth rows moves through: five times the H100's
/// 50 MB L2 cache, so each transfer reads and writes HBM rather than the cache.
pub const ROTATION_WINDOW: usize = 256 << 20;

/// Transfer sizes of the rotating bandwidth rows: 2 MiB to 64 MiB, each a divisor of
/// [`ROTATION_WINDOW`].
pub const ROTATING_SWEEP: &[usize] = &[2 << 20, MAX_SIZE, 64 << 20];

/// The size of the single-word metrics.
pub const WORD: &[usize] = &[8];

/// Size of one element of the benchmark buffers.
pub const ELEM: usize = std::mem::size_of::<u64>();

/// A `-b/-e/-f` sweep: `min`, `min × factor`, … up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    /// First size (`-b`).
    pub min: usize,
    /// Last size at most (`-e`).
    pub max: usize,
    /// Step factor (`-f`).
    pub factor: usize,
}

impl Sweep {
    /// The sizes of the sweep.
    pub fn sizes(self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut s = self.min;
        while s <= self.max {
            out.push(s);
            match s.checked_mul(self.factor) {
                Some(next) => s = next,
                None => break,
            }
        }
        out
    }
}

/// The sizes a metric whose default sizes are `default` runs at: a sweep's sizes replace
/// every default with more than one size (single-word metrics keep their one size).
pub fn sizes_for(default: &'static [usize], sweep: Option<Sweep>) -> Vec<usize> {
    match sweep {
        Some(s) if default.len() > 1 => s.sizes(),
        _ => default.to_vec(),
    }
}

/// Parses a size with an optional binary suffix: `8`, `4K`, `1M`, `16M`, `1G` (also `KB`,
/// `KiB`, any case). `flag` names the option in the error.
pub fn parse_size(flag: &str, value: &str) -> Result<usize, String> {
    let v = value.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(digits);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(format!(
                "{flag} {value:?}: expected a size such as 8, 4K, 1M or 16M"
            ))
        }
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            format!("{flag} {value:?}: expected a positive size such as 8, 4K, 1M or 16M")
        })
}

/// `bytes` with a binary unit: `8 B`, `4 KiB`, `16 MiB`.
pub fn human_size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// `bytes` in the short form of the chart axes: `8`, `4K`, `16M`.
pub fn short_size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => format!("{b}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("-b", "8"), Ok(8));
        assert_eq!(parse_size("-b", "4K"), Ok(4096));
        assert_eq!(parse_size("-e", "1m"), Ok(1 << 20));
        assert_eq!(parse_size("-e", "16MiB"), Ok(16 << 20));
        let err = parse_size("-e", "12Q").unwrap_err();
        assert!(err.contains("-e") && err.contains("12Q"), "{err}");
        assert!(parse_size("-b", "0").unwrap_err().contains("-b"));
    }

    #[test]
    fn a_sweep_replaces_only_multi_size_defaults() {
        let s = Sweep {
            min: 8,
            max: 4096,
            factor: 8,
        };
        assert_eq!(s.sizes(), vec![8, 64, 512, 4096]);
        assert_eq!(sizes_for(SWEEP, Some(s)), vec![8, 64, 512, 4096]);
        assert_eq!(sizes_for(WORD, Some(s)), vec![8]);
        assert_eq!(sizes_for(SWEEP, None), SWEEP.to_vec());
    }
}
