//! The one wait policy of the runtime: spin, then yield, then sleep.
//!
//! Machines here may run more PEs than cores (4 PEs on 2 cores in CI), so a pure busy
//! spin can starve the very PE it waits for. Short waits stay in the spin phase and pay no
//! syscall; long waits give the core away and, once sleeping, are cheap enough that the
//! caller can afford to check peer health and deadlines on every round.

use std::time::Duration;

/// Rounds of exponential spinning (2^0 .. 2^SPIN_LIMIT pause instructions).
const SPIN_LIMIT: u32 = 6;
/// Rounds of `yield_now` after spinning.
const YIELD_LIMIT: u32 = 16;
/// First sleep; doubles up to [`MAX_SLEEP`].
const MIN_SLEEP: Duration = Duration::from_micros(20);
/// Longest sleep between two checks.
const MAX_SLEEP: Duration = Duration::from_millis(1);

/// Backoff state for one wait.
#[derive(Debug, Default)]
pub struct Backoff {
    step: u32,
}

impl Backoff {
    /// A fresh backoff, in the spin phase.
    pub fn new() -> Self {
        Backoff { step: 0 }
    }

    /// Waits a little, longer each time.
    pub fn snooze(&mut self) {
        if self.step <= SPIN_LIMIT {
            for _ in 0..(1u32 << self.step) {
                std::hint::spin_loop();
            }
        } else if self.step <= SPIN_LIMIT + YIELD_LIMIT {
            std::thread::yield_now();
        } else {
            let doublings = (self.step - SPIN_LIMIT - YIELD_LIMIT).min(16);
            std::thread::sleep((MIN_SLEEP * (1 << doublings)).min(MAX_SLEEP));
        }
        self.step = self.step.saturating_add(1);
    }

    /// True once the wait has left the spin phase: the caller should now check health and
    /// deadlines, which cost a syscall each.
    pub fn is_slow(&self) -> bool {
        self.step > SPIN_LIMIT
    }
}
