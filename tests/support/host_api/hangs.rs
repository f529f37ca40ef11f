//! Jobs that hang in a known way, for the hang report (`SYMMEM_HANG_REPORT`): run on 2
//! PEs with `SYMMEM_TIMEOUT` a few seconds above `SYMMEM_HANG_REPORT`, so that PE 0
//! reports the hang and every wait still ends at `SYMMEM_TIMEOUT`. The test reads the
//! report from `SYMMEM_HANG_REPORT_FILE`.

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
