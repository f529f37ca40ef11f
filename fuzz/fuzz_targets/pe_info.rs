//! `PeInfo::decode`, what every PE reads from every other at init. Whatever it accepts
//! must encode back to exactly the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symmem_runtime::fuzzing::PeInfo;

fuzz_target!(|data: &[u8]| {
    if let Ok(info) = PeInfo::decode(data, 3) {
        assert_eq!(info.encode(), data, "{info:?}");
    }
});
