//! Failing kernels: a panic while sibling threads wait, and a wait (or a device team
//! barrier) for a PE that dies (CPU executor only), and threads that exit before a barrier.

use std::time::{Duration, Instant};

use symmem::Runtime;
use symmem_test_kernels::{collective::coll_barrier, failure as k, threads::count_threads, PTX};

use super::{check_eq, e2s, ensure, expect_kernel_failed, read_all, sym, Outcome};

/// How long a failing launch may take to return: far more than it needs, far less than
/// a hang.
const FAIL_WITHIN: Duration = Duration::from_secs(10);

/// One thread panics while the others of its block wait in `signal_wait_until`,
/// `sync_warp` and `sync_threads`: `launch` (1-D and 2-D) and `launch_cooperative` return
/// `KernelFailed` naming the block and thread, promptly; afterwards kernels run normally.
pub fn kernel_panic(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let me = rt.my_pe();
    let sig = rt.calloc::<u64>(1).map_err(e2s)?;
    let counter = rt.calloc::<u64>(1).map_err(e2s)?;
    let (s, c) = (sym(rt, &sig)?, sym(rt, &counter)?);
    // (cooperative, grid, block, victim block rank, victim thread rank, block, thread)
    type Case = (
        bool,
        (u32, u32),
        (u32, u32),
        u32,
        u32,
        (u32, u32, u32),
        (u32, u32, u32),
    );
    let cases: [Case; 3] = [
        (false, (3, 1), (64, 1), 1, 37, (1, 0, 0), (37, 0, 0)),
        (false, (2, 2), (8, 8), 3, 37, (1, 1, 0), (5, 4, 0)),
        (true, (2, 1), (64, 1), 1, 37, (1, 0, 0), (37, 0, 0)),
    ];
    for (cooperative, grid, block, victim_block, victim_thread, want_block, want_thread) in cases {
        // Blocks before the victim's pass their wait; the victim's never does.
        rt.put(sig.at(0), &[victim_block as u64], me).map_err(e2s)?;
        let start = Instant::now();
        let args = (s, victim_block, victim_thread);
        // SAFETY: `s` is a symmetric address of one u64.
        let r = unsafe {
            if cooperative {
                rt.launch_cooperative(&m, k::panic_one::KERNEL, grid, block, args)
            } else {
                rt.launch(&m, k::panic_one::KERNEL, grid, block, args)
            }
        };
        let took = start.elapsed();
        let text =
            expect_kernel_failed(rt, r, want_block, want_thread, &["deliberate kernel panic"])?;
        ensure(took < FAIL_WITHIN, || {
            format!("the failing launch took {took:?}")
        })?;
        println!("ERROR (expected, after {took:?}): {text}");
    }
    // SAFETY: `c` is a symmetric address of one u64.
    unsafe { rt.launch(&m, count_threads::KERNEL, 2, 64, (c,)) }
        .map_err(|e| format!("launch after the failures: {e}"))?;
    check_eq(
        "threads run after the failures",
        &read_all(rt, &counter)?,
        &[128],
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(sig).map_err(e2s)?;
    rt.free(counter).map_err(e2s)
}

/// PE 0's kernel runs a device `sync_all` that PE 1 never joins: PE 1 is alive but
/// silent, sleeping past the deadline (`SYMMEM_TIMEOUT`, 1 to 10 s). The launch must
/// fail within it, naming PE 0, the wait, PE 1 and the flag's value (on a GPU: the error
/// record of the trapping kernel); PE 0 prints `ERROR (expected) after …: …`. Both then
/// exit at once: a GPU context that trapped takes no more work.
pub fn silent_peer(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let me = rt.my_pe();
    let secs: u64 = std::env::var("SYMMEM_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&s| s > 0 && s <= 10)
        .ok_or("silent_peer needs SYMMEM_TIMEOUT set to a whole number of seconds, 1 to 10")?;
    rt.barrier_all().map_err(e2s)?;
    if me != 0 {
        std::thread::sleep(Duration::from_secs(secs + 2));
        std::process::exit(0);
    }
    let start = Instant::now();
    // SAFETY: the kernel takes no arguments.
    let r = unsafe { rt.launch(&m, k::sync_all_once::KERNEL, 1, 1, ()) };
    let waited = start.elapsed();
    let text = match r {
        Ok(()) => return Err("the device sync_all with a silent peer succeeded".into()),
        Err(e) => e.to_string(),
    };
    let after = format!("timed out after {secs}s");
    for needle in [
        "PE 0's device sync_all for PE 1: the word at heap offset",
        "is 0, waiting for >= ",
        &after,
    ] {
        ensure(text.contains(needle), || {
            format!("the error does not mention {needle:?}: {text}")
        })?;
    }
    println!("ERROR (expected) after {waited:?}: {text}");
    std::process::exit(0);
}

/// PE 1 exits (status 0, without finalize) a second after a barrier, while PE 0's kernel
/// waits for its signal, under a deadline far away (`SYMMEM_TIMEOUT` unset: 60 s, or
/// gpu-check's 120 s). The launch must fail within 20 s with an error naming PE 1: on a
/// GPU the host finds the dead process while the kernel runs and sets the kernel's
/// failed-peer word, which the device wait reads; on the CPU executor the wait checks
/// its peers itself. PE 0 prints `ERROR (expected) after …: …`; both exit 0.
pub fn peer_exits_in_kernel_wait(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let me = rt.my_pe();
    ensure(rt.n_pes() == 2, || {
        "peer_exits_in_kernel_wait runs on 2 PEs".into()
    })?;
    let sig = rt.calloc::<u64>(1).map_err(e2s)?;
    let s = sym(rt, &sig)?;
    rt.barrier_all().map_err(e2s)?;
    if me == 1 {
        std::thread::sleep(Duration::from_secs(1));
        std::process::exit(0);
    }
    let start = Instant::now();
    // SAFETY: `s` is a symmetric address of one u64.
    let r = unsafe { rt.launch(&m, k::wait_forever::KERNEL, 1, 64, (s,)) };
    let waited = start.elapsed();
    let text = match r {
        Ok(()) => return Err("a kernel waiting for a signal from an exited PE succeeded".into()),
        Err(e) => e.to_string(),
    };
    ensure(text.contains("PE 1 failed while PE 0"), || {
        format!("the error does not name PE 1 as the failed peer: {text}")
    })?;
    ensure(waited < Duration::from_secs(20), || {
        format!("the launch failed only after {waited:?}, not at once: {text}")
    })?;
    println!("ERROR (expected) after {waited:?}: {text}");
    std::process::exit(0);
}

/// The last PE kills itself (SIGKILL) once the others are ready; every other PE launches a 64-thread
/// kernel whose thread 0 waits for a signal from it. The launch must fail with
/// `KernelFailed` naming the dead PE; the survivor prints `ERROR after …: …` and exits 3
/// at once (finalize would only report the same failure again).
pub fn kill_in_wait(rt: &Runtime) -> Outcome {
    die_while_others_wait(rt, &|m, s| {
        // SAFETY: `s` is a symmetric address of one u64 (and more).
        unsafe { rt.launch(m, k::wait_forever::KERNEL, 1, 64, (s,)) }
    })
}

/// [`kill_in_wait`] with a device team barrier: the survivors' 64-thread blocks run
/// `team_barrier_block` on TEAM_WORLD (thread 0 waits in the dissemination barrier, the
/// others at the block barrier), which must fail naming the dead PE.
pub fn kill_in_team_barrier(rt: &Runtime) -> Outcome {
    let team = rt.team_world().device().map_err(e2s)?;
    let n = rt.n_pes();
    die_while_others_wait(rt, &|m, s| {
        // SAFETY: `s` is a symmetric address of `n + 1` u64s: the slots and the count.
        unsafe { rt.launch(m, coll_barrier::KERNEL, 1, 64, (team, s, 0, 1, 2, s.add(n))) }
    })
}

/// The last PE kills itself once every other PE is about to `launch` a kernel that waits
/// for it (given a symmetric, zeroed buffer of `n_pes + 1` u64s); each survivor checks
/// that its launch fails naming the dead PE, prints `ERROR after …: …` and exits 3.
fn die_while_others_wait(
    rt: &Runtime,
    launch: &dyn Fn(&symmem::Module, *mut u64) -> symmem::Result<()>,
) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let victim = n - 1;
    let sig = rt.calloc::<u64>(n + 1).map_err(e2s)?;
    let ready = rt.calloc::<u64>(1).map_err(e2s)?;
    let s = sym(rt, &sig)?;
    if me == victim {
        // Die only once every survivor is about to launch its waiting kernel, so that the
        // death is seen by the kernel wait and not by an earlier host barrier.
        rt.wait_until(ready.at(0), symmem::Cmp::Ge, n as u64 - 1)
            .map_err(e2s)?;
        // SAFETY: raising a signal on our own process; nothing runs after it.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    rt.atomic_inc(ready.at(0), victim).map_err(e2s)?;
    let start = Instant::now();
    let r = launch(&m, s);
    let needle = format!("PE {victim} failed while PE {me} was in a kernel wait");
    let text = expect_kernel_failed(rt, r, (0, 0, 0), (0, 0, 0), &[&needle])?;
    println!("ERROR after {:?}: {text}", start.elapsed());
    std::process::exit(3);
}

/// On 2 nodes of 1 PE (`SYMMEM_SIMULATE_NODES=2`): PE 1 kills itself (SIGKILL) once PE 0
/// is ready; PE 0 then launches kernels whose one thread does `g` from PE 1 through the
/// proxy channel until one fails. The launch must fail (within the deadline, no hang) with
/// an error naming PE 1; PE 0 prints `ERROR after …: …` and exits 3.
pub fn kill_remote(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let victim = n - 1;
    let buf = rt.calloc::<u64>(2).map_err(e2s)?;
    let ready = rt.calloc::<u64>(1).map_err(e2s)?;
    if me == victim {
        rt.wait_until(ready.at(0), symmem::Cmp::Ge, n as u64 - 1)
            .map_err(e2s)?;
        // SAFETY: raising a signal on our own process; nothing runs after it.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    ensure(rt.ptr(&buf, victim).map_err(e2s)?.is_none(), || {
        format!("PE {victim} must be on another node (SYMMEM_SIMULATE_NODES={n})")
    })?;
    let b = sym(rt, &buf)?;
    rt.atomic_inc(ready.at(0), victim).map_err(e2s)?;
    let start = Instant::now();
    loop {
        // Op 3: `g` from PE `victim`, by thread 0 of a 1-thread launch.
        // SAFETY: `b` is a symmetric address of 2 u64s.
        let r = unsafe { rt.launch(&m, k::remote_op::KERNEL, 1, 1, (b, 3, victim as u32, 0)) };
        let took = start.elapsed();
        ensure(took < FAIL_WITHIN, || {
            format!("g from the dead PE {victim} did not fail within {took:?}")
        })?;
        if r.is_err() {
            let needle = format!("PE {victim}");
            let text = expect_kernel_failed(rt, r, (0, 0, 0), (0, 0, 0), &[&needle])?;
            println!("ERROR after {took:?}: {text}");
            std::process::exit(3);
        }
    }
}

/// Thread 0 of every block returns before the others call `sync_threads` and `sync_warp`:
/// the exited thread counts as arrived (on the GPU as on the CPU executor, where `launch`
/// reuses the threads for its 3 blocks), so `launch` and `launch_cooperative` complete,
/// and every other thread passes both barriers.
pub fn early_exit(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let counter = rt.calloc::<u64>(1).map_err(e2s)?;
    let c = sym(rt, &counter)?;
    let start = Instant::now();
    // SAFETY: `c` is a symmetric address of one u64.
    unsafe {
        rt.launch(&m, k::early_exit_sync::KERNEL, 3, 64, (c,))
            .map_err(e2s)?;
        rt.launch_cooperative(&m, k::early_exit_sync::KERNEL, 2, 48, (c,))
            .map_err(e2s)?;
    }
    ensure(start.elapsed() < FAIL_WITHIN, || {
        format!("took {:?}", start.elapsed())
    })?;
    check_eq(
        "threads past the barriers",
        &read_all(rt, &counter)?,
        &[3 * 63 + 2 * 47],
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(counter).map_err(e2s)
}
