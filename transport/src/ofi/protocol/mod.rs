//! The ofi transport's protocol: pure logic, with no FFI and no threads (completions and
//! bytes in, decisions out), unit-tested without libfabric.

// Crate-visible for the fuzzing decoders (`crate::fuzzing`).
pub(super) mod acks;
pub(crate) mod auth;
pub(super) mod completions;
pub(super) mod deliveries;
// Crate-visible for the fuzzing decoders (`crate::fuzzing`).
pub(crate) mod exchange;
// Crate-visible for the fuzzing decoders (`crate::fuzzing`).
pub(crate) mod messages;
pub(super) mod ordering;
pub(super) mod slots;
