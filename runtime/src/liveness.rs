//! Watching same-node peer processes, so that a wait on a dead peer ends with an error
//! naming it instead of spinning forever, and working out which peer a failed init
//! should be blamed on. The wait loop every host wait uses is in `health.rs`.
//!
//! Each same-node peer is watched through a pidfd (Linux ≥ 5.3), which becomes readable
//! when the process exits, zombie or not. Peers on other nodes are watched by the
//! bootstrap (its connection drops when they die).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use symmem_bootstrap::{Bootstrap, BootstrapError};

use crate::error::{Error, TransportError};
use crate::topology::Topology;

/// Watches a set of peer processes.
#[derive(Debug, Default)]
pub struct PeerWatch {
    /// (PE, pid, pidfd); no pidfd for a process that was already gone when the watch began.
    peers: Vec<(usize, u32, Option<OwnedFd>)>,
}

impl PeerWatch {
    /// Starts watching `(pe, pid)` pairs. A peer whose process is already gone is reported
    /// dead at once; one whose pidfd cannot be opened for another reason (a kernel without
    /// pidfd) is not watched.
    pub fn new(peers: impl IntoIterator<Item = (usize, u32)>) -> Self {
        let mut watched = Vec::new();
        for (pe, pid) in peers {
            // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
            if fd < 0 {
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() == Some(libc::ESRCH) {
                    // Exited (and reaped) before we looked: as dead as a readable pidfd.
                    watched.push((pe, pid, None));
                } else {
                    tracing::debug!(pe, pid, "cannot watch peer through a pidfd: {err}");
                }
                continue;
            }
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            watched.push((pe, pid, Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })));
        }
        PeerWatch { peers: watched }
    }

    /// Watched peers whose processes have exited, as (PE, pid).
    pub fn dead(&self) -> Vec<(usize, u32)> {
        if self.peers.is_empty() {
            return Vec::new();
        }
        let mut fds: Vec<libc::pollfd> = self
            .peers
            .iter()
            .map(|(_, _, fd)| libc::pollfd {
                // poll ignores negative fds (their revents stay 0).
                fd: fd.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs; timeout 0 never blocks.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        fds.iter()
            .zip(&self.peers)
            .filter(|(p, (_, _, fd))| fd.is_none() || (n > 0 && p.revents != 0))
            .map(|(_, (pe, pid, _))| (*pe, *pid))
            .collect()
    }
}

/// The steps of init, to say where a failure happened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum InitStep {
    /// Joining the bootstrap and agreeing on the job id.
    #[default]
    Rendezvous,
    /// Allgathering every PE's node, pid and heap size.
    Topology,
    /// Passing heap fds between same-node PEs and mapping them.
    HeapExchange,
    /// Connecting the remote transport to PEs whose heaps are not mapped here.
    Transport,
    /// The barrier after which peers may use each other's heaps.
    Barrier,
}

impl InitStep {
    /// The operation named in errors.
    fn op(self) -> &'static str {
        match self {
            InitStep::Rendezvous => "init (rendezvous)",
            InitStep::Topology => "init (topology allgather)",
            InitStep::HeapExchange => "init (heap fd exchange)",
            InitStep::Transport => "init (remote transport)",
            InitStep::Barrier => "init (final barrier)",
        }
    }

    /// The testing-only exit point at the start of this step (`SYMMEM_TEST_EXIT_AT`).
    fn exit_point(self) -> &'static str {
        match self {
            InitStep::Rendezvous => "rendezvous",
            InitStep::Topology => "topology",
            InitStep::HeapExchange => "heap_connect",
            InitStep::Transport => "transport",
            InitStep::Barrier => "init_barrier",
        }
    }
}

/// How far init got: the current step and, once the topology is known, the same-node
/// peers whose processes can be watched.
#[derive(Debug, Default)]
pub(crate) struct InitProgress {
    step: InitStep,
    peers: Vec<(usize, u32)>,
}

impl InitProgress {
    /// Init enters `step`.
    pub(crate) fn enter(&mut self, step: InitStep) {
        self.step = step;
        tracing::trace!(step = step.op(), "init step");
        symmem_bootstrap::fault::exit_point(step.exit_point());
    }

    /// The topology is known: same-node peers can be watched from now on.
    pub(crate) fn learn(&mut self, topo: &Topology) {
        self.peers = topo
            .local_pes()
            .iter()
            .filter(|&&pe| pe != topo.my_pe())
            .map(|&pe| (pe, topo.pid(pe)))
            .collect();
    }
}

/// How long a failed init waits for the bootstrap to report a failed peer. It normally
/// reports within milliseconds (a dead process's connection closes at once); the bound
/// only matters when no peer failed, or for a bootstrap that reports nothing (MPI).
const ROOT_CAUSE_WAIT: Duration = Duration::from_secs(2);

/// Turns init's error `err` into the error to return, naming the root cause.
///
/// A PE's init often fails *because* a peer died: a heap socket is reset, a connection
/// is refused, a collective breaks. Such an error may name a bystander (a peer that
/// failed for the same reason and exited first), or no PE at all. So before returning,
/// this waits (bounded, with backoff) for the bootstrap to report a failed PE, then looks
/// for same-node peers whose processes are gone, and names that PE, keeping `err` as
/// detail. The bootstrap's report comes first because it names the PE whose connection
/// dropped, which is the one that died, not one that exited in reaction.
///
/// Only when no peer is to blame is this PE the root cause: then it aborts the bootstrap,
/// so the others fail at once, naming this PE. A PE that failed because of a peer does
/// not abort: its abort could reach the others before the dead peer's report and make
/// them blame this PE.
pub(crate) fn fail_init(bootstrap: &dyn Bootstrap, progress: &InitProgress, err: Error) -> Error {
    let me = bootstrap.rank();
    let op = progress.step.op();
    let Some((pe, how)) = root_cause(bootstrap, &progress.peers, &err) else {
        bootstrap.abort(&format!("init failed: {err}"));
        return err;
    };
    let already_said =
        matches!(&err, Error::Bootstrap(BootstrapError::PeerFailed { rank, .. }) if *rank == pe);
    let reason = if already_said {
        how
    } else {
        format!("{how}; this PE then failed with: {err}")
    };
    tracing::debug!(pe, me, op, "init failed because a peer failed");
    Error::PeerFailed { pe, me, op, reason }
}

/// The peer to blame for `err`, with what is known of its failure; see [`fail_init`].
fn root_cause(
    bootstrap: &dyn Bootstrap,
    peers: &[(usize, u32)],
    err: &Error,
) -> Option<(usize, String)> {
    match err {
        Error::Bootstrap(BootstrapError::PeerFailed { rank, reason }) => {
            return Some((*rank, reason.clone()))
        }
        // What a dead peer can cause: a broken collective or socket.
        Error::Bootstrap(_) | Error::Io { .. } | Error::Transport(TransportError::Io { .. })
            if bootstrap.size() > 1 => {}
        // A verdict every PE reaches alike (e.g. different heap sizes), or a lone PE:
        // no peer to wait for.
        _ => return None,
    }
    let watch = PeerWatch::new(peers.iter().copied());
    let deadline = Instant::now() + ROOT_CAUSE_WAIT;
    let mut nap = Duration::from_millis(1);
    loop {
        match bootstrap.failure() {
            Some(BootstrapError::PeerFailed { rank, reason }) => return Some((rank, reason)),
            // Failed otherwise (a timeout, a lost launcher): it will report nothing more.
            Some(_) => break,
            None if Instant::now() >= deadline => break,
            None => {}
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(50));
    }
    let dead = watch.dead();
    let ((pe, pid), others) = dead.split_first()?;
    let mut how = format!("its process {pid} exited");
    if !others.is_empty() {
        let list: Vec<String> = others
            .iter()
            .map(|(pe, pid)| format!("PE {pe} (process {pid})"))
            .collect();
        how.push_str(&format!(", and so did {}", list.join(", ")));
    }
    Some((*pe, how))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A bootstrap of 3 ranks (this is rank 0) that reports `failure` once `after` passed
    /// and records aborts.
    struct Fake {
        failure: Option<(Duration, BootstrapError)>,
        start: Instant,
        aborted: Mutex<Vec<String>>,
    }

    impl Fake {
        fn new(failure: Option<(Duration, BootstrapError)>) -> Self {
            Fake {
                failure,
                start: Instant::now(),
                aborted: Mutex::new(Vec::new()),
            }
        }
    }

    impl Bootstrap for Fake {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            3
        }
        fn kind(&self) -> symmem_bootstrap::BootstrapKind {
            symmem_bootstrap::BootstrapKind::Tcp
        }
        fn timeout(&self) -> Duration {
            Duration::from_secs(10)
        }
        fn allgather(&self, _: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
            unimplemented!()
        }
        fn alltoall(&self, _: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, BootstrapError> {
            unimplemented!()
        }
        fn barrier(&self) -> Result<(), BootstrapError> {
            unimplemented!()
        }
        fn broadcast(&self, _: usize, _: &[u8]) -> Result<Vec<u8>, BootstrapError> {
            unimplemented!()
        }
        fn abort(&self, reason: &str) {
            self.aborted.lock().unwrap().push(reason.to_string());
        }
        fn failure(&self) -> Option<BootstrapError> {
            self.failure
                .as_ref()
                .filter(|(after, _)| self.start.elapsed() >= *after)
                .map(|(_, e)| e.clone())
        }
    }

    fn reset() -> Error {
        Error::io(
            "receiving PE 1's heap fd",
            std::io::Error::from_raw_os_error(libc::ECONNRESET),
        )
    }

    fn peer_failed(rank: usize) -> BootstrapError {
        BootstrapError::PeerFailed {
            rank,
            reason: "its connection closed".into(),
        }
    }

    fn at(step: InitStep, peers: Vec<(usize, u32)>) -> InitProgress {
        InitProgress { step, peers }
    }

    #[test]
    fn a_late_bootstrap_report_names_the_dead_pe_not_the_local_error() {
        let b = Fake::new(Some((Duration::from_millis(50), peer_failed(2))));
        let e = fail_init(&b, &at(InitStep::HeapExchange, vec![]), reset()).to_string();
        assert!(
            e.starts_with("PE 2 failed while PE 0 was in init (heap fd exchange)")
                && e.contains("receiving PE 1's heap fd"),
            "{e}"
        );
        assert!(b.aborted.lock().unwrap().is_empty(), "a bystander aborted");
    }

    #[test]
    fn a_bootstrap_error_naming_a_pe_is_the_root_cause_at_once() {
        let b = Fake::new(None);
        let start = Instant::now();
        let e = fail_init(&b, &at(InitStep::Topology, vec![]), peer_failed(1).into());
        assert_eq!(
            e.to_string(),
            "PE 1 failed while PE 0 was in init (topology allgather): its connection closed"
        );
        assert!(start.elapsed() < ROOT_CAUSE_WAIT);
    }

    #[test]
    fn a_same_node_peer_that_is_gone_is_named_without_a_bootstrap_report() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap(); // reaped: pidfd_open fails with ESRCH
        let b = Fake::new(None);
        let e = fail_init(&b, &at(InitStep::HeapExchange, vec![(2, pid)]), reset());
        let e = e.to_string();
        assert!(
            e.starts_with(&format!(
                "PE 2 failed while PE 0 was in init (heap fd exchange): its process {pid} exited"
            )),
            "{e}"
        );
    }

    #[test]
    fn a_verdict_every_pe_reaches_aborts_at_once() {
        let b = Fake::new(None);
        let start = Instant::now();
        let err = Error::Inconsistent {
            what: "SYMMEM_SYMMETRIC_SIZE",
            detail: "PE 0: 1, PE 1: 2".into(),
        };
        let e = fail_init(&b, &at(InitStep::Topology, vec![]), err);
        assert!(matches!(e, Error::Inconsistent { .. }), "{e}");
        assert!(start.elapsed() < ROOT_CAUSE_WAIT);
        assert_eq!(b.aborted.lock().unwrap().len(), 1);
    }

    #[test]
    fn with_no_culprit_this_pe_aborts_after_the_wait() {
        let b = Fake::new(None);
        let start = Instant::now();
        let e = fail_init(&b, &at(InitStep::HeapExchange, vec![]), reset());
        assert!(matches!(e, Error::Io { .. }), "{e}");
        assert!(start.elapsed() >= ROOT_CAUSE_WAIT);
        let aborted = b.aborted.lock().unwrap();
        assert!(aborted.len() == 1 && aborted[0].contains("receiving PE 1's heap fd"));
    }
}
