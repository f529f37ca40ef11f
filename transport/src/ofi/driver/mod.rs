//! The transport's driver: what touches libfabric, sysfs and threads, around the
//! protocol's rules ([`super::protocol`]). Probing providers ([`probe`]; for GPU heaps,
//! [`gpu_atomics`]), choosing this PE's domain ([`placement`]), learning which PEs share its
//! machine ([`machine`]), opening the endpoint and learning the peers' ([`open`]), the
//! messages' key and checker ([`auth`]), and the progress thread ([`progress`]).

pub(super) mod auth;
pub(super) mod gpu_atomics;
pub(super) mod machine;
pub(super) mod open;
pub(super) mod placement;
pub(super) mod probe;
pub(super) mod progress;
