//! `--plot DIR`: SVG charts of the JSON rows, one chart per metric measured at several
//! sizes (latency or bandwidth against size, both axes logarithmic), one series per
//! transport, initiator and direction. The SVG is written by hand: lines, circles and
//! `<text>` elements, which need no fonts or system libraries to produce.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::sizes::short_size;

/// One row read back from JSON lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Metric name.
    pub metric: String,
    /// Transfer size in bytes.
    pub size: usize,
    /// The reported value.
    pub value: f64,
    /// `us` or `GB/s`.
    pub unit: String,
    /// The series: transport, initiator and (for bidirectional rows) direction.
    pub series: String,
}

/// Reads the JSON lines of `path`: one object per line; blank lines and lines starting
/// with `#` are skipped, and so are `--matrix` rows (they carry `src`), which have no
/// size axis. Errors name the file and line.
pub fn read_rows(path: &Path) -> Result<Vec<Record>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--from {}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{}: not a JSON object: {e}", at()))?;
        if v.get("src").is_some() {
            continue;
        }
        let text_field = |name: &str| v.get(name).and_then(|x| x.as_str()).unwrap_or("");
        let metric = text_field("metric");
        let size = v.get("size").and_then(|x| x.as_u64());
        let value = v.get("value").and_then(|x| x.as_f64());
        let (Some(size), Some(value), false) = (size, value, metric.is_empty()) else {
            return Err(format!("{}: needs metric, size and value", at()));
        };
        let mut series = [text_field("transport"), text_field("initiator")]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if text_field("direction") == "bidir" {
            series.push_str(" bidir");
        }
        rows.push(Record {
            metric: metric.to_string(),
            size: size as usize,
            value,
            unit: text_field("unit").to_string(),
            series,
        });
    }
    Ok(rows)
}

/// Writes one chart per metric of `rows` with at least two sizes into `dir`; returns the
/// files written. Repeated points (several runs in one file) are drawn at their median.
pub fn write_charts(rows: &[Record], dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("--plot {}: {e}", dir.display()))?;
    // metric -> (unit, series -> size -> values)
    type Series = BTreeMap<String, BTreeMap<usize, Vec<f64>>>;
    let mut charts: BTreeMap<&str, (&str, Series)> = BTreeMap::new();
    for r in rows {
        let (_, series) = charts
            .entry(&r.metric)
            .or_insert_with(|| (&r.unit, BTreeMap::new()));
        series
            .entry(r.series.clone())
            .or_default()
            .entry(r.size)
            .or_default()
            .push(r.value);
    }
    let mut written = Vec::new();
    for (metric, (unit, series)) in charts {
        let points: Vec<(String, Vec<(usize, f64)>)> = series
            .into_iter()
            .map(|(name, by_size)| {
                let pts = by_size
                    .into_iter()
                    .map(|(size, mut vals)| {
                        vals.sort_by(f64::total_cmp);
                        (size, vals[vals.len() / 2])
                    })
                    .collect();
                (name, pts)
            })
            .collect();
        let mut sizes: Vec<usize> = points
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(s, _)| s))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.len() < 2 {
            continue;
        }
        let name: String = metric
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{name}.svg"));
        std::fs::write(&path, svg(metric, unit, &sizes, &points))
            .map_err(|e| format!("--plot {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// Series colours, in order.
const COLOURS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Left edge of the plot area.
const LEFT: f64 = 80.0;
/// Top edge of the plot area.
const TOP: f64 = 40.0;
/// Width of the plot area.
const PLOT_W: f64 = 520.0;
/// Height of the plot area.
const PLOT_H: f64 = 320.0;
/// Width of the SVG (the legend is right of the plot area).
const WIDTH: f64 = 820.0;
/// Height of the SVG.
const HEIGHT: f64 = 420.0;

/// `s` with the XML special characters escaped.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Series `i` of a chart into `s`: its line and points (`x`, `y`: size and value to
/// position) and its legend entry.
fn draw_series(
    s: &mut String,
    i: usize,
    name: &str,
    points: &[(usize, f64)],
    x: &dyn Fn(usize) -> f64,
    y: &dyn Fn(f64) -> f64,
) {
    let colour = COLOURS[i % COLOURS.len()];
    let pts: Vec<String> = points
        .iter()
        .filter(|&&(_, v)| v > 0.0)
        .map(|&(size, v)| format!("{:.1},{:.1}", x(size), y(v)))
        .collect();
    let _ = writeln!(
        s,
        "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
        pts.join(" ")
    );
    for p in &pts {
        let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
        let _ = writeln!(
            s,
            "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"3\" fill=\"{colour}\"/>"
        );
    }
    let ly = TOP + 10.0 + 20.0 * i as f64;
    let lx = LEFT + PLOT_W + 20.0;
    let _ = writeln!(
        s,
        "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"2\"/><text x=\"{}\" y=\"{}\">{}</text>",
        lx + 24.0,
        lx + 30.0,
        ly + 4.0,
        esc(name)
    );
}

/// The SVG of one chart.
fn svg(
    metric: &str,
    unit: &str,
    sizes: &[usize],
    series: &[(String, Vec<(usize, f64)>)],
) -> String {
    let bandwidth = unit == "GB/s";
    let y_label = if bandwidth {
        "bandwidth (GB/s)"
    } else {
        "latency (µs)"
    };
    let values = series.iter().flat_map(|(_, p)| p.iter().map(|&(_, v)| v));
    let positive: Vec<f64> = values.filter(|v| *v > 0.0).collect();
    let (lo, hi) = positive
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let (y0, y1) = if positive.is_empty() {
        (0.0, 1.0)
    } else {
        (
            lo.log10().floor(),
            hi.log10().ceil().max(lo.log10().floor() + 1.0),
        )
    };
    let (x0, x1) = (
        (sizes[0] as f64).log2(),
        (sizes[sizes.len() - 1] as f64).log2(),
    );
    let x = |size: usize| LEFT + ((size as f64).log2() - x0) / (x1 - x0) * PLOT_W;
    let y = |v: f64| TOP + PLOT_H - (v.log10() - y0) / (y1 - y0) * PLOT_H;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(
        s,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"white\"/>"
    );
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{} — {y_label} vs size</text>",
        LEFT + PLOT_W / 2.0,
        esc(metric)
    );
    let _ = writeln!(
        s,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{PLOT_W}\" height=\"{PLOT_H}\" fill=\"none\" stroke=\"black\"/>"
    );
    for &size in sizes {
        let px = x(size);
        let _ = writeln!(
            s,
            "<line x1=\"{px:.1}\" y1=\"{TOP}\" x2=\"{px:.1}\" y2=\"{}\" stroke=\"#ddd\"/><text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            TOP + PLOT_H,
            TOP + PLOT_H + 16.0,
            short_size(size)
        );
    }
    let mut e = y0;
    while e <= y1 {
        let py = y(10f64.powf(e));
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{py:.1}\" x2=\"{}\" y2=\"{py:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + PLOT_W,
            LEFT - 6.0,
            py + 4.0,
            10f64.powf(e)
        );
        e += 1.0;
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">size (bytes)</text>",
        LEFT + PLOT_W / 2.0,
        HEIGHT - 20.0
    );
    let _ = writeln!(
        s,
        "<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">{y_label}</text>",
        TOP + PLOT_H / 2.0
    );
    for (i, (name, points)) in series.iter().enumerate() {
        draw_series(&mut s, i, name, points, &x, &y);
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_its_series_and_balanced_tags() {
        let rows: Vec<Record> = [(8, 1.0), (64, 2.0), (512, 8.0)]
            .into_iter()
            .flat_map(|(size, v)| {
                ["p2p host", "socket host"].map(|series| Record {
                    metric: "put_bw".into(),
                    size,
                    value: v,
                    unit: "GB/s".into(),
                    series: series.into(),
                })
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("symmem-perf-plot-{}", std::process::id()));
        let files = write_charts(&rows, &dir).unwrap();
        assert_eq!(files, vec![dir.join("put_bw.svg")]);
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(">p2p host<") && svg.contains(">socket host<"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
