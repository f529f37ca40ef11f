//! What every bootstrap implements ([`Bootstrap`]) and which one it is ([`BootstrapKind`]):
//! the contract between the runtime and the bootstraps, which imports none of them.

use std::time::Duration;

use crate::auth::{JobKey, PublicJobKey};
use crate::error::BootstrapError;
use crate::node::LauncherNode;

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
    /// The node the launcher placed this rank on (see [`node`](crate::node)), where it tells:
    /// PMI-1, PMIx and launcher variables do; symrun, unique-id init, a single PE and MPI
    /// do not (`None`, the default).
    fn launcher_node(&self) -> Option<LauncherNode> {
        None
    }
    /// The job's key, from which other connections of the job derive theirs
    /// ([`JobKey::subkey`]), where this bootstrap holds one: the TCP rendezvous
    /// does; a single PE and MPI do not (`None`, the default).
    fn job_key(&self) -> Option<&JobKey> {
        None
    }
    /// Where the job's key comes from when it was derived from public job identity alone
    /// (launcher variables anyone may guess), not from a secret: the `env` bootstrap
    /// without `SYMMEM_JOB_SECRET`. `None` (the default) when a secret went into the key.
    fn public_job_key(&self) -> Option<&PublicJobKey> {
        None
    }
}
