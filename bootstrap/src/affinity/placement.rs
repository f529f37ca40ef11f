//! Where the launcher puts each PE, as Open MPI binds ranks: `--bind-to core|numa|none`
//! and `--map-by core|numa` over the CPUs the launcher itself may use (its affinity mask:
//! a PE is bound within it, never beyond). A "core" is one CPU as Linux numbers them
//! (a hardware thread).
//!
//! - `core`: PE i gets one CPU of its own: the i-th allowed CPU (`--map-by core`), or the
//!   next free one of the NUMA nodes taken in turn (`--map-by numa`);
//! - `numa`: PE i gets every allowed CPU of one NUMA node: the node of the i-th allowed
//!   CPU (`--map-by core`: consecutive PEs share a node), or node i mod nodes (`--map-by
//!   numa`);
//! - `none`: the PEs inherit the launcher's CPUs.
//!
//! Without `--bind-to`, two or more PEs are bound to cores when there are at least as many
//! allowed CPUs as PEs, and not bound when they would be oversubscribed. A job of one PE
//! is not bound (unlike Open MPI's): there is no other PE to keep apart from, and many
//! one-PE jobs at once (a test suite) would all pile onto the first CPU.

use std::fmt;
use std::str::FromStr;

use super::numa::Node;
use super::CpuSet;

/// What each PE is bound to (`--bind-to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindTo {
    /// One CPU per PE.
    Core,
    /// The CPUs of one NUMA node per PE.
    Numa,
    /// Not bound: the launcher's CPUs.
    None,
}

/// In which order PEs are spread over the CPUs (`--map-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapBy {
    /// CPU after CPU, filling one NUMA node before the next.
    #[default]
    Core,
    /// NUMA node after NUMA node, round-robin.
    Numa,
}

/// `--bind-to`'s values.
const BIND_TO: &[(&str, BindTo)] = &[
    ("core", BindTo::Core),
    ("numa", BindTo::Numa),
    ("none", BindTo::None),
];

/// `--map-by`'s values.
const MAP_BY: &[(&str, MapBy)] = &[("core", MapBy::Core), ("numa", MapBy::Numa)];

/// `value` among `table`'s names, or an error naming `flag`, the value and those accepted.
fn lookup<T: Copy>(table: &[(&str, T)], flag: &str, value: &str) -> Result<T, String> {
    table
        .iter()
        .find(|(name, _)| *name == value)
        .map(|&(_, v)| v)
        .ok_or_else(|| {
            let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
            format!("{flag} {value}: expected {}", names.join(", "))
        })
}

fn name<T: PartialEq>(table: &[(&'static str, T)], v: &T) -> &'static str {
    table.iter().find(|(_, t)| t == v).map_or("?", |(n, _)| n)
}

impl FromStr for BindTo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        lookup(BIND_TO, "--bind-to", s)
    }
}

impl FromStr for MapBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        lookup(MAP_BY, "--map-by", s)
    }
}

impl fmt::Display for BindTo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(name(BIND_TO, self))
    }
}

impl fmt::Display for MapBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(name(MAP_BY, self))
    }
}

/// The binding asked for on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Binding {
    /// `--bind-to`; `None` = the default (core unless oversubscribed).
    pub bind_to: Option<BindTo>,
    /// `--map-by`.
    pub map_by: MapBy,
}

impl Binding {
    /// The command-line options that [`Binding::set`] takes, each followed by a value.
    pub const OPTIONS: [&'static str; 2] = ["--bind-to", "--map-by"];

    /// Takes `option value` (one of [`Binding::OPTIONS`]); an unknown value is an error
    /// that names the option and the accepted values.
    pub fn set(&mut self, option: &str, value: &str) -> Result<(), String> {
        match option {
            "--bind-to" => self.bind_to = Some(value.parse()?),
            "--map-by" => self.map_by = value.parse()?,
            _ => return Err(format!("unknown binding option {option}")),
        }
        Ok(())
    }
}

/// The CPUs a launcher may use, grouped by NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    allowed: CpuSet,
    /// The allowed CPUs of each node that has some, in node order.
    nodes: Vec<CpuSet>,
}

impl Machine {
    /// `allowed` CPUs on `nodes`: each node keeps only its allowed CPUs, nodes left
    /// without any are dropped, and allowed CPUs that no node lists form one more node
    /// (so a machine without a node list is one node).
    pub fn new(allowed: CpuSet, nodes: &[Node]) -> Self {
        let mut groups: Vec<CpuSet> = nodes
            .iter()
            .map(|n| allowed.intersection(&n.cpus))
            .filter(|s| !s.is_empty())
            .collect();
        let listed = CpuSet::from_cpus(groups.iter().flat_map(|g| g.cpus().iter().copied()));
        let rest = allowed.difference(&listed);
        if !rest.is_empty() {
            groups.push(rest);
        }
        Machine {
            allowed,
            nodes: groups,
        }
    }

    /// The allowed CPUs of every node that holds one of `cpus`.
    fn nodes_holding(&self, cpus: &CpuSet) -> CpuSet {
        CpuSet::from_cpus(
            self.nodes
                .iter()
                .filter(|n| !n.intersection(cpus).is_empty())
                .flat_map(|n| n.cpus().iter().copied()),
        )
    }

    /// The CPUs this process may use (its affinity mask) on this machine's NUMA nodes.
    pub fn this_process() -> Result<Self, String> {
        let allowed = CpuSet::of_this_thread()
            .map_err(|e| format!("reading this process's CPUs (sched_getaffinity): {e}"))?;
        Ok(Machine::new(allowed, &super::numa::nodes()))
    }
}

/// Each PE's CPUs, as planned by [`Placement::plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// PE i's CPUs; `None` = not bound.
    cpus: Vec<Option<CpuSet>>,
    /// The CPUs of PE i's helper threads ([`Self::helper_cpus`]); `None` = its own.
    helpers: Vec<Option<CpuSet>>,
    how: String,
}

impl Placement {
    /// Places `n_pes` PEs on `machine` as `binding` asks. An explicit binding the machine
    /// cannot honour is an error that says what was asked and what there is.
    pub fn plan(n_pes: usize, binding: &Binding, machine: &Machine) -> Result<Self, String> {
        let allowed = &machine.allowed;
        let fits = n_pes <= allowed.len();
        let bind_to = binding.bind_to.unwrap_or(if fits && n_pes > 1 {
            BindTo::Core
        } else {
            BindTo::None
        });
        if bind_to == BindTo::Core && !fits {
            return Err(format!(
                "--bind-to core: {n_pes} PEs need {n_pes} cores, but this process may run on {} (CPUs {allowed})",
                allowed.len()
            ));
        }
        let cpus: Vec<Option<CpuSet>> = (0..n_pes)
            .map(|pe| match bind_to {
                BindTo::None => None,
                BindTo::Core => Some(CpuSet::from_cpus([core_of(pe, binding.map_by, machine)])),
                BindTo::Numa => Some(node_of(pe, binding.map_by, machine).clone()),
            })
            .collect();
        // Helpers go on their node's CPUs that no PE is bound to: on a CPU of another PE they
        // would preempt it (measured on 2 cores, 2 PEs: a socket put + quiet went from 10
        // to 80-90 µs in some runs). With none spare they stay on their PE's CPUs.
        let taken = CpuSet::from_cpus(cpus.iter().flatten().flat_map(|c| c.cpus().iter().copied()));
        let helpers = cpus
            .iter()
            .map(|c| {
                let spare = machine.nodes_holding(c.as_ref()?).difference(&taken);
                (!spare.is_empty()).then_some(spare)
            })
            .collect();
        let mut how = format!("--bind-to {bind_to}");
        if binding.map_by != MapBy::Core && bind_to != BindTo::None {
            how.push_str(&format!(" --map-by {}", binding.map_by));
        }
        if binding.bind_to.is_none() {
            how.push_str(&format!(
                ", the default for {n_pes} PEs on {} CPUs",
                allowed.len()
            ));
        }
        Ok(Placement { cpus, helpers, how })
    }

    /// Places `n_pes` PEs as `binding` asks on the CPUs this process may use.
    pub fn for_this_process(n_pes: usize, binding: &Binding) -> Result<Self, String> {
        Placement::plan(n_pes, binding, &Machine::this_process()?)
    }

    /// The number of PEs placed.
    pub fn n_pes(&self) -> usize {
        self.cpus.len()
    }

    /// PE `pe`'s CPUs, or `None` when it is not bound.
    pub fn cpus(&self, pe: usize) -> Option<&CpuSet> {
        self.cpus.get(pe).and_then(Option::as_ref)
    }

    /// The CPUs for PE `pe`'s helper threads (its transports' service threads, its proxy):
    /// the allowed CPUs of its NUMA node(s) that no PE is bound to, so that a helper need
    /// not take turns with a PE's main thread on one core; `None` when the PE is not bound
    /// or no such CPU is left (its helpers then share its CPUs).
    pub fn helper_cpus(&self, pe: usize) -> Option<&CpuSet> {
        self.helpers.get(pe).and_then(Option::as_ref)
    }

    /// The binding in words (`--bind-to core`, `--bind-to none, the default for 4 PEs on
    /// 2 CPUs`), which the launcher hands each PE (`SYMMEM_LAUNCH_BIND`).
    pub fn how(&self) -> &str {
        &self.how
    }
}

/// Whether a launcher's [`Placement::how`] bound its PEs.
pub fn binds(how: &str) -> bool {
    !how.starts_with("--bind-to none")
}

/// The CPU of PE `pe` under `--bind-to core` (there are at least `pe + 1` CPUs).
fn core_of(pe: usize, map_by: MapBy, machine: &Machine) -> usize {
    match map_by {
        MapBy::Core => machine.allowed.cpus()[pe],
        MapBy::Numa => {
            // Round-robin over the nodes, skipping those whose CPUs are all taken.
            let nodes = &machine.nodes;
            let mut taken = vec![0; nodes.len()];
            let mut node = 0;
            let mut cpu = 0;
            for _ in 0..=pe {
                while taken[node] == nodes[node].len() {
                    node = (node + 1) % nodes.len();
                }
                cpu = nodes[node].cpus()[taken[node]];
                taken[node] += 1;
                node = (node + 1) % nodes.len();
            }
            cpu
        }
    }
}

/// The node (its allowed CPUs) of PE `pe` under `--bind-to numa`.
fn node_of(pe: usize, map_by: MapBy, machine: &Machine) -> &CpuSet {
    let nodes = &machine.nodes;
    match map_by {
        MapBy::Numa => &nodes[pe % nodes.len()],
        MapBy::Core => {
            let allowed = machine.allowed.cpus();
            let cpu = allowed[pe % allowed.len()];
            nodes
                .iter()
                .find(|n| n.cpus().binary_search(&cpu).is_ok())
                .expect("every allowed CPU is on a node")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(allowed: &str, nodes: &[&str]) -> Machine {
        let nodes: Vec<Node> = nodes
            .iter()
            .enumerate()
            .map(|(id, l)| Node {
                id,
                cpus: l.parse().unwrap(),
            })
            .collect();
        Machine::new(allowed.parse().unwrap(), &nodes)
    }

    fn bind(bind_to: Option<&str>, map_by: &str) -> Binding {
        let mut b = Binding::default();
        if let Some(v) = bind_to {
            b.set("--bind-to", v).unwrap();
        }
        b.set("--map-by", map_by).unwrap();
        b
    }

    /// Each PE's CPUs as text ("-" when not bound).
    fn plan(n: usize, b: &Binding, m: &Machine) -> Vec<String> {
        let p = Placement::plan(n, b, m).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.n_pes(), n);
        (0..n)
            .map(|pe| p.cpus(pe).map_or("-".into(), ToString::to_string))
            .collect()
    }

    #[test]
    fn the_default_is_core_unless_oversubscribed() {
        let m = machine("0-1", &[]);
        let b = Binding::default();
        assert_eq!(plan(2, &b, &m), ["0", "1"]);
        assert_eq!(plan(1, &b, &m), ["-"]);
        assert_eq!(plan(1, &bind(Some("core"), "core"), &m), ["0"]);
        assert_eq!(plan(4, &b, &m), ["-", "-", "-", "-"]);
        let p = Placement::plan(4, &b, &m).unwrap();
        assert_eq!(p.how(), "--bind-to none, the default for 4 PEs on 2 CPUs");
        assert!(!binds(p.how()));
        let p = Placement::plan(2, &b, &m).unwrap();
        assert_eq!(p.how(), "--bind-to core, the default for 2 PEs on 2 CPUs");
        assert!(binds(p.how()));
    }

    #[test]
    fn pes_stay_within_the_launchers_cpus() {
        // `taskset -c 2,5,7`: PEs get those CPUs, in order.
        let m = machine("2,5,7", &["0-7"]);
        assert_eq!(plan(3, &bind(Some("core"), "core"), &m), ["2", "5", "7"]);
        assert_eq!(plan(2, &bind(Some("numa"), "core"), &m), ["2,5,7", "2,5,7"]);
        // One CPU, two PEs: not bound, never widened.
        let one = machine("1", &["0-1"]);
        assert_eq!(plan(2, &Binding::default(), &one), ["-", "-"]);
    }

    #[test]
    fn an_explicit_core_binding_that_cannot_fit_is_an_error_naming_the_cpus() {
        let m = machine("0-1", &[]);
        let err = Placement::plan(4, &bind(Some("core"), "core"), &m).unwrap_err();
        assert_eq!(
            err,
            "--bind-to core: 4 PEs need 4 cores, but this process may run on 2 (CPUs 0-1)"
        );
        // none and numa do not need a core per PE.
        assert_eq!(plan(3, &bind(Some("none"), "core"), &m), ["-", "-", "-"]);
        assert_eq!(
            plan(3, &bind(Some("numa"), "core"), &m),
            ["0-1", "0-1", "0-1"]
        );
    }

    #[test]
    fn numa_placement_on_a_fake_two_node_machine() {
        let m = machine("0-7", &["0-3", "4-7"]);
        let core = bind(Some("core"), "core");
        assert_eq!(plan(3, &core, &m), ["0", "1", "2"]);
        let core_numa = bind(Some("core"), "numa");
        assert_eq!(plan(5, &core_numa, &m), ["0", "4", "1", "5", "2"]);
        let numa_core = bind(Some("numa"), "core");
        assert_eq!(
            plan(6, &numa_core, &m),
            ["0-3", "0-3", "0-3", "0-3", "4-7", "4-7"]
        );
        let numa_numa = bind(Some("numa"), "numa");
        assert_eq!(plan(3, &numa_numa, &m), ["0-3", "4-7", "0-3"]);
        assert_eq!(
            Placement::plan(2, &core_numa, &m).unwrap().how(),
            "--bind-to core --map-by numa"
        );
    }

    /// A PE's helper threads get the launcher's CPUs on its own node that no PE is bound
    /// to: never another node's, never a PE's, never CPUs the launcher may not use; with
    /// none left they share their PE's.
    #[test]
    fn helper_threads_get_the_spare_cpus_of_their_pes_node() {
        let m = machine("1-7", &["0-3", "4-7"]);
        let helpers = |n: usize, b: &Binding| -> Vec<String> {
            let p = Placement::plan(n, b, &m).unwrap();
            (0..n)
                .map(|pe| p.helper_cpus(pe).map_or("-".into(), ToString::to_string))
                .collect()
        };
        let core_numa = bind(Some("core"), "numa");
        assert_eq!(plan(3, &core_numa, &m), ["1", "4", "2"]);
        assert_eq!(helpers(3, &core_numa), ["3", "5-7", "3"]);
        // Node 0's allowed CPUs 1-3 all taken by PEs.
        assert_eq!(plan(5, &core_numa, &m), ["1", "4", "2", "5", "3"]);
        assert_eq!(helpers(5, &core_numa), ["-", "6-7", "-", "6-7", "-"]);
        assert_eq!(helpers(2, &bind(Some("numa"), "numa")), ["-", "-"]);
        assert_eq!(helpers(2, &bind(Some("none"), "core")), ["-", "-"]);
        // Two PEs on two CPUs, as on the test machine: helpers stay with their PE.
        let two = machine("0-1", &[]);
        let p = Placement::plan(2, &Binding::default(), &two).unwrap();
        assert_eq!((p.helper_cpus(0), p.helper_cpus(1)), (None, None));
    }

    #[test]
    fn round_robin_skips_a_full_node() {
        // Node 0 has one allowed CPU, node 1 three.
        let m = machine("3-6", &["0-3", "4-7"]);
        assert_eq!(
            plan(4, &bind(Some("core"), "numa"), &m),
            ["3", "4", "5", "6"]
        );
    }

    #[test]
    fn cpus_no_node_lists_form_a_node_of_their_own() {
        let m = machine("0-5", &["0-1", "8-9"]);
        assert_eq!(plan(2, &bind(Some("numa"), "numa"), &m), ["0-1", "2-5"]);
    }

    #[test]
    fn bad_values_name_the_option_and_the_accepted_ones() {
        let mut b = Binding::default();
        assert_eq!(
            b.set("--bind-to", "socket").unwrap_err(),
            "--bind-to socket: expected core, numa, none"
        );
        assert_eq!(
            b.set("--map-by", "slot").unwrap_err(),
            "--map-by slot: expected core, numa"
        );
        assert_eq!(b, Binding::default());
    }
}
