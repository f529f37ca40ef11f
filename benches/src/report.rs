//! Output of measured rows: the human-readable tables and the JSON lines.
//!
//! The JSON fields `metric`, `size`, `value`, `unit`, `transport`, `initiator` and
//! `device` come first and keep their meaning (benches/peers and scripts/gpu-check.sh
//! read them); `p50`, `p99`, `stdev`, `sample_ops` and `direction` follow, then `src` and
//! `dst` on the rows of `--matrix`, and `misalign` on the rows `--misalign` moved.

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
    /// `--misalign`'s bytes, on the rows it moves.
    pub misalign: Option<usize>,
}

/// The `direction` label of a row moving bytes in `dirs` directions at once.
pub fn direction(dirs: usize) -> &'static str {
    if dirs == 2 {
        "bidir"
    } else {
        "oneway"
    }
}

/// A row as its JSON line has it; the fields in the order they are written.
#[derive(serde::Serialize)]
struct JsonRow<'a> {
    metric: &'a str,
    size: usize,
    value: Option<f64>,
    unit: &'a str,
    transport: &'a str,
    initiator: &'a str,
    device: &'a str,
    p50: Option<f64>,
    p99: Option<f64>,
    stdev: Option<f64>,
    sample_ops: usize,
    direction: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    src: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dst: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    misalign: Option<usize>,
}

/// `v` to 4 decimal places, or `None` (JSON's null) when it is not a finite number, which
/// JSON cannot write.
fn number(v: f64) -> Option<f64> {
    v.is_finite().then(|| (v * 1e4).round() / 1e4)
}

/// One JSON line of a row (serde_json: every line is valid JSON, a NaN being null).
pub fn json_line(metric: &str, size: usize, s: &Stats, l: &Labels) -> String {
    let row = JsonRow {
        metric,
        size,
        value: number(s.median),
        unit: l.unit,
        transport: l.transport,
        initiator: l.initiator,
        device: l.device,
        p50: number(s.p50),
        p99: number(s.p99),
        stdev: number(s.stdev),
        sample_ops: s.sample_ops,
        direction: l.direction,
        src: l.pair.map(|(src, _)| src),
        dst: l.pair.map(|(_, dst)| dst),
        misalign: l.misalign,
    };
    serde_json::to_string(&row).expect("a row of numbers and strings serializes")
}

/// Prints one benchmark's rows as a table (PE 0 only), with the ratio to `base`, the
/// rows of its baseline measured alongside (one-way rows only), and for latency rows the
/// samples' p50, p99 and standard deviation.
pub fn print_table(bench: &Bench, rows: &[Row], base: &[Row], l: &Labels) {
    println!();
    let bidir = l.direction == direction(2);
    let dir = if bidir { ", bidirectional" } else { "" };
    let misalign = l
        .misalign
        .map(|m| format!(", remote side {m} bytes past a page boundary"))
        .unwrap_or_default();
    println!(
        "{} — {} ({}, {}, {}{dir}{misalign})",
        bench.metric,
        bench.about,
        bench.initiator.name(),
        l.transport,
        l.device,
    );
    let latency = matches!(bench.kind, Kind::Latency { .. });
    // A one-way baseline says nothing about both directions at once.
    let baseline = bench.baseline.filter(|_| !bidir);
    let ratio_heading = baseline.map(|b| format!("  vs {b}"));
    let dist_heading = if latency {
        format!("  {:>10}  {:>10}  {:>10}", "p50", "p99", "stdev")
    } else {
        String::new()
    };
    println!(
        "{:>10}  {:>16}  {:>10}  {:>10}{}{dist_heading}",
        "size",
        bench.kind.heading(bidir),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pair: Option<(usize, usize)>) -> Labels<'static> {
        Labels {
            unit: "us",
            transport: "p2p",
            initiator: "host",
            device: "cpu",
            direction: "oneway",
            pair,
            misalign: None,
        }
    }

    fn stats(median: f64) -> Stats {
        Stats {
            median,
            min: median,
            max: median,
            p50: 1.0 / 3.0,
            p99: f64::INFINITY,
            stdev: 0.0,
            sample_ops: 4,
        }
    }

    #[test]
    fn a_json_line_is_valid_json_with_null_for_what_is_not_a_number() {
        let line = json_line("put_latency", 8, &stats(f64::NAN), &labels(None));
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["value"].is_null() && v["p99"].is_null(), "{line}");
        assert_eq!(v["p50"], 0.3333);
        assert!(v.get("src").is_none(), "{line}");
        assert!(
            line.starts_with(
                "{\"metric\":\"put_latency\",\"size\":8,\"value\":null,\"unit\":\"us\""
            ),
            "{line}"
        );
        let line = json_line("put_bw", 1 << 20, &stats(12.34567), &labels(Some((2, 3))));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (v["value"].as_f64(), v["src"].as_u64(), v["dst"].as_u64()),
            (Some(12.3457), Some(2), Some(3))
        );
    }
}
