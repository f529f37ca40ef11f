//! CPU binding of the PEs a local launcher starts (`symrun --bind-to`, `--map-by`), and
//! of GPU PEs to their GPU's NUMA node: CPU sets ([`CpuSet`]), NUMA nodes ([`numa`]) and
//! the placement of PEs on them ([`Placement`]).

mod cpuset;
mod helpers;
pub mod numa;
mod placement;

pub use cpuset::CpuSet;
pub use helpers::place_helper_thread;
pub use placement::{binds, BindTo, Binding, Machine, MapBy, Placement};
