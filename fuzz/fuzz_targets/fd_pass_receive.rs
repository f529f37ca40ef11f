//! `fd_pass::receive`, which reads a same-node peer's heap message (header, backend
//! description) and its descriptors from a Unix socket: fed a message of arbitrary bytes
//! with the number of descriptors the first byte says (past the 64 it accepts, too).
#![no_main]

use std::net::Shutdown;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use symmem_runtime::fuzzing::{fd_pass_receive, fd_pass_send};

/// What the receiver expects: the job id, the sender's rank, the heap's length.
const JOB: u64 = 0x5eed;
const PEER: usize = 1;
const HEAP_LEN: usize = 4096;
/// Bytes of the message header: job, rank, heap length, description length.
const HEADER_LEN: usize = 24;

fuzz_target!(|data: &[u8]| {
    let Some((&n, payload)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 72);
    let payload = &payload[..payload.len().min(8 << 10)];
    let (theirs, mine) = UnixStream::pair().expect("a socketpair");
    // Sent as a same-node PE sends its heap; a short or failed send is part of the
    // input, and the receiver must cope with whatever arrives.
    let fds = vec![theirs.as_fd(); n];
    let _ = fd_pass_send(&theirs, payload, &fds, 0);
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
