//! Waiting for a kernel while watching the job: a peer that dies while this PE's kernel
//! waits for it fails that kernel within milliseconds, naming the peer, instead of at the
//! device wait's deadline (`SYMMEM_TIMEOUT`, 60 s by default).
//!
//! The host polls the kernel (spinning first, as `cuStreamSynchronize` would, then sleeping
//! [`POLL_SLEEP`] between queries) and every [`HEALTH_PERIOD`] asks whether a peer died.
//! The first failure found is handed to `abort` once, which sets the kernel's failed-peer
//! word (`ErrorRecord::peer_failed`); its device waits read that word in their sleeping
//! phase and trap. The wait then goes on until the kernel has ended, so nothing the kernel
//! touches is released under it.

use std::time::{Duration, Instant};

/// Queries made spinning before the first sleep (a few milliseconds of driver calls).
const SPIN_QUERIES: u32 = 4096;
/// Sleep between two queries of a kernel that runs longer.
const POLL_SLEEP: Duration = Duration::from_micros(20);
/// How often a long wait asks whether a peer died.
const HEALTH_PERIOD: Duration = Duration::from_millis(10);

/// Waits until `ended()` returns the kernel's result (`None` while it runs). After the spin,
/// and then every [`HEALTH_PERIOD`] until one is found, asks `failed()` for a peer failure;
/// the first is passed to `abort`. Returns the kernel's result and that failure.
pub(crate) fn wait_for_kernel<E>(
    mut ended: impl FnMut() -> Option<Result<(), E>>,
    mut failed: impl FnMut() -> Option<E>,
    mut abort: impl FnMut(&E),
) -> (Result<(), E>, Option<E>) {
    let mut queries = 0u32;
    let mut next_check: Option<Instant> = None;
    let mut failure = None;
    loop {
        if let Some(result) = ended() {
            return (result, failure);
        }
        if queries < SPIN_QUERIES {
            queries += 1;
            std::hint::spin_loop();
            continue;
        }
        let now = Instant::now();
        if failure.is_none() && next_check.is_none_or(|at| now >= at) {
            next_check = Some(now + HEALTH_PERIOD);
            if let Some(e) = failed() {
                abort(&e);
                failure = Some(e);
            }
        }
        std::thread::sleep(POLL_SLEEP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_kernel_that_ends_during_the_spin_is_never_checked_on() {
        let polls = Cell::new(0);
        let (result, failure) = wait_for_kernel(
            || {
                polls.set(polls.get() + 1);
                (polls.get() == 10).then_some(Ok::<(), String>(()))
            },
            || panic!("no health check during the spin"),
            |_| panic!("no abort"),
        );
        assert_eq!((result, failure), (Ok(()), None));
        assert_eq!(polls.get(), 10);
    }

    #[test]
    fn a_failure_found_during_a_long_kernel_aborts_it_once_and_is_returned() {
        let aborted = Cell::new(0);
        let checks = Cell::new(0);
        let (result, failure) = wait_for_kernel(
            // The kernel traps once aborted (its waits read the failed-peer word).
            || (aborted.get() > 0).then(|| Err("trapped".to_string())),
            || {
                checks.set(checks.get() + 1);
                (checks.get() >= 2).then(|| "PE 1 died".to_string())
            },
            |e| {
                assert_eq!(e, "PE 1 died");
                aborted.set(aborted.get() + 1);
            },
        );
        assert_eq!(result, Err("trapped".to_string()));
        assert_eq!(failure.as_deref(), Some("PE 1 died"));
        assert_eq!((checks.get(), aborted.get()), (2, 1));
    }

    #[test]
    fn after_a_failure_the_wait_goes_on_until_the_kernel_ends() {
        let polls_after = Cell::new(0u32);
        let aborted = Cell::new(false);
        let (result, failure) = wait_for_kernel(
            || {
                if aborted.get() {
                    polls_after.set(polls_after.get() + 1);
                }
                (polls_after.get() == 5).then_some(Ok::<(), String>(()))
            },
            || Some("PE 2 died".to_string()),
            |_| {
                assert!(!aborted.get(), "abort runs once");
                aborted.set(true);
            },
        );
        assert_eq!(result, Ok(()));
        assert_eq!(failure.as_deref(), Some("PE 2 died"));
    }
}
