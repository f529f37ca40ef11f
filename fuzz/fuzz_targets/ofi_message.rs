//! The ofi transport's message check and decoder (a peer's data-and-signal message,
//! acknowledgement or goodbye), for a job of up to 16 PEs and a heap of up to 64 KiB
//! taken from the first three bytes. The check (tag and sequence number, under a fixed
//! key) accepts the message as it came only where its tag is that key's; sealed by its
//! claimed sender, it is accepted once where that sender is in the job and its sequence
//! number not 0, its replay and a flipped bit never. What the decoder accepts encodes
//! back to the same bytes (but for the sequence number and tag, which it does not read,
//! and a goodbye's `op`, zero), and a signal writes only inside the heap, with its data
//! inside the message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symmem_transport::fuzzing::{
    ofi_message_check, ofi_message_decode, OFI_HEADER, OFI_RECV_BYTES,
};

/// The kind of a goodbye, whose `op` (bytes 8..16) decode ignores.
const GOODBYE: [u8; 4] = 3u32.to_le_bytes();
/// The sequence number and tag (bytes 16..40), which decode does not read.
const SEALING: std::ops::Range<usize> = 16..40;

fuzz_target!(|data: &[u8]| {
    let [n_pes, heap_lo, heap_hi, message @ ..] = data else {
        return;
    };
    if message.len() > OFI_RECV_BYTES {
        return;
    }
    let n_pes = usize::from(n_pes % 17);
    let check = ofi_message_check(message, n_pes);
    assert!(!check.as_sent || !check.resealing_changes_it, "{check:?}");
    let well_formed = check
        .envelope
        .is_some_and(|(from, seq)| (from as usize) < n_pes && seq != 0);
    assert_eq!(check.sealed, well_formed, "{check:?}");
    assert!(!check.replayed && !check.flipped, "{check:?}");
    let heap_len = u64::from(u16::from_le_bytes([*heap_lo, *heap_hi]));
    let Ok(m) = ofi_message_decode(message, n_pes, heap_len) else {
        return;
    };
    let mut want = message[..m.reencoded.len()].to_vec();
    want[SEALING].fill(0);
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
        let data_len = u32::from_le_bytes(message[68..72].try_into().unwrap()) as usize;
        assert!(OFI_HEADER + data_len <= message.len());
    }
});
