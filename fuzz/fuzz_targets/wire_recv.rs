//! The rendezvous wire: `wire::recv_limited` (header checks, then the payload decoder)
//! reads frames from arbitrary bytes, handed out a few at a time. Every message it
//! accepts (but the errors, whose text is re-worded on the way) must survive being
//! encoded and read again.
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use symmem_bootstrap::wire::{encode, recv, recv_limited, Msg, Recv};

/// Hands out at most `step` bytes per read, as a socket may.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.step).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, frames)) = data.split_first() else {
        return;
    };
    let mut r = Trickle {
        data: frames,
        step: usize::from(step % 32) + 1,
    };
    while let Ok(Recv::Msg(msg)) = recv_limited(&mut r, "fuzz", 1 << 16) {
        if matches!(msg, Msg::Error(_)) {
            continue;
        }
        let frame = encode(&msg);
        match recv(&mut frame.as_slice(), "fuzz") {
            Ok(Recv::Msg(again)) => assert_eq!(format!("{again:?}"), format!("{msg:?}")),
            Ok(Recv::Closed) => panic!("an encoded {msg:?} read as a closed connection"),
            Err(e) => panic!("an encoded {msg:?} was refused: {e}"),
        }
    }
});
