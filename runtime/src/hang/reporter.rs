//! The side path of the hang report: a thread per PE with its own TCP listener that
//! answers a peer's request with this PE's wait record, so that records can be gathered
//! while the data path (heap, transport) is stuck. Connections prove the job's key in the
//! bootstrap's handshake ([`symmem_bootstrap::auth`], protocol `HangReport`, with a subkey
//! of the job key), like the socket transport's.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use symmem_bootstrap::auth::lobby::{Limits, Lobby};
use symmem_bootstrap::auth::{self, JobKey, Protocol};
use symmem_bootstrap::{report_signal, Bootstrap};

use super::record::{PeState, WaitBoard};
use crate::error::{Error, Result};

/// How long a peer has to answer a request for its record: longer, and it is reported as
/// "not answering: dead or stopped".
pub(crate) const ANSWER_BOUND: Duration = Duration::from_secs(2);

/// How often the listener thread looks at its stop flag while no request comes.
const POLL: Duration = Duration::from_millis(50);

/// At least this many connections may wait to authenticate at once (or the number of PEs,
/// if larger); beyond, the oldest is let go.
const MAX_WAITING: usize = 64;

/// This PE's listener thread and the side path to every PE.
pub(crate) struct Reporter {
    peers: Arc<Peers>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The side path to every PE: the key and each PE's listener address.
pub(crate) struct Peers {
    key: JobKey,
    me: usize,
    addrs: Vec<SocketAddr>,
}

/// Why the listener thread starts a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// Asked of this process ([`symmem_bootstrap::report_signal`]).
    Asked,
    /// [`Watch::due`] said so: a wait that does not report itself (a transport's, a loop
    /// of tests, a kernel's) has lasted long enough.
    Due,
}

/// What a PE does when a report is to be made ([`Request`]): run on a thread of its own,
/// with the side path to gather over, while the listener goes on answering (another PE
/// may be gathering at the same time).
pub(crate) type OnRequest = Arc<dyn Fn(&Peers, Request) + Send + Sync>;

/// Asked by the listener thread every [`WATCH_EVERY`]: whether a report is due.
pub(crate) type Watch = Box<dyn FnMut() -> bool + Send>;

/// How often the listener thread asks its [`Watch`].
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// The hang report's key: the job key's subkey, or, under a bootstrap that holds none
/// (MPI, one PE), one drawn by PE 0 and carried by the bootstrap, like the socket
/// transport's.
fn report_key(b: &dyn Bootstrap) -> Result<JobKey> {
    if let Some(job) = b.job_key() {
        return Ok(job.subkey("hang report"));
    }
    let drawn = b.broadcast(0, &JobKey::random_secret()?)?;
    Ok(JobKey::derive(&drawn, "hang report, drawn"))
}

impl Reporter {
    /// Binds this PE's listener on the advertised address of `ifname` (as the socket
    /// transport does), exchanges the addresses through the bootstrap and starts the
    /// thread that answers with `board`'s state and runs `on_request` each time a report
    /// is asked of this process (SIGUSR1) or `watch` says one is due. Collective.
    pub fn start(
        b: &dyn Bootstrap,
        ifname: Option<&str>,
        board: Arc<WaitBoard>,
        on_request: OnRequest,
        mut watch: Watch,
    ) -> Result<Reporter> {
        let me = b.rank();
        let key = report_key(b)?;
        let ip = symmem_bootstrap::advertised_ip(ifname)?;
        let listener = TcpListener::bind((ip, 0))
            .map_err(|e| Error::io("hang report: binding the listener", e))?;
        let mine = listener
            .local_addr()
            .map_err(|e| Error::io("hang report: listener address", e))?;
        let addrs = b
            .allgather(mine.to_string().as_bytes())?
            .iter()
            .enumerate()
            .map(|(pe, a)| {
                let text = String::from_utf8_lossy(a);
                text.parse().map_err(|_| Error::InvalidArgument {
                    op: "init",
                    reason: format!("PE {pe}'s hang report address {text:?} does not parse"),
                })
            })
            .collect::<Result<Vec<SocketAddr>>>()?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("hang report: listener", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let peers = Arc::new(Peers { key, me, addrs });
        let thread = {
            let (stop, peers) = (stop.clone(), peers.clone());
            std::thread::Builder::new()
                .name(format!("symmem-hang-{me}"))
                .spawn(move || serve(&listener, &peers, &board, &stop, &on_request, &mut watch))
                .map_err(|e| Error::io("hang report: starting its thread", e))?
        };
        Ok(Reporter {
            peers,
            stop,
            thread: Some(thread),
        })
    }

    /// The side path to every PE.
    pub fn peers(&self) -> &Peers {
        &self.peers
    }
}

impl Peers {
    /// Every PE's state: this PE's from `board`, the others' asked for side by side, each
    /// within [`ANSWER_BOUND`].
    pub fn gather(&self, board: &WaitBoard) -> Vec<PeState> {
        std::thread::scope(|s| {
            let asks: Vec<_> = (0..self.addrs.len())
                .map(|pe| (pe != self.me).then(|| s.spawn(move || self.ask(self.addrs[pe]))))
                .collect();
            asks.into_iter()
                .map(|ask| match ask {
                    None => board.state(),
                    Some(h) => match h.join() {
                        Ok(Ok(state)) => state,
                        Ok(Err(why)) => PeState::NotAnswering { why },
                        Err(_) => PeState::NotAnswering {
                            why: "asking it panicked".into(),
                        },
                    },
                })
                .collect()
        })
    }

    /// One peer's record, or why it did not come within [`ANSWER_BOUND`].
    fn ask(&self, addr: SocketAddr) -> std::result::Result<PeState, String> {
        let deadline = Instant::now() + ANSWER_BOUND;
        let mut s = TcpStream::connect_timeout(&addr, ANSWER_BOUND)
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        auth::client_handshake(
            &mut s,
            &self.key,
            Protocol::HangReport,
            &(self.me as u64).to_le_bytes(),
            deadline,
        )
        .map_err(|e| format!("authenticating with {addr}: {e}"))?;
        let left = deadline.saturating_duration_since(Instant::now());
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        s.read_to_string(&mut text)
            .map_err(|e| format!("reading its record from {addr}: {e}"))?;
        PeState::decode(&text)
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The listener thread: authenticates connections side by side in a [`Lobby`] (a stranger
/// that stalls its handshake holds up nobody), answers each that proves the key with the
/// board's state, and starts `on_request` on a thread of its own when the process's report
/// requests ([`report_signal::generation`]) move or `watch` says a report is due (one at a
/// time: requests that come while one runs make one more report after it), until `stop`;
/// then waits for that thread.
fn serve(
    listener: &TcpListener,
    peers: &Arc<Peers>,
    board: &WaitBoard,
    stop: &AtomicBool,
    on_request: &OnRequest,
    watch: &mut Watch,
) {
    let n = peers.addrs.len();
    let limits = Limits {
        waiting: MAX_WAITING.max(n),
        per_address: MAX_WAITING.max(n),
        hello_timeout: ANSWER_BOUND,
    };
    let mut lobby = Lobby::new(
        "hang report",
        Protocol::HangReport,
        peers.key.clone(),
        limits,
    );
    let mut seen = report_signal::generation();
    let mut asked: Option<JoinHandle<()>> = None;
    let mut watched = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let requests = report_signal::generation();
        let idle = asked.as_ref().is_none_or(|t| t.is_finished());
        let request = if requests != seen && idle {
            seen = requests;
            Some(Request::Asked)
        } else if idle && watched.elapsed() >= WATCH_EVERY {
            watched = Instant::now();
            watch().then_some(Request::Due)
        } else {
            None
        };
        if let Some(request) = request {
            let (peers, on_request) = (peers.clone(), on_request.clone());
            let started = std::thread::Builder::new()
                .name(format!("symmem-hang-ask-{}", peers.me))
                .spawn(move || on_request(&peers, request));
            match started {
                Ok(t) => asked = Some(t),
                Err(e) => {
                    tracing::error!(target: "hang", "starting the asked-for hang report: {e}")
                }
            }
        }
        for peer in lobby.poll(listener, POLL) {
            if let Err(e) = answer(peer.stream, board) {
                tracing::debug!(target: "hang", "answering {} with this PE's record: {e}", peer.peer);
            }
        }
    }
    if let Some(t) = asked {
        let _ = t.join();
    }
}

/// Sends the board's state on an authenticated connection (a few hundred bytes: a fresh
/// connection's send buffer takes them at once), then closes it.
fn answer(mut s: TcpStream, board: &WaitBoard) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_write_timeout(Some(ANSWER_BOUND))?;
    s.write_all(board.state().encode().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use symmem_bootstrap::single::SingleBootstrap;

    #[test]
    fn the_listener_answers_the_key_and_refuses_others() {
        let b = SingleBootstrap::new(Duration::from_secs(5));
        let board = Arc::new(WaitBoard::new());
        let r = Reporter::start(
            &b,
            None,
            board.clone(),
            Arc::new(|_: &Peers, _| {}),
            Box::new(|| false),
        )
        .unwrap();
        board.publish(super::super::record::Wait {
            op: "quiet".into(),
            detail: "the transport".into(),
            peer: None,
            collective: None,
            since: Instant::now(),
        });
        match r.peers.ask(r.peers.addrs[0]).unwrap() {
            PeState::Waiting { op, detail, .. } => {
                assert_eq!((op.as_str(), detail.as_str()), ("quiet", "the transport"))
            }
            other => panic!("{other:?}"),
        }
        let mut s = TcpStream::connect(r.peers.addrs[0]).unwrap();
        let stranger = JobKey::derive(b"another job", "hang report");
        let refused = auth::client_handshake(
            &mut s,
            &stranger,
            Protocol::HangReport,
            &[0; 8],
            Instant::now() + ANSWER_BOUND,
        );
        assert!(refused.is_err(), "a stranger's key is refused");
        // The listener still answers after the stranger.
        assert!(matches!(
            r.peers.ask(r.peers.addrs[0]),
            Ok(PeState::Waiting { .. })
        ));
    }
}
