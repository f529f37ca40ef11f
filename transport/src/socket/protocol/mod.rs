//! The socket transport's protocol: pure logic, with no socket, no thread, no lock and
//! no system call (bytes in, frames and decisions out), unit-tested alone.
//!
//! - `frame.rs`: the frames' encoding and the checks a frame passes before it is read on.
//! - `receiver.rs`: the receive state machine, a connection's bytes in and its frames
//!   (heads, payload bytes, ends of payloads) out; the caller reads the bytes and acts.
//! - `pending.rs`: which request id awaits which answer; an answer of another kind or
//!   length is refused.
//! - `window.rs`: the answers' flow-control window.
//! - `tickets.rs`: flush tickets, which tell a `quiet` whether a flush covers its requests.

pub(super) mod frame;
pub(super) mod pending;
pub(super) mod receiver;
pub(super) mod tickets;
pub(super) mod window;
