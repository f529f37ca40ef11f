//! Refusing a job on several nodes whose key anyone may derive: under launchers that hand
//! out no secret (the `env` bootstrap: torchrun, Slurm without PMI, Kubernetes), the key
//! comes from `SYMMEM_JOB_SECRET`, else from public job identity alone. On one node that
//! is tolerated (a warning says so); across nodes rank 0's port is reachable from the
//! network, so init fails unless `SYMMEM_ALLOW_PUBLIC_JOB_KEY` accepts the risk.

use std::collections::HashSet;

use symmem_bootstrap::Bootstrap;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::topology::Topology;

/// Fails when the job spans more than one node, its key was derived from public job
/// identity, and `config` does not allow that. Every PE holds the same topology (an
/// allgather) and the same launcher variables, so every PE reaches the same verdict and
/// none is left waiting for the others.
pub(super) fn check(config: &Config, bootstrap: &dyn Bootstrap, topo: &Topology) -> Result<()> {
    let Some(public) = bootstrap.public_job_key() else {
        return Ok(());
    };
    let nodes = (0..topo.n_pes())
        .map(|pe| topo.node(pe))
        .collect::<HashSet<_>>()
        .len();
    if nodes < 2 {
        return Ok(());
    }
    if config.allow_public_job_key {
        tracing::warn!(
            nodes,
            "{}=1: this job on {nodes} nodes runs with a key derived from {}'s public job identity ({}); anyone who can reach rank 0's port and guess it can join",
            crate::config::ALLOW_PUBLIC_JOB_KEY.name(),
            public.launcher,
            public.derived_from
        );
        return Ok(());
    }
    Err(Error::PublicJobKey {
        pe: topo.my_pe(),
        nodes,
        launcher: public.launcher.clone(),
        derived_from: public.derived_from.clone(),
    })
}
