//! The ofi transport's exchange entry (a PE's endpoint address and heap registration, or
//! why its setup failed), as every PE reads every other's from the bootstrap. Whatever
//! decodes encodes back to exactly its bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symmem_transport::fuzzing::ofi_exchange_reencode;

fuzz_target!(|data: &[u8]| {
    if let Ok(again) = ofi_exchange_reencode(data) {
        assert_eq!(again, data);
    }
});
