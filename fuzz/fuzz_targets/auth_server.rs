//! The server side of the connection handshake, `auth::ServerHandshake::progress`, fed
//! arbitrary bytes in arbitrary pieces, with writes that may fall short. Nobody without
//! the key can answer the server's fresh nonce, so no input may authenticate.
#![no_main]

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use symmem_bootstrap::auth::{JobKey, Progress, Protocol, ServerHandshake};

/// A client: its bytes in pieces of `step`, "nothing yet" between pieces, then a close;
/// takes at most `room` bytes per write.
struct Client<'a> {
    data: &'a [u8],
    step: usize,
    ready: bool,
    room: usize,
}

impl Read for Client<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.ready && !self.data.is_empty() {
            self.ready = true;
            return Err(ErrorKind::WouldBlock.into());
        }
        self.ready = false;
        let n = buf.len().min(self.step).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

impl Write for Client<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len().min(self.room))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let [flags, room, rest @ ..] = data else {
        return;
    };
    let protocol = if flags & 1 == 0 {
        Protocol::Rendezvous
    } else {
        Protocol::SocketTransport
    };
    let mut client = Client {
        data: rest,
        step: usize::from(flags >> 1) + 1,
        ready: false,
        room: if *room == 0 {
            usize::MAX
        } else {
            usize::from(*room)
        },
    };
    let key = JobKey::derive(b"fuzz", "fuzz");
    let mut hs = ServerHandshake::new(protocol, Instant::now() + Duration::from_secs(1));
    loop {
        match hs.progress(&mut client, &key) {
            Progress::Waiting => {}
            Progress::Failed(_) => break,
            Progress::Authenticated(claim) => {
                panic!("a client without the key authenticated, claiming {claim:?}")
            }
        }
    }
});
