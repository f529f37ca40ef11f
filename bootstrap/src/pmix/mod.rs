//! The `pmix` bootstrap: joins a job through PMIx, the process-management interface of
//! Open MPI's `mpirun` (4.x and later, built without symmem's `mpi` feature), `prterun`
//! and `srun --mpi=pmix`.
//!
//! libpmix is loaded at run time (`ffi.rs`: `dlopen` of `libpmix.so.2`, or of
//! `SYMMEM_PMIX_LIB`), so one binary runs on machines with and without PMIx and the build
//! needs neither PMIx headers nor the library.
//!
//! # Exchange
//! PMIx is used only to find rank 0, as in the [`pmi`](crate::pmi) bootstrap:
//! 1. `PMIx_Init` gives this process's namespace and rank; `PMIx_Get(PMIX_JOB_SIZE)` on the
//!    namespace's wildcard rank gives the size.  `PMIx_Get(PMIX_HOSTNAME)`, else `PMIX_NODEID`, on
//!    this process's own rank gives the launcher's node ([`crate::node`]; where neither is
//!    told, the debug log says why).
//! 2. Rank 0 binds the rendezvous of [unique-id init](crate::unique_id::UniqueId) and puts its text
//!    (address and a fresh random job secret) under [`RENDEZVOUS_KEY`]`-<n>` for the n-th
//!    init of the process (`PMIx_Put` with global scope, `PMIx_Commit`).
//! 3. Every process enters `PMIx_Fence` over the namespace, collecting the data.
//! 4. The others `PMIx_Get` rank 0's key; all join the TCP rendezvous, which does the rest.
//!
//! # Deadlines
//! PMIx calls block in C. Each step runs on a helper thread that the caller waits for until
//! `SYMMEM_BOOTSTRAP_TIMEOUT`, and the fence and gets also carry `PMIX_TIMEOUT` so the
//! server gives up too. A rank that never starts therefore yields an error naming the call
//! within the timeout. After a failed or overrun step the helper thread may still be
//! inside libpmix: the session is marked broken, later inits of the process fail naming
//! the first failure, and `PMIx_Finalize` is skipped at exit.
//!
//! A rank that dies before the fence: Open MPI's `mpirun` ends the whole job by default.
//! With `--enable-recovery`, depending on when its PMIx server learns of the death, the
//! fence fails at once with `PMIX_ERR_PARTIAL_SUCCESS`, which the error explains (PMIx does
//! not say which rank ended; the launcher's output does), or blocks until the timeout
//! (the error names the fence step), or completes without the dead rank, after which the
//! TCP rendezvous names the missing rank at the timeout.
//!
//! # Successive inits
//! `PMIx_Init` runs once, at the first init of the process; each init runs steps 2 to 4
//! under its own key. `PMIx_Finalize` runs when the process exits (an `atexit` handler,
//! bounded to a few seconds), since launchers report a process that called `PMIx_Init` and
//! exits without `PMIx_Finalize` as an abnormal end.

mod ffi;

use std::ffi::c_int;
use std::sync::mpsc;
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

use crate::env::Lookup;
use crate::error::BootstrapError;
use crate::node::LauncherNode;
use crate::tcp::TcpBootstrap;
use crate::unique_id::UniqueId;
use crate::vars::number;

use ffi::DEFAULT_NAMES;

/// This process's rank, as set by the PMIx server's launcher.
pub const ENV_PMIX_RANK: &str = "PMIX_RANK";
/// This process's namespace.
pub const ENV_PMIX_NAMESPACE: &str = "PMIX_NAMESPACE";
/// The variables through which a PMIx server announces itself (PMIx v1 to v4 names).
pub const ENV_PMIX_SERVER_URIS: [&str; 6] = [
    "PMIX_SERVER_URI41",
    "PMIX_SERVER_URI4",
    "PMIX_SERVER_URI3",
    "PMIX_SERVER_URI21",
    "PMIX_SERVER_URI2",
    "PMIX_SERVER_URI",
];
/// The libpmix to load instead of `libpmix.so.2`, then `libpmix.so`: a file name or a path.
pub const ENV_PMIX_LIB: &str = "SYMMEM_PMIX_LIB";
/// The key under which rank 0 publishes its rendezvous, suffixed `-<n>` for the n-th init
/// of the process.
pub const RENDEZVOUS_KEY: &str = "symmem-rendezvous";
/// How long the server may look for this process's node (`PMIX_TIMEOUT`, seconds) before
/// it counts as untold.
const NODE_GET_SECS: c_int = 2;
/// How long `PMIx_Finalize` may take at exit.
const FINALIZE_WAIT: Duration = Duration::from_secs(5);

/// What the PMIx variables say about this process, before libpmix is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmixEnv {
    /// `PMIX_RANK`, when set.
    pub rank: Option<usize>,
    /// `PMIX_NAMESPACE`, when set.
    pub namespace: Option<String>,
    /// The libraries to try, in order: `SYMMEM_PMIX_LIB`, else `libpmix.so.2`, `libpmix.so`.
    pub libraries: Vec<String>,
    /// The variables, as `NAME=value, NAME=value` (server URIs by name only), for messages.
    pub vars: String,
}

/// Reads the PMIx variables through `get`: `Ok(None)` when none of `PMIX_RANK`,
/// `PMIX_NAMESPACE` and `PMIX_SERVER_URI*` is set, an error naming `PMIX_RANK` when it is
/// not a number.
pub fn pmix_env(get: Lookup) -> Result<Option<PmixEnv>, BootstrapError> {
    let mut vars = Vec::new();
    let rank = match get(ENV_PMIX_RANK) {
        Some(r) => {
            vars.push(format!("{ENV_PMIX_RANK}={r}"));
            Some(number(ENV_PMIX_RANK, &r)?)
        }
        None => None,
    };
    let namespace = get(ENV_PMIX_NAMESPACE);
    if let Some(ns) = &namespace {
        vars.push(format!("{ENV_PMIX_NAMESPACE}={ns}"));
    }
    if let Some(uri) = ENV_PMIX_SERVER_URIS.iter().find(|v| get(v).is_some()) {
        vars.push(format!("{uri} is set"));
    }
    if vars.is_empty() {
        return Ok(None);
    }
    let libraries = match get(ENV_PMIX_LIB) {
        Some(lib) => vec![lib],
        None => DEFAULT_NAMES.iter().map(|n| n.to_string()).collect(),
    };
    Ok(Some(PmixEnv {
        rank,
        namespace,
        libraries,
        vars: vars.join(", "),
    }))
}

/// The libpmix of this process, loaded by the first init that needs it.
static LIB: OnceLock<Result<ffi::Lib, BootstrapError>> = OnceLock::new();

fn library(names: &[String]) -> Result<&'static ffi::Lib, BootstrapError> {
    LIB.get_or_init(|| {
        let lib = ffi::Lib::open(names)?;
        tracing::debug!(library = %lib.name, version = %lib.version, "libpmix loaded");
        Ok(lib)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// `PMIX_TIMEOUT` for a wait of `timeout`: whole seconds, rounded up (0 would mean none).
fn pmix_seconds(timeout: Duration) -> c_int {
    let secs = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    c_int::try_from(secs.max(1)).unwrap_or(c_int::MAX)
}

/// Runs `step` (PMIx calls) on a helper thread and waits for it until `deadline`. `what`
/// names the step in the timeout error.
fn bounded<T: Send + 'static>(
    what: &str,
    vars: &str,
    timeout: Duration,
    deadline: Instant,
    step: impl FnOnce() -> Result<T, BootstrapError> + Send + 'static,
) -> Result<T, BootstrapError> {
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("symmem-pmix".into())
        .spawn(move || {
            // The receiver may have given up waiting; then no one needs the result.
            let _ = tx.send(step());
        })
        .map_err(|e| BootstrapError::io(format!("starting a thread for {what}"), &e))?;
    let left = deadline.saturating_duration_since(Instant::now());
    match rx.recv_timeout(left) {
        Ok(Err(BootstrapError::Pmix {
            call, status, name, ..
        })) => {
            let hint = match status {
                ffi::ERR_UNREACH => "; is this process started by a PMIx launcher that is still running (Open MPI's mpirun, srun --mpi=pmix)?",
                ffi::ERR_PARTIAL_SUCCESS => "; a process of the job ended before reaching the fence (PMIx does not say which; the launcher's output names it)",
                _ => "",
            };
            Err(BootstrapError::Pmix {
                call,
                status,
                name,
                context: format!("; launcher variables: {vars}{hint}"),
            })
        }
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(BootstrapError::ServerLost {
            addr: format!("PMIx server ({vars})"),
            reason: format!(
                "{what} did not return within {timeout:?} (SYMMEM_BOOTSTRAP_TIMEOUT); did every rank start, and is one dead?"
            ),
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(BootstrapError::ServerLost {
            addr: format!("PMIx server ({vars})"),
            reason: format!("the thread running {what} panicked"),
        }),
    }
}

/// An initialized PMIx client: who this process is in its job.
struct Session {
    lib: &'static ffi::Lib,
    me: ffi::Proc,
    rank: usize,
    size: usize,
    /// The inits of this process made over this session so far.
    inits: u64,
    /// The node the launcher placed this process on, where the server tells.
    node: Option<LauncherNode>,
}

/// The PMIx session of this process.
enum State {
    /// `PMIx_Init` has not run.
    Closed,
    /// `PMIx_Init` succeeded.
    Open(Box<Session>),
    /// A PMIx step failed or overran its deadline (its thread may still be in libpmix).
    Broken(String),
}

static STATE: Mutex<State> = Mutex::new(State::Closed);
/// Registers [`finalize_at_exit`] once.
static AT_EXIT: Once = Once::new();

impl Session {
    /// `PMIx_Init`, then the job size from the namespace's wildcard rank, checked against
    /// `PMIX_RANK`.
    fn open(
        lib: &'static ffi::Lib,
        env: &PmixEnv,
        timeout: Duration,
        deadline: Instant,
    ) -> Result<Session, BootstrapError> {
        let secs = pmix_seconds(timeout);
        let (me, size, node) = bounded("PMIx_Init", &env.vars, timeout, deadline, move || {
            let me = lib.init()?;
            let size = lib.get_u32(&me.with_rank(ffi::RANK_WILDCARD), ffi::KEY_JOB_SIZE, secs)?;
            Ok((me, size, launcher_node(lib, &me)))
        })?;
        let (rank, size) = (me.rank as usize, size as usize);
        let origin = format!("PMIx ({}, namespace {})", env.vars, me.namespace());
        let max = crate::env::MAX_WORLD_SIZE;
        if size == 0 || size > max {
            return Err(BootstrapError::Config(format!(
                "{origin}: {} = {size} is out of range: a job has 1 to {max} ranks",
                ffi::KEY_JOB_SIZE
            )));
        }
        if rank >= size {
            return Err(BootstrapError::Config(format!(
                "{origin}: PMIx_Init gave rank {rank}, out of range for {} = {size}",
                ffi::KEY_JOB_SIZE
            )));
        }
        if let Some(r) = env.rank.filter(|r| *r != rank) {
            return Err(BootstrapError::Config(format!(
                "{origin}: {ENV_PMIX_RANK}={r}, but PMIx_Init gave rank {rank}"
            )));
        }
        tracing::debug!(rank, size, namespace = %me.namespace(), library = %lib.name, "PMIx session open");
        let node = match node {
            Ok(node) => Some(node),
            Err(why) => {
                tracing::debug!(
                    rank,
                    "the PMIx server does not tell this process's node: {why}"
                );
                None
            }
        };
        Ok(Session {
            lib,
            me,
            rank,
            size,
            inits: 0,
            node,
        })
    }

    /// One init's PMIx part: steps 2 to 4 of the [module docs](self), up to the
    /// rendezvous to join.
    fn rendezvous(
        &mut self,
        vars: &str,
        ifname: Option<&str>,
        timeout: Duration,
        deadline: Instant,
    ) -> Result<UniqueId, BootstrapError> {
        let key = format!("{RENDEZVOUS_KEY}-{}", self.inits);
        self.inits += 1;
        let own = if self.rank == 0 {
            Some(UniqueId::bind(ifname)?)
        } else {
            None
        };
        crate::fault::exit_point("launcher_exchange");
        let published = own.as_ref().map(UniqueId::to_string);
        let (lib, me, secs) = (self.lib, self.me, pmix_seconds(timeout));
        let step_key = key.clone();
        // Rank 0 gets back what it put; the others get rank 0's text.
        let text = bounded(
            "PMIx_Put/Commit/Fence/Get of the rendezvous",
            vars,
            timeout,
            deadline,
            move || match published {
                Some(text) => {
                    lib.put_string(&step_key, &text)?;
                    lib.commit()?;
                    lib.fence_all(&me, secs)?;
                    Ok(text)
                }
                None => {
                    lib.fence_all(&me, secs)?;
                    lib.get_string(&me.with_rank(0), &step_key, secs)
                }
            },
        )?;
        let id = match own {
            Some(id) => id,
            None => text
                .parse::<UniqueId>()
                .map_err(|e| BootstrapError::Protocol {
                    peer: format!("PMIx server ({vars})"),
                    detail: format!("rank 0's {key}: {e}"),
                })?,
        };
        tracing::debug!(rank = self.rank, addr = %id.addr(), key, "joining the rendezvous published through PMIx");
        Ok(id)
    }
}

/// The node the launcher placed `me` on: `PMIX_HOSTNAME`, else `PMIX_NODEID`, or why
/// neither could be read.
fn launcher_node(lib: &ffi::Lib, me: &ffi::Proc) -> Result<LauncherNode, String> {
    let no_host = match lib.get_string(me, ffi::KEY_HOSTNAME, NODE_GET_SECS) {
        Ok(host) if !host.is_empty() => return Ok(LauncherNode::new(host, "PMIx PMIX_HOSTNAME")),
        Ok(_) => format!("{} is empty", ffi::KEY_HOSTNAME),
        Err(e) => e.to_string(),
    };
    match lib.get_u32(me, ffi::KEY_NODEID, NODE_GET_SECS) {
        Ok(id) => Ok(LauncherNode::new(id.to_string(), "PMIx PMIX_NODEID")),
        Err(e) => Err(format!("{no_host}; {e}")),
    }
}

/// `PMIx_Finalize` when the process exits, bounded by [`FINALIZE_WAIT`] (an `atexit`
/// handler, so it must not unwind). Skipped when another thread holds the session (an init
/// in progress) or it is broken.
extern "C" fn finalize_at_exit() {
    let Ok(mut guard) = STATE.try_lock() else {
        return;
    };
    if let State::Open(session) = std::mem::replace(&mut *guard, State::Closed) {
        let lib = session.lib;
        let (tx, rx) = mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name("symmem-pmix-finalize".into())
            .spawn(move || {
                let _ = tx.send(lib.finalize());
            });
        if spawned.is_ok() {
            // The process is exiting: a failure here has no one left to report to.
            let _ = rx.recv_timeout(FINALIZE_WAIT);
        }
    }
}

/// Joins the job whose PMIx variables are `env`: the exchange of the [module docs](self)
/// over this process's session (opened by its first init), then the TCP rendezvous hosted
/// by rank 0. `ifname` picks the interface rank 0 advertises (`SYMMEM_SOCKET_IFNAME`).
pub fn join(
    env: &PmixEnv,
    ifname: Option<&str>,
    timeout: Duration,
) -> Result<TcpBootstrap, BootstrapError> {
    let deadline = crate::duration::deadline_after(timeout);
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let mut session = match std::mem::replace(&mut *guard, State::Closed) {
        State::Open(session) => session,
        State::Broken(why) => {
            let err = BootstrapError::Config(format!(
                "the PMIx session of this process is unusable since an earlier init failed: {why}"
            ));
            *guard = State::Broken(why);
            return Err(err);
        }
        State::Closed => {
            let lib = library(&env.libraries)?;
            let session = match Session::open(lib, env, timeout, deadline) {
                Ok(s) => Box::new(s),
                Err(e) => {
                    *guard = State::Broken(e.to_string());
                    return Err(e);
                }
            };
            AT_EXIT.call_once(|| {
                // SAFETY: atexit only records the function pointer; `finalize_at_exit` takes
                // no arguments, never unwinds, and touches only statics that live until exit.
                if unsafe { libc::atexit(finalize_at_exit) } != 0 {
                    tracing::warn!("cannot register PMIx_Finalize at exit; the launcher may report this process as ended without PMIx_Finalize");
                }
            });
            session
        }
    };
    let id = match session.rendezvous(&env.vars, ifname, timeout, deadline) {
        Ok(id) => id,
        Err(e) => {
            *guard = State::Broken(e.to_string());
            return Err(e);
        }
    };
    let (rank, size, node) = (session.rank, session.size, session.node.clone());
    *guard = State::Open(session);
    drop(guard);
    // A failed TCP join leaves the PMIx session usable for a later init.
    Ok(id.join(rank, size, timeout)?.with_launcher_node(node))
}

#[cfg(test)]
mod tests;
