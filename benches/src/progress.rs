//! Progress of a run on stderr, one line per point as it starts: `[k/N] metric size
//! (elapsed)`, with or without `--json` (whose rows go to stdout). PE 0 reports.

use std::time::Instant;

use crate::sizes::human_size;

/// Counts the points of a run and reports each as it starts.
pub struct Progress {
    /// Points started so far.
    done: usize,
    /// Points in all.
    total: usize,
    /// When the run started.
    start: Instant,
}

impl Progress {
    /// A run of `total` points, starting now.
    pub fn new(total: usize) -> Self {
        Progress {
            done: 0,
            total,
            start: Instant::now(),
        }
    }

    /// Says that the point of `metric` at `size` bytes starts (between the PEs of `pair`,
    /// source and destination, in `--matrix`).
    pub fn point(&mut self, metric: &str, size: usize, pair: Option<(usize, usize)>) {
        self.done += 1;
        let pair = pair.map_or(String::new(), |(s, d)| format!(" PE {s} -> PE {d}"));
        eprintln!(
            "[{}/{}] {metric} {}{pair} ({:.1} s)",
            self.done,
            self.total,
            human_size(size),
            self.start.elapsed().as_secs_f64()
        );
    }
}
