//! Probing libfabric: which provider the transport would open, whether it is a fabric
//! (`auto`), and whether it can register CUDA memory.

use std::ffi::{c_char, CString};

use super::gpu_atomics::on_gpu_heap;
use crate::ofi::ffi;

/// The provider the ofi transport would use (`provider`, or the first that `fi_getinfo`
/// offers with RDM endpoints, RMA and atomics, and that is not known to fail), or why
/// there is none.
pub(in crate::ofi) fn probe(provider: Option<&str>) -> std::result::Result<String, String> {
    let offered = providers()?;
    match provider {
        Some(p) if offered.split(", ").any(|o| o == p) => Ok(p.to_string()),
        Some(p) => Err(format!(
            "libfabric {} here; fi_getinfo offers: {}",
            if known(p) {
                format!("has a provider {p:?}, but not with RDM endpoints, RMA and atomics (FI_EP_RDM, FI_RMA | FI_ATOMIC)")
            } else {
                format!("has no provider {p:?} with RDM endpoints, RMA and atomics")
            },
            if offered.is_empty() { "none" } else { &offered }
        )),
        None if offered.is_empty() => {
            Err("libfabric offers no provider with RDM endpoints, RMA and atomics here".into())
        }
        None => Ok(unnamed_choice(&offered).to_string()),
    }
}

/// The provider taken where none is named, among `offered` (`fi_getinfo`'s, comma-separated,
/// none empty): the first fabric provider, as `auto` names it when it picks ofi
/// ([`probe_fabric`]), else the first one. The provider opened is the one chosen and logged.
fn unnamed_choice(offered: &str) -> &str {
    let mut names = offered.split(", ").filter(|p| !p.is_empty());
    let first = names.clone().next().unwrap_or_default();
    names.find(|p| is_fabric(p)).unwrap_or(first)
}

/// Providers over the host's own network stack or shared memory (the core provider, before
/// any `;ofi_rx*` utility layer): `auto` leaves them to the socket transport, which is
/// faster over TCP and needless within a node.
const HOST_PROVIDERS: &[&str] = &["tcp", "udp", "sockets", "shm", "net"];

/// The first fabric provider `fi_getinfo` offers with RDM endpoints, RMA and atomics (one
/// not over the host's network stack: efa, cxi, `verbs;ofi_rxm`, psm3, opx, …), for
/// `SYMMEM_REMOTE_TRANSPORT=auto`; or why there is none, naming what it offers.
pub(in crate::ofi) fn probe_fabric() -> std::result::Result<String, String> {
    let offered = providers()?;
    Some(unnamed_choice(&offered))
        .filter(|p| !p.is_empty() && is_fabric(p))
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "no libfabric fabric provider (libfabric offers {}; tcp, udp, sockets and shm are left to the socket transport)",
                if offered.is_empty() { "none" } else { &offered }
            )
        })
}

/// Whether `provider` drives a fabric rather than the host's network stack or memory.
fn is_fabric(provider: &str) -> bool {
    let core = provider.split(';').next().unwrap_or(provider);
    !HOST_PROVIDERS.contains(&core)
}

/// The provider (as [`probe`] picks it) when it can register CUDA memory for RMA and
/// atomics (`FI_HMEM`, as GPU heaps need) and its atomics on it would be atomic against
/// the GPU's own ([`gpu_atomics`](super::gpu_atomics)), or why not.
pub(in crate::ofi) fn probe_hmem(provider: Option<&str>) -> std::result::Result<String, String> {
    let p = probe(provider)?;
    let name =
        CString::new(p.as_str()).map_err(|_| format!("provider {p:?} contains a NUL byte"))?;
    // SAFETY: a NUL-terminated provider name.
    match unsafe { ffi::symmem_ofi_hmem(name.as_ptr()) } {
        0 => on_gpu_heap(&p).map(|()| p),
        ffi::ENODATA => Err(format!(
            "libfabric's provider {p} cannot register CUDA memory for RMA and atomics (no FI_HMEM: a libfabric built without CUDA, or a provider without it)"
        )),
        rc => Err(format!("fi_getinfo failed asking provider {p} for FI_HMEM ({rc})")),
    }
}

/// Whether libfabric has a provider named `provider`, whatever it can do.
fn known(provider: &str) -> bool {
    let Ok(name) = CString::new(provider) else {
        return false;
    };
    // SAFETY: a NUL-terminated provider name.
    unsafe { ffi::symmem_ofi_known(name.as_ptr()) == 0 }
}

/// `fi_getinfo`'s providers, comma-separated.
pub(in crate::ofi) fn providers() -> std::result::Result<String, String> {
    let mut buf = [0 as c_char; 512];
    // SAFETY: a writable buffer of the given length.
    let rc = unsafe { ffi::symmem_ofi_providers(buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return Err(format!("fi_getinfo failed ({rc})"));
    }
    Ok(ffi::text(&buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_heap_registration_is_probed_by_provider() {
        // Without FI_HMEM (Debian's libfabric), tcp cannot register CUDA memory; with
        // it, rxm's software atomics are refused.
        let why = probe_hmem(Some("tcp;ofi_rxm")).unwrap_err();
        assert!(
            (why.contains("provider tcp;ofi_rxm cannot register CUDA memory")
                && why.contains("FI_HMEM"))
                || why.contains("provider tcp;ofi_rxm would emulate FI_SUM on FI_UINT32"),
            "{why}"
        );
    }

    /// `auto` takes fabric providers only: the host's TCP, UDP and shared memory are the
    /// socket transport's (this machine offers nothing else, so auto says so).
    /// With no provider named, the one opened is the one `auto` names: the first fabric
    /// provider, not the first that `fi_getinfo` lists (before, `auto` logged verbs and
    /// the endpoint opened tcp).
    #[test]
    fn an_unnamed_provider_is_the_first_fabric_one_as_auto_names_it() {
        assert_eq!(
            unnamed_choice("tcp;ofi_rxm, verbs;ofi_rxm, shm"),
            "verbs;ofi_rxm"
        );
        assert_eq!(unnamed_choice("shm, efa, cxi"), "efa");
        assert_eq!(unnamed_choice("tcp;ofi_rxm, shm"), "tcp;ofi_rxm");
        assert_eq!(unnamed_choice(""), "");
    }

    #[test]
    fn auto_takes_fabrics_not_the_host_network() {
        for fabric in [
            "efa",
            "cxi",
            "verbs;ofi_rxm",
            "psm3",
            "opx",
            "verbs;ofi_rxd",
        ] {
            assert!(is_fabric(fabric), "{fabric}");
        }
        for host in ["tcp;ofi_rxm", "tcp", "udp;ofi_rxd", "sockets", "shm", "net"] {
            assert!(!is_fabric(host), "{host}");
        }
        match probe_fabric() {
            Ok(p) => assert!(is_fabric(&p), "{p}"),
            Err(why) => assert!(why.contains("left to the socket transport"), "{why}"),
        }
    }

    #[test]
    fn a_missing_provider_is_named_with_what_libfabric_offers() {
        let why = probe(Some("nosuchfabric")).unwrap_err();
        assert!(why.contains("has no provider \"nosuchfabric\""), "{why}");
        assert!(why.contains("fi_getinfo offers: "), "{why}");
    }

    /// libfabric's `udp` provider (datagrams only: no RMA, no atomics) is there but cannot
    /// serve: the error says what it lacks.
    #[test]
    fn a_provider_without_rma_and_atomics_is_named_with_what_it_lacks() {
        assert!(
            known("udp"),
            "libfabric builds always have the udp provider"
        );
        assert!(!known("nosuchfabric"));
        let why = probe(Some("udp")).unwrap_err();
        assert!(
            why.contains("has a provider \"udp\", but not with RDM endpoints, RMA and atomics"),
            "{why}"
        );
    }
}
