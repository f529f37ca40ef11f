//! The transport's driver: what touches libfabric and threads, around the protocol's
//! rules. Probing providers ([`probe`]), opening the endpoint and learning the peers'
//! ([`open`]), and the progress thread ([`progress`]).

pub(super) mod open;
pub(super) mod probe;
pub(super) mod progress;
