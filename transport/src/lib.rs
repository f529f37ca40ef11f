//! symmem's remote transports: how a PE reaches PEs whose heaps are not mapped into it
//! (other nodes, or P2P disabled), and which one each PE pair uses. The runtime hands a
//! transport its configuration ([`TransportConfig`]), its heap and the job's bootstrap
//! ([`Setup`]), and gets back one [`Transport`]; nothing here knows the runtime.
//!
//! # Layout
//! - `interface.rs`: the contract ([`Transport`], [`InFlight`], [`Setup`], [`DeviceHeap`],
//!   [`OpCounter`]); it imports no transport.
//! - `socket/`, `ib/` (feature `ib`), `ofi/` (feature `ofi`): the remote transports (a
//!   build without a transport's feature has only its `entry.rs`); `weak.rs`, the reordering
//!   transport of `SYMMEM_ORDERING=weak`, in front of every peer, and `direct.rs`, which
//!   delivers its requests to same-node peers through their mapped heaps; `counted.rs`,
//!   the counting decorator; `target.rs`, the target side that applies a peer's request.
//! - `blocked.rs`: what callers blocked inside a transport wait for, for the hang report.
//! - `registry.rs`: how a remote transport plugs in (an entry: its name, agreement byte,
//!   probes and connect), and what adding one takes; each transport's folder defines its
//!   entry.
//! - `connect.rs`: the list of entries, which transport a job uses (`agree.rs`: how the
//!   PEs agree) and connecting it; it imports the transports, and nothing imports it but
//!   the root.
//!
//! Every transport carries the one op vocabulary, [`symmem_device::Request`]: host
//! operations build requests, the proxy thread takes them off the device ring, and each
//! transport encodes them its own way (socket frames, ibverbs work requests).
//!
//! Completion follows OpenSHMEM: [`Transport::submit`] returns when the request is
//! *locally* complete (a put's source may be reused; a get's destination or a fetching
//! AMO's result is filled in). Puts, non-fetching AMOs and signals are *remotely* complete
//! only after [`Transport::quiet`]. Requests from one PE to one target are applied in the
//! order they were submitted, so a put_signal's signal is never visible before its data.
//!
//! # Pipelining
//! [`Transport::submit_nowait`] issues a request without waiting for its reply, so the
//! proxy thread can have many fetching requests (fetching AMOs, gets) in flight at once
//! instead of paying a round trip each. Its result is then collected with
//! [`InFlight::poll`]. The socket transport implements it for real (the frame is sent and
//! the reply recorded as pending); the others complete at once through
//! [`Transport::submit`] (the default), which is always allowed. Either way a request is
//! applied at its target in submission order with every other request to that target.

// Every unsafe block says why it is sound, in a `// SAFETY:` comment above it.
#![warn(clippy::undocumented_unsafe_blocks)]

mod agree;
mod blocked;
pub mod config;
mod connect;
mod counted;
mod direct;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
// A transport behind a cargo feature is, in a build without it, only its entry
// (`<name>/entry.rs`), which names the feature (`registry.rs`).
#[cfg_attr(not(feature = "ib"), path = "ib/entry.rs")]
mod ib;
pub mod int;
mod interface;
#[cfg_attr(not(feature = "ofi"), path = "ofi/entry.rs")]
mod ofi;
mod registry;
mod socket;
mod target;
mod weak;

pub use blocked::Blocked;
pub use config::{OfiAssumeOrder, OfiProgress, RemoteTransport, TransportConfig};
pub use connect::{
    connect, probe, remote_transport_choices, remote_transports, Connected, RemoteChoice,
    TransportBuild,
};
pub use counted::Counted;
pub use error::{Error, GpuHeapError, Result};
pub use interface::{DeviceHeap, HeapRegion, InFlight, Io, OpCounter, Pending, Setup, Transport};
