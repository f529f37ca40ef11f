//! Slurm's host-list syntax: `node[01-03,07],gpu5` names `node01 node02 node03 node07 gpu5`.
//!
//! A list is comma-separated at the top level; each entry is literal text with any number of
//! bracket groups, and each group is a comma-separated set of numbers or `lo-hi` ranges.
//! A range keeps the width of its lower bound (`[08-10]` gives `08 09 10`). Several groups in
//! one entry expand as a cartesian product (`r[1-2]n[1-2]` gives `r1n1 r1n2 r2n1 r2n2`).

/// The most hosts an expansion may produce; a larger list is an error, not an allocation.
pub const MAX_HOSTS: usize = 1 << 20;

/// Expands a Slurm host list into host names, in order. The error says what is malformed.
pub fn expand(list: &str) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    for entry in split_top_level(list)? {
        let mut names = vec![String::new()];
        let mut rest = entry;
        while !rest.is_empty() {
            let (literal, group, after) = match rest.find('[') {
                Some(open) => {
                    let close = rest[open..]
                        .find(']')
                        .map(|c| open + c)
                        .ok_or_else(|| format!("unclosed '[' in {entry:?}"))?;
                    (
                        &rest[..open],
                        Some(&rest[open + 1..close]),
                        &rest[close + 1..],
                    )
                }
                None => (rest, None, ""),
            };
            if literal.contains(']') {
                return Err(format!("unmatched ']' in {entry:?}"));
            }
            names.iter_mut().for_each(|n| n.push_str(literal));
            if let Some(group) = group {
                let values = expand_group(group, entry)?;
                if names.len().saturating_mul(values.len()) + hosts.len() > MAX_HOSTS {
                    return Err(format!("{list:?} names more than {MAX_HOSTS} hosts"));
                }
                names = names
                    .iter()
                    .flat_map(|n| values.iter().map(move |v| format!("{n}{v}")))
                    .collect();
            }
            rest = after;
        }
        if names.iter().any(String::is_empty) {
            return Err(format!("empty host name in {list:?}"));
        }
        hosts.extend(names);
    }
    if hosts.is_empty() {
        return Err("the host list is empty".into());
    }
    Ok(hosts)
}

/// The first host of a Slurm host list (where rank 0 of a block-distributed step runs).
pub fn first_host(list: &str) -> Result<String, String> {
    // Expanding only the first top-level entry keeps `n[0-99999999]` cheap.
    let first = split_top_level(list)?
        .into_iter()
        .next()
        .ok_or("the host list is empty")?;
    let bounded: String = {
        // Replace each group by its first element before expanding.
        let mut out = String::new();
        let mut rest = first;
        while let Some(open) = rest.find('[') {
            let close = rest[open..]
                .find(']')
                .map(|c| open + c)
                .ok_or_else(|| format!("unclosed '[' in {first:?}"))?;
            out.push_str(&rest[..open]);
            let group = &rest[open + 1..close];
            let head = group.split(',').next().unwrap_or_default();
            let lo = head.split('-').next().unwrap_or_default();
            out.push('[');
            out.push_str(lo);
            out.push(']');
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        out
    };
    expand(&bounded)?
        .into_iter()
        .next()
        .ok_or_else(|| "the host list is empty".into())
}

/// Splits at commas outside brackets.
fn split_top_level(list: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in list.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err(format!("nested '[' in {list:?}")),
            ']' if depth == 1 => depth = 0,
            ']' => return Err(format!("unmatched ']' in {list:?}")),
            ',' if depth == 0 => {
                out.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unclosed '[' in {list:?}"));
    }
    out.push(list[start..].trim());
    if out.iter().any(|e| e.is_empty()) && list.trim() != "" {
        return Err(format!("empty entry in {list:?}"));
    }
    Ok(out.into_iter().filter(|e| !e.is_empty()).collect())
}

/// Expands the inside of one bracket group, e.g. `01-03,07`.
fn expand_group(group: &str, entry: &str) -> Result<Vec<String>, String> {
    let mut values = Vec::new();
    for part in group.split(',') {
        let part = part.trim();
        let number = |s: &str| {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{s:?} in {entry:?} is not a number"));
            }
            s.parse::<u64>()
                .map_err(|_| format!("{s:?} in {entry:?} is too large"))
        };
        let (lo_text, hi_text) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi) = (number(lo_text)?, number(hi_text)?);
        if hi < lo {
            return Err(format!("range {part:?} in {entry:?} runs backwards"));
        }
        if (hi - lo) as usize >= MAX_HOSTS - values.len().min(MAX_HOSTS) {
            return Err(format!(
                "range {part:?} in {entry:?} names more than {MAX_HOSTS} hosts"
            ));
        }
        let width = lo_text.len();
        values.extend((lo..=hi).map(|v| format!("{v:0width$}")));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(list: &str) -> Vec<String> {
        expand(list).unwrap_or_else(|e| panic!("{list}: {e}"))
    }

    #[test]
    fn plain_names_and_ranges() {
        assert_eq!(ok("gpu5"), ["gpu5"]);
        assert_eq!(ok("a,b ,c"), ["a", "b", "c"]);
        assert_eq!(
            ok("node[01-03,07],gpu5"),
            ["node01", "node02", "node03", "node07", "gpu5"]
        );
        assert_eq!(ok("n[8-11]"), ["n8", "n9", "n10", "n11"]);
        assert_eq!(ok("n[08-10]"), ["n08", "n09", "n10"]);
        assert_eq!(ok("n[098-100]"), ["n098", "n099", "n100"]);
        assert_eq!(ok("n[3]"), ["n3"]);
    }

    #[test]
    fn suffixes_and_several_groups() {
        assert_eq!(ok("n[1-2]-ib"), ["n1-ib", "n2-ib"]);
        assert_eq!(ok("r[1-2]n[1-2]"), ["r1n1", "r1n2", "r2n1", "r2n2"]);
        assert_eq!(
            ok("rack[1,3]-node[1-2],login"),
            [
                "rack1-node1",
                "rack1-node2",
                "rack3-node1",
                "rack3-node2",
                "login"
            ]
        );
        assert_eq!(ok("[1-2]x"), ["1x", "2x"]);
    }

    #[test]
    fn first_host_does_not_expand_everything() {
        assert_eq!(first_host("node[01-03,07],gpu5").unwrap(), "node01");
        assert_eq!(first_host("gpu5,node[1-2]").unwrap(), "gpu5");
        assert_eq!(first_host("n[0-99999999999]").unwrap(), "n0");
        assert_eq!(first_host("r[2-3]n[007-9]").unwrap(), "r2n007");
    }

    #[test]
    fn malformed_lists_are_errors() {
        for bad in [
            "",
            "n[1-",
            "n[1-3",
            "n]1",
            "n[a-b]",
            "n[3-1]",
            "n[[1]]",
            "a,,b",
            "n[1-]",
            "n[0-99999999999]",
            "n[]",
        ] {
            assert!(
                expand(bad).is_err(),
                "{bad:?} was accepted: {:?}",
                expand(bad)
            );
        }
        assert!(first_host("").is_err());
        assert!(first_host("n[1-").is_err());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1024))]

            /// Any text expands or is refused, and `first_host` names the first host of
            /// every list that expands.
            #[test]
            fn arbitrary_lists_never_panic(
                list in prop_oneof![".{0,60}", "[a-c0-9,\\[\\]\\- ]{0,40}"],
            ) {
                let first = first_host(&list);
                if let Ok(hosts) = expand(&list) {
                    prop_assert!(hosts.len() <= MAX_HOSTS);
                    prop_assert_eq!(first.as_ref(), Ok(&hosts[0]));
                }
            }
        }
    }
}
