//! The local launcher behind `symrun` and self-launching programs.
//!
//! It hosts the rendezvous, starts N PE processes with the `SYMMEM_LAUNCH_*` variables,
//! optionally prefixes their output with the PE, and watches them:
//!
//! - the first PE that fails (non-zero exit or a signal) is reported to the rendezvous, so
//!   every other PE's pending and future bootstrap calls fail with an error naming it;
//! - the others get a grace period to report that error and exit, then are killed;
//! - the launcher returns the first failing PE's exit code (128 + signal for a signal).
//!
//! Each child gets `PR_SET_PDEATHSIG = SIGKILL`, so killing the launcher kills the job,
//! and the CPUs its [`Placement`] gives it (`--bind-to`, `--map-by`), set before it runs
//! its program so that every thread inherits them.
//!
//! Hang reports on request: SIGUSR1 to the launcher is forwarded to PE 0 (the lowest PE
//! still running), whose runtime reports every PE's state (one report, not N). The PEs
//! start with SIGUSR1 ignored, so that one whose runtime has no handler (before init,
//! with the hang report off) is not killed by it. Unless the user set
//! `SYMMEM_HANG_REPORT_FILE`, the PEs get a per-job one ([`crate::report_file`]), where
//! `symrun --report` reads the report it asked for.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::affinity::{Binding, Placement};
use crate::auth::{self, JobKey};
use crate::error::BootstrapError;
use crate::tcp::RendezvousServer;
use crate::{report_file, report_signal};

/// Rendezvous address given to each PE.
pub const ENV_ADDR: &str = "SYMMEM_LAUNCH_ADDR";
/// The job's secret (64 hex digits) given to each PE, from which its rendezvous key is
/// derived ([`launch_key`]). Only the PEs' environments carry it, never argv or a socket.
pub const ENV_SECRET: &str = "SYMMEM_LAUNCH_SECRET";
/// The PE's rank.
pub const ENV_RANK: &str = "SYMMEM_LAUNCH_RANK";
/// The number of PEs.
pub const ENV_SIZE: &str = "SYMMEM_LAUNCH_SIZE";
/// How the launcher bound the PE ([`Placement::how`]), which init reports.
pub const ENV_BIND: &str = "SYMMEM_LAUNCH_BIND";
/// The CPUs for the PE's helper threads ([`Placement::helper_cpus`]), set only when the
/// launcher bound the PE ([`crate::affinity::place_helper_thread`]).
pub const ENV_HELPER_CPUS: &str = "SYMMEM_LAUNCH_HELPER_CPUS";

/// Longest the launcher sleeps between checks of its children.
const POLL: Duration = Duration::from_millis(50);
/// How long the job's exit waits for its output to be copied once every PE has exited.
const PUMP_DRAIN: Duration = Duration::from_secs(2);
/// After the first failed exit is seen, how long to gather others before naming the first.
const SETTLE: Duration = Duration::from_millis(200);

/// What to launch and how.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// Number of PEs.
    pub n_pes: usize,
    /// The program to run.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Prefix every output line with `[PE i] `. Either way the PEs' output is forwarded
    /// in whole lines, stdout and stderr apart, so two PEs' lines never mix mid-line.
    pub tag_output: bool,
    /// Bootstrap deadline handed to the rendezvous.
    pub timeout: Duration,
    /// After the first failure, how long the other PEs get to exit on their own.
    pub kill_grace: Duration,
    /// How to bind the PEs to CPUs (`--bind-to`, `--map-by`), planned over the
    /// launcher's own CPUs when the job starts ([`Placement::for_this_process`]).
    pub binding: Binding,
}

/// The rendezvous key of a job symrun started with `secret` ([`ENV_SECRET`]).
pub fn launch_key(secret: &[u8; 32]) -> JobKey {
    JobKey::derive(secret, "symrun rendezvous")
}

/// Runs a job to completion and returns its exit code: 0, or the first failing PE's code.
pub fn run(opts: &LaunchOptions) -> Result<i32, BootstrapError> {
    if opts.n_pes == 0 {
        return Err(BootstrapError::Config(
            "the number of PEs must be at least 1".into(),
        ));
    }
    // A binding this machine cannot honour fails here, before any PE starts.
    let placement =
        Placement::for_this_process(opts.n_pes, &opts.binding).map_err(BootstrapError::Config)?;
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .map_err(|e| BootstrapError::io("binding the launcher's rendezvous", &e))?;
    let secret = JobKey::random_secret()?;
    let server = RendezvousServer::start(listener, launch_key(&secret), opts.n_pes, opts.timeout)?;
    // Held until the job ends: SIGUSR1 asks for a hang report instead of killing the job.
    let _requests = report_signal::install("the launcher");
    let report_file = job_report_file();
    let mut children = Vec::with_capacity(opts.n_pes);
    let mut pumps = Vec::new();
    for rank in 0..opts.n_pes {
        let mut cmd = Command::new(&opts.program);
        cmd.args(&opts.args)
            .env(ENV_ADDR, server.addr().to_string())
            .env(ENV_SECRET, auth::to_hex(&secret))
            .env(ENV_RANK, rank.to_string())
            .env(ENV_SIZE, opts.n_pes.to_string())
            .env(ENV_BIND, placement.how());
        if let Some(helpers) = placement.helper_cpus(rank) {
            cmd.env(ENV_HELPER_CPUS, helpers.to_string());
        }
        if let Some(file) = &report_file {
            cmd.env(report_file::VAR, file);
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let cpus = placement.cpus(rank);
        // Built here: the child may not allocate between fork and exec.
        let mask = cpus.map(|c| c.mask());
        // SAFETY: the closure runs in the forked child before exec and only calls prctl,
        // sigaction and sched_setaffinity (on a mask built before the fork), all
        // async-signal-safe system calls, and fills a sigaction on its stack.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // An ignored disposition survives exec: the runtime's handler replaces it.
                let mut ignore: libc::sigaction = std::mem::zeroed();
                ignore.sa_sigaction = libc::SIG_IGN;
                if libc::sigaction(libc::SIGUSR1, &ignore, std::ptr::null_mut()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(mask) = &mask {
                    let bytes = std::mem::size_of_val(mask.as_slice());
                    if libc::sched_setaffinity(0, bytes, mask.as_ptr().cast()) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                kill_all(&mut children);
                let bound = cpus.map_or(String::new(), |c| format!(" bound to CPUs {c}"));
                return Err(BootstrapError::io(
                    format!(
                        "starting PE {rank}{bound}: {}",
                        opts.program.to_string_lossy()
                    ),
                    &e,
                ));
            }
        };
        let tag = opts.tag_output.then(|| format!("[PE {rank}] "));
        if let Some(out) = child.stdout.take() {
            pumps.push(pump(tag.clone(), out, false));
        }
        if let Some(err) = child.stderr.take() {
            pumps.push(pump(tag, err, true));
        }
        children.push(Some(child));
    }
    let code = supervise(&mut children, &server, opts.kill_grace);
    finish_pumps(pumps, PUMP_DRAIN);
    if let Some(file) = report_file {
        // Kept where it holds reports (the PEs logged their text; this is the JSON).
        match std::fs::metadata(&file) {
            Ok(m) if m.len() > 0 => report(&format!(
                "this job's hang reports (JSON lines) are in {}",
                file.display()
            )),
            Ok(_) => {
                let _ = std::fs::remove_file(&file);
            }
            Err(_) => {}
        }
    }
    Ok(code)
}

/// The per-job report file that the launcher gives its PEs, or `None` where the user set
/// one (the PEs inherit it) or the default's directory cannot be made private (said on
/// stderr; the PEs then log their JSON reports).
fn job_report_file() -> Option<std::path::PathBuf> {
    if std::env::var_os(report_file::VAR).is_some_and(|v| !v.is_empty()) {
        return None;
    }
    let file = report_file::path(std::process::id(), |k| std::env::var_os(k));
    match report_file::prepare_dir(&file) {
        Ok(()) => {
            // A stale file of an earlier process with this pid is not this job's.
            let _ = std::fs::remove_file(&file);
            Some(file)
        }
        Err(why) => {
            report(&format!("no per-job hang report file: {why}"));
            None
        }
    }
}

/// Forwards a report request (SIGUSR1 to the launcher) to the lowest PE still running.
fn forward_report_request(children: &[Option<Child>]) {
    let Some((rank, child)) = children
        .iter()
        .enumerate()
        .find_map(|(rank, c)| Some((rank, c.as_ref()?)))
    else {
        return;
    };
    let pid = child.id();
    // SAFETY: kill has no memory-safety preconditions; the child is not yet reaped, so
    // its pid is still its own.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGUSR1) } == 0 {
        report(&format!(
            "SIGUSR1: PE {rank} (pid {pid}) is asked for a hang report"
        ));
    } else {
        let e = std::io::Error::last_os_error();
        report(&format!("forwarding SIGUSR1 to PE {rank} (pid {pid}): {e}"));
    }
}

/// Waits for the output pumps to copy what the PEs wrote before they exited, but no longer
/// than `limit`: a process a PE started in the background may hold its pipe open for ever,
/// and the job's exit must not wait for it.
fn finish_pumps(pumps: Vec<JoinHandle<()>>, limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut backoff = Duration::from_millis(1);
    while pumps.iter().any(|p| !p.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(POLL);
    }
    for p in pumps.into_iter().filter(|p| p.is_finished()) {
        let _ = p.join();
    }
}

/// Waits for every child; on the first failure, reports it and later kills the rest.
///
/// Which failure is "first": when a PE dies, its peers may notice (through a pidfd or the
/// rendezvous connection) and exit before the dead PE's own exit status can be collected.
/// So failures are gathered for a short settling period after the first one is seen, and
/// the one reported is a PE killed by a signal if there is one (a cause, where error exits
/// are usually reactions), else the lowest rank.
fn supervise(children: &mut [Option<Child>], server: &RendezvousServer, grace: Duration) -> i32 {
    let mut first_failure: Option<i32> = None;
    let mut failures: Vec<(usize, u32, ExitStatus)> = Vec::new();
    let mut decide_at: Option<Instant> = None;
    let mut kill_at: Option<Instant> = None;
    let watch = ExitWatch::new(children);
    let mut requests = report_signal::generation();
    loop {
        let now = report_signal::generation();
        if now != requests {
            requests = now;
            forward_report_request(children);
        }
        for (rank, slot) in children.iter_mut().enumerate() {
            let Some(child) = slot else { continue };
            match child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() {
                        failures.push((rank, child.id(), status));
                    }
                    *slot = None;
                }
                Ok(None) => {}
                Err(e) => report(&format!("cannot wait for PE {rank}: {e}")),
            }
        }
        let running = children.iter().any(Option::is_some);
        if first_failure.is_none() && !failures.is_empty() {
            let settle = *decide_at.get_or_insert_with(|| Instant::now() + SETTLE);
            if !running || Instant::now() >= settle {
                failures.sort_by_key(|(rank, _, status)| (status.signal().is_none(), *rank));
                let (rank, pid, status) = failures[0];
                let reason = describe(status);
                report(&format!("PE {rank} (pid {pid}) {reason}"));
                server.report_failure(rank, &format!("process {pid} {reason}"));
                first_failure = Some(exit_code(status));
                kill_at = Some(crate::duration::deadline_after(grace));
            }
        }
        if !running {
            break;
        }
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            report(&format!(
                "killing the remaining PEs {grace:?} after the first failure"
            ));
            kill_all(children);
            break;
        }
        watch.wait(if decide_at.is_some() && first_failure.is_none() {
            SETTLE / 10
        } else {
            POLL
        });
    }
    first_failure.unwrap_or(0)
}

/// Sleeps until some child exits (through pidfds) or `POLL` passes.
struct ExitWatch {
    fds: Vec<std::os::fd::OwnedFd>,
}

impl ExitWatch {
    fn new(children: &[Option<Child>]) -> Self {
        use std::os::fd::FromRawFd;
        let fds = children
            .iter()
            .flatten()
            .filter_map(|c| {
                // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
                let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, c.id() as libc::pid_t, 0) };
                // SAFETY: a non-negative result is a fresh descriptor nothing else owns.
                (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
            })
            .collect();
        ExitWatch { fds }
    }

    /// Returns when a watched child has exited, or after `limit`. Falls back to a plain
    /// sleep where pidfds are unavailable.
    fn wait(&self, limit: Duration) {
        use std::os::fd::AsRawFd;
        let mut polls: Vec<libc::pollfd> = self
            .fds
            .iter()
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if polls.is_empty() {
            std::thread::sleep(limit);
            return;
        }
        // SAFETY: `polls` is a valid array of pollfd for the duration of the call.
        unsafe {
            libc::poll(
                polls.as_mut_ptr(),
                polls.len() as libc::nfds_t,
                limit.as_millis() as i32,
            )
        };
    }
}

fn kill_all(children: &mut [Option<Child>]) {
    for child in children.iter_mut().flatten() {
        // The child may have exited in the meantime; then there is nothing to kill.
        let _ = child.kill();
        let _ = child.wait();
    }
    children.iter_mut().for_each(|c| *c = None);
}

/// Writes `symrun: <line>` to stderr, which the PEs share, in one write.
fn report(line: &str) {
    crate::text::stderr_line(&format!("symrun: {line}"));
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        _ => format!("ended with status {status}"),
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local string (or null).
    let p = unsafe { libc::strsignal(sig) };
    if p.is_null() {
        return format!("signal {sig}");
    }
    // SAFETY: non-null strsignal results are NUL-terminated.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// Copies a child's stream to ours in whole lines (one write each, so lines of different
/// PEs never mix), each prefixed with `tag` where there is one; a last line without a
/// newline gets one.
fn pump(
    tag: Option<String>,
    stream: impl Read + Send + 'static,
    is_stderr: bool,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            if let Some(tag) = &tag {
                line.splice(0..0, tag.bytes());
            }
            // One write per line keeps lines from different PEs whole.
            let _ = if is_stderr {
                std::io::stderr().lock().write_all(&line)
            } else {
                let mut out = std::io::stdout().lock();
                out.write_all(&line).and_then(|()| out.flush())
            };
        }
    })
}

/// What [`self_launch`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelfLaunch {
    /// This process is already a PE of a job (or no `--pes` was asked): go on.
    InJob,
    /// This process launched the job, which ended with this exit code.
    Finished(i32),
}

/// Lets a program start itself as N PEs: when `--pes N` (or `--pes=N`) is among its
/// arguments and the process is not already part of a job, it re-runs itself N times
/// (without `--pes N`, and without `--bind-to V` and `--map-by V`, which bind the PEs as
/// symrun's do) under the launcher and returns [`SelfLaunch::Finished`] with the job's
/// exit code.
pub fn self_launch(timeout: Duration, kill_grace: Duration) -> Result<SelfLaunch, BootstrapError> {
    let mut rest: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some(pes) = take_option(&mut rest, "--pes") else {
        return Ok(SelfLaunch::InJob);
    };
    if std::env::var_os(ENV_RANK).is_some() {
        return Ok(SelfLaunch::InJob);
    }
    let n_pes = pes
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| BootstrapError::Config("--pes needs a positive number of PEs".into()))?;
    let mut binding = Binding::default();
    for option in Binding::OPTIONS {
        while let Some(value) = take_option(&mut rest, option) {
            let value =
                value.ok_or_else(|| BootstrapError::Config(format!("{option} needs a value")))?;
            binding
                .set(option, &value)
                .map_err(BootstrapError::Config)?;
        }
    }
    let program = std::env::current_exe()
        .map_err(|e| BootstrapError::io("finding the current executable", &e))?;
    let opts = LaunchOptions {
        n_pes,
        program: program.into_os_string(),
        args: rest,
        tag_output: false,
        timeout,
        kill_grace,
        binding,
    };
    run(&opts).map(SelfLaunch::Finished)
}

/// Removes the first `option value` or `option=value` from `args`: `None` if the option
/// is absent, `Some(None)` if its value is missing or not UTF-8.
fn take_option(args: &mut Vec<OsString>, option: &str) -> Option<Option<String>> {
    let joined = format!("{option}=");
    let at = args
        .iter()
        .position(|a| a == option || a.to_str().is_some_and(|a| a.starts_with(&joined)))?;
    let arg = args.remove(at);
    match arg.to_str().and_then(|a| a.strip_prefix(&joined)) {
        Some(value) => Some(Some(value.to_string())),
        None if at < args.len() => Some(args.remove(at).into_string().ok()),
        None => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(args: &[&str], option: &str) -> (Option<Option<String>>, Vec<OsString>) {
        let mut args: Vec<OsString> = args.iter().map(OsString::from).collect();
        (take_option(&mut args, option), args)
    }

    #[test]
    fn an_option_is_taken_with_its_value_in_either_spelling() {
        let rest: Vec<OsString> = vec!["-x".into()];
        assert_eq!(
            take(&["--pes", "2", "-x"], "--pes"),
            (Some(Some("2".into())), rest.clone())
        );
        assert_eq!(
            take(&["--pes=2", "-x"], "--pes"),
            (Some(Some("2".into())), rest.clone())
        );
        assert_eq!(take(&["-x", "--pes"], "--pes"), (Some(None), rest.clone()));
        assert_eq!(take(&["-x"], "--pes"), (None, rest));
        assert_eq!(take(&["--pesky", "1"], "--pes").0, None);
    }
}
