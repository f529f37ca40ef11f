//! Passing heap file descriptors between same-node PEs over Unix sockets (SCM_RIGHTS):
//! the host control memfd, then the data heap's fds (a memfd, or CUDA VMM POSIX-fd
//! handles), with a backend-specific description.
//!
//! Each PE listens on an abstract-namespace socket named after the job id and its rank
//! (abstract names leave no file behind). After the allgather of node identities, every PE
//! connects to each same-node peer's socket, accepts the same number of connections on its
//! own, answers each with its memfd, and then reads the peers' memfds. Connections are
//! only answered when the connecting process (SO_PEERCRED) is one of the expected peers.
//!
//! No step waits on a dead peer: a peer that dies closes its end of every connection,
//! which ends a read at once, and waiting for peers to fetch this PE's heap also watches
//! their processes (pidfds). The error then says what failed here; init's error path
//! (`liveness::fail_init`) names the PE that died.

use std::io::IoSlice;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

use symmem_bootstrap::fault::exit_point;

use crate::error::{Error, Result};
use crate::liveness::PeerWatch;

/// How often a wait for peers to fetch this PE's heap checks whether they are alive.
const LIVENESS_POLL: Duration = Duration::from_millis(20);

/// What accompanies the fds: job id, sender rank, heap length, description length.
const HEADER_LEN: usize = 8 + 4 + 8 + 4;

/// Most bytes of backend description one message carries.
pub const MAX_DESCRIPTION: usize = 4096;

/// Most fds one message carries (the kernel's SCM_MAX_FD is 253).
pub const MAX_FDS: usize = 64;

fn socket_name(job: u64, rank: usize) -> String {
    format!("symmem-{job:016x}-{rank}")
}

/// Binds this PE's abstract socket.
pub fn listen(job: u64, rank: usize) -> Result<UnixListener> {
    let name = socket_name(job, rank);
    let addr = SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| Error::io(format!("naming socket @{name}"), e))?;
    UnixListener::bind_addr(&addr).map_err(|e| Error::io(format!("binding socket @{name}"), e))
}

/// Connects to `peer`'s abstract socket.
pub fn connect(job: u64, peer: usize) -> Result<UnixStream> {
    let name = socket_name(job, peer);
    let addr = SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| Error::io(format!("naming socket @{name}"), e))?;
    UnixStream::connect_addr(&addr)
        .map_err(|e| Error::io(format!("connecting to PE {peer}'s heap socket @{name}"), e))
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

fn peer_pid(stream: &UnixStream) -> Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid out-parameters of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(Error::last_os(
            "reading the peer credentials of a heap socket",
        ));
    }
    Ok(cred.pid as u32)
}

/// Accepts one connection from each expected peer pid and sends it `description` and
/// `fds`. Fails at once when an expected peer's process exits before it connected.
#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
pub fn serve(
    listener: &UnixListener,
    job: u64,
    me: usize,
    heap_len: usize,
    description: &[u8],
    fds: &[BorrowedFd<'_>],
    expected_pids: &[u32],
    deadline: Instant,
) -> Result<()> {
    assert!(description.len() <= MAX_DESCRIPTION && fds.len() <= MAX_FDS && !fds.is_empty());
    exit_point("heap_serve");
    let watch = PeerWatch::new(expected_pids.iter().copied().enumerate());
    let mut served = Vec::new();
    while served.len() < expected_pids.len() {
        let gone = || {
            let dead = watch.dead();
            let (_, pid) = dead.iter().find(|(_, pid)| !served.contains(pid))?;
            Some(format!(
                "process {pid}, a same-node PE, exited before it fetched this PE's heap"
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
        let pid = peer_pid(&stream)?;
        if !expected_pids.contains(&pid) || served.contains(&pid) {
            tracing::warn!(pid, "ignoring an unexpected connection to the heap socket");
            continue;
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
    use std::os::fd::AsFd;
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
    use std::os::fd::AsFd;
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

fn send_fds(stream: &UnixStream, payload: &[u8], fds: &[BorrowedFd<'_>], pid: u32) -> Result<()> {
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
