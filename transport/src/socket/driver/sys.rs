//! The system calls under the transport: `poll`, `read` and `writev` on raw file
//! descriptors, retried when a signal interrupts them.

use std::os::fd::RawFd;

/// Waits up to `ms` milliseconds for `events` on `fd`.
pub(super) fn poll_one(fd: RawFd, events: libc::c_short, ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// Runs a syscall wrapper again while it fails with `EINTR`: its byte count, or the error.
pub(super) fn retry_interrupted(mut call: impl FnMut() -> isize) -> std::io::Result<usize> {
    loop {
        let r = call();
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `read(2)` into raw memory (which may be shared with other processes).
///
/// # Safety
/// `ptr` must be valid for writes of `len` bytes for the duration of the call.
pub(super) unsafe fn read_raw(fd: RawFd, ptr: *mut u8, len: usize) -> std::io::Result<usize> {
    // SAFETY: the caller provides `len` writable bytes at `ptr`.
    retry_interrupted(|| unsafe { libc::read(fd, ptr.cast(), len) })
}

/// Frames of up to this many bytes in several slices are gathered into one buffer and
/// written with `send`, which costs less than `sendmsg` of their slices.
const GATHER_MAX: usize = 512;

/// `send(2)` of one slice, or of up to four gathered when they are small
/// ([`GATHER_MAX`]), else `sendmsg(2)` of up to four, without SIGPIPE on a closed
/// connection.
pub(super) fn write_raw(fd: RawFd, parts: &[&[u8]]) -> std::io::Result<usize> {
    let send = |bytes: &[u8]| {
        // SAFETY: `bytes` is a live slice, which send only reads.
        retry_interrupted(|| unsafe {
            libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL)
        })
    };
    if let [one] = parts {
        return send(one);
    }
    let parts = &parts[..parts.len().min(4)];
    let total: usize = parts.iter().map(|p| p.len()).sum();
    if total <= GATHER_MAX {
        let mut gathered = [0u8; GATHER_MAX];
        let mut at = 0;
        for p in parts {
            gathered[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        return send(&gathered[..total]);
    }
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 4];
    for (v, p) in iov.iter_mut().zip(parts) {
        v.iov_base = p.as_ptr() as *mut libc::c_void;
        v.iov_len = p.len();
    }
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = parts.len() as _;
    // SAFETY: `msg` describes live slices, which sendmsg only reads.
    retry_interrupted(|| unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) })
}
