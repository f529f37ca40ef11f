//! The operations of a [`Runtime`](crate::Runtime), one family per file: each adds an
//! `impl Runtime` block (or a type the operations return) on top of the state that
//! `runtime.rs` and the files below it define, and none is imported by those.

pub(crate) mod access;
pub(crate) mod alloc;
pub(crate) mod amo;
pub(crate) mod barrier;
#[cfg(feature = "cuda")]
pub(crate) mod gpu;
pub(crate) mod kernels;
pub mod local;
pub(crate) mod ordering;
pub(crate) mod raw;
pub(crate) mod rma;
pub(crate) mod signal;
pub(crate) mod stream;
pub(crate) mod stream_local;
pub(crate) mod wait;
