//! The `pmi` bootstrap: a PMI-1 client in pure Rust.
//!
//! Process managers that speak PMI-1 (MPICH's Hydra `mpiexec`, Slurm's `srun --mpi=pmi2`,
//! Flux) give each process a connection to a key-value store with a barrier. symmem uses it
//! only to find rank 0: rank 0 binds the rendezvous of [unique-id init](crate::unique_id::UniqueId),
//! puts its text (rank 0's address and a fresh random job secret in hex) under
//! [`RENDEZVOUS_KEY`]`-<n>`, everyone enters the PMI barrier, the others get the key, and
//! the TCP rendezvous does the rest. Each process sends `cmd=finalize` when it exits.
//! After the first barrier each process also gets [`PROCESS_MAPPING_KEY`], the node layout
//! that Hydra and Slurm publish, for the launcher's node of [`crate::node`].
//!
//! # Wire protocol
//! The "simple" PMI-1 protocol, as implemented by MPICH's `src/pmi/simple/simple_pmi.c`
//! (`PMI_Init`, `PMII_getmaxes`, `PMII_Set_from_port`, `PMI_KVS_Put`, `PMI_KVS_Get`,
//! `PMI_Barrier`, `PMI_Finalize`) and answered by Hydra's `pmip_pmi_v1.c` (`fn_init` replies
//! `cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0`). Each message is one line of
//! space-separated `key=value` words ending in `\n`:
//!
//! | client sends | server answers |
//! |---|---|
//! | `cmd=initack pmiid=<PMI_ID>` (only with `PMI_PORT`) | `cmd=initack`, `cmd=set size=N`, `cmd=set rank=R`, `cmd=set debug=D` |
//! | `cmd=init pmi_version=1 pmi_subversion=1` | `cmd=response_to_init ... rc=0` |
//! | `cmd=get_maxes` | `cmd=maxes kvsname_max=K keylen_max=L vallen_max=V` |
//! | `cmd=get_my_kvsname` | `cmd=my_kvsname kvsname=NAME` |
//! | `cmd=put kvsname=NAME key=K value=V` | `cmd=put_result rc=0` |
//! | `cmd=barrier_in` | `cmd=barrier_out` |
//! | `cmd=get kvsname=NAME key=K` | `cmd=get_result rc=0 value=V` |
//! | `cmd=finalize` | `cmd=finalize_ack` |
//!
//! A non-zero `rc` is a refusal; its `msg`, when present, is quoted in the error. Rank and
//! size come from `PMI_RANK`/`PMI_SIZE` (set with `PMI_FD`), or from the `cmd=set` lines of
//! the `PMI_PORT`/`PMI_ID` handshake.
//!
//! # Successive inits
//! `PMI_FD` is one inherited socket, and `cmd=finalize` ends the session (the process
//! manager closes it). So the session stays open across inits: the first init opens it,
//! each init publishes its rendezvous under its own key (`symmem-rendezvous-<n>` for the
//! n-th init of the job) and passes one PMI barrier, and the session is finalized once, when
//! the process exits (an `atexit` handler). A process killed by a signal never finalizes,
//! which the process manager reports as an abnormal end, as it should. An init whose PMI
//! exchange fails closes the session; later inits of that process then fail saying so
//! (with `PMI_FD`) or open a new session (with `PMI_PORT`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use crate::env::{check_rank, check_size, Lookup};
use crate::error::BootstrapError;
use crate::node::LauncherNode;
use crate::node::{node_in_mapping, PMI_PROCESS_MAPPING};
use crate::tcp::TcpBootstrap;
use crate::unique_id::UniqueId;
use crate::vars::number;

/// The variable naming the inherited PMI socket.
pub const ENV_PMI_FD: &str = "PMI_FD";
/// The variable naming the PMI server's `host:port`.
pub const ENV_PMI_PORT: &str = "PMI_PORT";
/// The id this process presents to a `PMI_PORT` server.
pub const ENV_PMI_ID: &str = "PMI_ID";
/// This process's rank.
pub const ENV_PMI_RANK: &str = "PMI_RANK";
/// The number of ranks.
pub const ENV_PMI_SIZE: &str = "PMI_SIZE";
/// The KVS key under which rank 0 publishes its rendezvous, suffixed `-<n>` for the n-th
/// init of the job.
pub const RENDEZVOUS_KEY: &str = "symmem-rendezvous";
/// The KVS key under which Hydra and Slurm publish the job's node layout (see
/// [`node_in_mapping`]).
pub const PROCESS_MAPPING_KEY: &str = "PMI_process_mapping";
/// The longest line accepted from the server (MPICH's `PMIU_MAXLINE` is 1024; Hydra's
/// replies can carry a value of up to `vallen_max` after other words).
const MAX_LINE: usize = 64 * 1024;

/// How to reach the PMI server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// An inherited, connected socket (`PMI_FD`).
    Fd(RawFd),
    /// A server at `host:port` (`PMI_PORT`), with the id to present (`PMI_ID`) if any.
    Port {
        /// `host:port`.
        addr: String,
        /// `PMI_ID`: when set, rank and size come from the server's handshake.
        id: Option<u64>,
    },
}

/// What the PMI variables say about this process, before any connection is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmiEnv {
    /// Where the server is.
    pub endpoint: Endpoint,
    /// `PMI_RANK`, when set.
    pub rank: Option<usize>,
    /// `PMI_SIZE`, when set.
    pub size: Option<usize>,
    /// The variables, as `NAME=value, NAME=value`, for messages.
    pub vars: String,
    /// Slurm's node of this process (`srun --mpi=pmi2`), the launcher's node view when the
    /// process manager publishes no usable `PMI_process_mapping`.
    pub slurm_node: Option<LauncherNode>,
}

fn config(msg: String) -> BootstrapError {
    BootstrapError::Config(msg)
}

/// Checks a rank and size that the PMI server sent, naming it.
fn check_rank_size(rank: usize, size: usize, origin: &str) -> Result<(), BootstrapError> {
    let max = crate::env::MAX_WORLD_SIZE;
    if size == 0 || size > max {
        return Err(config(format!(
            "{origin}: size {size} is out of range: a job has 1 to {max} ranks"
        )));
    }
    if rank >= size {
        return Err(config(format!(
            "{origin}: rank {rank} is out of range for size {size}"
        )));
    }
    Ok(())
}

/// Reads the PMI variables through `get`: `Ok(None)` when neither `PMI_FD` nor `PMI_PORT`
/// is set, an error naming the variable when one is malformed.
pub fn pmi_env(get: Lookup) -> Result<Option<PmiEnv>, BootstrapError> {
    let mut vars = Vec::new();
    let endpoint = if let Some(fd) = get(ENV_PMI_FD) {
        vars.push(format!("{ENV_PMI_FD}={fd}"));
        let n: RawFd = fd.parse().ok().filter(|n| *n >= 0).ok_or_else(|| {
            config(format!(
                "{ENV_PMI_FD}={fd:?} is not a file descriptor number"
            ))
        })?;
        Endpoint::Fd(n)
    } else if let Some(addr) = get(ENV_PMI_PORT) {
        vars.push(format!("{ENV_PMI_PORT}={addr}"));
        if !addr.contains(':') {
            return Err(config(format!("{ENV_PMI_PORT}={addr:?} is not host:port")));
        }
        let id = match get(ENV_PMI_ID) {
            Some(id) => {
                vars.push(format!("{ENV_PMI_ID}={id}"));
                Some(id.parse::<u64>().map_err(|_| {
                    config(format!("{ENV_PMI_ID}={id:?} is not a non-negative integer"))
                })?)
            }
            None => None,
        };
        Endpoint::Port { addr, id }
    } else {
        return Ok(None);
    };
    let mut read = |var: &str| -> Result<Option<usize>, BootstrapError> {
        match get(var) {
            Some(v) => {
                vars.push(format!("{var}={v}"));
                number(var, &v).map(Some)
            }
            None => Ok(None),
        }
    };
    let rank = read(ENV_PMI_RANK)?;
    let size = read(ENV_PMI_SIZE)?;
    let handshake = matches!(endpoint, Endpoint::Port { id: Some(_), .. });
    let vars = vars.join(", ");
    if !handshake {
        let (Some(r), Some(s)) = (rank, size) else {
            return Err(config(format!(
                "{vars}: {ENV_PMI_RANK} and {ENV_PMI_SIZE} must be set with {} (PMI-1 process managers set them; or give {ENV_PMI_ID} with {ENV_PMI_PORT})",
                if matches!(endpoint, Endpoint::Fd(_)) { ENV_PMI_FD } else { ENV_PMI_PORT }
            )));
        };
        check_size(ENV_PMI_SIZE, s)?;
        check_rank(ENV_PMI_RANK, r, ENV_PMI_SIZE, s)?;
    }
    Ok(Some(PmiEnv {
        endpoint,
        rank,
        size,
        vars,
        slurm_node: crate::node::slurm_node(get)?,
    }))
}

/// A connected socket to the PMI server, of either family.
trait Conn: Read + Write + Send {
    fn set_timeouts(&self, wait: Duration) -> std::io::Result<()>;
}

impl Conn for UnixStream {
    fn set_timeouts(&self, wait: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(wait))?;
        self.set_write_timeout(Some(wait))
    }
}

impl Conn for TcpStream {
    fn set_timeouts(&self, wait: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(wait))?;
        self.set_write_timeout(Some(wait))
    }
}

/// Set once this process has taken `PMI_FD` (see the module docs on successive inits).
static FD_TAKEN: AtomicBool = AtomicBool::new(false);

fn already_used(fd: RawFd) -> BootstrapError {
    config(format!(
        "{ENV_PMI_FD}={fd} was closed when an earlier init of this process failed in its PMI-1 exchange; a PMI-1 session cannot be reopened"
    ))
}

/// Takes ownership of the inherited PMI socket `fd`, after checking that it is an open
/// socket.
fn take_fd(fd: RawFd) -> Result<Box<dyn Conn>, BootstrapError> {
    if FD_TAKEN.load(Ordering::Acquire) {
        return Err(already_used(fd));
    }
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat only writes into `st`, which is valid for writes; an fd that is not
    // open yields EBADF and no other effect.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        let err = std::io::Error::last_os_error();
        return Err(config(format!(
            "{ENV_PMI_FD}={fd} is not an open file descriptor ({err}); start the program with a PMI-1 process manager (mpiexec, srun --mpi=pmi2), or unset {ENV_PMI_FD}"
        )));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(config(format!(
            "{ENV_PMI_FD}={fd} is not a socket; start the program with a PMI-1 process manager (mpiexec, srun --mpi=pmi2), or unset {ENV_PMI_FD}"
        )));
    }
    if FD_TAKEN.swap(true, Ordering::AcqRel) {
        return Err(already_used(fd));
    }
    let mut domain: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `domain` and `len` are valid for writes and `len` holds the size of `domain`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut domain as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    // SAFETY: `fd` is an open socket (checked above) that the process manager handed to
    // this process for PMI; FD_TAKEN makes this the only place that ever owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    if rc == 0 && domain == libc::AF_UNIX {
        Ok(Box::new(UnixStream::from(owned)))
    } else {
        Ok(Box::new(TcpStream::from(owned)))
    }
}

/// The KVS limits the server reported (`cmd=maxes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maxes {
    /// Longest KVS name, counting C's terminating NUL.
    pub kvsname_max: usize,
    /// Longest key, counting C's terminating NUL.
    pub keylen_max: usize,
    /// Longest value, counting C's terminating NUL.
    pub vallen_max: usize,
}

/// A PMI-1 session: one connection to the process manager.
pub struct PmiClient {
    conn: Box<dyn Conn>,
    /// Bytes read past the last line.
    pending: Vec<u8>,
    /// Names the server in messages, e.g. `PMI server (PMI_FD=5)`.
    peer: String,
    deadline: Instant,
    timeout: Duration,
}

impl std::fmt::Debug for PmiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmiClient")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// One parsed reply line: its words in order.
type Reply = Vec<(String, String)>;

fn word<'a>(reply: &'a Reply, key: &str) -> Option<&'a str> {
    reply
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

impl PmiClient {
    /// Connects to the server that `env` names. Every later call fails once `timeout` has
    /// passed since this one.
    pub fn connect(env: &PmiEnv, timeout: Duration) -> Result<Self, BootstrapError> {
        let deadline = crate::duration::deadline_after(timeout);
        let conn: Box<dyn Conn> = match &env.endpoint {
            Endpoint::Fd(fd) => take_fd(*fd)?,
            Endpoint::Port { addr, .. } => {
                let stream = connect_port(addr, deadline)?;
                Box::new(stream)
            }
        };
        Ok(Self::over(conn, &env.vars, timeout, deadline))
    }

    fn over(conn: Box<dyn Conn>, vars: &str, timeout: Duration, deadline: Instant) -> Self {
        PmiClient {
            conn,
            pending: Vec::new(),
            peer: format!("PMI server ({vars})"),
            deadline,
            timeout,
        }
    }

    /// Starts a new deadline: `timeout` from now, for the calls of one init.
    fn rearm(&mut self, timeout: Duration) {
        self.timeout = timeout;
        self.deadline = crate::duration::deadline_after(timeout);
    }

    fn lost(&self, cmd: &str, reason: String) -> BootstrapError {
        BootstrapError::ServerLost {
            addr: self.peer.clone(),
            reason: format!("during cmd={cmd}: {reason}"),
        }
    }

    fn remaining(&self, cmd: &str) -> Result<Duration, BootstrapError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.timed_out(cmd));
        }
        Ok(left)
    }

    fn timed_out(&self, cmd: &str) -> BootstrapError {
        self.lost(
            cmd,
            format!(
                "no answer within {:?} (SYMMEM_BOOTSTRAP_TIMEOUT); did every rank start?",
                self.timeout
            ),
        )
    }

    fn send(&mut self, cmd: &str, line: &str) -> Result<(), BootstrapError> {
        tracing::trace!(line = %redacted(line), "PMI send");
        let wait = self.remaining(cmd)?;
        self.conn
            .set_timeouts(wait)
            .and_then(|()| self.conn.write_all(line.as_bytes()))
            .map_err(|e| self.lost(cmd, format!("writing failed: {e}")))
    }

    /// Reads one line, answering `cmd`.
    fn read_line(&mut self, cmd: &str) -> Result<String, BootstrapError> {
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let text = String::from_utf8_lossy(&line[..end]).trim().to_string();
                tracing::trace!(line = %redacted(&text), "PMI receive");
                return Ok(text);
            }
            if self.pending.len() > MAX_LINE {
                return Err(self.garbage(cmd, "a line longer than 64 KiB"));
            }
            let wait = self.remaining(cmd)?;
            let mut chunk = [0u8; 4096];
            let got = self.conn.set_timeouts(wait).and_then(|()| loop {
                match self.conn.read(&mut chunk) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    other => break other,
                }
            });
            match got {
                Ok(0) => {
                    return Err(self.lost(cmd, "the server closed the connection".into()));
                }
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(self.timed_out(cmd));
                }
                Err(e) => return Err(self.lost(cmd, format!("reading failed: {e}"))),
            }
        }
    }

    fn garbage(&self, cmd: &str, what: &str) -> BootstrapError {
        BootstrapError::Protocol {
            peer: self.peer.clone(),
            detail: format!("answered cmd={cmd} with {what}"),
        }
    }

    /// Reads a reply to `cmd`, which must be `cmd=<want>`, and checks its `rc`.
    fn reply(&mut self, cmd: &str, want: &str) -> Result<Reply, BootstrapError> {
        let line = self.read_line(cmd)?;
        let mut reply = Reply::new();
        for w in line.split_whitespace() {
            let Some((k, v)) = w.split_once('=') else {
                return Err(self.garbage(cmd, &format!("{line:?} (expected key=value words)")));
            };
            reply.push((k.to_string(), v.to_string()));
        }
        if word(&reply, "cmd") != Some(want) {
            return Err(self.garbage(cmd, &format!("{line:?} (expected cmd={want})")));
        }
        if let Some(rc) = word(&reply, "rc") {
            if rc != "0" {
                let msg = word(&reply, "msg").unwrap_or("no msg");
                return Err(BootstrapError::Protocol {
                    peer: self.peer.clone(),
                    detail: format!("refused cmd={cmd} (rc={rc}, msg={msg})"),
                });
            }
        }
        Ok(reply)
    }

    fn number_in(&self, cmd: &str, reply: &Reply, key: &str) -> Result<usize, BootstrapError> {
        word(reply, key)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| self.garbage(cmd, &format!("no number {key}= in {reply:?}")))
    }

    /// The `PMI_PORT`/`PMI_ID` handshake: `cmd=initack`, then the server sets size, rank
    /// and debug. Returns `(rank, size)`.
    pub fn initack(&mut self, id: u64) -> Result<(usize, usize), BootstrapError> {
        self.send("initack", &format!("cmd=initack pmiid={id}\n"))?;
        self.reply("initack", "initack")?;
        let size_reply = self.reply("initack", "set")?;
        let size = self.number_in("initack", &size_reply, "size")?;
        let rank_reply = self.reply("initack", "set")?;
        let rank = self.number_in("initack", &rank_reply, "rank")?;
        self.reply("initack", "set")?;
        Ok((rank, size))
    }

    /// `cmd=init pmi_version=1 pmi_subversion=1`.
    pub fn init(&mut self) -> Result<(), BootstrapError> {
        self.send("init", "cmd=init pmi_version=1 pmi_subversion=1\n")?;
        self.reply("init", "response_to_init").map(drop)
    }

    /// `cmd=get_maxes`: the server's KVS limits.
    pub fn get_maxes(&mut self) -> Result<Maxes, BootstrapError> {
        self.send("get_maxes", "cmd=get_maxes\n")?;
        let r = self.reply("get_maxes", "maxes")?;
        Ok(Maxes {
            kvsname_max: self.number_in("get_maxes", &r, "kvsname_max")?,
            keylen_max: self.number_in("get_maxes", &r, "keylen_max")?,
            vallen_max: self.number_in("get_maxes", &r, "vallen_max")?,
        })
    }

    /// `cmd=get_my_kvsname`: this job's KVS, checked against `maxes`.
    pub fn get_my_kvsname(&mut self, maxes: &Maxes) -> Result<String, BootstrapError> {
        self.send("get_my_kvsname", "cmd=get_my_kvsname\n")?;
        let r = self.reply("get_my_kvsname", "my_kvsname")?;
        let name = word(&r, "kvsname")
            .filter(|n| !n.is_empty())
            .ok_or_else(|| self.garbage("get_my_kvsname", "no kvsname="))?;
        if name.len() >= maxes.kvsname_max {
            return Err(self.garbage(
                "get_my_kvsname",
                &format!(
                    "kvsname {name:?}, longer than its own kvsname_max={}",
                    maxes.kvsname_max
                ),
            ));
        }
        Ok(name.to_string())
    }

    /// `cmd=put`, after checking the key and value against `maxes`.
    pub fn put(
        &mut self,
        maxes: &Maxes,
        kvsname: &str,
        key: &str,
        value: &str,
    ) -> Result<(), BootstrapError> {
        check_word("key", key, maxes.keylen_max, "keylen_max", &self.peer)?;
        check_word("value", value, maxes.vallen_max, "vallen_max", &self.peer)?;
        self.send(
            "put",
            &format!("cmd=put kvsname={kvsname} key={key} value={value}\n"),
        )?;
        self.reply("put", "put_result").map(drop)
    }

    /// `cmd=barrier_in`, then waits for `cmd=barrier_out`.
    pub fn barrier(&mut self) -> Result<(), BootstrapError> {
        self.send("barrier_in", "cmd=barrier_in\n")?;
        self.reply("barrier_in", "barrier_out").map(drop)
    }

    /// `cmd=get`: the value of `key`.
    pub fn get(
        &mut self,
        maxes: &Maxes,
        kvsname: &str,
        key: &str,
    ) -> Result<String, BootstrapError> {
        check_word("key", key, maxes.keylen_max, "keylen_max", &self.peer)?;
        self.send("get", &format!("cmd=get kvsname={kvsname} key={key}\n"))?;
        let r = self.reply("get", "get_result")?;
        word(&r, "value")
            .map(str::to_string)
            .ok_or_else(|| self.garbage("get", "no value="))
    }

    /// `cmd=finalize`, then waits for `cmd=finalize_ack`; ends the session.
    pub fn finalize(mut self) -> Result<(), BootstrapError> {
        self.send("finalize", "cmd=finalize\n")?;
        self.reply("finalize", "finalize_ack").map(drop)
    }
}

/// `line` with its `value=` elided: the published rendezvous carries the job secret.
fn redacted(line: &str) -> String {
    line.split_whitespace()
        .map(|w| {
            if w.starts_with("value=") {
                "value=<secret>"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Checks that `text` fits the server's limit (which counts C's terminating NUL) and is
/// one word of the line protocol.
fn check_word(
    what: &str,
    text: &str,
    max: usize,
    limit: &str,
    peer: &str,
) -> Result<(), BootstrapError> {
    if text.len() >= max {
        return Err(config(format!(
            "the {peer} allows a {what} of at most {} bytes ({limit}={max}), but symmem needs {} for {text:?}",
            max.saturating_sub(1),
            text.len()
        )));
    }
    if text.is_empty() || text.contains(|c: char| c.is_whitespace() || c == '=') {
        return Err(config(format!(
            "{what} {text:?} cannot be sent over PMI-1 (empty, or has a space or '=')"
        )));
    }
    Ok(())
}

/// Connects to `host:port`, retrying refused connections until `deadline` (the server may
/// still be starting).
fn connect_port(addr: &str, deadline: Instant) -> Result<TcpStream, BootstrapError> {
    use std::net::ToSocketAddrs;
    let resolved: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| config(format!("{ENV_PMI_PORT}={addr:?} does not resolve: {e}")))?
        .collect();
    let mut pause = Duration::from_millis(20);
    loop {
        let mut last = None;
        for a in &resolved {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match TcpStream::connect_timeout(a, left) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    crate::net::watch(&s, &format!("the PMI-1 connection to {a}"))?;
                    return Ok(s);
                }
                Err(e) => last = Some(e),
            }
        }
        if Instant::now() + pause >= deadline {
            return Err(BootstrapError::ServerLost {
                addr: format!("PMI server ({ENV_PMI_PORT}={addr})"),
                reason: format!(
                    "cannot connect before the bootstrap deadline (SYMMEM_BOOTSTRAP_TIMEOUT): {}",
                    last.map_or("no address".to_string(), |e| e.to_string())
                ),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// An open PMI-1 session: the client and what the server told at init.
struct Session {
    client: PmiClient,
    rank: usize,
    size: usize,
    maxes: Maxes,
    kvsname: String,
    /// The inits of this process made over this session so far.
    inits: u64,
    /// The node the process manager placed this process on: read after the first
    /// barrier, when every value put before it is visible.
    node: Option<LauncherNode>,
}

impl Session {
    /// `cmd=initack` (with `PMI_ID`), `cmd=init`, `cmd=get_maxes`, `cmd=get_my_kvsname`.
    fn open(mut client: PmiClient, env: &PmiEnv) -> Result<Self, BootstrapError> {
        let (rank, size) = match (&env.endpoint, env.rank, env.size) {
            (Endpoint::Port { id: Some(id), .. }, _, _) => {
                let (rank, size) = client.initack(*id)?;
                check_rank_size(rank, size, &format!("the {} handshake", client.peer))?;
                (rank, size)
            }
            (_, Some(rank), Some(size)) => (rank, size),
            _ => {
                return Err(config(format!(
                    "{}: {ENV_PMI_RANK} and {ENV_PMI_SIZE} are not set",
                    env.vars
                )))
            }
        };
        client.init()?;
        let maxes = client.get_maxes()?;
        let kvsname = client.get_my_kvsname(&maxes)?;
        tracing::debug!(rank, size, kvsname, ?maxes, "PMI-1 session open");
        Ok(Session {
            client,
            rank,
            size,
            maxes,
            kvsname,
            inits: 0,
            node: None,
        })
    }

    /// The launcher's node of this process: node `i` of `PMI_process_mapping`, else
    /// `fallback` (Slurm's variables). A missing or unreadable mapping is not an error
    /// (not every process manager publishes one); the debug log says why it was not used.
    fn launcher_node(
        &mut self,
        fallback: Option<LauncherNode>,
    ) -> Result<Option<LauncherNode>, BootstrapError> {
        let (maxes, kvsname) = (self.maxes, self.kvsname.as_str());
        let why = match self.client.get(&maxes, kvsname, PROCESS_MAPPING_KEY) {
            Ok(mapping) => match node_in_mapping(&mapping, self.rank) {
                Ok(node) => {
                    return Ok(Some(LauncherNode::new(
                        node.to_string(),
                        PMI_PROCESS_MAPPING,
                    )))
                }
                Err(why) => why,
            },
            // A refusal (no such key) or a reply that is not one: the line was read whole,
            // so the session goes on. Anything else (timeout, lost server) ends it.
            Err(BootstrapError::Protocol { detail, .. }) => detail,
            Err(e) => return Err(e),
        };
        tracing::debug!(
            rank = self.rank,
            fallback = ?fallback,
            "{PROCESS_MAPPING_KEY} in KVS {kvsname} does not tell this process's node: {why}"
        );
        Ok(fallback)
    }

    /// One init: rank 0 puts its rendezvous, barrier, the others get it; all join it.
    /// The first init also reads the launcher's node, falling back to `slurm_node`.
    fn exchange(
        &mut self,
        ifname: Option<&str>,
        slurm_node: Option<LauncherNode>,
        timeout: Duration,
    ) -> Result<TcpBootstrap, BootstrapError> {
        self.client.rearm(timeout);
        let first = self.inits == 0;
        let key = format!("{RENDEZVOUS_KEY}-{}", self.inits);
        self.inits += 1;
        let (maxes, kvsname) = (self.maxes, self.kvsname.as_str());
        let own = if self.rank == 0 {
            let id = UniqueId::bind(ifname)?;
            self.client.put(&maxes, kvsname, &key, &id.to_string())?;
            Some(id)
        } else {
            None
        };
        crate::fault::exit_point("launcher_exchange");
        self.client.barrier()?;
        let id = match own {
            Some(id) => id,
            None => {
                let text = self.client.get(&maxes, kvsname, &key)?;
                text.parse::<UniqueId>()
                    .map_err(|e| BootstrapError::Protocol {
                        peer: self.client.peer.clone(),
                        detail: format!("rank 0's {key} in KVS {kvsname}: {e}"),
                    })?
            }
        };
        if first {
            self.node = self.launcher_node(slurm_node)?;
        }
        tracing::debug!(rank = self.rank, addr = %id.addr(), key, "joining the rendezvous published through PMI");
        Ok(id
            .join(self.rank, self.size, timeout)?
            .with_launcher_node(self.node.clone()))
    }
}

/// This process's PMI-1 session, open from its first init until it exits.
static SESSION: Mutex<Option<Session>> = Mutex::new(None);
/// Registers [`finalize_at_exit`] once.
static AT_EXIT: Once = Once::new();

/// Sends `cmd=finalize` when the process exits (an `atexit` handler, so it must not
/// unwind). Skipped when another thread holds the session, e.g. exits during an init.
extern "C" fn finalize_at_exit() {
    let Ok(mut guard) = SESSION.try_lock() else {
        return;
    };
    if let Some(mut session) = guard.take() {
        session.client.rearm(Duration::from_secs(5));
        // The process is exiting: a failure here has no one left to report to.
        let _ = session.client.finalize();
    }
}

/// Joins the job whose PMI variables are `env`: the PMI-1 exchange of the [module
/// docs](self) over this process's session (opened by its first init), then the TCP
/// rendezvous hosted by rank 0. `ifname` picks the interface rank 0 advertises
/// (`SYMMEM_SOCKET_IFNAME`).
pub fn join(
    env: &PmiEnv,
    ifname: Option<&str>,
    timeout: Duration,
) -> Result<TcpBootstrap, BootstrapError> {
    let mut guard = SESSION.lock().unwrap_or_else(|p| p.into_inner());
    let mut session = match guard.take() {
        Some(session) => session,
        None => {
            let session = Session::open(PmiClient::connect(env, timeout)?, env)?;
            AT_EXIT.call_once(|| {
                // SAFETY: atexit only records the function pointer; `finalize_at_exit` takes
                // no arguments, never unwinds, and touches only statics that live until exit.
                if unsafe { libc::atexit(finalize_at_exit) } != 0 {
                    tracing::warn!("cannot register the PMI finalize at exit; the process manager may report this process as ended without PMI finalize");
                }
            });
            session
        }
    };
    // On error the session is dropped, closing it: its stream may be mid-reply.
    let joined = session.exchange(ifname, env.slurm_node.clone(), timeout)?;
    *guard = Some(session);
    Ok(joined)
}

/// Runs the client side of a whole session against `server`, the bytes a PMI server
/// sends (then closes): the `PMI_ID` handshake, init, maxes, KVS name, the process
/// mapping, a put, a barrier, a get of a rank-0 rendezvous and finalize, as rank 1 of the
/// job would; stops at the first error. For fuzzing and property tests of the reply
/// parser: whatever `server` holds must end in an error or a session, never a panic.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn replay(server: &[u8]) -> Result<(), BootstrapError> {
    let (mine, mut theirs) =
        UnixStream::pair().map_err(|e| BootstrapError::io("socketpair", &e))?;
    // The socket's buffer holds this much at once; the server never reads.
    let server = &server[..server.len().min(64 << 10)];
    theirs
        .write_all(server)
        .and_then(|()| theirs.shutdown(std::net::Shutdown::Write))
        .map_err(|e| BootstrapError::io("writing the server's bytes", &e))?;
    let timeout = Duration::from_secs(5);
    let client = PmiClient::over(
        Box::new(mine),
        "replay",
        timeout,
        crate::duration::deadline_after(timeout),
    );
    let env = PmiEnv {
        endpoint: Endpoint::Port {
            addr: "replay".into(),
            id: Some(1),
        },
        rank: None,
        size: None,
        vars: "replay".into(),
        slurm_node: None,
    };
    let mut session = Session::open(client, &env)?;
    session.launcher_node(None)?;
    let (maxes, kvsname) = (session.maxes, session.kvsname.clone());
    session
        .client
        .put(&maxes, &kvsname, "replay-key", "replay-value")?;
    session.client.barrier()?;
    let text = session
        .client
        .get(&maxes, &kvsname, &format!("{RENDEZVOUS_KEY}-0"))?;
    // Rank 0's rendezvous is parsed too: a bad one is an error, as in `exchange`.
    text.parse::<UniqueId>()
        .map_err(|e| session.client.garbage("get", &e.to_string()))?;
    session.client.finalize()
}

#[cfg(test)]
mod tests;
