//! symmem host runtime: init and finalize, topology, the symmetric heap on host memory,
//! and the data path between PEs.
//!
//! Start with [`init`], which returns an owned [`Runtime`]; finalize happens when it is
//! dropped or explicitly through [`Runtime::finalize`].

mod alike;
mod allocator;
mod binding;
pub mod config;
mod counters;
#[cfg(feature = "cuda")]
pub mod cuda;
mod data_path;
mod device_waits;
mod error;
pub mod executor;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod hang;
mod health;
mod heap;
mod host_copy;
mod init;
mod interrupt;
mod kernel_library;
mod liveness;
mod logging;
mod module;
mod ops;
mod pe_device;
mod proxy;
mod route;
mod runtime;
mod self_launch;
mod sym;
mod team;
mod team_state;
mod topology;
mod wait_report;

pub use config::{Config, CopyBound, DeviceChoice, MemoryOrdering, DEFAULT_MAX_TEAMS};
pub use counters::{Counters, OpCounts};
pub use error::{Error, Result, TransportError};
pub use heap::MAX_ALIGN;
pub use host_copy::calibrate as copy_calibration;
#[cfg(feature = "mpi")]
pub use init::init_with_mpi_comm;
pub use init::{init, init_with_bootstrap, init_with_config, init_with_unique_id, unique_id};
pub use interrupt::with_interrupt_check;
pub use module::{KernelLibrary, Module};
pub use ops::kernels::LaunchConfig;
pub use ops::local;
pub use ops::raw::{SymView, VIEW_ID};
pub use ops::stream::Stream;
pub use route::{transport_probe, PeRoute, RoutePath};
pub use runtime::Runtime;
pub use self_launch::{self_launch, SelfLaunch, DEFAULT_KILL_GRACE};
pub use sym::{SymBuf, SymRef};
pub use symmem_bootstrap as bootstrap;
pub use symmem_bootstrap::{Bootstrap, BootstrapKind, UniqueId};
pub use symmem_transport::int::{Cmp, SignalOp, SymInt, SymWord};
pub use symmem_transport::{remote_transports, TransportBuild};
pub use team::{collectives, Team};

/// One optional part of symmem, by its Cargo feature, and whether this build has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildFeature {
    /// The Cargo feature's name (`cuda`, `ib`).
    pub name: &'static str,
    /// What it builds ("GPU PEs", "the ibverbs transport").
    pub what: &'static str,
    /// Whether this build has it.
    pub on: bool,
}

/// The optional parts this build of the runtime has, by Cargo feature: `cuda` (GPU PEs),
/// then every remote transport behind a feature ([`remote_transports`]: `ib`, `ofi`),
/// then `mpi` (the MPI bootstrap).
pub fn build_features() -> Vec<BuildFeature> {
    let transports = remote_transports().filter_map(|t| {
        t.feature.map(|name| BuildFeature {
            name,
            what: t.what,
            on: t.built,
        })
    });
    std::iter::once(BuildFeature {
        name: "cuda",
        what: "GPU PEs",
        on: cfg!(feature = "cuda"),
    })
    .chain(transports)
    .chain(std::iter::once(BuildFeature {
        name: "mpi",
        what: "the MPI bootstrap",
        on: cfg!(feature = "mpi"),
    }))
    .collect()
}

/// Re-exported so users can bound their element types.
pub use bytemuck::Pod;
/// The device API, for kernels run by the CPU executor.
pub use symmem_device as device;
/// The narrow floating-point element types (bf16, f16, OCP FP8), the same on the host and
/// in kernels.
pub use symmem_device::float::{self, bf16, f16, Fp8E4M3, Fp8E5M2};
pub use symmem_device::Dim3;
