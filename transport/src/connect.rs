//! Which remote transport a job uses, and connecting it: each PE proposes one (from
//! `SYMMEM_REMOTE_TRANSPORT` and what the RDMA probe finds), the job agrees on one
//! ([`crate::agree`]), and with weak ordering the reordering transport goes in front.

use std::sync::Arc;

use crate::agree;
use crate::config::{RemoteTransport, TransportConfig};
use crate::counted::Counted;
use crate::direct;
use crate::error::{Error, Result};
#[cfg(feature = "ib")]
use crate::ib;
use crate::interface::{Setup, Transport};
#[cfg(feature = "ofi")]
use crate::ofi;
use crate::socket;
use crate::weak;

/// The transports a build can choose between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Socket,
    Ib,
    Ofi,
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

/// Why an `ofi` transport cannot be used here (no libfabric provider with RDM endpoints,
/// RMA and atomics, or not `SYMMEM_OFI_PROVIDER`'s), or `Ok` with the provider it would use.
pub fn probe_ofi(config: &TransportConfig) -> std::result::Result<String, String> {
    #[cfg(feature = "ofi")]
    return ofi::probe(config.ofi_provider.as_deref());
    #[cfg(not(feature = "ofi"))]
    {
        let _ = config;
        Err("this build has no libfabric support (build symmem with --features ofi)".into())
    }
}

/// The libfabric provider of a fabric (EFA, Slingshot, verbs, Omni-Path: not TCP, UDP or
/// shared memory, where the socket transport is faster) that `auto` would use, or why
/// there is none.
fn probe_fabric() -> std::result::Result<String, String> {
    #[cfg(feature = "ofi")]
    return ofi::probe_fabric();
    #[cfg(not(feature = "ofi"))]
    Err("this build has no libfabric support".into())
}

/// What PE `me` would use, and why (`SYMMEM_REMOTE_TRANSPORT`); an error names the PE.
fn choose(config: &TransportConfig, me: usize) -> Result<(Kind, String)> {
    match config.remote_transport {
        RemoteTransport::Socket => Ok((Kind::Socket, "SYMMEM_REMOTE_TRANSPORT=socket".into())),
        RemoteTransport::Ib => match probe_ib(config) {
            Ok(dev) => Ok((Kind::Ib, format!("SYMMEM_REMOTE_TRANSPORT=ib, {dev}"))),
            Err(why) => Err(Error::TransportConfig {
                variable: "SYMMEM_REMOTE_TRANSPORT",
                value: "ib".into(),
                reason: format!("PE {me}: no usable RDMA device: {why}; use socket or auto"),
            }),
        },
        RemoteTransport::Ofi => match probe_ofi(config) {
            Ok(provider) => Ok((
                Kind::Ofi,
                format!("SYMMEM_REMOTE_TRANSPORT=ofi, provider {provider}"),
            )),
            Err(why) => Err(Error::TransportConfig {
                variable: "SYMMEM_REMOTE_TRANSPORT",
                value: "ofi".into(),
                reason: format!("PE {me}: {why}"),
            }),
        },
        RemoteTransport::Auto => match probe_ib(config) {
            Ok(dev) => Ok((Kind::Ib, format!("auto: RDMA device {dev}"))),
            Err(no_ib) => match probe_fabric() {
                Ok(provider) => Ok((
                    Kind::Ofi,
                    format!("auto: no RDMA device ({no_ib}); libfabric provider {provider}"),
                )),
                Err(no_fabric) => Ok((
                    Kind::Socket,
                    format!("auto: no RDMA device ({no_ib}); {no_fabric}"),
                )),
            },
        },
    }
}

/// This PE's proposal for the job's transport: what [`choose`] picks, except that a GPU
/// heap the NIC cannot register is [`agree::Proposal::Staged`] when
/// `SYMMEM_ALLOW_HOST_STAGING=1` (checked by registering it once).
fn propose(setup: &Setup<'_>) -> Result<(agree::Proposal, String)> {
    let (kind, why) = choose(setup.config, setup.me)?;
    Ok(match kind {
        Kind::Socket => (agree::Proposal::Socket, why),
        Kind::Ofi if setup.heap.host || !setup.config.allow_host_staging => {
            (agree::Proposal::Ofi, why)
        }
        Kind::Ofi => match probe_ofi_gpu_heap(setup.config) {
            Ok(()) => (agree::Proposal::Ofi, why),
            Err(cause) => (
                agree::Proposal::Staged,
                format!("{why}, but the GPU heap cannot be registered: {cause}"),
            ),
        },
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

/// Whether the ofi provider can register a GPU heap (`FI_HMEM` with CUDA), or why not.
fn probe_ofi_gpu_heap(config: &TransportConfig) -> std::result::Result<(), String> {
    #[cfg(feature = "ofi")]
    return ofi::probe_hmem(config.ofi_provider.as_deref()).map(drop);
    #[cfg(not(feature = "ofi"))]
    {
        let _ = config;
        Err("this build has no libfabric support".into())
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
        Ok(agree::Verdict::Ofi) => (Kind::Ofi, why),
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
        #[cfg(feature = "ofi")]
        Kind::Ofi => Arc::new(Counted::new(
            ofi::OfiTransport::connect(setup)?,
            (setup.counter)("ofi"),
        )),
        #[cfg(not(feature = "ofi"))]
        Kind::Ofi => unreachable!("probe_ofi never succeeds without the ofi feature"),
    };
    for pe in (0..setup.remote.len()).filter(|&p| setup.remote[p]) {
        tracing::info!(target: "init::transport", "PE {} reaches PE {pe} over {} ({why})", setup.me, t.name());
    }
    Ok(Some((t, why)))
}

#[cfg(all(test, feature = "ib"))]
mod tests {
    use super::*;

    /// `SYMMEM_REMOTE_TRANSPORT=ib` on a machine without a usable device is an error that
    /// names the variable and what the probe found; `auto` falls back to sockets with the
    /// same reason.
    #[test]
    fn asking_for_ib_here_names_the_variable_and_the_reason() {
        let config = TransportConfig {
            remote_transport: RemoteTransport::Ib,
            ..TransportConfig::unset()
        };
        let Err(why) = ib::probe(&config) else {
            eprintln!("this machine has a usable RDMA device; nothing to check");
            return;
        };
        let err = choose(&config, 0).unwrap_err().to_string();
        eprintln!("probe here: {why}\nSYMMEM_REMOTE_TRANSPORT=ib: {err}");
        assert!(err.contains("SYMMEM_REMOTE_TRANSPORT=ib"), "{err}");
        assert!(err.contains(&why), "{err} does not carry {why:?}");
        assert!(
            err.contains("libibverbs not found") || err.contains("no RDMA devices"),
            "{err}"
        );
        let auto = TransportConfig::unset();
        let (kind, reason) = choose(&auto, 0).unwrap();
        assert_eq!(kind, Kind::Socket);
        assert!(reason.contains(&why), "{reason}");
    }
}
