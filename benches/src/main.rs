//! `symmem-perf`: latency and bandwidth of symmem's host- and device-initiated operations
//! between PE 0 and PE 1, in the style of NVSHMEM's perftests and nccl-tests.
//!
//! ```text
//! cargo run --release --bin symmem-perf -- --pes 2            # tables
//! cargo run --release --bin symmem-perf -- --pes 2 --json     # one JSON object per line
//! cargo run --release --bin symmem-perf -- --pes 2 --quick    # smoke run
//! cargo run --release --bin symmem-perf -- --pes 2 -b 8 -e 1M -f 4 --transport all --plot out
//! cargo run --release --bin symmem-perf -- --pes 4 --matrix   # PE × PE tables
//! ```
//!
//! PE 0 initiates every operation, PE 1 is the target (and answers ping-pongs), further
//! PEs only join the barriers and collectives. Every PE runs the same sequence of
//! collective calls; only PE 0 prints. Each (metric, size) point is warmed up, then timed
//! over several repetitions of many iterations; the reported value is the median
//! repetition (see [`measure`]).
//!
//! With `--plot DIR`, PE 0 appends its rows to `DIR/rows.jsonl` and the process that
//! started the run charts them at the end; a run that launches others (self-launch,
//! `--transport all`) tells them so through [`ROWS_ENV`], so that it alone truncates the
//! file first and charts it last.

mod args;
mod ctx;
mod device;
mod host;
mod initiator;
mod matrix;
mod measure;
mod plot;
mod progress;
mod report;
mod sizes;
mod stats;
mod table;

use std::cell::{Cell, RefCell};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use symmem::SelfLaunch;
use symmem_bench_kernels as kernels;

use args::{parse_args, Command, Options, ParseError, TransportArg};
use ctx::{pages, words, Ctx, Role, Window, PAGE};
use initiator::Initiator;
use measure::{directions, groups};
use progress::Progress;
use report::{direction, json_line, print_table, Labels, Row};
use sizes::{sizes_for, ELEM, MAX_SIZE};
use stats::Sampler;
use table::{On, Transport, BENCHES};

/// Set by a run that launches others and charts their rows: the rows file they append to.
/// Not `SYMMEM_*`: the runtime warns about every unknown variable of its own prefix.
const ROWS_ENV: &str = "SYMPERF_ROWS";

/// Runs every selected benchmark (or the matrix) on this PE; PE 0 prints, appends its
/// rows to `rows_file` if given, and at the end charts `own` (the rows file and the chart
/// directory) if this run owns them.
fn run(
    o: &Options,
    rows_file: Option<&Path>,
    own: Option<(&Path, &Path)>,
) -> symmem::Result<ExitCode> {
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
    let big = rt.alloc_aligned::<u64>((MAX_SIZE + PAGE) / ELEM, PAGE)?;
    let big_bytes = rt.view_at::<u8>(
        "symmem-perf --misalign",
        (rt.heap_local_range().0 + big.offset() + o.misalign) as *const u8,
        MAX_SIZE,
    )?;
    let c = Ctx {
        rt: &rt,
        role: Cell::new(role),
        peer: Cell::new(if me == 0 { 1 } else { 0 }),
        bidir: o.bidir,
        misalign: o.misalign,
        word: rt.calloc::<u64>(1)?,
        sig: rt.calloc::<u64>(1)?,
        big,
        big_bytes,
        src: pages(0x5a),
        scratch: RefCell::new(pages(0xa5)),
        gsrc: rt.alloc_aligned::<u64>(MAX_SIZE / ELEM, PAGE)?,
        window: RefCell::new(None),
        module: rt.load_module(&kernels::PTX)?,
        stream: rt.create_stream()?,
        sampler: RefCell::new(Sampler::default()),
    };
    rt.put(c.gsrc.at(0), words(&c.src, MAX_SIZE), me)?;
    let device = if rt.is_gpu() { "cuda" } else { "cpu" };
    // Pre-touch: each PE writes every page of its own copy of `big`, so no page is
    // first allocated inside a measurement; the warm-up then maps PE 1's pages into PE 0.
    rt.put(c.big.at(0), words(&c.src, MAX_SIZE + PAGE), me)?;
    rt.barrier_all()?;
    let mut out = RowsOut::open(if me == 0 { rows_file } else { None })?;
    if o.matrix {
        if me == 0 && !o.json {
            println!(
                "symmem-perf --matrix: {n} PEs ({}); median of {} repetitions of up to {} iterations per cell",
                rt.device_description(),
                o.reps,
                o.iters
            );
        }
        matrix::run(&c, o, device)?;
    } else {
        measure_all(&c, o, device, &mut out)?;
    }
    let Ctx {
        word,
        sig,
        big,
        gsrc,
        window,
        ..
    } = c;
    if let Some(Window { dst, src }) = window.into_inner() {
        rt.free(src)?;
        rt.free(dst)?;
    }
    rt.free(gsrc)?;
    rt.free(big)?;
    rt.free(sig)?;
    rt.free(word)?;
    rt.finalize()?;
    if let (0, Some((rows, dir))) = (me, own) {
        if let Err(e) = replot(rows, dir) {
            eprintln!("symmem-perf: {e}");
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where PE 0 appends its JSON rows for `--plot` (nowhere without it).
struct RowsOut(Option<std::fs::File>);

impl RowsOut {
    /// Opens `path` for appending.
    fn open(path: Option<&Path>) -> symmem::Result<Self> {
        path.map(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| symmem::Error::InvalidArgument {
                    op: "--plot",
                    reason: format!("{}: {e}", p.display()),
                })
        })
        .transpose()
        .map(RowsOut)
    }

    /// Appends one line.
    fn line(&mut self, line: &str) -> symmem::Result<()> {
        if let Some(f) = &mut self.0 {
            writeln!(f, "{line}").map_err(|e| symmem::Error::InvalidArgument {
                op: "--plot",
                reason: format!("writing the rows: {e}"),
            })?;
        }
        Ok(())
    }
}

/// Measures every selected group at its sizes and prints the rows on PE 0.
fn measure_all(c: &Ctx, o: &Options, device: &str, out: &mut RowsOut) -> symmem::Result<()> {
    let (rt, me, n) = (c.rt, c.rt.my_pe(), c.rt.n_pes());
    // The PE 0 <-> PE 1 route, seen from whichever end this PE is (idle PEs look at PE 1).
    let transport = Transport::detect(rt, &c.word, if me == 1 { 0 } else { 1 })?;
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
    // Each group with its sizes: the last member is the benchmark, whose sizes apply to its
    // baseline too.
    let plan: Vec<_> = groups(o, rt.is_gpu(), transport)
        .into_iter()
        .map(|group| {
            let sizes = sizes_for(group[group.len() - 1].sizes, o.sweep);
            (group, sizes)
        })
        .collect();
    let mut progress = Progress::new(plan.iter().map(|(_, sizes)| sizes.len()).sum());
    for (group, sizes) in plan {
        let mut rows: Vec<Vec<Row>> = group.iter().map(|_| Vec::new()).collect();
        for &size in &sizes {
            if me == 0 {
                progress.point(group[group.len() - 1].metric, size, None);
            }
            let stats = measure::measure(c, &group, size, o)?;
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
            if printed.contains(&(b.metric, b.initiator)) {
                continue;
            }
            printed.push((b.metric, b.initiator));
            let dirs = directions(b, o);
            let labels = Labels {
                unit: b.kind.unit(),
                transport: transport.name(),
                initiator: b.initiator.name(),
                device,
                direction: direction(dirs),
                pair: None,
                misalign: (o.misalign > 0 && host::MISALIGNED.contains(&(b.metric, b.initiator)))
                    .then_some(o.misalign),
            };
            for r in &rows[i] {
                let line = json_line(r.metric, r.size, &r.stats, &labels);
                if o.json {
                    println!("{line}");
                }
                out.line(&line)?;
            }
            if !o.json {
                let base = if i > 0 { rows[0].as_slice() } else { &[] };
                print_table(b, &rows[i], base, &labels);
            }
        }
    }
    Ok(())
}

/// `--transport all`: runs this program once per usable transport, with the same
/// arguments but that transport; says why a transport is skipped.
fn run_all_transports(args: &[String], pes: Option<usize>) -> Result<(), String> {
    if pes.is_none() {
        return Err("--transport all needs --pes N (it launches one job per transport)".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let config = symmem::config::Config::from_env().map_err(|e| e.to_string())?;
    let mut transports = Vec::new();
    for t in Transport::all() {
        match t {
            Transport::P2p => transports.push(t),
            Transport::Remote(name) => match symmem::transport_probe(name, &config) {
                Ok(_) => transports.push(t),
                // On stderr, so that --json output stays JSON lines only.
                Err(why) => eprintln!("symmem-perf: --transport all: {name} skipped: {why}"),
            },
        }
    }
    // The arguments without `--transport all` (either spelling), then the one transport.
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--transport" => {
                it.next();
            }
            a if a.starts_with("--transport=") => {}
            _ => rest.push(a.clone()),
        }
    }
    for t in transports {
        let mut child_args = rest.clone();
        child_args.extend(["--transport".to_string(), t.name().to_string()]);
        let status = std::process::Command::new(&exe)
            .args(&child_args)
            .status()
            .map_err(|e| format!("starting {}: {e}", exe.display()))?;
        if !status.success() {
            return Err(format!("the {} run failed ({status})", t.name()));
        }
    }
    Ok(())
}

/// Charts the rows of `from` into `dir` and says which files it wrote.
fn replot(from: &Path, dir: &Path) -> Result<(), String> {
    let rows = plot::read_rows(from)?;
    let files = plot::write_charts(&rows, dir)?;
    if files.is_empty() {
        println!(
            "symmem-perf --plot: no metric of {} has two sizes or more: no chart",
            from.display()
        );
    }
    for f in files {
        println!("symmem-perf --plot: wrote {}", f.display());
    }
    Ok(())
}

/// The metric list of `--help`: every metric with its initiators.
fn metrics_help() -> String {
    let mut text =
        String::from("metrics (initiators in brackets; `*`: CPU PEs only, `+`: GPU PEs only):\n");
    let mut seen: Vec<&str> = Vec::new();
    for b in BENCHES {
        if seen.contains(&b.metric) {
            continue;
        }
        seen.push(b.metric);
        let initiators: Vec<String> = BENCHES
            .iter()
            .filter(|d| d.metric == b.metric)
            .map(|d| {
                let mark = match d.on {
                    On::Both => "",
                    On::Cpu => "*",
                    On::Gpu => "+",
                };
                format!("{}{mark}", d.initiator.name())
            })
            .collect();
        text.push_str(&format!(
            "  {:<30} [{}] {}\n",
            b.metric,
            initiators.join(" "),
            b.about
        ));
    }
    text
}

/// Parses the arguments, self-launches with `--pes N`, and runs.
fn main() -> ExitCode {
    // SAFETY: setting a signal disposition to SIG_DFL before any thread is started has no
    // memory-safety preconditions. Rust ignores SIGPIPE, which turns `symmem-perf | head`
    // into a panic in println!; the default action ends the process quietly instead.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fail = |e: String| {
        eprintln!("symmem-perf: {e}");
        ExitCode::from(2)
    };
    let argv = std::iter::once("symmem-perf".to_string()).chain(args.iter().cloned());
    let options = match parse_args(argv, &metrics_help()) {
        Err(ParseError::Clap(e)) => e.exit(),
        Ok(Command::Replot { dir, from }) => {
            return replot(&from, &dir).map_or_else(fail, |()| ExitCode::SUCCESS)
        }
        Ok(Command::Run(o)) => o,
        Err(ParseError::Usage(e)) => {
            return fail(format!("{e}\n\nFor more information, try '--help'."))
        }
    };
    // The rows file: an ancestor's, or this run's own (truncated now, charted at the end).
    let inherited = std::env::var_os(ROWS_ENV).map(PathBuf::from);
    let own_rows = match (&options.plot, &inherited) {
        (Some(dir), None) => {
            let rows = dir.join("rows.jsonl");
            let made = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&rows, ""));
            if let Err(e) = made {
                return fail(format!("--plot {}: {e}", dir.display()));
            }
            std::env::set_var(ROWS_ENV, &rows);
            Some(rows)
        }
        _ => None,
    };
    let rows_file = inherited.or(own_rows.clone());
    // Charts this run's own rows once the measuring is over.
    let chart = |ok: bool| match (&own_rows, &options.plot) {
        (Some(rows), Some(dir)) if ok => match replot(rows, dir) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("symmem-perf: {e}");
                false
            }
        },
        _ => ok,
    };
    let exit = |ok: bool| {
        if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    };
    let remote = match options.transport {
        TransportArg::All => {
            return match run_all_transports(&args, options.pes) {
                Ok(()) => exit(chart(true)),
                Err(e) => fail(e),
            }
        }
        TransportArg::One(Transport::P2p) => None,
        TransportArg::One(t) => Some(t.name()),
    };
    if let Some(t) = remote {
        // Every PE its own (simulated) node, so PE 0 reaches PE 1 over the transport.
        std::env::set_var("SYMMEM_SIMULATE_NODES", "65536");
        std::env::set_var("SYMMEM_REMOTE_TRANSPORT", t);
    }
    let result = symmem::self_launch().and_then(|launch| match launch {
        SelfLaunch::Finished(0) => Ok(exit(chart(true))),
        SelfLaunch::Finished(code) => Ok(ExitCode::from(code.clamp(1, 255) as u8)),
        SelfLaunch::InJob => {
            let own = own_rows.as_deref().zip(options.plot.as_deref());
            run(&options, rows_file.as_deref(), own)
        }
    });
    result.unwrap_or_else(|e| {
        eprintln!("symmem-perf: {e}");
        ExitCode::FAILURE
    })
}
