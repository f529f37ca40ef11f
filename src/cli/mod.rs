//! The command lines of symmem's tools, each defined once with clap's derive: the tools
//! parse their arguments with these types, and `symmem-mangen` writes their man pages from
//! the same definitions (so `--help` and `man symrun` cannot disagree).
//!
//! Behind the `cli` feature (on by default), so that a program using symmem as a library
//! can leave clap out.

pub mod info;
pub mod launch;
pub mod perf;
pub mod report;
pub mod symrun;

use clap::CommandFactory;

/// Every tool's command, in the order their man pages are written: `symrun`,
/// `symmem-info`, `symmem-perf`.
pub fn commands() -> Vec<clap::Command> {
    vec![
        symrun::Args::command(),
        info::Args::command(),
        perf::Args::command(),
    ]
}

/// A positive whole number (a count of PEs, iterations, bytes or repetitions).
pub fn positive(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("expected a positive number, not {text:?}"))
}
