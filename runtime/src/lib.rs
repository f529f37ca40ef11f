//! symmem host runtime: init and finalize, topology, the symmetric heap on host memory,
//! and the data path between PEs.
//!
//! Start with [`init`], which returns an owned [`Runtime`]; finalize happens when it is
//! dropped or explicitly through [`Runtime::finalize`].

mod access;
mod alloc;
mod allocator;
mod amo;
mod barrier;
pub mod config;
mod counters;
#[cfg(feature = "cuda")]
pub mod cuda;
mod error;
pub mod executor;
#[cfg(feature = "cuda")]
mod gpu_host;
mod health;
mod heap;
mod int;
mod launch;
mod liveness;
pub mod local;
mod logging;
mod module;
mod ordering;
mod pe_device;
mod proxy;
mod raw;
mod rma;
mod route;
mod runtime;
mod signal;
mod split_mix;
mod stream;
mod sym;
mod team;
mod topology;
mod transport;
mod wait;
mod wait_report;

pub use config::{Config, DeviceChoice, MemoryOrdering, DEFAULT_MAX_TEAMS};
pub use counters::{Counters, OpCounts};
/// The CUDA driver bindings symmem uses (for [`Stream::cuda`] and your own launches).
#[cfg(feature = "cuda")]
pub use cudarc;
pub use error::{Error, Result};
pub use int::{Cmp, SignalOp, SymInt};
pub use launch::{self_launch, SelfLaunch, DEFAULT_KILL_GRACE};
pub use module::Module;
pub use raw::{SymView, VIEW_ID};
pub use route::{rdma_probe, PeRoute, RoutePath};
#[cfg(feature = "mpi")]
pub use runtime::init_with_mpi_comm;
pub use runtime::{init, init_with_bootstrap, init_with_unique_id, unique_id, Runtime};
pub use stream::Stream;
pub use sym::{SymBuf, SymRef};
pub use symmem_bootstrap as bootstrap;
pub use symmem_bootstrap::{Bootstrap, BootstrapKind, UniqueId};
pub use team::{collectives, Team};

/// The optional parts this build of the runtime has, by Cargo feature name: `cuda` (GPU
/// PEs), `ib` (the ibverbs transport), `mpi` (the MPI bootstrap).
pub const BUILD_FEATURES: &[(&str, bool)] = &[
    ("cuda", cfg!(feature = "cuda")),
    ("ib", cfg!(feature = "ib")),
    ("mpi", cfg!(feature = "mpi")),
];

/// Re-exported so users can bound their element types.
pub use bytemuck::Pod;
/// The device API, for kernels run by the CPU executor.
pub use symmem_device as device;
pub use symmem_device::Dim3;
