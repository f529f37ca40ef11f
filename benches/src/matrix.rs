//! `--matrix`: put bandwidth (1 MiB, one-way) and 8-byte put_signal ping-pong latency
//! between every ordered pair of PEs, in the style of CUDA's p2pBandwidthLatencyTest. One
//! pair is measured at a time while the other PEs wait in the barriers; the source PE
//! sends its results to PE 0, which prints the two PE × PE tables. A slow link (a pair
//! that crosses a socket, say, with `SYMMEM_SIMULATE_NODES=2`) shows as one odd cell.

use crate::args::Options;
use crate::ctx::{Ctx, Role};
use crate::initiator::Initiator;
use crate::measure::{bench, measure};
use crate::progress::Progress;
use crate::report::{json_line, Labels};
use crate::stats::Stats;
use crate::table::Transport;

/// The size of the bandwidth cells.
pub const BW_SIZE: usize = 1 << 20;

/// The size of the latency cells.
const LAT_SIZE: usize = 8;

/// Values per pair in the results buffer: the bandwidth's median, p50, p99, stdev and
/// sample size, the latency's likewise, and the transport (as an index of
/// [`Transport::all`]).
const FIELDS: usize = 11;

/// Measures every ordered pair and prints the tables on PE 0 (collective).
pub fn run(c: &Ctx, o: &Options, device: &str) -> symmem::Result<()> {
    let rt = c.rt;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let gpu = rt.is_gpu();
    let bw = bench("put_bw", Initiator::Host, gpu).expect("put_bw is in the table");
    let lat = bench("put_signal_pingpong_latency", Initiator::Host, gpu)
        .expect("put_signal_pingpong_latency is in the table");
    let results = rt.calloc::<u64>(n * n * FIELDS)?;
    let mut progress = Progress::new(2 * n * (n - 1));
    for src in 0..n {
        for dst in (0..n).filter(|&d| d != src) {
            let (role, peer) = match me {
                m if m == src => (Role::Initiator, dst),
                m if m == dst => (Role::Target, src),
                _ => (Role::Idle, 0),
            };
            c.role.set(role);
            c.peer.set(peer);
            if me == 0 {
                progress.point(bw.metric, BW_SIZE, Some((src, dst)));
            }
            let b = measure(c, &[bw], BW_SIZE, o)?[0];
            if me == 0 {
                progress.point(lat.metric, LAT_SIZE, Some((src, dst)));
            }
            let l = measure(c, &[lat], LAT_SIZE, o)?[0];
            if me == src {
                let t = Transport::detect(rt, &c.word, dst)?;
                let code = Transport::all().iter().position(|&x| x == t).unwrap_or(0);
                let mut vals = Vec::with_capacity(FIELDS);
                for s in [b, l] {
                    vals.extend([s.median, s.p50, s.p99, s.stdev].map(f64::to_bits));
                    vals.push(s.sample_ops as u64);
                }
                vals.push(code as u64);
                rt.put(results.at((src * n + dst) * FIELDS), &vals, 0)?;
                rt.quiet()?;
            }
            rt.barrier_all()?;
        }
    }
    if me == 0 {
        let mut all = vec![0u64; n * n * FIELDS];
        rt.get(results.at(0), &mut all, 0)?;
        print(&all, n, o, device);
    }
    rt.barrier_all()?;
    rt.free(results)?;
    Ok(())
}

/// The summary at `at` of a pair's fields.
fn stats(f: &[u64], at: usize) -> Stats {
    let v = |i: usize| f64::from_bits(f[at + i]);
    Stats {
        median: v(0),
        min: v(0),
        max: v(0),
        p50: v(1),
        p99: v(2),
        stdev: v(3),
        sample_ops: f[at + 4] as usize,
    }
}

/// Prints the two tables (or the JSON rows) from the pairs' fields.
fn print(all: &[u64], n: usize, o: &Options, device: &str) {
    let pair = |s: usize, d: usize| &all[(s * n + d) * FIELDS..(s * n + d + 1) * FIELDS];
    let transports = Transport::all();
    let transport_of = |f: &[u64]| transports[f[10] as usize % transports.len()].name();
    if o.json {
        for s in 0..n {
            for d in (0..n).filter(|&d| d != s) {
                let f = pair(s, d);
                let transport = transport_of(f);
                for (metric, size, at, unit) in [
                    ("put_bw", BW_SIZE, 0, "GB/s"),
                    ("put_signal_pingpong_latency", LAT_SIZE, 5, "us"),
                ] {
                    let labels = Labels {
                        unit,
                        transport,
                        initiator: "host",
                        device,
                        direction: "oneway",
                        pair: Some((s, d)),
                        misalign: None,
                    };
                    println!("{}", json_line(metric, size, &stats(f, at), &labels));
                }
            }
        }
        return;
    }
    for (title, at) in [
        ("put bandwidth (GB/s, 1 MiB, one-way)", 0),
        ("put_signal ping-pong latency (µs, 8 B, one-way)", 5),
    ] {
        println!();
        println!("{title}: row = source PE, column = destination PE");
        let mut head = format!("{:>8}", "src\\dst");
        for d in 0..n {
            head.push_str(&format!("  {d:>10}"));
        }
        println!("{head}");
        for s in 0..n {
            let mut line = format!("{s:>8}");
            for d in 0..n {
                if s == d {
                    line.push_str(&format!("  {:>10}", "-"));
                } else {
                    line.push_str(&format!("  {:>10.4}", stats(pair(s, d), at).median));
                }
            }
            println!("{line}");
        }
    }
    println!();
    println!("routes (row = source PE, column = destination PE):");
    for s in 0..n {
        let mut line = format!("{s:>8}");
        for d in 0..n {
            let name = if s == d {
                "-"
            } else {
                transport_of(pair(s, d))
            };
            line.push_str(&format!("  {name:>10}"));
        }
        println!("{line}");
    }
}
