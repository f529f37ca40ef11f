//! Summaries of one measured point: the median of the repetitions (the reported value)
//! and, for latency rows, the distribution of the individual samples (p50, p99, stdev).

use std::time::Duration;

/// Median, minimum and maximum over the repetitions of one point, and the distribution
/// of its samples.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// The reported value: the median repetition.
    pub median: f64,
    /// The lowest repetition.
    pub min: f64,
    /// The highest repetition.
    pub max: f64,
    /// Median of the samples.
    pub p50: f64,
    /// 99th percentile of the samples (nearest rank).
    pub p99: f64,
    /// Standard deviation of the samples.
    pub stdev: f64,
    /// Operations per sample: the size of the timed batches (the whole repetition where
    /// the operations are not timed one batch at a time).
    pub sample_ops: usize,
}

/// The value at quantile `q` of sorted `values` (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Stats {
    /// Summarizes the repetitions `reps` (not empty) and the samples `samples` (per-op
    /// values of batches of `sample_ops` operations; the repetitions stand in if empty).
    pub fn of(mut reps: Vec<f64>, mut samples: Vec<f64>, sample_ops: usize) -> Stats {
        reps.sort_by(f64::total_cmp);
        let n = reps.len();
        let median = if n % 2 == 1 {
            reps[n / 2]
        } else {
            (reps[n / 2 - 1] + reps[n / 2]) / 2.0
        };
        if samples.is_empty() {
            samples = reps.clone();
        }
        samples.sort_by(f64::total_cmp);
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let var = samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / samples.len() as f64;
        Stats {
            median,
            min: reps[0],
            max: reps[n - 1],
            p50: quantile(&samples, 0.5),
            p99: quantile(&samples, 0.99),
            stdev: var.sqrt(),
            sample_ops,
        }
    }
}

/// The timed batches of the current repetition, filled by the run functions' timing loop.
#[derive(Debug, Default)]
pub struct Sampler {
    /// Operations per timed batch (0: one batch for the whole repetition).
    pub batch: usize,
    /// Each batch's duration and number of operations.
    pub batches: Vec<(Duration, usize)>,
}

impl Sampler {
    /// Operations per batch for operations of about `per_op` each: enough for about
    /// [`BATCH_TIME`] of work, so that the clock reads (tens of ns) stay near 1% of it.
    pub fn batch_for(per_op: Duration) -> usize {
        let ns = per_op.as_nanos().max(1);
        (BATCH_TIME.as_nanos().div_ceil(ns) as usize).max(1)
    }
}

/// The work a timed batch of sub-µs operations aims for.
pub const BATCH_TIME: Duration = Duration::from_micros(2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_stdev() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Stats::of(vec![3.0, 1.0, 2.0], samples, 4);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!((s.p50, s.p99), (50.0, 99.0));
        assert!((s.stdev - 28.866).abs() < 1e-3, "{}", s.stdev);
        let r = Stats::of(vec![1.0, 3.0], Vec::new(), 10);
        assert_eq!((r.median, r.p50, r.p99, r.stdev), (2.0, 1.0, 3.0, 1.0));
    }

    #[test]
    fn batches_aim_at_two_microseconds() {
        assert_eq!(Sampler::batch_for(Duration::from_nanos(10)), 200);
        assert_eq!(Sampler::batch_for(Duration::from_micros(50)), 1);
    }
}
