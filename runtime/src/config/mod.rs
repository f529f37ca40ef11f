//! Configuration from `SYMMEM_*` environment variables, read once at init.
//!
//! Each variable is declared once (`variables.rs`): its name, default, doc and category,
//! and for those [`Config`] holds, how a value is parsed and how the effective value is
//! shown. Parsing reads a variable's value or else that default (`read.rs`); the table of
//! them all ([`VARIABLES`]) is what init logs, what `symmem-info` prints and what the
//! list in the book (`docs/src/configuration.md`) is checked against. A bad value is an
//! error that names the variable; it never falls back to a default silently. An unknown
//! `SYMMEM_*` variable (a typo, usually) is warned about.

use std::time::Duration;

use symmem_bootstrap::BootstrapChoice;

pub use symmem_transport::config::{HcaEntry, HcaFilter, RemoteTransport, MAX_IB_QPS_PER_PEER};
use symmem_transport::config::{OfiAssumeOrder, OfiProgress, TransportConfig};

use crate::error::Error;

mod read;
mod variables;

use read::{parse_size, Reader};
pub use variables::*;

/// Default `SYMMEM_EXEC_STACK_SIZE`: kernels keep little on the stack (a GPU thread has a
/// few KiB), and 256 KiB leaves room for panic messages and debug builds.
pub const DEFAULT_EXEC_STACK: usize = 256 << 10;

/// How long a device wait may last when `SYMMEM_TIMEOUT` is not set: long enough for real
/// work, short enough that a kernel waiting for a silent peer fails with a name.
pub const DEFAULT_DEVICE_TIMEOUT: Duration = Duration::from_secs(60);

/// `SYMMEM_MAX_TEAMS` when unset: NVSHMEM's default (`NVSHMEM_MAX_TEAMS`), TEAM_WORLD and
/// TEAM_NODE included.
pub const DEFAULT_MAX_TEAMS: usize = 32;

/// The smallest `SYMMEM_MAX_TEAMS`: room for TEAM_WORLD and TEAM_NODE.
pub const MIN_MAX_TEAMS: usize = 2;

/// The largest `SYMMEM_MAX_TEAMS`.
pub const MAX_MAX_TEAMS: usize = 4096;
/// Smallest `SYMMEM_EXEC_STACK_SIZE`.
const MIN_EXEC_STACK: usize = 16 << 10;

/// Prefixes of variables set by launchers and test harnesses, not by users.
const INTERNAL_PREFIXES: &[&str] = &["SYMMEM_LAUNCH_", "SYMMEM_TEST_"];

/// What kind of PE to be (`SYMMEM_DEVICE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// A GPU PE when the CUDA driver loads and a GPU is visible, else a CPU PE.
    Auto,
    /// A CPU PE: host-memory heap, kernels on the CPU executor.
    Cpu,
    /// A GPU PE, or an error that says what is missing.
    Cuda,
}

/// When puts and signals to a peer become visible (`SYMMEM_ORDERING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryOrdering {
    /// In program order, as soon as issued (x86 CPU PEs, the default).
    Strict,
    /// Buffered and delivered in any order the memory model allows (a debugging mode).
    Weak,
}

/// The smallest `SYMMEM_NT_COPY_THRESHOLD`: at 4 KiB non-temporal stores measured 5×
/// slower than `memcpy` (17 against 97 GB/s), and a constant floor lets the compiler drop
/// the size test from `p`, `g` and every other fixed-size copy below it.
pub const MIN_NT_COPY: usize = 4 << 10;

/// The size from which host copies on mapped heaps use the runtime's vector copy, below
/// `SYMMEM_VECTOR_COPY_BELOW` (the smallest value it takes). Below it `memcpy` measured as
/// fast at every relative alignment; from about there on the development machine's
/// `memcpy` switches to `rep movsb`, which crawls on mutually misaligned buffers. A
/// constant, so that fixed-size copies below it keep no size test.
pub const MIN_VECTOR_COPY: usize = 2 << 10;

/// The smallest `SYMMEM_VECTOR_COPY_BELOW`: a band of at least 2 KiB (a bound of 2K
/// itself would leave the vector copy no size at all).
const MIN_VECTOR_COPY_BELOW: usize = 2 * MIN_VECTOR_COPY;

/// The smallest `SYMMEM_SLICED_COPY_FROM`: two slices (a copy of one slice is one
/// `memcpy`).
const MIN_SLICED_COPY_FROM: usize = 2 * crate::host_copy::SLICE;

/// A size bound of one host copy method: where it starts (`SYMMEM_NT_COPY_THRESHOLD`,
/// `SYMMEM_SLICED_COPY_FROM`) or ends (`SYMMEM_VECTOR_COPY_BELOW`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyBound {
    /// Chosen from this machine's caches (where the method measured faster).
    Auto,
    /// The method is never used.
    Off,
    /// This many bytes.
    At(usize),
}

impl CopyBound {
    /// `auto`, `off`, or a size of at least `min` bytes (`16M`).
    fn parse(v: &str, min: usize) -> Result<Self, String> {
        match v.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "off" | "never" | "none" => Ok(Self::Off),
            _ => match parse_size(v) {
                Ok(bytes) if bytes >= min => Ok(Self::At(bytes)),
                Ok(_) => Err(format!("must be at least {}K", min >> 10)),
                Err(why) => Err(format!("{why}; or auto, or off")),
            },
        }
    }
}

impl std::fmt::Display for CopyBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Off => f.write_str("off"),
            Self::At(bytes) => write!(f, "{bytes}"),
        }
    }
}

/// `SYMMEM_DEVICE`'s values.
const DEVICE_CHOICES: &[(&str, DeviceChoice)] = &[
    ("auto", DeviceChoice::Auto),
    ("cpu", DeviceChoice::Cpu),
    ("cuda", DeviceChoice::Cuda),
    ("gpu", DeviceChoice::Cuda),
];

/// `SYMMEM_DEBUG`'s values.
const LOG_LEVELS: &[(&str, &str)] = &[
    ("error", "error"),
    ("warn", "warn"),
    ("info", "info"),
    ("debug", "debug"),
    ("trace", "trace"),
];

/// `SYMMEM_OFI_PROGRESS`'s values.
const OFI_PROGRESS_CHOICES: &[(&str, OfiProgress)] = &[
    ("auto", OfiProgress::Auto),
    ("block", OfiProgress::Block),
    ("poll", OfiProgress::Poll),
    ("manual", OfiProgress::Manual),
];

/// `SYMMEM_OFI_ASSUME_ORDER`'s values.
const OFI_ASSUME_ORDER_CHOICES: &[(&str, OfiAssumeOrder)] = &[
    ("provider", OfiAssumeOrder::Provider),
    ("weakest", OfiAssumeOrder::Weakest),
];

/// `SYMMEM_ORDERING`'s values.
const ORDERINGS: &[(&str, MemoryOrdering)] = &[
    ("strict", MemoryOrdering::Strict),
    ("weak", MemoryOrdering::Weak),
];

/// Parsed configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `SYMMEM_SYMMETRIC_SIZE` in bytes.
    pub symmetric_size: usize,
    /// `SYMMEM_BOOTSTRAP`.
    pub bootstrap: BootstrapChoice,
    /// `SYMMEM_BOOTSTRAP_TIMEOUT`; [`symmem_bootstrap::duration::MAX_WAIT`] (one year) = no limit.
    pub bootstrap_timeout: Duration,
    /// `SYMMEM_TIMEOUT`; `None` = no limit (`0`, or one year or more).
    pub timeout: Option<Duration>,
    /// `SYMMEM_HANG_REPORT`: how long a host wait blocks before its PE gathers every
    /// PE's wait record and logs a hang report; `None` = off (`0`).
    pub hang_report: Option<Duration>,
    /// Whether `SYMMEM_HANG_REPORT` was set (not its default): then a side path that
    /// cannot start fails init; by default the job runs without reports, warned.
    pub hang_report_asked: bool,
    /// `SYMMEM_HANG_REPORT_FILE`: where hang reports are appended as JSON lines.
    pub hang_report_file: Option<std::path::PathBuf>,
    /// `SYMMEM_DEAD_PEER_TIMEOUT`: how long a TCP peer may stay silent before its
    /// connection fails; `None` = detection off (`0`, or one year or more).
    pub dead_peer_timeout: Option<Duration>,
    /// How long a device wait may last: `SYMMEM_TIMEOUT` when set, else
    /// [`DEFAULT_DEVICE_TIMEOUT`]; `None` = no limit.
    pub device_timeout: Option<Duration>,
    /// `SYMMEM_DEBUG`.
    pub debug: String,
    /// `SYMMEM_DEBUG_SUBSYS`; empty = all.
    pub debug_subsys: Vec<String>,
    /// `SYMMEM_DISABLE_P2P`.
    pub disable_p2p: bool,
    /// `SYMMEM_REMOTE_TRANSPORT`.
    pub remote_transport: RemoteTransport,
    /// `SYMMEM_NODE_ID`, or by default the kernel boot id and the IPC, network and PID
    /// namespaces (`boot=<boot id>,ipc=<inode>,net=<inode>,pid=<inode>`), or the hostname where
    /// `/proc` cannot tell (see `node_id_fallback`).
    pub node_id: String,
    /// `SYMMEM_SIMULATE_NODES`: the job's PEs form this many nodes (1 = by node id only).
    pub simulate_nodes: usize,
    /// `SYMMEM_ALLOW_PUBLIC_JOB_KEY`: a job on more than one node may run with a key
    /// derived from its public identity (launcher variables, no `SYMMEM_JOB_SECRET`).
    pub allow_public_job_key: bool,
    /// `SYMMEM_PROXY_SLOTS`: slots of the proxy ring.
    pub proxy_slots: usize,
    /// This machine's hostname, for messages only (containers may share one).
    pub hostname: String,
    /// Why `node_id` is the hostname, when `/proc` could not tell the default identity
    /// (logged at warn by init).
    pub node_id_fallback: Option<String>,
    /// `SYMMEM_NODE_ID` is set: it alone is the node identity, the launcher's node view is
    /// not used.
    pub node_id_set: bool,
    /// `SYMMEM_MAX_TEAMS`: teams that may exist at once on a PE, the predefined included.
    pub max_teams: usize,
    /// `SYMMEM_CHECK_COLLECTIVES`: verify host collectives' arguments across PEs over the
    /// remote transport too.
    pub check_collectives: bool,
    /// `SYMMEM_HCA_LIST`, parsed (its `Display` is the list again; no entries = all).
    pub hca_filter: HcaFilter,
    /// `SYMMEM_IB_GID_INDEX`.
    pub ib_gid_index: Option<u32>,
    /// `SYMMEM_IB_QPS_PER_PEER` (1 to [`MAX_IB_QPS_PER_PEER`]).
    pub ib_qps_per_peer: usize,
    /// `SYMMEM_ALLOW_HOST_STAGING`.
    pub allow_host_staging: bool,
    /// `SYMMEM_SOCKET_IFNAME`.
    pub socket_ifname: Option<String>,
    /// `SYMMEM_OFI_PROVIDER`.
    pub ofi_provider: Option<String>,
    /// `SYMMEM_OFI_PROGRESS`.
    pub ofi_progress: OfiProgress,
    /// `SYMMEM_OFI_DOMAIN`.
    pub ofi_domain: Option<String>,
    /// `SYMMEM_OFI_ASSUME_ORDER`.
    pub ofi_assume_order: OfiAssumeOrder,
    /// `SYMMEM_DEVICE`.
    pub device: DeviceChoice,
    /// `SYMMEM_EXEC_SEED`: the CPU executor's lane schedule; `None` = thread index order.
    pub exec_seed: Option<u64>,
    /// `SYMMEM_EXEC_STACK_SIZE`: bytes of stack per kernel thread of the CPU executor.
    pub exec_stack_size: usize,
    /// `SYMMEM_ORDERING`.
    pub ordering: MemoryOrdering,
    /// `SYMMEM_NT_COPY_THRESHOLD`.
    pub nt_copy: CopyBound,
    /// `SYMMEM_VECTOR_COPY_BELOW`: up to where host copies from [`MIN_VECTOR_COPY`] bytes
    /// use the runtime's vector copy instead of `memcpy`.
    pub vector_copy: CopyBound,
    /// `SYMMEM_SLICED_COPY_FROM`: from where host copies use `memcpy` in slices.
    pub sliced_copy: CopyBound,
    /// `SYMMEM_ORDERING_SEED`; `None` = chosen from the clock at init.
    pub ordering_seed: Option<u64>,
    /// `SYMMEM_SOCKET_FAULTS`: the seed of the socket transport's injected faults.
    pub socket_faults: Option<u64>,
    /// `SYMMEM_TEST_EXIT_AT` (testing only; acted on by `symmem_bootstrap::fault`).
    #[doc(hidden)]
    pub test_exit_at: Option<String>,
}

/// The subsystems `SYMMEM_DEBUG_SUBSYS` accepts; each is a set of `tracing` targets
/// (`logging.rs`), among them its own name.
pub const SUBSYSTEMS: &[&str] = &[
    "init",
    "heap",
    "bootstrap",
    "rma",
    "transport",
    "proxy",
    "coll",
];

impl Config {
    /// The transports' part of this configuration.
    pub(crate) fn transport(&self) -> TransportConfig {
        TransportConfig {
            remote_transport: self.remote_transport,
            weak_ordering: self.ordering == MemoryOrdering::Weak,
            ordering_seed: self.ordering_seed,
            timeout: self.timeout,
            socket_ifname: self.socket_ifname.clone(),
            socket_faults: self.socket_faults,
            dead_peer_timeout: self.dead_peer_timeout,
            hca_filter: self.hca_filter.clone(),
            ib_gid_index: self.ib_gid_index,
            ib_qps_per_peer: self.ib_qps_per_peer,
            allow_host_staging: self.allow_host_staging,
            ofi_provider: self.ofi_provider.clone(),
            ofi_progress: self.ofi_progress,
            ofi_domain: self.ofi_domain.clone(),
            ofi_assume_order: self.ofi_assume_order,
        }
    }
}

impl Config {
    /// Reads and validates every variable from the process environment.
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads every variable through `lookup` (the environment, or a map in tests): the
    /// value set, or its default from [`VARIABLES`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let r = Reader::new(lookup);
        let hostname = hostname()?;
        let node_id_set = r.set(&NODE_ID).is_some();
        let (node_id, node_id_fallback) = match r.optional(&NODE_ID)? {
            Some(v) => (v, None),
            None => match crate::topology::default_node_id() {
                Ok(id) => (id, None),
                Err(why) => (hostname.clone(), Some(why)),
            },
        };
        let timeout = r.read(&TIMEOUT)?;
        Ok(Config {
            device: r.read(&DEVICE)?,
            symmetric_size: r.read(&SYMMETRIC_SIZE)?,
            bootstrap: r.read(&BOOTSTRAP)?,
            bootstrap_timeout: r.read(&BOOTSTRAP_TIMEOUT)?,
            timeout,
            device_timeout: match r.set(&TIMEOUT) {
                Some(_) => timeout,
                None => Some(DEFAULT_DEVICE_TIMEOUT),
            },
            hang_report: r.read(&HANG_REPORT)?,
            hang_report_asked: r.set(&HANG_REPORT).is_some(),
            hang_report_file: r.optional(&HANG_REPORT_FILE)?,
            dead_peer_timeout: r.read(&DEAD_PEER_TIMEOUT)?,
            debug: r.read(&DEBUG)?,
            debug_subsys: r.read(&DEBUG_SUBSYS)?,
            disable_p2p: r.read(&DISABLE_P2P)?,
            remote_transport: r.read(&REMOTE_TRANSPORT)?,
            node_id,
            simulate_nodes: r.read(&SIMULATE_NODES)?,
            allow_public_job_key: r.read(&ALLOW_PUBLIC_JOB_KEY)?,
            max_teams: r.read(&MAX_TEAMS)?,
            check_collectives: r.read(&CHECK_COLLECTIVES)?,
            proxy_slots: r.read(&PROXY_SLOTS)?,
            hostname,
            node_id_fallback,
            node_id_set,
            hca_filter: r.optional(&HCA_LIST)?.unwrap_or_default(),
            ib_gid_index: r.optional(&IB_GID_INDEX)?,
            ib_qps_per_peer: r.read(&IB_QPS_PER_PEER)?,
            allow_host_staging: r.read(&ALLOW_HOST_STAGING)?,
            socket_ifname: r.optional(&SOCKET_IFNAME)?,
            ofi_provider: r.optional(&OFI_PROVIDER)?,
            ofi_progress: r.read(&OFI_PROGRESS)?,
            ofi_domain: r.optional(&OFI_DOMAIN)?,
            ofi_assume_order: r.read(&OFI_ASSUME_ORDER)?,
            exec_seed: r.optional(&EXEC_SEED)?,
            exec_stack_size: r.read(&EXEC_STACK_SIZE)?,
            ordering: r.read(&ORDERING)?,
            nt_copy: r.read(&NT_COPY_THRESHOLD)?,
            vector_copy: r.read(&VECTOR_COPY_BELOW)?,
            sliced_copy: r.read(&SLICED_COPY_FROM)?,
            ordering_seed: r.optional(&ORDERING_SEED)?,
            socket_faults: r.optional(&SOCKET_FAULTS)?,
            // Testing only: read where it acts (symmem_bootstrap::fault), checked here so
            // that a misspelt point is an error rather than a test that silently kills
            // nobody.
            test_exit_at: r.optional(&TEST_EXIT_AT)?,
        })
    }

    /// Names of `SYMMEM_*` variables in the environment that symmem does not know.
    pub fn unknown_variables() -> Vec<String> {
        std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| k.starts_with("SYMMEM_"))
            .filter(|k| !INTERNAL_PREFIXES.iter().any(|p| k.starts_with(p)))
            .filter(|k| !VARIABLES.iter().any(|v| v.name == k))
            .collect()
    }

    /// Where the node identity comes from (see `topology`'s docs), for the info log and
    /// `symmem-info`; `launcher` is the launcher's node view, as its bootstrap describes it.
    pub fn node_identity_source(&self, launcher: Option<&str>) -> String {
        if self.node_id_set {
            return format!(
                "{}={} (the launcher's node and the machine identity are not used)",
                NODE_ID.name(),
                self.node_id
            );
        }
        let machine = match &self.node_id_fallback {
            None => "the kernel boot id and IPC, network and PID namespaces",
            Some(_) => "the hostname (/proc cannot tell the boot id and namespaces)",
        };
        match launcher {
            Some(l) => format!(
                "the launcher's node, {l}, and {machine}: PEs share a node only when both agree"
            ),
            None => format!("{machine} (the launcher tells no node)"),
        }
    }

    /// The effective value of every variable this configuration holds, one
    /// `NAME=value` per entry, in the order of [`VARIABLES`].
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        VARIABLES
            .iter()
            .filter_map(|v| Some((v.name, v.value_in(self)?)))
            .collect()
    }
}

/// This machine's hostname.
fn hostname() -> Result<String, Error> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(Error::io(
            "reading the hostname (shown in messages; the node identity where /proc is unreadable)",
            std::io::Error::last_os_error(),
        ));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use symmem_bootstrap::duration;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, Error> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn weak_ordering_parses_and_bad_values_name_the_variable() {
        let c = cfg(&[]).unwrap();
        assert_eq!(
            (c.ordering, c.ordering_seed),
            (MemoryOrdering::Strict, None)
        );
        let c = cfg(&[("SYMMEM_ORDERING", "Weak"), ("SYMMEM_ORDERING_SEED", "7")]).unwrap();
        assert_eq!(
            (c.ordering, c.ordering_seed),
            (MemoryOrdering::Weak, Some(7))
        );
        let e = cfg(&[("SYMMEM_ORDERING", "relaxed")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("SYMMEM_ORDERING") && e.contains("relaxed"),
            "{e}"
        );
        let e = cfg(&[("SYMMEM_ORDERING_SEED", "-1")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("SYMMEM_ORDERING_SEED"), "{e}");
    }

    /// The defaults come from the table, once; the constants that code outside parsing
    /// uses must say the same.
    #[test]
    fn the_table_defaults_are_the_constants() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.max_teams, DEFAULT_MAX_TEAMS);
        assert_eq!(c.exec_stack_size, DEFAULT_EXEC_STACK);
        assert_eq!(c.device_timeout, Some(DEFAULT_DEVICE_TIMEOUT));
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.symmetric_size, 1 << 30);
        assert_eq!(c.bootstrap_timeout, Duration::from_secs(60));
        assert_eq!(c.dead_peer_timeout, Some(Duration::from_secs(30)));
        assert_eq!(c.transport().dead_peer_timeout, c.dead_peer_timeout);
        assert_eq!(c.timeout, None);
        assert!(!c.disable_p2p);
        assert_eq!(c.exec_seed, None);
        assert_eq!(c.exec_stack_size, 256 << 10);
        let c = cfg(&[("SYMMEM_EXEC_SEED", "42"), ("SYMMEM_EXEC_STACK_SIZE", "1M")]).unwrap();
        assert_eq!((c.exec_seed, c.exec_stack_size), (Some(42), 1 << 20));
    }

    #[test]
    fn sizes_and_durations() {
        let c = cfg(&[
            ("SYMMEM_SYMMETRIC_SIZE", "64M"),
            ("SYMMEM_BOOTSTRAP_TIMEOUT", "2.5"),
            ("SYMMEM_TIMEOUT", "10"),
            ("SYMMEM_DISABLE_P2P", "yes"),
            ("SYMMEM_NODE_ID", "nodeA"),
        ])
        .unwrap();
        assert_eq!(c.symmetric_size, 64 << 20);
        assert_eq!(c.bootstrap_timeout, Duration::from_millis(2500));
        assert_eq!(c.timeout, Some(Duration::from_secs(10)));
        assert!(c.disable_p2p);
        assert_eq!(c.node_id, "nodeA");
        assert_eq!(
            cfg(&[("SYMMEM_SYMMETRIC_SIZE", "4KiB")])
                .unwrap()
                .symmetric_size,
            4096
        );
    }

    #[test]
    fn node_id_defaults_to_the_proc_identity_and_can_be_overridden() {
        let c = cfg(&[]).unwrap();
        match crate::topology::default_node_id() {
            Ok(id) => assert_eq!((&c.node_id, &c.node_id_fallback), (&id, &None)),
            Err(why) => {
                assert_eq!(c.node_id, c.hostname);
                assert_eq!(c.node_id_fallback, Some(why));
            }
        }
        assert!(!c.hostname.is_empty());
        assert!(!c.node_id_set);
        assert!(c
            .node_identity_source(Some("n07 (Slurm SLURMD_NODENAME)"))
            .contains("n07 (Slurm SLURMD_NODENAME)"));
        assert!(c
            .node_identity_source(None)
            .contains("the launcher tells no node"));
        let c = cfg(&[("SYMMEM_NODE_ID", "rack3")]).unwrap();
        assert_eq!(c.node_id, "rack3");
        assert!(c.node_id_set);
        let source = c.node_identity_source(Some("n07 (Slurm SLURMD_NODENAME)"));
        assert!(
            source.contains("SYMMEM_NODE_ID=rack3") && !source.contains("n07"),
            "{source}"
        );
    }

    #[test]
    fn huge_durations_mean_no_limit() {
        for v in ["1e19", "1e20", "inf", "31536000"] {
            let c = cfg(&[("SYMMEM_TIMEOUT", v), ("SYMMEM_BOOTSTRAP_TIMEOUT", v)])
                .unwrap_or_else(|e| panic!("{v}: {e}"));
            assert_eq!(c.timeout, None, "SYMMEM_TIMEOUT={v}");
            assert_eq!(c.bootstrap_timeout, duration::MAX_WAIT, "{v}");
            // What init does with it: no overflow, no panic.
            let _ = duration::deadline_after(c.bootstrap_timeout);
            let described = c.describe();
            let shown = &described
                .iter()
                .find(|(k, _)| *k == "SYMMEM_BOOTSTRAP_TIMEOUT")
                .unwrap()
                .1;
            assert!(shown.contains("no limit"), "{shown}");
        }
    }

    #[test]
    fn bad_durations_name_the_variable_and_value() {
        for var in ["SYMMEM_TIMEOUT", "SYMMEM_BOOTSTRAP_TIMEOUT"] {
            for val in ["nan", "-1", "-inf", "abc"] {
                let err = cfg(&[(var, val)]).unwrap_err().to_string();
                assert!(err.contains(var) && err.contains(val), "{var}={val}: {err}");
            }
        }
        let err = cfg(&[("SYMMEM_BOOTSTRAP_TIMEOUT", "0")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("greater than 0"), "{err}");
    }

    #[test]
    fn describe_names_each_table_variable_at_most_once() {
        let c = cfg(&[]).unwrap();
        let described = c.describe();
        for (i, (name, _)) in described.iter().enumerate() {
            assert!(
                VARIABLES.iter().any(|v| v.name == *name),
                "describe() shows {name}, which VARIABLES does not list"
            );
            assert!(
                described[..i].iter().all(|(n, _)| n != name),
                "describe() shows {name} twice"
            );
        }
    }

    #[test]
    fn every_test_exit_point_is_documented() {
        let var = VARIABLES
            .iter()
            .find(|v| v.name == symmem_bootstrap::fault::EXIT_AT_VAR)
            .expect("SYMMEM_TEST_EXIT_AT is in the table");
        for (point, _) in symmem_bootstrap::fault::EXIT_POINTS {
            assert!(var.doc.contains(point), "{point} is missing from the doc");
        }
        let c = cfg(&[("SYMMEM_TEST_EXIT_AT", "heap_serve")]).unwrap();
        assert_eq!(c.test_exit_at.as_deref(), Some("heap_serve"));
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (var, val) in [
            ("SYMMEM_SYMMETRIC_SIZE", "lots"),
            ("SYMMEM_SYMMETRIC_SIZE", "0"),
            ("SYMMEM_BOOTSTRAP", "carrier-pigeon"),
            ("SYMMEM_BOOTSTRAP_TIMEOUT", "-1"),
            ("SYMMEM_TIMEOUT", "soon"),
            ("SYMMEM_DEAD_PEER_TIMEOUT", "soon"),
            ("SYMMEM_DEAD_PEER_TIMEOUT", "0.5"),
            ("SYMMEM_DEBUG", "loud"),
            ("SYMMEM_DEBUG_SUBSYS", "init,gpu-magic"),
            ("SYMMEM_DISABLE_P2P", "maybe"),
            ("SYMMEM_REMOTE_TRANSPORT", "pigeon"),
            ("SYMMEM_IB_GID_INDEX", "-3"),
            ("SYMMEM_IB_QPS_PER_PEER", "0"),
            ("SYMMEM_IB_QPS_PER_PEER", "65"),
            ("SYMMEM_IB_QPS_PER_PEER", "two"),
            ("SYMMEM_ALLOW_HOST_STAGING", "please"),
            ("SYMMEM_HCA_LIST", "mlx5_0:0"),
            ("SYMMEM_HCA_LIST", "mlx5_0:x"),
            ("SYMMEM_HCA_LIST", "mlx5 0"),
            ("SYMMEM_HCA_LIST", "^"),
            ("SYMMEM_TEST_EXIT_AT", "halfway"),
            ("SYMMEM_MAX_TEAMS", "1"),
            ("SYMMEM_MAX_TEAMS", "4097"),
            ("SYMMEM_MAX_TEAMS", "many"),
            ("SYMMEM_EXEC_SEED", "-1"),
            ("SYMMEM_EXEC_SEED", "lucky"),
            ("SYMMEM_EXEC_STACK_SIZE", "8K"),
            ("SYMMEM_EXEC_STACK_SIZE", "big"),
            ("SYMMEM_NT_COPY_THRESHOLD", "64"),
            ("SYMMEM_NT_COPY_THRESHOLD", "sometimes"),
            ("SYMMEM_VECTOR_COPY_BELOW", "2K"),
            ("SYMMEM_VECTOR_COPY_BELOW", "wide"),
            ("SYMMEM_SLICED_COPY_FROM", "256K"),
            ("SYMMEM_SLICED_COPY_FROM", "big"),
        ] {
            let err = cfg(&[(var, val)]).unwrap_err().to_string();
            assert!(err.contains(var) && err.contains(val), "{var}={val}: {err}");
        }
    }

    #[test]
    fn copy_bounds_are_auto_off_or_a_size_of_at_least_their_minimum() {
        assert_eq!(cfg(&[]).unwrap().nt_copy, CopyBound::Auto);
        let nt = |v| cfg(&[("SYMMEM_NT_COPY_THRESHOLD", v)]).unwrap().nt_copy;
        assert_eq!(nt("off"), CopyBound::Off);
        assert_eq!(nt("4K"), CopyBound::At(MIN_NT_COPY));
        assert_eq!(nt("16M"), CopyBound::At(16 << 20));
        assert_eq!(cfg(&[]).unwrap().vector_copy, CopyBound::Auto);
        let vector = |v| cfg(&[("SYMMEM_VECTOR_COPY_BELOW", v)]).unwrap().vector_copy;
        assert_eq!(vector("off"), CopyBound::Off);
        assert_eq!(vector("4K"), CopyBound::At(MIN_VECTOR_COPY_BELOW));
        assert_eq!(vector("1M"), CopyBound::At(1 << 20));
        assert_eq!(cfg(&[]).unwrap().sliced_copy, CopyBound::Auto);
        let sliced = |v| cfg(&[("SYMMEM_SLICED_COPY_FROM", v)]).unwrap().sliced_copy;
        assert_eq!(sliced("off"), CopyBound::Off);
        assert_eq!(sliced("512K"), CopyBound::At(MIN_SLICED_COPY_FROM));
    }

    #[test]
    fn max_teams_defaults_like_nvshmem() {
        assert_eq!(cfg(&[]).unwrap().max_teams, DEFAULT_MAX_TEAMS);
        assert_eq!(cfg(&[("SYMMEM_MAX_TEAMS", "2")]).unwrap().max_teams, 2);
        assert_eq!(
            cfg(&[("SYMMEM_MAX_TEAMS", "4096")]).unwrap().max_teams,
            4096
        );
    }

    #[test]
    fn the_public_job_key_opt_in_is_off_by_default() {
        assert!(!cfg(&[]).unwrap().allow_public_job_key);
        assert!(
            cfg(&[("SYMMEM_ALLOW_PUBLIC_JOB_KEY", "1")])
                .unwrap()
                .allow_public_job_key
        );
        let err = cfg(&[("SYMMEM_ALLOW_PUBLIC_JOB_KEY", "maybe")]).unwrap_err();
        assert!(
            err.to_string().contains("SYMMEM_ALLOW_PUBLIC_JOB_KEY"),
            "{err}"
        );
    }

    #[test]
    fn ib_variables_parse_with_defaults() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.ib_qps_per_peer, 1);
        assert!(!c.allow_host_staging);
        assert_eq!(c.hca_filter, HcaFilter::default());
        let c = cfg(&[
            ("SYMMEM_IB_QPS_PER_PEER", "4"),
            ("SYMMEM_ALLOW_HOST_STAGING", "1"),
            ("SYMMEM_HCA_LIST", "mlx5_0:1,mlx5_1"),
        ])
        .unwrap();
        assert_eq!(c.ib_qps_per_peer, 4);
        assert!(c.allow_host_staging);
        assert_eq!(
            c.hca_filter.entries,
            vec![
                HcaEntry {
                    name: "mlx5_0".into(),
                    port: Some(1)
                },
                HcaEntry {
                    name: "mlx5_1".into(),
                    port: None
                },
            ]
        );
    }
}
