//! The crate-private decoders, for the fuzz targets in `fuzz/` (feature `fuzzing`).

#[cfg(feature = "cuda")]
pub use crate::heap::cuda::{
    decode as decode_gpu_heap_description, encode_ipc, encode_vmm, Description,
};
pub use crate::heap::fd_pass::{receive as fd_pass_receive, send_fds as fd_pass_send};
pub use crate::topology::PeInfo;
