//! `fd_pass::receive`, which reads a same-node peer's heap message (header, backend
//! description) and its descriptors from a Unix socket: fed a message of arbitrary bytes
//! with the number of descriptors the first byte says (past the 64 it accepts, too).
#![no_main]

use std::io::IoSlice;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use symmem_runtime::fuzzing::fd_pass_receive;

/// What the receiver expects: the job id, the sender's rank, the heap's length.
const JOB: u64 = 0x5eed;
const PEER: usize = 1;
const HEAP_LEN: usize = 4096;
/// Bytes of the message header: job, rank, heap length, description length.
const HEADER_LEN: usize = 24;

/// Sends `payload` with `n` copies of `fd` in one SCM_RIGHTS message.
fn send(stream: &UnixStream, payload: &[u8], fd: i32, n: usize) {
    let raw = vec![fd; n];
    let bytes = std::mem::size_of_val(raw.as_slice()) as u32;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
    let mut control = vec![0u8; space];
    let iov = [IoSlice::new(payload)];
    // SAFETY: an all-zero msghdr is valid; the fields are filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = 1;
    if n > 0 {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: `control` has room for one header and `n` ints, so CMSG_FIRSTHDR is
        // non-null and CMSG_DATA is valid for writing them.
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
    }
    // SAFETY: `msg` and everything it points to outlive the call. A short or failed send
    // is part of the input; the receiver must cope with whatever arrives.
    unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, payload)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 72);
    let payload = &payload[..payload.len().min(8 << 10)];
    let (theirs, mine) = UnixStream::pair().expect("a socketpair");
    send(&theirs, payload, theirs.as_raw_fd(), n);
    theirs
        .shutdown(Shutdown::Write)
        .expect("shutting down the sending side");
    let deadline = Instant::now() + Duration::from_secs(1);
    if let Ok((description, fds)) = fd_pass_receive(&mine, JOB, PEER, HEAP_LEN, deadline) {
        assert_eq!(fds.len(), n, "descriptors received");
        assert_eq!(
            description,
            payload[HEADER_LEN..HEADER_LEN + description.len()]
        );
    }
});
