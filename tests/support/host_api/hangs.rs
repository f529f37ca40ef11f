//! Jobs that hang in a known way, for the hang report (`SYMMEM_HANG_REPORT`): run on 2
//! PEs with `SYMMEM_TIMEOUT` a few seconds above `SYMMEM_HANG_REPORT`, so that PE 0
//! reports the hang and every wait still ends at `SYMMEM_TIMEOUT`. The test reads the
//! report from `SYMMEM_HANG_REPORT_FILE`. [`hang_asked`] asks for reports (SIGUSR1)
//! instead, with `SYMMEM_HANG_REPORT` far above the run's time.

use std::time::Duration;

use symmem::{Cmp, Runtime};
use symmem_example_kernels::{pipeline_consume, PTX};

use super::{check, expect_err, finish, OrFail, Outcome};

/// `SYMMEM_TIMEOUT`, which the scenarios need set.
fn timeout(rt: &Runtime) -> Result<Duration, String> {
    rt.config()
        .timeout
        .ok_or_else(|| "the hang scenarios need SYMMEM_TIMEOUT set".to_string())
}

/// PE 0 waits for a signal that PE 1 never sends; PE 1 sits in user code (a sleep) until
/// PE 0 has timed out. Root: PE 1, in user code.
pub fn hang_forgotten_signal(rt: &Runtime) -> Outcome {
    finish(rt, "hang_forgotten_signal", forgotten_signal(rt))
}

fn forgotten_signal(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    let limit = timeout(rt)?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    if rt.my_pe() == 0 {
        let r = rt.signal_wait_until(sig.at(0), Cmp::Ge, 1);
        expect_err(r, "Timeout", &["signal_wait_until on PE 0".to_string()])?;
    } else {
        // Outside symmem past PE 0's timeout: entering free (or finalize) earlier would
        // be seen by PE 0 at once, not reported as a hang.
        std::thread::sleep(limit + Duration::from_millis(1500));
    }
    rt.free(sig).or_fail()
}

/// PE 0's kernel waits in a device `signal_wait_until` (the example pipeline's consumer,
/// one chunk) for a signal that PE 1 never sends; PE 1 sits in user code (a sleep) until
/// PE 0's kernel has timed out. Root: PE 1, in user code; PE 0 waits in `device
/// wait_until`, found through its device wait record. Needs CPU PEs (or a GPU PE), each
/// with the example kernels.
pub fn hang_device_signal(rt: &Runtime) -> Outcome {
    finish(rt, "hang_device_signal", device_signal(rt))
}

fn device_signal(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    let limit = timeout(rt)?;
    let module = rt.load_module(&PTX).or_fail()?;
    let chunk = rt.calloc::<u64>(1).or_fail()?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    let sum = rt.calloc::<u64>(1).or_fail()?;
    if rt.my_pe() == 0 {
        let local = |b| {
            rt.ptr(b, 0)
                .or_fail()
                .map(|p| p.expect("own heap").as_ptr())
        };
        let (chunk_p, sig_p, sum_p) = (local(&chunk)?, local(&sig)?, local(&sum)?);
        // SAFETY: symmetric addresses of live allocations of one u64 each, one chunk.
        let r = unsafe {
            rt.launch(
                &module,
                pipeline_consume::KERNEL,
                1,
                1,
                (chunk_p.cast_const(), 1usize, 1usize, sig_p, sum_p),
            )
        };
        expect_err(
            r,
            "KernelFailed",
            &["PE 0's device wait_until: the word at heap offset".to_string()],
        )?;
    } else {
        // Outside symmem past PE 0's timeout, as in `hang_forgotten_signal`.
        std::thread::sleep(limit + Duration::from_millis(1500));
    }
    rt.free(sum).or_fail()?;
    rt.free(sig).or_fail()?;
    rt.free(chunk).or_fail()
}

/// PE 0 enters `barrier_all`; PE 1 skips it and waits for a signal nobody sends. Root:
/// PE 1, not in the barrier, in a signal wait no PE will write.
pub fn hang_barrier_skipped(rt: &Runtime) -> Outcome {
    finish(rt, "hang_barrier_skipped", barrier_skipped(rt))
}

fn barrier_skipped(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    timeout(rt)?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    if rt.my_pe() == 0 {
        expect_err(
            rt.barrier_all(),
            "Timeout",
            &["barrier_all on PE 0".to_string()],
        )?;
    } else {
        let r = rt.signal_wait_until(sig.at(0), Cmp::Ge, 1);
        expect_err(r, "Timeout", &["signal_wait_until on PE 1".to_string()])?;
    }
    rt.free(sig).or_fail()
}

/// PE 0 enters `barrier_all` while PE 1 enters a broadcast on TEAM_WORLD. Root: the
/// mismatched collectives, naming both PEs.
pub fn hang_mismatched_collectives(rt: &Runtime) -> Outcome {
    finish(
        rt,
        "hang_mismatched_collectives",
        mismatched_collectives(rt),
    )
}

fn mismatched_collectives(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    timeout(rt)?;
    let buf = rt.calloc::<u64>(1).or_fail()?;
    if rt.my_pe() == 0 {
        expect_err(
            rt.barrier_all(),
            "Timeout",
            &["barrier_all on PE 0".to_string()],
        )?;
    } else {
        let r = rt.team_world().broadcast(&buf, &buf, 1, 0);
        expect_err(r, "Timeout", &["team_broadcast on PE 1".to_string()])?;
    }
    rt.free(buf).or_fail()
}

/// PE 1 stops (SIGSTOP) before the signal PE 0 waits for: its listener's kernel still
/// accepts the connection, but nothing answers. Root: PE 1, not answering. PE 0 wakes PE
/// 1 (SIGCONT, at the pid PE 1 put in PE 0's heap) once its wait has timed out.
pub fn hang_stopped_pe(rt: &Runtime) -> Outcome {
    finish(rt, "hang_stopped_pe", stopped_pe(rt))
}

fn stopped_pe(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    timeout(rt)?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    let pid = rt.calloc::<u64>(1).or_fail()?;
    if rt.my_pe() == 1 {
        rt.atomic_set(pid.at(0), u64::from(std::process::id()), 0)
            .or_fail()?;
        // SAFETY: raise has no memory-safety preconditions; PE 0 continues this process.
        unsafe { libc::raise(libc::SIGSTOP) };
    } else {
        let r = rt.signal_wait_until(sig.at(0), Cmp::Ge, 1);
        expect_err(r, "Timeout", &["signal_wait_until on PE 0".to_string()])?;
        let stopped = rt.wait_until(pid.at(0), Cmp::Ne, 0).or_fail()?;
        // SAFETY: kill has no memory-safety preconditions; the pid is PE 1's process.
        let sent = unsafe { libc::kill(stopped as libc::pid_t, libc::SIGCONT) };
        check!(sent == 0, "SIGCONT to PE 1 (process {stopped}) failed");
    }
    rt.free(pid).or_fail()?;
    rt.free(sig).or_fail()
}

/// PE 0 polls a word with `test` in a loop (the OpenSHMEM idiom) that PE 1, in user code,
/// never writes; the loop gives up at `SYMMEM_TIMEOUT`. Root: PE 1, in user code; PE 0
/// is shown waiting in its loop of tests, not in user code.
pub fn hang_test_loop(rt: &Runtime) -> Outcome {
    finish(rt, "hang_test_loop", test_loop(rt))
}

fn test_loop(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    let limit = timeout(rt)?;
    let flag = rt.calloc::<u64>(1).or_fail()?;
    if rt.my_pe() == 0 {
        let t0 = std::time::Instant::now();
        while !rt.test(flag.at(0), Cmp::Eq, 1).or_fail()? {
            check!(
                t0.elapsed() < limit + limit,
                "the flag was never set, as planned"
            );
            if t0.elapsed() >= limit {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    } else {
        std::thread::sleep(limit + Duration::from_millis(1500));
    }
    rt.free(flag).or_fail()
}

/// PE 1, on another node, stops (SIGSTOP) once it has told PE 0 its pid; PE 0 puts to it
/// and quiets, which waits inside the transport for PE 1's answer until a thread of PE 0
/// wakes PE 1 (SIGCONT) after `SYMMEM_HANG_REPORT` + 4 s (the report waits 2 s for an
/// answer: a PE woken before would answer). Root: PE 1, not answering;
/// PE 0 is shown in quiet, waiting for PE 1. Needs `SYMMEM_TIMEOUT` unset (a transport
/// that times out fails the connection for good).
pub fn hang_quiet_stopped_peer(rt: &Runtime) -> Outcome {
    finish(rt, "hang_quiet_stopped_peer", quiet_stopped_peer(rt))
}

fn quiet_stopped_peer(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    let after = rt
        .config()
        .hang_report
        .ok_or_else(|| "needs SYMMEM_HANG_REPORT".to_string())?;
    let pid = rt.calloc::<u64>(1).or_fail()?;
    let data = rt.calloc::<u64>(1024).or_fail()?;
    rt.barrier_all().or_fail()?;
    if rt.my_pe() == 1 {
        rt.atomic_set(pid.at(0), u64::from(std::process::id()), 0)
            .or_fail()?;
        rt.quiet().or_fail()?;
        // SAFETY: raise has no memory-safety preconditions; PE 0 continues this process.
        unsafe { libc::raise(libc::SIGSTOP) };
    } else {
        let stopped = rt.wait_until(pid.at(0), Cmp::Ne, 0).or_fail()?;
        // Give PE 1 time to stop before the put.
        std::thread::sleep(Duration::from_millis(200));
        let waker = std::thread::spawn(move || {
            std::thread::sleep(after + Duration::from_secs(4));
            // SAFETY: kill has no memory-safety preconditions; the pid is PE 1's process.
            unsafe { libc::kill(stopped as libc::pid_t, libc::SIGCONT) }
        });
        rt.put(data.at(0), &[7u64; 1024], 1).or_fail()?;
        rt.quiet().or_fail()?;
        let sent = waker.join().map_err(|_| "the waker panicked".to_string())?;
        check!(sent == 0, "SIGCONT to PE 1 (process {stopped}) failed");
    }
    rt.free(data).or_fail()?;
    rt.free(pid).or_fail()
}

/// PEs 0 and 1 enter `barrier_all`; PE 2 stays in user code (a sleep) past their
/// timeout. Root: PE 2, not in the barrier.
pub fn hang_barrier_three(rt: &Runtime) -> Outcome {
    finish(rt, "hang_barrier_three", barrier_three(rt))
}

fn barrier_three(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 3, "runs on 3 PEs");
    let limit = timeout(rt)?;
    if rt.my_pe() < 2 {
        let r = rt.barrier_all();
        expect_err(r, "Timeout", &[format!("barrier_all on PE {}", rt.my_pe())])?;
    } else {
        std::thread::sleep(limit + Duration::from_millis(1500));
    }
    Ok(())
}

/// `SYMMEM_HANG_REPORT_FILE`, which [`hang_asked`] reads.
fn report_file(rt: &Runtime) -> Result<std::path::PathBuf, String> {
    rt.config()
        .hang_report_file
        .clone()
        .ok_or_else(|| "hang_asked needs SYMMEM_HANG_REPORT_FILE set".to_string())
}

/// Waits in user code (not in symmem) until `file` holds `lines` lines, for at most 10 s.
fn await_reports(file: &std::path::Path, lines: usize) -> Outcome {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let complete = text.matches('\n').count();
        if complete >= lines {
            return Ok(());
        }
        check!(
            std::time::Instant::now() < deadline,
            "{} holds {complete} report lines after 10 s, not {lines}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGUSR1 asks PE 0 for a report twice: first while both PEs are in user code (a report
/// with no hang), then while PE 0 waits for a signal that PE 1, in user code, sends only
/// once the report is in (root: PE 1, in user code). PE 1 sends the signals to PE 0's
/// process, whose pid it reads from its heap.
pub fn hang_asked(rt: &Runtime) -> Outcome {
    finish(rt, "hang_asked", asked(rt))
}

fn asked(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    let file = report_file(rt)?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    let pid = rt.calloc::<u64>(1).or_fail()?;
    if rt.my_pe() == 0 {
        rt.atomic_set(pid.at(0), u64::from(std::process::id()), 1)
            .or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    let pe0 = rt.atomic_fetch(pid.at(0), 1).or_fail()? as libc::pid_t;
    let ask = || -> Outcome {
        // SAFETY: kill has no memory-safety preconditions; the pid is PE 0's process,
        // which stays alive until the barrier below.
        let sent = unsafe { libc::kill(pe0, libc::SIGUSR1) };
        check!(sent == 0, "SIGUSR1 to PE 0 (process {pe0}) failed");
        Ok(())
    };
    // Both PEs in user code: a report with no hang.
    if rt.my_pe() == 1 {
        ask()?;
    }
    await_reports(&file, 1)?;
    rt.barrier_all().or_fail()?;
    if rt.my_pe() == 0 {
        let got = rt.signal_wait_until(sig.at(0), Cmp::Ge, 1).or_fail()?;
        check!(got == 1, "PE 0 woke on signal value {got}, not 1");
    } else {
        // PE 0's wait is published once it stops spinning (microseconds): the sleep is
        // margin for a loaded machine.
        std::thread::sleep(Duration::from_secs(1));
        ask()?;
        await_reports(&file, 2)?;
        rt.signal_op(sig.at(0), 1, symmem::SignalOp::Set, 0)
            .or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    rt.free(pid).or_fail()?;
    rt.free(sig).or_fail()
}

/// For `symrun --report` (tests/cli.rs): PE 0 waits for a signal that PE 1 sends once an
/// asked-for report is in the job's report file (symrun's per-job one); PE 1 prints
/// `PE 1: hanging` when PE 0 is about to wait, then waits in user code.
pub fn hang_until_asked(rt: &Runtime) -> Outcome {
    finish(rt, "hang_until_asked", until_asked(rt))
}

fn until_asked(rt: &Runtime) -> Outcome {
    check!(rt.n_pes() == 2, "runs on 2 PEs");
    let file = report_file(rt)?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    rt.barrier_all().or_fail()?;
    if rt.my_pe() == 0 {
        let got = rt.signal_wait_until(sig.at(0), Cmp::Ge, 1).or_fail()?;
        check!(got == 1, "PE 0 woke on signal value {got}, not 1");
    } else {
        println!("PE 1: hanging");
        await_asked(&file)?;
        rt.signal_op(sig.at(0), 1, symmem::SignalOp::Set, 0)
            .or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    rt.free(sig).or_fail()
}

/// Waits in user code until `file` holds an asked-for report, for at most 20 s.
fn await_asked(file: &std::path::Path) -> Outcome {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains("\"trigger\":\"asked\""))
    {
        check!(
            std::time::Instant::now() < deadline,
            "no asked-for report in {} after 20 s",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
