//! Passing heap file descriptors between same-node PEs over Unix sockets (SCM_RIGHTS):
//! the host control memfd, then the data heap's fds (a memfd, or CUDA VMM POSIX-fd
//! handles), with a backend-specific description.
//!
//! Each PE listens on an abstract-namespace socket named after the job id and its rank
//! (abstract names leave no file behind). After the allgather of node identities, every PE
//! connects to each same-node peer's socket, accepts the same number of connections on its
//! own, answers each with its memfd, and then reads the peers' memfds. Both ends check
//! who is at the other end (`peer_cred`): the connecting side that the listener belongs to
//! the expected peer's process, the serving side that the connection comes from one of
//! the expected peers, and both that the peer runs as this process's user.
//!
//! Connecting never blocks: a listen backlog that stays full (filled by another local
//! process, say) is retried until the init deadline and then reported, naming the peer
//! and its socket.
//!
//! No step waits on a dead peer: a peer that dies closes its end of every connection,
//! which ends a read at once, and waiting for peers to fetch this PE's heap also watches
//! their processes (pidfds). The error then says what failed here; init's error path
//! (`liveness::fail_init`) names the PE that died.

use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

use symmem_bootstrap::fault::exit_point;

use super::peer_cred::{self, PeerCred};
use crate::error::{Error, Result};
use crate::liveness::PeerWatch;

/// How often a wait for peers to fetch this PE's heap checks whether they are alive.
const LIVENESS_POLL: Duration = Duration::from_millis(20);

/// First wait before retrying a connect to a full backlog; it doubles up to
/// [`LIVENESS_POLL`].
const CONNECT_BACKOFF_MIN: Duration = Duration::from_millis(1);

/// What accompanies the fds: job id, sender rank, heap length, description length.
const HEADER_LEN: usize = 8 + 4 + 8 + 4;

/// Most bytes of backend description one message carries.
pub const MAX_DESCRIPTION: usize = 4096;

/// Most fds one message carries (the kernel's SCM_MAX_FD is 253).
pub const MAX_FDS: usize = 64;

fn socket_name(job: u64, rank: usize) -> String {
    format!("symmem-{job:016x}-{rank}")
}

/// The `sockaddr_un` of the abstract socket `name` (a leading NUL, then the name, with
/// no terminator), and its length.
fn abstract_addr(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_un is valid; the family and path are set below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    assert!(
        name.len() < addr.sun_path.len(),
        "socket name {name} is too long"
    );
    for (d, &s) in addr.sun_path[1..].iter_mut().zip(name.as_bytes()) {
        *d = s as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + 1 + name.len();
    (addr, len as libc::socklen_t)
}

/// Binds this PE's abstract socket.
pub fn listen(job: u64, rank: usize) -> Result<UnixListener> {
    let name = socket_name(job, rank);
    let addr = SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| Error::io(format!("naming socket @{name}"), e))?;
    UnixListener::bind_addr(&addr).map_err(|e| Error::io(format!("binding socket @{name}"), e))
}

/// Connects to `peer`'s abstract socket, which must have been bound by process
/// `expected_pid` of this user. A full listen backlog is retried until `deadline`.
pub fn connect(job: u64, peer: usize, expected_pid: u32, deadline: Instant) -> Result<UnixStream> {
    let name = socket_name(job, peer);
    let what = || format!("connecting to PE {peer}'s heap socket @{name}");
    let (addr, addr_len) = abstract_addr(&name);
    let mut backoff = CONNECT_BACKOFF_MIN;
    let socket = loop {
        // SAFETY: socket takes no pointers; the result is checked below.
        let fd = unsafe {
            libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if fd < 0 {
            return Err(Error::last_os(what()));
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: `addr` is a valid sockaddr_un of `addr_len` bytes.
        let rc = unsafe {
            libc::connect(
                socket.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                addr_len,
            )
        };
        if rc == 0 {
            break socket;
        }
        let err = std::io::Error::last_os_error();
        // A non-blocking connect to a Unix socket whose backlog is full fails with
        // EAGAIN instead of waiting; the failed socket is dropped and a fresh one tries
        // again.
        if !matches!(err.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
            return Err(Error::io(what(), err));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::io(
                what(),
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "its listen backlog stayed full until the deadline (SYMMEM_BOOTSTRAP_TIMEOUT); another process may be flooding it",
                ),
            ));
        }
        std::thread::sleep(backoff.min(left));
        backoff = (backoff * 2).min(LIVENESS_POLL);
    };
    let stream = UnixStream::from(socket);
    stream
        .set_nonblocking(false)
        .map_err(|e| Error::io(what(), e))?;
    let found = PeerCred::of(stream.as_fd())?;
    if let Some(why) = peer_cred::refusal(found, &[expected_pid], PeerCred::own_uid()) {
        return Err(Error::io(
            what(),
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, why),
        ));
    }
    Ok(stream)
}

/// Waits until `fd` is readable or `deadline` passes. Every [`LIVENESS_POLL`], `gone()`
/// may end the wait with an error: a description of a peer that will never come.
fn wait_readable(
    fd: BorrowedFd<'_>,
    deadline: Instant,
    what: &str,
    gone: impl Fn() -> Option<String>,
) -> Result<()> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.min(LIVENESS_POLL).as_millis() as i32;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n > 0 {
            return Ok(());
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n < 0 {
            return Err(Error::last_os(what.to_string()));
        }
        if let Some(why) = gone() {
            return Err(Error::io(
                what.to_string(),
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, why),
            ));
        }
        if !left.is_zero() {
            continue;
        }
        return Err(Error::io(
            what.to_string(),
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out (SYMMEM_BOOTSTRAP_TIMEOUT)",
            ),
        ));
    }
}

/// Accepts one connection from each expected peer, given as (PE, pid), and sends it
/// `description` and `fds`. Connections from other processes are logged and dropped; one
/// from an expected pid but another user fails at once, as does an expected peer's
/// process that exits before it connected.
#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
pub fn serve(
    listener: &UnixListener,
    job: u64,
    me: usize,
    heap_len: usize,
    description: &[u8],
    fds: &[BorrowedFd<'_>],
    peers: &[(usize, u32)],
    deadline: Instant,
) -> Result<()> {
    assert!(description.len() <= MAX_DESCRIPTION && fds.len() <= MAX_FDS && !fds.is_empty());
    exit_point("heap_serve");
    let watch = PeerWatch::new(peers.iter().copied());
    let expected_pids: Vec<u32> = peers.iter().map(|&(_, pid)| pid).collect();
    let own_uid = PeerCred::own_uid();
    let mut served = Vec::new();
    while served.len() < peers.len() {
        let gone = || {
            let dead = watch.dead();
            let (pe, pid) = dead.iter().find(|(_, pid)| !served.contains(pid))?;
            Some(format!(
                "PE {pe} (process {pid}) exited before it fetched this PE's heap"
            ))
        };
        wait_readable(
            listener_fd(listener),
            deadline,
            "waiting for same-node PEs to fetch this PE's heap",
            gone,
        )?;
        let (stream, _) = listener
            .accept()
            .map_err(|e| Error::io("accepting a heap-exchange connection", e))?;
        let found = PeerCred::of(stream.as_fd())?;
        let pid = found.pid;
        if served.contains(&pid) {
            tracing::warn!(
                pid,
                "ignoring a second connection from PE process {pid} to the heap socket"
            );
            continue;
        }
        if let Some(why) = peer_cred::refusal(found, &expected_pids, own_uid) {
            let Some(&(pe, _)) = peers.iter().find(|&&(_, p)| p == pid) else {
                tracing::warn!(
                    pid,
                    uid = found.uid,
                    "ignoring a connection to the heap socket: {why}"
                );
                continue;
            };
            return Err(Error::io(
                format!("serving this PE's heap to PE {pe} (process {pid})"),
                std::io::Error::new(std::io::ErrorKind::PermissionDenied, why),
            ));
        }
        let mut message = Vec::with_capacity(HEADER_LEN + description.len());
        message.extend_from_slice(&job.to_le_bytes());
        message.extend_from_slice(&(me as u32).to_le_bytes());
        message.extend_from_slice(&(heap_len as u64).to_le_bytes());
        message.extend_from_slice(&(description.len() as u32).to_le_bytes());
        message.extend_from_slice(description);
        send_fds(&stream, &message, fds, pid)?;
        served.push(pid);
        exit_point("heap_served_one");
    }
    Ok(())
}

fn listener_fd(listener: &UnixListener) -> BorrowedFd<'_> {
    listener.as_fd()
}

/// Receives `peer`'s description and fds on `stream`, checking job id, rank and length.
pub fn receive(
    stream: &UnixStream,
    job: u64,
    peer: usize,
    heap_len: usize,
    deadline: Instant,
) -> Result<(Vec<u8>, Vec<OwnedFd>)> {
    exit_point("heap_receive");
    // A dead peer's end of the connection is closed, which makes the stream readable.
    wait_readable(
        stream.as_fd(),
        deadline,
        &format!("waiting for PE {peer} to send its heap"),
        || None,
    )?;
    let (message, fds) = recv_fds(stream, peer)?;
    let header = &message[..HEADER_LEN];
    let got_job = u64::from_le_bytes(header[..8].try_into().unwrap());
    let got_rank = u32::from_le_bytes(header[8..12].try_into().unwrap()) as usize;
    let got_len = u64::from_le_bytes(header[12..20].try_into().unwrap()) as usize;
    let desc_len = u32::from_le_bytes(header[20..24].try_into().unwrap()) as usize;
    if message.len() != HEADER_LEN + desc_len {
        return Err(Error::io(
            format!("heap exchange with PE {peer}"),
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "got {} bytes; the header announced {}",
                    message.len(),
                    HEADER_LEN + desc_len
                ),
            ),
        ));
    }
    if got_job != job || got_rank != peer || got_len != heap_len {
        return Err(Error::io(
            format!("heap exchange with PE {peer}"),
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("got job {got_job:#x}, rank {got_rank}, {got_len} bytes; expected job {job:#x}, rank {peer}, {heap_len} bytes"),
            ),
        ));
    }
    Ok((message[HEADER_LEN..].to_vec(), fds))
}

/// Sends `payload` with `fds` in one SCM_RIGHTS message to process `pid` (for the error).
pub fn send_fds(
    stream: &UnixStream,
    payload: &[u8],
    fds: &[BorrowedFd<'_>],
    pid: u32,
) -> Result<()> {
    let raw: Vec<i32> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    let bytes = std::mem::size_of_val(raw.as_slice()) as u32;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
    let mut control = vec![0u8; space];
    let iov = [IoSlice::new(payload)];
    // SAFETY: an all-zero msghdr is valid; the fields are filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: `msg` points at `control`, which has room for one header plus `raw.len()`
    // ints, so CMSG_FIRSTHDR is non-null and CMSG_DATA is valid for writing them.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(bytes) as usize;
        std::ptr::copy_nonoverlapping(
            raw.as_ptr().cast::<u8>(),
            libc::CMSG_DATA(cmsg),
            bytes as usize,
        );
    }
    // SAFETY: `msg` and everything it points to outlive the call.
    let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n != payload.len() as isize {
        return Err(Error::last_os(format!(
            "sending this PE's heap fd to process {pid}, a same-node PE"
        )));
    }
    Ok(())
}

fn recv_fds(stream: &UnixStream, peer: usize) -> Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut payload = vec![0u8; HEADER_LEN + MAX_DESCRIPTION];
    let max_bytes = (MAX_FDS * std::mem::size_of::<i32>()) as u32;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(max_bytes) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the fields are filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: `msg` points at buffers that outlive the call. MSG_CMSG_CLOEXEC keeps the
    // received fds out of child processes.
    let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(Error::last_os(format!("receiving PE {peer}'s heap fds")));
    }
    let mut fds = Vec::new();
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR returns null or a valid header.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    // SAFETY: a non-null cmsg points into `control`; its length says how many ints it
    // holds, and only those are read.
    if !cmsg.is_null()
        && unsafe {
            (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS
        }
    {
        // SAFETY: as above.
        let data_len = unsafe { (*cmsg).cmsg_len } - unsafe { libc::CMSG_LEN(0) } as usize;
        for i in 0..data_len / std::mem::size_of::<i32>() {
            // SAFETY: an SCM_RIGHTS message with these ints: the kernel installed each fd
            // in this process and nothing else owns it. Owning them at once closes them
            // on every error path.
            fds.push(unsafe {
                OwnedFd::from_raw_fd(std::ptr::read_unaligned(
                    libc::CMSG_DATA(cmsg).cast::<i32>().add(i),
                ))
            });
        }
    }
    let truncated = msg.msg_flags & (libc::MSG_CTRUNC | libc::MSG_TRUNC) != 0;
    if fds.is_empty() || (n as usize) < HEADER_LEN || truncated {
        return Err(Error::io(
            format!("receiving PE {peer}'s heap fds"),
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "got {n} bytes and {} descriptors (did PE {peer} exit?)",
                    fds.len()
                ),
            ),
        ));
    }
    payload.truncate(n as usize);
    Ok((payload, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap::memfd::create_memfd;
    use std::sync::mpsc;

    /// The uid (and gid) of `nobody`, which forked test processes switch to.
    const NOBODY: u32 = 65534;

    /// A job id of this test process that no other test uses (`tag`) and no real job
    /// shares.
    fn job(tag: u64) -> u64 {
        0x7e57_0000_0000_0000 | (u64::from(std::process::id()) << 8) | tag
    }

    /// Forked tests switch to another uid, which needs root.
    fn can_switch_uid() -> bool {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if !root {
            tracing::warn!("not root: cannot fork a process of another user for this test");
        }
        root
    }

    /// A forked child process running as uid [`NOBODY`], killed when dropped.
    struct Nobody {
        pid: libc::pid_t,
    }

    /// Held while forking, so that no forked child inherits another test's pipe and
    /// keeps it open.
    static FORKING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    impl Nobody {
        /// Forks a child that switches to uid [`NOBODY`], runs `act` and then sleeps
        /// until the returned handle is dropped. Returns once `act` ran, and panics if
        /// the child could not switch user or `act` failed. `act` runs in the child of a
        /// multithreaded process, so it may only make async-signal-safe calls (raw
        /// syscalls, no allocation).
        fn spawn(act: impl Fn() -> bool) -> Self {
            let _forking = FORKING.lock().unwrap_or_else(|e| e.into_inner());
            let mut ready = [0; 2];
            // SAFETY: a valid array of two ints for the pipe's ends.
            assert_eq!(
                unsafe { libc::pipe2(ready.as_mut_ptr(), libc::O_CLOEXEC) },
                0
            );
            // SAFETY: the child only makes raw syscalls (and runs `act`, which promises
            // the same) and never returns.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
            if pid == 0 {
                // SAFETY: raw syscalls on the inherited pipe and the child's own
                // credentials; the child sleeps until it is killed, running no
                // destructors.
                unsafe {
                    libc::close(ready[0]);
                    let ok = libc::syscall(libc::SYS_setgid, NOBODY) == 0
                        && libc::syscall(libc::SYS_setuid, NOBODY) == 0
                        && act();
                    let byte = u8::from(ok);
                    libc::write(ready[1], (&byte as *const u8).cast(), 1);
                    libc::close(ready[1]);
                    loop {
                        libc::pause();
                    }
                }
            }
            let child = Nobody { pid };
            let mut byte = 0u8;
            // SAFETY: the parent's ends of the pipe, each closed once. The child holds
            // the only other write end, so the read ends when it wrote or died.
            let n = unsafe {
                libc::close(ready[1]);
                let n = libc::read(ready[0], (&mut byte as *mut u8).cast(), 1);
                libc::close(ready[0]);
                n
            };
            assert!(
                n == 1 && byte == 1,
                "child {pid} could not switch to uid {NOBODY} or set up its socket"
            );
            child
        }
    }

    impl Drop for Nobody {
        fn drop(&mut self) {
            // SAFETY: our own child, killed and reaped once.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }

    /// The connecting side refuses a listener bound by a process other than the
    /// expected peer (here: this test process, while the peer is expected elsewhere).
    #[test]
    fn connect_refuses_a_listener_of_an_unexpected_process() {
        let job = job(1);
        let _listener = listen(job, 3).unwrap();
        let me = std::process::id();
        let deadline = Instant::now() + Duration::from_secs(5);
        let err = connect(job, 3, me + 1, deadline).unwrap_err().to_string();
        assert!(
            err.contains("PE 3")
                && err.contains(&socket_name(job, 3))
                && err.contains(&format!("process {me} (uid"))
                && err.contains(&format!("expected pid {}", me + 1)),
            "{err}"
        );
        connect(job, 3, me, deadline).expect("the expected process is accepted");
    }

    /// The connecting side refuses a listener of the expected pid that runs as another
    /// user.
    #[test]
    fn connect_refuses_a_listener_of_another_user() {
        if !can_switch_uid() {
            return;
        }
        let job = job(2);
        let (addr, addr_len) = abstract_addr(&socket_name(job, 5));
        let child = Nobody::spawn(|| {
            // SAFETY: raw socket syscalls on a new fd and a prepared address.
            unsafe {
                let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                s >= 0
                    && libc::bind(s, (&addr as *const libc::sockaddr_un).cast(), addr_len) == 0
                    && libc::listen(s, 8) == 0
            }
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        let err = connect(job, 5, child.pid as u32, deadline)
            .unwrap_err()
            .to_string();
        let own = PeerCred::own_uid();
        assert!(
            err.contains("PE 5")
                && err.contains(&format!("process {} (uid {NOBODY})", child.pid))
                && err.contains(&format!("with uid {own}")),
            "{err}"
        );
    }

    /// The serving side refuses a connection from an expected pid that runs as another
    /// user, at once and naming both uids, rather than handing it the heap.
    #[test]
    fn serve_refuses_a_connection_of_another_user() {
        if !can_switch_uid() {
            return;
        }
        let job = job(3);
        let listener = listen(job, 6).unwrap();
        let (addr, addr_len) = abstract_addr(&socket_name(job, 6));
        let child = Nobody::spawn(|| {
            // SAFETY: raw socket syscalls on a new fd and a prepared address.
            unsafe {
                let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                s >= 0
                    && libc::connect(s, (&addr as *const libc::sockaddr_un).cast(), addr_len) == 0
            }
        });
        let memfd = create_memfd("symmem-test-serve", 4096).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let peers = [(7, child.pid as u32)];
        let err = serve(
            &listener,
            job,
            6,
            4096,
            b"m",
            &[memfd.as_fd()],
            &peers,
            deadline,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&format!("PE 7 (process {})", child.pid))
                && err.contains(&format!("(uid {NOBODY})"))
                && err.contains(&format!("with uid {}", PeerCred::own_uid())),
            "{err}"
        );
    }

    /// A listener whose backlog stays full makes connect fail at the deadline, naming
    /// the peer and its socket, instead of blocking init forever.
    #[test]
    fn connect_to_a_full_backlog_fails_by_the_deadline() {
        let job = job(4);
        let listener = listen(job, 0).unwrap();
        // SAFETY: re-listening on a listening socket only sets its backlog; 0 admits one
        // pending connection.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
        let me = std::process::id();
        let _first = connect(job, 0, me, Instant::now() + Duration::from_secs(5)).unwrap();
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        let wait = Duration::from_millis(300);
        std::thread::spawn(move || {
            let r = connect(job, 0, me, Instant::now() + wait);
            let _ = tx.send(r.map(drop).map_err(|e| e.to_string()));
        });
        let r = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("connect to a full backlog still blocks 10 s after its deadline");
        let err = r.unwrap_err();
        assert!(start.elapsed() >= wait, "gave up early: {err}");
        assert!(
            err.contains("PE 0") && err.contains(&socket_name(job, 0)) && err.contains("backlog"),
            "{err}"
        );
    }
}
