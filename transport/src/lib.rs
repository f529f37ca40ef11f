//! symmem's remote transports: how a PE reaches PEs whose heaps are not mapped into it
//! (other nodes, or P2P disabled), and which one each PE pair uses. The runtime hands a
//! transport its configuration ([`TransportConfig`]), its heap and the job's bootstrap
//! ([`Setup`]), and gets back one [`Transport`]; nothing here knows the runtime. With `SYMMEM_ORDERING=weak` every
//! peer is reached through the [`weak`] reordering transport, which delivers to same-node
//! peers through the [`direct`] transport and to the others through socket or ib.
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

use std::sync::Arc;

use symmem_device::Request;

pub use config::{RemoteTransport, TransportConfig};
pub use counted::{Counted, OpCounter};
pub use error::{Error, GpuHeapError, Result};
pub use target::DeviceHeap;

/// The buffer a request reads from or writes to on the issuing PE.
pub enum Io<'a> {
    /// No payload (AMOs, signals, fence, quiet).
    None,
    /// The source of a put or put_signal (`request.len` bytes).
    Src(&'a [u8]),
    /// The destination of a get (`request.len` bytes).
    Dst(&'a mut [u8]),
}

/// A request issued with [`Transport::submit_nowait`].
pub enum Pending {
    /// Locally complete on return, like [`Transport::submit`]: the fetched value of a
    /// fetching AMO (0 otherwise); a get's bytes are already in its `Io::Dst`.
    Done(u64),
    /// Sent; the reply, with the fetched value or bytes, comes later.
    Reply(Box<dyn InFlight>),
}

/// A fetching request whose reply has not been collected yet. Dropping it abandons the
/// reply: a reply that comes later is read and discarded.
pub trait InFlight: Send {
    /// Collects the reply if it has arrived: `Some(value)` (a fetching AMO's old value,
    /// 0 for a get) with a get's `request.len` bytes copied into `dst` (empty for an
    /// AMO); `None` while it has not. Never blocks and does not read the connection
    /// itself: [`Transport::progress`] and the transport's own thread do. Fails naming
    /// the target PE when its connection failed or no reply came within `SYMMEM_TIMEOUT`;
    /// then every later poll of that peer's requests fails too.
    fn poll(&mut self, dst: &mut [u8]) -> Result<Option<u64>>;
}

/// A way to reach remote PEs.
pub trait Transport: Send + Sync {
    /// Short name for logs and errors (`socket`, `ib`).
    fn name(&self) -> &'static str;

    /// Issues `req` to `req.pe` and returns when it is locally complete; returns the
    /// fetched value of a fetching AMO (0 otherwise). `io` carries the payload: `Src` for
    /// puts, `Dst` for gets, `None` for everything else. `req.local` is ignored: the
    /// payload is `io`.
    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64>;

    /// Issues `req` like [`Transport::submit`], but a fetching request (a fetching AMO,
    /// a get) may return [`Pending::Reply`] before its reply is in; `io` is as for
    /// `submit` (a pending get's bytes go to the `dst` of the poll that collects them
    /// instead). The request is ordered with every other request to `req.pe` as if
    /// `submit` had been called, and a later [`Transport::quiet`] covers it. Callers
    /// bound how many they leave in flight per peer. The default completes synchronously
    /// through `submit`.
    fn submit_nowait(&self, req: &Request, io: Io<'_>) -> Result<Pending> {
        self.submit(req, io).map(Pending::Done)
    }

    /// Orders every request submitted before the fence to each PE before those submitted
    /// after it (`nvshmem_fence`). Does not wait.
    fn fence(&self) -> Result<()>;

    /// Returns when every request submitted before it is complete and visible at its
    /// target (`nvshmem_quiet`).
    fn quiet(&self) -> Result<()>;

    /// Makes progress on incoming and outgoing traffic without blocking; waits call it
    /// between polls while they spin, so that a PE spinning on its own heap serves its
    /// peers at once (a sleeping wait leaves that to the transport's own thread).
    fn progress(&self) -> Result<()>;

    /// Tells the transport that the issuer of `req`, a put, put_signal or get it already
    /// submitted, does not wait for it (`put_nbi`, `put_signal_nbi`, `get_nbi`, from a
    /// kernel or from host code): the source at `req.local` must stay unchanged until the
    /// next quiet, and a get's destination there is defined only after it. Transports that
    /// copied the payload need nothing; weak ordering fingerprints a put's source to
    /// report its reuse and hides a get's result until the quiet.
    fn nbi_issued(&self, req: &Request) {
        let _ = req;
    }

    /// Stops the transport's threads and closes its connections; later submits fail.
    /// Called once, before the heap is unmapped.
    fn shutdown(&self);

    /// Gives the transport this PE's GPU heap access path, built by `make`, if it applies
    /// peers' requests itself (socket). Called once at init, before any peer may send. A
    /// transport whose NIC reaches the heap itself (ib) does not call `make`.
    fn serve_device_heap(
        &self,
        make: &dyn Fn() -> Result<Arc<dyn DeviceHeap>, GpuHeapError>,
    ) -> Result<(), GpuHeapError> {
        let _ = make;
        Ok(())
    }
}

/// This PE's heap as a transport sees it: what incoming requests are applied to (socket)
/// or what is registered with the NIC (ibverbs).
#[derive(Debug, Clone, Copy)]
pub struct HeapRegion {
    /// Address of this PE's heap: a host pointer, or a device address on a GPU PE.
    pub base: u64,
    /// Bytes.
    pub len: usize,
    /// Whether `base` is host memory (a CPU PE) or GPU memory (a GPU PE).
    pub host: bool,
}

/// What a transport needs to connect. Connecting is collective: every PE of the job calls
/// it, in the same order relative to other bootstrap collectives.
pub struct Setup<'a> {
    /// The job's bootstrap, for exchanging addresses and keys.
    pub bootstrap: &'a dyn symmem_bootstrap::Bootstrap,
    /// The transports' part of the runtime's configuration.
    pub config: &'a TransportConfig,
    /// This PE.
    pub me: usize,
    /// `remote[pe]`: whether this PE reaches `pe` through the transport.
    pub remote: &'a [bool],
    /// This PE's heap.
    pub heap: HeapRegion,
    /// `peer_bases[pe]`: where `pe`'s heap is mapped here (host memory), 0 if it is not.
    pub peer_bases: &'a [u64],
    /// When connecting must be done.
    pub deadline: std::time::Instant,
    /// The counters of the path named (`socket`, `ib`, `direct`): each transport counts
    /// the requests, fences and quiets it carries in its own.
    pub counter: &'a dyn Fn(&'static str) -> Arc<dyn OpCounter>,
    /// Exports this PE's GPU heap as a dma-buf (`cuMemGetHandleForAddressRange`), for a
    /// NIC to register; `None` on a CPU PE or a build without CUDA.
    pub export_gpu_heap: Option<&'a dyn Fn() -> Result<std::os::fd::OwnedFd, GpuHeapError>>,
}

mod agree;
pub mod config;
mod counted;
mod direct;
mod error;
#[cfg(feature = "ib")]
mod ib;
pub mod int;
mod socket;
mod target;
mod weak;

/// The transports a build can choose between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Socket,
    Ib,
}

/// Why an `ib` transport cannot be used here, or `Ok` with the device it would use.
pub fn probe_ib(config: &TransportConfig) -> std::result::Result<String, String> {
    #[cfg(feature = "ib")]
    return ib::probe(config);
    #[cfg(not(feature = "ib"))]
    {
        let _ = config;
        Err("this build has no ibverbs support (build symmem with --features ib)".into())
    }
}

/// What this PE would use, and why (`SYMMEM_REMOTE_TRANSPORT`).
fn choose(config: &TransportConfig) -> Result<(Kind, String)> {
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

/// This PE's proposal for the job's transport: what [`choose`] picks, except that a GPU
/// heap the NIC cannot register is [`agree::Proposal::Staged`] when
/// `SYMMEM_ALLOW_HOST_STAGING=1` (checked by registering it once).
fn propose(setup: &Setup<'_>) -> Result<(agree::Proposal, String)> {
    let (kind, why) = choose(setup.config)?;
    Ok(match kind {
        Kind::Socket => (agree::Proposal::Socket, why),
        Kind::Ib if setup.heap.host || !setup.config.allow_host_staging => {
            (agree::Proposal::Ib, why)
        }
        Kind::Ib => match probe_gpu_heap(setup) {
            Ok(()) => (agree::Proposal::Ib, why),
            Err(cause) => (
                agree::Proposal::Staged,
                format!("{why}, but the GPU heap cannot be registered: {cause}"),
            ),
        },
    })
}

/// Whether the NIC can register this PE's GPU heap, or why not.
fn probe_gpu_heap(setup: &Setup<'_>) -> std::result::Result<(), String> {
    #[cfg(feature = "ib")]
    return ib::probe_gpu_registration(setup.config, setup.heap, setup.export_gpu_heap);
    #[cfg(not(feature = "ib"))]
    {
        let _ = setup;
        Err("this build has no ibverbs support".into())
    }
}

/// The remote transport a job uses and why it was chosen (as logged at init).
#[derive(Debug, Clone)]
pub struct RemoteChoice {
    /// The transport's name (`socket`, `ib`).
    pub name: &'static str,
    /// Why: `SYMMEM_REMOTE_TRANSPORT` and what the RDMA probe found.
    pub why: String,
}

/// What [`connect`] set up.
pub struct Connected {
    /// The transport to PEs whose heaps are not mapped here (with weak ordering, to every
    /// peer); None when there is none.
    pub transport: Option<Arc<dyn Transport>>,
    /// The remote transport behind it, if any, and why it was chosen.
    pub remote: Option<RemoteChoice>,
}

/// Connects the transports of this PE: the remote transport when any PE has a peer whose
/// heap it cannot map, and with `SYMMEM_ORDERING=weak` the reordering transport in front
/// of it and of the direct transport to same-node peers. Collective: every PE calls it.
pub fn connect(setup: &Setup<'_>) -> Result<Connected> {
    let (transport, remote) = match connect_remote(setup)? {
        Some((t, why)) => {
            let name = t.name();
            (Some(t), Some(RemoteChoice { name, why }))
        }
        None => (None, None),
    };
    if !setup.config.weak_ordering || setup.bootstrap.size() == 1 {
        return Ok(Connected { transport, remote });
    }
    let transport = Some(connect_weak(setup, transport)?);
    Ok(Connected { transport, remote })
}

/// Starts the weak-ordering transport over `remote` and the direct transport, with the
/// seed of PE 0 (`SYMMEM_ORDERING_SEED`, or from its clock). Collective.
fn connect_weak(
    setup: &Setup<'_>,
    remote: Option<Arc<dyn Transport>>,
) -> Result<Arc<dyn Transport>> {
    let me = setup.me;
    if !setup.heap.host {
        return Err(Error::TransportConfig {
            variable: "SYMMEM_ORDERING",
            value: "weak".into(),
            reason: format!(
                "weak ordering is a mode of CPU PEs, and PE {me} is a GPU PE (whose memory model is weak already); set SYMMEM_DEVICE=cpu to debug its kernels on CPU PEs"
            ),
        });
    }
    let clock = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    let proposed = setup.config.ordering_seed.unwrap_or_else(clock);
    let agreed = setup.bootstrap.broadcast(0, &proposed.to_le_bytes())?;
    let seed = agreed
        .as_slice()
        .try_into()
        .map(u64::from_le_bytes)
        .map_err(|_| Error::Inconsistent {
            what: "SYMMEM_ORDERING_SEED",
            detail: format!(
                "PE {me}: the SYMMEM_ORDERING_SEED broadcast from PE 0 has {} bytes, not 8",
                agreed.len()
            ),
        })?;
    if me == 0 {
        tracing::warn!(
            "weak ordering (SYMMEM_ORDERING=weak): puts and signals to peers are buffered and delivered in a seeded order; SYMMEM_ORDERING_SEED={seed} replays this run"
        );
    }
    let direct = direct::DirectTransport::new(me, setup.heap.len, setup.peer_bases);
    let route: Vec<Option<usize>> = (0..setup.remote.len())
        .map(|pe| match pe {
            _ if pe == me => None,
            _ if direct.reaches(pe) => Some(0),
            _ if setup.remote[pe] && remote.is_some() => Some(1),
            _ => None,
        })
        .collect();
    let direct = Counted::new(direct, (setup.counter)("direct"));
    let mut inners: Vec<Arc<dyn Transport>> = vec![Arc::new(direct)];
    inners.extend(remote);
    tracing::info!(target: "init::transport", "PE {me}: weak ordering, SYMMEM_ORDERING_SEED={seed}");
    let heap = (setup.heap.base, setup.heap.len);
    Ok(Arc::new(weak::WeakTransport::start(
        me, seed, heap, route, inners,
    )?))
}

/// Connects the remote transport when any PE has a peer whose heap it cannot map, and
/// logs which transport reaches which peer and why. Collective: every PE calls it, and
/// all of them agree on one transport (a job where PEs choose differently fails, naming
/// them). Returns the transport and why it was chosen.
fn connect_remote(setup: &Setup<'_>) -> Result<Option<(Arc<dyn Transport>, String)>> {
    let b = setup.bootstrap;
    if b.size() == 1 {
        return Ok(None);
    }
    let needs = setup.remote.iter().any(|&r| r);
    let all = b.allgather(&[needs as u8])?;
    if all.iter().all(|v| v.first() != Some(&1)) {
        return Ok(None);
    }
    let (proposal, why) = propose(setup)?;
    let all = b.allgather(&agree::encode(proposal, setup.config.allow_host_staging))?;
    let (kind, why) = match agree::agree(&all) {
        Ok(agree::Verdict::Ib) => (Kind::Ib, why),
        Ok(agree::Verdict::Socket { staged }) if staged.is_empty() => {
            if cfg!(feature = "ib") && setup.config.remote_transport == RemoteTransport::Auto {
                // A build with ib support that ends up on sockets has fallen back.
                tracing::warn!(
                    target: "init::transport",
                    "PE {}: the job's remote transport is socket, not ib (SYMMEM_REMOTE_TRANSPORT=auto; this PE: {why})",
                    setup.me
                );
            }
            (Kind::Socket, why)
        }
        Ok(agree::Verdict::Socket { staged }) => {
            let pes: Vec<String> = staged.iter().map(|p| p.to_string()).collect();
            tracing::warn!(
                "PE {}: host staging (SYMMEM_ALLOW_HOST_STAGING=1): the NIC cannot register the GPU heaps of PEs {}, so every remote op of this job goes over the socket transport, staged through host memory: expect far lower bandwidth than GPUDirect RDMA (this PE: {why})",
                setup.me,
                pes.join(", ")
            );
            let why = format!(
                "host staging (SYMMEM_ALLOW_HOST_STAGING=1) for the GPU heaps of PEs {}; this PE: {why}",
                pes.join(", ")
            );
            (Kind::Socket, why)
        }
        Err(reason) => {
            return Err(Error::TransportConfig {
                variable: "SYMMEM_REMOTE_TRANSPORT",
                value: format!("{:?}", setup.config.remote_transport).to_lowercase(),
                reason: format!("PE {} ({why}): {reason}", setup.me),
            })
        }
    };
    let t: Arc<dyn Transport> = match kind {
        Kind::Socket => Arc::new(Counted::new(
            socket::SocketTransport::connect(setup)?,
            (setup.counter)("socket"),
        )),
        #[cfg(feature = "ib")]
        Kind::Ib => Arc::new(Counted::new(
            ib::IbTransport::connect(setup)?,
            (setup.counter)("ib"),
        )),
        #[cfg(not(feature = "ib"))]
        Kind::Ib => unreachable!("probe_ib never succeeds without the ib feature"),
    };
    for pe in (0..setup.remote.len()).filter(|&p| setup.remote[p]) {
        tracing::info!(target: "init::transport", "PE {} reaches PE {pe} over {} ({why})", setup.me, t.name());
    }
    Ok(Some((t, why)))
}
