//! symmem: an NVSHMEM-style PGAS symmetric-memory runtime.
pub use symmem_runtime::*;

#[cfg(feature = "cli")]
pub mod cli;

/// The book's chapters with Rust samples (`docs/src/`), so that `cargo test --doc`
/// compiles every sample against this crate; the rest of each chapter is prose.
#[cfg(doctest)]
mod book {
    #[doc = include_str!("../docs/src/getting-started.md")]
    struct GettingStarted;
    #[doc = include_str!("../docs/src/host-api.md")]
    struct HostApi;
    #[doc = include_str!("../docs/src/collectives.md")]
    struct Collectives;
    #[doc = include_str!("../docs/src/kernels.md")]
    struct Kernels;
    #[doc = include_str!("../docs/src/gpu-pes.md")]
    struct GpuPes;
}
