//! symmem host runtime: init and finalize, topology, the symmetric heap on host memory,
//! and the data path between PEs.
//!
//! Start with [`init`], which returns an owned [`Runtime`]; finalize happens when it is
//! dropped or explicitly through [`Runtime::finalize`].

mod alloc;
mod amo;
mod barrier;
pub mod config;
mod error;
pub mod executor;
mod heap;
mod int;
mod launch;
mod liveness;
pub mod local;
mod logging;
mod ordering;
mod rma;
mod runtime;
mod signal;
mod sym;
mod topology;
mod wait;

pub use config::Config;
pub use error::{Error, Result};
pub use int::{Cmp, SignalOp, SymInt};
pub use launch::{self_launch, SelfLaunch, DEFAULT_KILL_GRACE};
#[cfg(feature = "mpi")]
pub use runtime::init_with_mpi_comm;
pub use runtime::{init, init_with_bootstrap, init_with_unique_id, unique_id, Runtime};
pub use sym::{SymBuf, SymRef};
pub use symmem_bootstrap as bootstrap;
pub use symmem_bootstrap::{Bootstrap, BootstrapKind, UniqueId};

/// Re-exported so users can bound their element types.
pub use bytemuck::Pod;
/// The device API, for kernels run by the CPU executor.
pub use symmem_device as device;
pub use symmem_device::Dim3;
