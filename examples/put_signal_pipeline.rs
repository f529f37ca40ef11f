//! One-sided pipelining from host code: a producer computes chunk i, sends it with
//! `put_signal_nbi` and goes on to chunk i + 1 at once; its consumer waits on each chunk's
//! signal and processes chunks as they land. `quiet` runs only before a buffer slot is
//! reused (double or triple buffering, `--buffers`).
//!
//! PEs pair up: PE p < n/2 produces for PE p + n/2, so with `SYMMEM_SIMULATE_NODES=2`
//! every pair crosses the (socket) remote transport. The same job also runs:
//! - `anti`: put, quiet, flag, quiet per chunk (the anti-pattern: two stalls per chunk);
//! - `sync`: a synchronous copy per chunk (blocking put, flag, then wait until the
//!   consumer has processed it): nothing overlaps, the baseline of the overlap ratio;
//! - `stream` (GPU PEs only): `put_signal_on_stream` from a staging slot on a CUDA stream.
//!
//! Consumers check every element exactly. For each variant PE 0 prints the total time
//! (common start to the last PE's end), the producers' compute time and the overlap ratio
//! `1 - (total - compute) / (total_sync - compute_sync)`: the share of the synchronous
//! copy's communication time that the variant hid behind compute.
//!
//! ```text
//! cargo run --release --example put_signal_pipeline                 # 4 PEs
//! cargo run --release --example put_signal_pipeline -- --pes 2 --chunk-kib 64 --chunks 256
//! SYMMEM_SIMULATE_NODES=2 cargo run --release --example put_signal_pipeline
//! ```

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use support::launch::{SelfLaunchArgs, Start};
use support::{all_reduce, positive};
use symmem::collectives::{Max, Sum};
use symmem::{Cmp, Runtime, SignalOp, SymBuf};

/// Host put/signal pipeline vs per-chunk quiet vs synchronous copy.
///
/// PE p < n/2 produces for PE p + n/2 (an even number of PEs; 4 are self-launched without
/// --pes or a launcher). Per variant and size PE 0 prints total time, compute time, overlap
/// ratio (1 - exposed / exposed_sync, exposed = total - compute) and whether every element
/// the consumers saw was exact.
#[derive(Parser)]
#[command(name = "put_signal_pipeline", version)]
struct Args {
    /// The job's PEs.
    #[command(flatten)]
    launch: SelfLaunchArgs,
    /// Chunk sizes in KiB, comma-separated
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "16,256", value_parser = positive)]
    chunk_kib: Vec<usize>,
    /// Chunks per run, comma-separated
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "32,128", value_parser = positive)]
    chunks: Vec<usize>,
    /// Stand-in compute per chunk in microseconds, a busy loop that also fills the chunk
    #[arg(long, value_name = "US", default_value_t = 100)]
    compute_us: u64,
    /// Buffer slots on each side: 2 (double) or 3 (triple)
    #[arg(long, value_name = "B", default_value_t = 2)]
    buffers: usize,
    /// Runs per variant and size; the one with the least exposed time is reported, the
    /// check covers all
    #[arg(long, value_name = "R", default_value_t = 3, value_parser = positive)]
    reps: usize,
}

/// How a producer sends each chunk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// `put_signal_nbi`, no wait: the pipeline.
    PutSignal,
    /// put, quiet, flag, quiet.
    Anti,
    /// blocking put, flag, wait for the consumer.
    Sync,
    /// `put_signal_on_stream` from a symmetric staging slot (GPU PEs).
    Stream,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::PutSignal => "put_signal_nbi",
            Variant::Anti => "put+quiet+flag+quiet",
            Variant::Sync => "sync copy",
            Variant::Stream => "put_signal_on_stream",
        }
    }
}

/// One run's sizes.
#[derive(Clone, Copy)]
struct Shape {
    chunk_len: usize,
    chunks: usize,
    buffers: usize,
    compute: Duration,
}

/// The symmetric buffers of a run.
struct Buffers {
    /// `buffers` slots of `chunk_len` u64s, the consumer's landing zone.
    inbox: SymBuf<u64>,
    /// The producer's source slots in symmetric memory (for the stream variant).
    staging: SymBuf<u64>,
    /// `ready[s]` on the consumer = 1 + the chunk now in slot `s`.
    ready: SymBuf<u64>,
    /// `done[s]` on the producer = 1 + the last chunk the consumer finished in slot `s`.
    done: SymBuf<u64>,
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("put_signal_pipeline: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Checks what clap cannot: the number of buffer slots.
fn check(args: &Args) -> Result<(), String> {
    if !(2..=3).contains(&args.buffers) {
        return Err(format!("--buffers {}: expected 2 or 3", args.buffers));
    }
    Ok(())
}

/// The value of element `j` of chunk `i` sent by `producer`: every element distinct.
fn value(producer: usize, i: usize, j: usize) -> u64 {
    ((producer as u64) << 56) ^ ((i as u64) << 28) ^ j as u64
}

fn run() -> symmem::Result<ExitCode> {
    let args = Args::parse();
    if let Err(why) = check(&args) {
        eprintln!("put_signal_pipeline: {why}\n\nFor more information, try '--help'.");
        return Ok(ExitCode::from(2));
    }
    let (kib, counts, buffers, reps) = (args.chunk_kib, args.chunks, args.buffers, args.reps);
    let compute = Duration::from_micros(args.compute_us);
    if let Start::Done(code) = support::launch::start(&args.launch, Some(4))? {
        return Ok(code);
    }
    let rt = symmem::init()?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if n % 2 != 0 {
        if me == 0 {
            eprintln!("put_signal_pipeline pairs PEs up: run it with an even number of PEs (--pes 4), not {n}");
        }
        return Ok(ExitCode::FAILURE);
    }
    let max_len = kib.iter().max().copied().unwrap_or(1) * 1024 / 8;
    let bufs = Buffers {
        inbox: rt.calloc::<u64>(buffers * max_len)?,
        staging: rt.calloc::<u64>(buffers * max_len)?,
        ready: rt.calloc::<u64>(buffers)?,
        done: rt.calloc::<u64>(buffers)?,
    };
    let scratch = rt.calloc::<u64>(2)?;
    let stream_skipped = why_no_stream(&rt, &bufs, &scratch)?;
    let mut variants = vec![Variant::Sync, Variant::Anti, Variant::PutSignal];
    if stream_skipped.is_none() {
        variants.push(Variant::Stream);
    }
    if me == 0 {
        print_heading(&rt, buffers, compute, stream_skipped);
    }
    let configs: Vec<(usize, usize)> = kib
        .iter()
        .flat_map(|&k| counts.iter().map(move |&c| (k, c)))
        .collect();
    let mut all_exact = true;
    for (step, &(k, chunks)) in configs.iter().enumerate() {
        if me == 0 {
            eprintln!(
                "progress: {}/{}: {k} KiB x {chunks} chunks",
                step + 1,
                configs.len()
            );
        }
        let shape = Shape {
            chunk_len: k * 1024 / 8,
            chunks,
            buffers,
            compute,
        };
        let mut sync_exposed = None;
        for &v in &variants {
            let (total, compute_ns, bad) = best_of(&rt, &bufs, &scratch, shape, v, reps)?;
            all_exact &= bad == 0;
            let exposed = total.saturating_sub(compute_ns) as f64;
            if v == Variant::Sync {
                sync_exposed = Some(exposed);
            }
            let overlap = match sync_exposed {
                Some(s) if s > 0.0 => format!("{:.0}%", 100.0 * (1.0 - exposed / s)),
                _ => "-".into(),
            };
            if me == 0 {
                let check = if bad == 0 {
                    format!("exact ({} chunks x {reps})", n / 2 * chunks)
                } else {
                    format!("WRONG ({bad} elements)")
                };
                let (total_ms, compute_ms) = (total as f64 / 1e6, compute_ns as f64 / 1e6);
                let name = v.name();
                println!("{name:<22} {k:>5} KiB {chunks:>7} {total_ms:>10.2} {compute_ms:>11.2} {overlap:>8}  {check}");
            }
        }
    }
    rt.barrier_all()?;
    if me == 0 {
        println!(
            "check: {} on {n} PEs",
            if all_exact {
                "every chunk exact"
            } else {
                "MISMATCHES"
            }
        );
    }
    rt.free(scratch)?;
    rt.free(bufs.done)?;
    rt.free(bufs.ready)?;
    rt.free(bufs.staging)?;
    rt.free(bufs.inbox)?;
    rt.finalize()?;
    Ok(if all_exact {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What the run is, and the table's heading (PE 0).
fn print_heading(rt: &Runtime, buffers: usize, compute: Duration, stream_skipped: Option<&str>) {
    let n = rt.n_pes();
    let pairs: Vec<String> = (0..n / 2).map(|p| format!("{p}->{}", p + n / 2)).collect();
    println!(
        "put_signal_pipeline: {n} PEs ({}), pairs {}, {buffers} buffers, compute {} us/chunk",
        rt.device_description(),
        pairs.join(" "),
        compute.as_micros()
    );
    if let Some(why) = stream_skipped {
        println!("stream variant: skipped ({why})");
    }
    println!(
        "{:<22} {:>9} {:>7} {:>10} {:>11} {:>8}  check",
        "variant", "chunk", "chunks", "total ms", "compute ms", "overlap"
    );
}

/// Why the stream variant does not run, if it does not: it needs GPU PEs whose partners
/// are mapped (streams reach PEs of this node only). Every PE agrees (a collective), as
/// each run ends in collectives.
fn why_no_stream(
    rt: &Runtime,
    bufs: &Buffers,
    scratch: &SymBuf<u64>,
) -> symmem::Result<Option<&'static str>> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let partner = (me + n / 2) % n;
    let unmapped = u64::from(rt.ptr(&bufs.inbox, partner)?.is_none());
    let unmapped = all_reduce(rt, scratch, &[unmapped], Sum)?[0];
    Ok(if !rt.is_gpu() {
        Some("CPU PEs: a stream is the calling thread, so put_signal_on_stream is put_signal; it runs on GPU PEs")
    } else if unmapped > 0 {
        Some("a partner is on another node, which stream-ordered operations do not reach")
    } else {
        None
    })
}

/// The best of `reps` runs of variant `v` (least exposed time, as the machine may be
/// busy), over every PE: (total ns, compute ns) of that run, and the wrong elements of
/// all runs.
fn best_of(
    rt: &Runtime,
    bufs: &Buffers,
    scratch: &SymBuf<u64>,
    shape: Shape,
    v: Variant,
    reps: usize,
) -> symmem::Result<(u64, u64, u64)> {
    let (mut total, mut compute_ns, mut bad) = (u64::MAX, 0, 0);
    for _ in 0..reps {
        let (elapsed, computed, wrong) = run_variant(rt, bufs, shape, v)?;
        let times = [elapsed.as_nanos() as u64, computed.as_nanos() as u64];
        let tc = all_reduce(rt, scratch, &times, Max)?;
        let (t, c) = (tc[0], tc[1]);
        bad += all_reduce(rt, scratch, &[wrong], Sum)?[0];
        if total == u64::MAX || t.saturating_sub(c) < total.saturating_sub(compute_ns) {
            (total, compute_ns) = (t, c);
        }
    }
    Ok((total, compute_ns, bad))
}

/// Runs one variant on this PE (producer or consumer). Returns the time from the common
/// start to this PE's end, the time spent computing, and the wrong elements seen.
fn run_variant(
    rt: &Runtime,
    bufs: &Buffers,
    shape: Shape,
    v: Variant,
) -> symmem::Result<(Duration, Duration, u64)> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    // Fresh signals: each PE clears its own, and nobody starts before all are clear.
    let zeros = vec![0u64; shape.buffers];
    rt.put(bufs.ready.at(0), &zeros, me)?;
    rt.put(bufs.done.at(0), &zeros, me)?;
    rt.barrier_all()?;
    let start = Instant::now();
    let (computed, bad) = if me < n / 2 {
        (produce(rt, bufs, shape, v, me + n / 2)?, 0)
    } else {
        (Duration::ZERO, consume(rt, bufs, shape, me - n / 2)?)
    };
    let elapsed = start.elapsed();
    rt.barrier_all()?;
    Ok((elapsed, computed, bad))
}

/// The stand-in compute: fills `chunk` with chunk `i`'s values and busy-waits until
/// `cost` has passed since it began. Returns the time it took.
fn compute(chunk: &mut [u64], producer: usize, i: usize, cost: Duration) -> Duration {
    let t = Instant::now();
    for (j, x) in chunk.iter_mut().enumerate() {
        *x = value(producer, i, j);
    }
    while t.elapsed() < cost {
        std::hint::spin_loop();
    }
    t.elapsed()
}

/// The producer's side: computes and sends every chunk to `to`; returns its compute time.
fn produce(
    rt: &Runtime,
    bufs: &Buffers,
    shape: Shape,
    v: Variant,
    to: usize,
) -> symmem::Result<Duration> {
    let me = rt.my_pe();
    let len = shape.chunk_len;
    let stream = if v == Variant::Stream {
        Some(rt.create_stream()?)
    } else {
        None
    };
    let mut slots = vec![vec![0u64; len]; shape.buffers];
    let mut computed = Duration::ZERO;
    for i in 0..shape.chunks {
        let s = i % shape.buffers;
        let flag = i as u64 + 1;
        if i >= shape.buffers {
            // Slot `s` is reused: the consumer must have finished chunk i - buffers there,
            // and our own earlier transfer from source slot `s` must be complete.
            rt.signal_wait_until(bufs.done.at(s), Cmp::Ge, (i - shape.buffers + 1) as u64)?;
            match &stream {
                Some(st) => st.synchronize()?,
                None => rt.quiet()?,
            }
        }
        computed += compute(&mut slots[s], me, i, shape.compute);
        let dst = bufs.inbox.at(s * len);
        match v {
            Variant::PutSignal => {
                rt.put_signal_nbi(dst, &slots[s], bufs.ready.at(s), flag, SignalOp::Set, to)?
            }
            Variant::Anti => {
                rt.put_nbi(dst, &slots[s], to)?;
                rt.quiet()?;
                rt.signal_op(bufs.ready.at(s), flag, SignalOp::Set, to)?;
                rt.quiet()?;
            }
            Variant::Sync => {
                rt.put(dst, &slots[s], to)?;
                rt.signal_op(bufs.ready.at(s), flag, SignalOp::Set, to)?;
                rt.signal_wait_until(bufs.done.at(s), Cmp::Ge, flag)?;
            }
            Variant::Stream => {
                let st = stream.as_ref().expect("created for this variant");
                rt.put(bufs.staging.at(s * len), &slots[s], me)?;
                rt.put_signal_on_stream(
                    dst,
                    bufs.staging.at(s * len),
                    len,
                    bufs.ready.at(s),
                    flag,
                    SignalOp::Set,
                    to,
                    st,
                )?;
            }
        }
    }
    match &stream {
        Some(st) => st.synchronize()?,
        None => rt.quiet()?,
    }
    Ok(computed)
}

/// The consumer's side: waits for each chunk from `from`, checks it and frees its slot;
/// returns the number of wrong elements.
fn consume(rt: &Runtime, bufs: &Buffers, shape: Shape, from: usize) -> symmem::Result<u64> {
    let me = rt.my_pe();
    let len = shape.chunk_len;
    let mut chunk = vec![0u64; len];
    let mut bad = 0u64;
    for i in 0..shape.chunks {
        let s = i % shape.buffers;
        let flag = i as u64 + 1;
        rt.signal_wait_until(bufs.ready.at(s), Cmp::Ge, flag)?;
        rt.get(bufs.inbox.at(s * len), &mut chunk, me)?;
        bad += chunk
            .iter()
            .enumerate()
            .filter(|&(j, &x)| x != value(from, i, j))
            .count() as u64;
        rt.signal_op(bufs.done.at(s), flag, SignalOp::Set, from)?;
    }
    Ok(bad)
}
