//! The ofi transport's protocol: pure logic with no FFI and no threads (completions in,
//! actions out), unit-tested without libfabric.

pub(super) mod ordering;
