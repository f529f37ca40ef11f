//! Command-line parameters of `moe_dispatch`: parsing, validation and `--help`.

use std::fmt;

/// PEs started when the program runs outside any job and no `--pes` is given.
pub const DEFAULT_PES: usize = 4;

/// The usage text printed by `--help`.
pub const HELP: &str = "\
moe_dispatch: device-initiated MoE token dispatch and combine, against a host alltoall baseline

Each PE owns T tokens of H u64s. A seeded, skewed (Zipf-like) router sends every token to
k distinct experts out of E, spread evenly over the PEs, each choice with an integer weight.
The device path runs three kernels per PE with no host round trip between them: dispatch
(each block reserves its run of tokens per expert with one atomic_fetch_add on the expert's
PE, puts the rows straight to PEs it maps and one batch per run to the others, then hands
each PE its run descriptors and a signal), expert (takes the source PEs as they finish,
applies expert e's function x*(e+1)+e, returns each run with one put_signal_nbi) and
combine (waits for every row, weighted sum). The baseline does the same with host collectives: counts alltoall, payload alltoall,
host expert function, alltoall back, host combine. Every step of both is checked exactly
against a host reference; timings are medians over the iterations, the slowest PE per step.

usage: moe_dispatch [--pes N] [options]

  --pes N              start N PEs (default 4 when not already launched as a job)
  --tokens T[,T...]    tokens per PE, one run per value (default 256,1024)
  --experts E[,E...]   experts in total, divisible by the PEs (default 8,16)
  --hidden H           u64 elements per token (default 128)
  --top-k K            experts per token, at most E (default 2)
  --capacity N|auto    token slots per expert; auto = T x PEs, which no routing overflows
                       (default auto)
  --on-overflow drop|error
                       when an expert receives more than its capacity: drop the extra
                       tokens (counted, left out of their token's sum, checked) or fail
                       the step naming the expert, its PE and the capacity (default error)
  --skew S             Zipf exponent of expert popularity, 0 = uniform (default 1.0)
  --seed N             seed of the routing and the token values (default 1)
  --iters N            timed iterations per run (default 5), after one warm-up
  --scope block|warp   group that puts each token row (default block)
  --blocks N           blocks per kernel launch (default: 1 on CPU PEs, 32 on GPU PEs)
  --threads N          threads per block, 1..=1024 (default: 8 on CPU PEs, where every
                       block-wide step costs a switch per thread; 256 on GPU PEs)
  --mode both|device|baseline
                       which paths to run (default both)
  --json               also print one JSON object per run on stdout
  -h, --help           this text

Runs on CPU PEs, or on GPU PEs with the same kernels' PTX when SYMMEM_DEVICE=cuda (or auto
with a GPU). SYMMEM_SIMULATE_NODES=2 splits the PEs into two nodes joined by sockets.
";

/// What to do when an expert receives more tokens than its capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Drop the extra tokens, count them, and leave them out of the combine.
    Drop,
    /// Fail the step with an error naming the expert, its PE and the capacity.
    Error,
}

/// Which group of threads puts one token row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A whole block per row (`put_nbi_block`).
    Block,
    /// A warp per row (`put_nbi_warp`).
    Warp,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Block => "block",
            Scope::Warp => "warp",
        })
    }
}

/// Which paths to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The device path and the baseline.
    Both,
    /// Only the device-initiated path.
    Device,
    /// Only the host alltoall baseline.
    Baseline,
}

/// The parsed parameters.
#[derive(Debug, Clone)]
pub struct Params {
    /// `--pes`, if given.
    pub pes: Option<usize>,
    /// Tokens per PE, one run each.
    pub tokens: Vec<usize>,
    /// Experts in total, one run each.
    pub experts: Vec<usize>,
    /// u64 elements per token.
    pub hidden: usize,
    /// Experts per token.
    pub top_k: usize,
    /// Slots per expert; `None` = tokens × PEs.
    pub capacity: Option<usize>,
    /// Overflow policy.
    pub on_overflow: Overflow,
    /// Zipf exponent.
    pub skew: f64,
    /// Routing and data seed.
    pub seed: u64,
    /// Timed iterations.
    pub iters: usize,
    /// Put scope.
    pub scope: Scope,
    /// Blocks per launch; `None` = by the kind of PE ([`Params::geometry`]).
    pub blocks: Option<u32>,
    /// Threads per block; `None` = by the kind of PE.
    pub threads: Option<u32>,
    /// Paths to run.
    pub mode: Mode,
    /// Print JSON lines.
    pub json: bool,
}

/// What the command line asks for.
pub enum Command {
    /// Print [`HELP`].
    Help,
    /// Run with these parameters.
    Run(Params),
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag} expects a number, got {v:?}"))
}

fn positive(flag: &str, v: &str) -> Result<usize, String> {
    match number::<usize>(flag, v)? {
        0 => Err(format!("{flag} must be at least 1")),
        n => Ok(n),
    }
}

fn list(flag: &str, v: &str) -> Result<Vec<usize>, String> {
    v.split(',').map(|x| positive(flag, x.trim())).collect()
}

/// The options that take a value.
const WITH_VALUE: [&str; 14] = [
    "--pes",
    "--tokens",
    "--experts",
    "--hidden",
    "--top-k",
    "--capacity",
    "--on-overflow",
    "--skew",
    "--seed",
    "--iters",
    "--scope",
    "--blocks",
    "--threads",
    "--mode",
];

/// Parses `args` (without the program name; `--pes N` may still be among them).
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut p = Params {
        pes: None,
        tokens: vec![256, 1024],
        experts: vec![8, 16],
        hidden: 128,
        top_k: 2,
        capacity: None,
        on_overflow: Overflow::Error,
        skew: 1.0,
        seed: 1,
        iters: 5,
        scope: Scope::Block,
        blocks: None,
        threads: None,
        mode: Mode::Both,
        json: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let flag = flag.as_str();
        match flag {
            "-h" | "--help" => return Ok(Command::Help),
            "--json" => {
                p.json = true;
                continue;
            }
            _ => {}
        }
        if !WITH_VALUE.contains(&flag) {
            return Err(format!("unknown option {flag:?} (see --help)"));
        }
        let v = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value (see --help)"))?;
        match flag {
            "--pes" => p.pes = Some(positive(flag, v)?),
            "--tokens" => p.tokens = list(flag, v)?,
            "--experts" => p.experts = list(flag, v)?,
            "--hidden" => p.hidden = positive(flag, v)?,
            "--top-k" => p.top_k = positive(flag, v)?,
            "--capacity" => {
                p.capacity = if v == "auto" {
                    None
                } else {
                    Some(positive(flag, v)?)
                }
            }
            "--on-overflow" => {
                p.on_overflow = match v.as_str() {
                    "drop" => Overflow::Drop,
                    "error" => Overflow::Error,
                    _ => return Err(format!("--on-overflow expects drop or error, got {v:?}")),
                }
            }
            "--skew" => {
                p.skew = number(flag, v)?;
                if !(p.skew.is_finite() && p.skew >= 0.0) {
                    return Err(format!("--skew must be a finite number >= 0, got {v}"));
                }
            }
            "--seed" => p.seed = number(flag, v)?,
            "--iters" => p.iters = positive(flag, v)?,
            "--scope" => {
                p.scope = match v.as_str() {
                    "block" => Scope::Block,
                    "warp" => Scope::Warp,
                    _ => return Err(format!("--scope expects block or warp, got {v:?}")),
                }
            }
            "--blocks" => {
                p.blocks = Some(
                    positive(flag, v)?
                        .try_into()
                        .map_err(|_| format!("--blocks {v} is too large"))?,
                )
            }
            "--threads" => {
                p.threads = match positive(flag, v)? {
                    n @ 1..=1024 => Some(n as u32),
                    n => return Err(format!("--threads must be at most 1024, got {n}")),
                }
            }
            "--mode" => {
                p.mode = match v.as_str() {
                    "both" => Mode::Both,
                    "device" => Mode::Device,
                    "baseline" => Mode::Baseline,
                    _ => {
                        return Err(format!(
                            "--mode expects both, device or baseline, got {v:?}"
                        ))
                    }
                }
            }
            _ => unreachable!("{flag} is in WITH_VALUE"),
        }
    }
    Ok(Command::Run(p))
}

impl Params {
    /// Checks the parameters against the job's `n_pes`: the errors name the flag.
    pub fn validate(&self, n_pes: usize) -> Result<(), String> {
        for &e in &self.experts {
            if e % n_pes != 0 {
                return Err(format!(
                    "--experts {e} is not divisible by the {n_pes} PEs: every PE holds the same number of experts"
                ));
            }
            if self.top_k > e {
                return Err(format!(
                    "--top-k {} is more than the {e} experts: each token needs distinct experts",
                    self.top_k
                ));
            }
        }
        for &t in &self.tokens {
            if t.checked_mul(self.top_k)
                .is_none_or(|c| c > u32::MAX as usize)
            {
                return Err(format!(
                    "--tokens {t} × --top-k {} does not fit the 32-bit choice index",
                    self.top_k
                ));
            }
        }
        Ok(())
    }

    /// `(blocks, threads)` of each launch: as given, else small on CPU PEs (the CPU
    /// executor runs a block's threads as fibers on one core, so more threads only add
    /// switches) and enough to fill some SMs on GPU PEs.
    pub fn geometry(&self, on_gpu: bool) -> (u32, u32) {
        let (blocks, threads) = if on_gpu { (32, 256) } else { (1, 8) };
        (
            self.blocks.unwrap_or(blocks),
            self.threads.unwrap_or(threads),
        )
    }

    /// Slots per expert for a run with `tokens` tokens per PE.
    pub fn capacity_for(&self, tokens: usize, n_pes: usize) -> usize {
        self.capacity.unwrap_or(tokens * n_pes)
    }
}
