//! The progress thread: how it waits for work (`SYMMEM_OFI_PROGRESS`, from the CPUs it
//! may use and the PEs on this machine), and the thread itself, which drives a provider's
//! progress while no application thread calls in.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::var::OFI_PROGRESS;
use crate::config::OfiProgress;
use crate::error::{Error, Result};
use crate::interface::Setup;
use crate::ofi::{ffi, State};

/// How long the progress thread sleeps between two progress calls where it cannot block.
const PROGRESS_SLEEP: Duration = Duration::from_micros(20);

/// The progress thread leaves progress to the application's threads while one called in
/// this recently.
const STAND_ASIDE: Duration = Duration::from_micros(100);

/// The longest the progress thread stands aside at once: while the application's threads
/// keep calling in, it checks again after a quarter of the time they have done so, from
/// [`STAND_ASIDE`] up to this (each check takes the core from a thread that polls; with a
/// check every 100 µs a put_signal ping-pong over tcp;ofi_rxm took 48-58 µs one way, with
/// these 32-41). A thread that stops calling in leaves peers' operations unserved at most
/// this long.
const MAX_ASIDE: Duration = Duration::from_millis(1);

/// How often the progress thread of a failed endpoint serves the peers still healthy.
const FAILED_POLL: Duration = Duration::from_millis(1);

/// The longest the progress thread blocks on the wait object before checking for stop.
const BLOCK_MS: i32 = 10;

/// After the wait object woke it (a peer's operation arrived), the progress thread keeps
/// polling, yielding its core between polls, this long before it blocks again: a peer
/// issuing one operation after another (a get loop) is served without a wake-up each
/// time (over tcp;ofi_rxm here a blocked thread's wake-up took a get from 16-22 to
/// 40-48 µs).
const HOT: Duration = Duration::from_micros(500);

/// When the application's threads last called into the transport.
pub(in crate::ofi) struct Activity {
    since: Instant,
    /// Nanoseconds after `since` of the last call.
    last: AtomicU64,
}

impl Activity {
    pub(in crate::ofi) fn new() -> Self {
        Activity {
            since: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    pub(in crate::ofi) fn mark(&self) {
        let now = self.since.elapsed().as_nanos() as u64;
        self.last.store(now, Ordering::Relaxed);
    }

    /// Whether a call came within `window`.
    fn recent(&self, window: Duration) -> bool {
        let now = self.since.elapsed().as_nanos() as u64;
        now.saturating_sub(self.last.load(Ordering::Relaxed)) < window.as_nanos() as u64
    }
}

/// How the progress thread waits for work, and why.
pub(in crate::ofi) struct ProgressMode {
    /// It polls, yielding its CPU between polls, on a completion queue without a wait
    /// object; else it blocks on the queue's wait object while idle.
    pub(in crate::ofi) polls: bool,
    /// Whether there is a progress thread at all (not with `manual`).
    pub(in crate::ofi) thread: bool,
    /// Why, for the log.
    pub(in crate::ofi) why: String,
}

/// This PE's progress mode (`SYMMEM_OFI_PROGRESS`), with `machine_pes` PEs on its machine
/// ([`super::machine`]).
pub(in crate::ofi) fn progress_mode(setup: &Setup<'_>, machine_pes: usize) -> ProgressMode {
    choose_progress(setup.config.ofi_progress, helper_cpus(), machine_pes)
}

/// The CPUs the progress thread may run on.
#[derive(Clone, Copy)]
enum Cpus {
    /// CPUs no PE is bound to, which symrun gave the PE's helper threads.
    Spare(usize),
    /// The CPUs of the process, which its own threads use too.
    Shared(usize),
}

/// [`progress_mode`] given the CPUs the progress thread may run on and the PEs on this
/// machine: `auto` polls where each PE's progress thread can have a CPU of its own, one
/// spare CPU per PE, or two per PE where they share the PEs' CPUs.
fn choose_progress(asked: OfiProgress, cpus: Cpus, machine_pes: usize) -> ProgressMode {
    let (polls, why) = match asked {
        OfiProgress::Manual => {
            return ProgressMode {
                // Nobody blocks on the completion queue: it needs no wait object.
                polls: true,
                thread: false,
                why: format!("{OFI_PROGRESS}=manual: no progress thread; peers' operations on this PE complete while its threads call in"),
            };
        }
        OfiProgress::Poll => (true, format!("{OFI_PROGRESS}=poll")),
        OfiProgress::Block => (false, format!("{OFI_PROGRESS}=block")),
        OfiProgress::Auto => {
            let (polls, counted) = match cpus {
                Cpus::Spare(n) => (
                    n >= machine_pes,
                    format!("{n} spare CPUs for the progress threads of {machine_pes} PEs on this machine"),
                ),
                Cpus::Shared(n) => (
                    n >= 2 * machine_pes,
                    format!("{n} CPUs shared with {machine_pes} PEs on this machine"),
                ),
            };
            let then = if polls {
                "a CPU for each progress thread; set SYMMEM_OFI_PROGRESS=block to block instead"
            } else {
                "too few for a CPU per progress thread; set SYMMEM_OFI_PROGRESS=poll to poll anyway"
            };
            (polls, format!("{OFI_PROGRESS}=auto: {counted}, {then}"))
        }
    };
    ProgressMode {
        polls,
        thread: true,
        why,
    }
}

/// The CPUs the progress thread may run on: the spare ones symrun chose for the PE's
/// helper threads, else those the process may run on.
fn helper_cpus() -> Cpus {
    match std::env::var(symmem_bootstrap::launcher::ENV_HELPER_CPUS)
        .ok()
        .and_then(|list| list.parse::<symmem_bootstrap::affinity::CpuSet>().ok())
    {
        Some(spare) => Cpus::Spare(spare.len()),
        None => Cpus::Shared(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// Starts the thread that drives a manual-progress provider while no application thread
/// does: it stands aside while one called in within [`STAND_ASIDE`] (a thread that waits
/// polls the provider itself, and two pollers only contend), and otherwise drives progress:
/// where it `polls`, all the time, yielding its CPU between polls; else blocked on the CQ's
/// wait object (`wait_fd`) until the provider has work, staying awake for [`HOT`] after
/// each arrival, or, where there is no wait object, polling every [`PROGRESS_SLEEP`].
/// After a failure it keeps serving the peers still healthy, every [`FAILED_POLL`], until
/// it is stopped ([`State::serve_after_failure`]).
pub(in crate::ofi) fn start_progress(
    me: usize,
    state: Arc<Mutex<Option<State>>>,
    activity: Arc<Activity>,
    wait_fd: i32,
    polls: bool,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("symmem-ofi-{me}"))
        .spawn(move || {
            symmem_bootstrap::affinity::place_helper_thread("the ofi transport's progress thread");
            // Sleeps of 20 µs, not the default 50 µs of timer slack on top.
            // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects this thread only.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64) };
            let mut hot_until = Instant::now();
            // Since when the application's threads have been calling in without a break.
            let mut aside_since: Option<Instant> = None;
            while !stop.load(Ordering::Acquire) {
                if activity.recent(STAND_ASIDE) {
                    let since = *aside_since.get_or_insert_with(Instant::now);
                    std::thread::sleep((since.elapsed() / 4).clamp(STAND_ASIDE, MAX_ASIDE));
                    continue;
                }
                aside_since = None;
                let hot = Instant::now() < hot_until;
                let mut may_block = false;
                let mut failed = false;
                if let Ok(mut g) = state.try_lock() {
                    match g.as_mut() {
                        Some(st) if st.failure.is_none() => {
                            // No application thread waits here: acknowledgements go now.
                            let _ = st.poll().and_then(|()| st.send_acks());
                            // Also while hot: trywait resets the wait object's own signal,
                            // so that only new arrivals make it readable.
                            // SAFETY: an open endpoint, under the lock.
                            may_block =
                                wait_fd >= 0 && unsafe { ffi::symmem_ofi_trywait(st.ep.0) } == 0;
                        }
                        Some(st) => {
                            st.serve_after_failure();
                            failed = true;
                        }
                        None => return,
                    }
                }
                if may_block {
                    // While hot, a look at the wait object (more arrivals keep the thread
                    // hot); else blocked on it, bounded so that `stop` is seen. The
                    // endpoint (and its fd) closes only after this thread is joined.
                    let mut fd = libc::pollfd {
                        fd: wait_fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    let timeout = if hot { 0 } else { BLOCK_MS };
                    // SAFETY: one valid pollfd.
                    if unsafe { libc::poll(&mut fd, 1, timeout) } > 0 {
                        hot_until = Instant::now() + HOT;
                    } else if hot {
                        std::thread::yield_now();
                    }
                } else if failed {
                    std::thread::sleep(FAILED_POLL);
                } else if hot || polls {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(PROGRESS_SLEEP);
                }
            }
        })
        .map_err(|e| Error::io("starting the ofi progress thread", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `poll` and `block` are taken as asked; `auto` polls with a spare CPU for each PE's
    /// progress thread (symrun's helper CPUs), or, where the threads share the process's
    /// CPUs, with two for each PE, and says what it counted and how to choose otherwise.
    #[test]
    fn progress_polls_when_asked_or_with_a_cpu_for_each_progress_thread() {
        assert!(choose_progress(OfiProgress::Poll, Cpus::Shared(1), 8).polls);
        assert!(!choose_progress(OfiProgress::Block, Cpus::Spare(64), 1).polls);
        let auto = choose_progress(OfiProgress::Auto, Cpus::Shared(8), 4);
        assert!(auto.polls, "{}", auto.why);
        assert!(
            auto.why.contains("8 CPUs shared with 4 PEs"),
            "{}",
            auto.why
        );
        let auto = choose_progress(OfiProgress::Auto, Cpus::Shared(7), 4);
        assert!(!auto.polls, "{}", auto.why);
        assert!(
            auto.why
                .ends_with("set SYMMEM_OFI_PROGRESS=poll to poll anyway"),
            "{}",
            auto.why
        );
        let auto = choose_progress(OfiProgress::Auto, Cpus::Spare(4), 4);
        assert!(auto.polls, "{}", auto.why);
        assert!(
            auto.why
                .contains("4 spare CPUs for the progress threads of 4 PEs"),
            "{}",
            auto.why
        );
        assert!(!choose_progress(OfiProgress::Auto, Cpus::Spare(3), 4).polls);
    }
}
