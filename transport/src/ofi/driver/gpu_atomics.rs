//! Atomics on a GPU heap: whether the provider's would be atomic against the GPU's own.
//!
//! A GPU PE's kernels update its heap with the GPU's atomics while peers' atomics arrive
//! through the NIC. libfabric promises atomicity only among one actor's atomics
//! (`fi_atomic(3)`: a domain, a CPU complex or a device such as a GPU), and
//! `fi_query_atomic` says whether an atomic exists, not how a provider applies it to
//! `FI_HMEM` memory (libfabric 1.17 has no flag for that). Providers that apply atomics
//! in software at the target copy the word out of GPU memory, apply the operation on the
//! CPU and copy the result back: a GPU atomic on that word in between is lost. Those
//! providers are refused for GPU heaps, naming the provider, the operation and the
//! datatype; the socket transport (`SYMMEM_ALLOW_HOST_STAGING=1`) applies peers' atomics
//! with the GPU's own, in a kernel.

/// The atomics the transport issues, as `shim.c`'s `check_atomics` asks
/// `fi_query_atomic` for them, each on both [`DATATYPES`].
pub(in crate::ofi) const ISSUED: &[&str] = &[
    "FI_SUM",
    "FI_ATOMIC_WRITE",
    "fetching FI_ATOMIC_READ",
    "fetching FI_ATOMIC_WRITE (swap)",
    "fetching FI_SUM",
    "fetching FI_BAND",
    "fetching FI_BOR",
    "fetching FI_BXOR",
    "FI_CSWAP",
];

/// The datatypes of [`ISSUED`]: 32- and 64-bit words.
pub(in crate::ofi) const DATATYPES: &[&str] = &["FI_UINT32", "FI_UINT64"];

/// Providers, or utility layers over one (`tcp;ofi_rxm`), that apply atomics in software
/// at the target, with how, as libfabric 1.17's sources do it: for `FI_HMEM` memory a
/// copy out of the device, the operation on the CPU, a copy back.
const SOFTWARE: &[(&str, &str)] = &[
    (
        "ofi_rxm",
        "rxm carries atomics as messages its target applies on the CPU",
    ),
    (
        "ofi_rxd",
        "rxd carries atomics as messages its target applies on the CPU",
    ),
    ("tcp", "tcp's target applies atomics on the CPU"),
    ("udp", "udp's target applies atomics on the CPU"),
    ("sockets", "sockets' target applies atomics on the CPU"),
    ("shm", "shm's target applies atomics on the CPU"),
    (
        "efa",
        "efa's RDM protocol applies atomics at the target's CPU",
    ),
    ("psm2", "psm2 applies atomics at the target's CPU"),
    ("psm3", "psm3 applies atomics at the target's CPU"),
    ("opx", "opx applies atomics at the target's CPU"),
];

/// Whether `provider`'s atomics on a GPU heap would be atomic against the GPU's own: `Ok`
/// unless it, or a utility layer of it, applies them in software at the target; then the
/// error names the provider, the first atomic the transport issues and its datatype, and
/// that every other one is the same.
pub(in crate::ofi) fn on_gpu_heap(provider: &str) -> Result<(), String> {
    let Some((layer, how)) = provider
        .split(';')
        .find_map(|part| SOFTWARE.iter().find(|(name, _)| *name == part))
    else {
        return Ok(());
    };
    Err(format!(
        "libfabric's provider {provider} would emulate {} on {} against the GPU heap non-atomically ({layer}: {how}, copying the word out of GPU memory and back, so a GPU atomic on it in between is lost), and likewise every other atomic the transport issues ({} on {}); the GPU's own atomics and peers' would not be atomic together",
        ISSUED[0],
        DATATYPES[0],
        ISSUED[1..].join(", "),
        DATATYPES.join(" and "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Providers that apply atomics in software at the target, themselves or through a
    /// utility layer, are refused for GPU heaps naming the provider, the operation and
    /// the datatype; NIC atomics (cxi, and providers not known to emulate) pass.
    #[test]
    fn software_atomics_are_refused_on_gpu_heaps_naming_provider_op_and_type() {
        for provider in [
            "tcp;ofi_rxm",
            "verbs;ofi_rxm",
            "shm",
            "efa",
            "udp;ofi_rxd",
            "psm3",
        ] {
            let why = on_gpu_heap(provider).unwrap_err();
            assert!(
                why.starts_with(&format!(
                    "libfabric's provider {provider} would emulate FI_SUM on FI_UINT32 against the GPU heap non-atomically"
                )),
                "{why}"
            );
            assert!(why.contains("FI_CSWAP on FI_UINT32 and FI_UINT64"), "{why}");
        }
        assert!(on_gpu_heap("verbs;ofi_rxm")
            .unwrap_err()
            .contains("(ofi_rxm: rxm carries"));
        for provider in ["cxi", "verbs"] {
            assert_eq!(on_gpu_heap(provider), Ok(()), "{provider}");
        }
    }

    /// The list the error names is the shim's: every atomic `check_atomics` asks for.
    #[test]
    fn the_atomics_named_are_those_the_shim_checks() {
        let shim = include_str!("../shim.c");
        let need = shim
            .split("} need[] = {")
            .nth(1)
            .and_then(|rest| rest.split("};").next())
            .expect("check_atomics's list");
        let names: Vec<&str> = need
            .lines()
            .filter_map(|line| line.rsplit('"').nth(1))
            .collect();
        assert_eq!(names, ISSUED);
        assert!(shim.contains("types[] = {FI_UINT32, FI_UINT64}"));
    }
}
