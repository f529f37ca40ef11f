//! NUMA nodes: which CPUs each has (`/sys/devices/system/node/node*/cpulist`), which node a
//! PCI device sits on, and narrowing a set of CPUs to a device's node.

use std::path::Path;

use super::CpuSet;

/// Where Linux lists the NUMA nodes.
const NODES: &str = "/sys/devices/system/node";

/// One NUMA node: its number and its CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The node's number (`nodeN`).
    pub id: usize,
    /// Its CPUs (all of them, not only those this process may use).
    pub cpus: CpuSet,
}

/// The machine's NUMA nodes in order of their numbers; empty where Linux does not list
/// them (no `/sys/devices/system/node`: then the machine is one node).
pub fn nodes() -> Vec<Node> {
    let Ok(dir) = std::fs::read_dir(NODES) else {
        return Vec::new();
    };
    let mut nodes: Vec<Node> = dir
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let id = name.to_str()?.strip_prefix("node")?.parse().ok()?;
            let list = std::fs::read_to_string(entry.path().join("cpulist")).ok()?;
            Some(Node {
                id,
                cpus: list.parse().ok()?,
            })
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    nodes
}

/// The NUMA node of the PCI device `pci_bus_id` (`0000:1b:00.0`) as its sysfs
/// `numa_node` says: -1 where the platform does not know, `None` where it cannot be read.
pub fn pci_numa_node(pci_bus_id: &str) -> Option<i64> {
    let path = Path::new("/sys/bus/pci/devices")
        .join(pci_bus_id.to_ascii_lowercase())
        .join("numa_node");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The CPUs of `allowed` on node `numa_node`, when that is a real narrowing: `None` when
/// the node is unknown (negative, or not among `nodes`), when it has none of `allowed`
/// (never an empty set, never a CPU outside `allowed`), or when it has all of them.
pub fn narrow_to_node(allowed: &CpuSet, nodes: &[Node], numa_node: i64) -> Option<CpuSet> {
    let id = usize::try_from(numa_node).ok()?;
    let node = nodes.iter().find(|n| n.id == id)?;
    let narrowed = allowed.intersection(&node.cpus);
    (!narrowed.is_empty() && narrowed.len() < allowed.len()).then_some(narrowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_nodes() -> Vec<Node> {
        vec![
            Node {
                id: 0,
                cpus: "0-3,8-11".parse().unwrap(),
            },
            Node {
                id: 1,
                cpus: "4-7,12-15".parse().unwrap(),
            },
        ]
    }

    #[test]
    fn a_device_node_narrows_to_its_cpus_within_the_allowed_ones() {
        let all: CpuSet = "0-15".parse().unwrap();
        let narrowed = narrow_to_node(&all, &two_nodes(), 1).expect("node 1");
        assert_eq!(narrowed.to_string(), "4-7,12-15");
        let some: CpuSet = "2-5".parse().unwrap();
        let narrowed = narrow_to_node(&some, &two_nodes(), 0).expect("node 0");
        assert_eq!(narrowed.to_string(), "2-3");
    }

    #[test]
    fn an_unknown_node_or_an_empty_or_equal_intersection_leaves_the_cpus_alone() {
        let nodes = two_nodes();
        let all: CpuSet = "0-15".parse().unwrap();
        assert_eq!(narrow_to_node(&all, &nodes, -1), None, "unknown node");
        assert_eq!(narrow_to_node(&all, &nodes, 7), None, "no such node");
        let on_node_0: CpuSet = "0-1".parse().unwrap();
        assert_eq!(
            narrow_to_node(&on_node_0, &nodes, 1),
            None,
            "disjoint: never widen"
        );
        assert_eq!(
            narrow_to_node(&on_node_0, &nodes, 0),
            None,
            "already within"
        );
        assert_eq!(narrow_to_node(&all, &[], 0), None, "no node list");
    }
}
