//! The one wait policy of symmem: spin, then yield, then sleep. The host runtime's waits
//! (`wait_for`: signals, quiet, `barrier_all`), the CPU executor's device waits and the MPI
//! bootstrap's `MPI_Test` polls all use it; each adds its own checks (dead peers, deadlines)
//! on the rounds where [`Backoff::is_slow`] is true.
//!
//! Machines here may run more PEs than cores (4 PEs on 2 cores in CI), so a pure busy
//! spin can starve the very PE it waits for. Short waits stay in the spin phase and pay no
//! syscall; long waits give the core away and, once sleeping, are cheap enough that the
//! caller can afford to check peer health and deadlines on every round.
//!
//! Why the spin phase looks the way it does (measured with `symmem-perf` on a 2-core
//! Xeon VM, where one `pause` takes ~18 ns):
//!
//! - **One `pause` between checks**, not an exponential 1, 2, 4 … 64: a ping-pong or
//!   barrier partner answers within a few hundred ns, and with exponential rounds the
//!   answer sat unnoticed for up to a whole round. The one-way put_signal ping-pong went
//!   from 0.31–0.46 µs to the time of a bare flag ping-pong measured alongside (~0.15–0.2).
//! - **Long** ([`SPIN_ROUNDS`] checks, ~37 µs here): with 256 checks (~5 µs) an interrupt
//!   or a descheduling of the partner pushed enough waits into the yield and sleep phases
//!   that the ping-pong was 6–27% slower than the bare flag; from 1024 checks on it
//!   matched it within noise (0.95–1.11×).
//! - **A `yield_now` every [`YIELD_EVERY`] checks** inside the spin phase: when the
//!   partner is waiting for this very core (more runnable threads than cores, e.g. 4 PEs
//!   on 2 cores, or a compile running beside the job), it gets the core after ~2 µs
//!   instead of after the whole spin phase. With a CPU hog beside a 2-PE run, barrier_all
//!   took 17–75 µs without these yields and 3–4 µs with them; without a hog, the yields
//!   (a syscall that returns at once when nothing else is runnable) did not change the
//!   ping-pong latency.
//!
//! Under loom every round is a yield: the model only needs to know that the thread waits.

use std::time::Duration;

use crate::primitive::{hint, thread};

/// Checks in the spin phase, one `pause` (or, every [`YIELD_EVERY`]-th, one yield)
/// apart. `pause` takes ~3–50 ns depending on the CPU: roughly 5–100 µs of spinning.
const SPIN_ROUNDS: u32 = 2048;
/// In the spin phase, every this many checks yield the core instead of pausing.
const YIELD_EVERY: u32 = 128;
/// Rounds of `yield_now` after spinning.
const YIELD_ROUNDS: u32 = 16;
/// First sleep; doubles up to [`MAX_SLEEP`].
const MIN_SLEEP: Duration = Duration::from_micros(20);
/// Longest sleep between two checks.
const MAX_SLEEP: Duration = Duration::from_millis(1);

/// Backoff state for one wait: call [`snooze`](Self::snooze) each time the awaited
/// condition is still false.
#[derive(Debug, Default)]
pub struct Backoff {
    step: u32,
}

impl Backoff {
    /// A fresh backoff, in the spin phase.
    #[inline]
    pub fn new() -> Self {
        Backoff { step: 0 }
    }

    /// Waits a little, longer each time once past the spin phase.
    #[inline]
    pub fn snooze(&mut self) {
        if self.step < SPIN_ROUNDS {
            self.step += 1;
            if self.step.is_multiple_of(YIELD_EVERY) {
                thread::yield_now();
            } else {
                hint::spin_loop();
            }
        } else {
            self.snooze_slow();
        }
    }

    /// The yield and sleep phases, out of line to keep the spin loop tight.
    #[cold]
    #[inline(never)]
    fn snooze_slow(&mut self) {
        let past_spin = self.step - SPIN_ROUNDS;
        if past_spin < YIELD_ROUNDS {
            thread::yield_now();
        } else {
            let doublings = (past_spin - YIELD_ROUNDS).min(16);
            thread::sleep((MIN_SLEEP * (1 << doublings)).min(MAX_SLEEP));
        }
        self.step = self.step.saturating_add(1);
    }

    /// True once the wait has left the spin phase: the caller should now check health and
    /// deadlines, which cost a syscall each.
    #[inline]
    pub fn is_slow(&self) -> bool {
        self.step >= SPIN_ROUNDS
    }
}
