//! The command line: flags in the style of nccl-tests and NVSHMEM's perftests, parsed into
//! [`Options`]; every bad value is an error naming the flag and the value.

use std::path::PathBuf;

use crate::sizes::{parse_size, Sweep, ELEM, MAX_SIZE};
use crate::table::{Initiator, Transport, BENCHES};

/// Fewest timed iterations per repetition, however large the transfer.
pub const MIN_ITERS: usize = 8;

/// Default iterations per repetition (the cap for small transfers).
const DEFAULT_ITERS: usize = 100_000;

/// Default byte budget per repetition: large transfers run `bytes / size` iterations.
const DEFAULT_BYTES: usize = 256 << 20;

/// Default number of timed repetitions per point.
const DEFAULT_REPS: usize = 11;

/// The `--help` text (the metric list is appended from [`BENCHES`]).
pub const USAGE: &str = "\
usage: symmem-perf --pes N [options]
       symmem-perf --pes N --matrix [options]
       symmem-perf --plot DIR --from FILE.jsonl

Measures symmem between PE 0 (initiator) and PE 1 (target); launches its own N local PEs
with --pes (at least 2), or runs under symrun / mpirun.

  --pes N            start N PEs of this program (self-launch)
  --bind-to WHAT     with --pes: bind each PE to a core, a NUMA node's CPUs, or none, as
                     symrun does (default: core when there are enough CPUs)
  --map-by WHAT      with --pes: core (default) or numa, as symrun's
  -b, --minbytes S   smallest size of every size-sweeping metric (default: each metric's
                     own sweep; with -e or -f alone, 8)
  -e, --maxbytes S   largest size (at most 16M; with -b or -f alone, 16M)
  -f, --stepfactor F sizes grow by this integer factor from -b to -e (default 2)
                     Sizes take suffixes: 8, 4K, 1M, 16M; they are multiples of 8 bytes.
  -n, --iters N      most timed iterations per repetition (default 100000; quick 1000)
  -w, --warmup N     warm-up iterations before each point (default a tenth of the timed
                     iterations, at least 2)
  --bytes N          byte budget per repetition: sizes above bytes/iters run bytes/size
                     iterations, at least 8 (default 268435456; quick 4194304)
  --reps N           timed repetitions per point; the median is reported (default 11;
                     quick 3)
  --quick            smoke run: few iterations and repetitions (still overridable)
  --transport T      p2p (default: PE 1's heap is mapped), socket, ib or ofi (every PE its own
                     simulated node, so PE 0 reaches PE 1 over that transport; host rows),
                     or all: every transport this build and machine can run, one after
                     the other (an unusable one is named with the reason it is skipped)
  --initiator I      host, thread, warp, block or all (default): run only that
                     initiator's rows (grid and stream rows run with all)
  --bidir            bandwidth metrics run both directions at once, PE 0 → PE 1 and
                     PE 1 → PE 0, reported as bidirectional GB/s (both directions' bytes)
  --only M,M         run only the named metrics (a metric's baseline, if it has one, runs
                     and prints with it: the two are measured interleaved)
  --matrix           PE × PE tables of put bandwidth (1 MiB, one-way) and 8-byte
                     put_signal ping-pong latency between every ordered pair, one pair at
                     a time while the others wait in a barrier (needs N >= 2)
  --json             one JSON object per line: metric, size, value, unit, transport,
                     initiator, device, p50, p99, stdev, sample_ops, direction (and src, dst
                     in --matrix)
  --plot DIR         also write SVG charts (latency vs size, bandwidth vs size; one series
                     per transport, initiator and direction) and the rows (rows.jsonl) to DIR
  --from FILE        with --plot: chart the JSON lines of FILE instead of measuring
  --help             this text

Every destination page is written before the first measurement, and every point is
warmed up. Transfer buffers are page-aligned. Values: latency in µs per operation (the
one-way time for ping-pongs), bandwidth in GB/s (10^9 bytes per second), one-way unless
--bidir. The value is the median of the repetitions' means (min and max beside it).

p50, p99 and stdev: host latency rows run each repetition a second time, timed in
batches sized to about 2 µs of work (one operation per batch when an operation takes
longer), each batch giving one per-operation sample; the percentiles and the standard
deviation are over every batch of every repetition (sample_ops in --json is the batch
size), and the value still comes from the bare, unbatched runs. Device and stream rows
loop inside one launch, so their samples are the repetitions themselves (sample_ops =
the iterations of a launch); bandwidth rows likewise.

metrics (initiators in brackets; `*`: CPU PEs only, `+`: GPU PEs only):";

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
    /// Print the usage text.
    Help,
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

/// The value after `flag`, or an error naming it.
fn value<'a>(it: &mut impl Iterator<Item = &'a String>, flag: &str) -> Result<&'a str, String> {
    it.next()
        .map(String::as_str)
        .ok_or_else(|| format!("{flag} needs a value (see --help)"))
}

/// A positive integer after `flag`.
fn number<'a>(it: &mut impl Iterator<Item = &'a String>, flag: &str) -> Result<usize, String> {
    let v = value(it, flag)?;
    v.parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{flag} {v:?}: expected a positive number"))
}

/// Parses the arguments (without the program name). `--pes N` is checked and otherwise
/// ignored: the self-launcher consumes it, but it stays in the arguments under symrun.
pub fn parse_args(args: &[String]) -> Result<Command, String> {
    let (mut json, mut quick, mut bidir, mut matrix) = (false, false, false, false);
    let (mut iters, mut bytes, mut reps, mut only, mut warmup) = (None, None, None, None, None);
    let (mut min, mut max, mut factor) = (None, None, None);
    let (mut plot, mut from, mut initiator) = (None, None, None);
    let mut transport = TransportArg::One(Transport::P2p);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--json" => json = true,
            "--quick" => quick = true,
            "--bidir" => bidir = true,
            "--matrix" => matrix = true,
            "--pes" => {
                number(&mut it, "--pes")?;
            }
            // Read by the self-launch, which binds the PEs as symrun does.
            "--bind-to" | "--map-by" => {
                value(&mut it, arg)?;
            }
            "--transport" => {
                transport = match value(&mut it, "--transport")? {
                    "p2p" => TransportArg::One(Transport::P2p),
                    "socket" => TransportArg::One(Transport::Socket),
                    "ib" => TransportArg::One(Transport::Ib),
                    "ofi" => TransportArg::One(Transport::Ofi),
                    "all" => TransportArg::All,
                    other => {
                        return Err(format!(
                            "--transport {other:?}: expected p2p, socket, ib, ofi or all"
                        ))
                    }
                }
            }
            "--initiator" => {
                initiator = match value(&mut it, "--initiator")? {
                    "host" => Some(Initiator::Host),
                    "thread" => Some(Initiator::Thread),
                    "warp" => Some(Initiator::Warp),
                    "block" => Some(Initiator::Block),
                    "all" => None,
                    other => {
                        return Err(format!(
                            "--initiator {other:?}: expected host, thread, warp, block or all"
                        ))
                    }
                }
            }
            "-n" | "--iters" => iters = Some(number(&mut it, arg)?),
            "-w" | "--warmup" => {
                let v = value(&mut it, arg)?;
                warmup = Some(
                    v.parse::<usize>()
                        .map_err(|_| format!("{arg} {v:?}: expected a number of iterations"))?,
                );
            }
            "-b" | "--minbytes" => min = Some(parse_size(arg, value(&mut it, arg)?)?),
            "-e" | "--maxbytes" => max = Some(parse_size(arg, value(&mut it, arg)?)?),
            "-f" | "--stepfactor" => {
                let v = value(&mut it, arg)?;
                factor =
                    Some(v.parse::<usize>().ok().filter(|&f| f >= 2).ok_or_else(|| {
                        format!("{arg} {v:?}: expected an integer of at least 2")
                    })?);
            }
            "--bytes" => bytes = Some(number(&mut it, "--bytes")?),
            "--reps" => reps = Some(number(&mut it, "--reps")?),
            "--plot" => plot = Some(PathBuf::from(value(&mut it, "--plot")?)),
            "--from" => from = Some(PathBuf::from(value(&mut it, "--from")?)),
            "--only" => {
                let list = value(&mut it, "--only")?;
                let names: Vec<String> = list.split(',').map(str::to_string).collect();
                if let Some(bad) = names
                    .iter()
                    .find(|n| !BENCHES.iter().any(|b| b.metric == *n))
                {
                    return Err(format!("--only: unknown metric {bad:?} (see --help)"));
                }
                only = Some(names);
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    if let Some(from) = from {
        let dir = plot.ok_or("--from FILE needs --plot DIR (where the charts go)")?;
        return Ok(Command::Replot { dir, from });
    }
    if matrix && bidir {
        return Err("--matrix measures one direction per ordered pair: drop --bidir".into());
    }
    let sweep = sweep(min, max, factor)?;
    Ok(Command::Run(Options {
        json,
        iters: iters.unwrap_or(if quick { 1_000 } else { DEFAULT_ITERS }),
        warmup,
        bytes: bytes.unwrap_or(if quick { 4 << 20 } else { DEFAULT_BYTES }),
        reps: reps.unwrap_or(if quick { 3 } else { DEFAULT_REPS }),
        only,
        transport,
        initiator,
        bidir,
        sweep,
        matrix,
        plot,
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
        parse_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn options(args: &[&str]) -> Options {
        match parse(args) {
            Ok(Command::Run(o)) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn nccl_style_flags() {
        let o = options(&["-b", "8", "-e", "1M", "-f", "4", "-n", "50", "-w", "3"]);
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
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (args, needle) in [
            (&["-b", "12"][..], "-b 12"),
            (&["-e", "32M"][..], "-e"),
            (&["-f", "1"][..], "-f \"1\""),
            (&["--transport", "tcp"][..], "--transport \"tcp\""),
            (&["--initiator", "grid"][..], "--initiator \"grid\""),
            (&["-n", "x"][..], "-n \"x\""),
            (&["--only", "nope"][..], "\"nope\""),
            (&["--from", "x.jsonl"][..], "--plot"),
            (&["--bogus"][..], "--bogus"),
        ] {
            let err = parse(args).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
}
