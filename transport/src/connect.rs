//! Which remote transport a job uses, and connecting it: each PE proposes one (from
//! `SYMMEM_REMOTE_TRANSPORT` and what the transports' probes find), the job agrees on one
//! ([`crate::agree`]), and with weak ordering the reordering transport goes in front. The
//! transports are the entries of [`REMOTE`] ([`crate::registry`]); nothing here names one
//! but that list.

use std::sync::Arc;

use crate::agree::{self, Choices, Proposal};
use crate::config::{var, RemoteTransport, TransportConfig};
use crate::counted::Counted;
use crate::direct;
use crate::error::{Error, Result};
use crate::interface::{Setup, Transport};
use crate::registry::{codes_are_distinct, Entry};
use crate::weak;
use crate::{ib, ofi, socket};

/// Every remote transport, in the order `SYMMEM_REMOTE_TRANSPORT=auto` prefers them: the
/// one place that lists them. Those this build leaves out are here too, so that asking for
/// one names the feature it needs.
const REMOTE: &[Entry] = &[ib::ENTRY, ofi::ENTRY, socket::ENTRY];

const _: () = assert!(
    codes_are_distinct(REMOTE),
    "two remote transports share an agreement byte, or one has agree::STAGED's"
);

/// The values of `SYMMEM_REMOTE_TRANSPORT`: `auto`, then every transport's name.
pub fn remote_transport_choices() -> Vec<(&'static str, RemoteTransport)> {
    std::iter::once(("auto", RemoteTransport::Auto))
        .chain(
            REMOTE
                .iter()
                .map(|e| (e.name, RemoteTransport::Named(e.name))),
        )
        .collect()
}

/// A remote transport and whether this build has it: what tools list and report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportBuild {
    /// Its name, the value of `SYMMEM_REMOTE_TRANSPORT` that asks for it (`ib`).
    pub name: &'static str,
    /// What it is ("the ibverbs transport").
    pub what: &'static str,
    /// The cargo feature that builds it; `None` for a transport every build has.
    pub feature: Option<&'static str>,
    /// Whether this build has it.
    pub built: bool,
}

/// Every remote transport, whether or not this build has it, in the order
/// `SYMMEM_REMOTE_TRANSPORT=auto` prefers them.
pub fn remote_transports() -> impl Iterator<Item = TransportBuild> {
    REMOTE.iter().map(|e| TransportBuild {
        name: e.name,
        what: e.what,
        feature: e.feature,
        built: e.built(),
    })
}

/// Whether the transport `name` can run here: what it would use (the RDMA device, the
/// libfabric provider), or why not (a build without its feature, no device, no provider).
pub fn probe(name: &str, config: &TransportConfig) -> std::result::Result<String, String> {
    entry_named(name)?.probe(config)
}

/// The entry of the transport `name`, or an error saying there is none.
fn entry_named(name: &str) -> std::result::Result<&'static Entry, String> {
    REMOTE
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| format!("there is no remote transport named {name:?}"))
}

/// What PE `me` would use, and why (`SYMMEM_REMOTE_TRANSPORT`); an error names the PE.
fn choose(config: &TransportConfig, me: usize) -> Result<(&'static Entry, String)> {
    let name = match config.remote_transport {
        RemoteTransport::Named(name) => name,
        RemoteTransport::Auto => {
            // What each preferred transport's probe found, in order, up to the chosen one.
            let mut found = Vec::new();
            for entry in REMOTE {
                match entry.auto_probe(config) {
                    Some(Ok(what)) => {
                        found.push(what);
                        return Ok((entry, format!("auto: {}", found.join("; "))));
                    }
                    Some(Err(why)) => found.push(why),
                    None => return Ok((entry, format!("auto: {}", found.join("; ")))),
                }
            }
            return Err(Error::TransportConfig {
                variable: var::REMOTE_TRANSPORT,
                value: "auto".into(),
                reason: format!("PE {me}: no transport can run here: {}", found.join("; ")),
            });
        }
    };
    let refuse = |reason: String| Error::TransportConfig {
        variable: var::REMOTE_TRANSPORT,
        value: name.into(),
        reason: format!("PE {me}: {reason}"),
    };
    let entry = entry_named(name).map_err(refuse)?;
    match entry.probe(config) {
        Ok(what) if what.is_empty() => Ok((entry, format!("{}={name}", var::REMOTE_TRANSPORT))),
        Ok(what) => Ok((entry, format!("{}={name}, {what}", var::REMOTE_TRANSPORT))),
        Err(why) => Err(refuse(format!(
            "{name} cannot run here: {why}; use another transport or auto"
        ))),
    }
}

/// This PE's proposal for the job's transport: what [`choose`] picks, except that a GPU
/// heap the transport's NIC cannot register is [`Proposal::Staged`] when
/// `SYMMEM_ALLOW_HOST_STAGING=1` (checked by registering it once).
fn propose(setup: &Setup<'_>) -> Result<(Proposal, String)> {
    let (entry, why) = choose(setup.config, setup.me)?;
    let proposal = Proposal::Use(entry.code);
    Ok(match entry.gpu_registration() {
        Some(registers) if !setup.heap.host && setup.config.allow_host_staging => {
            match registers(setup) {
                Ok(()) => (proposal, why),
                Err(cause) => (
                    Proposal::Staged,
                    format!("{why}, but the GPU heap cannot be registered: {cause}"),
                ),
            }
        }
        _ => (proposal, why),
    })
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
            variable: var::ORDERING,
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
            what: var::ORDERING_SEED,
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
    let transports: Vec<(u8, &'static str)> = REMOTE.iter().map(|e| (e.code, e.name)).collect();
    let choices = Choices {
        transports: &transports,
        staging: socket::ENTRY.code,
    };
    let verdict = agree::agree(&all, &choices).map_err(|reason| Error::TransportConfig {
        variable: var::REMOTE_TRANSPORT,
        value: setup.config.remote_transport.to_string(),
        reason: format!("PE {} ({why}): {reason}", setup.me),
    })?;
    let Some(entry) = REMOTE.iter().find(|e| e.code == verdict.code) else {
        return Err(Error::Inconsistent {
            what: var::REMOTE_TRANSPORT,
            detail: format!(
                "PE {}: the job agreed on transport code {}, which this build does not have",
                setup.me, verdict.code
            ),
        });
    };
    let why = if verdict.staged.is_empty() {
        warn_on_fallback(setup, entry, &why);
        why
    } else {
        let pes: Vec<String> = verdict.staged.iter().map(|p| p.to_string()).collect();
        tracing::warn!(
            "PE {}: host staging (SYMMEM_ALLOW_HOST_STAGING=1): the NIC cannot register the GPU heaps of PEs {}, so every remote op of this job goes over the {} transport, staged through host memory: expect far lower bandwidth than GPUDirect RDMA (this PE: {why})",
            setup.me,
            pes.join(", "),
            entry.name
        );
        format!(
            "host staging (SYMMEM_ALLOW_HOST_STAGING=1) for the GPU heaps of PEs {}; this PE: {why}",
            pes.join(", ")
        )
    };
    let t = entry.connect(setup)?;
    for pe in (0..setup.remote.len()).filter(|&p| setup.remote[p]) {
        tracing::info!(target: "init::transport", "PE {} reaches PE {pe} over {} ({why})", setup.me, t.name());
    }
    Ok(Some((t, why)))
}

/// Under `SYMMEM_REMOTE_TRANSPORT=auto`, warns when the job ends up on `auto`'s last
/// resort (sockets) although this build has a transport `auto` prefers: it has fallen
/// back. Landing on a preferred transport (ofi where there is no RDMA device) is no
/// fallback.
fn warn_on_fallback(setup: &Setup<'_>, chosen: &Entry, why: &str) {
    if setup.config.remote_transport != RemoteTransport::Auto || !chosen.is_last_resort() {
        return;
    }
    let preferred: Vec<&str> = REMOTE
        .iter()
        .take_while(|e| e.code != chosen.code)
        .filter(|e| e.built())
        .map(|e| e.name)
        .collect();
    if !preferred.is_empty() {
        tracing::warn!(
            target: "init::transport",
            "PE {}: the job's remote transport is {}, not {} (SYMMEM_REMOTE_TRANSPORT=auto; this PE: {why})",
            setup.me,
            chosen.name,
            preferred.join(" or ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SYMMEM_REMOTE_TRANSPORT=ib` on a machine without a usable device (or in a build
    /// without the feature) is an error that names the variable and what the probe found;
    /// `auto` falls back to sockets with the same reason.
    #[test]
    fn asking_for_ib_here_names_the_variable_and_the_reason() {
        let config = TransportConfig {
            remote_transport: RemoteTransport::Named("ib"),
            ..TransportConfig::unset()
        };
        let Err(why) = probe("ib", &config) else {
            eprintln!("this machine has a usable RDMA device; nothing to check");
            return;
        };
        let err = choose(&config, 0).unwrap_err().to_string();
        eprintln!("probe here: {why}\nSYMMEM_REMOTE_TRANSPORT=ib: {err}");
        assert!(err.contains("SYMMEM_REMOTE_TRANSPORT=ib"), "{err}");
        assert!(err.contains(&why), "{err} does not carry {why:?}");
        assert!(
            err.contains("libibverbs not found")
                || err.contains("no RDMA devices")
                || err.contains("--features ib"),
            "{err}"
        );
        let auto = TransportConfig::unset();
        let (entry, reason) = choose(&auto, 0).unwrap();
        if probe("ofi", &auto).is_err() {
            assert_eq!(entry.name, "socket", "{reason}");
        }
        if cfg!(feature = "ib") {
            assert!(reason.starts_with("auto: no RDMA device ("), "{reason}");
        } else {
            assert!(reason.starts_with("auto: this build leaves out the ibverbs transport (build symmem with --features ib;"), "{reason}");
        }
        assert!(reason.contains(&why), "{reason}");
    }

    /// Every transport's entry has its own name and agreement byte, none of them the
    /// staging byte, a transport this build leaves out names its feature, auto's last
    /// resort comes last, and `SYMMEM_REMOTE_TRANSPORT` accepts exactly the names and
    /// `auto`.
    #[test]
    fn the_registry_names_and_codes_each_transport_once() {
        assert!(codes_are_distinct(REMOTE));
        for (i, e) in REMOTE.iter().enumerate() {
            assert_ne!(e.code, agree::STAGED, "{}", e.name);
            for other in &REMOTE[..i] {
                assert_ne!(e.code, other.code, "{} and {}", e.name, other.name);
                assert_ne!(e.name, other.name);
            }
            assert_eq!(
                e.is_last_resort(),
                i == REMOTE.len() - 1,
                "{}: auto's last resort, and only it, comes last",
                e.name
            );
        }
        let names: Vec<&str> = remote_transport_choices().iter().map(|c| c.0).collect();
        let expected: Vec<&str> = std::iter::once("auto")
            .chain(remote_transports().map(|t| t.name))
            .collect();
        assert_eq!(names, expected);
        assert_eq!(names.len(), REMOTE.len() + 1);
        let e = probe("tcp", &TransportConfig::unset()).unwrap_err();
        assert!(e.contains("no remote transport named \"tcp\""), "{e}");
    }

    /// A transport this build leaves out is listed, not built, and asking for it names
    /// the feature that builds it; one it has is built.
    #[test]
    fn a_left_out_transport_names_its_feature() {
        for t in remote_transports() {
            assert!(t.built || t.feature.is_some(), "{t:?}");
            let Some(feature) = t.feature.filter(|_| !t.built) else {
                continue;
            };
            let why = probe(t.name, &TransportConfig::unset()).unwrap_err();
            assert!(why.contains(&format!("--features {feature}")), "{why}");
            assert!(why.contains(t.what), "{why}");
        }
    }
}
