//! One live bootstrap per process in the job its launcher started.
//!
//! A launcher (symrun, MPI, a PMI-1 or PMIx server, launcher variables) starts one job, and
//! each process joins it once per init: the n-th init of every process meets the n-th init
//! of the others (symrun's session and the `env` generation count inits; PMI and PMIx key
//! each rendezvous by it; MPI matches communicator duplicates by their order). That pairs
//! runtimes correctly when they come one after the other. Two that are alive at once, made
//! on two threads, would be numbered in whatever order the threads ran, so one process's
//! first runtime could meet another's second: two jobs that each look healthy but exchange
//! data with the wrong runtime. So while one bootstrap of this process is in the launcher's
//! job, [`claim`] refuses a second and says how to make one that is its own job instead: a
//! unique id, or a team split off the first.
//!
//! The claim is per process because what it guards is: the launcher's environment, one
//! per process. Bootstraps that are their own job (a unique id, a duplicated MPI
//! communicator, a single PE) take none.

use std::sync::Mutex;
use std::time::Duration;

use crate::auth;
use crate::error::BootstrapError;
use crate::interface::{Bootstrap, BootstrapKind};
use crate::node::LauncherNode;

/// The launcher whose job a live bootstrap of this process is in, if any.
static HELD: Mutex<Option<String>> = Mutex::new(None);

/// This process's place in its launcher's job, held while a bootstrap is in it.
#[derive(Debug)]
pub(crate) struct Claim(());

impl Drop for Claim {
    fn drop(&mut self) {
        *HELD.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Takes this process's place in the job `launcher` started, or fails naming the launcher
/// and the ways to a second runtime when a live bootstrap of this process holds it.
pub(crate) fn claim(launcher: &str) -> Result<Claim, BootstrapError> {
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(holder) = held.as_deref() {
        return Err(BootstrapError::Config(format!(
            "this process already has a live runtime in the job that {holder} started, and a launcher's job takes one runtime per process at a time (two, made on two threads, could each meet another process's other one); finalize it first, or start the second runtime as a job of its own: `init_with_unique_id` with an id that the first runtime's `broadcast_unique_id()` hands every PE, or split a team off the first runtime"
        )));
    }
    *held = Some(launcher.to_string());
    Ok(Claim(()))
}

/// A bootstrap in the launcher's job, holding this process's [`Claim`] until it is dropped.
pub(crate) struct Claimed {
    inner: Box<dyn Bootstrap>,
    _claim: Claim,
}

impl Claimed {
    /// `inner`, made under `claim`.
    pub(crate) fn new(inner: Box<dyn Bootstrap>, claim: Claim) -> Self {
        Claimed {
            inner,
            _claim: claim,
        }
    }
}

impl Bootstrap for Claimed {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn kind(&self) -> BootstrapKind {
        self.inner.kind()
    }
    fn timeout(&self) -> Duration {
        self.inner.timeout()
    }
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        self.inner.allgather(mine)
    }
    fn alltoall(&self, outgoing: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        self.inner.alltoall(outgoing)
    }
    fn barrier(&self) -> Result<(), BootstrapError> {
        self.inner.barrier()
    }
    fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>, BootstrapError> {
        self.inner.broadcast(root, data)
    }
    fn abort(&self, reason: &str) {
        self.inner.abort(reason)
    }
    fn failure(&self) -> Option<BootstrapError> {
        self.inner.failure()
    }
    fn peer_lost(&self) {
        self.inner.peer_lost()
    }
    fn launcher_node(&self) -> Option<LauncherNode> {
        self.inner.launcher_node()
    }
    fn job_key(&self) -> Option<&auth::JobKey> {
        self.inner.job_key()
    }
    fn public_job_key(&self) -> Option<&auth::PublicJobKey> {
        self.inner.public_job_key()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_fails_until_the_first_is_dropped() {
        let first = claim("symrun").unwrap();
        let err = claim("symrun").unwrap_err().to_string();
        assert!(
            err.contains("job that symrun started") && err.contains("init_with_unique_id"),
            "{err}"
        );
        drop(first);
        drop(claim("PMI-1").unwrap());
    }
}
