//! Slurm's host-list syntax: `env::hostlist::expand` and `first_host`, which must agree
//! on the first host of every list that expands.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symmem_bootstrap::env::hostlist::{expand, first_host};

fuzz_target!(|data: &[u8]| {
    let Ok(list) = std::str::from_utf8(data) else {
        return;
    };
    let first = first_host(list);
    if let Ok(hosts) = expand(list) {
        assert_eq!(first.as_ref(), Ok(&hosts[0]), "first host of {list:?}");
    }
});
