//! `symmem-info`'s command line.

use super::launch::SelfLaunchArgs;

/// Print symmem's version, build features, configuration variables (value and default),
/// devices, debugging modes and launcher.
///
/// With --pes N, also starts N local PEs (bound as symrun binds them) and prints their
/// topology, CPUs and routes. Run under `symrun -n N`, it prints that topology only.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "symmem-info", version, allow_negative_numbers = true)]
pub struct Args {
    /// The PEs whose topology to print.
    #[command(flatten)]
    pub launch: SelfLaunchArgs,
    /// Print one JSON document (version, features, variables by category with value,
    /// default and origin, devices, CPUs, launcher; with --pes, every PE's node, CPUs,
    /// device and routes under "pes") instead of text
    #[arg(long)]
    pub json: bool,
    /// Measure which copy method is fastest at each size on this machine (memcpy, the
    /// vector copy, memcpy in slices, non-temporal stores), print the measurement and keep
    /// it where init reads it for the rest of this boot (the `auto` bounds of
    /// SYMMEM_VECTOR_COPY_BELOW, SYMMEM_SLICED_COPY_FROM and SYMMEM_NT_COPY_THRESHOLD)
    #[arg(long)]
    pub calibrate: bool,
}
