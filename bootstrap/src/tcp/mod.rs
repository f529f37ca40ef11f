//! The built-in TCP rendezvous: a star around one server that relays collectives.
//!
//! The server runs in the `symrun` launcher, or inside rank 0 for unique-id init. Bootstrap
//! traffic is small and happens only at init, allocation and finalize, so a star is enough.

mod admission;
mod client;
mod server;

pub use admission::{Claim, HELLO_TIMEOUT, MAX_UNAUTHENTICATED, MAX_WAITING_PER_ADDRESS};
pub use client::TcpBootstrap;
pub use server::RendezvousServer;
