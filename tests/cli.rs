//! The tools and the examples parse their command lines like their neighbours do (clap):
//! `--help` and `--version` print and succeed, `--opt=value` equals `--opt value`, a typo
//! is a usage error (exit code 2) that suggests the option, and symrun passes the
//! program's own arguments on untouched; `symrun --report PID` prints a running job's
//! hang report.

mod common;

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::SYMRUN;

/// The path of example `name` (built by `cargo test`).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    profile_dir.join("examples").join(name)
}

/// `program args` with no inherited `SYMMEM_*` variable.
fn run(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars() {
        if k.starts_with("SYMMEM_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(args).output().expect("running the program")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_and_version_print_and_succeed() {
    for (program, name) in [
        (PathBuf::from(SYMRUN), "symrun"),
        (example("hello"), "hello"),
        (example("transpose"), "transpose"),
    ] {
        let help = run(&program, &["--help"]);
        assert!(help.status.success(), "{name} --help: {help:?}");
        assert!(
            text(&help.stdout).contains("Usage:"),
            "{name} --help: {help:?}"
        );
        let version = run(&program, &["--version"]);
        assert_eq!(
            text(&version.stdout).trim(),
            format!("{name} {}", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn hello_with_pes_equals_runs_that_many_pes() {
    let out = run(example("hello"), &["--pes=2"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for me in 0..2 {
        assert!(stdout.contains(&format!("PE {me} of 2 ")), "{stdout}");
    }
}

#[test]
fn typos_are_usage_errors_with_a_suggestion() {
    for (program, typo, suggestion) in [
        (
            PathBuf::from(SYMRUN),
            &["-n", "2", "--tag-ouput", "true"][..],
            "--tag-output",
        ),
        (example("transpose"), &["--size", "64"], "--sizes"),
    ] {
        let out = run(&program, typo);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{typo:?}: {stderr}");
        assert!(
            stderr.contains(&format!("'{suggestion}'")),
            "{typo:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{typo:?} ran");
    }
}

#[test]
fn symrun_passes_the_programs_own_arguments_untouched() {
    let out = run(
        SYMRUN,
        &[
            "--np=2",
            "sh",
            "-c",
            "echo \"$0 $*\"",
            "--pes",
            "3",
            "-x",
            "-np",
            "4",
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert_eq!(
        stdout.lines().filter(|l| *l == "--pes 3 -x -np 4").count(),
        2,
        "{stdout}"
    );
}

/// Without `--tag-output`, symrun still forwards each PE's output in whole lines, stdout
/// and stderr apart: four PEs that each write a line in two pieces, all at once, never mix
/// mid-line (before, their pieces came through as written: `start-0 start-1 ... end-0`).
#[test]
fn symrun_forwards_whole_lines_with_or_without_tags() {
    let script = "printf 'start-%s ' $SYMMEM_LAUNCH_RANK; printf 'err-%s ' $SYMMEM_LAUNCH_RANK >&2; \
                  sleep 0.3; printf 'end-%s\\n' $SYMMEM_LAUNCH_RANK; \
                  printf 'done-%s\\n' $SYMMEM_LAUNCH_RANK >&2; printf 'tail-%s' $SYMMEM_LAUNCH_RANK";
    for tagged in [false, true] {
        let mut args = vec!["-n", "4"];
        if tagged {
            args.push("--tag-output");
        }
        args.extend(["sh", "-c", script]);
        let out = run(SYMRUN, &args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{stdout}{stderr}");
        for (stream, first, last) in [(&stdout, "start", "end"), (&stderr, "err", "done")] {
            let mut seen = Vec::new();
            for line in stream.lines() {
                let (tag, body) = match line.strip_prefix("[PE ") {
                    Some(rest) => rest.split_once("] ").expect("a tagged line"),
                    None => ("", line),
                };
                assert_eq!(tagged, !tag.is_empty(), "{line:?} in {stream:?}");
                let rank = body.rsplit('-').next().expect("a rank");
                if tagged {
                    assert_eq!(tag, rank, "{line:?}");
                }
                if let Some(rest) = body.strip_prefix(&format!("{first}-{rank} ")) {
                    assert_eq!(rest, format!("{last}-{rank}"), "a mixed line: {stream:?}");
                } else {
                    assert_eq!(body, format!("tail-{rank}"), "a mixed line: {stream:?}");
                }
                seen.push(line.to_string());
            }
            let whole = if first == "start" { 8 } else { 4 };
            assert_eq!(seen.len(), whole, "{stream:?}");
        }
    }
}

/// `symrun --report PID` while the job hangs (PE 0 waits for a signal that PE 1, in user
/// code, sends only once an asked-for report is in the job's file): symrun forwards
/// SIGUSR1 to PE 0, whose report `--report` finds in symrun's per-job file (in a private
/// `XDG_RUNTIME_DIR` here) and prints; the job then ends well, and symrun names the file.
#[test]
fn symrun_report_prints_a_running_jobs_hang_report() {
    let runtime_dir =
        std::env::temp_dir().join(format!("symmem-cli-report-{}", std::process::id()));
    std::fs::create_dir_all(&runtime_dir).unwrap();
    let mut cmd = Command::new(SYMRUN);
    for (k, _) in std::env::vars() {
        if k.starts_with("SYMMEM_") {
            cmd.env_remove(k);
        }
    }
    let mut job = cmd
        .args(["-n", "2", common::test_pe(), "api_hang_until_asked"])
        .env("SYMMEM_TEST_EXPECT_PES", "2")
        .env("SYMMEM_TEST_EXPECT_BOOTSTRAP", "tcp")
        .env("SYMMEM_HANG_REPORT", "60")
        .env("SYMMEM_TIMEOUT", "30")
        .env("XDG_RUNTIME_DIR", &runtime_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting symrun");
    let pid = job.id().to_string();
    let mut stdout = std::io::BufReader::new(job.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("PE 1: hanging") {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let out = job.wait_with_output().unwrap();
            panic!("the job ended before it hung: {seen}{}", text(&out.stderr));
        }
        seen += &line;
    }
    // PE 0's wait is published once it stops spinning (microseconds): margin.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let report = Command::new(SYMRUN)
        .args(["--report", &pid])
        .output()
        .unwrap();
    let printed = text(&report.stdout);
    let job = job.wait_with_output().unwrap();
    let stderr = text(&job.stderr);
    // What `symrun --report` prints, for the book's chapter.
    eprintln!("{printed}");
    assert!(
        report.status.success(),
        "{printed}{}\njob:\n{stderr}",
        text(&report.stderr)
    );
    for want in [
        "hang report from PE 0\n",
        "root: PE 1 is in user code",
        "[in user code]",
        "  PE 0: waiting ",
        " s in signal_wait_until: signal #0[0] Ge 1 (last seen 0)",
        "  PE 1: outside symmem (in user code) for ",
        "chain: PE 0 -> PE 1\n",
    ] {
        assert!(
            printed.contains(want),
            "--report lacks {want:?}:\n{printed}"
        );
    }
    assert!(job.status.success(), "{stderr}");
    assert!(
        stderr.contains("symrun: SIGUSR1: PE 0 (pid "),
        "symrun forwards to PE 0:\n{stderr}"
    );
    assert_eq!(stderr.matches("hang report from PE").count(), 1, "{stderr}");
    assert!(
        stderr.contains("this job's hang reports (JSON lines) are in"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&runtime_dir).unwrap();
}

/// `--report` names what is wrong: a process that is not there, or usage mixed with a job.
#[test]
fn symrun_report_errors_name_the_process() {
    let out = run(SYMRUN, &["--report", "4294967295"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("symrun --report: reading /proc/4294967295/environ"),
        "{stderr}"
    );
    let out = run(SYMRUN, &["--report", "-n", "2", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}
