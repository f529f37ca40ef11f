//! `symmem-perf`'s command line: flags in the style of nccl-tests and NVSHMEM's perftests.
//! Values that need the benchmark table (metric names, sizes) are checked by symmem-perf
//! itself, which also appends the metric list to `--help`.

use std::path::PathBuf;

use super::launch::SelfLaunchArgs;

/// `--transport`: which transport carries PE 0's operations to PE 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    /// PE 1's heap is mapped into PE 0 (the default).
    P2p,
    /// The remote transport of this name (one of [`crate::remote_transports`]), every
    /// PE its own simulated node.
    Remote(&'static str),
    /// Every transport this build and machine can run, one after the other.
    All,
}

impl TransportChoice {
    /// Parses a `--transport` value: `p2p`, a remote transport's name, or `all`.
    fn parse(text: &str) -> Result<Self, String> {
        match text {
            "p2p" => Ok(Self::P2p),
            "all" => Ok(Self::All),
            _ => crate::remote_transports()
                .find(|t| t.name == text)
                .map(|t| Self::Remote(t.name))
                .ok_or_else(|| format!("expected p2p, {} or all", remote_names().join(", "))),
        }
    }

    /// `--transport`'s help: the values, with every remote transport's name.
    fn help() -> String {
        let names = remote_names();
        let names = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        };
        format!(
            "p2p (PE 1's heap is mapped), {names} (every PE its own simulated node, so PE 0 reaches PE 1 over that transport; host rows), or all: every transport this build and machine can run, one after the other (an unusable one is named with the reason it is skipped)"
        )
    }
}

/// Every remote transport's name, in the order `SYMMEM_REMOTE_TRANSPORT=auto` prefers
/// them.
fn remote_names() -> Vec<&'static str> {
    crate::remote_transports().map(|t| t.name).collect()
}

/// `--initiator`: whose rows to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InitiatorChoice {
    /// Host-initiated operations.
    Host,
    /// One device thread.
    Thread,
    /// One warp.
    Warp,
    /// One block.
    Block,
    /// Every initiator, grid and stream rows included (the default).
    All,
}

/// Latency and bandwidth of symmem's host- and device-initiated operations between PE 0
/// (initiator) and PE 1 (target).
///
/// Launches its own N local PEs with --pes (at least 2), or runs under symrun / mpirun;
/// `symmem-perf --plot DIR --from FILE.jsonl` charts saved JSON lines instead.
///
/// Every destination page is written before the first measurement, and every point is
/// warmed up. Transfer buffers are page-aligned. Values: latency in µs per operation (the
/// one-way time for ping-pongs), bandwidth in GB/s (10^9 bytes per second), one-way
/// unless --bidir. The value is the median of the repetitions' means (min and max beside
/// it). Progress ([k/N] metric size, with the elapsed time) goes to stderr.
///
/// p50, p99 and stdev: host latency rows run each repetition a second time, timed in
/// batches sized to about 2 µs of work (one operation per batch when an operation takes
/// longer), each batch giving one per-operation sample; the percentiles and the standard
/// deviation are over every batch of every repetition (sample_ops in --json is the batch
/// size), and the value still comes from the bare, unbatched runs. Device and stream rows
/// loop inside one launch, so their samples are the repetitions themselves (sample_ops =
/// the iterations of a launch); bandwidth rows likewise.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "symmem-perf",
    version,
    allow_negative_numbers = true,
    after_help = "`symmem-perf --help` lists the metrics and their initiators."
)]
pub struct Args {
    /// How many PEs, and where they run.
    #[command(flatten)]
    pub launch: SelfLaunchArgs,
    /// Smallest size of every size-sweeping metric (default: each metric's own sweep;
    /// with -e or -f alone, 8). Sizes take suffixes: 8, 4K, 1M, 16M; they are multiples of
    /// 8 bytes
    #[arg(short = 'b', long = "minbytes", value_name = "S")]
    pub min_bytes: Option<String>,
    /// Largest size (at most 16M; with -b or -f alone, 16M)
    #[arg(short = 'e', long = "maxbytes", value_name = "S")]
    pub max_bytes: Option<String>,
    /// Sizes grow by this integer factor from -b to -e (default 2)
    #[arg(short = 'f', long = "stepfactor", value_name = "F", value_parser = factor)]
    pub step_factor: Option<usize>,
    /// Most timed iterations per repetition (default 100000; quick 1000)
    #[arg(short = 'n', long, value_name = "N", value_parser = super::positive)]
    pub iters: Option<usize>,
    /// Warm-up iterations before each point (default a tenth of the timed iterations, at
    /// least 2)
    #[arg(short = 'w', long, value_name = "N")]
    pub warmup: Option<usize>,
    /// Byte budget per repetition: sizes above bytes/iters run bytes/size iterations, at
    /// least 8 (default 268435456; quick 4194304)
    #[arg(long, value_name = "N", value_parser = super::positive)]
    pub bytes: Option<usize>,
    /// Timed repetitions per point; the median is reported (default 11; quick 3)
    #[arg(long, value_name = "N", value_parser = super::positive)]
    pub reps: Option<usize>,
    /// Smoke run: few iterations and repetitions (still overridable)
    #[arg(long)]
    pub quick: bool,
    /// p2p, a remote transport's name, or all (the help, from the registry of remote
    /// transports, says which)
    #[arg(
        long,
        value_name = "T",
        value_parser = TransportChoice::parse,
        default_value = "p2p",
        help = TransportChoice::help()
    )]
    pub transport: TransportChoice,
    /// host, thread, warp, block or all (default): run only that initiator's rows (grid and
    /// stream rows run with all)
    #[arg(
        long,
        value_name = "I",
        value_enum,
        default_value = "all",
        hide_possible_values = true
    )]
    pub initiator: InitiatorChoice,
    /// Bandwidth metrics run both directions at once, PE 0 → PE 1 and PE 1 → PE 0,
    /// reported as bidirectional GB/s (both directions' bytes)
    #[arg(long)]
    pub bidir: bool,
    /// Run only the named metrics, comma-separated (a metric's baseline, if it has one,
    /// runs and prints with it: the two are measured interleaved)
    #[arg(long, value_name = "M,M", value_delimiter = ',')]
    pub only: Option<Vec<String>>,
    /// Measure every metric alone, without the baseline it is otherwise interleaved with
    /// (put_bw's memcpy, put_signal's flag ping-pong): for comparisons with programs that
    /// run alone too, as benches/peers/run.sh makes. Interleaved, a 16 MiB put_bw after
    /// each repetition of the memcpy measured 20-25% lower than alone
    #[arg(long)]
    pub no_baseline: bool,
    /// Host put_bw, get_bw and memcpy_bw with the remote side (the put's destination,
    /// the get's source, memcpy's destination) starting BYTES past a page boundary, the
    /// local side page-aligned: copies between buffers misaligned against each other,
    /// which some memcpy implementations crawl through (0-4095; default 0)
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..4096))]
    pub misalign: u16,
    /// PE × PE tables of put bandwidth (1 MiB, one-way) and 8-byte put_signal ping-pong
    /// latency between every ordered pair, one pair at a time while the others wait in a
    /// barrier (needs N >= 2)
    #[arg(long, conflicts_with = "bidir")]
    pub matrix: bool,
    /// One JSON object per line: metric, size, value, unit, transport, initiator, device,
    /// p50, p99, stdev, sample_ops, direction (and src, dst in --matrix); a value that is
    /// not a number is null
    #[arg(long)]
    pub json: bool,
    /// Also write SVG charts (latency vs size, bandwidth vs size; one series per
    /// transport, initiator and direction) and the rows (rows.jsonl) to DIR
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// With --plot: chart the JSON lines of FILE instead of measuring
    #[arg(long, value_name = "FILE", requires = "plot")]
    pub from: Option<PathBuf>,
}

/// A step factor: an integer of at least 2.
fn factor(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|&f| f >= 2)
        .ok_or_else(|| format!("expected an integer of at least 2, not {text:?}"))
}
