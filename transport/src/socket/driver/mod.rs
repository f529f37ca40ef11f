//! The socket transport's driver: the sockets, the system calls and the threads under the
//! protocol. `connect.rs` sets the connections up, `service.rs` runs the service thread
//! that polls them, `wire.rs` is a connection's byte stream (its socket, or memory in the
//! tests and the fuzzer) and `sys.rs` makes the system calls behind a socket wire.

mod connect;
pub(super) mod service;
mod sys;
pub(super) mod wire;
