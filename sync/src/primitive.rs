//! The loom facade: std's atomics, threads and spin hints in every normal build, loom's
//! under `cfg(loom)`.

/// Atomics: std's, or loom's under `cfg(loom)`.
pub mod atomic {
    #[cfg(loom)]
    pub use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
    #[cfg(not(loom))]
    pub use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

/// Threads: std's, or loom's under `cfg(loom)`.
pub mod thread {
    #[cfg(loom)]
    pub use loom::thread::{spawn, yield_now, JoinHandle};
    #[cfg(not(loom))]
    pub use std::thread::{sleep, spawn, yield_now, JoinHandle};

    /// Under loom, time does not pass: a sleep is a yield, which lets the model run the
    /// other threads (what a sleeping waiter is waiting for).
    #[cfg(loom)]
    pub fn sleep(_: std::time::Duration) {
        loom::thread::yield_now();
    }
}

/// Spin-loop hints: std's, or loom's under `cfg(loom)` (where a spin is a yield).
pub mod hint {
    #[cfg(loom)]
    pub use loom::hint::spin_loop;
    #[cfg(not(loom))]
    pub use std::hint::spin_loop;
}
