//! The launcher's view of which node a process runs on.
//!
//! Cluster launchers know where they placed each process. symmem's runtime combines that
//! view with its own machine identity (kernel boot id and namespaces) to decide which PEs
//! share memory: two PEs are on one node only when both agree. Each bootstrap reports what
//! its launcher really provides:
//!
//! | bootstrap | source |
//! |---|---|
//! | [`pmi`](crate::pmi) | the `PMI_process_mapping` KVS value (Hydra, Slurm), else Slurm's `SLURMD_NODENAME` / `SLURM_NODEID` |
//! | [`pmix`](crate::pmix) | `PMIX_HOSTNAME`, else `PMIX_NODEID`, of the process's own rank |
//! | [`env`](mod@crate::env) | torchrun's `GROUP_RANK` (the agent's node rank); Slurm's `SLURMD_NODENAME` / `SLURM_NODEID` |
//! | symrun, unique id, single PE, MPI | none |

use crate::error::BootstrapError;
use crate::vars::{number, Lookup};

/// The `PMI_process_mapping` source, as named in [`LauncherNode::source`].
pub const PMI_PROCESS_MAPPING: &str = "PMI-1 PMI_process_mapping";

/// The node a launcher placed this process on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherNode {
    /// The node's name or index, as the launcher gives it (`n017`, `3`).
    pub name: String,
    /// Where it came from, e.g. `Slurm SLURMD_NODENAME`.
    pub source: String,
}

impl LauncherNode {
    /// A node `name` from `source`.
    pub fn new(name: impl Into<String>, source: impl Into<String>) -> Self {
        LauncherNode {
            name: name.into(),
            source: source.into(),
        }
    }
}

impl std::fmt::Display for LauncherNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.source)
    }
}

/// Slurm's node of this task: `SLURMD_NODENAME`, else `SLURM_NODEID` (the node's index in
/// the job); `Ok(None)` outside Slurm, an error when `SLURM_NODEID` is not a number.
pub fn slurm_node(get: Lookup) -> Result<Option<LauncherNode>, BootstrapError> {
    if let Some(name) = get("SLURMD_NODENAME") {
        return Ok(Some(LauncherNode::new(name, "Slurm SLURMD_NODENAME")));
    }
    match get("SLURM_NODEID") {
        Some(id) => Ok(Some(LauncherNode::new(
            number("SLURM_NODEID", &id)?.to_string(),
            "Slurm SLURM_NODEID",
        ))),
        None => Ok(None),
    }
}

/// One `(start,nodes,ppn)` block of a `PMI_process_mapping`: `nodes` nodes from node
/// `start` on, each with `ppn` consecutive ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    start: usize,
    nodes: usize,
    ppn: usize,
}

/// The index of the node that holds `rank`, from a `PMI_process_mapping` value such as
/// `(vector,(0,2,4),(2,1,2))` (ranks 0-3 on node 0, 4-7 on node 1, 8-9 on node 2), or why
/// the value cannot be read.
///
/// The format is MPICH's (`MPIR_NODEMAP_parse_mapping`), which Hydra and Slurm publish:
/// blocks of `(start node, node count, ranks per node)` fill ranks in order, and a job with
/// more ranks than the blocks describe starts over from the first block (a cyclic
/// placement such as `(vector,(0,2,1))` for 4 ranks puts ranks 0 and 2 on node 0). Spaces
/// are ignored.
pub fn node_in_mapping(mapping: &str, rank: usize) -> Result<usize, String> {
    let text: String = mapping.chars().filter(|c| !c.is_whitespace()).collect();
    let form = "expected (vector,(start,nodes,ppn),...)";
    let mut rest = text
        .strip_prefix("(vector")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("{mapping:?} is not a vector mapping: {form}"))?;
    let mut blocks = Vec::new();
    while !rest.is_empty() {
        let (inner, after) = rest
            .strip_prefix(",(")
            .and_then(|r| r.split_once(')'))
            .ok_or_else(|| format!("{mapping:?}: malformed block at {rest:?}: {form}"))?;
        let nums = inner
            .split(',')
            .map(str::parse::<usize>)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| format!("{mapping:?}: block ({inner}) is not three numbers"))?;
        let [start, nodes, ppn] = nums[..] else {
            return Err(format!(
                "{mapping:?}: block ({inner}) has {} numbers, not three",
                nums.len()
            ));
        };
        if nodes == 0 || ppn == 0 {
            return Err(format!(
                "{mapping:?}: block ({inner}) has no nodes or no ranks per node"
            ));
        }
        blocks.push(Block { start, nodes, ppn });
        rest = after;
    }
    let too_big = || format!("{mapping:?}: the blocks describe more ranks than fit a usize");
    let cycle = blocks.iter().try_fold(0usize, |sum, b| {
        b.nodes.checked_mul(b.ppn).and_then(|n| sum.checked_add(n))
    });
    let cycle = match cycle {
        Some(0) => return Err(format!("{mapping:?} has no blocks: {form}")),
        Some(c) => c,
        None => return Err(too_big()),
    };
    let mut left = rank % cycle;
    for b in blocks {
        let span = b.nodes * b.ppn;
        if left < span {
            return b.start.checked_add(left / b.ppn).ok_or_else(too_big);
        }
        left -= span;
    }
    Err(format!("{mapping:?}: rank {rank} lies in no block"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_mappings_give_each_rank_its_node() {
        let nodes = |m: &str, n: usize| {
            (0..n)
                .map(|r| node_in_mapping(m, r).unwrap())
                .collect::<Vec<_>>()
        };
        // Hydra, `-n 2` on one host.
        assert_eq!(nodes("(vector,(0,1,2))", 2), [0, 0]);
        // Two blocks of different widths.
        assert_eq!(
            nodes("(vector,(0,2,4),(2,1,2))", 10),
            [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
        );
        // Cyclic: more ranks than the blocks describe start over.
        assert_eq!(nodes("(vector,(0,2,1))", 4), [0, 1, 0, 1]);
        // Spaces are ignored; a block may start at any node.
        assert_eq!(nodes(" ( vector, (3,1,1), (0, 1, 1) ) ", 2), [3, 0]);
    }

    #[test]
    fn bad_process_mappings_say_what_is_wrong() {
        for (mapping, needle) in [
            ("", "not a vector mapping"),
            ("(block,(0,1,2))", "not a vector mapping"),
            ("(vector)", "no blocks"),
            ("(vector,(0,1))", "has 2 numbers"),
            ("(vector,(0,x,1))", "not three numbers"),
            ("(vector,(0,0,1))", "no nodes or no ranks"),
            ("(vector,(0,1,2)", "malformed block"),
            ("(vector,(0,1,2),)", "malformed block"),
            ("(vector,(0,1,2)(1,1,1))", "malformed block"),
            ("(vector,(0,18446744073709551615,2))", "more ranks than fit"),
        ] {
            let why = node_in_mapping(mapping, 0).unwrap_err();
            assert!(why.contains(needle), "{mapping:?}: {why}");
        }
    }

    #[test]
    fn a_node_shows_its_source() {
        assert_eq!(
            LauncherNode::new("n07", "Slurm SLURMD_NODENAME").to_string(),
            "n07 (Slurm SLURMD_NODENAME)"
        );
    }
}
