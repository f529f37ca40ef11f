//! The PMI-1 client's reply parser: a whole session (handshake, init, maxes, KVS name,
//! process mapping, put, barrier, get, finalize) against a server that sends arbitrary
//! bytes. Every input must end in an error or a session, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symmem_bootstrap::fuzzing::pmi_replay;

fuzz_target!(|data: &[u8]| {
    // Any outcome is fine; only a panic is not.
    let _ = pmi_replay(data);
});
