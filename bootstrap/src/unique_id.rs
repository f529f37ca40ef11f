//! Unique-id init: rank 0 creates an id, any channel carries it to the other ranks.
//!
//! This is how frameworks such as torchrun embed symmem (NVSHMEM's
//! `nvshmemx_get_uniqueid` / `nvshmemx_init_attr` with a unique id). The id is the address
//! of a rendezvous that rank 0 hosts plus 32 random bytes, the job's secret, from which
//! the rendezvous key is derived ([`crate::auth`]): it works across hosts, and only
//! processes that hold the id can join.
//!
//! # The id is a secret
//! Whoever holds the text of an id can join its job and read and write every PE's heap.
//! Hand it to the ranks the way you would a password: through the framework's store, a
//! file only the job's user can read, an environment variable, or a pipe; never on a
//! command line (`/proc/<pid>/cmdline` shows it to every user of the host). `Debug` of an
//! id leaves the secret out; `Display` gives the whole id, for passing it on.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::auth::{self, JobKey};
use crate::error::BootstrapError;
use crate::tcp::TcpBootstrap;

const PREFIX: &str = "symmem-uid-v2";

/// A job identity for unique-id init. Text form: `symmem-uid-v2:<ip>:<port>:<secret>`,
/// the secret as 64 hex digits. A secret: see the module documentation.
#[derive(Clone)]
pub struct UniqueId {
    addr: SocketAddr,
    secret: [u8; 32],
    /// The bound listener, in the process that created the id.
    listener: Option<Arc<TcpListener>>,
}

impl UniqueId {
    /// Creates a new id: binds a listening socket on `ifname`'s IPv4 address (or the first
    /// non-loopback interface that is up, else loopback) and draws a random secret.
    pub fn bind(ifname: Option<&str>) -> Result<Self, BootstrapError> {
        let ip = advertised_ip(ifname)?;
        let listener = TcpListener::bind(SocketAddr::new(ip, 0)).map_err(|e| {
            BootstrapError::io(format!("binding the unique-id rendezvous on {ip}"), &e)
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| BootstrapError::io("reading the unique-id address", &e))?;
        Ok(UniqueId {
            addr,
            secret: JobKey::random_secret()?,
            listener: Some(Arc::new(listener)),
        })
    }

    /// The rendezvous address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Joins the job as `rank` of `size`. Rank 0 hosts the rendezvous: on the listener this
    /// id was created with, or by binding the id's address.
    pub fn join(
        &self,
        rank: usize,
        size: usize,
        timeout: Duration,
    ) -> Result<TcpBootstrap, BootstrapError> {
        if size == 0 || rank >= size {
            return Err(BootstrapError::Config(format!(
                "unique-id init: rank {rank} is out of range for {size} ranks"
            )));
        }
        if rank != 0 {
            return TcpBootstrap::connect_hosted_by(
                &self.addr.to_string(),
                &self.key(),
                rank,
                size,
                timeout,
                0,
                None,
            );
        }
        let listener = match &self.listener {
            Some(l) => l
                .try_clone()
                .map_err(|e| BootstrapError::io("cloning the unique-id listener", &e))?,
            None => TcpListener::bind(self.addr).map_err(|e| {
                BootstrapError::io(
                    format!(
                        "binding {} for rank 0 (the id must come from this host)",
                        self.addr
                    ),
                    &e,
                )
            })?,
        };
        TcpBootstrap::host(listener, &self.key(), rank, size, timeout)
    }

    /// The rendezvous key derived from the id's secret.
    fn key(&self) -> JobKey {
        JobKey::derive(&self.secret, "unique-id rendezvous")
    }
}

impl fmt::Display for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PREFIX}:{}:{}:{}",
            self.addr.ip(),
            self.addr.port(),
            auth::to_hex(&self.secret)
        )
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UniqueId({PREFIX}:{}:{}:<secret>)",
            self.addr.ip(),
            self.addr.port()
        )
    }
}

impl FromStr for UniqueId {
    type Err = BootstrapError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // The text may hold a secret: errors say what is wrong, never what it is.
        let bad = |why: &str| {
            BootstrapError::Config(format!(
                "malformed unique id ({} characters): {why} (expected {PREFIX}:<ip>:<port>:<64 hex digits>)",
                s.len()
            ))
        };
        let rest = s
            .trim()
            .strip_prefix(PREFIX)
            .and_then(|r| r.strip_prefix(':'))
            .ok_or_else(|| bad("wrong prefix or version"))?;
        let (addr_part, secret_part) = rest.rsplit_once(':').ok_or_else(|| bad("no secret"))?;
        let (ip, port) = addr_part.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let ip: IpAddr = ip.parse().map_err(|_| bad("bad IP address"))?;
        let port: u16 = port.parse().map_err(|_| bad("bad port"))?;
        let secret = auth::from_hex::<32>(secret_part)
            .ok_or_else(|| bad("the secret is not 64 hex digits"))?;
        Ok(UniqueId {
            addr: SocketAddr::new(ip, port),
            secret,
            listener: None,
        })
    }
}

/// A random 64-bit value from the OS (job ids, seeds; not a secret).
pub fn random_nonce() -> Result<u64, BootstrapError> {
    let mut buf = [0u8; 8];
    auth::fill_random(&mut buf)?;
    Ok(u64::from_le_bytes(buf))
}

/// The IPv4 address other hosts should use to reach this one: `ifname`'s (an error naming
/// `SYMMEM_SOCKET_IFNAME` and the interfaces found if it has none), else the first up,
/// non-loopback interface's, else loopback.
pub fn advertised_ip(ifname: Option<&str>) -> Result<IpAddr, BootstrapError> {
    let mut found: Option<(String, Ipv4Addr)> = None;
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `ifap`, which we free below.
    if unsafe { libc::getifaddrs(&mut ifap) } != 0 {
        return Err(BootstrapError::io(
            "listing network interfaces",
            &std::io::Error::last_os_error(),
        ));
    }
    let mut names = Vec::new();
    let mut cur = ifap;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list returned by getifaddrs, valid until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr of family sa_family.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        if family != libc::AF_INET {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: for AF_INET the address is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
        let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0;
        names.push(name.clone());
        let wanted = match ifname {
            Some(want) => name == want,
            None => up && !ip.is_loopback(),
        };
        if wanted && found.is_none() {
            found = Some((name, ip));
        }
    }
    // SAFETY: `ifap` came from a successful getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(ifap) };
    match (found, ifname) {
        (Some((_, ip)), _) => Ok(IpAddr::V4(ip)),
        (None, Some(want)) => Err(BootstrapError::Config(format!(
            "{}={want}: no IPv4 interface of that name (have: {})",
            crate::vars::SOCKET_IFNAME,
            names.join(", ")
        ))),
        (None, None) => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_roundtrips_and_rejects_garbage() {
        let id = UniqueId::bind(None).unwrap();
        let parsed: UniqueId = id.to_string().parse().unwrap();
        assert_eq!(parsed.addr, id.addr);
        assert_eq!(parsed.secret, id.secret);
        let secret = "ab".repeat(32);
        for bad in [
            String::new(),
            format!("symmem-uid-v1:1.2.3.4:5:{secret}"),
            "symmem-uid-v2:1.2.3.4:5:01".to_string(),
            format!("symmem-uid-v2:1.2.3.4:5:{}", "ab".repeat(31)),
            format!("symmem-uid-v2:1.2.3.4:5:{}zz", "ab".repeat(31)),
            format!("symmem-uid-v2:1.2.3.4:notaport:{secret}"),
            format!("symmem-uid-v2:nonsense:5:{secret}"),
        ] {
            let err = bad.parse::<UniqueId>().err().unwrap().to_string();
            assert!(err.contains("malformed unique id"), "{err}");
            assert!(!err.contains("abab"), "the error shows the secret: {err}");
        }
    }

    #[test]
    fn debug_leaves_the_secret_out() {
        let id = UniqueId::bind(None).unwrap();
        let text = id.to_string();
        let secret = text.rsplit_once(':').unwrap().1;
        let debug = format!("{id:?}");
        assert!(!debug.contains(secret), "{debug}");
        assert!(debug.contains(&id.addr.port().to_string()), "{debug}");
    }

    #[test]
    fn unknown_interface_is_named() {
        let err = UniqueId::bind(Some("nosuchif0")).err().unwrap();
        assert!(
            err.to_string().contains("SYMMEM_SOCKET_IFNAME=nosuchif0"),
            "{err}"
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Texts near the unique id's form: its prefix, an address, a port and hex digits,
        /// each possibly mangled.
        fn near_id() -> impl Strategy<Value = String> {
            (
                prop_oneof![Just(PREFIX.to_string()), "symmem-uid-v[0-9]", ".{0,12}"],
                prop_oneof![
                    any::<[u8; 4]>().prop_map(|o| std::net::Ipv4Addr::from(o).to_string()),
                    any::<[u16; 8]>().prop_map(|s| std::net::Ipv6Addr::from(s).to_string()),
                    "[0-9a-f.:\\[\\]]{0,20}",
                ],
                prop_oneof![
                    any::<u16>().prop_map(|p| p.to_string()),
                    "[0-9]{0,7}",
                    ".{0,3}"
                ],
                prop_oneof!["[0-9a-f]{64}", "[0-9a-fA-FxX]{0,70}", ".{0,70}"],
            )
                .prop_map(|(prefix, ip, port, secret)| format!("{prefix}:{ip}:{port}:{secret}"))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1024))]

            /// Any text parses or is refused, and what parses prints back to itself.
            #[test]
            fn arbitrary_text_never_panics(text in prop_oneof![".{0,120}", near_id()]) {
                if let Ok(id) = text.parse::<UniqueId>() {
                    let again: UniqueId = id.to_string().parse().unwrap();
                    prop_assert_eq!(again.addr, id.addr);
                    prop_assert_eq!(again.secret, id.secret);
                }
            }
        }
    }
}
