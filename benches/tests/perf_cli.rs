//! `symmem-perf` through its binary, in smoke mode (tiny -n/-w, one repetition, small
//! sizes): every metric of `--help` runs and its JSON parses, `--matrix` covers every
//! ordered pair, `--plot` writes well-formed SVG, `--plot --from` re-plots, and bad flags
//! are errors naming the flag. Nothing here asserts a performance number.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The smoke-mode flags: 20 timed iterations, 2 warm-up ones, one repetition.
const SMOKE: &[&str] = &["-n", "20", "-w", "2", "--reps", "1"];

/// Runs `symmem-perf` with `args` and no inherited `SYMMEM_*` variables.
fn perf(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_symmem-perf"));
    for (k, _) in std::env::vars() {
        if k.starts_with("SYMMEM_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(args).output().expect("running symmem-perf")
}

/// `perf(args)`'s stdout; fails the test if the run failed.
fn perf_ok(args: &[&str]) -> String {
    let out = perf(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "symmem-perf {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The JSON objects among the lines of `out`.
fn json_rows(out: &str) -> Vec<Value> {
    out.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// A string field of a row.
fn text<'a>(row: &'a Value, field: &str) -> &'a str {
    row[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field} in {row}"))
}

/// A fresh, empty directory under the target directory's temp space.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("symmem-perf-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The (metric, initiator) pairs `--help` lists that run on CPU PEs.
fn help_pairs() -> BTreeSet<(String, String)> {
    let help = perf_ok(&["--help"]);
    let list = help
        .split_once("\nmetrics (")
        .map(|(_, rest)| rest)
        .expect("--help has a metrics list");
    let mut pairs = BTreeSet::new();
    for line in list.lines().skip(1) {
        let Some((metric, rest)) = line.trim().split_once(' ') else {
            continue;
        };
        let initiators = rest
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .unwrap_or_else(|| panic!("no initiators in {line:?}"))
            .0;
        for i in initiators.split_whitespace() {
            // `+`: GPU PEs only.
            if !i.ends_with('+') {
                pairs.insert((metric.to_string(), i.trim_end_matches('*').to_string()));
            }
        }
    }
    pairs
}

#[test]
fn every_metric_of_help_runs_and_its_json_parses() {
    let pairs = help_pairs();
    assert!(pairs.iter().any(|(_, i)| i == "host"));
    assert!(pairs.iter().any(|(_, i)| i == "thread"));
    let mut args = vec!["--pes", "2", "--json", "-b", "8", "-e", "64", "-f", "8"];
    args.extend(SMOKE);
    let rows = json_rows(&perf_ok(&args));
    let mut seen = BTreeSet::new();
    for r in &rows {
        for field in ["value", "p50", "p99", "stdev"] {
            let v = r[field]
                .as_f64()
                .unwrap_or_else(|| panic!("{field} of {r}"));
            assert!(v.is_finite() && v >= 0.0, "{field} of {r}");
        }
        assert!(
            r["size"].as_u64().is_some() && r["sample_ops"].as_u64().is_some(),
            "{r}"
        );
        assert!(["us", "GB/s"].contains(&text(r, "unit")), "{r}");
        assert_eq!(text(r, "direction"), "oneway", "{r}");
        assert_eq!((text(r, "transport"), text(r, "device")), ("p2p", "cpu"));
        seen.insert((
            text(r, "metric").to_string(),
            text(r, "initiator").to_string(),
        ));
    }
    let missing: Vec<_> = pairs.difference(&seen).collect();
    assert!(missing.is_empty(), "no rows for {missing:?}");
    // -b 8 -e 64 -f 8: every size-sweeping metric at 8 and 64 bytes.
    let put_sizes: BTreeSet<u64> = rows
        .iter()
        .filter(|r| text(r, "metric") == "put_latency" && text(r, "initiator") == "host")
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(put_sizes, BTreeSet::from([8, 64]));
}

#[test]
fn matrix_covers_every_ordered_pair() {
    let mut args = vec!["--pes", "3", "--matrix", "--json"];
    args.extend(SMOKE);
    let rows = json_rows(&perf_ok(&args));
    for metric in ["put_bw", "put_signal_pingpong_latency"] {
        let pairs: BTreeSet<(u64, u64)> = rows
            .iter()
            .filter(|r| text(r, "metric") == metric)
            .map(|r| (r["src"].as_u64().unwrap(), r["dst"].as_u64().unwrap()))
            .collect();
        let all: BTreeSet<(u64, u64)> = (0..3)
            .flat_map(|s| (0..3).filter(move |&d| d != s).map(move |d| (s, d)))
            .collect();
        assert_eq!(pairs, all, "{metric}");
    }
    let out = perf(&[
        "--pes", "3", "--matrix", "-n", "10", "-w", "1", "--reps", "1",
    ]);
    let (table, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{table}\n{stderr}");
    assert!(
        table.contains("row = source PE, column = destination PE"),
        "{table}"
    );
    // Progress: two points per ordered pair, the last one PE 2 -> PE 1.
    let last = "[12/12] put_signal_pingpong_latency 8 B PE 2 -> PE 1 (";
    assert!(stderr.contains(last), "no {last:?} in:\n{stderr}");
}

/// Checks that `svg` is one balanced `<svg>` element.
fn assert_well_formed(svg: &str, file: &Path) {
    assert!(svg.starts_with("<svg"), "{}", file.display());
    let mut open: Vec<&str> = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("an unclosed tag") + start;
        let tag = &rest[start + 1..end];
        let name = tag
            .trim_start_matches('/')
            .split(|c: char| c.is_whitespace() || c == '/')
            .next()
            .unwrap();
        if tag.starts_with('/') {
            assert_eq!(open.pop(), Some(name), "{}: </{name}>", file.display());
        } else if !tag.ends_with('/') {
            open.push(name);
        }
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty(), "{}: unclosed {open:?}", file.display());
}

#[test]
fn plot_writes_svg_and_replots_saved_rows() {
    let dir = scratch("plot");
    let dir_arg = dir.to_str().unwrap();
    let mut args = vec![
        "--pes",
        "2",
        "--only",
        "put_latency,put_bw",
        "-b",
        "8",
        "-e",
        "512",
        "-f",
        "8",
        "--plot",
        dir_arg,
    ];
    args.extend(SMOKE);
    let out = perf_ok(&args);
    for metric in ["put_latency", "put_bw"] {
        let file = dir.join(format!("{metric}.svg"));
        assert!(out.contains(&format!("wrote {}", file.display())), "{out}");
        let svg = std::fs::read_to_string(&file).unwrap();
        assert_well_formed(&svg, &file);
        for series in ["p2p host", "p2p thread", "p2p warp", "p2p block"] {
            assert!(
                svg.contains(&format!(">{series}<")),
                "{series} in {}",
                file.display()
            );
        }
    }
    let again = scratch("replot");
    let rows = dir.join("rows.jsonl");
    let out = perf_ok(&[
        "--plot",
        again.to_str().unwrap(),
        "--from",
        rows.to_str().unwrap(),
    ]);
    for metric in ["put_latency", "put_bw"] {
        let file = again.join(format!("{metric}.svg"));
        assert!(out.contains(&format!("wrote {}", file.display())), "{out}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            std::fs::read_to_string(dir.join(format!("{metric}.svg"))).unwrap()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&again).unwrap();
}

#[test]
fn bidir_initiator_and_transport_all() {
    let mut args = vec![
        "--pes",
        "2",
        "--json",
        "--only",
        "put_bw,get_bw",
        "--bidir",
        "--initiator",
        "thread",
        "-b",
        "64",
        "-e",
        "64",
    ];
    args.extend(SMOKE);
    let rows = json_rows(&perf_ok(&args));
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        assert_eq!(
            (text(r, "initiator"), text(r, "direction")),
            ("thread", "bidir")
        );
    }
    let mut args = vec![
        "--pes",
        "2",
        "--json",
        "--only",
        "get_latency",
        "--transport",
        "all",
        "--initiator",
        "host",
        "-b",
        "8",
        "-e",
        "8",
    ];
    args.extend(SMOKE);
    let out = perf(&args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let transports: BTreeSet<String> = json_rows(&stdout)
        .iter()
        .map(|r| text(r, "transport").to_string())
        .collect();
    assert!(
        transports.contains("p2p") && transports.contains("socket"),
        "{stdout}"
    );
    assert!(
        transports.contains("ib") || stderr.contains("ib skipped: "),
        "ib neither run nor skipped with a reason:\n{stderr}"
    );
}

#[test]
fn bad_flags_are_errors_naming_the_flag() {
    for (args, needle) in [
        (&["-b", "12"][..], "-b 12"),
        (&["-e", "1X"][..], "-e \"1X\""),
        (&["--maxbytes", "64M"][..], "-e"),
        (&["-f", "0"][..], "'0' for '--stepfactor"),
        (&["-n", "zero"][..], "'zero' for '--iters"),
        (&["--transport", "rdma"][..], "'rdma' for '--transport"),
        (&["--initiator", "gpu"][..], "'gpu' for '--initiator"),
        (&["--pes=0"][..], "'0' for '--pes"),
        (&["--quik"][..], "a similar argument exists: '--quick'"),
        (&["--only", "put_latencyy"][..], "put_latencyy"),
        (&["--from", "x.jsonl"][..], "--plot"),
        (&["--matrix", "--bidir"][..], "--bidir"),
        (&["--frobnicate"][..], "--frobnicate"),
    ] {
        let out = perf(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// `--pes=N` self-launches like `--pes N`; with `--json`, stdout holds only JSON lines and
/// the progress (`[k/N] metric size (elapsed)`) goes to stderr.
#[test]
fn pes_with_equals_runs_and_progress_goes_to_stderr() {
    let mut args = vec![
        "--pes=2",
        "--json",
        "--only=put_latency",
        "--initiator=host",
        "-b",
        "8",
        "-e",
        "16",
    ];
    args.extend(SMOKE);
    let out = perf(&args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let rows = json_rows(&stdout);
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(stdout.lines().all(|l| l.starts_with('{')), "{stdout}");
    for (k, size) in [(1, "8 B"), (2, "16 B")] {
        let line = format!("[{k}/2] put_latency {size} (");
        assert!(stderr.contains(&line), "no {line:?} in:\n{stderr}");
    }
}

#[test]
fn help_and_version_print_and_succeed() {
    let version = perf(&["--version"]);
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("symmem-perf {}", env!("CARGO_PKG_VERSION"))
    );
    let help = perf(&["-h"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--stepfactor"));
}
