//! The wait-for graph of a hung job and its root: pure analysis of every PE's record
//! ([`PeState`]), so that it can be tested on synthetic records.
//!
//! Each waiting PE points at the PE it waits for: a collective's first member that is not
//! in the same collective (team, operation and sequence number), or, for a wait on a word
//! any PE may write (`wait_until`, `signal_wait_until`), the PE that has been outside
//! symmem longest. The chain from the reporting PE (or, where it does not wait, as in a
//! report asked for by SIGUSR1, from the PE that has waited longest) ends at the root: a
//! PE in user code, a signal wait nobody will write (every other PE waits too), or a
//! cycle. A PE that does not answer, or collectives that do not match, are the root
//! whatever the chain says; where no PE waits and every one answers, there is no hang.

use std::fmt::Write as _;

use super::record::{Collective, PeState};

/// Why the root is the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// A PE did not answer: dead or stopped.
    NotAnswering,
    /// Members of a team are in different collectives, or different calls of one.
    Mismatch,
    /// The chain ends at a PE in user code.
    InUserCode,
    /// The chain ends at a wait on a word that no PE will write: every other PE waits.
    NobodyWillWrite,
    /// The waits form a cycle.
    Cycle,
    /// Every member of the collective the chain ends in is in it: nothing explains it.
    Unexplained,
    /// No PE waits in symmem (a report asked for while the job runs): no root.
    NoHang,
}

impl Reason {
    /// The reason as the JSON report names it.
    pub fn name(self) -> &'static str {
        match self {
            Reason::NotAnswering => "not answering",
            Reason::Mismatch => "mismatched collectives",
            Reason::InUserCode => "in user code",
            Reason::NobodyWillWrite => "signal nobody will write",
            Reason::Cycle => "cycle",
            Reason::Unexplained => "unexplained",
            Reason::NoHang => "no hang",
        }
    }
}

/// The analysis of one hang.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Analysis {
    /// The PEs the report blames (none where there is no hang).
    pub root: Vec<usize>,
    /// Why.
    pub reason: Reason,
    /// One sentence naming the root and why.
    pub summary: String,
    /// The chain of waits from the reporting PE, or the PE that has waited longest
    /// (ending in a repeat for a cycle; empty where no PE waits).
    pub chain: Vec<usize>,
}

/// Describes a PE's state in a few words.
pub(crate) fn describe(state: &PeState) -> String {
    match state {
        PeState::Waiting {
            op,
            detail,
            collective,
            secs,
            ..
        } => match collective {
            Some(c) => format!(
                "waiting {secs:.1} s in {op} ({}, call #{}): {detail}",
                c.team, c.seq
            ),
            None => format!("waiting {secs:.1} s in {op}: {detail}"),
        },
        PeState::Outside { secs } => format!("outside symmem (in user code) for {secs:.1} s"),
        PeState::NotAnswering { why } => format!("not answering: dead or stopped ({why})"),
    }
}

fn collective(s: &PeState) -> Option<(&str, &Collective)> {
    match s {
        PeState::Waiting {
            op,
            collective: Some(c),
            ..
        } => Some((op, c)),
        _ => None,
    }
}

/// Whether `a` and `b` are the same call of the same collective.
fn same_call(a: (&str, &Collective), b: (&str, &Collective)) -> bool {
    a.0 == b.0 && a.1.team == b.1.team && a.1.seq == b.1.seq
}

/// The PE that `pe` waits for, if the records tell.
fn next(states: &[PeState], pe: usize) -> Option<usize> {
    match &states[pe] {
        PeState::Waiting {
            collective: Some(c),
            op,
            ..
        } => c.members.iter().copied().find(|&m| {
            m != pe
                && m < states.len()
                && !collective(&states[m]).is_some_and(|o| same_call(o, (op, c)))
        }),
        PeState::Waiting { peer: Some(p), .. } => Some(*p).filter(|&p| p < states.len()),
        PeState::Waiting { .. } => (0..states.len())
            .filter(|&p| p != pe)
            .filter_map(|p| match states[p] {
                PeState::Outside { secs } => Some((p, secs)),
                _ => None,
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(p, _)| p),
        PeState::Outside { .. } | PeState::NotAnswering { .. } => None,
    }
}

/// Pairs of PEs in different collectives that each must join the other's.
fn mismatched(states: &[PeState]) -> Vec<usize> {
    let mut pes = Vec::new();
    for (p, sp) in states.iter().enumerate() {
        let Some(cp) = collective(sp) else { continue };
        let clash = states.iter().enumerate().any(|(q, sq)| {
            collective(sq).is_some_and(|cq| {
                q != p
                    && cp.1.members.contains(&q)
                    && cq.1.members.contains(&p)
                    && !same_call(cp, cq)
            })
        });
        if clash {
            pes.push(p);
        }
    }
    pes
}

/// Where the chain starts: `from` if it waits, else the PE that has waited longest, if
/// any.
fn start(from: usize, states: &[PeState]) -> Option<usize> {
    let waited = |p: usize| match states[p] {
        PeState::Waiting { secs, .. } => Some(secs),
        _ => None,
    };
    if waited(from).is_some() {
        return Some(from);
    }
    (0..states.len())
        .filter_map(|p| Some((p, waited(p)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(p, _)| p)
}

/// Analyses the records of every PE (`states[pe]`), as gathered by PE `from`.
pub(crate) fn analyse(from: usize, states: &[PeState]) -> Analysis {
    let first = start(from, states);
    let mut chain: Vec<usize> = first.into_iter().collect();
    while let Some(n) = chain.last().and_then(|&p| next(states, p)) {
        let repeat = chain.contains(&n);
        chain.push(n);
        if repeat {
            break;
        }
    }
    let list = |pes: &[usize]| {
        pes.iter()
            .map(|p| format!("PE {p}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let dead: Vec<usize> = (0..states.len())
        .filter(|&p| matches!(states[p], PeState::NotAnswering { .. }))
        .collect();
    if !dead.is_empty() {
        return Analysis {
            summary: format!("{} not answering: dead or stopped", list(&dead)),
            root: dead,
            reason: Reason::NotAnswering,
            chain,
        };
    }
    if first.is_none() {
        return Analysis {
            root: Vec::new(),
            reason: Reason::NoHang,
            summary: "no hang: every PE is outside symmem or running".into(),
            chain,
        };
    }
    let clash = mismatched(states);
    if !clash.is_empty() {
        let mut summary = String::from("mismatched collectives:");
        for (i, &p) in clash.iter().enumerate() {
            let (op, c) = collective(&states[p]).expect("only PEs in collectives clash");
            let sep = if i == 0 { " " } else { ", " };
            let _ = write!(summary, "{sep}PE {p} in {op} ({}, call #{})", c.team, c.seq);
        }
        return Analysis {
            root: clash,
            reason: Reason::Mismatch,
            summary,
            chain,
        };
    }
    let last = *chain.last().expect("a waiting PE starts the chain");
    if chain[..chain.len() - 1].contains(&last) {
        let start = chain.iter().position(|&p| p == last).expect("a repeat");
        let cycle: Vec<usize> = chain[start..chain.len() - 1].to_vec();
        return Analysis {
            summary: format!("a cycle of waits: {}", list(&cycle)),
            root: cycle,
            reason: Reason::Cycle,
            chain,
        };
    }
    // Why the PE before the root waits for it, to say what the root is not doing.
    let because = match chain.len().checked_sub(2).map(|i| chain[i]) {
        Some(prev) => match (collective(&states[prev]), &states[prev]) {
            (Some((op, _)), _) => format!(", not in {op} (PE {prev} waits for it there)"),
            (
                None,
                PeState::Waiting {
                    op, peer: Some(_), ..
                },
            ) => format!(" (PE {prev} waits for it in {op})"),
            (None, _) => format!(" (PE {prev} waits for a word it may write)"),
        },
        None => String::new(),
    };
    let (reason, summary) = match &states[last] {
        PeState::Outside { secs } => (
            Reason::InUserCode,
            format!("PE {last} is in user code, outside symmem for {secs:.1} s{because}"),
        ),
        PeState::Waiting {
            collective: None,
            peer: None,
            op,
            detail,
            ..
        } => (
            Reason::NobodyWillWrite,
            format!(
                "PE {last} waits in {op} for a word no PE will write ({detail}): every other PE waits too{because}"
            ),
        ),
        PeState::Waiting {
            collective: None,
            op,
            detail,
            ..
        } => (
            Reason::Unexplained,
            format!("PE {last} waits in {op} ({detail}) for a PE that the chain has passed"),
        ),
        PeState::Waiting { op, .. } => (
            Reason::Unexplained,
            format!("PE {last} waits in {op}, which every member has joined"),
        ),
        PeState::NotAnswering { .. } => unreachable!("handled above"),
    };
    Analysis {
        root: vec![last],
        reason,
        summary,
        chain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outside(secs: f64) -> PeState {
        PeState::Outside { secs }
    }

    fn signal_wait() -> PeState {
        PeState::Waiting {
            op: "signal_wait_until".into(),
            detail: "signal #1[0] Ge 1 (last seen 0)".into(),
            peer: None,
            collective: None,
            secs: 5.0,
        }
    }

    fn coll(op: &str, team: &str, members: &[usize], seq: u64) -> PeState {
        PeState::Waiting {
            op: op.into(),
            detail: "the team's barrier".into(),
            peer: None,
            collective: Some(Collective {
                team: team.into(),
                members: members.to_vec(),
                seq,
            }),
            secs: 5.0,
        }
    }

    #[test]
    fn a_forgotten_signal_points_at_the_pe_in_user_code() {
        let a = analyse(0, &[signal_wait(), outside(1.0), outside(7.0)]);
        assert_eq!(
            (a.root.clone(), a.reason),
            (vec![2], Reason::InUserCode),
            "{a:?}"
        );
        assert_eq!(a.chain, [0, 2]);
        assert!(a.summary.contains("PE 2 is in user code"), "{}", a.summary);
    }

    #[test]
    fn a_signal_nobody_will_write_is_its_own_root() {
        let world = [0, 1, 2];
        let states = [
            coll("barrier_all", "TEAM_WORLD", &world, 3),
            signal_wait(),
            coll("barrier_all", "TEAM_WORLD", &world, 3),
        ];
        let a = analyse(0, &states);
        assert_eq!(
            (a.root.clone(), a.reason),
            (vec![1], Reason::NobodyWillWrite),
            "{a:?}"
        );
        assert_eq!(a.chain, [0, 1]);
        assert!(a.summary.contains("not in barrier_all"), "{}", a.summary);
    }

    #[test]
    fn a_chain_through_a_barrier_ends_in_user_code() {
        let world = [0, 1, 2];
        let states = [
            signal_wait(),
            coll("barrier_all", "TEAM_WORLD", &world, 3),
            outside(9.0),
        ];
        // PE 1's barrier waits for PE 0 (its first member not in it), which waits for a
        // word that PE 2, the one outside, may write.
        let a = analyse(1, &states);
        assert_eq!(
            (a.root.clone(), a.reason),
            (vec![2], Reason::InUserCode),
            "{a:?}"
        );
        assert_eq!(a.chain, [1, 0, 2]);
        assert!(
            a.summary.contains("PE 0 waits for a word it may write"),
            "{}",
            a.summary
        );
        let a = analyse(0, &states);
        assert_eq!(a.chain, [0, 2]);
    }

    #[test]
    fn a_wait_for_one_pe_follows_it() {
        let quiet = |peer| PeState::Waiting {
            op: "quiet".into(),
            detail: format!("puts to PE {peer}"),
            peer: Some(peer),
            collective: None,
            secs: 4.0,
        };
        // PE 0 quiets towards PE 2, in user code; PE 1 has been outside longer, but PE 0
        // waits for PE 2.
        let a = analyse(0, &[quiet(2), outside(30.0), outside(1.0)]);
        assert_eq!(
            (a.root.clone(), a.reason, a.chain.clone()),
            (vec![2], Reason::InUserCode, vec![0, 2]),
            "{a:?}"
        );
        assert!(
            a.summary.contains("(PE 0 waits for it in quiet)"),
            "{}",
            a.summary
        );
        // A chain of three.
        let a = analyse(0, &[quiet(1), quiet(2), outside(1.0), outside(50.0)]);
        assert_eq!((a.root, a.chain), (vec![2], vec![0, 1, 2]));
    }

    #[test]
    fn a_dead_pe_is_the_root() {
        let states = [
            coll("barrier_all", "TEAM_WORLD", &[0, 1], 1),
            PeState::NotAnswering {
                why: "connection refused".into(),
            },
        ];
        let a = analyse(0, &states);
        assert_eq!(
            (a.root.clone(), a.reason),
            (vec![1], Reason::NotAnswering),
            "{a:?}"
        );
        assert_eq!(a.chain, [0, 1]);
    }

    #[test]
    fn different_collectives_of_one_team_mismatch() {
        let states = [
            coll("barrier_all", "TEAM_WORLD", &[0, 1], 4),
            coll("team_reduce", "TEAM_WORLD", &[0, 1], 4),
        ];
        let a = analyse(0, &states);
        assert_eq!(
            (a.root.clone(), a.reason),
            (vec![0, 1], Reason::Mismatch),
            "{a:?}"
        );
        assert!(a.summary.contains("PE 1 in team_reduce"), "{}", a.summary);
        // Different calls of one collective mismatch too.
        let states = [
            coll("team_barrier", "team slot 2", &[0, 1], 4),
            coll("team_barrier", "team slot 2", &[0, 1], 5),
        ];
        assert_eq!(analyse(1, &states).reason, Reason::Mismatch);
    }

    #[test]
    fn collectives_of_disjoint_teams_do_not_mismatch() {
        let states = [
            coll("team_barrier", "team slot 2", &[0, 2], 1),
            coll("team_barrier", "team slot 3", &[1, 3], 1),
            outside(2.0),
            outside(3.0),
        ];
        let a = analyse(0, &states);
        assert_eq!(
            (a.root.clone(), a.reason),
            (vec![2], Reason::InUserCode),
            "{a:?}"
        );
    }

    #[test]
    fn a_cycle_of_collectives_over_overlapping_teams_mismatches() {
        let states = [
            coll("team_barrier", "team slot 2", &[0, 1], 1),
            coll("team_barrier", "team slot 3", &[1, 0], 1),
        ];
        assert_eq!(analyse(0, &states).reason, Reason::Mismatch);
    }

    #[test]
    fn barriers_of_three_teams_waiting_round_a_ring_are_a_cycle() {
        // Each PE waits in a team with the next, which is in a team with the one after.
        let states = [
            coll("team_barrier", "team slot 2", &[0, 1], 1),
            coll("team_barrier", "team slot 3", &[1, 2], 1),
            coll("team_barrier", "team slot 4", &[2, 0], 1),
        ];
        let a = analyse(0, &states);
        assert_eq!(
            (a.root.clone(), a.reason),
            (vec![0, 1, 2], Reason::Cycle),
            "{a:?}"
        );
        assert_eq!(a.chain, [0, 1, 2, 0]);
    }

    #[test]
    fn with_no_pe_waiting_there_is_no_hang() {
        let a = analyse(0, &[outside(1.0), outside(2.0)]);
        assert_eq!(
            (a.root.clone(), a.reason, a.chain.clone()),
            (vec![], Reason::NoHang, vec![]),
            "{a:?}"
        );
        assert!(a.summary.starts_with("no hang"), "{}", a.summary);
        // A PE that does not answer is still named.
        let dead = PeState::NotAnswering {
            why: "timed out".into(),
        };
        assert_eq!(
            analyse(0, &[outside(1.0), dead]).reason,
            Reason::NotAnswering
        );
    }

    #[test]
    fn a_report_from_a_pe_outside_starts_at_the_longest_wait() {
        let short = PeState::Waiting {
            op: "quiet".into(),
            detail: "puts to PE 0".into(),
            peer: Some(0),
            collective: None,
            secs: 1.0,
        };
        // PE 0 asks (SIGUSR1) from user code; PE 2 has waited longest, for a word PE 0
        // (outside longest) may write.
        let a = analyse(0, &[outside(9.0), short, signal_wait()]);
        assert_eq!(
            (a.root.clone(), a.reason, a.chain.clone()),
            (vec![0], Reason::InUserCode, vec![2, 0]),
            "{a:?}"
        );
    }

    #[test]
    fn a_pe_whose_collective_is_complete_is_unexplained() {
        let states = [
            coll("barrier_all", "TEAM_WORLD", &[0, 1], 1),
            coll("barrier_all", "TEAM_WORLD", &[0, 1], 1),
        ];
        let a = analyse(1, &states);
        assert_eq!(
            (a.root.clone(), a.reason),
            (vec![1], Reason::Unexplained),
            "{a:?}"
        );
    }
}
