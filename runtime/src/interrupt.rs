//! A check that the caller of a blocking host wait supplies to stop it early: Python's
//! Ctrl-C, say, which only the waiting thread can see. The check runs in the slow phase of
//! every host wait (after its spinning), so a wait that has been going for more than a few
//! microseconds stops within about a millisecond of the check turning true.

use std::cell::Cell;

thread_local! {
    /// The check of the waits on this thread, while [`with_interrupt_check`] runs.
    static CHECK: Cell<Option<fn() -> bool>> = const { Cell::new(None) };
}

/// Runs `f` with `check` consulted by every host wait `f` makes on this thread: once it
/// returns `true`, the wait fails with [`Error::Interrupted`](crate::Error::Interrupted).
/// Nests: the previous check is back in place when `f` returns (or panics).
pub fn with_interrupt_check<R>(check: fn() -> bool, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<fn() -> bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CHECK.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CHECK.with(|c| c.replace(Some(check))));
    f()
}

/// Whether this thread's check (if any) asks the wait to stop.
pub(crate) fn requested() -> bool {
    CHECK.with(|c| c.get()).is_some_and(|check| check())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_applies_inside_and_is_restored_after() {
        assert!(!requested());
        let inner = with_interrupt_check(
            || true,
            || {
                let nested = with_interrupt_check(|| false, requested);
                (requested(), nested)
            },
        );
        assert_eq!(inner, (true, false));
        assert!(!requested());
    }
}
