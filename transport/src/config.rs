//! What the transports read of the runtime's configuration: the `SYMMEM_*` variables
//! the runtime parses (its `Config`), handed over as a [`TransportConfig`].

use std::time::Duration;

/// The names of the variables the transports name in their messages; the runtime's
/// configuration declares each variable with its name from here.
pub mod var {
    /// The transport to other nodes.
    pub const REMOTE_TRANSPORT: &str = "SYMMEM_REMOTE_TRANSPORT";
    /// Strict or weak ordering of CPU PEs.
    pub const ORDERING: &str = "SYMMEM_ORDERING";
    /// The seed of weak ordering's delivery order.
    pub const ORDERING_SEED: &str = "SYMMEM_ORDERING_SEED";
    /// The RoCE GID index of the ib transport.
    pub const IB_GID_INDEX: &str = "SYMMEM_IB_GID_INDEX";
    /// The ofi transport's libfabric provider.
    pub const OFI_PROVIDER: &str = "SYMMEM_OFI_PROVIDER";
    /// How the ofi transport's progress thread waits for work.
    pub const OFI_PROGRESS: &str = "SYMMEM_OFI_PROGRESS";
    /// The libfabric domain (NIC) the ofi transport opens.
    pub const OFI_DOMAIN: &str = "SYMMEM_OFI_DOMAIN";
}

/// The transports' part of the configuration.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    /// `SYMMEM_REMOTE_TRANSPORT`.
    pub remote_transport: RemoteTransport,
    /// `SYMMEM_ORDERING=weak`: every peer is reached through the reordering transport.
    pub weak_ordering: bool,
    /// `SYMMEM_ORDERING_SEED`: PE 0's seed of weak ordering's delivery order (from its
    /// clock when unset).
    pub ordering_seed: Option<u64>,
    /// `SYMMEM_TIMEOUT`: how long a request may wait for its peer; `None` = no limit.
    pub timeout: Option<Duration>,
    /// `SYMMEM_SOCKET_IFNAME`: the interface the socket transport listens on.
    pub socket_ifname: Option<String>,
    /// `SYMMEM_SOCKET_FAULTS`: the seed of the faults the socket transport injects into
    /// its own writes and reads (short writes, short reads, sleeps); `None` = none.
    pub socket_faults: Option<u64>,
    /// `SYMMEM_DEAD_PEER_TIMEOUT`: how long a socket connection's peer may stay silent
    /// before the connection fails (see [`symmem_bootstrap::net`]); `None` = off.
    pub dead_peer_timeout: Option<Duration>,
    /// `SYMMEM_HCA_LIST`, parsed.
    pub hca_filter: HcaFilter,
    /// `SYMMEM_IB_GID_INDEX`; `None` = chosen per port.
    pub ib_gid_index: Option<u32>,
    /// `SYMMEM_IB_QPS_PER_PEER`.
    pub ib_qps_per_peer: usize,
    /// `SYMMEM_ALLOW_HOST_STAGING=1`: a GPU heap the NIC cannot register is staged
    /// through host memory over sockets instead of failing.
    pub allow_host_staging: bool,
    /// `SYMMEM_OFI_PROVIDER`: the libfabric provider of the ofi transport (`tcp;ofi_rxm`,
    /// `shm`, `efa`, …); `None` = the first that has RDM endpoints, RMA and atomics.
    pub ofi_provider: Option<String>,
    /// `SYMMEM_OFI_PROGRESS`: how the ofi transport's progress thread waits for work.
    pub ofi_progress: OfiProgress,
    /// `SYMMEM_OFI_DOMAIN`: the libfabric domain (NIC) every PE of this process opens;
    /// `None` = each PE takes the one nearest its GPU or CPUs.
    pub ofi_domain: Option<String>,
    /// `SYMMEM_OFI_ASSUME_ORDER`: the order the ofi transport relies on.
    pub ofi_assume_order: OfiAssumeOrder,
}

#[cfg(test)]
impl TransportConfig {
    /// The configuration when no variable is set, for unit tests (the runtime's `Config`
    /// owns the real defaults).
    pub(crate) fn unset() -> Self {
        TransportConfig {
            remote_transport: RemoteTransport::Auto,
            weak_ordering: false,
            ordering_seed: None,
            timeout: None,
            socket_faults: None,
            socket_ifname: None,
            dead_peer_timeout: Some(symmem_bootstrap::DEFAULT_DEAD_PEER_TIMEOUT),
            hca_filter: HcaFilter::default(),
            ib_gid_index: None,
            ib_qps_per_peer: 1,
            allow_host_staging: false,
            ofi_provider: None,
            ofi_progress: OfiProgress::Auto,
            ofi_domain: None,
            ofi_assume_order: OfiAssumeOrder::Provider,
        }
    }
}

/// The remote transport preference (`SYMMEM_REMOTE_TRANSPORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteTransport {
    /// The fastest that can run here: ib with an RDMA device, else ofi with a libfabric
    /// fabric provider, else sockets.
    Auto,
    /// The transport of this name: `socket`, `ib` (ibverbs) or `ofi` (libfabric, on
    /// `SYMMEM_OFI_PROVIDER`'s provider); see [`crate::remote_transport_choices`].
    Named(&'static str),
}

impl std::fmt::Display for RemoteTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteTransport::Auto => f.write_str("auto"),
            RemoteTransport::Named(name) => f.write_str(name),
        }
    }
}

/// How the ofi transport's progress thread waits for work (`SYMMEM_OFI_PROGRESS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfiProgress {
    /// `poll` where each PE's progress thread can have a CPU of its own (a spare CPU per
    /// PE on the machine, else two of the process's CPUs per PE), else `block`.
    Auto,
    /// Blocks on the completion queue's wait object while idle. The provider then signals
    /// that object (a write and a read of a file descriptor) for each completion.
    Block,
    /// Never blocks: polls, yielding its CPU between polls, on a completion queue without
    /// a wait object, so completions cost no signal.
    Poll,
    /// No progress thread: peers' operations on this PE complete only while its threads
    /// call in (waits, tests, fences, quiets, operations of its own), as in OpenSHMEM
    /// implementations without a progress thread. A PE that computes for long without
    /// calling in holds its peers up.
    Manual,
}

impl std::fmt::Display for OfiProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OfiProgress::Auto => "auto",
            OfiProgress::Block => "block",
            OfiProgress::Poll => "poll",
            OfiProgress::Manual => "manual",
        })
    }
}

/// The order the ofi transport relies on between operations to a peer
/// (`SYMMEM_OFI_ASSUME_ORDER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfiAssumeOrder {
    /// What the provider promises (its `FI_ORDER_*` bits and `FI_FENCE`).
    Provider,
    /// The weakest a provider of RMA and atomics keeps (efa's): sends after sends only, and
    /// `FI_FENCE` only where the provider really offers it, whatever order it promises; to
    /// run efa's protocol on `tcp;ofi_rxm` or `shm`.
    Weakest,
}

impl std::fmt::Display for OfiAssumeOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OfiAssumeOrder::Provider => "provider",
            OfiAssumeOrder::Weakest => "weakest",
        })
    }
}

/// The most queue pairs `SYMMEM_IB_QPS_PER_PEER` accepts.
pub const MAX_IB_QPS_PER_PEER: usize = 64;

/// Which RDMA devices and ports the ib transport may use (`SYMMEM_HCA_LIST`), with NCCL's
/// syntax for `NCCL_IB_HCA`: `mlx5_0:1,mlx5_1` (name prefixes, each with an optional
/// port), `=mlx5_0` (exact names), `^mlx5_1` (every device except those listed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HcaFilter {
    /// `^`: the entries name what to leave out.
    pub exclude: bool,
    /// `=`: names match exactly instead of by prefix.
    pub exact: bool,
    /// The listed devices; empty = every device.
    pub entries: Vec<HcaEntry>,
}

/// One entry of [`HcaFilter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HcaEntry {
    /// Device name, or a prefix of it.
    pub name: String,
    /// Port number (1-based); `None` = every port.
    pub port: Option<u8>,
}

impl HcaFilter {
    /// Parses `SYMMEM_HCA_LIST`'s value; the error says what is wrong with it.
    pub fn parse(v: &str) -> Result<Self, String> {
        let mut rest = v.trim();
        let exclude = rest.starts_with('^');
        if exclude {
            rest = &rest[1..];
        }
        let exact = rest.starts_with('=');
        if exact {
            rest = &rest[1..];
        }
        let mut entries = Vec::new();
        for item in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, port) = match item.split_once(':') {
                Some((name, port)) => {
                    let p = port
                        .trim()
                        .parse::<u8>()
                        .ok()
                        .filter(|&p| p >= 1)
                        .ok_or_else(|| {
                            format!("{item:?}: the port after ':' must be a number from 1 to 255")
                        })?;
                    (name.trim(), Some(p))
                }
                None => (item, None),
            };
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
            {
                return Err(format!(
                    "{item:?} is not a device name (letters, digits, _ - .), optionally followed by :port"
                ));
            }
            entries.push(HcaEntry {
                name: name.to_string(),
                port,
            });
        }
        if entries.is_empty() && (exclude || exact) {
            return Err("no device named after ^ or =".into());
        }
        Ok(HcaFilter {
            exclude,
            exact,
            entries,
        })
    }

    /// Whether port `port` of device `name` may be used.
    pub fn allows(&self, name: &str, port: u8) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        let listed = self.entries.iter().any(|e| {
            let name_ok = if self.exact {
                e.name == name
            } else {
                name.starts_with(&e.name)
            };
            name_ok && e.port.is_none_or(|p| p == port)
        });
        listed != self.exclude
    }
}

impl std::fmt::Display for HcaFilter {
    /// The filter in `SYMMEM_HCA_LIST`'s syntax (`(all)` when it lists nothing).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.entries.is_empty() {
            return f.write_str("(all)");
        }
        let entries: Vec<String> = self
            .entries
            .iter()
            .map(|e| match e.port {
                Some(p) => format!("{}:{p}", e.name),
                None => e.name.clone(),
            })
            .collect();
        let exclude = if self.exclude { "^" } else { "" };
        let exact = if self.exact { "=" } else { "" };
        write!(f, "{exclude}{exact}{}", entries.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hca_list_matches_like_nccl() {
        // Shown in messages and by symmem-info in the variable's own syntax.
        assert_eq!(HcaFilter::default().to_string(), "(all)");
        let shown = HcaFilter::parse(" ^=mlx5_1:1, mlx5_2 ")
            .unwrap()
            .to_string();
        assert_eq!(shown, "^=mlx5_1:1,mlx5_2");
        let all = HcaFilter::default();
        assert!(all.allows("mlx5_0", 1) && all.allows("rxe0", 2));

        let f = HcaFilter::parse("mlx5_0:1,mlx5_1").unwrap();
        assert!(f.allows("mlx5_0", 1));
        assert!(!f.allows("mlx5_0", 2), "port 2 is not listed");
        assert!(f.allows("mlx5_1", 1) && f.allows("mlx5_1", 2));
        assert!(!f.allows("mlx5_2", 1));

        // Prefixes by default: mlx5 is every mlx5 device.
        let f = HcaFilter::parse("mlx5").unwrap();
        assert!(f.allows("mlx5_0", 1) && f.allows("mlx5_10", 1) && !f.allows("bnxt_re0", 1));
        // = matches exactly: mlx5_1 is not mlx5_10.
        let f = HcaFilter::parse("=mlx5_1").unwrap();
        assert!(f.allows("mlx5_1", 1) && !f.allows("mlx5_10", 1));
        // ^ excludes.
        let f = HcaFilter::parse("^mlx5_1:1").unwrap();
        assert!(
            f.exclude && !f.allows("mlx5_1", 1) && f.allows("mlx5_1", 2) && f.allows("mlx5_0", 1)
        );
        let f = HcaFilter::parse("^=mlx5_1").unwrap();
        assert!(f.exclude && f.exact && !f.allows("mlx5_1", 1) && f.allows("mlx5_10", 1));

        for bad in ["mlx5_0:0", "mlx5_0:256", "mlx5_0:", ":1", "a b", "^", "="] {
            assert!(HcaFilter::parse(bad).is_err(), "{bad:?} parsed");
        }
        let why = HcaFilter::parse("mlx5_0:x").unwrap_err();
        assert!(why.contains("mlx5_0:x") && why.contains("port"), "{why}");
    }
}
