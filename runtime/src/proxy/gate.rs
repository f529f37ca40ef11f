//! When the proxy thread of a CPU PE may sleep: only kernels put requests in its ring, and
//! on a CPU PE every kernel runs inside a launch of the executor, which this gate counts.
//! With no launch running and nothing left to do, the thread waits on the gate instead of
//! waking every millisecond to look at an empty ring (each of those wake-ups preempted a
//! spinning wait of its own PE on a small machine: the socket round trips' tail). A GPU
//! PE's kernels run on the GPU, out of the host's sight, so its gate never lets the thread
//! sleep.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The longest the proxy thread sleeps on the gate before it looks at the ring again
/// anyway: a bound on the cost of a wake-up this gate missed, were there one.
pub(crate) const LONGEST_SLEEP: Duration = Duration::from_millis(50);

/// Launches of this PE's executor: how many run now, and how many have begun.
pub(crate) struct KernelGate {
    /// Whether the thread may sleep here at all (a CPU PE).
    sleeps: bool,
    /// The longest one sleep lasts ([`LONGEST_SLEEP`]).
    longest: Duration,
    /// Launches running now.
    running: Mutex<usize>,
    /// Launches begun: raised under `running`'s lock, read without it by the proxy
    /// thread on every round of its loop.
    begun: AtomicU64,
    /// Signalled when a launch begins and when the channel stops.
    changed: Condvar,
}

/// A running launch, counted by its gate until dropped.
pub(crate) struct RunningKernel<'a>(&'a KernelGate);

impl KernelGate {
    /// A gate whose sleeps last at most `longest`; `sleeps` is false on a GPU PE, whose
    /// kernels the host does not see.
    pub(crate) fn new(sleeps: bool, longest: Duration) -> Self {
        KernelGate {
            sleeps,
            longest,
            running: Mutex::new(0),
            begun: AtomicU64::new(0),
            changed: Condvar::new(),
        }
    }

    /// Counts a launch from now until the returned value drops. Call before the launch's
    /// first kernel thread runs.
    pub(crate) fn begin(&self) -> RunningKernel<'_> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        *running += 1;
        self.begun.fetch_add(1, Ordering::AcqRel);
        drop(running);
        self.changed.notify_all();
        RunningKernel(self)
    }

    /// How many launches have begun: the proxy thread reads it before it looks at the ring,
    /// so that a launch that began, wrote and ended after that look keeps it awake.
    pub(crate) fn begun(&self) -> u64 {
        self.begun.load(Ordering::Acquire)
    }

    /// Sleeps while no launch runs, none has begun since `seen` was read from
    /// [`Self::begun`], and `stop` is clear, for at most the gate's longest sleep; returns at
    /// once on a GPU PE's gate. The caller has nothing left to do.
    pub(crate) fn sleep_until_a_launch(&self, seen: u64, stop: &AtomicBool) {
        if !self.sleeps {
            return;
        }
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        // `begun` only rises under this lock, so it cannot change between this check and
        // the wait, which releases the lock atomically.
        if *running != 0
            || self.begun.load(Ordering::Acquire) != seen
            || stop.load(Ordering::Acquire)
        {
            return;
        }
        // A spurious wake-up or the timeout only sends the caller round its loop once.
        let _ = self.changed.wait_timeout(running, self.longest);
    }

    /// Wakes a sleeping proxy thread (the channel is stopping).
    pub(crate) fn wake(&self) {
        // Taken so that a thread between its checks and its wait cannot miss this.
        drop(self.running.lock().unwrap_or_else(|p| p.into_inner()));
        self.changed.notify_all();
    }
}

impl Drop for RunningKernel<'_> {
    fn drop(&mut self) {
        *self.0.running.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    /// Long enough that a wake-up the gate missed shows as a test taking a minute; the
    /// bound the tests check is half of it, far above any scheduling delay.
    const MINUTE: Duration = Duration::from_secs(60);
    const PROMPT: Duration = Duration::from_secs(30);

    #[test]
    fn a_launch_beginning_wakes_a_sleeping_thread_at_once() {
        let gate = Arc::new(KernelGate::new(true, MINUTE));
        let stop = Arc::new(AtomicBool::new(false));
        let seen = gate.begun();
        let sleeper = {
            let (gate, stop) = (gate.clone(), stop.clone());
            std::thread::spawn(move || {
                let t = Instant::now();
                gate.sleep_until_a_launch(seen, &stop);
                t.elapsed()
            })
        };
        std::thread::sleep(Duration::from_millis(5));
        let running = gate.begin();
        let slept = sleeper.join().unwrap();
        assert!(slept < PROMPT, "slept {slept:?} after the launch began");
        drop(running);
    }

    #[test]
    fn a_running_launch_or_one_begun_since_the_look_keeps_the_thread_awake() {
        let gate = KernelGate::new(true, MINUTE);
        let stop = AtomicBool::new(false);
        let seen = gate.begun();
        let running = gate.begin();
        let t = Instant::now();
        gate.sleep_until_a_launch(gate.begun(), &stop);
        drop(running);
        // The launch began and ended after `seen` was read: its requests may be in the ring.
        gate.sleep_until_a_launch(seen, &stop);
        assert!(t.elapsed() < PROMPT, "slept {:?}", t.elapsed());
    }

    #[test]
    fn a_gpu_pe_gate_never_sleeps_and_stop_wakes_a_cpu_one() {
        let stop = AtomicBool::new(false);
        let gpu = KernelGate::new(false, MINUTE);
        let t = Instant::now();
        gpu.sleep_until_a_launch(gpu.begun(), &stop);
        assert!(t.elapsed() < PROMPT);

        let gate = Arc::new(KernelGate::new(true, MINUTE));
        let stop = Arc::new(AtomicBool::new(false));
        let sleeper = {
            let (gate, stop) = (gate.clone(), stop.clone());
            std::thread::spawn(move || {
                let t = Instant::now();
                gate.sleep_until_a_launch(gate.begun(), &stop);
                t.elapsed()
            })
        };
        std::thread::sleep(Duration::from_millis(5));
        stop.store(true, Ordering::Release);
        gate.wake();
        assert!(sleeper.join().unwrap() < PROMPT);
    }
}
