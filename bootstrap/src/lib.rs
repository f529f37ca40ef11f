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
mod unique_id;
pub mod vars;
pub mod wire;

pub use error::BootstrapError;
pub use net::{detect_dead_peer, DEAD_PEER_TIMEOUT_VAR, DEFAULT_DEAD_PEER_TIMEOUT};
pub use node::LauncherNode;
pub use select::{decide, from_env, BootstrapChoice, Decision, LaunchEnv, Plan};
pub use unique_id::{advertised_ip, random_nonce, UniqueId};

use std::time::Duration;

/// Which bootstrap implementation a [`Bootstrap`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootstrapKind {
    /// One PE, started without a launcher.
    Single,
    /// The built-in TCP rendezvous (symrun or unique-id).
    Tcp,
    /// MPI (rsmpi).
    Mpi,
}

impl std::fmt::Display for BootstrapKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BootstrapKind::Single => "single",
            BootstrapKind::Tcp => "tcp",
            BootstrapKind::Mpi => "mpi",
        })
    }
}

/// The collective interface through which PEs exchange setup data.
///
/// All collectives must be called by every rank in the same order. Payloads are bytes;
/// ranks may contribute payloads of different lengths. Every call returns within the
/// bootstrap deadline ([`Bootstrap::timeout`]) or fails with an error naming the ranks that
/// did not take part.
pub trait Bootstrap: Send + Sync {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Which implementation this is.
    fn kind(&self) -> BootstrapKind;
    /// Deadline applied to each blocking call.
    fn timeout(&self) -> Duration;
    /// Every rank contributes `mine`; every rank receives all contributions, indexed by rank.
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError>;
    /// `outgoing[r]` goes to rank `r`; the result's element `r` came from rank `r`.
    fn alltoall(&self, outgoing: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, BootstrapError>;
    /// Returns once every rank has entered the barrier.
    fn barrier(&self) -> Result<(), BootstrapError>;
    /// Every rank receives `data` as passed by `root`; other ranks' `data` is ignored.
    fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>, BootstrapError>;
    /// Tells every other rank that this rank gives up, with a reason. Does not exit the
    /// process. Their pending and future calls fail with an error naming this rank.
    fn abort(&self, reason: &str);
    /// A failure reported asynchronously (a peer died or aborted), if any. Non-blocking, so
    /// wait loops elsewhere in the runtime can poll it.
    fn failure(&self) -> Option<BootstrapError>;
    /// Tells the bootstrap that the runtime found a peer dead, whoever reported it (or
    /// that finalize failed, which leaves the job broken): one
    /// whose teardown is collective (MPI's `MPI_Finalize`, which Open MPI can block on a
    /// dead rank even under `--enable-recovery`) leaves it out at exit, so that the
    /// survivors, having reported the failure, end instead of hanging. The default does
    /// nothing.
    fn peer_lost(&self) {}
    /// The node the launcher placed this rank on (see [`node`]), where it tells:
    /// PMI-1, PMIx and launcher variables do; symrun, unique-id init, a single PE and MPI
    /// do not (`None`, the default).
    fn launcher_node(&self) -> Option<LauncherNode> {
        None
    }
    /// The job's key, from which other connections of the job derive theirs
    /// ([`auth::JobKey::subkey`]), where this bootstrap holds one: the TCP rendezvous
    /// does; a single PE and MPI do not (`None`, the default).
    fn job_key(&self) -> Option<&auth::JobKey> {
        None
    }
    /// Where the job's key comes from when it was derived from public job identity alone
    /// (launcher variables anyone may guess), not from a secret: the `env` bootstrap
    /// without `SYMMEM_JOB_SECRET`. `None` (the default) when a secret went into the key.
    fn public_job_key(&self) -> Option<&auth::PublicJobKey> {
        None
    }
}

/// Writes `line` and a newline to stderr in one write. `eprintln!` writes each formatted
/// piece separately, and a launcher that merges its ranks' stderr (mpirun, symrun)
/// would interleave the pieces with other processes' lines.
pub(crate) fn stderr_line(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Formats a list of ranks as `1, 3, 4`.
pub(crate) fn fmt_ranks(ranks: &[usize]) -> String {
    ranks
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
