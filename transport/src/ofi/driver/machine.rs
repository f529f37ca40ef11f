//! Which PEs share this machine: one round of the bootstrap in which every PE says which
//! machine it is on and which NUMA nodes it is near, for the progress mode (how many PEs
//! share the machine's CPUs) and placement (a PE's rank among those near the same nodes).

use crate::error::Result;
use crate::interface::Setup;

/// This PE among the PEs of its machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::ofi) struct Neighbours {
    /// The PEs on this machine, this one included.
    pub(in crate::ofi) machine_pes: usize,
    /// This PE's rank (from 0) among the PEs of this machine near the same NUMA nodes.
    pub(in crate::ofi) near_rank: usize,
}

/// The round: every PE takes part, whatever it was asked for, so that PEs set differently
/// still meet. `near` names the NUMA nodes this PE is near ([`super::placement::Near::key`]).
pub(in crate::ofi) fn learn(setup: &Setup<'_>, near: &str) -> Result<Neighbours> {
    let mut mine = machine_id().into_bytes();
    mine.push(0);
    mine.extend_from_slice(near.as_bytes());
    let all = setup.bootstrap.allgather(&mine)?;
    Ok(neighbours(&all, setup.me))
}

/// [`Neighbours`] of PE `me` from every PE's entry: its machine's id, a NUL, the nodes it
/// is near.
fn neighbours(all: &[Vec<u8>], me: usize) -> Neighbours {
    let machine = |entry: &[u8]| -> Vec<u8> {
        let end = entry.iter().rposition(|&b| b == 0).unwrap_or(entry.len());
        entry[..end].to_vec()
    };
    let mine = &all[me];
    Neighbours {
        machine_pes: all
            .iter()
            .filter(|entry| machine(entry) == machine(mine))
            .count(),
        near_rank: all[..me].iter().filter(|entry| *entry == mine).count(),
    }
}

/// What names this machine among the job's PEs: its kernel's boot id (containers on one
/// host share it), or its hostname; without either, every PE says "" and all count as one
/// machine, which errs towards blocking.
fn machine_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|id| id.trim().to_string())
        .or_else(|_| std::fs::read_to_string("/proc/sys/kernel/hostname"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PEs count the PEs of their machine whatever nodes they are near, and rank among
    /// those near the same nodes.
    #[test]
    fn pes_count_their_machine_and_rank_among_those_near_the_same_nodes() {
        let entry =
            |machine: &str, near: &str| [machine.as_bytes(), b"\0", near.as_bytes()].concat();
        let all = [
            entry("a", "0"),
            entry("a", "1"),
            entry("b", "0"),
            entry("a", "0"),
            entry("a", "1"),
            entry("a", "0"),
        ];
        let got: Vec<(usize, usize)> = (0..all.len())
            .map(|me| {
                let n = neighbours(&all, me);
                (n.machine_pes, n.near_rank)
            })
            .collect();
        assert_eq!(got, [(5, 0), (5, 0), (1, 0), (5, 1), (5, 1), (5, 2)]);
    }
}
