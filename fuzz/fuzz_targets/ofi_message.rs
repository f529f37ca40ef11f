//! The ofi transport's message decoder (a peer's data-and-signal message, acknowledgement
//! or goodbye), for a job of up to 16 PEs and a heap of up to 64 KiB taken from the first
//! three bytes. What it accepts encodes back to the same bytes (a goodbye's `op` as
//! zero), and a signal writes only inside the heap, with its data inside the message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symmem_transport::fuzzing::{ofi_message_decode, OFI_HEADER, OFI_RECV_BYTES};

/// The kind of a goodbye, whose `op` (bytes 8..16) decode ignores.
const GOODBYE: [u8; 4] = 3u32.to_le_bytes();

fuzz_target!(|data: &[u8]| {
    let [n_pes, heap_lo, heap_hi, message @ ..] = data else {
        return;
    };
    if message.len() > OFI_RECV_BYTES {
        return;
    }
    let n_pes = usize::from(n_pes % 17);
    let heap_len = u64::from(u16::from_le_bytes([*heap_lo, *heap_hi]));
    let Ok(m) = ofi_message_decode(message, n_pes, heap_len) else {
        return;
    };
    let mut want = message[..m.reencoded.len()].to_vec();
    if message.starts_with(&GOODBYE) {
        want[8..16].fill(0);
    }
    assert_eq!(m.reencoded, want);
    for (start, end) in m.writes {
        assert!(
            start <= end && end <= heap_len,
            "{start}..{end} of {heap_len}"
        );
    }
    if m.reencoded.len() == OFI_HEADER {
        let data_len = u32::from_le_bytes(message[44..48].try_into().unwrap()) as usize;
        assert!(OFI_HEADER + data_len <= message.len());
    }
});
