//! Command-line parameters of `moe_dispatch` (clap) and their validation against the
//! job's size.

use std::fmt;

use symmem::cli::launch::SelfLaunchArgs;
use symmem_example_kernels::moe::wire::hidden_error;
use symmem_example_kernels::moe::{MAX_EXPERTS, MAX_PES};

/// PEs started when the program runs outside any job and no `--pes` is given.
pub const DEFAULT_PES: usize = 4;

/// What to do when an expert receives more tokens than its capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Overflow {
    /// Drop the extra tokens, count them, and leave them out of the combine.
    Drop,
    /// Fail the step with an error naming the expert, its PE and the capacity.
    Error,
}

/// Which group of threads moves one token row: the instance of the dispatch and expert
/// kernels that runs (their scope parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// A whole block per row (`moe_dispatch_block`, `moe_expert_block`).
    Block,
    /// A warp per row (`moe_dispatch_warp`, `moe_expert_warp`).
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

/// How token rows travel to the experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Dispatch {
    /// As bf16, unchanged.
    Bf16,
    /// Quantized to fp8 (E4M3) with one f32 scale per 128 elements, dequantized by the
    /// expert.
    Fp8,
}

impl fmt::Display for Dispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dispatch::Bf16 => "bf16",
            Dispatch::Fp8 => "fp8",
        })
    }
}

/// DeepEP's benchmark sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// The normal (prefill) path: 4096 tokens per PE, hidden 7168, top-8.
    DeepepNormal,
    /// The low-latency (decode) path: 128 tokens per PE, hidden 7168, top-8.
    DeepepLowLatency,
}

/// Which paths to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// The device path and the baseline.
    Both,
    /// Only the device-initiated path.
    Device,
    /// Only the host alltoall baseline.
    Baseline,
}

/// Device-initiated MoE token dispatch and combine, against a host alltoall baseline.
///
/// Each PE owns T tokens of H bf16 elements. A seeded, skewed (Zipf-like) router sends
/// every token to k distinct experts out of E, spread evenly over the PEs, each choice with
/// an f32 weight. The device path runs three kernels per PE with no host round trip
/// between them: dispatch (each block counts its choices per expert in shared memory,
/// reserves its run of tokens per expert with one atomic_fetch_add on the expert's PE,
/// puts the rows straight to PEs it maps, as bf16 or quantized to fp8, and one batch per
/// run to the others, then hands each PE its run descriptors and a signal), expert (takes
/// the source PEs as they finish, applies expert e's function bf16(x*s_e+b_e), returns
/// each run with one put_signal_nbi) and combine (waits for every row, weighted sum in
/// f32, rounded to bf16 once). With --deterministic a count exchange comes first and every
/// expert's slots follow (source PE, token) order. The baseline does the same with host collectives: counts
/// alltoall, payload alltoall, host expert function, alltoall back, host combine. Every
/// step of both is checked bit for bit against a host reference (fp8 also within its
/// error bound of bf16); timings are medians over the iterations, the slowest PE per step.
/// Without --pes or a launcher, 4 PEs are self-launched.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "moe_dispatch",
    version,
    allow_negative_numbers = true,
    after_help = "Runs on CPU PEs, or on GPU PEs with the same kernels' PTX when \
                  SYMMEM_DEVICE=cuda (or auto with a GPU). SYMMEM_SIMULATE_NODES=2 splits the PEs \
                  into two nodes joined by sockets."
)]
pub struct Params {
    /// The job's PEs.
    #[command(flatten)]
    pub launch: SelfLaunchArgs,
    /// Tokens per PE, one run per value
    #[arg(long, value_name = "T[,T...]", value_delimiter = ',', default_value = "256,1024", value_parser = positive)]
    pub tokens: Vec<usize>,
    /// Experts in total, divisible by the PEs, one run per value
    #[arg(long, value_name = "E[,E...]", value_delimiter = ',', default_value = "8,16", value_parser = positive)]
    pub experts: Vec<usize>,
    /// bf16 elements per token: even, and a multiple of 128 with --dispatch fp8
    #[arg(long, value_name = "H", default_value = "128", value_parser = positive)]
    pub hidden: usize,
    /// Experts per token, at most E
    #[arg(long, value_name = "K", default_value = "2", value_parser = positive)]
    pub top_k: usize,
    /// Token slots per expert; auto = T x PEs, which no routing overflows
    #[arg(long, value_name = "N|auto", default_value = "auto", value_parser = capacity)]
    pub capacity: Capacity,
    /// When an expert receives more than its capacity: drop the extra tokens (counted,
    /// left out of their token's sum, checked) or fail the step naming the expert, its PE
    /// and the capacity
    #[arg(long, value_name = "drop|error", value_enum, default_value = "error")]
    pub on_overflow: Overflow,
    /// Zipf exponent of expert popularity, 0 = uniform
    #[arg(long, value_name = "S", default_value = "1.0", value_parser = skew)]
    pub skew: f64,
    /// Seed of the routing and the token values
    #[arg(long, value_name = "N", default_value = "1")]
    pub seed: u64,
    /// Timed iterations per run, after one warm-up
    #[arg(long, value_name = "N", default_value = "5", value_parser = positive)]
    pub iters: usize,
    /// How token rows travel: bf16, or fp8 (E4M3) with one f32 scale per 128 elements
    #[arg(long, value_name = "bf16|fp8", value_enum, default_value = "bf16")]
    pub dispatch: Dispatch,
    /// DeepEP's sizes: sets --tokens, --hidden 7168 and --top-k 8 (normal: 4096 tokens
    /// per PE; low latency: 128)
    #[arg(long, value_name = "deepep-normal|deepep-low-latency", value_enum)]
    pub preset: Option<Preset>,
    /// Group that moves each token row: picks the kernels' warp or block instance
    #[arg(long, value_name = "block|warp", value_enum, default_value = "block")]
    pub scope: Scope,
    /// Blocks per kernel launch (default: 1 on CPU PEs, 32 on GPU PEs)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub blocks: Option<u32>,
    /// Threads per block, 1..=1024 (default: 8 on CPU PEs, where every block-wide step
    /// costs a switch per thread; 256 on GPU PEs)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Deterministic device path: every expert receives its tokens in (source PE, token)
    /// order, at offsets from a count exchange and prefix sums instead of atomic slot
    /// reservations, so the receive buffers, the dropped tokens and the results are the
    /// same bits in every run; checked against a host model of that order, and every
    /// step's results against the first's. Either way each PE prints a digest of its
    /// first step's results per device run, to compare runs
    #[arg(long)]
    pub deterministic: bool,
    /// Which paths to run
    #[arg(
        long,
        value_name = "both|device|baseline",
        value_enum,
        default_value = "both"
    )]
    pub mode: Mode,
    /// Also print one JSON object per run on stdout
    #[arg(long)]
    pub json: bool,
}

/// `--capacity`: token slots per expert, or `None` for tokens × PEs (`auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity(pub Option<usize>);

fn positive(v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("expected a number, got {v:?}")),
    }
}

fn capacity(v: &str) -> Result<Capacity, String> {
    if v == "auto" {
        return Ok(Capacity(None));
    }
    positive(v).map(|n| Capacity(Some(n)))
}

fn skew(v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| format!("must be a finite number >= 0, got {v}"))
}

impl Params {
    /// Checks the parameters against the job's `n_pes`: the errors name the flag.
    pub fn validate(&self, n_pes: usize) -> Result<(), String> {
        if let Some(why) = hidden_error(self.hidden, self.dispatch == Dispatch::Fp8) {
            return Err(format!("--hidden {}: {why}", self.hidden));
        }
        if n_pes > MAX_PES {
            return Err(format!(
                "{n_pes} PEs are more than the kernels' shared arrays hold ({MAX_PES})"
            ));
        }
        if let Some(c) = self.capacity.0.filter(|&c| c > u32::MAX as usize) {
            return Err(format!("--capacity {c} does not fit the 32-bit slot index"));
        }
        for &e in &self.experts {
            if e > MAX_EXPERTS {
                return Err(format!(
                    "--experts {e} is more than the kernels' shared arrays hold ({MAX_EXPERTS})"
                ));
            }
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

    /// Applies `--preset`, which sets the tokens, hidden size and top-k.
    pub fn apply_preset(&mut self) {
        let tokens = match self.preset {
            None => return,
            Some(Preset::DeepepNormal) => 4096,
            Some(Preset::DeepepLowLatency) => 128,
        };
        self.tokens = vec![tokens];
        self.hidden = 7168;
        self.top_k = 8;
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
        self.capacity.0.unwrap_or(tokens * n_pes)
    }
}
