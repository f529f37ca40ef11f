//! Testing only: a process that kills itself at a named point of init, so that fault tests
//! can place a PE's death at every step deterministically instead of after a guessed sleep.
//!
//! `SYMMEM_TEST_EXIT_AT=<point>` (one of [`EXIT_POINTS`]) makes the process raise SIGKILL on
//! itself when init reaches that point: no destructor runs and no goodbye is sent, exactly
//! as when a PE is killed from outside. The variable is read here and nowhere else; the
//! runtime's configuration only validates it. Unset (always, outside tests), a point costs
//! one load of a cached flag.

use std::sync::OnceLock;

/// The variable that arms the hook.
pub const EXIT_AT_VAR: &str = "SYMMEM_TEST_EXIT_AT";

/// Every point, in the order init passes them, with where it lies.
pub const EXIT_POINTS: &[(&str, &str)] = &[
    (
        "launcher_exchange",
        "pmi and pmix bootstraps: before the process manager's barrier (PMI-1) or fence (PMIx) that publishes rank 0's rendezvous",
    ),
    (
        "rendezvous_join",
        "joining the rendezvous: after this rank's hello, before every rank has joined",
    ),
    (
        "rendezvous",
        "after joining, before the job-id broadcast (the first collective)",
    ),
    ("topology", "before the topology allgather"),
    (
        "heap_connect",
        "heap fd exchange: before connecting to the same-node peers",
    ),
    (
        "heap_serve",
        "heap fd exchange: connected to every peer, before sending this PE's heap fd",
    ),
    (
        "heap_served_one",
        "heap fd exchange: after sending this PE's heap fd to one peer",
    ),
    (
        "heap_receive",
        "heap fd exchange: heap fd sent to every peer, before receiving theirs",
    ),
    (
        "init_barrier",
        "peers mapped, before the barrier that ends init",
    ),
];

/// Checks a value of [`EXIT_AT_VAR`]; the error lists the points.
pub fn check_exit_point(value: &str) -> Result<(), String> {
    if EXIT_POINTS.iter().any(|(p, _)| *p == value) {
        Ok(())
    } else {
        let names: Vec<&str> = EXIT_POINTS.iter().map(|(p, _)| *p).collect();
        Err(format!(
            "testing only: expected one of {} (or unset)",
            names.join(", ")
        ))
    }
}

/// Kills this process with SIGKILL if [`EXIT_AT_VAR`] names `point`.
#[doc(hidden)]
pub fn exit_point(point: &'static str) {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var(EXIT_AT_VAR).ok());
    if armed.as_deref() != Some(point) {
        return;
    }
    debug_assert!(
        check_exit_point(point).is_ok(),
        "undocumented exit point {point}"
    );
    // stderr is unbuffered: the line is out before the signal. Tests look for it to prove
    // that the victim died at the point, not elsewhere.
    crate::text::stderr_line(&format!(
        "symmem: {EXIT_AT_VAR}={point}: process {} kills itself (testing only)",
        std::process::id()
    ));
    // SAFETY: raising a signal on this process; SIGKILL cannot be caught, so nothing
    // runs after it.
    unsafe { libc::raise(libc::SIGKILL) };
    unreachable!("SIGKILL returned");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_checked() {
        for (p, _) in EXIT_POINTS {
            assert!(check_exit_point(p).is_ok());
        }
        let err = check_exit_point("heap").unwrap_err();
        assert!(
            err.contains("heap_serve") && err.contains("testing only"),
            "{err}"
        );
    }
}
