//! `symmem-perf`: latency and bandwidth of the host API between PE 0 and PE 1, in the
//! style of NVSHMEM's perftests.
//!
//! ```text
//! cargo run --release --bin symmem-perf -- --pes 2            # tables
//! cargo run --release --bin symmem-perf -- --pes 2 --json     # one JSON object per line
//! cargo run --release --bin symmem-perf -- --pes 2 --quick    # smoke run, a few seconds
//! ```
//!
//! PE 0 initiates every operation, PE 1 is the target (and answers ping-pongs), further
//! PEs only join the barriers. Every PE runs the same sequence of collective calls; only
//! PE 0 prints. Each (metric, size) point is warmed up, then timed over several
//! repetitions of many iterations; the reported value is the median repetition.
//!
//! Adding a metric is one entry in [`BENCHES`] and one run function; a new initiator
//! (device thread, warp, block) is a new [`Initiator`] variant whose benches go in the
//! same table.

use std::cell::RefCell;
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use symmem::{Cmp, Runtime, SelfLaunch, SignalOp, SymBuf};
use symmem_bench_kernels as kernels;

/// Largest transfer measured.
const MAX_SIZE: usize = 16 << 20;

/// Transfer sizes of the sweeps: 8 B to 16 MiB in ×8 steps.
const SWEEP: &[usize] = &[8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, MAX_SIZE];

/// Sizes of the data-moving collectives: 64 B to 2 MiB in ×8 steps (at least 8 bytes per
/// PE's block with up to 8 PEs).
const COLLECTIVE_SWEEP: &[usize] = &[64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20];

/// Sizes of the reduction: 8 B to 32 KiB in ×8 steps.
const REDUCE_SIZES: &[usize] = &[8, 64, 512, 4 << 10, 32 << 10];

/// The size of the single-word metrics.
const WORD: &[usize] = &[8];

/// Size of one element of the benchmark buffers.
const ELEM: usize = std::mem::size_of::<u64>();

/// Fewest timed iterations per repetition, however large the transfer.
const MIN_ITERS: usize = 8;

/// Default iterations per repetition (the cap for small transfers).
const DEFAULT_ITERS: usize = 100_000;

/// Default byte budget per repetition: large transfers run `bytes / size` iterations.
const DEFAULT_BYTES: usize = 256 << 20;

/// Default number of timed repetitions per point.
const DEFAULT_REPS: usize = 11;

/// The `--help` text (the metric list is appended from [`BENCHES`]).
const USAGE: &str = "\
usage: symmem-perf --pes N [--transport p2p|socket|ib] [--json] [--quick] [--iters N] [--bytes N] [--reps N] [--only M,M…]

Measures symmem's host API between PE 0 (initiator) and PE 1 (target); launches its own
N local PEs with --pes (at least 2), or runs under symrun / mpirun.

  --pes N      start N PEs of this program (self-launch)
  --transport T  p2p (default: PE 1's heap is mapped) or socket / ib (every PE its own
               simulated node, so PE 0 reaches PE 1 over that transport; host initiator)
  --json       one JSON object per line: metric, size, value, unit, transport, initiator
  --quick      smoke run: few iterations and repetitions (defaults below still overridable)
  --iters N    most timed iterations per repetition (default 100000; quick 1000)
  --bytes N    byte budget per repetition: sizes above bytes/iters run bytes/size
               iterations, at least 8 (default 268435456; quick 4194304)
  --reps N     timed repetitions per point; the median is reported (default 11; quick 3)
  --only M,M   run only the named metrics (a metric's baseline, if it has one, runs and
               prints with it: the two are measured interleaved, repetition by repetition)
  --help       this text

Every destination page is written before the first measurement, and every point is
warmed up (a tenth of the iterations, at least 2). Transfer buffers are page-aligned.
Values: latency in µs per operation (the one-way time for ping-pongs), bandwidth in GB/s
(10^9 bytes per second).

metrics:";

/// Who issues the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Initiator {
    /// A host thread of PE 0.
    Host,
    /// One thread of a kernel on the CPU executor.
    Thread,
    /// A 32-thread warp of a kernel on the CPU executor (`_warp` operations).
    Warp,
    /// A 64-thread block of a kernel (`_block` operations).
    Block,
    /// Every block of a many-block grid (bandwidth rows on GPUs).
    Grid,
    /// Stream-ordered operations (`*_on_stream`) queued by a host thread.
    Stream,
}

impl Initiator {
    /// The name used in the JSON output.
    fn name(self) -> &'static str {
        match self {
            Initiator::Host => "host",
            Initiator::Thread => "thread",
            Initiator::Warp => "warp",
            Initiator::Block => "block",
            Initiator::Grid => "grid",
            Initiator::Stream => "stream",
        }
    }

    /// Threads per block of the kernel launch, and the kernels' `scope` argument.
    fn launch(self) -> (u32, u32) {
        match self {
            Initiator::Host | Initiator::Thread | Initiator::Stream => (1, kernels::THREAD),
            Initiator::Warp => (32, kernels::WARP),
            Initiator::Block => (64, kernels::BLOCK),
            Initiator::Grid => (GRID_THREADS, kernels::BLOCK),
        }
    }
}

/// How the operations reach PE 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    /// PE 1's heap is mapped into PE 0: loads, stores and atomics.
    P2p,
    /// TCP sockets.
    Socket,
    /// ibverbs.
    Ib,
}

impl Transport {
    /// The transport the runtime uses from this PE to `peer`.
    fn detect(rt: &Runtime, buf: &SymBuf<u64>, peer: usize) -> symmem::Result<Self> {
        if rt.ptr(buf, peer)?.is_some() {
            return Ok(Transport::P2p);
        }
        Ok(match rt.config().remote_transport {
            symmem::config::RemoteTransport::Ib => Transport::Ib,
            symmem::config::RemoteTransport::Socket | symmem::config::RemoteTransport::Auto => {
                Transport::Socket
            }
        })
    }

    /// The name used in the JSON output.
    fn name(self) -> &'static str {
        match self {
            Transport::P2p => "p2p",
            Transport::Socket => "socket",
            Transport::Ib => "ib",
        }
    }
}

/// What a benchmark's timing means.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Microseconds per operation; one iteration is `ops` operations' worth of latency
    /// (2 for a ping-pong round trip, so the value is the one-way time).
    Latency {
        /// Latencies per iteration.
        ops: f64,
    },
    /// Bytes moved per second, in GB/s; one iteration moves `size` bytes.
    Bandwidth,
}

impl Kind {
    /// The value of one repetition of `iters` iterations at `size` bytes.
    fn value(self, elapsed: Duration, iters: usize, size: usize) -> f64 {
        let secs = elapsed.as_secs_f64();
        match self {
            Kind::Latency { ops } => secs * 1e6 / (iters as f64 * ops),
            Kind::Bandwidth => (size * iters) as f64 / secs / 1e9,
        }
    }

    /// The unit of [`Self::value`].
    fn unit(self) -> &'static str {
        match self {
            Kind::Latency { .. } => "us",
            Kind::Bandwidth => "GB/s",
        }
    }

    /// The column heading of the human-readable table.
    fn heading(self) -> &'static str {
        match self {
            Kind::Latency { .. } => "latency (µs)",
            Kind::Bandwidth => "bandwidth (GB/s)",
        }
    }
}

/// Which kind of PE a benchmark runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum On {
    /// CPU and GPU PEs.
    Both,
    /// CPU PEs only (host-memory baselines).
    Cpu,
    /// GPU PEs only (device-memory baselines, grid bandwidth).
    Gpu,
}

impl On {
    /// Whether a benchmark marked so runs on this kind of PE.
    fn includes(self, gpu: bool) -> bool {
        match self {
            On::Both => true,
            On::Cpu => !gpu,
            On::Gpu => gpu,
        }
    }
}

/// Blocks of the grid bandwidth kernel: enough to fill an H100's 132 SMs twice.
const GRID_BLOCKS: u32 = 264;
/// Threads per block of the grid bandwidth kernel.
const GRID_THREADS: u32 = 1024;

/// One benchmark: a metric measured at some sizes by one run function.
struct Bench {
    /// Which kind of PE it runs on.
    on: On,
    /// The metric name in the output.
    metric: &'static str,
    /// Who issues the operations.
    initiator: Initiator,
    /// Latency or bandwidth.
    kind: Kind,
    /// Transfer sizes in bytes (multiples of 8).
    sizes: &'static [usize],
    /// A metric measured earlier whose value at the same size the human table shows a
    /// ratio against.
    baseline: Option<&'static str>,
    /// Most timed iterations per repetition, below the global limit: group operations on
    /// the CPU executor synchronize OS threads every iteration and need fewer.
    max_iters: Option<usize>,
    /// One line for `--help`.
    about: &'static str,
    /// Runs `iters` iterations at `size` bytes on every PE (collectively) and returns the
    /// time PE 0 measured (zero on other PEs).
    run: fn(&Ctx, usize, usize) -> symmem::Result<Duration>,
}

/// Every benchmark, in the order run and printed.
const BENCHES: &[Bench] = &[
    Bench {
        on: On::Cpu,
        metric: "flag_pingpong_latency",
        initiator: Initiator::Host,
        kind: Kind::Latency { ops: 2.0 },
        sizes: WORD,
        baseline: None,
        max_iters: None,
        about: "baseline: bare Release-store / Acquire-spin ping-pong on the same heap words, no runtime calls; round trip / 2",
        run: flag_pingpong,
    },
    Bench {
        on: On::Both,
        metric: "put_signal_pingpong_latency",
        initiator: Initiator::Host,
        kind: Kind::Latency { ops: 2.0 },
        sizes: WORD,
        max_iters: None,
        about: "put_signal to the peer, which waits on the signal and answers the same way; round trip / 2",
        baseline: Some("flag_pingpong_latency"),
        run: put_signal_pingpong,
    },
    Bench {
        on: On::Both,
        metric: "put_latency",
        initiator: Initiator::Host,
        kind: Kind::Latency { ops: 1.0 },
        sizes: SWEEP,
        baseline: None,
        max_iters: None,
        about: "put, then quiet",
        run: put_latency,
    },
    Bench {
        on: On::Both,
        metric: "get_latency",
        initiator: Initiator::Host,
        kind: Kind::Latency { ops: 1.0 },
        sizes: SWEEP,
        baseline: None,
        max_iters: None,
        about: "blocking get",
        run: get_latency,
    },
    Bench {
        on: On::Both,
        metric: "p_latency",
        initiator: Initiator::Host,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: None,
        about: "p of one u64, then quiet",
        run: p_latency,
    },
    Bench {
        on: On::Both,
        metric: "g_latency",
        initiator: Initiator::Host,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: None,
        about: "g of one u64",
        run: g_latency,
    },
    Bench {
        on: On::Both,
        metric: "atomic_fetch_add_latency",
        initiator: Initiator::Host,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: None,
        about: "atomic_fetch_add on a u64 of the peer",
        run: atomic_fetch_add_latency,
    },
    Bench {
        on: On::Cpu,
        metric: "memcpy_bw",
        initiator: Initiator::Host,
        kind: Kind::Bandwidth,
        sizes: SWEEP,
        baseline: None,
        max_iters: None,
        about: "baseline: one core's memcpy between two private, pre-touched buffers of PE 0",
        run: memcpy_bw,
    },
    Bench {
        on: On::Both,
        metric: "put_bw",
        initiator: Initiator::Host,
        kind: Kind::Bandwidth,
        sizes: SWEEP,
        baseline: Some("memcpy_bw"),
        max_iters: None,
        about: "back-to-back put_nbi of the same buffer, then one quiet",
        run: put_bw,
    },
    Bench {
        on: On::Both,
        metric: "barrier_all_latency",
        initiator: Initiator::Host,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: None,
        about: "barrier_all on every PE (size is not meaningful)",
        run: barrier_all_latency,
    },
    Bench {
        on: On::Cpu,
        metric: "alltoall_bw",
        initiator: Initiator::Host,
        kind: Kind::Bandwidth,
        sizes: COLLECTIVE_SWEEP,
        baseline: None,
        max_iters: None,
        about: "team_world alltoall of u64s: size is what each PE sends in all (one block per PE, its own included)",
        run: alltoall_bw,
    },
    Bench {
        on: On::Cpu,
        metric: "fcollect_bw",
        initiator: Initiator::Host,
        kind: Kind::Bandwidth,
        sizes: COLLECTIVE_SWEEP,
        baseline: None,
        max_iters: None,
        about: "team_world fcollect of u64s: size is what each PE receives (its block times the PEs)",
        run: fcollect_bw,
    },
    Bench {
        on: On::Cpu,
        metric: "reduce_latency",
        initiator: Initiator::Host,
        kind: Kind::Latency { ops: 1.0 },
        sizes: REDUCE_SIZES,
        baseline: None,
        max_iters: None,
        about: "team_world sum reduce of size bytes of u64s into every PE",
        run: reduce_latency,
    },
    Bench {
        on: On::Both,
        metric: "barrier_all_latency",
        initiator: Initiator::Block,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device block: team_barrier_block on TEAM_WORLD by every PE, in a kernel loop",
        run: device_team_barrier,
    },
    Bench {
        on: On::Both,
        metric: "reduce_latency",
        initiator: Initiator::Block,
        kind: Kind::Latency { ops: 1.0 },
        sizes: REDUCE_SIZES,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device block: reduce_block (sum) on TEAM_WORLD of size bytes of u64s by every PE, in a kernel loop",
        run: device_team_reduce,
    },
    Bench {
        on: On::Both,
        metric: "alltoall_bw",
        initiator: Initiator::Block,
        kind: Kind::Bandwidth,
        sizes: COLLECTIVE_SWEEP,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device block: alltoall_block on TEAM_WORLD of u64s by every PE, in a kernel loop; size as the host row",
        run: device_team_alltoall,
    },
    Bench {
        on: On::Both,
        metric: "fcollect_bw",
        initiator: Initiator::Block,
        kind: Kind::Bandwidth,
        sizes: COLLECTIVE_SWEEP,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device block: fcollect_block on TEAM_WORLD of u64s by every PE, in a kernel loop; size as the host row",
        run: device_team_fcollect,
    },
    Bench {
        on: On::Both,
        metric: "put_signal_pingpong_latency",
        initiator: Initiator::Thread,
        kind: Kind::Latency { ops: 2.0 },
        sizes: WORD,
        baseline: None,
        max_iters: None,
        about: "device thread: put_signal + signal_wait_until ping-pong in kernels on both PEs",
        run: device_pingpong::<{ Initiator::Thread as u8 }>,
    },
    Bench {
        on: On::Both,
        metric: "put_signal_pingpong_latency",
        initiator: Initiator::Warp,
        kind: Kind::Latency { ops: 2.0 },
        sizes: WORD,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device warp: put_signal_warp ping-pong (lane 0 waits, then the warp syncs)",
        run: device_pingpong::<{ Initiator::Warp as u8 }>,
    },
    Bench {
        on: On::Both,
        metric: "put_signal_pingpong_latency",
        initiator: Initiator::Block,
        kind: Kind::Latency { ops: 2.0 },
        sizes: WORD,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device block: put_signal_block ping-pong (thread 0 waits, then the block syncs)",
        run: device_pingpong::<{ Initiator::Block as u8 }>,
    },
    Bench {
        on: On::Both,
        metric: "put_latency",
        initiator: Initiator::Thread,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: None,
        about: "device thread: put then quiet, in a kernel loop",
        run: device_put::<{ Initiator::Thread as u8 }>,
    },
    Bench {
        on: On::Both,
        metric: "put_latency",
        initiator: Initiator::Warp,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device warp: put_warp then quiet, in a kernel loop",
        run: device_put::<{ Initiator::Warp as u8 }>,
    },
    Bench {
        on: On::Both,
        metric: "put_latency",
        initiator: Initiator::Block,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device block: put_block then quiet, in a kernel loop",
        run: device_put::<{ Initiator::Block as u8 }>,
    },
    Bench {
        on: On::Both,
        metric: "get_latency",
        initiator: Initiator::Thread,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: None,
        about: "device thread: get, in a kernel loop",
        run: device_get::<{ Initiator::Thread as u8 }>,
    },
    Bench {
        on: On::Both,
        metric: "get_latency",
        initiator: Initiator::Warp,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device warp: get_warp, in a kernel loop",
        run: device_get::<{ Initiator::Warp as u8 }>,
    },
    Bench {
        on: On::Both,
        metric: "get_latency",
        initiator: Initiator::Block,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: Some(GROUP_ITERS),
        about: "device block: get_block, in a kernel loop",
        run: device_get::<{ Initiator::Block as u8 }>,
    },
    Bench {
        on: On::Both,
        metric: "atomic_fetch_add_latency",
        initiator: Initiator::Thread,
        kind: Kind::Latency { ops: 1.0 },
        sizes: WORD,
        baseline: None,
        max_iters: None,
        about: "device thread: atomic_fetch_add, in a kernel loop (AMOs have no warp/block forms)",
        run: device_fetch_add,
    },
    Bench {
        on: On::Both,
        metric: "put_signal_pingpong_latency",
        initiator: Initiator::Stream,
        kind: Kind::Latency { ops: 2.0 },
        sizes: WORD,
        baseline: None,
        max_iters: Some(STREAM_ITERS),
        about: "stream-ordered: put_signal_on_stream + signal_wait_until_on_stream ping-pong, queued by the host, one stream sync at the end",
        run: stream_pingpong,
    },
    Bench {
        on: On::Gpu,
        metric: "dtod_bw",
        initiator: Initiator::Host,
        kind: Kind::Bandwidth,
        sizes: SWEEP,
        baseline: None,
        max_iters: None,
        about: "baseline: cuMemcpyDtoD between two buffers of PE 0's GPU (the limit a put on one GPU can reach)",
        run: dtod_bw,
    },
    Bench {
        on: On::Gpu,
        metric: "put_bw",
        initiator: Initiator::Grid,
        kind: Kind::Bandwidth,
        sizes: SWEEP,
        baseline: Some("dtod_bw"),
        max_iters: None,
        about: "device grid (264 blocks × 1024 threads): each block put_block's its share, then quiet_block; back to back",
        run: device_put_bw,
    },
];

/// Most iterations of a stream ping-pong repetition: each is two kernels on a stream.
const STREAM_ITERS: usize = 2_000;

/// What this PE does in the point-to-point benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// PE 0: issues the operations and times them.
    Initiator,
    /// PE 1: the target; answers ping-pongs.
    Target,
    /// Any further PE: joins the collectives only.
    Idle,
}

/// Everything the run functions share.
struct Ctx<'a> {
    /// The runtime.
    rt: &'a Runtime,
    /// This PE's part.
    role: Role,
    /// The other PE of the pair (PE 1 for PE 0, PE 0 for everyone else).
    peer: usize,
    /// The target of single-word operations.
    word: SymBuf<u64>,
    /// The ping-pong signal.
    sig: SymBuf<u64>,
    /// The target of transfers, [`MAX_SIZE`] bytes.
    big: SymBuf<u64>,
    /// Local source of transfers, [`MAX_SIZE`] bytes, pre-touched.
    src: Vec<Page>,
    /// Local destination of gets and of the memcpy baseline, pre-touched.
    scratch: RefCell<Vec<Page>>,
    /// Symmetric source (and device get destination) of transfers, [`MAX_SIZE`] bytes:
    /// what device code on a GPU PE can read, where `src` is host memory.
    gsrc: SymBuf<u64>,
    /// The benchmark kernels, loaded for this PE (PTX on a GPU PE).
    module: symmem::Module,
    /// The stream of the stream-ordered rows.
    stream: symmem::Stream,
}

/// One page of a local buffer. Local buffers are vectors of pages, so they start on a
/// page boundary like `big` (allocated page-aligned): a put and the memcpy baseline then
/// copy between the same relative alignments. With different offsets within the page,
/// loads alias in-flight stores (4K aliasing), which cost a third of the 4 KiB bandwidth
/// on the machine measured and would have compared the two unfairly.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(4096))]
struct Page([u64; PAGE / ELEM]);

/// Bytes per [`Page`].
const PAGE: usize = 4096;

/// `MAX_SIZE` bytes of pages filled with `byte`; a non-zero fill writes (pre-touches)
/// every page, where zeroed memory may stay unmapped.
fn pages(byte: u8) -> Vec<Page> {
    vec![Page([u64::from_ne_bytes([byte; ELEM]); PAGE / ELEM]); MAX_SIZE / PAGE]
}

/// The first `size` bytes of `pages` as u64 elements.
fn words(pages: &[Page], size: usize) -> &[u64] {
    &bytemuck::cast_slice(pages)[..size / ELEM]
}

/// The first `size` bytes of `pages` as mutable u64 elements.
fn words_mut(pages: &mut [Page], size: usize) -> &mut [u64] {
    &mut bytemuck::cast_slice_mut(pages)[..size / ELEM]
}

/// Times `iters` calls of `op` (given the iteration number).
#[inline(always)]
fn timed(
    iters: usize,
    mut op: impl FnMut(usize) -> symmem::Result<()>,
) -> symmem::Result<Duration> {
    let t0 = Instant::now();
    for i in 0..iters {
        op(i)?;
    }
    Ok(t0.elapsed())
}

/// The floor under `put_signal_pingpong`: PE 0 and PE 1 bounce a counter through the
/// same signal words with plain atomics on the mapped heaps, bypassing the runtime.
/// Busy-waits without a limit: if the peer dies, the launcher ends the job.
fn flag_pingpong(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    let rt = c.rt;
    rt.atomic_set(c.sig.at(0), 0, rt.my_pe())?;
    rt.barrier_all()?;
    if c.role == Role::Idle {
        return Ok(Duration::ZERO);
    }
    let word = |pe: usize| -> symmem::Result<&AtomicU64> {
        let p = rt.ptr(&c.sig, pe)?.ok_or(symmem::Error::InvalidArgument {
            op: "flag_pingpong_latency",
            reason: format!("PE {pe}'s heap is not mapped (the baseline needs P2P)"),
        })?;
        // SAFETY: the pointer addresses the live, 8-byte aligned signal word of a mapped
        // heap that outlives `rt`'s borrow; every PE accesses it only atomically.
        Ok(unsafe { AtomicU64::from_ptr(p.as_ptr()) })
    };
    let (mine, theirs) = (word(rt.my_pe())?, word(c.peer)?);
    let wait = |seq: u64| {
        while mine.load(Ordering::Acquire) < seq {
            std::hint::spin_loop();
        }
    };
    match c.role {
        Role::Initiator => timed(iters, |i| {
            let seq = i as u64 + 1;
            theirs.store(seq, Ordering::Release);
            wait(seq);
            Ok(())
        }),
        _ => {
            for i in 0..iters {
                let seq = i as u64 + 1;
                wait(seq);
                theirs.store(seq, Ordering::Release);
            }
            Ok(Duration::ZERO)
        }
    }
}

/// PE 0 puts `size` bytes with a signal; PE 1 waits for the signal and answers alike.
fn put_signal_pingpong(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let rt = c.rt;
    let src = words(&c.src, size);
    // Each run counts from 1 again; the barrier keeps the reset from overwriting a signal
    // the peer already sent.
    rt.atomic_set(c.sig.at(0), 0, rt.my_pe())?;
    rt.barrier_all()?;
    match c.role {
        Role::Initiator => timed(iters, |i| {
            let seq = i as u64 + 1;
            rt.put_signal(c.big.at(0), src, c.sig.at(0), seq, SignalOp::Set, c.peer)?;
            rt.signal_wait_until(c.sig.at(0), Cmp::Ge, seq)?;
            Ok(())
        }),
        Role::Target => {
            for i in 0..iters {
                let seq = i as u64 + 1;
                rt.signal_wait_until(c.sig.at(0), Cmp::Ge, seq)?;
                rt.put_signal(c.big.at(0), src, c.sig.at(0), seq, SignalOp::Set, c.peer)?;
            }
            Ok(Duration::ZERO)
        }
        Role::Idle => Ok(Duration::ZERO),
    }
}

/// PE 0 puts `size` bytes and quiets, one at a time.
fn put_latency(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let src = words(&c.src, size);
    timed(iters, |_| {
        c.rt.put(c.big.at(0), black_box(src), c.peer)?;
        c.rt.quiet()
    })
}

/// PE 0 gets `size` bytes, one at a time.
fn get_latency(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let mut scratch = c.scratch.borrow_mut();
    let dst = words_mut(&mut scratch, size);
    timed(iters, |_| {
        c.rt.get(c.big.at(0), dst, c.peer)?;
        black_box(&mut *dst);
        Ok(())
    })
}

/// PE 0 stores one u64 with `p` and quiets.
fn p_latency(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    timed(iters, |i| {
        c.rt.p(c.word.at(0), i as u64, c.peer)?;
        c.rt.quiet()
    })
}

/// PE 0 loads one u64 with `g`.
fn g_latency(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    timed(iters, |_| {
        black_box(c.rt.g(c.word.at(0), c.peer)?);
        Ok(())
    })
}

/// PE 0 fetch-adds to one u64 of PE 1.
fn atomic_fetch_add_latency(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    timed(iters, |_| {
        black_box(c.rt.atomic_fetch_add(c.word.at(0), 1u64, c.peer)?);
        Ok(())
    })
}

/// PE 0 copies `size` bytes between two private buffers: the bandwidth a put could reach.
fn memcpy_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let src = words(&c.src, size);
    let mut scratch = c.scratch.borrow_mut();
    let dst = words_mut(&mut scratch, size);
    timed(iters, |_| {
        // black_box on both sides keeps the repeated identical copies from being merged.
        black_box(&mut *dst).copy_from_slice(black_box(src));
        Ok(())
    })
}

/// PE 0 issues `iters` nonblocking puts of `size` bytes, then one quiet.
fn put_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let src = words(&c.src, size);
    let t0 = Instant::now();
    for _ in 0..iters {
        c.rt.put_nbi(c.big.at(0), black_box(src), c.peer)?;
    }
    c.rt.quiet()?;
    Ok(t0.elapsed())
}

/// Every PE runs `iters` barriers; PE 0's time is reported.
fn barrier_all_latency(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    timed(iters, |_| c.rt.barrier_all())
}

/// Elements per PE's block of a collective moving `size` bytes in all (at least one).
fn block_elems(c: &Ctx, size: usize) -> usize {
    (size / ELEM / c.rt.n_pes()).max(1)
}

/// Every PE runs `iters` alltoalls of `size` bytes from `gsrc` into `big`.
fn alltoall_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world();
    let nelems = block_elems(c, size);
    timed(iters, |_| team.alltoall(&c.big, &c.gsrc, nelems))
}

/// Every PE runs `iters` fcollects of `size` bytes in all from `gsrc` into `big`.
fn fcollect_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world();
    let nelems = block_elems(c, size);
    timed(iters, |_| team.fcollect(&c.big, &c.gsrc, nelems))
}

/// Every PE runs `iters` sum reductions of `size` bytes of `gsrc` into `big`.
fn reduce_latency(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world();
    let nelems = size / ELEM;
    timed(iters, |_| {
        team.reduce(&c.big, &c.gsrc, nelems, symmem::collectives::Sum)
    })
}

/// Timed iterations of warp and block benchmarks: each iteration synchronizes 32 or 64
/// kernel threads (fibers) on the CPU executor.
const GROUP_ITERS: usize = 500;

/// The initiator a device benchmark's const parameter names.
fn device_initiator(code: u8) -> Initiator {
    [Initiator::Thread, Initiator::Warp, Initiator::Block]
        .into_iter()
        .find(|i| *i as u8 == code)
        .expect("device benchmarks name a device initiator")
}

/// A symmetric address of this PE's copy of `buf`, for kernel arguments.
fn sym(c: &Ctx, buf: &SymBuf<u64>) -> symmem::Result<*mut u64> {
    let p = c.rt.ptr(buf, c.rt.my_pe())?;
    Ok(p.expect("a PE's own heap is always mapped").as_ptr())
}

/// Times one launch of `kernel` from the benchmark module with the initiator's block size
/// on this PE (a GPU launch on a GPU PE, the CPU executor otherwise).
fn time_launch<A: symmem::device::KernelArgs>(
    c: &Ctx,
    initiator: Initiator,
    kernel: symmem::device::Kernel<A>,
    args: A,
) -> symmem::Result<Duration> {
    let (threads, _) = initiator.launch();
    let blocks = if initiator == Initiator::Grid {
        GRID_BLOCKS
    } else {
        1
    };
    let t0 = Instant::now();
    // SAFETY: the kernels get symmetric addresses of live allocations of `c` and (on CPU
    // PEs) local buffers of `c` that outlive the launch, with sizes within them.
    unsafe { c.rt.launch(&c.module, kernel, blocks, threads, args)? };
    Ok(t0.elapsed())
}

/// The source of device transfers: host memory on a CPU PE (as the host rows use), the
/// symmetric copy on a GPU PE (device code cannot read host memory there).
fn device_src(c: &Ctx, size: usize) -> symmem::Result<*const u64> {
    Ok(if c.rt.is_gpu() {
        sym(c, &c.gsrc)?.cast_const()
    } else {
        words(&c.src, size).as_ptr()
    })
}

/// A kernel on PE 0 puts `size` bytes and quiets, `iters` times.
fn device_put<const I: u8>(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let initiator = device_initiator(I);
    let (_, scope) = initiator.launch();
    let (dst, src, peer) = (sym(c, &c.big)?, device_src(c, size)?, c.peer as u32);
    time_launch(
        c,
        initiator,
        kernels::bench_put::KERNEL,
        (dst, src, size / ELEM, iters, peer, scope),
    )
}

/// A grid on PE 0 puts `size` bytes, `iters` times back to back.
fn device_put_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (dst, src, peer) = (sym(c, &c.big)?, device_src(c, size)?, c.peer as u32);
    time_launch(
        c,
        Initiator::Grid,
        kernels::bench_put_bw::KERNEL,
        (dst, src, size / ELEM, iters, peer),
    )
}

/// A kernel on PE 0 gets `size` bytes, `iters` times.
fn device_get<const I: u8>(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let initiator = device_initiator(I);
    let (_, scope) = initiator.launch();
    let mut scratch = c.scratch.borrow_mut();
    let dst = if c.rt.is_gpu() {
        sym(c, &c.gsrc)?
    } else {
        words_mut(&mut scratch, size).as_mut_ptr()
    };
    let (src, peer) = (sym(c, &c.big)?.cast_const(), c.peer as u32);
    time_launch(
        c,
        initiator,
        kernels::bench_get::KERNEL,
        (dst, src, size / ELEM, iters, peer, scope),
    )
}

/// A kernel thread on PE 0 fetch-adds to one u64 of PE 1, `iters` times.
fn device_fetch_add(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (word, peer) = (sym(c, &c.word)?, c.peer as u32);
    time_launch(
        c,
        Initiator::Thread,
        kernels::bench_fetch_add::KERNEL,
        (word, iters, peer),
    )
}

/// Every PE's kernel runs `iters` block-scope team barriers on TEAM_WORLD.
fn device_team_barrier(c: &Ctx, _size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_barrier::KERNEL,
        (team, iters, kernels::BLOCK),
    )
}

/// Every PE's kernel runs `iters` block-scope sum reductions of `size` bytes of `gsrc`
/// into `big` on TEAM_WORLD.
fn device_team_reduce(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?.cast_const());
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_reduce::KERNEL,
        (team, dst, src, size / ELEM, iters, kernels::BLOCK),
    )
}

/// Every PE's kernel runs `iters` block-scope alltoalls of `size` bytes in all from
/// `gsrc` into `big` on TEAM_WORLD.
fn device_team_alltoall(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?.cast_const());
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_alltoall::KERNEL,
        (team, dst, src, block_elems(c, size), iters, kernels::BLOCK),
    )
}

/// Every PE's kernel runs `iters` block-scope fcollects of `size` bytes in all from
/// `gsrc` into `big` on TEAM_WORLD.
fn device_team_fcollect(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let team = c.rt.team_world().device()?;
    let (dst, src) = (sym(c, &c.big)?, sym(c, &c.gsrc)?.cast_const());
    time_launch(
        c,
        Initiator::Block,
        kernels::bench_team_fcollect::KERNEL,
        (team, dst, src, block_elems(c, size), iters, kernels::BLOCK),
    )
}

/// Kernels on PE 0 and PE 1 ping-pong `size` bytes with a signal, `iters` round trips.
fn device_pingpong<const I: u8>(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let rt = c.rt;
    // Each run counts from 1 again; the barrier keeps the reset from overwriting a signal
    // the peer already sent.
    rt.atomic_set(c.sig.at(0), 0, rt.my_pe())?;
    rt.barrier_all()?;
    if c.role == Role::Idle {
        return Ok(Duration::ZERO);
    }
    let initiator = device_initiator(I);
    let (_, scope) = initiator.launch();
    let (dst, sig) = (sym(c, &c.big)?, sym(c, &c.sig)?);
    let (src, peer) = (device_src(c, size)?, c.peer as u32);
    let first = u32::from(c.role == Role::Initiator);
    let elapsed = time_launch(
        c,
        initiator,
        kernels::bench_pingpong::KERNEL,
        (dst, src, size / ELEM, sig, iters, peer, scope, first),
    )?;
    Ok(if c.role == Role::Initiator {
        elapsed
    } else {
        Duration::ZERO
    })
}

/// PE 0 and PE 1 ping-pong `size` bytes with stream-ordered put_signal and signal waits:
/// the host queues every operation, then synchronizes the stream once.
fn stream_pingpong(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    let rt = c.rt;
    rt.atomic_set(c.sig.at(0), 0, rt.my_pe())?;
    rt.barrier_all()?;
    if c.role == Role::Idle {
        return Ok(Duration::ZERO);
    }
    let n = size / ELEM;
    let t0 = Instant::now();
    for i in 0..iters {
        let seq = i as u64 + 1;
        let send = || {
            rt.put_signal_on_stream(
                c.big.at(0),
                c.gsrc.at(0),
                n,
                c.sig.at(0),
                seq,
                SignalOp::Set,
                c.peer,
                &c.stream,
            )
        };
        let wait = || rt.signal_wait_until_on_stream(c.sig.at(0), Cmp::Ge, seq, &c.stream);
        if c.role == Role::Initiator {
            send()?;
            wait()?;
        } else {
            wait()?;
            send()?;
        }
    }
    c.stream.synchronize()?;
    Ok(if c.role == Role::Initiator {
        t0.elapsed()
    } else {
        Duration::ZERO
    })
}

/// PE 0 copies `size` bytes between two buffers of its GPU with `cuMemcpyDtoD`.
fn dtod_bw(c: &Ctx, size: usize, iters: usize) -> symmem::Result<Duration> {
    if c.role != Role::Initiator {
        return Ok(Duration::ZERO);
    }
    let (dst, src) = (sym(c, &c.big)? as u64, sym(c, &c.gsrc)? as u64);
    let t0 = Instant::now();
    for _ in 0..iters {
        // SAFETY: two device buffers of this PE's context of at least `size` bytes each.
        let rc = unsafe {
            symmem::cudarc::driver::sys::cuMemcpyDtoDAsync_v2(dst, src, size, std::ptr::null_mut())
        };
        if rc != symmem::cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return Err(symmem::Error::InvalidArgument {
                op: "dtod_bw",
                reason: format!("cuMemcpyDtoDAsync failed: {rc:?}"),
            });
        }
    }
    // SAFETY: the default stream of the current context (the runtime bound it).
    let rc = unsafe { symmem::cudarc::driver::sys::cuStreamSynchronize(std::ptr::null_mut()) };
    if rc != symmem::cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        return Err(symmem::Error::InvalidArgument {
            op: "dtod_bw",
            reason: format!("cuStreamSynchronize failed: {rc:?}"),
        });
    }
    Ok(t0.elapsed())
}

/// Median, minimum and maximum over the repetitions of one point.
#[derive(Debug, Clone, Copy)]
struct Stats {
    /// The reported value.
    median: f64,
    /// The lowest repetition.
    min: f64,
    /// The highest repetition.
    max: f64,
}

impl Stats {
    /// Summarizes `values` (not empty).
    fn of(mut values: Vec<f64>) -> Stats {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Stats {
            median,
            min: values[0],
            max: values[n - 1],
        }
    }
}

/// One measured point.
struct Row {
    /// Metric name.
    metric: &'static str,
    /// Transfer size in bytes.
    size: usize,
    /// Summary of the repetitions.
    stats: Stats,
}

/// Command-line options.
#[derive(Debug, Clone)]
struct Options {
    /// Print JSON lines instead of tables.
    json: bool,
    /// Most timed iterations per repetition.
    iters: usize,
    /// Byte budget per repetition for large transfers.
    bytes: usize,
    /// Timed repetitions per point.
    reps: usize,
    /// Metrics to run; all if `None`.
    only: Option<Vec<String>>,
    /// `--transport`: the remote transport to measure instead of the P2P mapping.
    remote: Option<&'static str>,
}

impl Options {
    /// Timed iterations per repetition at `size` bytes.
    fn iters_for(&self, size: usize) -> usize {
        (self.bytes / size).clamp(MIN_ITERS, self.iters.max(MIN_ITERS))
    }

    /// Whether `metric` was selected.
    fn selected(&self, metric: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|m| m == metric))
    }
}

/// What the command line asks for.
enum Command {
    /// Print the usage text.
    Help,
    /// Measure.
    Run(Options),
}

/// Parses the arguments (without the program name). `--pes N` is accepted and ignored:
/// the self-launcher consumes it, but it stays in the arguments under symrun.
fn parse_args(args: &[String]) -> Result<Command, String> {
    let (mut json, mut quick) = (false, false);
    let (mut iters, mut bytes, mut reps, mut only) = (None, None, None, None);
    let mut remote = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("{name} needs a positive number"))
        };
        match arg.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--json" => json = true,
            "--quick" => quick = true,
            "--pes" => {
                number("--pes")?;
            }
            "--transport" => {
                remote = match it.next().map(String::as_str) {
                    Some("p2p") => None,
                    Some("socket") => Some("socket"),
                    Some("ib") => Some("ib"),
                    other => {
                        return Err(format!("--transport {other:?}: expected p2p, socket or ib"))
                    }
                }
            }
            "--iters" => iters = Some(number("--iters")?),
            "--bytes" => bytes = Some(number("--bytes")?),
            "--reps" => reps = Some(number("--reps")?),
            "--only" => {
                let list = it.next().ok_or("--only needs a list of metrics")?;
                let names: Vec<String> = list.split(',').map(str::to_string).collect();
                if let Some(bad) = names
                    .iter()
                    .find(|n| !BENCHES.iter().any(|b| b.metric == *n))
                {
                    return Err(format!("unknown metric {bad:?} (see --help)"));
                }
                only = Some(names);
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    Ok(Command::Run(Options {
        json,
        iters: iters.unwrap_or(if quick { 1_000 } else { DEFAULT_ITERS }),
        bytes: bytes.unwrap_or(if quick { 4 << 20 } else { DEFAULT_BYTES }),
        reps: reps.unwrap_or(if quick { 3 } else { DEFAULT_REPS }),
        only,
        remote,
    }))
}

/// `bytes` with a binary unit: `8 B`, `4 KiB`, `16 MiB`.
fn human_size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// Prints one benchmark's rows (PE 0 only): JSON lines or a table, the latter with the
/// ratio to `base`, the rows of its baseline measured alongside.
fn print_rows(
    bench: &Bench,
    rows: &[Row],
    base: &[Row],
    transport: Transport,
    device: &str,
    json: bool,
) {
    if json {
        for r in rows {
            println!(
                "{{\"metric\":\"{}\",\"size\":{},\"value\":{:.4},\"unit\":\"{}\",\"transport\":\"{}\",\"initiator\":\"{}\",\"device\":\"{}\"}}",
                r.metric,
                r.size,
                r.stats.median,
                bench.kind.unit(),
                transport.name(),
                bench.initiator.name(),
                device
            );
        }
        return;
    }
    println!();
    println!(
        "{} — {} ({}, {}, {device})",
        bench.metric,
        bench.about,
        bench.initiator.name(),
        transport.name()
    );
    let ratio_heading = bench.baseline.map(|b| format!("  vs {b}"));
    println!(
        "{:>10}  {:>16}  {:>10}  {:>10}{}",
        "size",
        bench.kind.heading(),
        "min",
        "max",
        ratio_heading.as_deref().unwrap_or("")
    );
    for r in rows {
        let width = 4 + bench.baseline.map_or(0, str::len);
        let ratio = base
            .iter()
            .find(|b| b.size == r.size)
            .map(|b| format!("  {:>width$.2}×", r.stats.median / b.stats.median))
            .unwrap_or_default();
        println!(
            "{:>10}  {:>16.4}  {:>10.4}  {:>10.4}{ratio}",
            human_size(r.size),
            r.stats.median,
            r.stats.min,
            r.stats.max
        );
    }
}

/// The benchmark named `metric` that runs on this kind of PE, if any (a CPU baseline has
/// no GPU counterpart of the same name).
fn bench(metric: &str, gpu: bool) -> Option<&'static Bench> {
    BENCHES
        .iter()
        .find(|b| b.metric == metric && b.on.includes(gpu))
}

/// The selected benchmarks in measuring order, each with its baseline in front: a group
/// is measured together. A baseline that a selected benchmark refers to is measured in
/// that benchmark's group rather than on its own.
fn groups(o: &Options, gpu: bool, transport: Transport) -> Vec<Vec<&'static Bench>> {
    // Remote PEs are measured from the host: device initiators reach them only through
    // the proxy channel.
    // Baselines (memcpy, a flag ping-pong through the mapping) need P2P.
    let p2p = transport == Transport::P2p;
    let is_baseline = |b: &Bench| BENCHES.iter().any(|d| d.baseline == Some(b.metric));
    let reaches = |b: &Bench| p2p || (b.initiator == Initiator::Host && !is_baseline(b));
    let selected: Vec<&Bench> = BENCHES
        .iter()
        .filter(|b| o.selected(b.metric) && b.on.includes(gpu) && reaches(b))
        .collect();
    selected
        .iter()
        .filter(|b| !selected.iter().any(|d| d.baseline == Some(b.metric)))
        .map(|b| {
            b.baseline
                .filter(|_| p2p)
                .map(|m| bench(m, gpu))
                .into_iter()
                .flatten()
                .chain([*b])
                .collect()
        })
        .collect()
}

/// Measures one size of a group: a warm-up run of each member, then `reps` rounds in
/// which every member runs once, each run after a barrier. Interleaving keeps a benchmark
/// and its baseline under the same conditions (clock speed and neighbours drift on a
/// shared VM over seconds). Returns one summary per member (meaningful on PE 0 only).
fn measure(c: &Ctx, group: &[&Bench], size: usize, o: &Options) -> symmem::Result<Vec<Stats>> {
    let iters_of = |b: &Bench| {
        let iters = o.iters_for(size);
        b.max_iters.map_or(iters, |m| iters.min(m).max(MIN_ITERS))
    };
    for b in group {
        c.rt.barrier_all()?;
        (b.run)(c, size, (iters_of(b) / 10).max(2))?;
    }
    let mut values = vec![Vec::with_capacity(o.reps); group.len()];
    for _ in 0..o.reps {
        for (b, v) in group.iter().zip(&mut values) {
            let iters = iters_of(b);
            c.rt.barrier_all()?;
            let elapsed = (b.run)(c, size, iters)?;
            v.push(b.kind.value(elapsed, iters, size));
        }
    }
    Ok(values.into_iter().map(Stats::of).collect())
}

/// Runs every selected benchmark on this PE; PE 0 prints.
fn run(o: &Options) -> symmem::Result<ExitCode> {
    let rt = symmem::init()?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if n < 2 {
        eprintln!("symmem-perf needs at least 2 PEs: run it with --pes 2");
        return Ok(ExitCode::from(2));
    }
    let role = match me {
        0 => Role::Initiator,
        1 => Role::Target,
        _ => Role::Idle,
    };
    let peer = if me == 0 { 1 } else { 0 };
    let c = Ctx {
        rt: &rt,
        role,
        peer,
        word: rt.calloc::<u64>(1)?,
        sig: rt.calloc::<u64>(1)?,
        big: rt.alloc_aligned::<u64>(MAX_SIZE / ELEM, PAGE)?,
        src: pages(0x5a),
        scratch: RefCell::new(pages(0xa5)),
        gsrc: rt.alloc_aligned::<u64>(MAX_SIZE / ELEM, PAGE)?,
        module: rt.load_module(&kernels::PTX)?,
        stream: rt.create_stream()?,
    };
    rt.put(c.gsrc.at(0), words(&c.src, MAX_SIZE), me)?;
    let device = if rt.is_gpu() { "cuda" } else { "cpu" };
    // Pre-touch: each PE writes every page of its own copy of `big`, so no page is
    // first allocated inside a measurement; the warm-up then maps PE 1's pages into PE 0.
    rt.put(c.big.at(0), words(&c.src, MAX_SIZE), me)?;
    rt.barrier_all()?;
    // The PE 0 <-> PE 1 route, seen from whichever end this PE is (idle PEs look at PE 1).
    let transport = Transport::detect(&rt, &c.word, if me == 1 { 0 } else { 1 })?;
    if me == 0 && !o.json {
        println!(
            "symmem-perf: {n} PEs ({}), PE 0 → PE 1 over {}; median of {} repetitions of up to {} iterations (after a warm-up)",
            rt.device_description(),
            transport.name(),
            o.reps,
            o.iters
        );
    }
    let mut printed: Vec<(&str, Initiator)> = Vec::new();
    for group in groups(o, rt.is_gpu(), transport) {
        // The last member is the benchmark; its sizes apply to its baseline too.
        let sizes = group[group.len() - 1].sizes;
        let mut rows: Vec<Vec<Row>> = group.iter().map(|_| Vec::new()).collect();
        for &size in sizes {
            let stats = measure(&c, &group, size, o)?;
            for ((b, r), stats) in group.iter().zip(&mut rows).zip(stats) {
                r.push(Row {
                    metric: b.metric,
                    size,
                    stats,
                });
            }
        }
        if me != 0 {
            continue;
        }
        for (i, b) in group.iter().enumerate() {
            // A baseline shared by several benchmarks is printed once.
            if !printed.contains(&(b.metric, b.initiator)) {
                printed.push((b.metric, b.initiator));
                let base = if i > 0 { rows[0].as_slice() } else { &[] };
                print_rows(b, &rows[i], base, transport, device, o.json);
            }
        }
    }
    let Ctx {
        word,
        sig,
        big,
        gsrc,
        ..
    } = c;
    rt.free(gsrc)?;
    rt.free(big)?;
    rt.free(sig)?;
    rt.free(word)?;
    rt.finalize()?;
    Ok(ExitCode::SUCCESS)
}

/// Parses the arguments, self-launches with `--pes N`, and runs.
fn main() -> ExitCode {
    // SAFETY: setting a signal disposition to SIG_DFL before any thread is started has no
    // memory-safety preconditions. Rust ignores SIGPIPE, which turns `symmem-perf | head`
    // into a panic in println!; the default action ends the process quietly instead.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse_args(&args) {
        Ok(Command::Help) => {
            println!("{USAGE}");
            for b in BENCHES {
                println!("  {:<28} {}", b.metric, b.about);
            }
            return ExitCode::SUCCESS;
        }
        Ok(Command::Run(o)) => o,
        Err(e) => {
            eprintln!("symmem-perf: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(t) = options.remote {
        // Every PE its own (simulated) node, so PE 0 reaches PE 1 over the transport.
        std::env::set_var("SYMMEM_SIMULATE_NODES", "65536");
        std::env::set_var("SYMMEM_REMOTE_TRANSPORT", t);
    }
    let result = symmem::self_launch().and_then(|launch| match launch {
        SelfLaunch::Finished(code) => Ok(ExitCode::from(code.clamp(0, 255) as u8)),
        SelfLaunch::InJob => run(&options),
    });
    result.unwrap_or_else(|e| {
        eprintln!("symmem-perf: {e}");
        ExitCode::FAILURE
    })
}
