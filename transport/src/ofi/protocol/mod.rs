//! The ofi transport's protocol: pure logic, with no FFI and no threads (completions and
//! bytes in, decisions out), unit-tested without libfabric.

// Crate-visible for the fuzzing decoders (`crate::fuzzing`).
pub(crate) mod auth;
pub(super) mod ordering;
