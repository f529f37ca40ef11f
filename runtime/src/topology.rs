//! Who is where: node identity and process id of every PE.
//!
//! # Node identity
//! PEs with equal node identities share memory (they map each other's heaps and watch each
//! other's processes). `SYMMEM_NODE_ID` sets it, so that one machine can act as several
//! nodes. By default it is what decides whether two processes *can* share memory and
//! see each other's processes: the kernel they run on (its boot id,
//! `/proc/sys/kernel/random/boot_id`) and the IPC, network and PID namespaces they are in
//! (`/proc/self/ns/ipc`, `/proc/self/ns/net`, `/proc/self/ns/pid`; abstract Unix sockets,
//! which carry the heap fds, are per network namespace, and the heap exchange and peer
//! watch identify processes by pid, which means the same process only within one PID
//! namespace), composed by [`compose_node_id`]. Hostnames are not
//! an identity: containers on different machines often share one. They are only shown in
//! messages. Where `/proc` cannot be read, the hostname is the identity, and init says
//! why in a debug log.
//!
//! # The launcher's view
//! Where the launcher tells which node it placed a PE on
//! ([`Bootstrap::launcher_node`](symmem_bootstrap::Bootstrap::launcher_node): PMI-1's
//! `PMI_process_mapping`, PMIx's `PMIX_HOSTNAME`, Slurm's `SLURMD_NODENAME`, torchrun's
//! `GROUP_RANK`), two PEs are on one node only when the launcher *and* the machine identity
//! both say so ([`same_node`]). Launcher-same but machine-different (containers without a
//! shared IPC namespace, say) is two nodes, and init says why at info level; launcher-
//! different but machine-same (a simulated multi-node run) is two nodes too, as the
//! launcher says. `SYMMEM_NODE_ID` overrides both: the launcher's view is then not used.

use crate::error::{Error, Result};

/// The kernel's boot id: unique per boot of a machine.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
/// This process's IPC namespace (a link such as `ipc:[4026531839]`).
const IPC_NS: &str = "/proc/self/ns/ipc";
/// This process's network namespace (a link such as `net:[4026531840]`).
const NET_NS: &str = "/proc/self/ns/net";
/// This process's PID namespace (a link such as `pid:[4026531836]`).
const PID_NS: &str = "/proc/self/ns/pid";

/// The default node identity of this process (see [Node identity](self#node-identity)),
/// or, where `/proc` cannot tell, why not (each file that could not be read, and the
/// error); the caller then uses the hostname.
pub fn default_node_id() -> std::result::Result<String, String> {
    let link =
        |path: &str| std::fs::read_link(path).map(|target| target.to_string_lossy().into_owned());
    node_id_from(
        std::fs::read_to_string(BOOT_ID),
        [link(IPC_NS), link(NET_NS), link(PID_NS)],
    )
}

/// The node identity from what was read of the boot id and the IPC, network and PID
/// namespace links, or what could not be read.
fn node_id_from(
    boot_id: std::io::Result<String>,
    [ipc_ns, net_ns, pid_ns]: [std::io::Result<String>; 3],
) -> std::result::Result<String, String> {
    match (boot_id, ipc_ns, net_ns, pid_ns) {
        (Ok(boot), Ok(ipc), Ok(net), Ok(pid)) if !boot.trim().is_empty() => {
            Ok(compose_node_id(&boot, &ipc, &net, &pid))
        }
        (boot, ipc, net, pid) => {
            Err(
                [(BOOT_ID, boot), (IPC_NS, ipc), (NET_NS, net), (PID_NS, pid)]
                    .into_iter()
                    .filter_map(|(path, r)| match r {
                        Err(e) => Some(format!("cannot read {path}: {e}")),
                        Ok(v) if v.trim().is_empty() => Some(format!("{path} is empty")),
                        Ok(_) => None,
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        }
    }
}

/// Composes a node identity from the kernel boot id and the IPC, network and PID
/// namespace links (`ipc:[N]`, `net:[N]`, `pid:[N]`; namespace inode numbers are unique
/// within one boot): `boot=<boot id>,ipc=<N>,net=<N>,pid=<N>`. Equal on two processes
/// exactly when they run on the same kernel in the same IPC, network and PID namespaces.
pub fn compose_node_id(boot_id: &str, ipc_ns: &str, net_ns: &str, pid_ns: &str) -> String {
    // `ipc:[4026531839]` → `4026531839`; an unexpected form is kept whole.
    let inode = |link: &str| {
        let link = link.trim();
        link.split_once(":[")
            .and_then(|(_, rest)| rest.strip_suffix(']'))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .unwrap_or(link)
            .to_string()
    };
    format!(
        "boot={},ipc={},net={},pid={}",
        boot_id.trim(),
        inode(ipc_ns),
        inode(net_ns),
        inode(pid_ns)
    )
}

/// What each PE tells the others at init.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeInfo {
    /// Machine identity: `SYMMEM_NODE_ID`, or by default the boot id and IPC, network and
    /// PID namespaces (see [Node identity](self#node-identity)).
    pub node: String,
    /// The node the launcher placed the PE on, as `name (source)`, where it tells and
    /// `SYMMEM_NODE_ID` is not set (see [The launcher's view](self#the-launchers-view)).
    pub launcher: Option<String>,
    /// Hostname, for messages only.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// `SYMMEM_SYMMETRIC_SIZE` in bytes.
    pub heap_len: usize,
}

impl PeInfo {
    /// Serializes for the allgather: pid, heap length, the machine identity's length and
    /// text, the launcher's node's length ([`NO_LAUNCHER`] for none) and text, then the
    /// hostname.
    pub fn encode(&self) -> Vec<u8> {
        let launcher = self.launcher.as_deref().unwrap_or_default();
        let mut v = Vec::with_capacity(20 + self.node.len() + launcher.len() + self.host.len());
        v.extend_from_slice(&self.pid.to_le_bytes());
        v.extend_from_slice(&(self.heap_len as u64).to_le_bytes());
        v.extend_from_slice(&(self.node.len() as u32).to_le_bytes());
        v.extend_from_slice(self.node.as_bytes());
        let launcher_len = self
            .launcher
            .as_ref()
            .map_or(NO_LAUNCHER, |l| l.len() as u32);
        v.extend_from_slice(&launcher_len.to_le_bytes());
        v.extend_from_slice(launcher.as_bytes());
        v.extend_from_slice(self.host.as_bytes());
        v
    }

    /// Parses what [`Self::encode`] produced; `pe` names the sender in errors.
    pub fn decode(bytes: &[u8], pe: usize) -> Result<Self> {
        let malformed = || Error::Inconsistent {
            what: "init data",
            detail: format!(
                "PE {pe} sent {} malformed bytes (different symmem versions?)",
                bytes.len()
            ),
        };
        if bytes.len() < 16 {
            return Err(malformed());
        }
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| malformed());
        // The length at the start of `rest`, and what follows it.
        fn field(rest: &[u8]) -> Option<(u32, &[u8])> {
            let (len, rest) = rest.split_first_chunk::<4>()?;
            Some((u32::from_le_bytes(*len), rest))
        }
        let (node_len, rest) = field(&bytes[12..]).ok_or_else(malformed)?;
        let (node, rest) = rest
            .split_at_checked(node_len as usize)
            .ok_or_else(malformed)?;
        let (launcher_len, rest) = field(rest).ok_or_else(malformed)?;
        let (launcher, host) = match launcher_len {
            NO_LAUNCHER => (None, rest),
            len => {
                let (l, host) = rest.split_at_checked(len as usize).ok_or_else(malformed)?;
                (Some(text(l)?), host)
            }
        };
        Ok(PeInfo {
            pid: u32::from_le_bytes(bytes[..4].try_into().unwrap()),
            heap_len: u64::from_le_bytes(bytes[4..12].try_into().unwrap()) as usize,
            node: text(node)?,
            launcher,
            host: text(host)?,
        })
    }
}

/// The launcher-node length that [`PeInfo::encode`] writes when the launcher tells none.
const NO_LAUNCHER: u32 = u32::MAX;

/// Whether PEs `a` and `b` are on one node: both the launcher's view and the machine
/// identity say so (see [The launcher's view](self#the-launchers-view)).
pub fn same_node(a: &PeInfo, b: &PeInfo) -> bool {
    a.launcher == b.launcher && a.node == b.node
}

/// Why PEs `pe_a` and `pe_b` are different nodes although the launcher placed them on one:
/// which parts of their machine identities differ. `None` unless that is the case.
pub fn launcher_overruled(pe_a: usize, a: &PeInfo, pe_b: usize, b: &PeInfo) -> Option<String> {
    let launcher = a
        .launcher
        .as_ref()
        .filter(|l| b.launcher.as_ref() == Some(l))?;
    if a.node == b.node {
        return None;
    }
    // `boot=..,ipc=..`: name the parts that differ; another form is shown whole.
    let parts = |id: &str| -> Vec<(String, String)> {
        id.split(',')
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (String::new(), p.to_string()),
            })
            .collect()
    };
    let (pa, pb) = (parts(&a.node), parts(&b.node));
    let keyed = pa.iter().chain(&pb).all(|(k, _)| !k.is_empty())
        && pa.iter().map(|(k, _)| k).eq(pb.iter().map(|(k, _)| k));
    let differs = if keyed {
        pa.iter()
            .zip(&pb)
            .filter(|(x, y)| x.1 != y.1)
            .map(|((k, va), (_, vb))| format!("{k} {va} vs {vb}"))
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        format!("{:?} vs {:?}", a.node, b.node)
    };
    Some(format!(
        "the launcher places PE {pe_a} (host {}) and PE {pe_b} (host {}) on one node, {launcher}, but their machine identities differ ({differs}): they are different nodes and do not share memory (separate kernels, containers without shared IPC, network or PID namespaces, or SYMMEM_SIMULATE_NODES)",
        a.host, b.host
    ))
}

/// The job's layout as seen from one PE.
#[derive(Debug, Clone)]
pub struct Topology {
    me: usize,
    infos: Vec<PeInfo>,
    /// Each PE's node identity: the launcher's node and the machine identity.
    nodes: Vec<String>,
    local: Vec<usize>,
}

impl Topology {
    /// Builds the topology from everyone's [`PeInfo`]. When the launcher puts PEs on this
    /// PE's node that the machine identity does not, says so once at info level.
    pub fn new(me: usize, infos: Vec<PeInfo>) -> Self {
        let local = (0..infos.len())
            .filter(|&p| same_node(&infos[p], &infos[me]))
            .collect();
        let mut overruled =
            (0..infos.len()).filter_map(|p| launcher_overruled(me, &infos[me], p, &infos[p]));
        if let Some(why) = overruled.next() {
            let more = overruled.count();
            if more == 0 {
                tracing::info!("{why}");
            } else {
                tracing::info!("{why}; so are {more} more PEs that the launcher places there");
            }
        }
        let nodes = infos
            .iter()
            .map(|i| match &i.launcher {
                Some(l) => format!("{l} on {}", i.node),
                None => i.node.clone(),
            })
            .collect();
        Topology {
            me,
            infos,
            nodes,
            local,
        }
    }

    /// This PE.
    pub fn my_pe(&self) -> usize {
        self.me
    }

    /// Number of PEs.
    pub fn n_pes(&self) -> usize {
        self.infos.len()
    }

    /// PEs on this PE's node, including itself, ascending.
    pub fn local_pes(&self) -> &[usize] {
        &self.local
    }

    /// `pe`'s node identity: the launcher's node, where it tells, and the machine identity
    /// (`n07 (Slurm SLURMD_NODENAME) on boot=…`). Equal exactly for PEs on one node.
    pub fn node(&self, pe: usize) -> &str {
        &self.nodes[pe]
    }

    /// `pe`'s hostname (for messages; not an identity).
    pub fn host(&self, pe: usize) -> &str {
        &self.infos[pe].host
    }

    /// The node the launcher placed `pe` on, as `name (source)`, where it tells one.
    pub fn launcher(&self, pe: usize) -> Option<&str> {
        self.infos[pe].launcher.as_deref()
    }

    /// `pe`'s process id.
    pub fn pid(&self, pe: usize) -> u32 {
        self.infos[pe].pid
    }

    /// Every PE's heap length.
    pub fn heap_lens(&self) -> Vec<usize> {
        self.infos.iter().map(|i| i.heap_len).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_roundtrip_and_locality() {
        let a = PeInfo {
            node: "n0".into(),
            launcher: None,
            host: "box".into(),
            pid: 10,
            heap_len: 1 << 20,
        };
        // Same hostname, another node: the hostname does not decide.
        let b = PeInfo {
            node: "n1".into(),
            launcher: None,
            host: "box".into(),
            pid: 11,
            heap_len: 1 << 20,
        };
        assert_eq!(PeInfo::decode(&a.encode(), 0).unwrap(), a);
        assert!(PeInfo::decode(&[1, 2], 3)
            .unwrap_err()
            .to_string()
            .contains("PE 3"));
        let t = Topology::new(2, vec![a.clone(), b.clone(), a, b]);
        assert_eq!(t.local_pes(), &[0, 2]);
        assert_eq!((t.node(1), t.host(1)), ("n1", "box"));
        // A node length past the end is malformed, not a panic.
        let mut bad = t.infos[0].encode();
        bad[12..16].copy_from_slice(&1000u32.to_le_bytes());
        assert!(PeInfo::decode(&bad, 1).is_err());
        // With a launcher node, and cut anywhere: malformed, never a panic.
        let c = PeInfo {
            launcher: Some("n07 (Slurm SLURMD_NODENAME)".into()),
            ..t.infos[0].clone()
        };
        let bytes = c.encode();
        assert_eq!(PeInfo::decode(&bytes, 0).unwrap(), c);
        for cut in 0..bytes.len() - c.host.len() {
            assert!(PeInfo::decode(&bytes[..cut], 0).is_err(), "cut at {cut}");
        }
    }

    /// A PE on machine `machine` that the launcher places on `launcher`.
    fn pe(machine: &str, launcher: Option<&str>) -> PeInfo {
        PeInfo {
            node: machine.into(),
            launcher: launcher.map(Into::into),
            host: "box".into(),
            pid: 1,
            heap_len: 1 << 20,
        }
    }

    #[test]
    fn one_node_needs_the_launcher_and_the_machine_to_agree() {
        const M0: &str = "boot=b0,ipc=1,net=2,pid=3";
        const M1: &str = "boot=b0,ipc=9,net=2,pid=3";
        const L0: &str = "0 (PMI-1 PMI_process_mapping)";
        const L1: &str = "1 (PMI-1 PMI_process_mapping)";
        // Both agree: one node.
        assert!(same_node(&pe(M0, Some(L0)), &pe(M0, Some(L0))));
        assert_eq!(
            launcher_overruled(0, &pe(M0, Some(L0)), 1, &pe(M0, Some(L0))),
            None
        );
        // The launcher says one node, the machines differ: two nodes, and why.
        let (a, b) = (pe(M0, Some(L0)), pe(M1, Some(L0)));
        assert!(!same_node(&a, &b));
        let why = launcher_overruled(0, &a, 3, &b).unwrap();
        assert!(
            why.contains("PE 0") && why.contains("PE 3") && why.contains(L0),
            "{why}"
        );
        assert!(why.contains("ipc 1 vs 9") && !why.contains("net "), "{why}");
        // The launcher says two nodes on one machine (a simulated multi-node run): two.
        assert!(!same_node(&pe(M0, Some(L0)), &pe(M0, Some(L1))));
        assert_eq!(
            launcher_overruled(0, &pe(M0, Some(L0)), 1, &pe(M0, Some(L1))),
            None
        );
        // Both say two nodes: two.
        assert!(!same_node(&pe(M0, Some(L0)), &pe(M1, Some(L1))));
        assert_eq!(
            launcher_overruled(0, &pe(M0, Some(L0)), 1, &pe(M1, Some(L1))),
            None
        );
        // No launcher view (symrun, SYMMEM_NODE_ID): the machine identity alone.
        assert!(same_node(&pe(M0, None), &pe(M0, None)));
        assert!(!same_node(&pe(M0, None), &pe(M1, None)));
        // An identity not of the k=v form is shown whole.
        let why = launcher_overruled(0, &pe("rack3", Some(L0)), 1, &pe("rack4", Some(L0)));
        assert!(why.unwrap().contains("\"rack3\" vs \"rack4\""));
    }

    #[test]
    fn the_topology_follows_the_combined_rule() {
        const M0: &str = "boot=b0,ipc=1,net=2,pid=3";
        const M1: &str = "boot=b0,ipc=9,net=2,pid=3";
        let infos = vec![
            pe(M0, Some("a (torchrun GROUP_RANK)")),
            pe(M0, Some("a (torchrun GROUP_RANK)")),
            pe(M1, Some("a (torchrun GROUP_RANK)")),
            pe(M0, Some("b (torchrun GROUP_RANK)")),
        ];
        let t = Topology::new(0, infos);
        assert_eq!(t.local_pes(), &[0, 1]);
        assert_eq!(t.node(0), format!("a (torchrun GROUP_RANK) on {M0}"));
        assert_ne!(t.node(0), t.node(2));
        assert_ne!(t.node(0), t.node(3));
        assert_eq!(Topology::new(0, vec![pe(M0, None)]).node(0), M0);
    }

    const BOOT: &str = "b965e65f-a9f3-4be0-a7e7-4654661f12e6\n";

    #[test]
    fn node_identity_is_boot_id_and_namespaces() {
        const IPC: &str = "ipc:[4026531839]";
        const NET: &str = "net:[4026531833]";
        const PID: &str = "pid:[4026531836]";
        let id = compose_node_id(BOOT, IPC, NET, PID);
        assert_eq!(
            id,
            "boot=b965e65f-a9f3-4be0-a7e7-4654661f12e6,ipc=4026531839,net=4026531833,pid=4026531836"
        );
        // Each part tells nodes apart: another boot, another IPC, network or PID namespace.
        let others = [
            compose_node_id("0d7c3f0e-1111-4222-8333-944445555666", IPC, NET, PID),
            compose_node_id(BOOT, "ipc:[4026532000]", NET, PID),
            compose_node_id(BOOT, IPC, "net:[4026532001]", PID),
            compose_node_id(BOOT, IPC, NET, "pid:[4026532002]"),
        ];
        for other in others {
            assert_ne!(id, other);
        }
        // The same inputs, however read (trailing newline or not), give the same identity.
        assert_eq!(
            id,
            compose_node_id(BOOT.trim(), "ipc:[4026531839]\n", NET, "pid:[4026531836]\n")
        );
        // An unexpected link form is kept whole rather than lost.
        assert_eq!(
            compose_node_id("b", "weird", "net:[]", "pid:[7]"),
            "boot=b,ipc=weird,net=net:[],pid=7"
        );
    }

    #[test]
    fn unreadable_proc_says_what_could_not_be_read() {
        let ok = |s: &str| Ok(s.to_string());
        let denied = || Err(std::io::Error::from_raw_os_error(libc::EACCES));
        let links = || [ok("ipc:[1]"), ok("net:[2]"), ok("pid:[3]")];
        assert_eq!(
            node_id_from(ok(BOOT), links()),
            Ok(compose_node_id(BOOT, "ipc:[1]", "net:[2]", "pid:[3]"))
        );
        assert!(node_id_from(denied(), links())
            .unwrap_err()
            .contains(BOOT_ID));
        assert!(node_id_from(ok(" \n"), links())
            .unwrap_err()
            .contains(BOOT_ID));
        for (i, path) in [IPC_NS, NET_NS, PID_NS].into_iter().enumerate() {
            let mut l = links();
            l[i] = denied();
            let why = node_id_from(ok(BOOT), l).unwrap_err();
            assert!(why.contains(path), "{why}");
        }
        let why = node_id_from(denied(), [ok("ipc:[1]"), denied(), ok("pid:[3]")]).unwrap_err();
        assert!(
            why.contains(BOOT_ID) && why.contains(NET_NS) && !why.contains(IPC_NS),
            "{why}"
        );
        assert!(why.contains("Permission denied"), "{why}");
    }

    #[test]
    fn this_process_has_a_proc_node_identity() {
        // Where /proc is mounted (every Linux CI machine), the default is not the hostname.
        if std::path::Path::new(BOOT_ID).exists() {
            let id = default_node_id().unwrap();
            assert!(
                id.starts_with("boot=")
                    && id.contains(",ipc=")
                    && id.contains(",net=")
                    && id.contains(",pid="),
                "{id}"
            );
            assert_eq!(Ok(id), default_node_id(), "stable within a process");
        }
    }
}
