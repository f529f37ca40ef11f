//! Who issues a benchmark's operations ([`Initiator`]), and the shape of the kernel launch
//! that each initiator means.

use symmem_bench_kernels as kernels;

/// Who issues the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initiator {
    /// A host thread of PE 0.
    Host,
    /// One thread of a kernel on the CPU executor.
    Thread,
    /// A 32-thread warp of a kernel on the CPU executor (`_warp` operations).
    Warp,
    /// A 64-thread block of a kernel (`_block` operations).
    Block,
    /// Every block of a many-block grid (bandwidth rows on GPUs).
    Grid,
    /// Stream-ordered operations (`*_on_stream`) queued by a host thread.
    Stream,
}

impl Initiator {
    /// The name used in the JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Initiator::Host => "host",
            Initiator::Thread => "thread",
            Initiator::Warp => "warp",
            Initiator::Block => "block",
            Initiator::Grid => "grid",
            Initiator::Stream => "stream",
        }
    }

    /// Threads per block of the kernel launch, and the kernels' `scope` argument.
    pub fn launch(self) -> (u32, u32) {
        match self {
            Initiator::Host | Initiator::Thread | Initiator::Stream => (1, kernels::THREAD),
            Initiator::Warp => (32, kernels::WARP),
            Initiator::Block => (kernels::BLOCK_THREADS, kernels::BLOCK),
            Initiator::Grid => (GRID_THREADS, kernels::BLOCK),
        }
    }
}

/// Blocks of the grid bandwidth kernel: enough to fill an H100's 132 SMs twice.
pub const GRID_BLOCKS: u32 = 264;
/// Threads per block of the grid bandwidth kernel.
pub const GRID_THREADS: u32 = 1024;
