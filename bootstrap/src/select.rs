//! Choosing a bootstrap from the process environment.
//!
//! `SYMMEM_BOOTSTRAP=auto` checks, in this order:
//!
//! | # | started by | picks |
//! |---|---|---|
//! | 1 | `symrun` (sets `SYMMEM_LAUNCH_*`) | TCP rendezvous hosted by symrun |
//! | 2 | torchrun, Kubeflow PyTorchJob (`WORLD_SIZE`, `RANK`) | [`env`](mod@crate::env), rank 0 hosts |
//! | 3 | mpirun / srun with PMI / hydra (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `PMIX_RANK`, `PMIX_NAMESPACE`), when built with the `mpi` feature | MPI |
//! | 4 | a PMI-1 process manager: Hydra's `mpiexec`, `srun --mpi=pmi2`, Flux (`PMI_FD`, or `PMI_PORT`) | [`pmi`](mod@crate::pmi), rank 0 hosts |
//! | 5 | a PMIx server: Open MPI's `mpirun`, `prterun`, `srun --mpi=pmix` (`PMIX_RANK`, `PMIX_NAMESPACE` or `PMIX_SERVER_URI*`) | [`pmix`](mod@crate::pmix), rank 0 hosts |
//! | 6 | another MPI launcher (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`) without the `mpi` feature | an error |
//! | 7 | a Kubernetes Indexed Job (`JOB_COMPLETION_INDEX`) | [`env`](mod@crate::env) |
//! | 8 | `srun` without a PMI plugin (`SLURM_PROCID`, `SLURM_NTASKS`) | [`env`](mod@crate::env) |
//! | 9 | nothing | a single PE |
//!
//! torchrun comes before PMI and Slurm because its workers inherit the variables of the
//! launcher that started the torchrun agent (`PMI_FD`, `PMIX_*`, `SLURM_*`). Those then
//! describe the agents, not the worker: they must agree with torchrun's `GROUP_WORLD_SIZE`
//! (or divide `WORLD_SIZE`). Without torchrun, PyTorch variables and another launcher's
//! describe the same process and must agree on rank and size. Disagreement is an error
//! naming both sources, unless `SYMMEM_BOOTSTRAP` names the one to use (`env:torchrun`,
//! `env:slurm`, `env:k8s`, `mpi`, `pmi`, `pmix`; plain `env` checks like `auto`). Under
//! `srun --mpi=pmi2` (or `--mpi=pmix`) the PMI (PMIx) and Slurm variables describe the same
//! process and must agree too. PMI-1 comes before PMIx when a process has both. With the
//! `mpi` feature, MPI stays preferred under MPI launchers (Open MPI's `mpirun` included)
//! unless `SYMMEM_BOOTSTRAP=pmi` or `pmix`. Which source won, and why, is logged at info level.
//!
//! A mismatch between how the job was launched and what the binary supports is an error,
//! never a silent fall back to N independent single-PE jobs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::auth::{self, JobKey};
use crate::env::{self as launch_vars, EnvJob, EnvSource, Lookup};
use crate::error::BootstrapError;
use crate::interface::Bootstrap;
use crate::launcher::{launch_key, ENV_ADDR, ENV_RANK, ENV_SECRET, ENV_SIZE};
use crate::node::PMI_PROCESS_MAPPING;
use crate::pmi::{self, PmiEnv};
use crate::pmix::{self, PmixEnv};
use crate::single::SingleBootstrap;
use crate::tcp::TcpBootstrap;
use crate::vars::process_env;

/// The value of `SYMMEM_BOOTSTRAP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootstrapChoice {
    /// Detect from the environment.
    Auto,
    /// The built-in TCP rendezvous (requires `symrun`).
    Tcp,
    /// MPI (requires the `mpi` feature and an MPI launcher).
    Mpi,
    /// A PMI-1 process manager ([`crate::pmi`]; requires `PMI_FD` or `PMI_PORT`).
    Pmi,
    /// A PMIx server ([`crate::pmix`]; requires `PMIX_RANK`, `PMIX_NAMESPACE` or
    /// `PMIX_SERVER_URI*`).
    Pmix,
    /// Launcher variables ([`crate::env`]): the first source found in the `auto` order, or
    /// the one named (`env:torchrun`, `env:k8s`, `env:slurm`).
    Env(Option<EnvSource>),
}

impl std::str::FromStr for BootstrapChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BootstrapChoice::Auto),
            "tcp" => Ok(BootstrapChoice::Tcp),
            "mpi" => Ok(BootstrapChoice::Mpi),
            "pmi" => Ok(BootstrapChoice::Pmi),
            "pmix" => Ok(BootstrapChoice::Pmix),
            "env" => Ok(BootstrapChoice::Env(None)),
            "env:torchrun" => Ok(BootstrapChoice::Env(Some(EnvSource::Torchrun))),
            "env:k8s" => Ok(BootstrapChoice::Env(Some(EnvSource::K8sIndexed))),
            "env:slurm" => Ok(BootstrapChoice::Env(Some(EnvSource::Slurm))),
            _ => Err(
                "expected one of auto, tcp, mpi, pmi, pmix, env, env:torchrun, env:k8s, env:slurm"
                    .into(),
            ),
        }
    }
}

impl std::fmt::Display for BootstrapChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BootstrapChoice::Auto => "auto",
            BootstrapChoice::Tcp => "tcp",
            BootstrapChoice::Mpi => "mpi",
            BootstrapChoice::Pmi => "pmi",
            BootstrapChoice::Pmix => "pmix",
            BootstrapChoice::Env(named) => env_choice_name(*named),
        })
    }
}

/// What `symrun` told this process: where the rendezvous is and which rank it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Rendezvous address.
    pub addr: String,
    /// The job's rendezvous key, derived from [`ENV_SECRET`].
    pub key: JobKey,
    /// This process's rank.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
}

impl LaunchEnv {
    /// Reads the `SYMMEM_LAUNCH_*` variables; `Ok(None)` when none is set.
    pub fn from_env() -> Result<Option<Self>, BootstrapError> {
        Self::from_lookup(&process_env)
    }

    /// Reads the `SYMMEM_LAUNCH_*` variables through `get`; `Ok(None)` when none is set.
    pub fn from_lookup(get: Lookup) -> Result<Option<Self>, BootstrapError> {
        let (addr, secret, rank, size) =
            (get(ENV_ADDR), get(ENV_SECRET), get(ENV_RANK), get(ENV_SIZE));
        if addr.is_none() && secret.is_none() && rank.is_none() && size.is_none() {
            return Ok(None);
        }
        let need = |var: &str, v: Option<String>| {
            v.ok_or_else(|| {
                BootstrapError::Config(format!(
                    "{var} is not set but other SYMMEM_LAUNCH_* variables are (start PEs with symrun)"
                ))
            })
        };
        let num = |var: &str, v: String| {
            v.parse::<usize>().map_err(|_| {
                BootstrapError::Config(format!("{var}={v:?} is not a non-negative integer"))
            })
        };
        let addr = need(ENV_ADDR, addr)?;
        let secret = auth::from_hex::<32>(&need(ENV_SECRET, secret)?).ok_or_else(|| {
            // The value is a secret: say what is wrong with it, never what it is.
            BootstrapError::Config(format!("{ENV_SECRET} is not 64 hex digits"))
        })?;
        let rank = num(ENV_RANK, need(ENV_RANK, rank)?)?;
        let size = num(ENV_SIZE, need(ENV_SIZE, size)?)?;
        if size == 0 || rank >= size {
            return Err(BootstrapError::Config(format!(
                "{ENV_RANK}={rank} is out of range for {ENV_SIZE}={size}"
            )));
        }
        Ok(Some(LaunchEnv {
            addr,
            key: launch_key(&secret),
            rank,
            size,
        }))
    }
}

/// Variables through which MPI launchers announce a job.
const MPI_LAUNCHER_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMIX_RANK",
    "PMIX_NAMESPACE",
];

/// What this process will bootstrap with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The rendezvous hosted by `symrun`.
    Symrun(LaunchEnv),
    /// MPI (or an error, without the `mpi` feature).
    Mpi,
    /// A PMI-1 process manager: rank 0 publishes the rendezvous through its KVS.
    Pmi(PmiEnv),
    /// A PMIx server: rank 0 publishes the rendezvous through `PMIx_Put`.
    Pmix(PmixEnv),
    /// Launcher variables: rank 0 hosts the rendezvous.
    Env(EnvJob),
    /// One PE on its own.
    Single,
}

impl Plan {
    /// Where the launcher's node view (see [`crate::node`]) comes from under this plan,
    /// for `symmem-info`; `None` where the launcher tells no node.
    pub fn node_source(&self) -> Option<String> {
        match self {
            Plan::Pmi(env) => Some(match &env.slurm_node {
                Some(slurm) => format!("{PMI_PROCESS_MAPPING} (read at init), else {slurm}"),
                None => format!("{PMI_PROCESS_MAPPING} (read at init)"),
            }),
            Plan::Pmix(_) => Some("PMIx PMIX_HOSTNAME, else PMIX_NODEID (read at init)".into()),
            Plan::Env(job) if job.size > 1 => job.node.as_ref().map(ToString::to_string),
            Plan::Env(_) | Plan::Symrun(_) | Plan::Mpi | Plan::Single => None,
        }
    }
}

/// A [`Plan`] and why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub plan: Plan,
    /// Why, for the info log and `symmem-info`.
    pub why: String,
}

/// Chooses a bootstrap from the variables `get` reads (the process environment in
/// [`from_env`], a map in tests), following the [order above](self).
pub fn decide(choice: BootstrapChoice, get: Lookup) -> Result<Decision, BootstrapError> {
    let decision = |plan, why: String| Ok(Decision { plan, why });
    let launch = LaunchEnv::from_lookup(get)?;
    match (choice, launch) {
        (BootstrapChoice::Mpi, Some(_)) => Err(BootstrapError::Config(
            "SYMMEM_BOOTSTRAP=mpi, but this process was started by symrun (SYMMEM_LAUNCH_* is set); launch with mpirun or use SYMMEM_BOOTSTRAP=tcp".into(),
        )),
        (BootstrapChoice::Mpi, None) => decision(Plan::Mpi, "SYMMEM_BOOTSTRAP=mpi".into()),
        (BootstrapChoice::Pmi, Some(_)) => Err(BootstrapError::Config(
            "SYMMEM_BOOTSTRAP=pmi, but this process was started by symrun (SYMMEM_LAUNCH_* is set); launch with mpiexec or use SYMMEM_BOOTSTRAP=auto".into(),
        )),
        (BootstrapChoice::Pmi, None) => match pmi::pmi_env(get)? {
            Some(env) => {
                let why = format!("SYMMEM_BOOTSTRAP=pmi ({})", env.vars);
                decision(Plan::Pmi(env), why)
            }
            None => Err(BootstrapError::Config(
                "SYMMEM_BOOTSTRAP=pmi, but neither PMI_FD nor PMI_PORT is set: start the program with a PMI-1 process manager (mpiexec.hydra, srun --mpi=pmi2)".into(),
            )),
        },
        (BootstrapChoice::Pmix, Some(_)) => Err(BootstrapError::Config(
            "SYMMEM_BOOTSTRAP=pmix, but this process was started by symrun (SYMMEM_LAUNCH_* is set); launch with mpirun or srun --mpi=pmix, or use SYMMEM_BOOTSTRAP=auto".into(),
        )),
        (BootstrapChoice::Pmix, None) => match pmix::pmix_env(get)? {
            Some(env) => {
                let why = format!("SYMMEM_BOOTSTRAP=pmix ({})", env.vars);
                decision(Plan::Pmix(env), why)
            }
            None => Err(BootstrapError::Config(
                "SYMMEM_BOOTSTRAP=pmix, but none of PMIX_RANK, PMIX_NAMESPACE and PMIX_SERVER_URI* is set: start the program with a PMIx launcher (Open MPI's mpirun, prterun, srun --mpi=pmix)".into(),
            )),
        },
        (BootstrapChoice::Auto | BootstrapChoice::Tcp, Some(env)) => decision(
            Plan::Symrun(env),
            "started by symrun (SYMMEM_LAUNCH_* is set)".into(),
        ),
        (BootstrapChoice::Tcp, None) => Err(BootstrapError::Config(
            "SYMMEM_BOOTSTRAP=tcp, but SYMMEM_LAUNCH_* is not set: start the program with `symrun -n N`".into(),
        )),
        (BootstrapChoice::Env(named), Some(_)) => Err(BootstrapError::Config(format!(
            "SYMMEM_BOOTSTRAP={}, but this process was started by symrun (SYMMEM_LAUNCH_* is set); use SYMMEM_BOOTSTRAP=auto",
            env_choice_name(named)
        ))),
        (BootstrapChoice::Env(Some(source)), None) => {
            let source = match source {
                EnvSource::Torchrun | EnvSource::PyTorchEnv => torch_source(get),
                other => other,
            };
            let job = launch_vars::job(source, get)?;
            decision(
                Plan::Env(job),
                format!("SYMMEM_BOOTSTRAP={} names {source}", env_choice_name(Some(source))),
            )
        }
        (BootstrapChoice::Env(None), None) => {
            if let Some(d) = torch_decision(get)? {
                return Ok(Decision {
                    why: format!("SYMMEM_BOOTSTRAP=env and {}", d.why),
                    ..d
                });
            }
            let source = if launch_vars::k8s_claim(get)?.is_some() {
                EnvSource::K8sIndexed
            } else if launch_vars::slurm_claim(get)?.is_some() {
                EnvSource::Slurm
            } else {
                return Err(BootstrapError::Config(
                    "SYMMEM_BOOTSTRAP=env, but no launcher variables are set (WORLD_SIZE and RANK, JOB_COMPLETION_INDEX, or SLURM_PROCID and SLURM_NTASKS of an srun task)".into(),
                ));
            };
            let job = launch_vars::job(source, get)?;
            decision(
                Plan::Env(job),
                format!("SYMMEM_BOOTSTRAP=env and {source} variables are set"),
            )
        }
        (BootstrapChoice::Auto, None) => auto(get),
    }
}

fn env_choice_name(named: Option<EnvSource>) -> &'static str {
    match named {
        None => "env",
        Some(EnvSource::Torchrun | EnvSource::PyTorchEnv) => "env:torchrun",
        Some(EnvSource::K8sIndexed) => "env:k8s",
        Some(EnvSource::Slurm) => "env:slurm",
    }
}

/// torchrun when its run id is set, else PyTorch variables set by Kubeflow or by hand.
fn torch_source(get: Lookup) -> EnvSource {
    if get("TORCHELASTIC_RUN_ID").is_some() {
        EnvSource::Torchrun
    } else {
        EnvSource::PyTorchEnv
    }
}

/// The PyTorch variables' job, when they are set and every other launcher's variables
/// agree with them ([`launch_vars::check_agreement`]); an error naming both otherwise.
fn torch_decision(get: Lookup) -> Result<Option<Decision>, BootstrapError> {
    let Some(torch) = launch_vars::pytorch_claim(get)? else {
        return Ok(None);
    };
    let source = torch_source(get);
    let torchrun = source == EnvSource::Torchrun;
    let groups = get("GROUP_WORLD_SIZE").and_then(|g| g.parse().ok());
    let outer: Vec<_> = launch_vars::slurm_claim(get)?
        .into_iter()
        .chain(launch_vars::k8s_claim(get)?)
        .chain(launch_vars::pmi_claims(get))
        .collect();
    for o in &outer {
        launch_vars::check_agreement(&torch, torchrun, groups, o)?;
    }
    if torch.size == Some(1) {
        return Ok(Some(Decision {
            plan: Plan::Single,
            why: format!(
                "{source} variables say this is a job of one ({})",
                torch.vars
            ),
        }));
    }
    let job = launch_vars::job(source, get)?;
    let mut why = format!("{source} variables are set ({})", torch.vars);
    if torchrun {
        why.push_str(" and TORCHELASTIC_RUN_ID says torchrun started this worker");
    }
    if !outer.is_empty() {
        let others: Vec<String> = outer
            .iter()
            .map(|o| format!("{} ({})", o.source, o.vars))
            .collect();
        why.push_str(&format!(
            "; they are checked before {}, which agree{}",
            others.join(", "),
            if torchrun {
                " as the launcher of torchrun's agents"
            } else {
                ""
            }
        ));
    }
    Ok(Some(Decision {
        plan: Plan::Env(job),
        why,
    }))
}

/// Whether the MPI library of an `mpi` build can join a job that offers only PMI-1
/// (always false without the feature: there is no MPI to ask).
pub(crate) fn linked_mpi_speaks_pmi1() -> bool {
    #[cfg(feature = "mpi")]
    return crate::mpi::speaks_pmi1();
    #[cfg(not(feature = "mpi"))]
    false
}

/// `SYMMEM_BOOTSTRAP=auto` without symrun.
fn auto(get: Lookup) -> Result<Decision, BootstrapError> {
    if let Some(d) = torch_decision(get)? {
        return Ok(d);
    }
    let slurm = launch_vars::slurm_claim(get)?;
    let k8s = launch_vars::k8s_claim(get)?;
    let mpi_var = MPI_LAUNCHER_VARS
        .iter()
        .find_map(|v| get(v).map(|val| (*v, val)));
    if let Some((var, value)) = &mpi_var {
        if cfg!(feature = "mpi") && (*var != "PMI_SIZE" || linked_mpi_speaks_pmi1()) {
            return Ok(Decision {
                plan: Plan::Mpi,
                why: format!("an MPI launcher started this process ({var}={value})"),
            });
        }
    }
    if let Some(env) = pmi::pmi_env(get)? {
        return pmi_decision(env, slurm.as_ref());
    }
    if let Some(env) = pmix::pmix_env(get)? {
        return pmix_decision(env, slurm.as_ref());
    }
    if let Some((var, value)) = mpi_var {
        if value != "1" {
            return Err(BootstrapError::Config(format!(
                "this process was started by an MPI launcher ({var}={value}), but symmem was built without the `mpi` feature and neither a PMI-1 server (PMI_FD, PMI_PORT) nor a PMIx server (PMIX_RANK, PMIX_NAMESPACE, PMIX_SERVER_URI*) is announced; rebuild with `--features mpi` or launch with `symrun`, `mpiexec.hydra` or Open MPI's `mpirun`"
            )));
        }
        return Ok(Decision {
            plan: Plan::Single,
            why: format!("{var}={value}: a job of one"),
        });
    }
    if let Some(one) = [&k8s, &slurm]
        .into_iter()
        .flatten()
        .find(|c| c.size == Some(1))
    {
        return Ok(Decision {
            plan: Plan::Single,
            why: format!("{} says this is a job of one ({})", one.source, one.vars),
        });
    }
    if k8s.is_some() {
        let job = launch_vars::job(EnvSource::K8sIndexed, get)?;
        return Ok(Decision {
            plan: Plan::Env(job),
            why: "JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job)".into(),
        });
    }
    if let Some(claim) = slurm {
        let job = launch_vars::job(EnvSource::Slurm, get)?;
        return Ok(Decision {
            plan: Plan::Env(job),
            why: format!(
                "an srun task without PMI ({}; no PMI_SIZE, PMIX_RANK or OMPI_COMM_WORLD_SIZE)",
                claim.vars
            ),
        });
    }
    Ok(Decision {
        plan: Plan::Single,
        why: "no launcher variables are set".into(),
    })
}

/// `auto`'s choice when a PMI-1 server is announced: checked against Slurm's variables
/// (under `srun --mpi=pmi2` both describe this process), a single PE for a job of one.
fn pmi_decision(
    env: PmiEnv,
    slurm: Option<&launch_vars::Claim>,
) -> Result<Decision, BootstrapError> {
    let claim = launch_vars::Claim {
        source: "PMI".into(),
        vars: env.vars.clone(),
        rank: env.rank,
        size: env.size,
    };
    if let Some(slurm) = slurm {
        launch_vars::check_agreement(&claim, false, None, slurm)?;
    }
    if env.size == Some(1) {
        return Ok(Decision {
            plan: Plan::Single,
            why: format!(
                "a PMI-1 process manager says this is a job of one ({})",
                env.vars
            ),
        });
    }
    let why = format!(
        "a PMI-1 process manager started this process ({}){}",
        env.vars,
        if !cfg!(feature = "mpi") {
            "; this build has no `mpi` feature, so PMI is used directly"
        } else if !linked_mpi_speaks_pmi1() {
            "; this build's MPI is Open MPI, which cannot use a PMI-1 server, so PMI is used directly"
        } else {
            ""
        }
    );
    Ok(Decision {
        plan: Plan::Pmi(env),
        why,
    })
}

/// `auto`'s choice when a PMIx server is announced: `PMIX_RANK` checked against Slurm's
/// variables (under `srun --mpi=pmix` both describe this process). The size comes from the
/// server at init, so even a job of one goes through PMIx.
fn pmix_decision(
    env: PmixEnv,
    slurm: Option<&launch_vars::Claim>,
) -> Result<Decision, BootstrapError> {
    if let Some(slurm) = slurm {
        let claim = launch_vars::Claim {
            source: "PMIx".into(),
            vars: env.vars.clone(),
            rank: env.rank,
            size: None,
        };
        launch_vars::check_agreement(slurm, false, None, &claim)?;
    }
    let why = format!(
        "a PMIx server started this process ({}){}",
        env.vars,
        if cfg!(feature = "mpi") {
            ""
        } else {
            "; this build has no `mpi` feature, so PMIx is used directly"
        }
    );
    Ok(Decision {
        plan: Plan::Pmix(env),
        why,
    })
}

/// Counts the inits of this process under one launcher, so each joins a fresh group.
static LAUNCH_SESSION: AtomicU64 = AtomicU64::new(0);

/// Creates the bootstrap this process was started for. While one it made for a launcher's
/// job is alive, another fails at once, naming the launcher: the n-th init of each process
/// meets the n-th of the others, which two inits on two threads would number in any order.
/// A second runtime alongside it is a job of its own, made with a unique id.
pub fn from_env(
    choice: BootstrapChoice,
    timeout: Duration,
) -> Result<Box<dyn Bootstrap>, BootstrapError> {
    let decision = decide(choice, &process_env)?;
    let launcher = match &decision.plan {
        Plan::Symrun(_) => Some("symrun".to_string()),
        Plan::Mpi => Some("the MPI launcher (bootstrap mpi)".to_string()),
        Plan::Pmi(_) => Some("the PMI-1 process manager (bootstrap pmi)".to_string()),
        Plan::Pmix(_) => Some("the PMIx server (bootstrap pmix)".to_string()),
        Plan::Env(job) if job.size > 1 => Some(format!("{} (bootstrap env)", job.source)),
        Plan::Env(_) | Plan::Single => None,
    };
    let Some(launcher) = launcher else {
        return join(decision, timeout);
    };
    let claim = crate::launcher_job::claim(&launcher)?;
    let joined = join(decision, timeout)?;
    Ok(Box::new(crate::launcher_job::Claimed::new(joined, claim)))
}

/// Joins the job `decision` chose.
fn join(
    Decision { plan, why }: Decision,
    timeout: Duration,
) -> Result<Box<dyn Bootstrap>, BootstrapError> {
    match plan {
        Plan::Symrun(env) => {
            tracing::info!(why, "bootstrap: symrun");
            let session = LAUNCH_SESSION.fetch_add(1, Ordering::Relaxed);
            let b =
                TcpBootstrap::connect(&env.addr, &env.key, session, env.rank, env.size, timeout)?;
            Ok(Box::new(b))
        }
        Plan::Mpi => {
            tracing::info!(why, "bootstrap: mpi");
            mpi_bootstrap(timeout)
        }
        Plan::Pmi(env) => {
            tracing::info!(why, rank = ?env.rank, size = ?env.size, "bootstrap: pmi");
            let ifname = process_env(crate::vars::SOCKET_IFNAME);
            Ok(Box::new(pmi::join(&env, ifname.as_deref(), timeout)?))
        }
        Plan::Pmix(env) => {
            tracing::info!(why, rank = ?env.rank, "bootstrap: pmix");
            let ifname = process_env("SYMMEM_SOCKET_IFNAME");
            Ok(Box::new(pmix::join(&env, ifname.as_deref(), timeout)?))
        }
        Plan::Env(job) if job.size == 1 => {
            tracing::info!(
                why,
                "bootstrap: {} with a world size of 1: a single PE",
                job.source
            );
            Ok(Box::new(SingleBootstrap::new(timeout)))
        }
        Plan::Env(job) => {
            tracing::info!(
                why,
                rank = job.rank,
                size = job.size,
                local_rank = ?job.local_rank,
                root = %job.root_addr(),
                origin = %job.origin,
                "bootstrap: env ({})",
                job.source
            );
            Ok(Box::new(job.join(timeout)?))
        }
        Plan::Single => {
            tracing::info!(why, "bootstrap: single PE");
            Ok(Box::new(SingleBootstrap::new(timeout)))
        }
    }
}

#[cfg(feature = "mpi")]
fn mpi_bootstrap(timeout: Duration) -> Result<Box<dyn Bootstrap>, BootstrapError> {
    Ok(Box::new(crate::mpi::MpiBootstrap::from_world(timeout)?))
}

#[cfg(not(feature = "mpi"))]
fn mpi_bootstrap(_timeout: Duration) -> Result<Box<dyn Bootstrap>, BootstrapError> {
    Err(BootstrapError::Config(
        "SYMMEM_BOOTSTRAP=mpi, but symmem was built without the `mpi` feature; rebuild with `--features mpi`".into(),
    ))
}
