//! `UniqueId::from_str`: the text a user or a process manager hands over. Whatever it
//! accepts must print back to a text that parses to the same id.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symmem_bootstrap::UniqueId;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(id) = text.parse::<UniqueId>() {
        let printed = id.to_string();
        let again: UniqueId = printed.parse().expect("a printed unique id parses");
        assert_eq!(again.to_string(), printed);
        assert_eq!(again.addr(), id.addr());
    }
});
