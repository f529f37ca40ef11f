//! The ib transport's endpoint decoder (a peer's queue pairs, heap address and key), for
//! a job shape taken from the first two bytes. Whatever it accepts must encode back to
//! the same bytes, its reserved bytes zeroed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symmem_transport::fuzzing::ib_endpoint_reencode;

/// Offsets of the reserved bytes, which decode ignores and encode writes as zero.
const RESERVED: [usize; 3] = [11, 14, 15];

fuzz_target!(|data: &[u8]| {
    let [n_pes, qps, blob @ ..] = data else {
        return;
    };
    let (n_pes, qps) = (usize::from(n_pes % 16), usize::from(qps % 8));
    if let Ok(again) = ib_endpoint_reencode(blob, n_pes, qps) {
        let mut want = blob.to_vec();
        RESERVED.iter().for_each(|&i| want[i] = 0);
        assert_eq!(again, want);
    }
});
