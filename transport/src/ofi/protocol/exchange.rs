//! The entry each PE contributes to the ofi transport's exchange (an allgather over the
//! bootstrap): its endpoint address and heap registration, or why its setup failed, so
//! that every other PE fails naming it. Pure bytes, no libfabric: the fuzz targets in
//! `fuzz/` decode it without the `ofi` feature.
//!
//! An entry is `0u8, address length: u32, address, heap base: u64, heap length: u64,
//! key: u64, takes messages: u64 (0 or 1)`, little-endian; or `1u8` and the reason, UTF-8.

/// The longest endpoint address: what `fi_getname` is given room for.
pub(crate) const MAX_ADDRESS: usize = 256;
/// The first byte of an entry whose endpoint opened.
const OPENED: u8 = 0;
/// The first byte of an entry whose setup failed.
const FAILED: u8 = 1;
/// Bytes after the address: base, length, key and whether the PE takes messages.
const HEAP_BYTES: usize = 32;

/// A peer's heap registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerHeap {
    /// Its base address (or 0 where the provider addresses by offset).
    pub base: u64,
    /// Its length.
    pub len: u64,
    /// Its key.
    pub key: u64,
    /// Whether it takes signals as messages (`messages`).
    pub messages: bool,
}

/// The entry of a PE whose endpoint has the address `name` (at most [`MAX_ADDRESS`]
/// bytes) and whose heap is `heap`.
pub(crate) fn encode(name: &[u8], heap: &PeerHeap) -> Vec<u8> {
    debug_assert!(name.len() <= MAX_ADDRESS);
    let mut v = Vec::with_capacity(1 + 4 + name.len() + HEAP_BYTES);
    v.push(OPENED);
    v.extend_from_slice(&(name.len() as u32).to_le_bytes());
    v.extend_from_slice(name);
    for word in [heap.base, heap.len, heap.key, u64::from(heap.messages)] {
        v.extend_from_slice(&word.to_le_bytes());
    }
    v
}

/// The entry of a PE whose setup failed, saying `why`.
pub(crate) fn encode_failure(why: &str) -> Vec<u8> {
    [&[FAILED][..], why.as_bytes()].concat()
}

/// One PE's entry: its address and heap, or why its setup failed (or what is malformed).
pub(crate) fn decode(entry: &[u8]) -> Result<(&[u8], PeerHeap), String> {
    let malformed = || format!("a malformed exchange entry of {} bytes", entry.len());
    match entry.split_first() {
        Some((&OPENED, rest)) => {
            let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(malformed)?;
            let len = u32::from_le_bytes(*len) as usize;
            if len > MAX_ADDRESS {
                return Err(format!(
                    "an exchange entry with an endpoint address of {len} bytes (at most {MAX_ADDRESS})"
                ));
            }
            if rest.len() != len + HEAP_BYTES {
                return Err(malformed());
            }
            let (name, words) = rest.split_at(len);
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&words[8 * i..8 * i + 8]);
                u64::from_le_bytes(w)
            };
            let messages = match word(3) {
                0 => false,
                1 => true,
                other => {
                    return Err(format!(
                        "an exchange entry whose messages flag is {other} (0 or 1)"
                    ))
                }
            };
            Ok((
                name,
                PeerHeap {
                    base: word(0),
                    len: word(1),
                    key: word(2),
                    messages,
                },
            ))
        }
        Some((&FAILED, why)) => Err(format!(
            "its ofi setup failed: {}",
            String::from_utf8_lossy(why)
        )),
        _ => Err(malformed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn heap() -> PeerHeap {
        PeerHeap {
            base: 0x1000,
            len: 4096,
            key: 7,
            messages: true,
        }
    }

    /// The exchange entry of a PE whose setup failed carries its reason to every PE;
    /// malformed entries are refused, naming their size or the field that is wrong.
    #[test]
    fn exchange_entries_decode_or_say_why_not() {
        let ok = encode(b"abc", &heap());
        assert_eq!(ok.len(), 40);
        assert_eq!(decode(&ok), Ok((&b"abc"[..], heap())));
        assert_eq!(
            decode(&encode_failure("no provider")).unwrap_err(),
            "its ofi setup failed: no provider"
        );
        assert!(decode(&ok[..ok.len() - 1])
            .unwrap_err()
            .contains("malformed exchange entry of 39 bytes"));
        let mut flag = ok.clone();
        flag[32] = 2;
        assert!(decode(&flag).unwrap_err().contains("messages flag is 2"));
        let mut long = ok.clone();
        long[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&long)
            .unwrap_err()
            .contains(&format!("address of {} bytes", u32::MAX)));
        for bad in [&[][..], &[0], &[0, 3, 0, 0], &[2, 0, 0, 0, 0]] {
            assert!(decode(bad).unwrap_err().contains("malformed"), "{bad:?}");
        }
    }

    fn peer_heap() -> impl Strategy<Value = PeerHeap> {
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<bool>()).prop_map(
            |(base, len, key, messages)| PeerHeap {
                base,
                len,
                key,
                messages,
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Every entry decodes as encoded, and no shorter or longer one decodes.
        #[test]
        fn entries_decode_as_encoded(
            name in proptest::collection::vec(any::<u8>(), 0..=MAX_ADDRESS),
            heap in peer_heap(),
            cut in any::<prop::sample::Index>(),
            extra in 1..8usize,
        ) {
            let entry = encode(&name, &heap);
            prop_assert_eq!(decode(&entry), Ok((&name[..], heap)));
            let short = &entry[..cut.index(entry.len())];
            prop_assert!(decode(short).is_err());
            let mut long = entry.clone();
            long.resize(entry.len() + extra, 0);
            prop_assert!(decode(&long).is_err());
        }

        /// Whatever bytes a peer sends, decoding returns (never panics), and what it
        /// accepts encodes back to exactly those bytes.
        #[test]
        fn any_entry_decodes_only_as_it_encodes(
            entry in prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..64),
                (proptest::collection::vec(any::<u8>(), 0..40), 0..=1u8).prop_map(|(mut v, m)| {
                    let mut e = vec![0u8];
                    e.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    e.append(&mut v);
                    e.extend_from_slice(&[0; 24]);
                    e.extend_from_slice(&u64::from(m).to_le_bytes());
                    e
                }),
            ],
        ) {
            if let Ok((name, heap)) = decode(&entry) {
                prop_assert_eq!(encode(name, &heap), entry);
            }
        }
    }
}
