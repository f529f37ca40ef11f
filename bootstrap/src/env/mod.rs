//! The `env` bootstrap: joining a job from the variables its launcher sets.
//!
//! Launchers without a PMI server still tell each process its rank, the job size and where
//! rank 0 is. Rank 0 hosts the TCP rendezvous (as in unique-id init) and the other ranks
//! connect to it, retrying until `SYMMEM_BOOTSTRAP_TIMEOUT`.
//!
//! | source | rank, size | rank 0's host | port |
//! |---|---|---|---|
//! | torchrun 2.x (`TORCHELASTIC_RUN_ID` set) | `RANK`, `WORLD_SIZE` | `MASTER_ADDR` | `SYMMEM_ROOT_PORT`, else `MASTER_PORT` + [`MASTER_PORT_OFFSET`] |
//! | Kubeflow PyTorchJob, or `env://` variables set by hand | `RANK`, `WORLD_SIZE` | `MASTER_ADDR` | as above |
//! | Kubernetes Indexed Job / JobSet | `JOB_COMPLETION_INDEX`, `SYMMEM_WORLD_SIZE` | `SYMMEM_ROOT_ADDR` | `SYMMEM_ROOT_PORT`, else [`DEFAULT_ROOT_PORT`] |
//! | Slurm `srun` without a PMI plugin | `SLURM_PROCID`, `SLURM_NTASKS` | first host of `SLURM_STEP_NODELIST` | `SYMMEM_ROOT_PORT`, else the first of `SLURM_STEP_RESV_PORTS`, else one derived from the job and step ids ([`slurm_derived_port`]) |
//!
//! `SYMMEM_ROOT_ADDR` overrides rank 0's host for every source. torchrun's agent may serve
//! its own store on `MASTER_PORT`, so rank 0 never binds that port itself.
//!
//! # Job secret and threat model
//! These launchers give no private channel, so the rendezvous is admitted by a secret that
//! every rank can compute: `SYMMEM_JOB_SECRET` when set (from a Kubernetes Secret, say),
//! else the launcher's job identity (torchrun's run id, Slurm's job and step ids, the
//! root address and size). A derived secret only separates jobs from each other: anyone who
//! can reach rank 0's port and guess the job identity can join the rendezvous, so rank 0
//! logs a warning at init. The rendezvous key is derived from the secret and the job
//! identity with HKDF ([`crate::auth`]), so the same secret in two jobs gives two keys;
//! neither the secret nor the key ever crosses a socket (each connection proves the key
//! both ways with a challenge-response). A secret should be random and long (32 random
//! bytes as hex, say): anyone who completes a handshake can try to guess a short one
//! offline. A job whose PEs span more than one node is refused at init without
//! `SYMMEM_JOB_SECRET` unless [`ENV_ALLOW_PUBLIC_JOB_KEY`] is set: the bootstrap reports
//! the derivation ([`Bootstrap::public_job_key`](crate::interface::Bootstrap::public_job_key)), and
//! the runtime, which knows the nodes, decides.

pub mod hostlist;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::auth::{JobKey, PublicJobKey};

use crate::error::BootstrapError;
use crate::node::{slurm_node, LauncherNode};
use crate::tcp::TcpBootstrap;
use crate::vars::number;

/// Overrides the host of rank 0's rendezvous (required for Kubernetes Indexed Jobs).
pub const ENV_ROOT_ADDR: &str = "SYMMEM_ROOT_ADDR";
/// Overrides the port of rank 0's rendezvous.
pub const ENV_ROOT_PORT: &str = "SYMMEM_ROOT_PORT";
/// The job secret shared by every rank.
pub const ENV_JOB_SECRET: &str = "SYMMEM_JOB_SECRET";
/// Lets a job that spans several nodes run with a key derived from its public identity
/// (no `SYMMEM_JOB_SECRET`); read by the runtime's init, which refuses such a job
/// otherwise.
pub const ENV_ALLOW_PUBLIC_JOB_KEY: &str = "SYMMEM_ALLOW_PUBLIC_JOB_KEY";
/// The job size for Kubernetes Indexed Jobs, which do not export their completions count.
pub const ENV_WORLD_SIZE: &str = "SYMMEM_WORLD_SIZE";
/// Rank 0 listens on `MASTER_PORT` plus this, leaving `MASTER_PORT` to torchrun's store.
pub const MASTER_PORT_OFFSET: u16 = 1000;
/// The rendezvous port of a Kubernetes Indexed Job when `SYMMEM_ROOT_PORT` is not set.
pub const DEFAULT_ROOT_PORT: u16 = 29650;
/// The largest job the `env` bootstrap accepts.
pub const MAX_WORLD_SIZE: usize = 65536;
/// Ports derived from Slurm job ids lie in `SLURM_PORT_BASE..SLURM_PORT_BASE + SLURM_PORT_SPAN`
/// (below Linux's ephemeral range).
const SLURM_PORT_BASE: u16 = 20000;
const SLURM_PORT_SPAN: u16 = 12000;

/// Which launcher's variables describe the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvSource {
    /// torchrun (`TORCHELASTIC_RUN_ID`, `RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`).
    Torchrun,
    /// PyTorch's `env://` variables without torchrun: Kubeflow's PyTorchJob, or set by hand.
    PyTorchEnv,
    /// A Kubernetes Indexed Job or JobSet (`JOB_COMPLETION_INDEX`).
    K8sIndexed,
    /// Slurm's `srun` without a PMI plugin (`SLURM_PROCID`, `SLURM_NTASKS`).
    Slurm,
}

impl std::fmt::Display for EnvSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EnvSource::Torchrun => "torchrun",
            EnvSource::PyTorchEnv => "PyTorch env:// variables (Kubeflow PyTorchJob)",
            EnvSource::K8sIndexed => "Kubernetes Indexed Job",
            EnvSource::Slurm => "Slurm srun (no PMI plugin)",
        })
    }
}

pub use crate::vars::Lookup;

/// What one launcher says about this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Who says it, e.g. `Slurm`.
    pub source: String,
    /// The variables, as `NAME=value, NAME=value`.
    pub vars: String,
    /// This process's rank, when the launcher tells.
    pub rank: Option<usize>,
    /// The number of ranks, when the launcher tells.
    pub size: Option<usize>,
}

/// A job described by launcher variables: enough to join it.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvJob {
    /// The launcher.
    pub source: EnvSource,
    /// This process's rank.
    pub rank: usize,
    /// The number of ranks.
    pub size: usize,
    /// This process's rank among those on its node, where the launcher tells
    /// (`LOCAL_RANK`, `SLURM_LOCALID`).
    pub local_rank: Option<usize>,
    /// Rank 0's host name or address.
    pub root_host: String,
    /// Rank 0's rendezvous port.
    pub root_port: u16,
    /// Where host and port came from, for messages (e.g. `MASTER_ADDR, MASTER_PORT+1000`).
    pub origin: String,
    /// The variables that make up the derived secret; `None` when `SYMMEM_JOB_SECRET` is set.
    pub derived_from: Option<String>,
    /// The node the launcher placed this process on, where its variables tell (see
    /// [`env_node`]).
    pub node: Option<LauncherNode>,
    /// The rendezvous key every rank proves, derived from the secret.
    key: JobKey,
}

impl std::fmt::Debug for EnvJob {
    // The key is left out: it admits connections to the rendezvous.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvJob")
            .field("source", &self.source)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("local_rank", &self.local_rank)
            .field("root_host", &self.root_host)
            .field("root_port", &self.root_port)
            .field("origin", &self.origin)
            .field("derived_from", &self.derived_from)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

fn config(msg: String) -> BootstrapError {
    BootstrapError::Config(msg)
}

/// Checks a job size, naming the variable.
pub(crate) fn check_size(var: &str, size: usize) -> Result<usize, BootstrapError> {
    if size == 0 || size > MAX_WORLD_SIZE {
        return Err(config(format!(
            "{var}={size} is out of range: a job has 1 to {MAX_WORLD_SIZE} ranks"
        )));
    }
    Ok(size)
}

/// Checks a rank against the size, naming both variables.
pub(crate) fn check_rank(
    rank_var: &str,
    rank: usize,
    size_var: &str,
    size: usize,
) -> Result<(), BootstrapError> {
    if rank >= size {
        return Err(config(format!(
            "{rank_var}={rank} is out of range for {size_var}={size} (ranks are 0 to {})",
            size - 1
        )));
    }
    Ok(())
}

/// Parses a port variable, naming it on error.
fn port(var: &str, value: &str) -> Result<u16, BootstrapError> {
    match value.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(config(format!(
            "{var}={value:?} is not a port (1 to 65535)"
        ))),
    }
}

/// The PyTorch `env://` variables (`WORLD_SIZE` set): torchrun's or Kubeflow's.
pub fn pytorch_claim(get: Lookup) -> Result<Option<Claim>, BootstrapError> {
    let Some(size_text) = get("WORLD_SIZE") else {
        return Ok(None);
    };
    let size = check_size("WORLD_SIZE", number("WORLD_SIZE", &size_text)?)?;
    let rank_text = match get("RANK") {
        Some(r) => r,
        // A job of one: its only rank is 0.
        None if size == 1 => "0".into(),
        None => {
            return Err(config(format!(
                "WORLD_SIZE={size_text} is set but RANK is not: set both (torchrun and Kubeflow's PyTorchJob do), or unset WORLD_SIZE"
            )))
        }
    };
    let rank = number("RANK", &rank_text)?;
    check_rank("RANK", rank, "WORLD_SIZE", size)?;
    let torchrun = get("TORCHELASTIC_RUN_ID").is_some();
    Ok(Some(Claim {
        source: if torchrun {
            "torchrun"
        } else {
            "PyTorch env:// variables"
        }
        .into(),
        vars: format!("RANK={rank_text}, WORLD_SIZE={size_text}"),
        rank: Some(rank),
        size: Some(size),
    }))
}

/// Whether this process is a task of an `srun` step (not the batch script, which Slurm
/// also gives `SLURM_PROCID=0` and the allocation's `SLURM_NTASKS`).
fn is_srun_task(get: Lookup) -> bool {
    let step = get("SLURM_STEP_ID").or_else(|| get("SLURM_STEPID"));
    let batch_step = step.as_deref().is_none_or(|s| s == "batch");
    get("SLURM_STEP_NODELIST").is_some()
        || !batch_step
        || get("SLURM_PROCID").as_deref() != Some("0")
}

/// Slurm's task variables (`SLURM_PROCID`, `SLURM_NTASKS`), for an `srun` task.
pub fn slurm_claim(get: Lookup) -> Result<Option<Claim>, BootstrapError> {
    let (Some(rank_text), Some(size_text)) = (get("SLURM_PROCID"), get("SLURM_NTASKS")) else {
        return Ok(None);
    };
    if !is_srun_task(get) {
        tracing::debug!("SLURM_PROCID=0 without SLURM_STEP_ID: a batch script, not an srun task");
        return Ok(None);
    }
    let size = check_size("SLURM_NTASKS", number("SLURM_NTASKS", &size_text)?)?;
    let rank = number("SLURM_PROCID", &rank_text)?;
    check_rank("SLURM_PROCID", rank, "SLURM_NTASKS", size)?;
    Ok(Some(Claim {
        source: "Slurm".into(),
        vars: format!("SLURM_PROCID={rank_text}, SLURM_NTASKS={size_text}"),
        rank: Some(rank),
        size: Some(size),
    }))
}

/// A Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`, with `SYMMEM_WORLD_SIZE`.
pub fn k8s_claim(get: Lookup) -> Result<Option<Claim>, BootstrapError> {
    let Some(index_text) = get("JOB_COMPLETION_INDEX") else {
        return Ok(None);
    };
    let rank = number("JOB_COMPLETION_INDEX", &index_text)?;
    let size = match get(ENV_WORLD_SIZE) {
        Some(s) => {
            let size = check_size(ENV_WORLD_SIZE, number(ENV_WORLD_SIZE, &s)?)?;
            check_rank("JOB_COMPLETION_INDEX", rank, ENV_WORLD_SIZE, size)?;
            Some(size)
        }
        None => None,
    };
    let mut vars = format!("JOB_COMPLETION_INDEX={index_text}");
    if let Some(s) = size {
        vars.push_str(&format!(", {ENV_WORLD_SIZE}={s}"));
    }
    Ok(Some(Claim {
        source: "Kubernetes Indexed Job".into(),
        vars,
        rank: Some(rank),
        size,
    }))
}

/// Claims of launchers that a torchrun agent itself may run under (PMI, PMIx, Open MPI):
/// only the variables, no connection is made.
pub fn pmi_claims(get: Lookup) -> Vec<Claim> {
    let mut claims = Vec::new();
    let num = |v: &str| get(v).and_then(|s| s.parse::<usize>().ok());
    if let Some(size) = get("PMI_SIZE") {
        claims.push(Claim {
            source: "PMI".into(),
            vars: format!(
                "PMI_RANK={}, PMI_SIZE={size}",
                get("PMI_RANK").unwrap_or_default()
            ),
            rank: num("PMI_RANK"),
            size: num("PMI_SIZE"),
        });
    } else if let Some(fd) = get("PMI_FD") {
        claims.push(Claim {
            source: "PMI".into(),
            vars: format!("PMI_FD={fd}"),
            rank: None,
            size: None,
        });
    }
    if let Some(size) = get("OMPI_COMM_WORLD_SIZE") {
        claims.push(Claim {
            source: "Open MPI".into(),
            vars: format!(
                "OMPI_COMM_WORLD_RANK={}, OMPI_COMM_WORLD_SIZE={size}",
                get("OMPI_COMM_WORLD_RANK").unwrap_or_default()
            ),
            rank: num("OMPI_COMM_WORLD_RANK"),
            size: num("OMPI_COMM_WORLD_SIZE"),
        });
    }
    if let Some(rank) = get("PMIX_RANK") {
        claims.push(Claim {
            source: "PMIx".into(),
            vars: format!("PMIX_RANK={rank}"),
            rank: rank.parse().ok(),
            size: None,
        });
    }
    claims
}

/// Checks that `outer` agrees with the PyTorch variables `torch`, or fails naming both.
///
/// Under torchrun (`torchrun == true`), the outer launcher started the torchrun agents, not
/// this worker: it agrees when its size is the number of agents (`GROUP_WORLD_SIZE`, or
/// when that is unset, a divisor of `WORLD_SIZE`). Otherwise both describe this process and
/// must agree on rank and size.
pub fn check_agreement(
    torch: &Claim,
    torchrun: bool,
    group_world_size: Option<usize>,
    outer: &Claim,
) -> Result<(), BootstrapError> {
    let (Some(size), Some(rank)) = (torch.size, torch.rank) else {
        return Ok(());
    };
    let agrees = if torchrun {
        match (outer.size, group_world_size) {
            (None, _) => true,
            (Some(agents), Some(groups)) => agents == groups,
            (Some(agents), None) => agents <= size && size % agents == 0,
        }
    } else {
        outer.size.is_none_or(|s| s == size) && outer.rank.is_none_or(|r| r == rank)
    };
    if agrees {
        return Ok(());
    }
    let relation = if torchrun {
        "as the launcher of torchrun's agents it should count the agents (GROUP_WORLD_SIZE)"
    } else {
        "both describe this process"
    };
    Err(config(format!(
        "conflicting launchers: {} ({}) and {} ({}) disagree ({relation}); set SYMMEM_BOOTSTRAP to say which to use (env:torchrun, env:slurm, env:k8s, mpi, pmi, pmix)",
        torch.source, torch.vars, outer.source, outer.vars
    )))
}

/// FNV-1a over `text`: every rank computes the same number from the same text (a port
/// choice, not a secret).
fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in b"symmem-env-v1\0".iter().chain(text.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The port a Slurm step without reserved ports uses: the same on every task, and
/// different for most concurrent steps.
pub fn slurm_derived_port(job_id: &str, step_id: &str) -> u16 {
    let h = fnv1a(&format!("slurm-port:{job_id}.{step_id}"));
    SLURM_PORT_BASE + (h % u64::from(SLURM_PORT_SPAN)) as u16
}

/// Where a job's rank 0 listens and who this process is, as one launcher's variables say.
struct Placement {
    rank: usize,
    size: usize,
    host: String,
    port: u16,
    /// Which variables gave the host and port, for messages.
    origin: String,
    /// The variables that identify the job, from which the key is derived when
    /// `SYMMEM_JOB_SECRET` is not set.
    identity: Vec<String>,
}

/// The node that the launcher variables of `source` name: torchrun's `GROUP_RANK` (also
/// read for PyTorch's `env://` variables, where a torchrun inside the pod sets it), Slurm's
/// [`slurm_node`]; Kubernetes tells no node. An error when a number is malformed.
pub fn env_node(source: EnvSource, get: Lookup) -> Result<Option<LauncherNode>, BootstrapError> {
    match source {
        EnvSource::Torchrun | EnvSource::PyTorchEnv => match get("GROUP_RANK") {
            Some(g) => Ok(Some(LauncherNode::new(
                number("GROUP_RANK", &g)?.to_string(),
                "torchrun GROUP_RANK",
            ))),
            None => Ok(None),
        },
        EnvSource::Slurm => slurm_node(get),
        EnvSource::K8sIndexed => Ok(None),
    }
}

/// Builds the job from `source`'s variables.
pub fn job(source: EnvSource, get: Lookup) -> Result<EnvJob, BootstrapError> {
    let placed = match source {
        EnvSource::Torchrun | EnvSource::PyTorchEnv => torchrun_placement(get)?,
        EnvSource::K8sIndexed => k8s_placement(get)?,
        EnvSource::Slurm => slurm_placement(get)?,
    };
    let local_var = match source {
        EnvSource::Torchrun | EnvSource::PyTorchEnv => Some("LOCAL_RANK"),
        EnvSource::Slurm => Some("SLURM_LOCALID"),
        EnvSource::K8sIndexed => None,
    };
    let local_rank = match local_var.and_then(|v| get(v).map(|val| (v, val))) {
        Some((var, val)) => Some(number(var, &val)?),
        None => None,
    };
    let identity = format!("{source:?}:{}", placed.identity.join(", "));
    let (key, derived_from) = match get(ENV_JOB_SECRET) {
        Some(secret) => (
            JobKey::derive(secret.as_bytes(), &format!("env rendezvous, {identity}")),
            None,
        ),
        None => (
            JobKey::derive(identity.as_bytes(), "env rendezvous, derived"),
            Some(placed.identity.join(", ")),
        ),
    };
    Ok(EnvJob {
        source,
        rank: placed.rank,
        size: placed.size,
        local_rank,
        root_host: placed.host,
        root_port: placed.port,
        origin: placed.origin,
        derived_from,
        node: env_node(source, get)?,
        key,
    })
}

/// torchrun's (and Kubeflow's PyTorchJob's) placement: rank 0 at `MASTER_ADDR`, on
/// `MASTER_PORT` plus an offset (torchrun's store keeps `MASTER_PORT`).
fn torchrun_placement(get: Lookup) -> Result<Placement, BootstrapError> {
    let mut identity: Vec<String> = Vec::new();
    let claim = pytorch_claim(get)?.ok_or_else(|| {
        config(
            "WORLD_SIZE and RANK are not set (torchrun and Kubeflow's PyTorchJob set them)".into(),
        )
    })?;
    let (host, host_var) = match get(ENV_ROOT_ADDR) {
        Some(h) => (h, ENV_ROOT_ADDR),
        None => (
            get("MASTER_ADDR").ok_or_else(|| {
                config(format!(
                    "{}: MASTER_ADDR is not set (nor {ENV_ROOT_ADDR})",
                    claim.vars
                ))
            })?,
            "MASTER_ADDR",
        ),
    };
    let master_port = get("MASTER_PORT");
    let (p, port_origin) = match (get(ENV_ROOT_PORT), master_port.as_deref()) {
        (Some(p), _) => (port(ENV_ROOT_PORT, &p)?, ENV_ROOT_PORT.to_string()),
        (None, Some(mp)) => {
            let mp_num = port("MASTER_PORT", mp)?;
            let p = mp_num.checked_add(MASTER_PORT_OFFSET).ok_or_else(|| {
                config(format!(
                    "MASTER_PORT={mp}: rank 0 listens on MASTER_PORT+{MASTER_PORT_OFFSET}, which is above 65535; set {ENV_ROOT_PORT}"
                ))
            })?;
            (p, format!("MASTER_PORT+{MASTER_PORT_OFFSET}"))
        }
        (None, None) => {
            return Err(config(format!(
                "{}: MASTER_PORT is not set (nor {ENV_ROOT_PORT})",
                claim.vars
            )))
        }
    };
    for v in [
        "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_RESTART_COUNT",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
    ] {
        if let Some(val) = get(v) {
            identity.push(format!("{v}={val}"));
        }
    }
    Ok(Placement {
        rank: claim.rank.unwrap_or_default(),
        size: claim.size.unwrap_or(1),
        host,
        port: p,
        origin: format!("{host_var}, {port_origin}"),
        identity,
    })
}

/// A Kubernetes Indexed Job's placement: rank 0 at `SYMMEM_ROOT_ADDR` (the index-0 pod).
fn k8s_placement(get: Lookup) -> Result<Placement, BootstrapError> {
    let mut identity: Vec<String> = Vec::new();
    let claim = k8s_claim(get)?.ok_or_else(|| config("JOB_COMPLETION_INDEX is not set".into()))?;
    let size = claim.size.ok_or_else(|| {
        config(format!(
            "{}: set {ENV_WORLD_SIZE} to the Job's completions (Kubernetes does not export it)",
            claim.vars
        ))
    })?;
    let host = get(ENV_ROOT_ADDR).ok_or_else(|| {
        config(format!(
            "{}: set {ENV_ROOT_ADDR} to the DNS name of the index-0 pod (e.g. <job>-0.<service>)",
            claim.vars
        ))
    })?;
    let (p, port_origin) = match get(ENV_ROOT_PORT) {
        Some(p) => (port(ENV_ROOT_PORT, &p)?, ENV_ROOT_PORT.to_string()),
        None => (
            DEFAULT_ROOT_PORT,
            format!("default port {DEFAULT_ROOT_PORT}"),
        ),
    };
    for v in ["JOBSET_NAME", ENV_ROOT_ADDR, ENV_WORLD_SIZE] {
        if let Some(val) = get(v) {
            identity.push(format!("{v}={val}"));
        }
    }
    identity.push(format!("port={p}"));
    Ok(Placement {
        rank: claim.rank.unwrap_or_default(),
        size,
        host,
        port: p,
        origin: format!("{ENV_ROOT_ADDR}, {port_origin}"),
        identity,
    })
}

/// An srun task's placement: rank 0 on the step's first node, on a reserved or derived
/// port.
fn slurm_placement(get: Lookup) -> Result<Placement, BootstrapError> {
    let mut identity: Vec<String> = Vec::new();
    let claim = slurm_claim(get)?.ok_or_else(|| {
        config("SLURM_PROCID and SLURM_NTASKS of an srun task are not set".into())
    })?;
    let (host, host_origin) = match get(ENV_ROOT_ADDR) {
        Some(h) => (h, ENV_ROOT_ADDR.to_string()),
        None => {
            let list = get("SLURM_STEP_NODELIST").ok_or_else(|| {
                config(format!(
                    "{}: SLURM_STEP_NODELIST is not set (nor {ENV_ROOT_ADDR}); start the tasks with srun",
                    claim.vars
                ))
            })?;
            let first = hostlist::first_host(&list)
                .map_err(|why| config(format!("SLURM_STEP_NODELIST={list:?}: {why}")))?;
            (first, "first host of SLURM_STEP_NODELIST".to_string())
        }
    };
    let job_id = get("SLURM_JOB_ID")
        .or_else(|| get("SLURM_JOBID"))
        .unwrap_or_default();
    let step_id = get("SLURM_STEP_ID")
        .or_else(|| get("SLURM_STEPID"))
        .unwrap_or_default();
    let (p, port_origin) = match (get(ENV_ROOT_PORT), get("SLURM_STEP_RESV_PORTS")) {
        (Some(p), _) => (port(ENV_ROOT_PORT, &p)?, ENV_ROOT_PORT.to_string()),
        (None, Some(resv)) => {
            let first = resv.split([',', '-']).next().unwrap_or_default();
            (
                port("SLURM_STEP_RESV_PORTS", first).map_err(|_| {
                    config(format!(
                        "SLURM_STEP_RESV_PORTS={resv:?} does not start with a port"
                    ))
                })?,
                "first of SLURM_STEP_RESV_PORTS".to_string(),
            )
        }
        (None, None) => (
            slurm_derived_port(&job_id, &step_id),
            format!("port derived from SLURM_JOB_ID={job_id}, SLURM_STEP_ID={step_id}"),
        ),
    };
    identity.push(format!("SLURM_JOB_ID={job_id}"));
    identity.push(format!("SLURM_STEP_ID={step_id}"));
    identity.push(format!("SLURM_NTASKS={}", claim.size.unwrap_or(1)));
    Ok(Placement {
        rank: claim.rank.unwrap_or_default(),
        size: claim.size.unwrap_or(1),
        host,
        port: p,
        origin: format!("{host_origin}, {port_origin}"),
        identity,
    })
}

impl EnvJob {
    /// `host:port` of rank 0's rendezvous.
    pub fn root_addr(&self) -> String {
        if self.root_host.contains(':') && !self.root_host.starts_with('[') {
            format!("[{}]:{}", self.root_host, self.root_port)
        } else {
            format!("{}:{}", self.root_host, self.root_port)
        }
    }

    /// Joins the job: rank 0 hosts the rendezvous on its port, the others connect to it,
    /// retrying until `timeout`.
    ///
    /// # Successive inits
    /// A process may init, finalize and init again; each rank counts its inits and the count
    /// is part of the key. A rank that comes back faster than rank 0 may still reach rank
    /// 0's previous rendezvous, which cannot prove the new key or closes while shutting down:
    /// after the first init, such refusals are retried until the deadline.
    pub fn join(&self, timeout: Duration) -> Result<TcpBootstrap, BootstrapError> {
        let public_key = self.derived_from.as_ref().map(|from| PublicJobKey {
            launcher: self.source.to_string(),
            derived_from: from.clone(),
        });
        self.rendezvous(timeout).map(|b| {
            b.with_launcher_node(self.node.clone())
                .with_public_key(public_key)
        })
    }

    /// Joins the TCP rendezvous of [`Self::join`].
    fn rendezvous(&self, timeout: Duration) -> Result<TcpBootstrap, BootstrapError> {
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
        let key = self.key.subkey(&format!("generation {generation}"));
        let addr = self.root_addr();
        if self.rank != 0 {
            let deadline = crate::duration::deadline_after(timeout);
            let mut pause = Duration::from_millis(20);
            loop {
                let attempt = TcpBootstrap::connect_hosted_by(
                    &addr,
                    &key,
                    self.rank,
                    self.size,
                    timeout,
                    0,
                    Some(deadline),
                );
                match attempt {
                    Ok(b) => return Ok(b),
                    Err(e)
                        if generation > 0
                            && is_stale_root(&e)
                            && Instant::now() + pause < deadline =>
                    {
                        tracing::debug!(%e, "rank 0's previous rendezvous answered; retrying");
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(500));
                    }
                    Err(e) => return Err(self.name_origin(e)),
                }
            }
        }
        if let Some(from) = &self.derived_from {
            tracing::warn!(
                "the {} rendezvous secret is derived from the job identity ({from}): anyone who can reach port {} and guess it can join the job; set {ENV_JOB_SECRET} to a random value shared by all ranks (a job on more than one node is refused without it unless {ENV_ALLOW_PUBLIC_JOB_KEY}=1)",
                self.source,
                self.root_port
            );
        }
        self.check_root_is_local()?;
        let listener = TcpListener::bind(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            self.root_port,
        ))
        .map_err(|e| {
            config(format!(
                "rank 0 cannot listen on port {} ({}): {e}; set {ENV_ROOT_PORT} to a free port",
                self.root_port, self.origin
            ))
        })?;
        TcpBootstrap::host(listener, &key, 0, self.size, timeout)
    }

    /// Rank 0 hosts the rendezvous, so the address the others use must be this host's.
    /// A name that does not resolve here is let through: its DNS record may not exist yet.
    fn check_root_is_local(&self) -> Result<(), BootstrapError> {
        let Ok(addrs) = (self.root_host.as_str(), self.root_port).to_socket_addrs() else {
            tracing::debug!(host = %self.root_host, "rank 0 cannot resolve its own rendezvous host; listening anyway");
            return Ok(());
        };
        let addrs: Vec<SocketAddr> = addrs.collect();
        let local = addrs.iter().any(|a| {
            a.ip().is_loopback()
                || a.ip().is_unspecified()
                || TcpListener::bind(SocketAddr::new(a.ip(), 0)).is_ok()
        });
        if local || addrs.is_empty() {
            return Ok(());
        }
        Err(config(format!(
            "this process is rank 0, so it hosts the rendezvous, but {} = {} ({}) is not an address of this host; set {ENV_ROOT_ADDR} to this host's name",
            self.origin.split(',').next().unwrap_or_default(),
            self.root_host,
            addrs.iter().map(|a| a.ip().to_string()).collect::<Vec<_>>().join(", ")
        )))
    }

    /// Adds which variables gave rank 0's address to an error about reaching it.
    fn name_origin(&self, err: BootstrapError) -> BootstrapError {
        match err {
            BootstrapError::ServerLost { addr, reason } => BootstrapError::ServerLost {
                addr: format!("{addr} (rank 0, from {})", self.origin),
                reason,
            },
            other => other,
        }
    }
}

/// Whether `err` may come from rank 0's previous rendezvous (see [`EnvJob::join`]): it
/// did not prove this init's key, or it closed while this rank was joining.
fn is_stale_root(err: &BootstrapError) -> bool {
    match err {
        BootstrapError::Unauthenticated { .. } => true,
        BootstrapError::PeerFailed { rank, .. } => *rank == 0,
        BootstrapError::ServerLost { .. } => true,
        _ => false,
    }
}

/// Counts this process's `env` inits; part of the key, so each init is its own job.
static GENERATION: AtomicU64 = AtomicU64::new(0);

#[cfg(test)]
mod tests;
