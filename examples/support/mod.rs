//! What the workload examples share: starting the job (self-launched PEs by default,
//! [`launch`]), reading comma-separated lists of numbers, and combining a few numbers over
//! all PEs.
//!
//! Not an example itself: Cargo only builds `examples/*.rs` and `examples/*/main.rs`.

pub mod launch;

use symmem::collectives::ReduceOp;
use symmem::{Runtime, SymBuf};

/// A positive whole number, for clap's `value_parser` (list items, counts).
pub fn positive(text: &str) -> Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|&x| x > 0)
        .ok_or_else(|| format!("expected a positive integer, not {text:?}"))
}

/// Combines `values` element by element over all PEs with `op`, through `scratch` (a
/// symmetric buffer of at least `values.len()` elements). Collective.
pub fn all_reduce<O: ReduceOp<u64>>(
    rt: &Runtime,
    scratch: &SymBuf<u64>,
    values: &[u64],
    op: O,
) -> symmem::Result<Vec<u64>> {
    rt.put(scratch.at(0), values, rt.my_pe())?;
    rt.team_world().reduce(scratch, scratch, values.len(), op)?;
    let mut out = vec![0; values.len()];
    rt.get(scratch.at(0), &mut out, rt.my_pe())?;
    Ok(out)
}
