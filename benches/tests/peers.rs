//! The side-by-side comparison (`benches/peers/run.sh --quick --rounds 2`, with this
//! build's symmem-perf) runs end to end: every peer and limit reports its metrics in each
//! round, the table has a column for each with ratios paired round by round, and the JSON
//! and the chart are written. Values are not checked: on a
//! shared machine they mean little, and performance is measured, not asserted.
//! Skipped, with the reason printed, only where Open MPI or a C compiler is missing.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use symmem_test_harness::{wait_job, OmpiSession};

/// What each program of run.sh must report (its `source` tag, its metrics).
const EXPECTED: &[(&str, &[&str])] = &[
    (
        "limits-flags",
        &[
            "c_flag_pingpong_same_line_latency",
            "c_flag_pingpong_separate_pages_latency",
        ],
    ),
    ("limits-memcpy", &["c_memcpy_bw"]),
    ("symmem-p2p", SYMMEM),
    ("symmem-socket", SYMMEM),
    (
        "oshmem",
        &[
            "oshmem_p_wait_pingpong_latency",
            "oshmem_p_latency",
            "oshmem_g_latency",
            "oshmem_atomic_fetch_add_latency",
            "oshmem_barrier_all_latency",
            "oshmem_put_bw",
        ],
    ),
    ("mpi", &mpi_metrics::<false>()),
    ("mpi-tcp", &mpi_metrics::<true>()),
    ("tcp", &["c_tcp_pingpong_latency", "c_tcp_stream_bw"]),
];

/// symmem-perf's metrics that run.sh asks for, at the host initiator.
const SYMMEM: &[&str] = &[
    "put_signal_pingpong_latency",
    "put_latency",
    "get_latency",
    "atomic_fetch_add_latency",
    "put_bw",
    "barrier_all_latency",
];

/// mpi_perf's metrics, over shared memory or (`TCP`) over the TCP BTL.
const fn mpi_metrics<const TCP: bool>() -> [&'static str; 7] {
    if TCP {
        [
            "mpi_tcp_put_latency",
            "mpi_tcp_get_latency",
            "mpi_tcp_fetch_and_op_latency",
            "mpi_tcp_sendrecv_pingpong_latency",
            "mpi_tcp_barrier_latency",
            "mpi_tcp_put_bw",
            "mpi_tcp_send_bw",
        ]
    } else {
        [
            "mpi_put_latency",
            "mpi_get_latency",
            "mpi_fetch_and_op_latency",
            "mpi_sendrecv_pingpong_latency",
            "mpi_barrier_latency",
            "mpi_put_bw",
            "mpi_send_bw",
        ]
    }
}

/// The peer columns of the host table (table.py's keys).
const COLUMNS: &[&str] = &["oshmem", "mpi_rma", "mpi_2sided", "tcp", "limit"];

/// Whether `tool` is on the PATH.
fn found(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn every_peer_reports_its_metrics_in_one_table() {
    let mpicc = if found("mpicc.openmpi") {
        "mpicc.openmpi"
    } else {
        "mpicc"
    };
    for tool in ["cc", mpicc, "mpirun", "oshcc", "oshrun", "python3"] {
        if !found(tool) {
            eprintln!("SKIPPED: {tool} not found (the peer comparison needs Open MPI, a C compiler and python3; scripts/test-all.sh installs them)");
            return;
        }
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::env::temp_dir().join(format!("symmem-peers-test.{}", std::process::id()));
    let mut cmd = Command::new("bash");
    cmd.arg(repo.join("benches/peers/run.sh"))
        .args([
            "--quick",
            "--rounds",
            "2",
            "--perf",
            env!("CARGO_BIN_EXE_symmem-perf"),
            "--out",
        ])
        .arg(&out)
        .env("PEERS_TIMEOUT", "150")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("SYMMEM_") {
            cmd.env_remove(k);
        }
    }
    let _session = OmpiSession::apply(&mut cmd);
    let job = wait_job(
        cmd.spawn().expect("starting bash benches/peers/run.sh"),
        Duration::from_secs(600),
    );
    job.assert_success();
    if !job
        .stdout
        .contains("| metric | transport | size | unit (better) | symmem |")
    {
        job.fail("no table on stdout");
    }
    let json = std::fs::read_dir(&out)
        .expect("the --out directory")
        .map(|e| e.expect("a directory entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap_or_else(|| job.fail("no peers-*.json written"));
    let svg = json.with_extension("svg");
    // The JSON parses (python3's json module) and says which source reported which
    // metric, and which peer columns the table filled.
    let summary = Command::new("python3")
        .args([
            "-c",
            "import json, sys\n\
             d = json.load(open(sys.argv[1]))\n\
             for r in d['rows']: print('row', r['source'], r['metric'], r.get('transport'), r.get('initiator'))\n\
             for t in d['table']:\n\
             \x20   for c, v in t['peers'].items(): print('cell', c, 'paired' if 'ratio_range' in v else 'single')",
        ])
        .arg(&json)
        .output()
        .expect("running python3");
    let summary = String::from_utf8_lossy(&summary.stdout).into_owned();
    for (source, metrics) in EXPECTED {
        for metric in *metrics {
            let host_row = summary.lines().any(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                f.len() == 5
                    && f[..3] == ["row", source, metric]
                    && (!source.starts_with("symmem") || f[4] == "host")
            });
            if !host_row {
                job.fail(&format!(
                    "{source} reported no {metric} in {}:\n{summary}",
                    json.display()
                ));
            }
        }
    }
    // Two rounds: every peer column has a cell whose ratio is the median of the two
    // rounds' own ratios.
    for column in COLUMNS {
        if !summary
            .lines()
            .any(|l| l == format!("cell {column} paired"))
        {
            job.fail(&format!(
                "the table has no {column} cell paired over the rounds:\n{summary}"
            ));
        }
    }
    let chart = std::fs::read_to_string(&svg)
        .unwrap_or_else(|e| job.fail(&format!("{}: {e}", svg.display())));
    if !chart.starts_with("<svg") || !chart.trim_end().ends_with("</svg>") {
        job.fail("the chart is not an SVG document");
    }
    let _ = std::fs::remove_dir_all(&out);
}
