//! The PE side of the multi-PE integration tests: `symmem-test-pe SCENARIO [ARGS...]`.
//!
//! Each scenario checks its results exactly and exits non-zero on any mismatch; the
//! integration tests (tests/*.rs) launch it under symrun or mpirun and check the exit
//! status and output. Scenarios that expect an error print it on stdout as `ERROR: ...`.

use std::process::ExitCode;
use std::time::Instant;

use symmem::{Error, Runtime};
use symmem_bootstrap::BootstrapError;

mod host_api;
mod several_runtimes;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(scenario) = args.first() else {
        eprintln!("usage: symmem-test-pe SCENARIO [ARGS...]");
        return ExitCode::from(2);
    };
    let result = match scenario.as_str() {
        "hello" => with_init(hello),
        "node_layout" => with_init(node_layout),
        "put_get" => with_init(put_get),
        "barrier" => with_init(barrier),
        "late_barrier" => with_init(late_barrier),
        "alloc_mismatch" => with_init(alloc_mismatch),
        "oom" => with_init(oom),
        "bad_args" => with_init(bad_args),
        "kill" => with_init(kill),
        "init_fault" => init_fault(),
        "finalize_in_barrier" => finalize_in_barrier(),
        "finalize_in_team_barrier" => finalize_in_team_barrier(),
        "late_collectives" => late_collectives(),
        "kill_matrix" => kill_matrix(),
        "die_before_alloc" => with_init(die_before_alloc),
        "panic_with_runtime" => panic_with_runtime(),
        "cascade_to_barrier" => cascade_to_barrier(),
        "reinit" => reinit(),
        "two_nodes" => two_nodes(),
        "split_namespace" => with_init(split_namespace),
        "heap_is_memfd" => with_init(heap_is_memfd),
        "uid_root" => uid_root(&args[1..]),
        "uid_join" => uid_join(&args[1..]),
        "netns" => netns(&args[1..]),
        "dead_host" => dead_host(&args[1..]),
        "init_error" => init_error(),
        "api_rma" => with_init(host_api::rma),
        "api_barrier_then_finalize" => with_init(host_api::barrier_then_finalize),
        "api_put_signal" => with_init(host_api::put_signal),
        "api_signals" => with_init(host_api::signals),
        "api_wait_test" => with_init(host_api::wait_test),
        "api_wait_arrays" => with_init(host_api::wait_arrays),
        "api_atomics" => with_init(host_api::atomics),
        "api_fence_quiet" => with_init(host_api::fence_quiet),
        "api_barrier_sync" => with_init(host_api::barrier_sync),
        "api_local_views" => with_init(host_api::local_views),
        "api_errors" => with_init(host_api::errors),
        "api_align" => with_init(host_api::align),
        "api_foreign" => host_api::foreign(check_world_size),
        "api_wait_timeout" => with_init(host_api::wait_timeout),
        "api_hang_forgotten_signal" => with_init(host_api::hang_forgotten_signal),
        "api_hang_barrier_skipped" => with_init(host_api::hang_barrier_skipped),
        "api_hang_mismatched_collectives" => with_init(host_api::hang_mismatched_collectives),
        "api_hang_stopped_pe" => with_init(host_api::hang_stopped_pe),
        "api_hang_test_loop" => with_init(host_api::hang_test_loop),
        "api_hang_quiet_stopped_peer" => with_init(host_api::hang_quiet_stopped_peer),
        "api_hang_barrier_three" => with_init(host_api::hang_barrier_three),
        "api_hang_asked" => with_init(host_api::hang_asked),
        "api_hang_until_asked" => with_init(host_api::hang_until_asked),
        "api_hang_device_signal" => with_init(host_api::hang_device_signal),
        "api_collective_pairs" => with_init(host_api::collective_pairs),
        "api_collective_pair_hangs" => with_init(host_api::collective_pair_hangs),
        "api_mismatched_collectives_named" => with_init(host_api::mismatched_collectives_named),
        "api_kill_wait" => with_init(host_api::kill_wait),
        "api_kill_wait_blind" => with_blind_init(host_api::kill_wait),
        "api_stress" => with_init(host_api::stress),
        "api_bug_put_then_p" => with_init(host_api::bug_put_then_p),
        "api_bug_put_then_put" => with_init(host_api::bug_put_then_put),
        "api_bug_signal_first" => with_init(host_api::bug_signal_first),
        "api_bug_nbi_source_reused" => with_init(host_api::bug_nbi_source_reused),
        "api_bug_get_nbi_read_early" => with_init(host_api::bug_get_nbi_read_early),
        "api_put_signal_large" => with_init(host_api::put_signal_large),
        "api_quiet_visibility" => with_init(host_api::quiet_visibility),
        "api_litmus" => with_init(host_api::litmus),
        "api_kill_transfer" => with_init(host_api::kill_transfer),
        "api_teams" => with_init(host_api::teams),
        "api_team_errors" => with_init(host_api::team_errors),
        "api_team_limit" => with_init(host_api::team_limit),
        "api_team_timeout" => with_init(host_api::team_timeout),
        "api_collectives" => with_init(host_api::collectives),
        "api_collective_errors" => with_init(host_api::collective_errors),
        "api_collective_timeout" => with_init(host_api::collective_timeout),
        "api_stream_collectives" => with_init(host_api::stream_collectives),
        "api_stream_collective_errors" => with_init(host_api::stream_collective_errors),
        "api_stream_rma" => with_init(host_api::stream_rma),
        "api_stream_alltoallv" => with_init(host_api::stream_alltoallv),
        "api_collective_mismatch" => with_init(host_api::collective_mismatch),
        "api_collective_one_bad" => with_init(host_api::collective_one_bad),
        "obs_counters" => with_init(obs_counters),
        "two_jobs_two_threads" => several_runtimes::two_jobs_two_threads(),
        "two_jobs_one_thread" => several_runtimes::two_jobs_one_thread(),
        "second_launcher_init" => several_runtimes::second_launcher_init(),
        other => Err(format!("unknown scenario {other}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            stderr_line(&format!("FAILED: {msg}"));
            ExitCode::FAILURE
        }
    }
}

type Outcome = Result<(), String>;

/// Writes `line` and a newline to stderr in one write, so that the lines of PEs sharing a
/// stderr pipe (mpirun merges them) never interleave: `eprintln!` writes each formatted
/// piece separately.
fn stderr_line(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

fn with_init(f: fn(&Runtime) -> Outcome) -> Outcome {
    let rt = symmem::init().map_err(|e| format!("init: {e}"))?;
    check_world_size(&rt)?;
    f(&rt)?;
    rt.finalize().map_err(|e| format!("finalize: {e}"))
}

/// As [`with_init`], on the bootstrap the launcher chose made [`Blind`]: the runtime must
/// find dead peers by itself, as under the MPI bootstrap.
fn with_blind_init(f: fn(&Runtime) -> Outcome) -> Outcome {
    let config = symmem::Config::from_env().map_err(|e| format!("config: {e}"))?;
    let inner = symmem_bootstrap::from_env(config.bootstrap, config.bootstrap_timeout)
        .map_err(|e| format!("bootstrap: {e}"))?;
    let rt =
        symmem::init_with_bootstrap(Box::new(Blind(inner))).map_err(|e| format!("init: {e}"))?;
    check_world_size(&rt)?;
    f(&rt)?;
    rt.finalize().map_err(|e| format!("finalize: {e}"))
}

/// A bootstrap that never reports a peer's failure (`failure()` is always `None`, as
/// MPI's is) but otherwise is the one it wraps.
struct Blind(Box<dyn symmem::Bootstrap>);

impl symmem::Bootstrap for Blind {
    fn rank(&self) -> usize {
        self.0.rank()
    }
    fn size(&self) -> usize {
        self.0.size()
    }
    fn kind(&self) -> symmem::BootstrapKind {
        self.0.kind()
    }
    fn timeout(&self) -> std::time::Duration {
        self.0.timeout()
    }
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        self.0.allgather(mine)
    }
    fn alltoall(&self, outgoing: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        self.0.alltoall(outgoing)
    }
    fn barrier(&self) -> Result<(), BootstrapError> {
        self.0.barrier()
    }
    fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>, BootstrapError> {
        self.0.broadcast(root, data)
    }
    fn abort(&self, reason: &str) {
        self.0.abort(reason)
    }
    fn failure(&self) -> Option<BootstrapError> {
        None
    }
    fn launcher_node(&self) -> Option<symmem_bootstrap::LauncherNode> {
        self.0.launcher_node()
    }
    fn job_key(&self) -> Option<&symmem_bootstrap::auth::JobKey> {
        self.0.job_key()
    }
}

/// `examples/hello` in short: a ring of puts, then `PE r of n` (the launcher tests match it).
fn hello(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let inbox = rt.calloc::<u64>(1).map_err(e2s)?;
    rt.put(inbox.at(0), &[1000 + me as u64], (me + 1) % n)
        .map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let mut got = [0u64];
    rt.get(inbox.at(0), &mut got, me).map_err(e2s)?;
    let left = (me + n - 1) % n;
    if got[0] != 1000 + left as u64 {
        return Err(format!(
            "PE {me}: got {} from the left, expected {}",
            got[0],
            1000 + left
        ));
    }
    println!("PE {me} of {n}");
    rt.free(inbox).map_err(e2s)
}

/// `hello`, then `PE r local [..]`: the PEs on this PE's node (the launcher tests match it).
fn node_layout(rt: &Runtime) -> Outcome {
    hello(rt)?;
    println!("PE {} local {:?}", rt.my_pe(), rt.local_pes());
    Ok(())
}

/// The launcher's announced size must match what symmem sees: an MPI binary started by a
/// foreign mpirun would otherwise pass as N single-PE jobs.
fn check_world_size(rt: &Runtime) -> Outcome {
    let expected = std::env::var("SYMMEM_TEST_EXPECT_PES")
        .map_err(|_| "SYMMEM_TEST_EXPECT_PES is not set".to_string())?;
    let expected: usize = expected
        .parse()
        .map_err(|_| "bad SYMMEM_TEST_EXPECT_PES".to_string())?;
    if rt.n_pes() != expected {
        return Err(format!(
            "n_pes = {}, but the test launched {expected}",
            rt.n_pes()
        ));
    }
    let kind = rt.bootstrap_kind().to_string();
    match std::env::var("SYMMEM_TEST_EXPECT_BOOTSTRAP") {
        Ok(want) if want != kind => Err(format!("bootstrap is {kind}, the test expected {want}")),
        _ => Ok(()),
    }
}

fn e2s(e: Error) -> String {
    e.to_string()
}

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Outcome {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

/// A value that identifies (writer, target, index, round).
fn pattern(from: usize, to: usize, i: usize, round: usize) -> u64 {
    ((from as u64) << 48)
        ^ ((to as u64) << 40)
        ^ ((round as u64) << 32)
        ^ (i as u64).wrapping_mul(0x9E37_79B9)
}

/// Ring puts and all-to-all gets across several sizes, checked element by element.
fn put_get(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    for (round, len) in [1usize, 7, 64, 1000, 1 << 16, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let buf = rt.alloc::<u64>(len).map_err(e2s)?;
        let right = (me + 1) % n;
        let data: Vec<u64> = (0..len).map(|i| pattern(me, right, i, round)).collect();
        rt.put(buf.at(0), &data, right).map_err(e2s)?;
        rt.barrier_all().map_err(e2s)?;
        let left = (me + n - 1) % n;
        let mut got = vec![0u64; len];
        rt.get(buf.at(0), &mut got, me).map_err(e2s)?;
        for (i, g) in got.iter().enumerate() {
            ensure(*g == pattern(left, me, i, round), || {
                format!("PE {me}: element {i} of {len} from PE {left} is {g:#x}")
            })?;
        }
        // Every PE reads a slice of every PE's buffer.
        for pe in 0..n {
            let src = (pe + n - 1) % n;
            let at = len / 3;
            let mut part = vec![0u64; len - at];
            rt.get(buf.at(at), &mut part, pe).map_err(e2s)?;
            for (k, g) in part.iter().enumerate() {
                ensure(*g == pattern(src, pe, at + k, round), || {
                    format!("PE {me}: get from PE {pe} element {} wrong", at + k)
                })?;
            }
        }
        rt.barrier_all().map_err(e2s)?;
        rt.free(buf).map_err(e2s)?;
    }
    // Typed puts of a struct, and a put to self.
    #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Pair {
        a: u32,
        b: f32,
    }
    let pairs = rt.calloc::<Pair>(n).map_err(e2s)?;
    for pe in 0..n {
        rt.put(
            pairs.at(me),
            &[Pair {
                a: me as u32,
                b: pe as f32 * 0.5,
            }],
            pe,
        )
        .map_err(e2s)?;
    }
    rt.barrier_all().map_err(e2s)?;
    let mut got = vec![Pair { a: 0, b: 0.0 }; n];
    rt.get(pairs.at(0), &mut got, me).map_err(e2s)?;
    for (from, p) in got.iter().enumerate() {
        ensure(
            *p == Pair {
                a: from as u32,
                b: me as f32 * 0.5,
            },
            || format!("pair from {from}: {p:?}"),
        )?;
    }
    rt.free(pairs).map_err(e2s)?;
    println!("PE {me}: put_get ok");
    Ok(())
}

/// Barriers order memory: after each barrier every PE sees every other PE's write of the
/// current iteration, never an older one.
fn barrier(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let slots = rt.calloc::<u64>(n).map_err(e2s)?;
    for iter in 1..=300u64 {
        for pe in 0..n {
            rt.put(slots.at(me), &[iter], pe).map_err(e2s)?;
        }
        rt.barrier_all().map_err(e2s)?;
        let mut got = vec![0u64; n];
        rt.get(slots.at(0), &mut got, me).map_err(e2s)?;
        ensure(got.iter().all(|&v| v == iter), || {
            format!("PE {me} iteration {iter}: saw {got:?}")
        })?;
        // Nobody may start the next iteration's writes before all have checked this one.
        rt.sync_all().map_err(e2s)?;
    }
    rt.free(slots).map_err(e2s)?;
    println!("PE {me}: barrier ok");
    Ok(())
}

/// PE 0 reaches `barrier_all` (then `sync_all`) 5 s after the others, longer than the
/// `SYMMEM_BOOTSTRAP_TIMEOUT` the test sets: the barrier waits under `SYMMEM_TIMEOUT` (no
/// limit by default) on every route, so every PE gets through.
fn late_barrier(rt: &Runtime) -> Outcome {
    let me = rt.my_pe();
    if me == 0 {
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
    rt.barrier_all().map_err(e2s)?;
    if me != 0 {
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
    rt.sync_all().map_err(e2s)?;
    println!("PE {me}: late_barrier ok");
    Ok(())
}

/// PE 0 asks for a different size than the others: every PE gets an error naming the PEs,
/// and the heap stays consistent, so a matching allocation afterwards works.
fn alloc_mismatch(rt: &Runtime) -> Outcome {
    let me = rt.my_pe();
    let len = if me == 0 { 1024 } else { 2048 };
    match rt.alloc::<u8>(len) {
        Ok(_) => return Err("mismatched alloc succeeded".into()),
        Err(e @ Error::AllocMismatch { .. }) => println!("ERROR: {e}"),
        Err(e) => return Err(format!("wrong error: {e}")),
    }
    let buf = rt.alloc::<u64>(16).map_err(e2s)?;
    ensure(buf.id() == 1, || {
        format!("allocation id {} after the failed call", buf.id())
    })?;
    rt.put(buf.at(0), &[me as u64], (me + 1) % rt.n_pes())
        .map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(buf).map_err(e2s)?;
    Ok(())
}

/// Asking for more than the heap: an error naming SYMMEM_SYMMETRIC_SIZE on every PE, and
/// a later allocation that fits still works.
fn oom(rt: &Runtime) -> Outcome {
    let cap = rt.heap_capacity();
    match rt.alloc::<u8>(cap + 1) {
        Ok(_) => return Err("oversized alloc succeeded".into()),
        Err(e @ Error::OutOfMemory { .. }) => println!("ERROR: {e}"),
        Err(e) => return Err(format!("wrong error: {e}")),
    }
    let half = rt.alloc::<u8>(cap / 2).map_err(e2s)?;
    match rt.alloc::<u8>(cap / 2 + 4096) {
        Ok(_) => return Err("second oversized alloc succeeded".into()),
        Err(Error::OutOfMemory { largest_free, .. }) => {
            ensure(largest_free < cap / 2 + 4096, || {
                "largest_free is wrong".into()
            })?
        }
        Err(e) => return Err(format!("wrong error: {e}")),
    }
    rt.free(half).map_err(e2s)?;
    let all = rt.alloc::<u8>(cap).map_err(e2s)?;
    rt.free(all).map_err(e2s)
}

/// Bad PE, out-of-bounds ranges and foreign handles are errors that name what was wrong.
fn bad_args(rt: &Runtime) -> Outcome {
    let n = rt.n_pes();
    let buf = rt.alloc::<u32>(10).map_err(e2s)?;
    let expect = |r: symmem::Result<()>, needles: &[&str]| -> Outcome {
        match r {
            Ok(()) => Err(format!("expected an error mentioning {needles:?}")),
            Err(e) => {
                let s = e.to_string();
                ensure(needles.iter().all(|n| s.contains(n)), || {
                    format!("error {s:?} lacks {needles:?}")
                })
            }
        }
    };
    expect(
        rt.put(buf.at(0), &[1], n),
        &[&format!("PE {n} does not exist"), "put"],
    )?;
    expect(
        rt.put(buf.at(8), &[1, 2, 3], 0),
        &["put on PE 0", "8..11", "10 elements", "allocation #0"],
    )?;
    let mut out = [0u32; 2];
    expect(
        rt.get(buf.at(usize::MAX), &mut out, 0),
        &["get on PE 0", "out of bounds"],
    )?;
    match rt.alloc_aligned::<u8>(8, 3) {
        Err(e) => ensure(e.to_string().contains("alignment 3"), || e.to_string())?,
        Ok(_) => return Err("alignment 3 accepted".into()),
    }
    rt.free(buf).map_err(e2s)
}

/// The last PE kills itself (SIGKILL) after one barrier; the others keep synchronizing
/// (possibly still in that first barrier) and must get an error naming it, well before any
/// deadline.
fn kill(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let victim = n - 1;
    if me == victim {
        rt.barrier_all().map_err(e2s)?;
        // SAFETY: raising a signal on our own process; nothing runs after it.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    let start = Instant::now();
    for _ in 0..1_000_000 {
        if let Err(e) = rt.barrier_all() {
            println!("ERROR after {:?}: {e}", start.elapsed());
            // Exit at once: finalize would only report the same failure again.
            std::process::exit(3);
        }
    }
    Err(format!(
        "PE {me}: barriers kept succeeding after PE {victim} was killed"
    ))
}

/// The kill -9 matrix (tests/kill_matrix.rs, [`host_api::kill_matrix`]): the last PE
/// kills itself while each other PE is in the operation `SYMMEM_TEST_KILL_OPS` gives it.
/// A survivor prints its error, then finalizes, which must fail at once (the dead PE will
/// never arrive), prints `LEFT (PE <p>) after <ms> ms: <finalize's result>` and exits
/// with code 3.
///
/// With `SYMMEM_TEST_BLIND_BOOTSTRAP=1` the launcher's bootstrap is made [`Blind`], so the
/// survivors must find the death by the liveness watch and the transport alone, as under
/// the MPI bootstrap.
fn kill_matrix() -> Outcome {
    let rt = if std::env::var("SYMMEM_TEST_BLIND_BOOTSTRAP").as_deref() == Ok("1") {
        let config = symmem::Config::from_env().map_err(|e| format!("config: {e}"))?;
        let inner = symmem_bootstrap::from_env(config.bootstrap, config.bootstrap_timeout)
            .map_err(|e| format!("bootstrap: {e}"))?;
        symmem::init_with_bootstrap(Box::new(Blind(inner)))
    } else {
        symmem::init()
    }
    .map_err(|e| format!("init: {e}"))?;
    check_world_size(&rt)?;
    let me = rt.my_pe();
    host_api::kill_matrix(&rt)?;
    let start = Instant::now();
    let left = match rt.finalize() {
        Ok(()) => "finalize succeeded".to_string(),
        Err(e) => format!("finalize failed: {e}"),
    };
    println!(
        "LEFT (PE {me}) after {} ms: {left}",
        start.elapsed().as_millis()
    );
    std::process::exit(3);
}

/// How late one PE is for each of `alloc`, `free` and `finalize` in `late_collectives`:
/// run with a shorter `SYMMEM_BOOTSTRAP_TIMEOUT` (2 s).
const LATENESS: std::time::Duration = std::time::Duration::from_millis(2500);

/// Load imbalance, not a fault: one PE reaches `alloc`, then another `free`, then the
/// first `finalize` [`LATENESS`] after the others, longer than the bootstrap's deadline.
/// Every call must still succeed; prints `late_collectives ok`.
fn late_collectives() -> Outcome {
    let rt = symmem::init().map_err(|e| format!("init: {e}"))?;
    check_world_size(&rt)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let late = |pe: usize| {
        if me == pe {
            std::thread::sleep(LATENESS);
        }
    };
    late(n - 1);
    let buf = rt.calloc::<u64>(4).map_err(|e| format!("calloc: {e}"))?;
    rt.put(buf.at(0), &[me as u64 + 1], (me + 1) % n)
        .map_err(e2s)?;
    late(0);
    rt.free(buf).map_err(|e| format!("free: {e}"))?;
    late(n - 1);
    rt.finalize().map_err(|e| format!("finalize: {e}"))?;
    println!("PE {me}: late_collectives ok");
    Ok(())
}

/// The last PE kills itself (SIGKILL) a moment after the others have entered `alloc`:
/// they print `ERROR after <duration>: <error>` and exit with code 3.
fn die_before_alloc(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if me == n - 1 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: raising a signal on our own process; nothing runs after it.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    let start = Instant::now();
    match rt.alloc::<u64>(1) {
        Ok(_) => Err(format!("PE {me}: alloc succeeded without PE {}", n - 1)),
        Err(e) => {
            println!("ERROR after {:?}: {e}", start.elapsed());
            std::process::exit(3);
        }
    }
}

/// PE 0 finalizes while the other PEs of a team of every PE wait for it in the team's
/// barrier: they must fail at once, naming it, rather than wait for the bootstrap
/// deadline (PE 0's finalize fails then, and it exits).
fn finalize_in_team_barrier() -> Outcome {
    let rt = symmem::init().map_err(|e| format!("init: {e}"))?;
    check_world_size(&rt)?;
    let n = rt.n_pes();
    let team = rt
        .team_world()
        .split_strided(0, 1, n)
        .map_err(e2s)?
        .ok_or("every PE is in the team")?;
    team.barrier().map_err(e2s)?;
    if rt.my_pe() == 0 {
        drop(team);
        // Its peers leave with an error, so this finalize fails too; that is expected.
        let _ = rt.finalize();
        return Ok(());
    }
    let start = Instant::now();
    match team.barrier() {
        Ok(()) => Err("the team's barrier completed without PE 0".into()),
        Err(e) => {
            println!("ERROR after {:?}: {e}", start.elapsed());
            std::process::exit(3);
        }
    }
}

/// PE 0 finalizes while the others wait for it in `barrier_all`: they must fail at once,
/// naming it, rather than wait for the bootstrap deadline.
fn finalize_in_barrier() -> Outcome {
    let rt = symmem::init().map_err(|e| format!("init: {e}"))?;
    check_world_size(&rt)?;
    rt.barrier_all().map_err(e2s)?;
    if rt.my_pe() == 0 {
        // Its peers leave with an error, so this finalize fails too; that is expected.
        let _ = rt.finalize();
        return Ok(());
    }
    let start = Instant::now();
    match rt.barrier_all() {
        Ok(()) => Err("barrier_all completed without PE 0".into()),
        Err(e) => {
            println!("ERROR after {:?}: {e}", start.elapsed());
            std::process::exit(3);
        }
    }
}

/// PE 1 panics while holding its runtime; the others, waiting for it in `barrier_all`,
/// must learn of it at once from the abort its unwinding sends.
fn panic_with_runtime() -> Outcome {
    let rt = symmem::init().map_err(|e| format!("init: {e}"))?;
    check_world_size(&rt)?;
    if rt.my_pe() == 1 {
        rt.barrier_all().map_err(e2s)?;
        panic!("PE 1 gives up");
    }
    // The others may learn of it in the first barrier already, or in the second.
    let start = Instant::now();
    for _ in 0..2 {
        if let Err(e) = rt.barrier_all() {
            println!("ERROR after {:?}: {e}", start.elapsed());
            std::process::exit(3);
        }
    }
    Err("two barriers completed without PE 1".into())
}

/// A cascade: PE 0 (A) is killed while PE 1 (B) waits for it; B notices, drops its runtime
/// and then leaves a marker file (`SYMMEM_TEST_MARKER`); only then does PE 2 (C) enter
/// `barrier_all`, whose first partner is B. C finds B in finalize, not in the barrier,
/// and must name A, the failure B recorded, not B. Each survivor prints
/// `ERROR (PE i in op): <error>` and exits with code 3.
fn cascade_to_barrier() -> Outcome {
    let marker = std::env::var("SYMMEM_TEST_MARKER")
        .map_err(|_| "SYMMEM_TEST_MARKER is not set".to_string())?;
    let rt = symmem::init().map_err(|e| format!("init: {e}"))?;
    check_world_size(&rt)?;
    ensure(rt.n_pes() == 3, || "cascade_to_barrier needs 3 PEs".into())?;
    let never = rt.calloc::<u64>(1).map_err(e2s)?;
    let waiting = rt.calloc::<u64>(1).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    match rt.my_pe() {
        0 => {
            // Die once B is (about to be) waiting for this PE.
            rt.wait_until(waiting.at(0), symmem::Cmp::Eq, 1)
                .map_err(e2s)?;
            // SAFETY: raising a signal on our own process; nothing runs after it.
            unsafe { libc::raise(libc::SIGKILL) };
            unreachable!("SIGKILL returned");
        }
        1 => {
            rt.atomic_inc(waiting.at(0), 0).map_err(e2s)?;
            let err = match rt.wait_until(never.at(0), symmem::Cmp::Eq, 1) {
                Ok(_) => return Err("wait_until returned although PE 0 never wrote".into()),
                Err(e) => e,
            };
            println!("ERROR (PE 1 in wait_until): {err}");
            // Drop the runtime (finalize fails: PE 0 is gone; the drop logs it), then let C
            // go on: by now B's finalizing flag is set.
            drop(rt);
            std::fs::write(&marker, b"B dropped its runtime")
                .map_err(|e| format!("writing {marker}: {e}"))?;
            std::process::exit(3);
        }
        _ => {
            let start = Instant::now();
            while !std::path::Path::new(&marker).exists() {
                if start.elapsed() > std::time::Duration::from_secs(20) {
                    return Err(format!("PE 1 never wrote {marker}"));
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            match rt.barrier_all() {
                Ok(()) => Err("barrier_all completed without PE 0 and PE 1".into()),
                Err(e) => {
                    println!("ERROR (PE 2 in barrier_all): {e}");
                    std::process::exit(3);
                }
            }
        }
    }
}

/// init → use → finalize → init again in one process; a handle from the first runtime is
/// refused by the second.
fn reinit() -> Outcome {
    let rt = symmem::init().map_err(|e| format!("first init: {e}"))?;
    check_world_size(&rt)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let old = rt.alloc::<u64>(4).map_err(e2s)?;
    rt.put(old.at(0), &[7], (me + 1) % n).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    rt.finalize().map_err(|e| format!("first finalize: {e}"))?;
    for round in 0..2 {
        let rt = symmem::init().map_err(|e| format!("re-init {round}: {e}"))?;
        check_world_size(&rt)?;
        match rt.put(old.at(0), &[1], me) {
            Err(e @ Error::ForeignAllocation { .. }) => println!("ERROR: {e}"),
            other => return Err(format!("stale handle accepted: {other:?}")),
        }
        let buf = rt.calloc::<u64>(n).map_err(e2s)?;
        for pe in 0..n {
            rt.put(buf.at(me), &[(round * 100 + me) as u64], pe)
                .map_err(e2s)?;
        }
        rt.barrier_all().map_err(e2s)?;
        let mut got = vec![0; n];
        rt.get(buf.at(0), &mut got, me).map_err(e2s)?;
        let want: Vec<u64> = (0..n).map(|p| (round * 100 + p) as u64).collect();
        ensure(got == want, || format!("re-init {round}: got {got:?}"))?;
        drop(rt); // finalize through Drop
    }
    println!("PE {me}: reinit ok");
    Ok(())
}

/// PEs split into two "nodes" (two PEs each) through SYMMEM_NODE_ID: peers on the same
/// node are mapped, others are not and are reached over the socket transport.
fn two_nodes() -> Outcome {
    let rank: usize = std::env::var("SYMMEM_LAUNCH_RANK")
        .ok()
        .or_else(|| std::env::var("OMPI_COMM_WORLD_RANK").ok())
        .or_else(|| std::env::var("PMI_RANK").ok())
        .and_then(|r| r.parse().ok())
        .ok_or("cannot tell this process's rank before init")?;
    // SAFETY-free in edition 2021: set before any thread that reads the environment starts.
    std::env::set_var("SYMMEM_NODE_ID", format!("testnode{}", rank / 2));
    let rt = symmem::init().map_err(|e| format!("init: {e}"))?;
    check_world_size(&rt)?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let buf = rt.calloc::<u64>(n).map_err(e2s)?;
    for pe in 0..n {
        let same = pe / 2 == me / 2;
        let p = rt.ptr(&buf, pe).map_err(e2s)?;
        ensure(p.is_some() == same, || {
            format!("PE {me}: ptr to PE {pe} is {p:?}")
        })?;
        // Same node: a store through the mapping; the other node: the socket transport.
        rt.put(buf.at(me), &[100 + me as u64], pe).map_err(e2s)?;
    }
    ensure(rt.local_pes().len() == 2, || {
        format!("local PEs {:?}", rt.local_pes())
    })?;
    rt.barrier_all().map_err(e2s)?;
    let mut got = vec![0u64; n];
    rt.read_local(buf.at(0), &mut got).map_err(e2s)?;
    ensure(
        got == (0..n as u64).map(|p| 100 + p).collect::<Vec<_>>(),
        || format!("PE {me}: puts from every PE, both nodes, arrived as {got:?}"),
    )?;
    rt.free(buf).map_err(e2s)?;
    rt.finalize().map_err(e2s)?;
    println!("PE {me}: two_nodes ok");
    Ok(())
}

/// Run with PE 1 in an IPC or PID namespace of its own (`unshare -i`, `unshare -p -f`)
/// and no `SYMMEM_NODE_ID`: the two PEs share a kernel and a hostname, as containers on
/// one machine can, yet are different nodes, so neither maps the other's heap and they
/// talk over the remote transport.
fn split_namespace(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    ensure(n == 2, || "split_namespace needs 2 PEs".into())?;
    let other = 1 - me;
    let (host, other_host) = (
        rt.hostname_of(me).map_err(e2s)?,
        rt.hostname_of(other).map_err(e2s)?,
    );
    ensure(host == other_host, || {
        format!("hostnames differ: {host} and {other_host}")
    })?;
    let (node, other_node) = (
        rt.node_of(me).map_err(e2s)?,
        rt.node_of(other).map_err(e2s)?,
    );
    ensure(node != other_node && node.contains(",ipc="), || {
        format!("PE {me} is on node {node}, PE {other} on {other_node}")
    })?;
    ensure(rt.local_pes() == [me], || {
        format!("local PEs {:?}", rt.local_pes())
    })?;
    let buf = rt.calloc::<u64>(1).map_err(e2s)?;
    ensure(rt.ptr(&buf, other).map_err(e2s)?.is_none(), || {
        format!("PE {me} maps PE {other}'s heap across namespaces")
    })?;
    // The peer is reached over the remote transport instead.
    rt.p(buf.at(0), 100 + me as u64, other).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let got = rt.g(buf.at(0), me).map_err(e2s)?;
    ensure(got == 100 + other as u64, || {
        format!("PE {me} holds {got}, PE {other} put {}", 100 + other)
    })?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(buf).map_err(e2s)?;
    println!("PE {me}: split_namespace ok (host {host}, node {node})");
    Ok(())
}

/// The heap lives in a memfd (no file in /dev/shm to leak) and is mapped by every peer.
fn heap_is_memfd(rt: &Runtime) -> Outcome {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
    let heaps = maps
        .lines()
        .filter(|l| l.contains("/memfd:symmem-heap"))
        .count();
    ensure(heaps == rt.n_pes(), || {
        format!("{heaps} memfd heap mappings for {} PEs", rt.n_pes())
    })?;
    // (MPI libraries map their own /dev/shm segments; none may be symmem's.)
    let named = maps
        .lines()
        .any(|l| l.contains("/dev/shm") && l.contains("symmem"));
    ensure(!named, || "symmem mapped a named /dev/shm segment".into())?;
    rt.barrier_all().map_err(e2s)
}

/// Unique-id init, rank 0: creates the id, prints it for the test to pass on, and runs.
fn uid_root(args: &[String]) -> Outcome {
    let n: usize = args
        .first()
        .and_then(|v| v.parse().ok())
        .ok_or("uid_root N")?;
    let id = symmem::unique_id().map_err(e2s)?;
    println!("UID {id}");
    use std::io::Write;
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    uid_run(0, n, &id)
}

/// Where the tests hand a unique id to the ranks that join: the environment, since a
/// unique id is a secret and argv is visible to every user of the host.
const UID_VAR: &str = "SYMMEM_TEST_UID";

/// The unique id in [`UID_VAR`].
fn uid_from_env() -> Result<symmem::UniqueId, String> {
    std::env::var(UID_VAR)
        .map_err(|_| format!("{UID_VAR} is not set"))?
        .parse()
        .map_err(|e: symmem::bootstrap::BootstrapError| e.to_string())
}

/// Unique-id init, other ranks: `uid_join RANK N`, the id in [`UID_VAR`].
fn uid_join(args: &[String]) -> Outcome {
    let [rank, n] = args else {
        return Err("uid_join RANK N".into());
    };
    let rank = rank.parse().map_err(|_| "bad rank")?;
    let n = n.parse().map_err(|_| "bad N")?;
    uid_run(rank, n, &uid_from_env()?)
}

fn uid_run(rank: usize, n: usize, id: &symmem::UniqueId) -> Outcome {
    let die_after_init = arm_victim(rank)?;
    let rt = match symmem::init_with_unique_id(rank, n, id) {
        Ok(rt) => rt,
        Err(e) => {
            println!("ERROR: {e}");
            return Err(format!("init_with_unique_id: {e}"));
        }
    };
    ensure(rt.my_pe() == rank && rt.n_pes() == n, || {
        "wrong rank or size".into()
    })?;
    if die_after_init {
        die_before_first_alloc();
    }
    put_get(&rt).inspect_err(|e| println!("ERROR: {e}"))?;
    rt.finalize().map_err(e2s)
}

/// One PE per network namespace (tests/netns.rs): `netns 0 N` creates a unique id on
/// `SYMMEM_SOCKET_IFNAME`'s address and prints it as `UID <id>`; `netns RANK N` joins the
/// id in [`UID_VAR`].
/// Every other PE must be on another node and unmapped, so everything below crosses the
/// socket transport over the veth pair: the host API's RMA, put_signal, atomics and large
/// put_signal scenarios, then a 1 MiB put read back with a get.
fn netns(args: &[String]) -> Outcome {
    let (rank, n, id) = uid_args("netns", args)?;
    let rt = symmem::init_with_unique_id(rank, n, &id).map_err(|e| format!("init: {e}"))?;
    let me = rt.my_pe();
    let node = rt.node_of(me).map_err(e2s)?.to_string();
    let probe = rt.calloc::<u64>(1).map_err(e2s)?;
    for pe in (0..n).filter(|&pe| pe != me) {
        let theirs = rt.node_of(pe).map_err(e2s)?;
        ensure(theirs != node, || {
            format!("PE {me} and PE {pe} are both on node {node}")
        })?;
        ensure(rt.ptr(&probe, pe).map_err(e2s)?.is_none(), || {
            format!("PE {me} maps PE {pe}'s heap across network namespaces")
        })?;
        println!("PE {me}: node {node}, PE {pe}: node {theirs} (other node)");
    }
    ensure(rt.local_pes() == [me], || {
        format!("local PEs {:?}", rt.local_pes())
    })?;
    rt.free(probe).map_err(e2s)?;
    host_api::rma(&rt)?;
    host_api::put_signal(&rt)?;
    host_api::atomics(&rt)?;
    host_api::put_signal_large(&rt)?;
    // 1 MiB to the right neighbour, read back from the left one: at least this much
    // crosses each veth (the test checks the interface counters).
    const WORDS: usize = (1 << 20) / 8;
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let big = rt.calloc::<u64>(WORDS).map_err(e2s)?;
    let src: Vec<u64> = (0..WORDS).map(|i| pattern(me, right, i, 7)).collect();
    rt.put(big.at(0), &src, right).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let mut got = vec![0u64; WORDS];
    rt.get(big.at(0), &mut got, right).map_err(e2s)?;
    ensure(got == src, || {
        format!("PE {me}: 1 MiB put to PE {right} read back differently")
    })?;
    rt.read_local(big.at(0), &mut got).map_err(e2s)?;
    let first_bad = (0..WORDS).find(|&i| got[i] != pattern(left, me, i, 7));
    ensure(first_bad.is_none(), || {
        format!("PE {me}: element {first_bad:?} of PE {left}'s 1 MiB put is wrong")
    })?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(big).map_err(e2s)?;
    rt.finalize().map_err(e2s)?;
    println!("PE {me}: netns ok");
    Ok(())
}

/// `SCENARIO 0 N` creates a unique id and prints it as `UID <id>`; `SCENARIO RANK N UID`
/// joins it. Returns (rank, N, id).
fn uid_args(scenario: &str, args: &[String]) -> Result<(usize, usize, symmem::UniqueId), String> {
    let (rank, n, id) = match args {
        [rank, n] if rank == "0" => {
            let id = symmem::unique_id().map_err(e2s)?;
            println!("UID {id}");
            use std::io::Write;
            std::io::stdout().flush().map_err(|e| e.to_string())?;
            (0, n, id)
        }
        [rank, n] => (rank.parse().map_err(|_| "bad rank")?, n, uid_from_env()?),
        _ => {
            return Err(format!(
                "{scenario} RANK N (joining ranks: the id in {UID_VAR})"
            ))
        }
    };
    Ok((rank, n.parse().map_err(|_| "bad N")?, id))
}

/// Seconds since the Unix epoch, for lines a script compares with its own clock.
fn epoch_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Several PEs per network namespace, the namespaces joined by a veth pair
/// (scripts/test-dead-host.sh): `dead_host 0 N` / `dead_host RANK N UID` as for `netns`.
/// Loops puts to every PE on another node, a quiet, a get and a barrier, until an
/// operation fails; the script then cuts one node's link. Prints `PE r: running (...)`
/// once the loop has started, and `PE r: ERROR at <epoch seconds> after round k: <error>`
/// when it fails, then exits non-zero. It never ends on its own.
fn dead_host(args: &[String]) -> Outcome {
    let (rank, n, id) = uid_args("dead_host", args)?;
    let rt = symmem::init_with_unique_id(rank, n, &id).map_err(|e| format!("init: {e}"))?;
    let me = rt.my_pe();
    let words = rt.calloc::<u64>(n).map_err(e2s)?;
    let mut remote = Vec::new();
    for pe in (0..n).filter(|&pe| pe != me) {
        if rt.ptr(&words, pe).map_err(e2s)?.is_none() {
            remote.push(pe);
        }
    }
    ensure(!remote.is_empty(), || {
        format!("PE {me}: every PE shares this node")
    })?;
    println!(
        "PE {me}: running (node {}, local PEs {:?}, remote PEs {remote:?})",
        rt.node_of(me).map_err(e2s)?,
        rt.local_pes()
    );
    let mut round = 0u64;
    let failed = loop {
        round += 1;
        let step = || -> Result<(), Error> {
            for &pe in &remote {
                rt.put(words.at(me), &[round], pe)?;
            }
            rt.quiet()?;
            let mut got = [0u64];
            rt.get(
                words.at(me),
                &mut got,
                remote[(round as usize) % remote.len()],
            )?;
            rt.barrier_all()
        };
        if let Err(e) = step() {
            break e;
        }
        if round.is_multiple_of(200) {
            println!("PE {me}: round {round}");
        }
        // The loop need not be hot; a few PEs share the machine's cores.
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    let line = format!(
        "PE {me}: ERROR at {:.3} after round {round}: {failed}",
        epoch_secs()
    );
    println!("{line}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    Err(line)
}

/// Fault tests place one PE's death at a point of init: `SYMMEM_TEST_VICTIM=<rank>` and
/// `SYMMEM_TEST_VICTIM_AT=<point>`, where the point is one of symmem's testing-only
/// `SYMMEM_TEST_EXIT_AT` points, or `first_alloc` (after init, before the first
/// collective allocation), which this program handles. If `rank` is the victim, arms the
/// point; returns whether this process must die right after init. Call before init.
fn arm_victim(rank: usize) -> Result<bool, String> {
    let Ok(victim) = std::env::var("SYMMEM_TEST_VICTIM") else {
        return Ok(false);
    };
    let victim: usize = victim.parse().map_err(|_| "bad SYMMEM_TEST_VICTIM")?;
    let at = std::env::var("SYMMEM_TEST_VICTIM_AT").map_err(|_| "no SYMMEM_TEST_VICTIM_AT")?;
    if rank != victim {
        return Ok(false);
    }
    if at == "first_alloc" {
        return Ok(true);
    }
    // Set before init starts any thread that reads the environment.
    std::env::set_var("SYMMEM_TEST_EXIT_AT", at);
    Ok(false)
}

/// The `first_alloc` victim: dies (SIGKILL) while its peers enter their first allocation.
fn die_before_first_alloc() -> ! {
    stderr_line(&format!(
        "first_alloc: process {} kills itself before the first allocation",
        std::process::id()
    ));
    // SAFETY: raising a signal on our own process; nothing runs after it.
    unsafe { libc::raise(libc::SIGKILL) };
    unreachable!("SIGKILL returned")
}

/// The PE launched as `SYMMEM_TEST_VICTIM` dies at `SYMMEM_TEST_VICTIM_AT` (see
/// [`arm_victim`]); every other PE must fail in init or in its first allocation with an
/// error naming the victim. Survivors print `ERROR: ...` and exit with 3.
fn init_fault() -> Outcome {
    let rank: usize = std::env::var("SYMMEM_LAUNCH_RANK")
        .ok()
        .and_then(|r| r.parse().ok())
        .ok_or("init_fault runs under symrun (SYMMEM_LAUNCH_RANK)")?;
    let die_after_init = arm_victim(rank)?;
    let fail = |e: Error| -> ! {
        println!("ERROR: {e}");
        std::process::exit(3)
    };
    let rt = symmem::init().unwrap_or_else(|e| fail(e));
    check_world_size(&rt)?;
    if die_after_init {
        die_before_first_alloc();
    }
    let first = (|| {
        let buf = rt.calloc::<u64>(16)?;
        rt.barrier_all()?;
        rt.free(buf)
    })();
    if let Err(e) = first {
        fail(e);
    }
    Err(format!(
        "PE {rank}: init and the first allocation succeeded although a PE was to die"
    ))
}

/// init must fail (the test sets a bad variable); print the error.
fn init_error() -> Outcome {
    match symmem::init() {
        Ok(_) => Err("init succeeded".into()),
        Err(e) => {
            println!("ERROR: {e}");
            Ok(())
        }
    }
}

// Observability (tests/observability.rs).

/// Known numbers of each operation to a same-node peer and to a peer of the other node
/// (4 PEs as 2 simulated nodes): the counters since a snapshot are exact, per path. The
/// direct path is counted only with `SYMMEM_DEBUG` at info or more verbose.
fn obs_counters(rt: &Runtime) -> Outcome {
    use symmem::{OpCounts, SignalOp};
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if n != 4 || rt.local_pes().len() != 2 {
        return Err(format!(
            "obs_counters wants 4 PEs as 2 nodes, got {n} PEs, local {:?}",
            rt.local_pes()
        ));
    }
    let (local, remote) = (me ^ 1, (me + 2) % 4);
    let data = rt.calloc::<u64>(8).map_err(e2s)?;
    let words = rt.calloc::<u64>(4).map_err(e2s)?;
    let sig = rt.calloc::<u64>(1).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let before = rt.counters();
    for pe in [local, remote] {
        for _ in 0..3 {
            rt.put(data.at(0), &[me as u64; 8], pe).map_err(e2s)?;
        }
        let mut got = [0u64; 4];
        rt.get(data.at(0), &mut got, pe).map_err(e2s)?;
        rt.get(data.at(4), &mut got, pe).map_err(e2s)?;
        rt.p(words.at(0), me as u64, pe).map_err(e2s)?;
        rt.atomic_fetch_add(words.at(1), 1u64, pe).map_err(e2s)?;
        rt.atomic_add(words.at(1), 1u64, pe).map_err(e2s)?;
        rt.atomic_set(words.at(2), 5u64, pe).map_err(e2s)?;
        rt.put_signal(data.at(6), &[1u64, 2], sig.at(0), 1, SignalOp::Add, pe)
            .map_err(e2s)?;
        rt.signal_op(sig.at(0), 1, SignalOp::Add, pe).map_err(e2s)?;
    }
    rt.fence().map_err(e2s)?;
    rt.quiet().map_err(e2s)?;
    let d = rt.counters().since(&before);
    let each = OpCounts {
        puts: 5,
        put_bytes: 3 * 64 + 8 + 16,
        gets: 2,
        get_bytes: 2 * 32,
        amos: 3,
        signals: 2,
        fences: 1,
        quiets: 1,
    };
    let counted = matches!(
        std::env::var("SYMMEM_DEBUG").as_deref(),
        Ok("info" | "debug" | "trace")
    );
    let direct = if counted { each } else { OpCounts::default() };
    if d.direct_counted != counted {
        return Err(format!(
            "PE {me}: direct_counted is {}, expected {counted} (all: {d})",
            d.direct_counted
        ));
    }
    let want = [
        ("direct", d.direct, direct),
        ("remote", d.remote, each),
        ("proxy", d.proxy, OpCounts::default()),
    ];
    if d.remote_transport != Some("socket") {
        return Err(format!(
            "PE {me}: the remote transport is {:?}, expected socket (all: {d})",
            d.remote_transport
        ));
    }
    for (path, got, want) in want {
        if got != want {
            return Err(format!(
                "PE {me}: {path} counted {got}, expected {want} (all: {d})"
            ));
        }
    }
    // Each PE's signal was added to by its two peers, twice each.
    rt.barrier_all().map_err(e2s)?;
    let s = rt.signal_fetch(sig.at(0)).map_err(e2s)?;
    if s != 4 {
        return Err(format!("PE {me}: signal is {s}, expected 4"));
    }
    println!("PE {me}: counters {d}");
    println!("PE {me}: obs_counters ok");
    Ok(())
}
