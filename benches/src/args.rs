//! The command line: [`symmem::cli::perf::Args`] (flags in the style of nccl-tests and
//! NVSHMEM's perftests, parsed by clap) turned into [`Options`]; the values that need the
//! benchmark table (metric names, sizes) are checked here, every bad one an error naming
//! the flag and the value.

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches};
use symmem::cli::perf::{Args, InitiatorChoice, TransportChoice};

use crate::initiator::Initiator;
use crate::sizes::{parse_size, Sweep, ELEM, MAX_SIZE};
use crate::table::{Transport, BENCHES};

/// Fewest timed iterations per repetition, however large the transfer.
pub const MIN_ITERS: usize = 8;

/// Default iterations per repetition (the cap for small transfers).
const DEFAULT_ITERS: usize = 100_000;

/// Default byte budget per repetition: large transfers run `bytes / size` iterations.
const DEFAULT_BYTES: usize = 256 << 20;

/// Default number of timed repetitions per point.
const DEFAULT_REPS: usize = 11;

/// `--transport`: which transports to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportArg {
    /// One transport.
    One(Transport),
    /// Every transport this build and machine can run, one after the other.
    All,
}

/// Command-line options of a measuring run.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--pes N`: the PEs this run launches itself, if any.
    pub pes: Option<usize>,
    /// Print JSON lines instead of tables.
    pub json: bool,
    /// Most timed iterations per repetition.
    pub iters: usize,
    /// Warm-up iterations (`None`: a tenth of the timed iterations, at least 2).
    pub warmup: Option<usize>,
    /// Byte budget per repetition for large transfers.
    pub bytes: usize,
    /// Timed repetitions per point.
    pub reps: usize,
    /// Metrics to run; all if `None`.
    pub only: Option<Vec<String>>,
    /// `--transport`.
    pub transport: TransportArg,
    /// `--initiator`: the only initiator to run (`None`: all).
    pub initiator: Option<Initiator>,
    /// `--bidir`.
    pub bidir: bool,
    /// `--misalign`: bytes past a page boundary where the remote side of host copies
    /// starts.
    pub misalign: usize,
    /// Whether metrics run interleaved with their baselines (not `--no-baseline`).
    pub baselines: bool,
    /// `-b/-e/-f`: the sweep replacing the default sizes.
    pub sweep: Option<Sweep>,
    /// `--matrix`.
    pub matrix: bool,
    /// `--plot DIR`.
    pub plot: Option<PathBuf>,
}

impl Options {
    /// Timed iterations per repetition at `size` bytes.
    pub fn iters_for(&self, size: usize) -> usize {
        (self.bytes / size).clamp(MIN_ITERS, self.iters.max(MIN_ITERS))
    }

    /// Warm-up iterations before a point of `iters` timed iterations.
    pub fn warmup_for(&self, iters: usize) -> usize {
        self.warmup.unwrap_or((iters / 10).max(2))
    }

    /// Whether `metric` was selected.
    pub fn selected(&self, metric: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|m| m == metric))
    }

    /// Whether rows of `initiator` are selected: a filter names host, thread, warp or
    /// block; grid and stream rows run only without one.
    pub fn runs_initiator(&self, initiator: Initiator) -> bool {
        self.initiator.is_none_or(|i| i == initiator)
    }
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// Measure.
    Run(Options),
    /// Chart saved JSON lines: `--plot DIR --from FILE`.
    Replot {
        /// Where the charts go.
        dir: PathBuf,
        /// The JSON lines.
        from: PathBuf,
    },
}

/// Why the command line cannot run.
#[derive(Debug)]
pub enum ParseError {
    /// clap's report, `--help` and `--version` included (`exit()` prints it).
    Clap(clap::Error),
    /// A value clap took that the benchmark table rejects.
    Usage(String),
}

/// Parses `argv` (the program name first); `--help` lists `metrics` after the options.
/// `--pes N` is checked and otherwise kept for the self-launch, which consumes it (it
/// stays in the arguments under symrun).
pub fn parse_args(
    argv: impl IntoIterator<Item = String>,
    metrics: &str,
) -> Result<Command, ParseError> {
    let command = Args::command().after_long_help(metrics.to_string());
    let args = command
        .try_get_matches_from(argv)
        .and_then(|m| Args::from_arg_matches(&m))
        .map_err(ParseError::Clap)?;
    options(args).map_err(ParseError::Usage)
}

/// The options of parsed arguments.
fn options(a: Args) -> Result<Command, String> {
    a.launch.check()?;
    if let Some(from) = a.from {
        let dir = a
            .plot
            .ok_or("--from FILE needs --plot DIR (where the charts go)")?;
        return Ok(Command::Replot { dir, from });
    }
    if let Some(bad) = a
        .only
        .iter()
        .flatten()
        .find(|n| !BENCHES.iter().any(|b| b.metric == *n))
    {
        return Err(format!("--only: unknown metric {bad:?} (see --help)"));
    }
    let size = |flag, v: &Option<String>| v.as_deref().map(|v| parse_size(flag, v)).transpose();
    let sweep = sweep(
        size("-b", &a.min_bytes)?,
        size("-e", &a.max_bytes)?,
        a.step_factor,
    )?;
    let transport = match a.transport {
        TransportChoice::P2p => TransportArg::One(Transport::P2p),
        TransportChoice::Remote(name) => TransportArg::One(Transport::Remote(name)),
        TransportChoice::All => TransportArg::All,
    };
    let initiator = match a.initiator {
        InitiatorChoice::Host => Some(Initiator::Host),
        InitiatorChoice::Thread => Some(Initiator::Thread),
        InitiatorChoice::Warp => Some(Initiator::Warp),
        InitiatorChoice::Block => Some(Initiator::Block),
        InitiatorChoice::All => None,
    };
    let quick = a.quick;
    Ok(Command::Run(Options {
        pes: a.launch.pes,
        json: a.json,
        iters: a.iters.unwrap_or(if quick { 1_000 } else { DEFAULT_ITERS }),
        warmup: a.warmup,
        bytes: a
            .bytes
            .unwrap_or(if quick { 4 << 20 } else { DEFAULT_BYTES }),
        reps: a.reps.unwrap_or(if quick { 3 } else { DEFAULT_REPS }),
        only: a.only,
        transport,
        initiator,
        bidir: a.bidir,
        misalign: usize::from(a.misalign),
        baselines: !a.no_baseline,
        sweep,
        matrix: a.matrix,
        plot: a.plot,
    }))
}

/// The sweep of `-b`, `-e`, `-f` (`None` if none is given).
fn sweep(
    min: Option<usize>,
    max: Option<usize>,
    factor: Option<usize>,
) -> Result<Option<Sweep>, String> {
    if min.is_none() && max.is_none() && factor.is_none() {
        return Ok(None);
    }
    let (min, max, factor) = (
        min.unwrap_or(ELEM),
        max.unwrap_or(MAX_SIZE),
        factor.unwrap_or(2),
    );
    if min % ELEM != 0 {
        return Err(format!("-b {min}: sizes are multiples of {ELEM} bytes"));
    }
    if max > MAX_SIZE {
        return Err(format!("-e {max}: at most {MAX_SIZE} (16M)"));
    }
    if min > max {
        return Err(format!("-b {min} is above -e {max}"));
    }
    Ok(Some(Sweep { min, max, factor }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, String> {
        let argv = std::iter::once("symmem-perf").chain(args.iter().copied());
        parse_args(argv.map(str::to_string), "").map_err(|e| match e {
            ParseError::Clap(e) => e.to_string(),
            ParseError::Usage(msg) => msg,
        })
    }

    fn options(args: &[&str]) -> Options {
        match parse(args) {
            Ok(Command::Run(o)) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn nccl_style_flags() {
        let o = options(&["-b", "8", "-e=1M", "-f", "4", "-n", "50", "-w", "3"]);
        assert_eq!(
            o.sweep,
            Some(Sweep {
                min: 8,
                max: 1 << 20,
                factor: 4
            })
        );
        assert_eq!((o.iters, o.warmup, o.warmup_for(50)), (50, Some(3), 3));
        let d = options(&["--quick"]);
        assert_eq!((d.sweep, d.warmup_for(1000), d.reps), (None, 100, 3));
        assert_eq!(
            (d.misalign, options(&["--misalign=4095"]).misalign),
            (0, 4095)
        );
    }

    #[test]
    fn pes_takes_either_spelling() {
        assert_eq!(options(&["--pes=2", "--quick"]).pes, Some(2));
        assert_eq!(options(&["--pes", "3"]).pes, Some(3));
        let o = options(&["--only=put_latency,get_latency", "--transport=socket"]);
        assert_eq!(o.only.unwrap().len(), 2);
        assert_eq!(o.transport, TransportArg::One(Transport::Remote("socket")));
    }

    /// `--no-baseline` measures put_bw and put_signal alone; by default each has its
    /// baseline in front of it in one group.
    #[test]
    fn no_baseline_measures_each_metric_alone() {
        use crate::measure::groups;
        let only = "--only=put_bw,put_signal_pingpong_latency";
        let metrics = |o: &Options| -> Vec<Vec<&str>> {
            groups(o, false, Transport::P2p)
                .iter()
                .map(|g| g.iter().map(|b| b.metric).collect())
                .collect()
        };
        let with = metrics(&options(&[only, "--initiator=host"]));
        assert!(with.contains(&vec!["memcpy_bw", "put_bw"]), "{with:?}");
        assert!(with.contains(&vec![
            "flag_pingpong_latency",
            "put_signal_pingpong_latency"
        ]));
        let alone = metrics(&options(&[only, "--initiator=host", "--no-baseline"]));
        assert!(alone.iter().all(|g| g.len() == 1), "{alone:?}");
        assert!(alone.contains(&vec!["put_bw"]), "{alone:?}");
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (args, needle) in [
            (&["-b", "12"][..], "-b 12"),
            (&["-e", "32M"][..], "-e"),
            (&["-f", "1"][..], "'1' for '--stepfactor"),
            (&["--transport", "tcp"][..], "'tcp' for '--transport"),
            (&["--initiator", "grid"][..], "'grid' for '--initiator"),
            (&["-n", "x"][..], "'x' for '--iters"),
            (&["--pes", "0"][..], "'0' for '--pes"),
            (&["--only", "nope"][..], "\"nope\""),
            (&["--from", "x.jsonl"][..], "--plot"),
            (&["--bind-to", "core"][..], "need --pes"),
            (&["--bogus"][..], "--bogus"),
            (&["--quik"][..], "'--quick'"),
            (&["--misalign", "4096"][..], "'4096' for '--misalign"),
            (&["--misalign", "-1"][..], "--misalign"),
        ] {
            let err = parse(args).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
}
