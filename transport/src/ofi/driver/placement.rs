//! Placement: which libfabric domain (NIC) this PE opens. The one nearest the PE, by NUMA
//! node: its GPU's where it has one and sysfs knows the GPU's node, else those of the
//! CPUs it may run on; the PEs of a machine near the same nodes spread over the nearest
//! domains by their rank among themselves. `SYMMEM_OFI_DOMAIN` pins one.
//!
//! Only domains of libfabric's first fabric are candidates: the domains of one provider
//! can sit on different networks (tcp offers one per interface, `lo` included), and PEs
//! on different networks would not reach each other; a fabric's NICs (`mlx5_0` and
//! `mlx5_1` on one InfiniBand subnet, a node's `cxi*` or efa devices) reach each other.
//!
//! [`choose`] is pure; [`Sysfs`] reads where each domain, CPU and GPU sits from a sysfs
//! tree (`/sys`, or a test's).

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};

use symmem_bootstrap::affinity::CpuSet;

use crate::config::var::OFI_DOMAIN;
use crate::ofi::ffi;

/// A domain the provider offers, as `fi_getinfo` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::ofi) struct Offered {
    /// The domain's name (`mlx5_0`, `cxi0`, `rdmap16s27-rdm`, `eth0`).
    pub(in crate::ofi) name: String,
    /// Its fabric's name.
    pub(in crate::ofi) fabric: String,
    /// The NIC's PCI address (`0000:1b:00.0`), where the provider gives it (`fi_nic`).
    pub(in crate::ofi) pci: Option<String>,
}

/// A domain with the NUMA node sysfs gives for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::ofi) struct Located {
    /// What the provider offers.
    pub(in crate::ofi) offered: Offered,
    /// Its NUMA node, where sysfs knows it.
    pub(in crate::ofi) node: Option<u32>,
}

/// Where this PE sits: the NUMA nodes it is near.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::ofi) struct Near {
    /// The nodes (none where sysfs says nothing).
    pub(in crate::ofi) nodes: Vec<u32>,
    /// What sits there, for the log ("its GPU 0000:1b:00.0", "its CPUs 0-7").
    pub(in crate::ofi) what: String,
}

impl Near {
    /// A key naming the nodes, equal for PEs near the same ones (the machine round groups
    /// PEs by it: [`crate::ofi::driver::machine`]).
    pub(in crate::ofi) fn key(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(u32::to_string).collect();
        nodes.join(",")
    }
}

/// The domain chosen, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::ofi) struct Choice {
    /// The domain.
    pub(in crate::ofi) domain: Offered,
    /// Why, for the init log: the NUMA nodes compared.
    pub(in crate::ofi) why: String,
}

/// The domain this PE opens among `offered` (in `fi_getinfo`'s order, each with the
/// NUMA node sysfs gives it), for a PE `near` some NUMA nodes, `rank`-th (from 0) of the
/// PEs of its machine near the same nodes; `pinned` is `SYMMEM_OFI_DOMAIN`. Errors name
/// the domains offered.
pub(in crate::ofi) fn choose(
    offered: &[Located],
    near: &Near,
    rank: usize,
    pinned: Option<&str>,
) -> Result<Choice, String> {
    let first = offered
        .first()
        .ok_or("the provider offers no domain (fi_getinfo listed none)")?;
    if let Some(name) = pinned {
        return match offered.iter().find(|d| d.offered.name == name) {
            Some(d) => Ok(Choice {
                domain: d.offered.clone(),
                why: format!("{OFI_DOMAIN}={name} ({})", node_text(d.node)),
            }),
            None => Err(format!(
                "{OFI_DOMAIN}={name:?}: the provider offers no such domain; it offers {}",
                listed(offered)
            )),
        };
    }
    // The domains this PE may open: those on libfabric's first fabric.
    let fabric = &first.offered.fabric;
    let same: Vec<&Located> = offered
        .iter()
        .filter(|d| d.offered.fabric == *fabric)
        .collect();
    let located: Vec<&Located> = same.iter().copied().filter(|d| d.node.is_some()).collect();
    if located.is_empty() {
        return Ok(Choice {
            domain: first.offered.clone(),
            why: format!(
                "libfabric's first: sysfs gives no NUMA node for any domain of fabric {fabric} ({})",
                listed(offered)
            ),
        });
    }
    let nearest: Vec<&Located> = located
        .iter()
        .copied()
        .filter(|d| d.node.is_some_and(|n| near.nodes.contains(&n)))
        .collect();
    let (pool, how) = if near.nodes.is_empty() {
        (
            located.clone(),
            format!("the NUMA node of {} is unknown", near.what),
        )
    } else if nearest.is_empty() {
        (
            located.clone(),
            format!("none is on NUMA node {} of {}", near.key(), near.what),
        )
    } else {
        (
            nearest,
            format!("nearest {} on NUMA node {}", near.what, near.key()),
        )
    };
    let pick = pool[rank % pool.len()];
    let names: Vec<&str> = pool.iter().map(|d| d.offered.name.as_str()).collect();
    Ok(Choice {
        domain: pick.offered.clone(),
        why: format!(
            "{how}: {} of fabric {fabric} ({}); this PE is {} of this machine's PEs near the same nodes, so the {} of them{}",
            if pool.len() == 1 { "the only domain" } else { "domains" },
            names.join(", "),
            ordinal(rank),
            ordinal(rank % pool.len()),
            if same.len() > located.len() {
                format!(" (sysfs gives no NUMA node for {})", unlocated(&same))
            } else {
                String::new()
            }
        ),
    })
}

/// "1st", "2nd", … for a rank from 0.
fn ordinal(rank: usize) -> String {
    let n = rank + 1;
    let suffix = match (n % 10, n % 100) {
        (1, r) if r != 11 => "st",
        (2, r) if r != 12 => "nd",
        (3, r) if r != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// "NUMA node 1" or "no NUMA node known".
fn node_text(node: Option<u32>) -> String {
    node.map_or("no NUMA node known".to_string(), |n| {
        format!("NUMA node {n}")
    })
}

/// The domains offered, each with its fabric and node: "mlx5_0 (fabric IB-0xfe80…, NUMA
/// node 0), eth0 (…)".
fn listed(offered: &[Located]) -> String {
    let all: Vec<String> = offered
        .iter()
        .map(|d| {
            format!(
                "{} (fabric {}, {})",
                d.offered.name,
                d.offered.fabric,
                node_text(d.node)
            )
        })
        .collect();
    all.join(", ")
}

/// The names of the domains without a NUMA node.
fn unlocated(domains: &[&Located]) -> String {
    let names: Vec<&str> = domains
        .iter()
        .filter(|d| d.node.is_none())
        .map(|d| d.offered.name.as_str())
        .collect();
    names.join(", ")
}

/// A sysfs tree: where NICs, GPUs and CPUs sit.
pub(in crate::ofi) struct Sysfs {
    root: PathBuf,
}

/// The sysfs classes whose entries are named after libfabric domains (verbs, efa, psm3
/// and opx devices under `infiniband`, HPE Slingshot's under `cxi`, tcp's interfaces
/// under `net`).
const CLASSES: &[&str] = &["infiniband", "cxi", "net"];

/// Suffixes providers add to a device's name to name a domain (efa's `-rdm`/`-dgrm`,
/// verbs' `-xrc`).
const DOMAIN_SUFFIXES: &[&str] = &["-rdm", "-dgrm", "-xrc"];

impl Sysfs {
    /// The machine's own (`/sys`).
    pub(in crate::ofi) fn here() -> Self {
        Sysfs::at("/sys")
    }

    /// The tree at `root`.
    pub(in crate::ofi) fn at(root: impl Into<PathBuf>) -> Self {
        Sysfs { root: root.into() }
    }

    /// The NUMA node of `offered`: its PCI device's where the provider names it, else the
    /// device behind the sysfs class entry named after the domain; `None` where sysfs has
    /// neither or says -1 (a virtual interface, a single-node machine's firmware).
    pub(in crate::ofi) fn locate(&self, offered: &Offered) -> Located {
        let by_pci = offered.pci.as_deref().and_then(|pci| self.pci_node(pci));
        let node = by_pci.or_else(|| {
            let device = DOMAIN_SUFFIXES
                .iter()
                .find_map(|s| offered.name.strip_suffix(s))
                .unwrap_or(&offered.name);
            CLASSES.iter().find_map(|class| {
                self.node_file(
                    &self
                        .root
                        .join("class")
                        .join(class)
                        .join(device)
                        .join("device"),
                )
            })
        });
        Located {
            offered: offered.clone(),
            node,
        }
    }

    /// The NUMA node of the PCI device at `address` (`0000:1b:00.0`; CUDA's
    /// `00000000:1B:00.0` too).
    pub(in crate::ofi) fn pci_node(&self, address: &str) -> Option<u32> {
        let (domain, rest) = address.split_once(':')?;
        let domain = u32::from_str_radix(domain, 16).ok()?;
        let address = format!("{domain:04x}:{}", rest.to_ascii_lowercase());
        self.node_file(&self.root.join("bus/pci/devices").join(address))
    }

    /// The NUMA nodes of `cpus` (`devices/system/node/node*/cpulist`), in order.
    pub(in crate::ofi) fn cpu_nodes(&self, cpus: &CpuSet) -> Vec<u32> {
        let Ok(dir) = std::fs::read_dir(self.root.join("devices/system/node")) else {
            return Vec::new();
        };
        let nodes: BTreeSet<u32> = dir
            .flatten()
            .filter_map(|entry| {
                let id = entry
                    .file_name()
                    .to_str()?
                    .strip_prefix("node")?
                    .parse()
                    .ok()?;
                let list = std::fs::read_to_string(entry.path().join("cpulist")).ok()?;
                let node_cpus: CpuSet = list.trim().parse().ok()?;
                (!node_cpus.intersection(cpus).is_empty()).then_some(id)
            })
            .collect();
        nodes.into_iter().collect()
    }

    /// What this PE is near: its GPU's node (`gpu`: its PCI bus id) where sysfs knows it,
    /// else the nodes of `cpus`, the CPUs it may run on.
    pub(in crate::ofi) fn near(&self, gpu: Option<&str>, cpus: &CpuSet) -> Near {
        if let Some(node) = gpu.and_then(|bus| self.pci_node(bus)) {
            return Near {
                nodes: vec![node],
                what: format!("its GPU {}", gpu.unwrap_or_default()),
            };
        }
        Near {
            nodes: self.cpu_nodes(cpus),
            what: format!(
                "its CPUs {cpus}{}",
                gpu.map_or(String::new(), |bus| format!(
                    " (sysfs gives no NUMA node for its GPU {bus})"
                ))
            ),
        }
    }

    /// The `numa_node` of the device at `device`, where it is a node (not -1).
    fn node_file(&self, device: &Path) -> Option<u32> {
        std::fs::read_to_string(device.join("numa_node"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// The domains `provider` offers RDM endpoints with RMA and atomics on (with `FI_HMEM`
/// for a GPU heap), in `fi_getinfo`'s order, or why they cannot be listed.
pub(in crate::ofi) fn offered(provider: &str, hmem: bool) -> Result<Vec<Offered>, String> {
    let name =
        CString::new(provider).map_err(|_| format!("provider {provider:?} contains a NUL byte"))?;
    let mut buf = vec![0 as c_char; 16 << 10];
    // SAFETY: a NUL-terminated provider name; a writable buffer of the given length.
    let rc = unsafe {
        ffi::symmem_ofi_domains(
            name.as_ptr(),
            c_int::from(hmem),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "listing provider {provider}'s domains failed (fi_getinfo: {rc})"
        ));
    }
    Ok(parse_offered(&ffi::text(&buf)))
}

/// What this PE is near, on this machine: its GPU (`setup.gpu_pci_bus_id`), else the
/// CPUs its thread may run on (`sched_getaffinity`).
pub(in crate::ofi) fn this_pe(gpu_pci_bus_id: Option<&str>) -> Near {
    let cpus = CpuSet::of_this_thread().unwrap_or_else(|_| CpuSet::from_cpus([]));
    Sysfs::here().near(gpu_pci_bus_id, &cpus)
}

/// The domain PE `me` opens on `provider` (with `FI_HMEM` for a GPU heap): [`choose`] on
/// this machine's sysfs, logged with why.
pub(in crate::ofi) fn place(
    me: usize,
    provider: &str,
    hmem: bool,
    near: &Near,
    rank: usize,
    pinned: Option<&str>,
) -> Result<Offered, String> {
    let sysfs = Sysfs::here();
    let located: Vec<Located> = offered(provider, hmem)?
        .iter()
        .map(|d| sysfs.locate(d))
        .collect();
    let choice = choose(&located, near, rank, pinned)?;
    tracing::info!(
        "PE {me}: ofi domain {} ({provider}): {}",
        choice.domain.name,
        choice.why
    );
    Ok(choice.domain)
}

/// The shim's domain lines: name, fabric and PCI address (maybe empty), tab-separated.
fn parse_offered(lines: &str) -> Vec<Offered> {
    lines
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let name = fields.next().filter(|n| !n.is_empty())?;
            let fabric = fields.next().unwrap_or_default();
            let pci = fields.next().filter(|p| !p.is_empty());
            Some(Offered {
                name: name.to_string(),
                fabric: fabric.to_string(),
                pci: pci.map(str::to_string),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic sysfs tree in a temporary directory, removed when dropped.
    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str) -> Self {
            let root = std::env::temp_dir()
                .join(format!("symmem-placement-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(&root).unwrap();
            Tree(root)
        }

        fn write(&self, path: &str, text: &str) -> &Self {
            let path = self.0.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
            self
        }

        /// Two NUMA nodes of 4 CPUs each.
        fn two_nodes(&self) -> &Self {
            self.write("devices/system/node/node0/cpulist", "0-3\n")
                .write("devices/system/node/node1/cpulist", "4-7\n")
        }

        /// A device of class `class` named `name`, on `node`.
        fn device(&self, class: &str, name: &str, node: i32) -> &Self {
            self.write(
                &format!("class/{class}/{name}/device/numa_node"),
                &format!("{node}\n"),
            )
        }

        fn sysfs(&self) -> Sysfs {
            Sysfs::at(&self.0)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn offer(name: &str, fabric: &str, pci: Option<&str>) -> Offered {
        Offered {
            name: name.into(),
            fabric: fabric.into(),
            pci: pci.map(Into::into),
        }
    }

    fn cpus(list: &str) -> CpuSet {
        list.parse().unwrap()
    }

    /// Four InfiniBand NICs, two per NUMA node: a PE takes one on its CPUs' node, and the
    /// PEs near a node spread over its NICs by rank.
    #[test]
    fn several_nics_spread_the_pes_near_them_by_rank() {
        let tree = Tree::new("several");
        tree.two_nodes()
            .device("infiniband", "mlx5_0", 0)
            .device("infiniband", "mlx5_1", 0)
            .device("infiniband", "mlx5_2", 1)
            .device("infiniband", "mlx5_3", 1);
        let sysfs = tree.sysfs();
        let offered: Vec<Located> = (0..4)
            .map(|i| sysfs.locate(&offer(&format!("mlx5_{i}"), "IB-0xfe80", None)))
            .collect();
        let near = sysfs.near(None, &cpus("4-5"));
        assert_eq!(near.nodes, [1]);
        let picks: Vec<String> = (0..4)
            .map(|rank| choose(&offered, &near, rank, None).unwrap().domain.name)
            .collect();
        assert_eq!(picks, ["mlx5_2", "mlx5_3", "mlx5_2", "mlx5_3"]);
        let why = choose(&offered, &near, 1, None).unwrap().why;
        assert!(
            why.contains(
                "nearest its CPUs 4-5 on NUMA node 1: domains of fabric IB-0xfe80 (mlx5_2, mlx5_3)"
            ),
            "{why}"
        );
        assert!(why.contains("2nd of this machine's PEs"), "{why}");
    }

    /// A GPU PE is placed by its GPU's node, not its CPUs': here the GPU sits on node 1
    /// while the PE may run on node 0's CPUs.
    #[test]
    fn a_gpu_pe_takes_the_nic_on_its_gpus_node() {
        let tree = Tree::new("gpu");
        tree.two_nodes()
            .write("bus/pci/devices/0000:1b:00.0/numa_node", "0\n")
            .write("bus/pci/devices/0000:9a:00.0/numa_node", "1\n")
            .write("bus/pci/devices/0000:ca:00.0/numa_node", "1\n");
        let sysfs = tree.sysfs();
        let offered = [
            sysfs.locate(&offer("cxi0", "cxi", Some("0000:1b:00.0"))),
            sysfs.locate(&offer("cxi1", "cxi", Some("0000:9a:00.0"))),
        ];
        // CUDA names the bus with an upper-case, sometimes 8-digit, domain.
        let near = sysfs.near(Some("00000000:CA:00.0"), &cpus("0-3"));
        assert_eq!(near.nodes, [1], "{near:?}");
        let choice = choose(&offered, &near, 0, None).unwrap();
        assert_eq!(choice.domain.name, "cxi1");
        assert!(
            choice
                .why
                .contains("its GPU 00000000:CA:00.0 on NUMA node 1"),
            "{}",
            choice.why
        );
        // A GPU sysfs does not know falls back to the CPUs.
        let near = sysfs.near(Some("0000:ff:00.0"), &cpus("0-3"));
        assert_eq!(near.nodes, [0]);
        assert!(
            near.what.contains("no NUMA node for its GPU 0000:ff:00.0"),
            "{near:?}"
        );
        assert_eq!(
            choose(&offered, &near, 0, None).unwrap().domain.name,
            "cxi0"
        );
    }

    /// A PE whose CPUs span both nodes is equally near every NIC: the tie is spread by
    /// rank, in fi_getinfo's order; where no NIC is near, every located one is a
    /// candidate.
    #[test]
    fn numa_ties_spread_in_libfabrics_order() {
        let tree = Tree::new("ties");
        tree.two_nodes()
            .device("infiniband", "rdmap16s27", 1)
            .device("infiniband", "rdmap32s27", 0);
        let sysfs = tree.sysfs();
        // efa names its domains after the device, with a suffix.
        let offered = [
            sysfs.locate(&offer("rdmap16s27-rdm", "efa", None)),
            sysfs.locate(&offer("rdmap32s27-rdm", "efa", None)),
        ];
        assert_eq!(offered[0].node, Some(1));
        let near = sysfs.near(None, &cpus("0-7"));
        assert_eq!(near.nodes, [0, 1]);
        assert_eq!(
            choose(&offered, &near, 0, None).unwrap().domain.name,
            "rdmap16s27-rdm"
        );
        assert_eq!(
            choose(&offered, &near, 1, None).unwrap().domain.name,
            "rdmap32s27-rdm"
        );
        let far = Near {
            nodes: vec![2],
            what: "its CPUs 8-11".into(),
        };
        let choice = choose(&offered, &far, 1, None).unwrap();
        assert_eq!(choice.domain.name, "rdmap32s27-rdm");
        assert!(
            choice
                .why
                .starts_with("none is on NUMA node 2 of its CPUs 8-11"),
            "{}",
            choice.why
        );
    }

    /// Where sysfs knows no domain's node (tcp on a virtual interface, `lo`), the PE
    /// opens libfabric's first, as before placement; a domain without a node is never
    /// taken over one with; and only libfabric's first fabric is a candidate.
    #[test]
    fn without_sysfs_information_libfabrics_first_is_taken() {
        let tree = Tree::new("none");
        tree.write("class/net/eth0/address", "02:00:00:00:00:01\n")
            .device("net", "eth1", -1);
        let sysfs = tree.sysfs();
        let offered = [
            sysfs.locate(&offer("eth0", "192.0.2.0/24", None)),
            sysfs.locate(&offer("eth1", "192.0.2.0/24", None)),
            sysfs.locate(&offer("lo", "127.0.0.1/32", None)),
        ];
        assert!(offered.iter().all(|d| d.node.is_none()), "{offered:?}");
        let near = sysfs.near(None, &cpus("0-1"));
        assert!(near.nodes.is_empty(), "no node list: {near:?}");
        for rank in 0..3 {
            let choice = choose(&offered, &near, rank, None).unwrap();
            assert_eq!(choice.domain.name, "eth0");
            assert!(
                choice.why.starts_with("libfabric's first"),
                "{}",
                choice.why
            );
        }
        // eth2, on node 0 but another network: not a candidate; lo, unknown, not taken.
        let tree = Tree::new("fabrics");
        tree.two_nodes()
            .device("net", "eth2", 0)
            .device("net", "eth3", 1);
        let sysfs = tree.sysfs();
        let offered = [
            sysfs.locate(&offer("lo", "127.0.0.1/32", None)),
            sysfs.locate(&offer("eth2", "10.0.0.0/8", None)),
        ];
        let near = sysfs.near(None, &cpus("0"));
        assert_eq!(choose(&offered, &near, 0, None).unwrap().domain.name, "lo");
        let offered = [
            sysfs.locate(&offer("lo", "10.0.0.0/8", None)),
            sysfs.locate(&offer("eth3", "10.0.0.0/8", None)),
        ];
        let choice = choose(&offered, &near, 0, None).unwrap();
        assert_eq!(choice.domain.name, "eth3");
        assert!(
            choice.why.starts_with("none is on NUMA node 0"),
            "{}",
            choice.why
        );
        assert!(
            choice.why.contains("sysfs gives no NUMA node for lo"),
            "{}",
            choice.why
        );
    }

    /// `SYMMEM_OFI_DOMAIN` takes the domain named, on any fabric; one the provider does
    /// not offer is an error listing those it offers.
    #[test]
    fn a_pinned_domain_is_taken_or_named_with_those_offered() {
        let offered = [
            Located {
                offered: offer("mlx5_0", "IB-0xfe80", Some("0000:1b:00.0")),
                node: Some(0),
            },
            Located {
                offered: offer("lo", "127.0.0.1/32", None),
                node: None,
            },
        ];
        let near = Near {
            nodes: vec![0],
            what: "its CPUs 0-3".into(),
        };
        let choice = choose(&offered, &near, 0, Some("lo")).unwrap();
        assert_eq!(choice.domain.name, "lo");
        assert_eq!(choice.why, "SYMMEM_OFI_DOMAIN=lo (no NUMA node known)");
        let why = choose(&offered, &near, 0, Some("mlx5_9")).unwrap_err();
        assert_eq!(
            why,
            "SYMMEM_OFI_DOMAIN=\"mlx5_9\": the provider offers no such domain; it offers mlx5_0 (fabric IB-0xfe80, NUMA node 0), lo (fabric 127.0.0.1/32, no NUMA node known)"
        );
        assert!(choose(&[], &near, 0, None).is_err());
    }

    #[test]
    fn the_shims_domain_lines_are_parsed() {
        let parsed = parse_offered("eth0\t192.0.2.0/24\t\ncxi0\tcxi\t0000:1b:00.0\n\tx\t\n");
        assert_eq!(
            parsed,
            [
                offer("eth0", "192.0.2.0/24", None),
                offer("cxi0", "cxi", Some("0000:1b:00.0"))
            ]
        );
    }

    /// What libfabric offers here, on this machine's sysfs: tcp's domains are its
    /// interfaces, and the choice is one of them.
    #[test]
    fn this_machines_tcp_domains_are_listed_and_one_is_chosen() {
        let offered = offered("tcp;ofi_rxm", false).unwrap();
        assert!(!offered.is_empty());
        assert!(offered.iter().any(|d| d.name == "lo"), "{offered:?}");
        let sysfs = Sysfs::here();
        let located: Vec<Located> = offered.iter().map(|d| sysfs.locate(d)).collect();
        let near = sysfs.near(None, &CpuSet::of_this_thread().unwrap());
        let choice = choose(&located, &near, 0, None).unwrap();
        assert!(offered.contains(&choice.domain), "{choice:?}");
    }
}
