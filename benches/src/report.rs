//! Output of measured rows: the human-readable tables and the JSON lines.
//!
//! The JSON fields `metric`, `size`, `value`, `unit`, `transport`, `initiator` and
//! `device` come first and keep their meaning (benches/peers and scripts/gpu-check.sh
//! read them); `p50`, `p99`, `stdev`, `sample_ops` and `direction` follow, then `src` and
//! `dst` on the rows of `--matrix`.

use crate::sizes::human_size;
use crate::stats::Stats;
use crate::table::{Bench, Kind};

/// One measured point.
pub struct Row {
    /// Metric name.
    pub metric: &'static str,
    /// Transfer size in bytes.
    pub size: usize,
    /// Summary of the repetitions and samples.
    pub stats: Stats,
}

/// Where a row was measured and how, for its JSON line.
pub struct Labels<'a> {
    /// The unit of the value.
    pub unit: &'a str,
    /// The transport's name.
    pub transport: &'a str,
    /// The initiator's name.
    pub initiator: &'a str,
    /// `cpu` or `cuda`.
    pub device: &'a str,
    /// `oneway` or `bidir`.
    pub direction: &'a str,
    /// Source and destination PE (`--matrix` rows).
    pub pair: Option<(usize, usize)>,
}

/// The `direction` label of a row moving bytes in `dirs` directions at once.
pub fn direction(dirs: usize) -> &'static str {
    if dirs == 2 {
        "bidir"
    } else {
        "oneway"
    }
}

/// One JSON line of a row.
pub fn json_line(metric: &str, size: usize, s: &Stats, l: &Labels) -> String {
    let pair = l
        .pair
        .map(|(src, dst)| format!(",\"src\":{src},\"dst\":{dst}"))
        .unwrap_or_default();
    format!(
        "{{\"metric\":\"{metric}\",\"size\":{size},\"value\":{:.4},\"unit\":\"{}\",\"transport\":\"{}\",\"initiator\":\"{}\",\"device\":\"{}\",\"p50\":{:.4},\"p99\":{:.4},\"stdev\":{:.4},\"sample_ops\":{},\"direction\":\"{}\"{pair}}}",
        s.median, l.unit, l.transport, l.initiator, l.device, s.p50, s.p99, s.stdev, s.sample_ops, l.direction
    )
}

/// Prints one benchmark's rows as a table (PE 0 only), with the ratio to `base`, the
/// rows of its baseline measured alongside (one-way rows only), and for latency rows the
/// samples' p50, p99 and standard deviation.
pub fn print_table(
    bench: &Bench,
    rows: &[Row],
    base: &[Row],
    transport: &str,
    device: &str,
    dirs: usize,
) {
    println!();
    let dir = if dirs == 2 { ", bidirectional" } else { "" };
    println!(
        "{} — {} ({}, {transport}, {device}{dir})",
        bench.metric,
        bench.about,
        bench.initiator.name(),
    );
    let latency = matches!(bench.kind, Kind::Latency { .. });
    // A one-way baseline says nothing about both directions at once.
    let baseline = bench.baseline.filter(|_| dirs == 1);
    let ratio_heading = baseline.map(|b| format!("  vs {b}"));
    let dist_heading = if latency {
        format!("  {:>10}  {:>10}  {:>10}", "p50", "p99", "stdev")
    } else {
        String::new()
    };
    println!(
        "{:>10}  {:>16}  {:>10}  {:>10}{}{dist_heading}",
        "size",
        bench.kind.heading(dirs == 2),
        "min",
        "max",
        ratio_heading.as_deref().unwrap_or("")
    );
    for r in rows {
        let width = 4 + baseline.map_or(0, str::len);
        let ratio = base
            .iter()
            .filter(|_| baseline.is_some())
            .find(|b| b.size == r.size)
            .map(|b| format!("  {:>width$.2}×", r.stats.median / b.stats.median))
            .unwrap_or_default();
        let dist = if latency {
            format!(
                "  {:>10.4}  {:>10.4}  {:>10.4}",
                r.stats.p50, r.stats.p99, r.stats.stdev
            )
        } else {
            String::new()
        };
        println!(
            "{:>10}  {:>16.4}  {:>10.4}  {:>10.4}{ratio}{dist}",
            human_size(r.size),
            r.stats.median,
            r.stats.min,
            r.stats.max
        );
    }
}
