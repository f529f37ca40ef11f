//! The rendezvous server: hosted by the `symrun` launcher or by rank 0.
//!
//! # Design
//! One acceptor thread, one reader thread per connection and one coordinator thread. Readers
//! turn frames into [`Event`]s on a channel; the coordinator owns all state, so no locks
//! guard it. Clients join a *group* identified by their session number (a process's n-th
//! init joins group n, so init → finalize → init works under one launcher).
//!
//! The coordinator enforces every deadline and names the missing ranks: a group whose ranks
//! do not all join, or a collective that not every rank reaches, fails with
//! [`BootstrapError::Timeout`] sent to every member. A connection that closes without a
//! goodbye fails the group with [`BootstrapError::PeerFailed`] naming that rank, and so do
//! aborts and failures reported by the launcher ([`RendezvousServer::report_failure`]).
//! A rank that joins a group after it failed gets the same error. A server hosted by a
//! rank (unique-id init) that stops while its failed group still misses ranks stays up
//! until they have joined or the join deadline passes, so that they too learn which rank
//! failed instead of finding no rendezvous.
//!
//! # Unauthenticated connections
//! Anyone who can reach the port can connect; until a connection proves the job's key
//! ([`crate::auth`]) it is held by the admission thread ([`super::admission`]) at a few
//! hundred bytes and no thread, under one deadline for its whole handshake.

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::admission::{accept_loop, Admission, Claim};
use crate::auth::JobKey;
use crate::error::BootstrapError;
use crate::text::fmt_ranks;
use crate::wire::{self, CollOp, Msg, Recv};

/// What the reader threads and the server's owner tell the coordinator.
enum Event {
    Joined {
        conn: u64,
        session: u64,
        rank: usize,
        stream: TcpStream,
    },
    Frame {
        conn: u64,
        msg: Msg,
    },
    Closed {
        conn: u64,
        reason: String,
    },
    LauncherFailure {
        rank: usize,
        reason: String,
    },
    /// Stop serving; with `after_rank`, first let that rank's connection finish (up to
    /// [`CLOSE_GRACE`]), so whatever it sent last (an abort, a goodbye) is still relayed.
    Shutdown {
        after_rank: Option<usize>,
    },
}

/// How long a stopping server waits for its hosting rank's last frames.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// A running rendezvous server. Dropping it stops all its threads.
pub struct RendezvousServer {
    addr: SocketAddr,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The rank whose process hosts this server (unique-id init), if any.
    host_rank: Option<usize>,
}

impl RendezvousServer {
    /// Starts serving a job of `size` ranks on `listener`. Clients must prove `key`.
    pub fn start(
        listener: TcpListener,
        key: JobKey,
        size: usize,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        // Capped so that `created + timeout` and the like cannot overflow.
        let timeout = crate::duration::capped(timeout);
        let addr = listener
            .local_addr()
            .map_err(|e| BootstrapError::io("reading the rendezvous address", &e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| BootstrapError::io("configuring the rendezvous listener", &e))?;
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (tx, stop) = (tx.clone(), stop.clone());
            std::thread::Builder::new()
                .name("symmem-rdv-accept".into())
                .spawn(move || {
                    accept_loop(
                        listener,
                        Admission { key, size, timeout },
                        stop,
                        |conn, claim, stream| start_reader(conn, claim, stream, &tx),
                    )
                })
                .map_err(|e| BootstrapError::io("spawning the rendezvous acceptor", &e))?
        };
        let coordinator = std::thread::Builder::new()
            .name("symmem-rdv-coord".into())
            .spawn(move || Coordinator::new(size, timeout).run(rx))
            .map_err(|e| BootstrapError::io("spawning the rendezvous coordinator", &e))?;
        tracing::debug!(%addr, size, "rendezvous server started");
        Ok(RendezvousServer {
            addr,
            events: tx,
            stop,
            threads: vec![acceptor, coordinator],
            host_rank: None,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Reports that `rank` failed (used by the launcher when a PE process dies); every
    /// other member of every group gets [`BootstrapError::PeerFailed`].
    pub fn report_failure(&self, rank: usize, reason: &str) {
        // The coordinator may already have stopped; then nobody is left to tell.
        let _ = self.events.send(Event::LauncherFailure {
            rank,
            reason: reason.to_string(),
        });
    }
}

impl RendezvousServer {
    /// Marks `rank` as the rank hosting this server: on shutdown, its final frames are
    /// relayed before the other connections close.
    pub fn set_host_rank(&mut self, rank: usize) {
        self.host_rank = Some(rank);
    }
}

impl Drop for RendezvousServer {
    fn drop(&mut self) {
        let _ = self.events.send(Event::Shutdown {
            after_rank: self.host_rank,
        });
        // The coordinator ends first (it may still relay the host's last frames); then
        // the acceptor is told to stop.
        if let Some(coordinator) = self.threads.pop() {
            let _ = coordinator.join();
        }
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            // A panicked server thread has nothing left to clean up.
            let _ = t.join();
        }
    }
}

/// Starts the reader thread of an authenticated rank's connection.
fn start_reader(conn: u64, claim: Claim, stream: TcpStream, tx: &Sender<Event>) {
    let tx = tx.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("symmem-rdv-conn{conn}"))
        .spawn(move || serve_member(conn, stream, claim, tx));
    if let Err(e) = spawned {
        tracing::error!(
            "cannot spawn a rendezvous reader for rank {}: {e}",
            claim.rank
        );
    }
}

/// Forwards an authenticated rank's frames to the coordinator until the connection ends.
fn serve_member(conn: u64, mut stream: TcpStream, claim: Claim, tx: Sender<Event>) {
    let rank = claim.rank as usize;
    let configured = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(None))
        .and_then(|()| stream.set_write_timeout(None));
    if let Err(e) = configured {
        tracing::warn!(
            rank,
            "cannot configure rank {rank}'s rendezvous connection: {e}"
        );
        return;
    }
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    if tx
        .send(Event::Joined {
            conn,
            session: claim.session,
            rank,
            stream: writer,
        })
        .is_err()
    {
        return;
    }
    let who = format!("rank {rank}");
    loop {
        let event = match wire::recv(&mut stream, &who) {
            Ok(Recv::Msg(msg)) => Event::Frame { conn, msg },
            Ok(Recv::Closed) => Event::Closed {
                conn,
                reason: "its connection to the bootstrap closed without a goodbye (process exited or was killed)".into(),
            },
            Err(e) => Event::Closed {
                conn,
                reason: e.to_string(),
            },
        };
        let last = matches!(event, Event::Closed { .. });
        if tx.send(event).is_err() || last {
            return;
        }
    }
}

struct Member {
    stream: TcpStream,
    conn: u64,
    said_goodbye: bool,
    closed: bool,
}

struct Pending {
    seq: u64,
    op: CollOp,
    root: u32,
    started: Instant,
    parts: Vec<Option<Vec<Vec<u8>>>>,
}

struct Group {
    members: Vec<Option<Member>>,
    created: Instant,
    ready: bool,
    next_seq: u64,
    pending: Option<Pending>,
    /// Why the group failed, once it has; kept for members that join after that.
    failure: Option<BootstrapError>,
}

impl Group {
    fn new(size: usize) -> Self {
        Group {
            members: (0..size).map(|_| None).collect(),
            created: Instant::now(),
            ready: false,
            next_seq: 0,
            pending: None,
            failure: None,
        }
    }

    fn failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Sends `msg` to `rank`. Writes are bounded (see `net::watch_member`): a rank that
    /// stops reading is cut off once it has accepted nothing for that long, and unless it
    /// had said goodbye the group fails naming it, so that one stuck rank cannot hold up
    /// the others. Other write errors mean the connection is gone, which its reader reports.
    fn send(&mut self, rank: usize, msg: &Msg) {
        let Some(m) = self.members[rank].as_mut().filter(|m| !m.closed) else {
            return;
        };
        let bound = match crate::net::send_within(&m.stream, &wire::encode(msg)) {
            Ok(()) => return,
            Err(crate::net::SendError::Io(e)) => {
                tracing::debug!(rank, "rendezvous send failed: {e}");
                return;
            }
            Err(crate::net::SendError::Stalled(bound)) => bound,
        };
        // A frame cut short leaves the connection unusable; closing it also ends its reader.
        m.closed = true;
        let _ = m.stream.shutdown(Shutdown::Both);
        if m.said_goodbye {
            return;
        }
        let reason = format!(
            "it accepted nothing the rendezvous sent it for {bound:?} ({} or SYMMEM_BOOTSTRAP_TIMEOUT, the shorter): the rendezvous cut it off so that it cannot stall the others",
            crate::net::DEAD_PEER_TIMEOUT_VAR
        );
        tracing::warn!(rank, "rendezvous: rank {rank} failed: {reason}");
        self.fail(BootstrapError::PeerFailed { rank, reason }, Some(rank));
    }

    /// Fails the group: every live member except `except` gets `err`.
    fn fail(&mut self, err: BootstrapError, except: Option<usize>) {
        if self.failed() {
            return;
        }
        self.pending = None;
        tracing::debug!("rendezvous group failed: {err}");
        self.failure = Some(err.clone());
        let msg = Msg::Error(err);
        for rank in 0..self.members.len() {
            if Some(rank) != except {
                self.send(rank, &msg);
            }
        }
    }

    /// Until when a stopping server must stay up for this group: it failed before every
    /// rank joined, so ranks may still arrive, and they should learn why the job failed
    /// rather than find no rendezvous. Bounded by the join deadline, which the hosting
    /// rank would have waited for anyway had nobody failed.
    fn late_joiner_deadline(&self, timeout: Duration) -> Option<Instant> {
        (self.failed() && !self.ready && !self.missing_members().is_empty())
            .then(|| self.created + timeout)
    }

    fn missing_members(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&r| self.members[r].is_none())
            .collect()
    }

    fn finished(&self) -> bool {
        self.members
            .iter()
            .all(|m| m.as_ref().is_some_and(|m| m.said_goodbye || m.closed))
            && (self.failed() || self.members.iter().flatten().all(|m| m.said_goodbye))
    }

    fn contribute(&mut self, rank: usize, seq: u64, op: CollOp, root: u32, parts: Vec<Vec<u8>>) {
        if self.failed() {
            return;
        }
        let size = self.members.len();
        let expected_parts = match op {
            CollOp::Allgather | CollOp::Broadcast => 1,
            CollOp::Alltoall => size,
            CollOp::Barrier => 0,
        };
        if parts.len() != expected_parts || (op == CollOp::Broadcast && root as usize >= size) {
            let detail = format!(
                "rank {rank} sent {} with {} parts and root {root} (group of {size})",
                op.name(),
                parts.len()
            );
            return self.fail(BootstrapError::Mismatch { seq, detail }, None);
        }
        let pending = self.pending.get_or_insert_with(|| Pending {
            seq: self.next_seq,
            op,
            root,
            started: Instant::now(),
            parts: vec![None; size],
        });
        if seq != pending.seq || op != pending.op || root != pending.root {
            let arrived: Vec<usize> = (0..size).filter(|&r| pending.parts[r].is_some()).collect();
            let detail = format!(
                "{} {} called {} #{} (root {}), but rank {rank} called {} #{seq} (root {root})",
                if arrived.len() == 1 { "rank" } else { "ranks" },
                fmt_ranks(&arrived),
                pending.op.name(),
                pending.seq,
                pending.root,
                op.name(),
            );
            let seq = pending.seq;
            return self.fail(BootstrapError::Mismatch { seq, detail }, None);
        }
        pending.parts[rank] = Some(parts);
        if pending.parts.iter().any(Option::is_none) {
            return;
        }
        let pending = self.pending.take().expect("pending collective");
        self.next_seq += 1;
        let all: Vec<Vec<Vec<u8>>> = pending.parts.into_iter().map(Option::unwrap).collect();
        for dest in 0..size {
            let parts = match pending.op {
                CollOp::Allgather => all.iter().map(|p| p[0].clone()).collect(),
                CollOp::Alltoall => all.iter().map(|p| p[dest].clone()).collect(),
                CollOp::Broadcast => vec![all[pending.root as usize][0].clone()],
                CollOp::Barrier => Vec::new(),
            };
            self.send(
                dest,
                &Msg::Result {
                    seq: pending.seq,
                    parts,
                },
            );
        }
    }

    /// The next instant at which this group times out, if it is waiting for anyone.
    fn deadline(&self, timeout: Duration) -> Option<Instant> {
        if self.failed() {
            None
        } else if !self.ready {
            Some(self.created + timeout)
        } else {
            self.pending.as_ref().map(|p| p.started + timeout)
        }
    }

    fn check_deadline(&mut self, now: Instant, timeout: Duration) {
        if self.deadline(timeout).is_none_or(|d| now < d) {
            return;
        }
        let (op, missing) = match &self.pending {
            Some(p) if self.ready => (
                format!("{} #{}", p.op.name(), p.seq),
                (0..p.parts.len())
                    .filter(|&r| p.parts[r].is_none())
                    .collect(),
            ),
            _ => ("connect".to_string(), self.missing_members()),
        };
        self.fail(
            BootstrapError::Timeout {
                op,
                missing,
                after: timeout,
            },
            None,
        );
    }
}

struct Coordinator {
    size: usize,
    timeout: Duration,
    groups: HashMap<u64, Group>,
    /// Connection id → (session, rank).
    conns: HashMap<u64, (u64, usize)>,
    /// Ranks the launcher reported dead: late joiners learn of it too.
    dead: Vec<(usize, String)>,
}

impl Coordinator {
    fn new(size: usize, timeout: Duration) -> Self {
        Coordinator {
            size,
            timeout,
            groups: HashMap::new(),
            conns: HashMap::new(),
            dead: Vec::new(),
        }
    }

    fn run(mut self, rx: Receiver<Event>) {
        // Set once a shutdown waits for the hosting rank: (rank, give up at).
        let mut closing: Option<(usize, Instant)> = None;
        loop {
            let now = Instant::now();
            // A stopping server stays up while a failed group still has ranks to tell.
            let linger = self
                .groups
                .values()
                .filter_map(|g| g.late_joiner_deadline(self.timeout))
                .filter(|&d| now < d)
                .max()
                .filter(|_| closing.is_some());
            if let Some((rank, until)) = closing {
                let connected = self.conns.values().any(|&(_, r)| r == rank);
                if (!connected || now >= until) && linger.is_none() {
                    break;
                }
            }
            let next = self
                .groups
                .values()
                .filter_map(|g| g.deadline(self.timeout))
                .chain(closing.map(|(_, until)| until).filter(|&u| now < u))
                .chain(linger)
                .min();
            let event = match next {
                Some(d) => match rx.recv_timeout(d.saturating_duration_since(now)) {
                    Ok(e) => Some(e),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                },
                None => match rx.recv() {
                    Ok(e) => Some(e),
                    Err(_) => return,
                },
            };
            match event {
                Some(Event::Shutdown { after_rank: None }) => break,
                Some(Event::Shutdown {
                    after_rank: Some(rank),
                }) => {
                    closing = Some((rank, Instant::now() + CLOSE_GRACE));
                    for g in self.groups.values() {
                        if let Some(d) = g.late_joiner_deadline(self.timeout) {
                            tracing::warn!(
                                "the job failed before rank(s) {} joined: the rendezvous stays up to tell them, for at most {:?}",
                                fmt_ranks(&g.missing_members()),
                                d.saturating_duration_since(Instant::now())
                            );
                        }
                    }
                }
                Some(e) => self.handle(e),
                None => {}
            }
            let now = Instant::now();
            for g in self.groups.values_mut() {
                g.check_deadline(now, self.timeout);
            }
            self.groups.retain(|_, g| !g.finished());
        }
        for g in self.groups.values() {
            for m in g.members.iter().flatten() {
                let _ = m.stream.shutdown(Shutdown::Both);
            }
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Joined {
                conn,
                session,
                rank,
                stream,
            } => self.joined(conn, session, rank, stream),
            Event::Frame { conn, msg } => self.frame(conn, msg),
            Event::Closed { conn, reason } => self.closed(conn, reason),
            Event::LauncherFailure { rank, reason } => {
                for group in self.groups.values_mut() {
                    let err = BootstrapError::PeerFailed {
                        rank,
                        reason: reason.clone(),
                    };
                    group.fail(err, Some(rank));
                }
                self.dead.push((rank, reason));
            }
            Event::Shutdown { .. } => {}
        }
    }

    /// Rank `rank` joined group `session` on connection `conn`: it is told at once if
    /// the group or the job already failed; the last rank to join makes the group ready.
    fn joined(&mut self, conn: u64, session: u64, rank: usize, mut stream: TcpStream) {
        crate::net::watch_member(&stream, rank, self.timeout);
        let size = self.size;
        let group = self
            .groups
            .entry(session)
            .or_insert_with(|| Group::new(size));
        if group.members[rank].is_some() {
            let err = BootstrapError::Protocol {
                peer: "rendezvous server".into(),
                detail: format!("rank {rank} joined twice (session {session})"),
            };
            let _ = wire::send(&mut stream, &Msg::Error(err));
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        group.members[rank] = Some(Member {
            stream,
            conn,
            said_goodbye: false,
            closed: false,
        });
        self.conns.insert(conn, (session, rank));
        if let Some((dead, reason)) = self.dead.iter().find(|(r, _)| *r != rank) {
            let err = BootstrapError::PeerFailed {
                rank: *dead,
                reason: reason.clone(),
            };
            group.send(rank, &Msg::Error(err));
            return;
        }
        if let Some(err) = group.failure.clone() {
            // A rank that joins after the group failed (e.g. a rank died while the
            // others were still starting) learns why instead of waiting for ready.
            group.send(rank, &Msg::Error(err));
            return;
        }
        if group.missing_members().is_empty() && !group.ready && !group.failed() {
            group.ready = true;
            for r in 0..size {
                group.send(r, &Msg::Ready);
            }
        }
    }

    /// A frame from connection `conn`'s rank, for its group.
    fn frame(&mut self, conn: u64, msg: Msg) {
        let Some(&(session, rank)) = self.conns.get(&conn) else {
            return;
        };
        let Some(group) = self.groups.get_mut(&session) else {
            return;
        };
        match msg {
            Msg::Coll {
                seq,
                op,
                root,
                parts,
            } => group.contribute(rank, seq, op, root, parts),
            Msg::Goodbye => {
                if let Some(m) = group.members[rank].as_mut() {
                    m.said_goodbye = true;
                }
            }
            Msg::Abort { reason } => group.fail(
                BootstrapError::PeerFailed {
                    rank,
                    reason: format!("aborted: {reason}"),
                },
                Some(rank),
            ),
            other => group.fail(
                BootstrapError::Protocol {
                    peer: format!("rank {rank}"),
                    detail: format!("unexpected message {other:?}"),
                },
                None,
            ),
        }
    }

    /// Connection `conn` ended: unless its rank said goodbye, its group fails naming it.
    fn closed(&mut self, conn: u64, reason: String) {
        let Some((session, rank)) = self.conns.remove(&conn) else {
            return;
        };
        let Some(group) = self.groups.get_mut(&session) else {
            return;
        };
        let Some(m) = group.members[rank].as_mut().filter(|m| m.conn == conn) else {
            return;
        };
        m.closed = true;
        if !m.said_goodbye {
            group.fail(BootstrapError::PeerFailed { rank, reason }, Some(rank));
        }
    }
}
