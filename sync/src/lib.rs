//! symmem's synchronization toolkit, shared by the host runtime, the CPU executor's device
//! waits and the MPI bootstrap:
//!
//! - [`atomic`], [`thread`], [`hint`]: the loom facade. Code that imports its atomics and
//!   thread operations from here runs on std's in every normal build and on loom's under
//!   `RUSTFLAGS="--cfg loom"`, so it can be model-checked without `cfg` in its own source
//!   (crossbeam-utils' `primitive` module does the same).
//! - [`Backoff`]: the one wait policy (spin, then yield, then sleep) of every wait loop.
//! - [`CachePadded`]: a value alone on its cache line.
//! - [`barrier`]: the flag protocol of the dissemination barrier behind `barrier_all`, which
//!   `tests/loom.rs` model-checks:
//!   `RUSTFLAGS="--cfg loom" cargo test -p symmem-sync --release --test loom`.
//! - [`split_mix`]: the seeded generator behind the reproducible modes (the CPU
//!   executor's lane orders, weak ordering's delivery delays).

mod backoff;
pub mod barrier;
mod cache_padded;
mod primitive;
pub mod split_mix;

pub use backoff::Backoff;
pub use cache_padded::CachePadded;
pub use primitive::{atomic, hint, thread};
