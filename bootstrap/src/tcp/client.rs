//! A rank's connection to the rendezvous server.

use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::admission::Claim;
use super::RendezvousServer;
use crate::auth::{self, HandshakeError, JobKey, Protocol, PublicJobKey};
use crate::error::BootstrapError;
use crate::interface::{Bootstrap, BootstrapKind};
use crate::node::LauncherNode;
use crate::wire::{self, CollOp, Msg, Recv};

/// Extra time a client waits beyond the deadline, so that the server, which enforces the
/// deadline and knows who is missing, can report first.
const SERVER_GRACE: Duration = Duration::from_secs(3);

/// A failure reported asynchronously by the reader thread; first report wins.
#[derive(Default)]
struct FailureLatch {
    set: AtomicBool,
    err: Mutex<Option<BootstrapError>>,
}

impl FailureLatch {
    fn set(&self, err: BootstrapError) {
        let mut slot = self.err.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(err);
            // Release pairs with the Acquire in `get`: whoever sees the flag sees the error.
            self.set.store(true, Ordering::Release);
        }
    }

    fn get(&self) -> Option<BootstrapError> {
        if !self.set.load(Ordering::Acquire) {
            return None;
        }
        self.err.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

enum Reply {
    Ready,
    Result { seq: u64, parts: Vec<Vec<u8>> },
    Failed(BootstrapError),
}

struct Channel {
    writer: TcpStream,
    replies: Receiver<Reply>,
    next_seq: u64,
}

/// [`Bootstrap`] over the TCP rendezvous.
pub struct TcpBootstrap {
    rank: usize,
    size: usize,
    timeout: Duration,
    server_addr: String,
    channel: Mutex<Channel>,
    failure: Arc<FailureLatch>,
    closing: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    /// The server, when this rank hosts it (rank 0 in unique-id init). Dropped last.
    hosted: Option<RendezvousServer>,
    /// The rank whose process hosts the server, when another rank does (unique-id init):
    /// losing the server then means that rank died.
    host_rank: Option<usize>,
    /// The node the launcher placed this rank on, when a launcher that tells started it.
    launcher_node: Option<LauncherNode>,
    /// The job's rendezvous key.
    key: JobKey,
    /// Where the key comes from when no secret went into it (see
    /// [`Bootstrap::public_job_key`]).
    public_key: Option<PublicJobKey>,
}

impl TcpBootstrap {
    /// Joins the job at `addr` as `rank` of `size`, proving `key`. `session` separates
    /// successive inits of one process under one launcher. Retries the connection until
    /// the deadline, then waits until every rank has joined.
    pub fn connect(
        addr: &str,
        key: &JobKey,
        session: u64,
        rank: usize,
        size: usize,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        Self::join(addr, key, session, rank, size, timeout, Join::Client)
    }

    /// Joins like [`Self::connect`] a rendezvous hosted by rank `host_rank`'s process
    /// (unique-id init, the `env` bootstrap), so that losing the server is reported as that
    /// rank's failure. `join_by`, when given, is the deadline for connecting and joining
    /// instead of `timeout` from now (for callers that retry); `timeout` still applies to
    /// every later call.
    pub(crate) fn connect_hosted_by(
        addr: &str,
        key: &JobKey,
        rank: usize,
        size: usize,
        timeout: Duration,
        host_rank: usize,
        join_by: Option<Instant>,
    ) -> Result<Self, BootstrapError> {
        Self::join(
            addr,
            key,
            0,
            rank,
            size,
            timeout,
            Join::HostedBy { host_rank, join_by },
        )
    }

    /// Records the node the launcher placed this rank on, for [`Bootstrap::launcher_node`].
    pub fn with_launcher_node(mut self, node: Option<LauncherNode>) -> Self {
        self.launcher_node = node;
        self
    }

    /// Records that the key was derived from public job identity, for
    /// [`Bootstrap::public_job_key`].
    pub fn with_public_key(mut self, public_key: Option<PublicJobKey>) -> Self {
        self.public_key = public_key;
        self
    }

    /// Hosts the rendezvous on `listener` and joins it as `rank` (normally 0).
    pub fn host(
        listener: TcpListener,
        key: &JobKey,
        rank: usize,
        size: usize,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        let mut server = RendezvousServer::start(listener, key.clone(), size, timeout)?;
        server.set_host_rank(rank);
        // A server listening on every interface is reached here through loopback.
        let mut addr = server.addr();
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let addr = addr.to_string();
        Self::join(&addr, key, 0, rank, size, timeout, Join::Host(server))
    }

    fn join(
        addr: &str,
        key: &JobKey,
        session: u64,
        rank: usize,
        size: usize,
        timeout: Duration,
        how: Join,
    ) -> Result<Self, BootstrapError> {
        let (hosted, host_rank, join_by) = match how {
            Join::Client => (None, None, None),
            Join::HostedBy { host_rank, join_by } => (None, Some(host_rank), join_by),
            Join::Host(server) => (Some(server), None, None),
        };
        if rank >= size {
            return Err(BootstrapError::Config(format!(
                "rank {rank} is out of range for {size} ranks"
            )));
        }
        // A library caller may pass any Duration: cap it so deadlines cannot overflow.
        let timeout = crate::duration::capped(timeout);
        let deadline = join_by.unwrap_or_else(|| crate::duration::deadline_after(timeout));
        let claim = Claim {
            session,
            rank: rank as u32,
            size: size as u32,
            pid: std::process::id(),
        };
        let stream = authenticate(addr, key, &claim, deadline, timeout)?;
        crate::net::watch(&stream, &format!("the rendezvous connection to {addr}"))?;
        crate::fault::exit_point("rendezvous_join");
        let reader_stream = stream
            .try_clone()
            .map_err(|e| BootstrapError::io("cloning the bootstrap socket", &e))?;
        let failure = Arc::new(FailureLatch::default());
        let closing = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let reader = {
            let (failure, closing, addr) = (failure.clone(), closing.clone(), addr.to_string());
            std::thread::Builder::new()
                .name("symmem-bootstrap-rx".into())
                .spawn(move || read_loop(reader_stream, addr, host_rank, tx, failure, closing))
                .map_err(|e| BootstrapError::io("spawning the bootstrap reader", &e))?
        };
        let this = TcpBootstrap {
            rank,
            size,
            timeout,
            server_addr: addr.to_string(),
            channel: Mutex::new(Channel {
                writer: stream,
                replies: rx,
                next_seq: 0,
            }),
            failure,
            closing,
            reader: Some(reader),
            hosted,
            host_rank,
            launcher_node: None,
            key: key.clone(),
            public_key: None,
        };
        // The server enforces the join deadline from its own start; wait a little longer.
        let wait = deadline.saturating_duration_since(Instant::now()) + SERVER_GRACE;
        let reply = this.wait_reply(&this.lock(), wait, "waiting for all ranks to join")?;
        match reply {
            Reply::Ready => {
                tracing::debug!(rank, size, addr, "bootstrap joined");
                Ok(this)
            }
            _ => Err(BootstrapError::Protocol {
                peer: format!("bootstrap server at {addr}"),
                detail: "expected ready".into(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Channel> {
        self.channel.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait_reply(
        &self,
        chan: &Channel,
        wait: Duration,
        what: &str,
    ) -> Result<Reply, BootstrapError> {
        match chan.replies.recv_timeout(wait) {
            Ok(Reply::Failed(e)) => Err(e),
            Ok(r) => Ok(r),
            Err(RecvTimeoutError::Timeout) => {
                Err(self
                    .failure
                    .get()
                    .unwrap_or_else(|| BootstrapError::ServerLost {
                        addr: self.server_addr.clone(),
                        reason: format!("no answer within {wait:?} while {what}"),
                    }))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.failure.get().unwrap_or_else(|| {
                server_lost(
                    &self.server_addr,
                    self.host_rank,
                    format!("connection closed while {what}"),
                )
            })),
        }
    }

    fn collective(
        &self,
        op: CollOp,
        root: usize,
        parts: Vec<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let mut chan = self.lock();
        if let Some(e) = self.failure.get() {
            return Err(e);
        }
        let seq = chan.next_seq;
        chan.next_seq += 1;
        let msg = Msg::Coll {
            seq,
            op,
            root: root as u32,
            parts,
        };
        wire::send(&mut chan.writer, &msg).map_err(|e| {
            self.failure.get().unwrap_or_else(|| {
                server_lost(
                    &self.server_addr,
                    self.host_rank,
                    format!("sending {} #{seq}: {e}", op.name()),
                )
            })
        })?;
        let what = format!("in {} #{seq}", op.name());
        match self.wait_reply(&chan, self.timeout + SERVER_GRACE, &what)? {
            Reply::Result { seq: s, parts } if s == seq => Ok(parts),
            _ => Err(BootstrapError::Protocol {
                peer: format!("bootstrap server at {}", self.server_addr),
                detail: format!("unexpected reply to {} #{seq}", op.name()),
            }),
        }
    }
}

/// How [`TcpBootstrap::join`] reaches the server.
enum Join {
    /// The server is the launcher's (symrun) or the caller's.
    Client,
    /// The server runs in rank `host_rank`'s process (unique-id init, `env` bootstrap);
    /// `join_by` overrides the join deadline.
    HostedBy {
        host_rank: usize,
        join_by: Option<Instant>,
    },
    /// This rank hosts the server.
    Host(RendezvousServer),
}

/// The error for a lost connection to the server at `addr`. When a rank's process hosts
/// the server, that rank is named: the server goes away only when its process does.
fn server_lost(addr: &str, host_rank: Option<usize>, reason: String) -> BootstrapError {
    match host_rank {
        Some(rank) => BootstrapError::PeerFailed {
            rank,
            reason: format!(
                "the rendezvous its process hosts at {addr} is gone ({reason}): the process exited or was killed, or its host is down or cut off"
            ),
        },
        None => BootstrapError::ServerLost {
            addr: addr.to_string(),
            reason,
        },
    }
}

/// Connects to `addr` and runs the handshake that proves `key` both ways, carrying
/// `claim`. Refused connections, and connections the server lets go before answering (it
/// is busy with a flood of others), are retried until `deadline`.
fn authenticate(
    addr: &str,
    key: &JobKey,
    claim: &Claim,
    deadline: Instant,
    timeout: Duration,
) -> Result<TcpStream, BootstrapError> {
    let mut delay = Duration::from_millis(5);
    loop {
        let last = match connect_by(addr, deadline) {
            Ok(mut s) => {
                match auth::client_handshake(
                    &mut s,
                    key,
                    Protocol::Rendezvous,
                    &claim.encode(),
                    deadline,
                ) {
                    Ok(()) => {
                        let _ = s.set_nodelay(true);
                        return Ok(s);
                    }
                    Err(HandshakeError::Refused(why)) => {
                        return Err(BootstrapError::Unauthenticated {
                            peer: format!("the rendezvous at {addr}"),
                            detail: why,
                        })
                    }
                    Err(e) => e.to_string(),
                }
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(BootstrapError::ServerLost {
                addr: addr.to_string(),
                reason: format!(
                    "could not connect and authenticate within {timeout:?} (SYMMEM_BOOTSTRAP_TIMEOUT); last error: {last}"
                ),
            });
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(200));
    }
}

/// One attempt to connect to `addr`, giving up at `deadline`.
fn connect_by(addr: &str, deadline: Instant) -> std::io::Result<TcpStream> {
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address"))?;
    let left = deadline.saturating_duration_since(Instant::now());
    TcpStream::connect_timeout(&sa, left.max(Duration::from_millis(10)))
}

fn read_loop(
    mut stream: TcpStream,
    addr: String,
    host_rank: Option<usize>,
    tx: Sender<Reply>,
    failure: Arc<FailureLatch>,
    closing: Arc<AtomicBool>,
) {
    let peer = format!("bootstrap server at {addr}");
    loop {
        let reply = match wire::recv(&mut stream, &peer) {
            Ok(Recv::Msg(Msg::Ready)) => Reply::Ready,
            Ok(Recv::Msg(Msg::Result { seq, parts })) => Reply::Result { seq, parts },
            Ok(Recv::Msg(Msg::Error(e))) => {
                failure.set(e.clone());
                Reply::Failed(e)
            }
            Ok(Recv::Msg(other)) => {
                let e = BootstrapError::Protocol {
                    peer: peer.clone(),
                    detail: format!("unexpected message {other:?}"),
                };
                failure.set(e.clone());
                Reply::Failed(e)
            }
            Ok(Recv::Closed) | Err(_) if closing.load(Ordering::Relaxed) => return,
            Ok(Recv::Closed) => {
                let e = server_lost(
                    &addr,
                    host_rank,
                    "connection closed (the launcher or the rank hosting the rendezvous exited)"
                        .into(),
                );
                failure.set(e.clone());
                let _ = tx.send(Reply::Failed(e));
                return;
            }
            // A reset connection: the hosting process died with data unread.
            Err(BootstrapError::Io { context, message }) if host_rank.is_some() => {
                let e = server_lost(&addr, host_rank, format!("{context}: {message}"));
                failure.set(e.clone());
                let _ = tx.send(Reply::Failed(e));
                return;
            }
            Err(e) => {
                failure.set(e.clone());
                let _ = tx.send(Reply::Failed(e));
                return;
            }
        };
        if tx.send(reply).is_err() {
            return;
        }
    }
}

impl Bootstrap for TcpBootstrap {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn kind(&self) -> BootstrapKind {
        BootstrapKind::Tcp
    }

    fn launcher_node(&self) -> Option<LauncherNode> {
        self.launcher_node.clone()
    }

    fn job_key(&self) -> Option<&JobKey> {
        Some(&self.key)
    }

    fn public_job_key(&self) -> Option<&PublicJobKey> {
        self.public_key.as_ref()
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        self.collective(CollOp::Allgather, 0, vec![mine.to_vec()])
    }

    fn alltoall(&self, outgoing: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        if outgoing.len() != self.size {
            return Err(BootstrapError::Config(format!(
                "alltoall needs {} payloads (one per rank), got {}",
                self.size,
                outgoing.len()
            )));
        }
        self.collective(CollOp::Alltoall, 0, outgoing.to_vec())
    }

    fn barrier(&self) -> Result<(), BootstrapError> {
        self.collective(CollOp::Barrier, 0, Vec::new()).map(drop)
    }

    fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>, BootstrapError> {
        if root >= self.size {
            return Err(BootstrapError::Config(format!(
                "broadcast root {root} is out of range for {} ranks",
                self.size
            )));
        }
        let mine = if self.rank == root {
            data.to_vec()
        } else {
            Vec::new()
        };
        let mut parts = self.collective(CollOp::Broadcast, root, vec![mine])?;
        parts.pop().ok_or_else(|| BootstrapError::Protocol {
            peer: format!("bootstrap server at {}", self.server_addr),
            detail: "empty broadcast result".into(),
        })
    }

    fn abort(&self, reason: &str) {
        let mut chan = self.lock();
        let _ = wire::send(
            &mut chan.writer,
            &Msg::Abort {
                reason: reason.to_string(),
            },
        );
    }

    fn failure(&self) -> Option<BootstrapError> {
        self.failure.get()
    }
}

impl Drop for TcpBootstrap {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::Relaxed);
        {
            let mut chan = self.lock();
            // The server may already be gone (e.g. after a failure); nothing more to say then.
            let _ = wire::send(&mut chan.writer, &Msg::Goodbye);
            let _ = chan.writer.shutdown(Shutdown::Both);
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        // The hosted server goes last: the runtime's finalize ends with a barrier, so every
        // rank is done with collectives by the time the server stops.
        drop(self.hosted.take());
    }
}
