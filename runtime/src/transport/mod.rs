//! Remote transports: how this PE reaches PEs whose heaps are not mapped here (other nodes,
//! or P2P disabled), and which one each PE pair uses.
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

use std::sync::Arc;

use symmem_device::Request;

use crate::config::RemoteTransport;
use crate::error::{Error, Result};

/// The buffer a request reads from or writes to on the issuing PE.
pub(crate) enum Io<'a> {
    /// No payload (AMOs, signals, fence, quiet).
    None,
    /// The source of a put or put_signal (`request.len` bytes).
    Src(&'a [u8]),
    /// The destination of a get (`request.len` bytes).
    Dst(&'a mut [u8]),
}

/// A way to reach remote PEs.
pub(crate) trait Transport: Send + Sync {
    /// Short name for logs and errors (`socket`, `ib`).
    fn name(&self) -> &'static str;

    /// Issues `req` to `req.pe` and returns when it is locally complete; returns the
    /// fetched value of a fetching AMO (0 otherwise). `io` carries the payload: `Src` for
    /// puts, `Dst` for gets, `None` for everything else. `req.local` is ignored: the
    /// payload is `io`.
    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64>;

    /// Orders every request submitted before the fence to each PE before those submitted
    /// after it (`nvshmem_fence`). Does not wait.
    fn fence(&self) -> Result<()>;

    /// Returns when every request submitted before it is complete and visible at its
    /// target (`nvshmem_quiet`).
    fn quiet(&self) -> Result<()>;

    /// Makes progress on incoming and outgoing traffic without blocking; waits call it
    /// between polls so that a PE spinning on its own heap serves its peers.
    fn progress(&self) -> Result<()>;

    /// Stops the transport's threads and closes its connections; later submits fail.
    /// Called once, before the heap is unmapped.
    fn shutdown(&self);
}

/// This PE's heap as a transport sees it: what incoming requests are applied to (socket)
/// or what is registered with the NIC (ibverbs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeapRegion {
    /// Address of this PE's heap: a host pointer, or a device address on a GPU PE.
    pub base: u64,
    /// Bytes.
    pub len: usize,
    /// Whether `base` is host memory (a CPU PE) or GPU memory (a GPU PE).
    pub host: bool,
}

/// What a transport needs to connect. Connecting is collective: every PE of the job calls
/// it, in the same order relative to other bootstrap collectives.
pub(crate) struct Setup<'a> {
    /// The job's bootstrap, for exchanging addresses and keys.
    pub bootstrap: &'a dyn symmem_bootstrap::Bootstrap,
    /// The runtime's configuration.
    pub config: &'a crate::config::Config,
    /// This PE.
    pub me: usize,
    /// `remote[pe]`: whether this PE reaches `pe` through the transport.
    pub remote: &'a [bool],
    /// This PE's heap.
    pub heap: HeapRegion,
    /// When connecting must be done.
    pub deadline: std::time::Instant,
}

#[cfg(feature = "ib")]
mod ib;
mod socket;
mod target;

/// The transports a build can choose between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    Socket = 1,
    Ib = 2,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Socket => "socket",
            Kind::Ib => "ib",
        }
    }
}

/// Why an `ib` transport cannot be used here, or `Ok` with the device it would use.
fn probe_ib(config: &crate::config::Config) -> std::result::Result<String, String> {
    #[cfg(feature = "ib")]
    return ib::probe(config);
    #[cfg(not(feature = "ib"))]
    {
        let _ = config;
        Err("this build has no ibverbs support (build symmem with --features ib)".into())
    }
}

/// What this PE would use, and why (`SYMMEM_REMOTE_TRANSPORT`).
fn choose(config: &crate::config::Config) -> Result<(Kind, String)> {
    match config.remote_transport {
        RemoteTransport::Socket => Ok((Kind::Socket, "SYMMEM_REMOTE_TRANSPORT=socket".into())),
        RemoteTransport::Ib => match probe_ib(config) {
            Ok(dev) => Ok((Kind::Ib, format!("SYMMEM_REMOTE_TRANSPORT=ib, {dev}"))),
            Err(why) => Err(Error::TransportConfig {
                variable: "SYMMEM_REMOTE_TRANSPORT",
                value: "ib".into(),
                reason: format!("no usable RDMA device: {why}; use socket or auto"),
            }),
        },
        RemoteTransport::Auto => match probe_ib(config) {
            Ok(dev) => Ok((Kind::Ib, format!("auto: RDMA device {dev}"))),
            Err(why) => Ok((Kind::Socket, format!("auto: no RDMA device ({why})"))),
        },
    }
}

/// Connects the remote transport when any PE has a peer whose heap it cannot map, and
/// logs which transport reaches which peer and why. Collective: every PE calls it, and
/// all of them agree on one transport (a job where PEs choose differently fails, naming
/// them).
pub(crate) fn connect(setup: &Setup<'_>) -> Result<Option<Arc<dyn Transport>>> {
    let b = setup.bootstrap;
    if b.size() == 1 {
        return Ok(None);
    }
    let needs = setup.remote.iter().any(|&r| r);
    let all = b.allgather(&[needs as u8, setup.heap.host as u8])?;
    if all.iter().all(|v| v.first() != Some(&1)) {
        return Ok(None);
    }
    let (kind, why) = choose(setup.config)?;
    let kinds = b.allgather(&[kind as u8])?;
    let differ: Vec<String> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| k.first() != Some(&(kind as u8)))
        .map(|(pe, k)| {
            let theirs = match k.first() {
                Some(1) => "socket",
                Some(2) => "ib",
                _ => "?",
            };
            format!("PE {pe} chose {theirs}")
        })
        .collect();
    if !differ.is_empty() {
        return Err(Error::TransportConfig {
            variable: "SYMMEM_REMOTE_TRANSPORT",
            value: format!("{:?}", setup.config.remote_transport).to_lowercase(),
            reason: format!(
                "PE {} chose {} ({why}) but {}; set SYMMEM_REMOTE_TRANSPORT to the same transport on every PE",
                setup.me,
                kind.name(),
                differ.join(", ")
            ),
        });
    }
    let gpu_heaps: Vec<String> = (0..all.len())
        .filter(|&pe| all[pe].get(1) != Some(&1))
        .map(|pe| pe.to_string())
        .collect();
    if kind == Kind::Socket && !gpu_heaps.is_empty() {
        // Every PE sees the same allgather, so all of them take this branch together.
        // Operations to PEs without a P2P path then fail naming them (Error::Unreachable).
        tracing::warn!(
            target: "init",
            "PE {}: no remote transport: PEs {} have GPU heaps, which the socket transport cannot serve yet (the ib transport registers them through dma-buf); PEs without a P2P path are unreachable",
            setup.me,
            gpu_heaps.join(", ")
        );
        return Ok(None);
    }
    let t: Arc<dyn Transport> = match kind {
        Kind::Socket => Arc::new(socket::SocketTransport::connect(setup)?),
        #[cfg(feature = "ib")]
        Kind::Ib => Arc::new(ib::IbTransport::connect(setup)?),
        #[cfg(not(feature = "ib"))]
        Kind::Ib => unreachable!("probe_ib never succeeds without the ib feature"),
    };
    for pe in (0..setup.remote.len()).filter(|&p| setup.remote[p]) {
        tracing::info!(target: "init", "PE {} reaches PE {pe} over {} ({why})", setup.me, t.name());
    }
    Ok(Some(t))
}
