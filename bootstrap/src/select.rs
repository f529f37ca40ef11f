//! Choosing a bootstrap from the process environment.
//!
//! | started by | `SYMMEM_BOOTSTRAP=auto` picks |
//! |---|---|
//! | `symrun` (sets `SYMMEM_LAUNCH_*`) | TCP rendezvous hosted by symrun |
//! | mpirun / srun / hydra | MPI, if built with the `mpi` feature; otherwise an error |
//! | nothing | a single PE |
//!
//! A mismatch between how the job was launched and what the binary supports is an error,
//! never a silent fall back to N independent single-PE jobs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::launcher::{ENV_ADDR, ENV_NONCE, ENV_RANK, ENV_SIZE};
use crate::single::SingleBootstrap;
use crate::tcp::TcpBootstrap;
use crate::{Bootstrap, BootstrapError};

/// The value of `SYMMEM_BOOTSTRAP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootstrapChoice {
    /// Detect from the environment.
    Auto,
    /// The built-in TCP rendezvous (requires `symrun`).
    Tcp,
    /// MPI (requires the `mpi` feature and an MPI launcher).
    Mpi,
}

impl std::str::FromStr for BootstrapChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BootstrapChoice::Auto),
            "tcp" => Ok(BootstrapChoice::Tcp),
            "mpi" => Ok(BootstrapChoice::Mpi),
            _ => Err("expected one of auto, tcp, mpi".into()),
        }
    }
}

/// What `symrun` told this process: where the rendezvous is and which rank it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Rendezvous address.
    pub addr: String,
    /// Job nonce.
    pub nonce: u64,
    /// This process's rank.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
}

impl LaunchEnv {
    /// Reads the `SYMMEM_LAUNCH_*` variables; `Ok(None)` when none is set.
    pub fn from_env() -> Result<Option<Self>, BootstrapError> {
        let get = |var: &str| std::env::var(var).ok();
        let (addr, nonce, rank, size) =
            (get(ENV_ADDR), get(ENV_NONCE), get(ENV_RANK), get(ENV_SIZE));
        if addr.is_none() && nonce.is_none() && rank.is_none() && size.is_none() {
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
        let nonce_s = need(ENV_NONCE, nonce)?;
        let nonce = u64::from_str_radix(&nonce_s, 16).map_err(|_| {
            BootstrapError::Config(format!("{ENV_NONCE}={nonce_s:?} is not a hex number"))
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
            nonce,
            rank,
            size,
        }))
    }
}

/// Variables through which MPI launchers announce a job, and whether they carry its size.
const MPI_LAUNCHER_VARS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"];

/// The first MPI launcher variable present, with its value.
fn mpi_launcher_var() -> Option<(&'static str, String)> {
    MPI_LAUNCHER_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok().map(|val| (*v, val)))
}

/// Counts the inits of this process under one launcher, so each joins a fresh group.
static LAUNCH_SESSION: AtomicU64 = AtomicU64::new(0);

/// Creates the bootstrap this process was started for.
pub fn from_env(
    choice: BootstrapChoice,
    timeout: Duration,
) -> Result<Box<dyn Bootstrap>, BootstrapError> {
    let launch = LaunchEnv::from_env()?;
    let mpi_var = mpi_launcher_var();
    match (choice, launch, mpi_var) {
        (BootstrapChoice::Mpi, Some(_), _) => Err(BootstrapError::Config(
            "SYMMEM_BOOTSTRAP=mpi, but this process was started by symrun (SYMMEM_LAUNCH_* is set); launch with mpirun or use SYMMEM_BOOTSTRAP=tcp".into(),
        )),
        (BootstrapChoice::Mpi, None, _) => mpi_bootstrap(timeout),
        (BootstrapChoice::Auto | BootstrapChoice::Tcp, Some(env), _) => {
            let session = LAUNCH_SESSION.fetch_add(1, Ordering::Relaxed);
            let b = TcpBootstrap::connect(&env.addr, env.nonce, session, env.rank, env.size, timeout)?;
            Ok(Box::new(b))
        }
        (BootstrapChoice::Tcp, None, _) => Err(BootstrapError::Config(
            "SYMMEM_BOOTSTRAP=tcp, but SYMMEM_LAUNCH_* is not set: start the program with `symrun -n N`".into(),
        )),
        (BootstrapChoice::Auto, None, Some((var, value))) => {
            if cfg!(feature = "mpi") {
                mpi_bootstrap(timeout)
            } else if var == "PMIX_RANK" || value.trim() != "1" {
                Err(BootstrapError::Config(format!(
                    "this process was started by an MPI launcher ({var}={value}), but symmem was built without the `mpi` feature; rebuild with `--features mpi` or launch with `symrun`"
                )))
            } else {
                Ok(Box::new(SingleBootstrap::new(timeout)))
            }
        }
        (BootstrapChoice::Auto, None, None) => Ok(Box::new(SingleBootstrap::new(timeout))),
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
