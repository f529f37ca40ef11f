//! Finding the RDMA device and port to use: the device list (`SYMMEM_HCA_LIST`), ports
//! that are ACTIVE, their link layer, and the GID (`SYMMEM_IB_GID_INDEX`).
//!
//! When nothing is usable the answer says exactly what was found ("libibverbs not found",
//! "no RDMA devices", "mlx5_0 port 1 is DOWN"), since that text ends up in the error of
//! `SYMMEM_REMOTE_TRANSPORT=ib` and the info log of `auto`.

use std::sync::Arc;

use sideway::ibverbs::address::GidType;
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{AtomicCapability, DeviceContext, LinkLayer, PortState};

use super::endpoint::Link;
use crate::config::TransportConfig;

/// The port this PE uses, with what connecting needs to know of it and its device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalPort {
    /// Device name (`mlx5_0`).
    pub device: String,
    /// Port number (1-based).
    pub port: u8,
    /// Link layer.
    pub link: Link,
    /// LID (InfiniBand).
    pub lid: u16,
    /// The chosen GID.
    pub gid: [u8; 16],
    /// Its index.
    pub gid_index: u8,
    /// Active MTU as `ibv_mtu` (1 = 256 … 5 = 4096).
    pub mtu: u8,
    /// Reads/atomics the device accepts in flight per QP (`max_qp_rd_atom`).
    pub rd_atomic: u8,
    /// Reads/atomics the device issues in flight per QP (`max_qp_init_rd_atom`).
    pub init_rd_atomic: u8,
    /// Most WRs per queue (`max_qp_wr`).
    pub max_qp_wr: u32,
    /// Most entries per CQ (`max_cqe`).
    pub max_cqe: u32,
}

impl LocalPort {
    /// "mlx5_0 port 1", for errors.
    pub(crate) fn name(&self) -> String {
        format!("{} port {}", self.device, self.port)
    }

    /// What `probe` reports: device, port, link layer, and address.
    pub(crate) fn describe(&self) -> String {
        match self.link {
            Link::Ib => format!("{} (InfiniBand, LID {})", self.name(), self.lid),
            Link::Ethernet => format!(
                "{} (RoCE, GID index {} = {})",
                self.name(),
                self.gid_index,
                std::net::Ipv6Addr::from(self.gid)
            ),
        }
    }
}

/// The device and port this PE would use, described, or why there is none.
pub(crate) fn probe(config: &TransportConfig) -> Result<String, String> {
    open(config).map(|(_, port)| port.describe())
}

/// Why the device list could not be read, from `ibv_get_device_list`'s errno.
pub(crate) fn list_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        // rdma-mummy-sys sets EOPNOTSUPP when it cannot dlopen libibverbs.so.1.
        Some(libc::EOPNOTSUPP) => {
            "libibverbs not found (libibverbs.so.1 could not be loaded; install rdma-core's libibverbs)".into()
        }
        Some(libc::ENOSYS) => {
            "no RDMA devices (the kernel has no RDMA support loaded: ibv_get_device_list returned ENOSYS)".into()
        }
        _ => format!("ibv_get_device_list failed: {e}"),
    }
}

/// The upper-case name of a port state, as `ibv_devinfo` prints it.
pub(crate) fn port_state_name(s: PortState) -> &'static str {
    match s {
        PortState::Nop => "NOP",
        PortState::Down => "DOWN",
        PortState::Initializing => "INIT",
        PortState::Armed => "ARMED",
        PortState::Active => "ACTIVE",
        PortState::ActiveDefer => "ACTIVE_DEFER",
    }
}

/// One GID table entry of a port, as the chooser sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GidInfo {
    /// Index in the port's table.
    pub index: u32,
    /// Whether it is a RoCE v2 GID.
    pub roce_v2: bool,
    /// The GID.
    pub gid: [u8; 16],
}

fn is_ipv4_mapped(g: &[u8; 16]) -> bool {
    g[..10] == [0; 10] && g[10] == 0xff && g[11] == 0xff
}

fn is_link_local(g: &[u8; 16]) -> bool {
    g[0] == 0xfe && g[1] & 0xc0 == 0x80
}

/// The GID index to use on a port with `entries`: `wanted` (`SYMMEM_IB_GID_INDEX`) when
/// set and present, else on InfiniBand index 0, and on RoCE the first RoCE v2 GID of an
/// IPv4 address, then any routable RoCE v2 GID, then any routable GID (a link-local or
/// RoCE v1 GID makes RTR time out across subnets: `gpu-rdma-facts.md` §8).
pub(crate) fn choose_gid(
    link: Link,
    entries: &[GidInfo],
    wanted: Option<u32>,
) -> Result<GidInfo, String> {
    let usable = |e: &&GidInfo| e.gid != [0; 16];
    if let Some(w) = wanted {
        return entries
            .iter()
            .filter(usable)
            .find(|e| e.index == w)
            .copied()
            .ok_or_else(|| {
                let have: Vec<String> = entries
                    .iter()
                    .filter(usable)
                    .map(|e| e.index.to_string())
                    .collect();
                format!(
                    "{}={w} is not a valid GID on this port (valid indices: {})",
                    crate::config::var::IB_GID_INDEX,
                    if have.is_empty() {
                        "none".into()
                    } else {
                        have.join(", ")
                    }
                )
            });
    }
    let pick = match link {
        Link::Ib => entries.iter().filter(usable).find(|e| e.index == 0),
        Link::Ethernet => entries
            .iter()
            .filter(usable)
            .find(|e| e.roce_v2 && is_ipv4_mapped(&e.gid))
            .or_else(|| {
                entries
                    .iter()
                    .filter(usable)
                    .find(|e| e.roce_v2 && !is_link_local(&e.gid))
            })
            .or_else(|| {
                entries
                    .iter()
                    .filter(usable)
                    .find(|e| !is_link_local(&e.gid))
            }),
    };
    pick.copied().ok_or_else(|| {
        "no usable GID on this port (only empty or link-local GIDs; give the interface an IP address or set SYMMEM_IB_GID_INDEX)".into()
    })
}

/// Opens the first usable port of the first device `SYMMEM_HCA_LIST` allows, or says
/// what was found instead.
pub(crate) fn open(config: &TransportConfig) -> Result<(Arc<DeviceContext>, LocalPort), String> {
    let list = DeviceList::new().map_err(|e| {
        let sideway::ibverbs::device::GetDeviceListErrorKind::Ibverbs(io) = &e.0 else {
            return format!("ibv_get_device_list failed: {e}");
        };
        list_error(io)
    })?;
    if list.is_empty() {
        return Err("no RDMA devices".into());
    }
    let names: Vec<String> = list.iter().map(|d| d.name()).collect();
    let mut found = Vec::new();
    for dev in list.iter() {
        let name = dev.name();
        // A device with no allowed port is skipped without opening it.
        if !(1..=u8::MAX).any(|p| config.hca_filter.allows(&name, p)) {
            continue;
        }
        let ctx = match dev.open() {
            Ok(c) => c,
            Err(e) => {
                found.push(format!("{name} cannot be opened ({e}: {:?})", e.0));
                continue;
            }
        };
        match usable_port(&ctx, &name, config) {
            Ok(port) => return Ok((ctx, port)),
            Err(why) => found.extend(why),
        }
    }
    if found.is_empty() {
        return Err(format!(
            "no RDMA device matches SYMMEM_HCA_LIST={} (found: {})",
            config.hca_filter,
            names.join(", ")
        ));
    }
    Err(found.join("; "))
}

/// The GID a port's queue pairs use (`SYMMEM_IB_GID_INDEX`, else the best for its link),
/// or why it has none: InfiniBand works without one (LID routing, no GRH).
fn port_gid(
    ctx: &DeviceContext,
    name: &str,
    port: u8,
    link: Link,
    gid_index: Option<u32>,
) -> Result<GidInfo, String> {
    let entries: Vec<GidInfo> = ctx
        .query_gid_table()
        .map_err(|e| format!("{name} port {port}: reading the GID table failed ({e})"))?
        .iter()
        .filter(|e| e.port_num() == port as u32)
        .map(|e| GidInfo {
            index: e.gid_index(),
            roce_v2: e.gid_type() == GidType::RoceV2,
            gid: e.gid().raw,
        })
        .collect();
    match choose_gid(link, &entries, gid_index) {
        Ok(g) => Ok(g),
        Err(_) if link == Link::Ib && gid_index.is_none() => Ok(GidInfo {
            index: 0,
            roce_v2: false,
            gid: [0; 16],
        }),
        Err(e) => Err(format!("{name} port {port}: {e}")),
    }
}

/// The first usable port of an opened device, or why each port is not.
fn usable_port(
    ctx: &DeviceContext,
    name: &str,
    config: &TransportConfig,
) -> Result<LocalPort, Vec<String>> {
    let attr = ctx
        .query_device()
        .map_err(|e| vec![format!("{name}: ibv_query_device failed ({e}: {:?})", e.0)])?;
    if attr.atomic_capability() == AtomicCapability::None {
        return Err(vec![format!(
            "{name} has no RDMA atomics (IBV_ATOMIC_NONE); symmem's AMOs and signals need them"
        )]);
    }
    let mut why = Vec::new();
    for port in 1..=attr.phys_port_cnt() {
        if !config.hca_filter.allows(name, port) {
            continue;
        }
        let pa = match ctx.query_port(port) {
            Ok(p) => p,
            Err(e) => {
                why.push(format!("{name} port {port}: ibv_query_port failed ({e})"));
                continue;
            }
        };
        let state = pa.port_state();
        if state != PortState::Active {
            why.push(format!("{name} port {port} is {}", port_state_name(state)));
            continue;
        }
        let link = match pa.link_layer() {
            LinkLayer::Ethernet => Link::Ethernet,
            // Unspecified is how older providers report InfiniBand.
            LinkLayer::InfiniBand | LinkLayer::Unspecified => Link::Ib,
        };
        let gid = match port_gid(ctx, name, port, link, config.ib_gid_index) {
            Ok(g) => g,
            Err(e) => {
                why.push(e);
                continue;
            }
        };
        if link == Link::Ib && pa.lid() == 0 {
            why.push(format!(
                "{name} port {port} is InfiniBand with LID 0 (no subnet manager?)"
            ));
            continue;
        }
        let Ok(gid_index) = u8::try_from(gid.index) else {
            why.push(format!(
                "{name} port {port}: GID index {} does not fit the address handle's 8 bits",
                gid.index
            ));
            continue;
        };
        let clamp = |v: i32| v.clamp(0, u8::MAX as i32) as u8;
        return Ok(LocalPort {
            device: name.to_string(),
            port,
            link,
            lid: pa.lid(),
            gid: gid.gid,
            gid_index,
            mtu: pa.active_mtu() as u32 as u8,
            rd_atomic: clamp(attr.max_qp_rd_atom()),
            init_rd_atomic: clamp(attr.max_qp_init_rd_atom()),
            max_qp_wr: attr.max_qp_wr().max(1) as u32,
            max_cqe: attr.max_cqe().max(1) as u32,
        });
    }
    if why.is_empty() {
        why.push(format!(
            "{name} has no port that SYMMEM_HCA_LIST allows ({} ports)",
            attr.phys_port_cnt()
        ));
    }
    Err(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(index: u32, roce_v2: bool, gid: [u8; 16]) -> GidInfo {
        GidInfo {
            index,
            roce_v2,
            gid,
        }
    }

    const LINK_LOCAL: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    const V4: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7];
    const V6: [u8; 16] = [0x20, 0x01, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

    #[test]
    fn roce_prefers_v2_ipv4_then_routable_v2() {
        let table = [
            g(0, false, LINK_LOCAL),
            g(1, true, LINK_LOCAL),
            g(2, false, V4),
            g(3, true, V4),
        ];
        assert_eq!(choose_gid(Link::Ethernet, &table, None).unwrap().index, 3);
        let table = [
            g(0, false, LINK_LOCAL),
            g(1, true, LINK_LOCAL),
            g(2, true, V6),
        ];
        assert_eq!(choose_gid(Link::Ethernet, &table, None).unwrap().index, 2);
        let table = [g(0, false, LINK_LOCAL), g(1, true, LINK_LOCAL)];
        let e = choose_gid(Link::Ethernet, &table, None).unwrap_err();
        assert!(
            e.contains("link-local") && e.contains("SYMMEM_IB_GID_INDEX"),
            "{e}"
        );
    }

    #[test]
    fn an_explicit_gid_index_wins_or_is_an_error() {
        let table = [
            g(0, false, LINK_LOCAL),
            g(1, true, LINK_LOCAL),
            g(3, true, V4),
        ];
        assert_eq!(
            choose_gid(Link::Ethernet, &table, Some(1)).unwrap().index,
            1
        );
        let e = choose_gid(Link::Ethernet, &table, Some(2)).unwrap_err();
        assert!(
            e.contains("SYMMEM_IB_GID_INDEX=2") && e.contains("0, 1, 3"),
            "{e}"
        );
        assert_eq!(
            choose_gid(Link::Ib, &[g(0, false, V6)], None)
                .unwrap()
                .index,
            0
        );
    }

    #[test]
    fn list_errors_say_what_is_missing() {
        let e = list_error(&std::io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        assert!(e.starts_with("libibverbs not found"), "{e}");
        let e = list_error(&std::io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(e.starts_with("no RDMA devices"), "{e}");
        assert_eq!(port_state_name(PortState::Down), "DOWN");
        assert_eq!(port_state_name(PortState::Active), "ACTIVE");
    }

    #[test]
    fn describe_names_device_port_and_address() {
        let mut p = LocalPort {
            device: "mlx5_0".into(),
            port: 1,
            link: Link::Ethernet,
            lid: 0,
            gid: V4,
            gid_index: 3,
            mtu: 3,
            rd_atomic: 16,
            init_rd_atomic: 16,
            max_qp_wr: 1024,
            max_cqe: 4096,
        };
        assert_eq!(
            p.describe(),
            "mlx5_0 port 1 (RoCE, GID index 3 = ::ffff:10.0.0.7)"
        );
        p.link = Link::Ib;
        p.lid = 12;
        assert_eq!(p.describe(), "mlx5_0 port 1 (InfiniBand, LID 12)");
    }

    /// This machine has no RDMA device (and usually no libibverbs): the probe must say
    /// which of the two it found, in words a user can act on.
    #[test]
    fn probe_here_says_what_is_missing() {
        let config = TransportConfig::unset();
        match probe(&config) {
            Err(why) => assert!(
                why.starts_with("libibverbs not found") || why.starts_with("no RDMA devices"),
                "{why}"
            ),
            Ok(dev) => eprintln!("this machine has an RDMA device: {dev}"),
        }
    }
}
