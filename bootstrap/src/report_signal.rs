//! SIGUSR1 as a request for a hang report, shared by the runtime (a PE reports) and the
//! launcher (symrun forwards the request to PE 0).
//!
//! The handler only bumps a process-global generation counter (an atomic add, which is
//! async-signal-safe); whoever serves requests polls [`generation`] and acts when it moved
//! past the value it last saw, so every live runtime of a process answers one signal.
//!
//! The handler is installed while at least one [`Handler`] guard lives, and only where the
//! disposition is the default or ignored: a handler the application installed is left in
//! place (it may call [`request`] itself). When the last guard drops, the disposition found
//! at install is put back, unless something replaced this module's handler meanwhile.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Requests seen in this process: bumped by the SIGUSR1 handler and by [`request`].
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The installation shared by every [`Handler`] of the process.
struct Installed {
    /// Live guards.
    users: usize,
    /// The disposition found when the first guard installed the handler.
    previous: libc::sigaction,
}

// SAFETY: `libc::sigaction` is plain data (a handler address, a mask and flags); it is only
// read and written under the mutex.
unsafe impl Send for Installed {}

static INSTALLED: Mutex<Option<Installed>> = Mutex::new(None);

/// Requests seen so far in this process: a server of requests keeps the last value it
/// acted on and acts again when this moves.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Requests a hang report, as SIGUSR1 does. Async-signal-safe: an application that has its
/// own SIGUSR1 handler (so symmem did not install one) may call it from that handler.
pub fn request() {
    GENERATION.fetch_add(1, Ordering::Release);
}

extern "C" fn on_signal(_: libc::c_int) {
    request();
}

/// The address of [`on_signal`] as `sa_sigaction` holds it.
fn ours() -> libc::sighandler_t {
    on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t
}

/// SIGUSR1's current disposition.
fn current() -> std::io::Result<libc::sigaction> {
    // SAFETY: an all-zero sigaction is a valid value to be overwritten.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the disposition into `old`, a valid pointer.
    if unsafe { libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut old) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(old)
}

/// Keeps this module's SIGUSR1 handler installed while it lives ([`install`]).
#[derive(Debug)]
pub struct Handler(());

/// Installs the SIGUSR1 handler for `who` (named in the logs), or returns `None`, logged
/// at debug, where the application has a handler of its own or the disposition cannot be
/// read or set.
pub fn install(who: &str) -> Option<Handler> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = installed.as_mut() {
        i.users += 1;
        return Some(Handler(()));
    }
    let previous = match current() {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(target: "hang", "{who}: reading SIGUSR1's disposition: {e}; no report on SIGUSR1");
            return None;
        }
    };
    if previous.sa_sigaction != libc::SIG_DFL && previous.sa_sigaction != libc::SIG_IGN {
        tracing::debug!(target: "hang", "{who}: the application handles SIGUSR1; symmem leaves its handler in place (it may call symmem::bootstrap::report_signal::request)");
        return None;
    }
    // SAFETY: an all-zero sigaction is a valid value to fill in.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = ours();
    // Interrupted system calls restart: the application never sees EINTR from this signal.
    action.sa_flags = libc::SA_RESTART;
    // SAFETY: `action.sa_mask` is a valid sigset_t to initialise.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: `action` is a fully initialised sigaction whose handler only does an atomic
    // add (async-signal-safe); the old action is not asked for.
    if unsafe { libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::debug!(target: "hang", "{who}: installing the SIGUSR1 handler: {e}; no report on SIGUSR1");
        return None;
    }
    tracing::debug!(target: "hang", "{who}: SIGUSR1 asks for a hang report");
    *installed = Some(Installed { users: 1, previous });
    Some(Handler(()))
}

impl Drop for Handler {
    fn drop(&mut self) {
        let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        let Some(i) = installed.as_mut() else {
            return;
        };
        i.users -= 1;
        if i.users > 0 {
            return;
        }
        let previous = i.previous;
        *installed = None;
        // Only this module's handler is replaced: one the application set since stays.
        if current().is_ok_and(|c| c.sa_sigaction == ours()) {
            // SAFETY: `previous` is the disposition sigaction returned at install.
            unsafe { libc::sigaction(libc::SIGUSR1, &previous, std::ptr::null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test for the process-wide disposition, so that no other test races it.
    #[test]
    fn the_handler_counts_signals_and_restores_the_disposition() {
        let before = current().unwrap().sa_sigaction;
        let a = install("test a").expect("the default disposition is replaced");
        let b = install("test b").expect("a second user shares the handler");
        assert_eq!(current().unwrap().sa_sigaction, ours());
        let g = generation();
        // SAFETY: raise has no memory-safety preconditions; the handler is installed.
        assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
        assert_eq!(generation(), g + 1);
        drop(a);
        assert_eq!(current().unwrap().sa_sigaction, ours(), "b still uses it");
        drop(b);
        assert_eq!(current().unwrap().sa_sigaction, before);

        // An application's handler is left alone.
        extern "C" fn app(_: libc::c_int) {}
        // SAFETY: a zeroed sigaction is valid; the handler does nothing.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = app as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: a zeroed sigaction is valid, to be overwritten.
        let mut saved: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to initialised sigactions.
        unsafe { libc::sigaction(libc::SIGUSR1, &action, &mut saved) };
        assert!(install("test c").is_none());
        assert_eq!(current().unwrap().sa_sigaction, action.sa_sigaction);
        // SAFETY: as above; puts the test process's disposition back.
        unsafe { libc::sigaction(libc::SIGUSR1, &saved, std::ptr::null_mut()) };
    }
}
