//! symmem: an NVSHMEM-style PGAS symmetric-memory runtime.
pub use symmem_runtime::*;
