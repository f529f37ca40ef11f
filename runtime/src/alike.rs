//! Verifying that every PE made a collective call alike (the same operation with the same
//! arguments), for collective allocation, team splits and destroys, and the host
//! collectives. Each PE encodes its call as words (a [`Described`] call's encoding); the
//! caller moves every PE's words to every PE its own way (the bootstrap's allgather, a
//! team's exchange or fingerprint buffers); [`check`] compares them and, when they
//! differ, builds the error naming the groups of PEs and what each called. Every PE
//! compares the same words, so every PE returns the same error, or none does.

use crate::error::{Error, Result};

/// A kind of collective call encoded as words: how its words read back in the error.
pub(crate) trait Described {
    /// The call as the user wrote it, from its words.
    fn describe(words: &[u64]) -> String;

    /// Names of the arguments in which `other`'s words differ from `first`'s, said after
    /// every group of PEs but the first; none (the default) says nothing.
    fn differing(_first: &[u64], _other: &[u64]) -> Vec<&'static str> {
        Vec::new()
    }
}

/// How the error names a group of the PEs that compared their calls.
#[derive(Clone, Copy)]
pub(crate) enum Pes<'a> {
    /// Every PE of the job, by world PE number: "PE 1, 2".
    World,
    /// A team's PEs, by team PE number and then by world PE number, which the function
    /// gives for a team PE: "team PE 1, 2 (world PE 3, 5)".
    Team(&'a dyn Fn(usize) -> usize),
}

/// Ok when the words of every PE in `all` (in the order in which `pes` numbers them) are
/// the same; otherwise the error `mismatch` makes of the detail: the groups of PEs with
/// the same words, in the order of their first PE, each with the call it made (`D`'s
/// [`Described::describe`]) and, after the first, the arguments in which it differs from
/// the first group's.
pub(crate) fn check<D: Described, W: AsRef<[u64]>>(
    all: &[W],
    pes: Pes<'_>,
    mismatch: impl FnOnce(String) -> Error,
) -> Result<()> {
    let Some(first) = all.first() else {
        return Ok(());
    };
    if all.iter().all(|w| w.as_ref() == first.as_ref()) {
        return Ok(());
    }
    // Group PEs by what they called, so the message stays short on big jobs.
    let mut groups: Vec<(&[u64], Vec<usize>)> = Vec::new();
    for (pe, w) in all.iter().enumerate() {
        let w = w.as_ref();
        match groups.iter_mut().find(|(g, _)| *g == w) {
            Some((_, members)) => members.push(pe),
            None => groups.push((w, vec![pe])),
        }
    }
    let first = groups[0].0;
    let list = |members: &[usize], f: &dyn Fn(usize) -> usize| {
        members
            .iter()
            .map(|&i| f(i).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let detail = groups
        .iter()
        .enumerate()
        .map(|(g, (words, members))| {
            let differing = if g == 0 {
                Vec::new()
            } else {
                D::differing(first, words)
            };
            let diff = if differing.is_empty() {
                String::new()
            } else {
                format!(" (differs in {})", differing.join(", "))
            };
            let who = match pes {
                Pes::World => format!("PE {}", list(members, &|i| i)),
                Pes::Team(world) => format!(
                    "team PE {} (world PE {})",
                    list(members, &|i| i),
                    list(members, world)
                ),
            };
            format!("{who} called {}{diff}", D::describe(words))
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(mismatch(detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call of one argument, `f(x)`.
    struct F;

    impl Described for F {
        fn describe(words: &[u64]) -> String {
            format!("f({})", words[0])
        }

        fn differing(_: &[u64], _: &[u64]) -> Vec<&'static str> {
            vec!["x"]
        }
    }

    /// A call whose differences are not named.
    struct G;

    impl Described for G {
        fn describe(words: &[u64]) -> String {
            format!("g({})", words[0])
        }
    }

    /// The detail of `check`'s error, which must be one.
    fn detail(r: Result<()>) -> String {
        match r.unwrap_err() {
            Error::TeamMismatch { detail, .. } => detail,
            e => panic!("{e}"),
        }
    }

    #[test]
    fn alike_calls_pass() {
        let err = |detail| Error::TeamMismatch { op: "t", detail };
        assert!(check::<F, _>(&[[1u64], [1]], Pes::World, err).is_ok());
        assert!(check::<F, [u64; 1]>(&[], Pes::World, err).is_ok());
    }

    #[test]
    fn groups_name_the_pes_and_the_difference() {
        let err = |detail| Error::TeamMismatch { op: "t", detail };
        let all = [[1u64], [2], [1], [3]];
        assert_eq!(
            detail(check::<F, _>(&all, Pes::World, err)),
            "PE 0, 2 called f(1); PE 1 called f(2) (differs in x); PE 3 called f(3) (differs in x)"
        );
        assert_eq!(
            detail(check::<G, _>(&all, Pes::World, err)),
            "PE 0, 2 called g(1); PE 1 called g(2); PE 3 called g(3)"
        );
        assert_eq!(
            detail(check::<F, _>(&all[..2], Pes::Team(&|i| 10 + 2 * i), err)),
            "team PE 0 (world PE 10) called f(1); team PE 1 (world PE 12) called f(2) (differs in x)"
        );
    }
}
