//! Loops of `test` calls, for the hang report: a PE that polls a word with `test` (the
//! OpenSHMEM idiom, with or without a `fence`) is waiting, not in user code, though no
//! call of it blocks.
//!
//! A failed test counts itself (one relaxed increment); every [`SAMPLE`]th failure
//! records what was tested and when, under a lock. A passing test ends the loop (one
//! relaxed load while none is recorded). The record counts as a wait while its last
//! sample is recent ([`STALE_AFTER`]): a loop that gave up is no longer one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::record::Wait;

/// Failed tests between two samples.
const SAMPLE: u64 = 256;

/// A loop whose last sample is older than this has ended.
const STALE_AFTER: Duration = Duration::from_secs(5);

/// What a loop of tests polls and since when.
struct Sampled {
    op: &'static str,
    detail: String,
    first: Instant,
    last: Instant,
}

/// This PE's loop of failing tests, if one runs.
#[derive(Default)]
pub(crate) struct TestLoop {
    misses: AtomicU64,
    recorded: AtomicBool,
    sample: Mutex<Option<Sampled>>,
}

impl TestLoop {
    /// Notes a test `op` that found its condition false; `detail` names the word.
    #[inline]
    pub fn missed(&self, op: &'static str, detail: impl FnOnce() -> String) {
        if self
            .misses
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SAMPLE)
        {
            self.sample(op, detail());
        }
    }

    #[cold]
    fn sample(&self, op: &'static str, detail: String) {
        let now = Instant::now();
        let mut s = self.sample.lock().unwrap_or_else(|p| p.into_inner());
        match s.as_mut() {
            // The detail carries the value last seen: the same loop.
            Some(s) if s.op == op => {
                s.last = now;
                s.detail = detail;
            }
            _ => {
                *s = Some(Sampled {
                    op,
                    detail,
                    first: now,
                    last: now,
                })
            }
        }
        self.recorded.store(true, Ordering::Relaxed);
    }

    /// Notes a test that found its condition true: the loop, if any, is over.
    #[inline]
    pub fn passed(&self) {
        if self.recorded.load(Ordering::Relaxed) {
            self.end();
        }
    }

    #[cold]
    fn end(&self) {
        *self.sample.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.recorded.store(false, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
    }

    /// The loop as a wait, while it runs.
    pub fn wait(&self) -> Option<Wait> {
        let s = self.sample.lock().unwrap_or_else(|p| p.into_inner());
        let s = s.as_ref().filter(|s| s.last.elapsed() < STALE_AFTER)?;
        Some(Wait {
            op: format!("{} (polled in a loop)", s.op).into(),
            detail: s.detail.clone(),
            peer: None,
            collective: None,
            since: s.first,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_tests_make_a_wait_until_one_passes() {
        let l = TestLoop::default();
        assert!(l.wait().is_none());
        for i in 0..3 * SAMPLE {
            l.missed("test", || {
                format!("allocation #1[0] Eq 1 (last seen {})", i % 2)
            });
        }
        let w = l.wait().expect("a loop of failing tests is a wait");
        assert_eq!(w.op, "test (polled in a loop)");
        assert!(w.detail.starts_with("allocation #1[0]"), "{}", w.detail);
        l.passed();
        assert!(l.wait().is_none());
        // The next loop starts afresh.
        l.missed("test_any", || "ivars of allocation #2".into());
        assert_eq!(
            l.wait().map(|w| w.detail),
            Some("ivars of allocation #2".into())
        );
    }
}
