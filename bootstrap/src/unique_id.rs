//! Unique-id init: rank 0 creates an id, any channel carries it to the other ranks.
//!
//! This is how frameworks such as torchrun embed symmem (NVSHMEM's
//! `nvshmemx_get_uniqueid` / `nvshmemx_init_attr` with a unique id). The id is the address
//! of a rendezvous that rank 0 hosts plus a random nonce, so it works across hosts and
//! stray connections from other jobs are refused.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::tcp::TcpBootstrap;
use crate::BootstrapError;

const PREFIX: &str = "symmem-uid-v1";

/// A job identity for unique-id init. Text form: `symmem-uid-v1:<ip>:<port>:<nonce>`.
#[derive(Clone)]
pub struct UniqueId {
    addr: SocketAddr,
    nonce: u64,
    /// The bound listener, in the process that created the id.
    listener: Option<Arc<TcpListener>>,
}

impl UniqueId {
    /// Creates a new id: binds a listening socket on `ifname`'s IPv4 address (or the first
    /// non-loopback interface that is up, else loopback) and draws a random nonce.
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
            nonce: random_nonce()?,
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
                self.nonce,
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
        TcpBootstrap::host(listener, self.nonce, rank, size, timeout)
    }
}

impl fmt::Display for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PREFIX}:{}:{}:{:016x}",
            self.addr.ip(),
            self.addr.port(),
            self.nonce
        )
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UniqueId({self})")
    }
}

impl FromStr for UniqueId {
    type Err = BootstrapError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            BootstrapError::Config(format!(
                "malformed unique id {s:?}: {why} (expected {PREFIX}:<ip>:<port>:<16 hex digits>)"
            ))
        };
        let rest = s
            .trim()
            .strip_prefix(PREFIX)
            .and_then(|r| r.strip_prefix(':'))
            .ok_or_else(|| bad("wrong prefix or version"))?;
        let (addr_part, nonce_part) = rest.rsplit_once(':').ok_or_else(|| bad("no nonce"))?;
        let (ip, port) = addr_part.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let ip: IpAddr = ip.parse().map_err(|_| bad("bad IP address"))?;
        let port: u16 = port.parse().map_err(|_| bad("bad port"))?;
        if nonce_part.len() != 16 {
            return Err(bad("nonce is not 16 hex digits"));
        }
        let nonce = u64::from_str_radix(nonce_part, 16).map_err(|_| bad("bad nonce"))?;
        Ok(UniqueId {
            addr: SocketAddr::new(ip, port),
            nonce,
            listener: None,
        })
    }
}

/// A random 64-bit value from the OS (job nonces and ids).
pub fn random_nonce() -> Result<u64, BootstrapError> {
    let mut buf = [0u8; 8];
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n != buf.len() as isize {
        return Err(BootstrapError::io(
            "drawing a random nonce",
            &std::io::Error::last_os_error(),
        ));
    }
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
            "SYMMEM_SOCKET_IFNAME={want}: no IPv4 interface of that name (have: {})",
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
        assert_eq!(parsed.nonce, id.nonce);
        for bad in [
            "",
            "symmem-uid-v2:1.2.3.4:5:0000000000000001",
            "symmem-uid-v1:1.2.3.4:5:01",
            "symmem-uid-v1:1.2.3.4:notaport:0000000000000001",
            "symmem-uid-v1:nonsense:5:0000000000000001",
        ] {
            let err = bad.parse::<UniqueId>().err().unwrap();
            assert!(err.to_string().contains("malformed unique id"), "{err}");
        }
    }

    #[test]
    fn unknown_interface_is_named() {
        let err = UniqueId::bind(Some("nosuchif0")).err().unwrap();
        assert!(
            err.to_string().contains("SYMMEM_SOCKET_IFNAME=nosuchif0"),
            "{err}"
        );
    }
}
