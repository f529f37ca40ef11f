//! The benchmark table: over what the operations go ([`Transport`]), what a timing means
//! ([`Kind`]), and every metric ([`BENCHES`]), each issued by an [`Initiator`].
//!
//! Adding a metric is one entry in [`BENCHES`] and one run function (host rows in
//! [`crate::host`], device rows in [`crate::device`]).

use std::time::Duration;

use symmem::config::RemoteTransport;
use symmem::{RoutePath, Runtime, SymBuf};
use symmem_bench_kernels as kernels;

use crate::ctx::Ctx;
use crate::device::*;
use crate::host::*;
use crate::initiator::Initiator;
use crate::sizes::{COLLECTIVE_SWEEP, REDUCE_SIZES, ROTATING_SWEEP, SWEEP, WORD};

/// How the operations reach the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The peer's heap is mapped into this PE: loads, stores and atomics.
    P2p,
    /// The remote transport of this name (one of [`symmem::remote_transports`]).
    Remote(&'static str),
}

impl Transport {
    /// Every transport: p2p, then the remote transports in the registry's order.
    pub fn all() -> Vec<Transport> {
        std::iter::once(Transport::P2p)
            .chain(symmem::remote_transports().map(|t| Transport::Remote(t.name)))
            .collect()
    }

    /// The transport the runtime uses from this PE to `peer`.
    pub fn detect(rt: &Runtime, buf: &SymBuf<u64>, peer: usize) -> symmem::Result<Self> {
        if rt.ptr(buf, peer)?.is_some() {
            return Ok(Transport::P2p);
        }
        Ok(Transport::Remote(match rt.config().remote_transport {
            RemoteTransport::Named(name) => name,
            RemoteTransport::Auto => match rt.route_to(peer)?.path {
                RoutePath::Transport(name) => name,
                // Not over a remote transport (a peer's GPU heap reached by CUDA copies):
                // labelled socket, as always (host rows, without the P2P baselines).
                _ => "socket",
            },
        }))
    }

    /// The name used in the JSON output and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Transport::P2p => "p2p",
            Transport::Remote(name) => name,
        }
    }
}

/// What a benchmark's timing means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
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
    /// The value of `iters` iterations at `size` bytes taking `elapsed`, with `dirs`
    /// directions moving bytes at once (bandwidth only).
    pub fn value(self, elapsed: Duration, iters: usize, size: usize, dirs: usize) -> f64 {
        let secs = elapsed.as_secs_f64();
        match self {
            Kind::Latency { ops } => secs * 1e6 / (iters as f64 * ops),
            Kind::Bandwidth => (size * iters * dirs) as f64 / secs / 1e9,
        }
    }

    /// The unit of [`Self::value`].
    pub fn unit(self) -> &'static str {
        match self {
            Kind::Latency { .. } => "us",
            Kind::Bandwidth => "GB/s",
        }
    }

    /// The column heading of the human-readable table.
    pub fn heading(self, bidir: bool) -> &'static str {
        match (self, bidir) {
            (Kind::Latency { .. }, _) => "latency (µs)",
            (Kind::Bandwidth, false) => "bandwidth (GB/s)",
            (Kind::Bandwidth, true) => "bidir GB/s",
        }
    }
}

/// Which kind of PE a benchmark runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    /// CPU and GPU PEs.
    Both,
    /// CPU PEs only (host-memory baselines).
    Cpu,
    /// GPU PEs only (device-memory baselines, grid bandwidth).
    Gpu,
}

impl On {
    /// Whether a benchmark marked so runs on this kind of PE.
    pub fn includes(self, gpu: bool) -> bool {
        match self {
            On::Both => true,
            On::Cpu => !gpu,
            On::Gpu => gpu,
        }
    }
}

/// Timed iterations of warp and block benchmarks: each iteration synchronizes 32 or 64
/// kernel threads (fibers) on the CPU executor.
pub const GROUP_ITERS: usize = 500;

/// Most iterations of a stream ping-pong repetition: each is two kernels on a stream.
pub const STREAM_ITERS: usize = 2_000;

/// A run function: runs `iters` iterations at `size` bytes on every PE (collectively)
/// and returns the time the initiator measured (zero on other PEs).
pub type RunFn = fn(&Ctx, usize, usize) -> symmem::Result<Duration>;

/// One benchmark: a metric measured at some sizes by one run function.
pub struct Bench {
    /// Which kind of PE it runs on.
    pub on: On,
    /// The metric name in the output.
    pub metric: &'static str,
    /// Who issues the operations.
    pub initiator: Initiator,
    /// Latency or bandwidth.
    pub kind: Kind,
    /// Transfer sizes in bytes (multiples of 8); a sweep (`-b/-e/-f`) replaces them
    /// where there are several.
    pub sizes: &'static [usize],
    /// A metric measured earlier whose value at the same size the human table shows a
    /// ratio against.
    pub baseline: Option<&'static str>,
    /// Most timed iterations per repetition, below the global limit: group operations on
    /// the CPU executor synchronize OS threads every iteration and need fewer.
    pub max_iters: Option<usize>,
    /// Whether `--bidir` runs it in both directions at once (point-to-point bandwidth).
    pub bidir: bool,
    /// One line for `--help`.
    pub about: &'static str,
    /// Runs it.
    pub run: RunFn,
}

/// A latency row of one operation per iteration.
const LAT: Kind = Kind::Latency { ops: 1.0 };
/// A ping-pong row: a round trip per iteration, reported one way.
const PINGPONG: Kind = Kind::Latency { ops: 2.0 };
/// A bandwidth row.
const BW: Kind = Kind::Bandwidth;

/// A row with the common defaults: both PE kinds, no baseline, no iteration cap, one
/// direction.
const fn row(
    metric: &'static str,
    initiator: Initiator,
    kind: Kind,
    sizes: &'static [usize],
    about: &'static str,
    run: RunFn,
) -> Bench {
    Bench {
        on: On::Both,
        metric,
        initiator,
        kind,
        sizes,
        baseline: None,
        max_iters: None,
        bidir: false,
        about,
        run,
    }
}

/// `b` on one kind of PE only.
const fn only_on(on: On, b: Bench) -> Bench {
    Bench { on, ..b }
}

/// `b` measured interleaved with `baseline`, which the table shows a ratio against.
const fn against(baseline: &'static str, b: Bench) -> Bench {
    Bench {
        baseline: Some(baseline),
        ..b
    }
}

/// `b` with at most `max` timed iterations per repetition.
const fn capped(max: usize, b: Bench) -> Bench {
    Bench {
        max_iters: Some(max),
        ..b
    }
}

/// `b`, run in both directions at once by `--bidir`.
const fn bidirectional(b: Bench) -> Bench {
    Bench { bidir: true, ..b }
}

use Initiator::{Block, Grid, Host, Stream, Thread, Warp};

/// Every benchmark, in the order run and printed.
pub const BENCHES: &[Bench] = &[
    only_on(On::Cpu, row("flag_pingpong_latency", Host, PINGPONG, WORD,
        "baseline: bare Release-store / Acquire-spin ping-pong on the same heap words, no runtime calls; round trip / 2",
        flag_pingpong)),
    against("flag_pingpong_latency", row("put_signal_pingpong_latency", Host, PINGPONG, WORD,
        "put_signal to the peer, which waits on the signal and answers the same way; round trip / 2",
        put_signal_pingpong)),
    row("signal_pingpong_latency", Host, PINGPONG, WORD,
        "signal_op (set) to the peer, which waits on the signal and answers the same way; round trip / 2",
        signal_pingpong),
    row("put_latency", Host, LAT, SWEEP, "put, then quiet", put_latency),
    row("get_latency", Host, LAT, SWEEP, "blocking get", get_latency),
    row("p_latency", Host, LAT, WORD, "p of one u64, then quiet", p_latency),
    row("g_latency", Host, LAT, WORD, "g of one u64", g_latency),
    row("put_nbi_latency", Host, LAT, WORD,
        "put_nbi alone (its issue cost; subtract it from fence_latency and quiet_latency)",
        put_nbi_then::<{ kernels::THEN_NOTHING }>),
    row("fence_latency", Host, LAT, WORD, "put_nbi, then fence", put_nbi_then::<{ kernels::THEN_FENCE }>),
    row("quiet_latency", Host, LAT, WORD, "put_nbi, then quiet", put_nbi_then::<{ kernels::THEN_QUIET }>),
    row("atomic_fetch_latency", Host, LAT, WORD, "atomic_fetch of a u64 of the peer", amo_latency::<{ kernels::AMO_FETCH }>),
    row("atomic_set_latency", Host, LAT, WORD, "atomic_set, then quiet", amo_latency::<{ kernels::AMO_SET }>),
    row("atomic_swap_latency", Host, LAT, WORD, "atomic_swap", amo_latency::<{ kernels::AMO_SWAP }>),
    row("atomic_compare_swap_latency", Host, LAT, WORD, "atomic_compare_swap", amo_latency::<{ kernels::AMO_COMPARE_SWAP }>),
    row("atomic_fetch_add_latency", Host, LAT, WORD, "atomic_fetch_add on a u64 of the peer", amo_latency::<{ kernels::AMO_FETCH_ADD }>),
    row("atomic_add_latency", Host, LAT, WORD, "atomic_add, then quiet", amo_latency::<{ kernels::AMO_ADD }>),
    row("atomic_fetch_inc_latency", Host, LAT, WORD, "atomic_fetch_inc", amo_latency::<{ kernels::AMO_FETCH_INC }>),
    row("atomic_inc_latency", Host, LAT, WORD, "atomic_inc, then quiet", amo_latency::<{ kernels::AMO_INC }>),
    row("atomic_fetch_and_latency", Host, LAT, WORD, "atomic_fetch_and", amo_latency::<{ kernels::AMO_FETCH_AND }>),
    row("atomic_and_latency", Host, LAT, WORD, "atomic_and, then quiet", amo_latency::<{ kernels::AMO_AND }>),
    row("atomic_fetch_or_latency", Host, LAT, WORD, "atomic_fetch_or", amo_latency::<{ kernels::AMO_FETCH_OR }>),
    row("atomic_or_latency", Host, LAT, WORD, "atomic_or, then quiet", amo_latency::<{ kernels::AMO_OR }>),
    row("atomic_fetch_xor_latency", Host, LAT, WORD, "atomic_fetch_xor", amo_latency::<{ kernels::AMO_FETCH_XOR }>),
    row("atomic_xor_latency", Host, LAT, WORD, "atomic_xor, then quiet", amo_latency::<{ kernels::AMO_XOR }>),
    only_on(On::Cpu, row("memcpy_bw", Host, BW, SWEEP,
        "baseline: one core's memcpy between two private, pre-touched buffers of PE 0",
        memcpy_bw)),
    against("memcpy_bw", bidirectional(row("put_bw", Host, BW, SWEEP,
        "back-to-back put_nbi of the same buffer, then one quiet", put_bw))),
    bidirectional(row("get_bw", Host, BW, SWEEP,
        "back-to-back get_nbi into the same buffer, then one quiet", get_bw)),
    row("barrier_all_latency", Host, LAT, WORD,
        "barrier_all on every PE (size is not meaningful)", barrier_all_latency),
    row("sync_all_latency", Host, LAT, WORD,
        "sync_all on every PE (size is not meaningful)", sync_all_latency),
    only_on(On::Cpu, row("alltoall_bw", Host, BW, COLLECTIVE_SWEEP,
        "team_world alltoall of u64s: size is what each PE sends in all (one block per PE, its own included)",
        alltoall_bw)),
    only_on(On::Cpu, row("fcollect_bw", Host, BW, COLLECTIVE_SWEEP,
        "team_world fcollect of u64s: size is what each PE receives (its block times the PEs)",
        fcollect_bw)),
    only_on(On::Cpu, row("collect_bw", Host, BW, COLLECTIVE_SWEEP,
        "team_world collect of u64s, every PE the same block: size as fcollect_bw",
        collect_bw)),
    only_on(On::Cpu, row("broadcast_bw", Host, BW, COLLECTIVE_SWEEP,
        "team_world broadcast of size bytes of u64s from PE 0 to every PE",
        broadcast_bw)),
    only_on(On::Cpu, row("reduce_latency", Host, LAT, REDUCE_SIZES,
        "team_world sum reduce of size bytes of u64s into every PE", reduce_latency)),
    only_on(On::Cpu, row("reducescatter_latency", Host, LAT, REDUCE_SIZES,
        "team_world sum reduce-scatter of size bytes of u64s in all (each PE gets its block)",
        reducescatter_latency)),
    capped(GROUP_ITERS, row("barrier_all_latency", Block, LAT, WORD,
        "device block: team_barrier_block on TEAM_WORLD by every PE, in a kernel loop",
        device_team_barrier)),
    capped(GROUP_ITERS, row("reduce_latency", Block, LAT, REDUCE_SIZES,
        "device block: reduce_block (sum) on TEAM_WORLD of size bytes of u64s by every PE, in a kernel loop",
        device_team_reduce)),
    capped(GROUP_ITERS, row("alltoall_bw", Block, BW, COLLECTIVE_SWEEP,
        "device block: alltoall_block on TEAM_WORLD of u64s by every PE, in a kernel loop; size as the host row",
        device_team_alltoall)),
    capped(GROUP_ITERS, row("fcollect_bw", Block, BW, COLLECTIVE_SWEEP,
        "device block: fcollect_block on TEAM_WORLD of u64s by every PE, in a kernel loop; size as the host row",
        device_team_fcollect)),
    capped(GROUP_ITERS, row("broadcast_bw", Block, BW, COLLECTIVE_SWEEP,
        "device block: broadcast_block from PE 0 on TEAM_WORLD by every PE, in a kernel loop; size as the host row",
        device_team_broadcast)),
    capped(GROUP_ITERS, row("sync_all_latency", Block, LAT, WORD,
        "device block: team_sync_block on TEAM_WORLD by every PE, in a kernel loop",
        device_team_sync)),
    capped(GROUP_ITERS, row("collect_bw", Block, BW, COLLECTIVE_SWEEP,
        "device block: collect_block on TEAM_WORLD of u64s by every PE, in a kernel loop; size as the host row",
        device_team_collect)),
    capped(GROUP_ITERS, row("reducescatter_latency", Block, LAT, REDUCE_SIZES,
        "device block: reducescatter_block (sum) on TEAM_WORLD by every PE, in a kernel loop; size as the host row",
        device_team_reducescatter)),
    row("put_signal_pingpong_latency", Thread, PINGPONG, WORD,
        "device thread: put_signal + signal_wait_until ping-pong in kernels on both PEs",
        device_pingpong::<{ Initiator::Thread as u8 }>),
    capped(GROUP_ITERS, row("put_signal_pingpong_latency", Warp, PINGPONG, WORD,
        "device warp: put_signal_warp ping-pong (lane 0 waits, then the warp syncs)",
        device_pingpong::<{ Initiator::Warp as u8 }>)),
    capped(GROUP_ITERS, row("put_signal_pingpong_latency", Block, PINGPONG, WORD,
        "device block: put_signal_block ping-pong (thread 0 waits, then the block syncs)",
        device_pingpong::<{ Initiator::Block as u8 }>)),
    row("signal_pingpong_latency", Thread, PINGPONG, WORD,
        "device thread: signal_op + signal_wait_until ping-pong in kernels on both PEs",
        device_signal_pingpong),
    row("put_latency", Thread, LAT, WORD, "device thread: put then quiet, in a kernel loop",
        device_put::<{ Initiator::Thread as u8 }>),
    capped(GROUP_ITERS, row("put_latency", Warp, LAT, WORD, "device warp: put_warp then quiet, in a kernel loop",
        device_put::<{ Initiator::Warp as u8 }>)),
    capped(GROUP_ITERS, row("put_latency", Block, LAT, WORD, "device block: put_block then quiet, in a kernel loop",
        device_put::<{ Initiator::Block as u8 }>)),
    row("get_latency", Thread, LAT, WORD, "device thread: get, in a kernel loop",
        device_get::<{ Initiator::Thread as u8 }>),
    capped(GROUP_ITERS, row("get_latency", Warp, LAT, WORD, "device warp: get_warp, in a kernel loop",
        device_get::<{ Initiator::Warp as u8 }>)),
    capped(GROUP_ITERS, row("get_latency", Block, LAT, WORD, "device block: get_block, in a kernel loop",
        device_get::<{ Initiator::Block as u8 }>)),
    row("p_latency", Thread, LAT, WORD, "device thread: p then quiet, in a kernel loop",
        device_pg::<{ kernels::PG_P }>),
    row("g_latency", Thread, LAT, WORD, "device thread: g, in a kernel loop",
        device_pg::<{ kernels::PG_G }>),
    row("put_nbi_latency", Thread, LAT, WORD, "device thread: put_nbi alone, in a kernel loop",
        device_put_nbi::<{ kernels::THEN_NOTHING }>),
    row("fence_latency", Thread, LAT, WORD, "device thread: put_nbi then fence, in a kernel loop",
        device_put_nbi::<{ kernels::THEN_FENCE }>),
    row("quiet_latency", Thread, LAT, WORD, "device thread: put_nbi then quiet, in a kernel loop",
        device_put_nbi::<{ kernels::THEN_QUIET }>),
    row("atomic_fetch_latency", Thread, LAT, WORD, "device thread: atomic_fetch of a u64 of the peer, in a kernel loop",
        device_amo::<{ kernels::AMO_FETCH }>),
    row("atomic_set_latency", Thread, LAT, WORD, "device thread: atomic_set, then quiet, in a kernel loop",
        device_amo::<{ kernels::AMO_SET }>),
    row("atomic_swap_latency", Thread, LAT, WORD, "device thread: atomic_swap, in a kernel loop",
        device_amo::<{ kernels::AMO_SWAP }>),
    row("atomic_compare_swap_latency", Thread, LAT, WORD, "device thread: atomic_compare_swap, in a kernel loop",
        device_amo::<{ kernels::AMO_COMPARE_SWAP }>),
    row("atomic_fetch_add_latency", Thread, LAT, WORD,
        "device thread: atomic_fetch_add, in a kernel loop (AMOs have no warp/block forms)",
        device_fetch_add),
    row("atomic_add_latency", Thread, LAT, WORD, "device thread: atomic_add, then quiet, in a kernel loop",
        device_amo::<{ kernels::AMO_ADD }>),
    row("atomic_fetch_inc_latency", Thread, LAT, WORD, "device thread: atomic_fetch_inc, in a kernel loop",
        device_amo::<{ kernels::AMO_FETCH_INC }>),
    row("atomic_inc_latency", Thread, LAT, WORD, "device thread: atomic_inc, then quiet, in a kernel loop",
        device_amo::<{ kernels::AMO_INC }>),
    row("atomic_fetch_and_latency", Thread, LAT, WORD, "device thread: atomic_fetch_and, in a kernel loop",
        device_amo::<{ kernels::AMO_FETCH_AND }>),
    row("atomic_and_latency", Thread, LAT, WORD, "device thread: atomic_and, then quiet, in a kernel loop",
        device_amo::<{ kernels::AMO_AND }>),
    row("atomic_fetch_or_latency", Thread, LAT, WORD, "device thread: atomic_fetch_or, in a kernel loop",
        device_amo::<{ kernels::AMO_FETCH_OR }>),
    row("atomic_or_latency", Thread, LAT, WORD, "device thread: atomic_or, then quiet, in a kernel loop",
        device_amo::<{ kernels::AMO_OR }>),
    row("atomic_fetch_xor_latency", Thread, LAT, WORD, "device thread: atomic_fetch_xor, in a kernel loop",
        device_amo::<{ kernels::AMO_FETCH_XOR }>),
    row("atomic_xor_latency", Thread, LAT, WORD, "device thread: atomic_xor, then quiet, in a kernel loop",
        device_amo::<{ kernels::AMO_XOR }>),
    bidirectional(row("put_bw", Thread, BW, SWEEP,
        "device thread: back-to-back put_nbi, then one quiet, in a kernel",
        device_rma_bw::<{ Initiator::Thread as u8 }, 0>)),
    bidirectional(row("get_bw", Thread, BW, SWEEP,
        "device thread: back-to-back get_nbi, then one quiet, in a kernel",
        device_rma_bw::<{ Initiator::Thread as u8 }, 1>)),
    capped(GROUP_ITERS, bidirectional(row("put_bw", Warp, BW, SWEEP,
        "device warp: back-to-back put_nbi_warp, then one quiet, in a kernel",
        device_rma_bw::<{ Initiator::Warp as u8 }, 0>))),
    capped(GROUP_ITERS, bidirectional(row("get_bw", Warp, BW, SWEEP,
        "device warp: back-to-back get_nbi_warp, then one quiet, in a kernel",
        device_rma_bw::<{ Initiator::Warp as u8 }, 1>))),
    capped(GROUP_ITERS, bidirectional(row("put_bw", Block, BW, SWEEP,
        "device block: back-to-back put_nbi_block, then one quiet, in a kernel",
        device_rma_bw::<{ Initiator::Block as u8 }, 0>))),
    capped(GROUP_ITERS, bidirectional(row("get_bw", Block, BW, SWEEP,
        "device block: back-to-back get_nbi_block, then one quiet, in a kernel",
        device_rma_bw::<{ Initiator::Block as u8 }, 1>))),
    capped(STREAM_ITERS, row("put_signal_pingpong_latency", Stream, PINGPONG, WORD,
        "stream-ordered: put_signal_on_stream + signal_wait_until_on_stream ping-pong, queued by the host, one stream sync at the end",
        stream_pingpong)),
    only_on(On::Gpu, row("dtod_bw", Host, BW, SWEEP,
        "baseline: cuMemcpyDtoD between two buffers of PE 0's GPU (the limit a put on one GPU can reach)",
        dtod_bw)),
    only_on(On::Gpu, against("dtod_bw", row("put_bw", Grid, BW, SWEEP,
        "device grid (264 blocks × 1024 threads): each block put_block's its share, then quiet_block; back to back",
        device_put_bw))),
    only_on(On::Gpu, row("dtod_bw_rotating", Host, BW, ROTATING_SWEEP,
        "baseline: cuMemcpyDtoD through two 256 MiB buffers of PE 0's GPU, copy i at offset i × size (HBM, not L2)",
        dtod_bw_rotating)),
    only_on(On::Gpu, against("dtod_bw_rotating", row("put_bw_rotating", Grid, BW, ROTATING_SWEEP,
        "device grid (264 blocks × 1024 threads): put_block + quiet_block back to back, put i at offset i × size of 256 MiB buffers (HBM, not L2)",
        device_put_bw_rotating))),
];
