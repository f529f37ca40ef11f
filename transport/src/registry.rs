//! How a remote transport plugs into the choice of a job's transport: one [`Entry`] per
//! transport, which its own module defines (its name, its probes, how it connects), and
//! one list of them in [`crate::connect`](mod@crate::connect), in the order `SYMMEM_REMOTE_TRANSPORT=auto`
//! prefers them. Choosing, agreeing and connecting go through the entries only, so a new
//! transport is a module with an entry and one line in that list. A transport this build
//! leaves out (a cargo feature) still has an entry, [`Entry::not_built`], so that asking
//! for it names the feature that builds it.

use std::sync::Arc;

use crate::config::TransportConfig;
use crate::counted::Counted;
#[cfg(not(all(feature = "ib", feature = "ofi")))]
use crate::error::Error;
use crate::error::Result;
use crate::interface::{Setup, Transport};

/// Each transport's byte in the job's agreement ([`crate::agree`]), in one place so that a
/// code is never reused, whether or not a build has the transport (the agreement's own
/// byte for host staging is [`crate::agree::STAGED`], 3).
pub(crate) mod code {
    /// The socket transport.
    pub const SOCKET: u8 = 1;
    /// The ib transport.
    pub const IB: u8 = 2;
    /// The ofi transport.
    pub const OFI: u8 = 4;
}

/// What a probe finds: what the transport would use here (a device, a provider), or why
/// it cannot run here.
pub(crate) type Probe = fn(&TransportConfig) -> std::result::Result<String, String>;

/// Whether a transport's NIC can register this PE's GPU heap, or why not.
pub(crate) type GpuRegistration = fn(&Setup<'_>) -> std::result::Result<(), String>;

/// One remote transport, as the choice sees it.
pub(crate) struct Entry {
    /// Its name: the value of `SYMMEM_REMOTE_TRANSPORT` that asks for it, and how logs,
    /// errors and counters call it.
    pub name: &'static str,
    /// Its byte in the job's agreement (one of [`code`]).
    pub code: u8,
    /// Whether this build has it (its cargo feature is on).
    pub built: bool,
    /// Whether it can run here when asked for by name.
    pub probe: Probe,
    /// How `SYMMEM_REMOTE_TRANSPORT=auto` treats it.
    pub auto: Auto,
    /// For a transport whose NIC reads and writes the heap itself: whether it can
    /// register this PE's GPU heap, or why not (host staging is decided on it).
    pub gpu_registration: Option<GpuRegistration>,
    /// Connects it to every PE this PE cannot map. Collective.
    pub connect: fn(&Setup<'_>) -> Result<Arc<dyn Transport>>,
}

/// How `auto` treats a transport.
pub(crate) enum Auto {
    /// `auto` takes it when this probe succeeds, unless an earlier entry's did.
    When(Probe),
    /// `auto` takes it when no earlier entry's probe succeeds.
    Otherwise,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("code", &self.code)
            .field("built", &self.built)
            .finish_non_exhaustive()
    }
}

#[cfg(not(all(feature = "ib", feature = "ofi")))]
impl Entry {
    /// The entry of a transport this build leaves out: its `probe` says why (the cargo
    /// feature that builds it), and so does its `auto` probe, for `auto`'s reason.
    pub(crate) const fn not_built(name: &'static str, code: u8, probe: Probe, auto: Auto) -> Entry {
        Entry {
            name,
            code,
            built: false,
            probe,
            auto,
            gpu_registration: None,
            connect: refuse_unbuilt,
        }
    }
}

/// The reason a left-out transport gives: `what` it drives and the `feature` that builds it.
#[cfg(not(all(feature = "ib", feature = "ofi")))]
pub(crate) fn not_built_reason(what: &str, feature: &str) -> String {
    format!(
        "this build has no {what} support (build symmem with --features {feature}; the C library: scripts/install-c.sh --features {feature})"
    )
}

/// A left-out transport's `connect`: never reached, since its probe always fails, but an
/// error rather than a panic if it were.
#[cfg(not(all(feature = "ib", feature = "ofi")))]
fn refuse_unbuilt(setup: &Setup<'_>) -> Result<Arc<dyn Transport>> {
    Err(Error::TransportConfig {
        variable: crate::config::var::REMOTE_TRANSPORT,
        value: setup.config.remote_transport.to_string(),
        reason: format!(
            "PE {}: the job agreed on a transport this build does not have",
            setup.me
        ),
    })
}

/// `transport` behind the counting decorator, under its entry's name: what every entry's
/// `connect` returns.
pub(crate) fn counted<T: Transport + 'static>(
    setup: &Setup<'_>,
    name: &'static str,
    transport: T,
) -> Arc<dyn Transport> {
    Arc::new(Counted::new(transport, (setup.counter)(name)))
}
