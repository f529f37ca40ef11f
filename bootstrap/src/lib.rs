//! How symmem PEs find each other.
//!
//! A [`Bootstrap`] is a small, byte-level, collective interface (rank, size, allgather,
//! alltoall, barrier, broadcast, abort) that the runtime uses during init, allocation and
//! finalize. It is never on a data path. Three implementations exist:
//!
//! - [`tcp::TcpBootstrap`]: a TCP rendezvous hosted by the `symrun` launcher or by rank 0
//!   (unique-id init, see [`UniqueId`], or launcher variables such as torchrun's and
//!   Slurm's, see [`env`](mod@env); or a PMI-1 process manager such as Hydra's `mpiexec`,
//!   see [`pmi`]; or a PMIx server such as Open MPI's `mpirun`, see [`pmix`]);
//! - [`single::SingleBootstrap`]: a program started without any launcher is one PE;
//! - `mpi::MpiBootstrap` (feature `mpi`): rsmpi, under mpirun/srun or from an existing
//!   communicator.
//!
//! Every blocking call has a deadline. When a peer never arrives or dies, the error names
//! the rank(s) instead of hanging; a peer whose host dies or is cut off is noticed within
//! the dead-peer time ([`net`]).

pub mod affinity;
pub mod auth;
pub mod duration;
pub mod env;
pub mod error;
#[doc(hidden)]
pub mod fault;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod interface;
pub mod launcher;
mod launcher_job;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod net;
pub mod node;
pub mod pmi;
pub mod pmix;
pub mod report_file;
pub mod report_signal;
pub mod select;
pub mod single;
pub mod tcp;
mod text;
mod unique_id;
pub mod vars;
pub mod wire;

pub use error::BootstrapError;
pub use interface::{Bootstrap, BootstrapKind};
pub use net::{detect_dead_peer, DEAD_PEER_TIMEOUT_VAR, DEFAULT_DEAD_PEER_TIMEOUT};
pub use node::LauncherNode;
pub use select::{decide, from_env, BootstrapChoice, Decision, LaunchEnv, Plan};
pub use unique_id::{advertised_ip, random_nonce, UniqueId};
