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

use symmem_bootstrap::auth::{self, JobKey, Progress, Protocol, ServerHandshake};
use symmem_bootstrap::Bootstrap;

use super::record::{PeState, WaitBoard};
use crate::error::{Error, Result};

/// How long a peer has to answer a request for its record: longer, and it is reported as
/// "not answering: dead or stopped".
pub(crate) const ANSWER_BOUND: Duration = Duration::from_secs(2);

/// How often the listener thread looks at its stop flag while no request comes.
const POLL: Duration = Duration::from_millis(50);

/// This PE's listener thread and every PE's listener address.
pub(crate) struct Reporter {
    key: JobKey,
    me: usize,
    addrs: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

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
    /// thread that answers with `board`'s state. Collective.
    pub fn start(
        b: &dyn Bootstrap,
        ifname: Option<&str>,
        board: Arc<WaitBoard>,
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
        let thread = {
            let (stop, key) = (stop.clone(), key.clone());
            std::thread::Builder::new()
                .name(format!("symmem-hang-{me}"))
                .spawn(move || serve(&listener, &key, &board, &stop))
                .map_err(|e| Error::io("hang report: starting its thread", e))?
        };
        Ok(Reporter {
            key,
            me,
            addrs,
            stop,
            thread: Some(thread),
        })
    }

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

/// The listener thread: answers each authenticated connection with the board's state,
/// one at a time (a request is a few hundred bytes), until `stop`.
fn serve(listener: &TcpListener, key: &JobKey, board: &WaitBoard, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, peer)) => {
                if let Err(why) = answer(s, key, board) {
                    tracing::debug!(target: "hang", "a hang report request from {peer} failed: {why}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => {
                tracing::debug!(target: "hang", "accepting a hang report request: {e}");
                std::thread::sleep(POLL);
            }
        }
    }
}

/// Authenticates one connection and sends the board's state.
fn answer(mut s: TcpStream, key: &JobKey, board: &WaitBoard) -> std::result::Result<(), String> {
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(POLL)).map_err(|e| e.to_string())?;
    let mut hs = ServerHandshake::new(Protocol::HangReport, Instant::now() + ANSWER_BOUND);
    loop {
        match hs.progress(&mut s, key) {
            Progress::Authenticated(_) => break,
            Progress::Failed(why) => return Err(why),
            Progress::Waiting if Instant::now() >= hs.deadline() => {
                return Err("the handshake did not finish in time".into())
            }
            Progress::Waiting => {}
        }
    }
    s.write_all(board.state().encode().as_bytes())
        .map_err(|e| e.to_string())
}
