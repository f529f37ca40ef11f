//! The shape of a launch: CUDA's `dim3` ([`Dim3`]), threads per warp, and the limits of a
//! block (threads, shared memory) that kernels and launches share.

/// Threads per warp.
pub const WARP_SIZE: u32 = 32;

/// The most threads per block a kernel launches with unless it declares fewer with
/// `max_threads(N)` in [`kernel!`](crate::kernel!): CUDA's limit. The PTX build gives every entry its bound
/// as a `.maxntid` directive, so ptxas keeps registers within what that many threads can
/// have: 64 per thread at 1024 (an SM has 65536), up to 255 at 256 threads or fewer (a
/// 1024-thread block of a 72-register kernel failed with `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`
/// on an H100; a 64-thread ping-pong capped at 64 registers spilled to local memory, which
/// every system fence's L1 invalidation then sends to L2). `symmem_ptx_build` uses the
/// same number.
pub const MAX_THREADS: u32 = 1024;

/// The most shared memory a block may have, its [`shared!`](crate::shared!) arrays and its dynamic shared
/// memory (`shared_bytes` at launch) together: 48 KiB, what every CUDA GPU allows without
/// an opt-in. A launch asking for more is refused, naming the kernel and the size.
pub const MAX_SHARED_BYTES: u32 = 48 << 10;

/// The prefix of the marker global that `kernel!` emits for a kernel with `max_threads(N)`:
/// `SYMMEM_MAX_THREADS_<kernel>` holding `N`, which the PTX build turns into the entry's
/// `.maxntid N, 1, 1`.
pub const MAX_THREADS_SYMBOL_PREFIX: &str = "SYMMEM_MAX_THREADS_";

/// A 3-D extent or index, as CUDA's `dim3`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Dim3 {
    /// x
    pub x: u32,
    /// y
    pub y: u32,
    /// z
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// Number of elements of an extent: `x * y * z`.
    pub const fn volume(self) -> u32 {
        self.x * self.y * self.z
    }

    /// Row-major linear index of `idx` within this extent (x fastest).
    pub const fn linear(self, idx: Dim3) -> u32 {
        (idx.z * self.y + idx.y) * self.x + idx.x
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::new(x, 1, 1)
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3::new(x, y, z)
    }
}
