//! Text for people: rank lists in messages, and whole lines on stderr.

/// Writes `line` and a newline to stderr in one write. `eprintln!` writes each formatted
/// piece separately, and a launcher that merges its ranks' stderr (mpirun, symrun)
/// would interleave the pieces with other processes' lines.
pub(crate) fn stderr_line(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Formats a list of ranks as `1, 3, 4`.
pub(crate) fn fmt_ranks(ranks: &[usize]) -> String {
    ranks
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
