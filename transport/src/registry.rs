//! How a remote transport plugs into the choice of a job's transport: one [`Entry`] per
//! transport, which its own folder defines (its name, its agreement byte, its probes, how
//! it connects), and one list of them, `REMOTE` in [`crate::connect`](mod@crate::connect),
//! in the order `SYMMEM_REMOTE_TRANSPORT=auto` prefers them. Choosing, agreeing,
//! connecting, `SYMMEM_REMOTE_TRANSPORT`'s values, `symmem-info`'s build features and
//! `symmem-perf --transport` all go through the entries only.
//!
//! # Adding a transport
//! - Its folder, `transport/src/<name>/`, whose `mod.rs` defines `pub(crate) const ENTRY`:
//!   its name, its agreement byte (any byte no other entry has and not
//!   [`agree::STAGED`](crate::agree::STAGED); the build checks), what it is ("the ibverbs
//!   transport") and its [`Driver`].
//! - Its line in `REMOTE` (`connect.rs`), and its `mod` line in `lib.rs`.
//!
//! A transport that needs a library at build time (an FFI dependency) is behind a cargo
//! feature, named after it. Then its folder also has `entry.rs`: the entry without a
//! driver, [`Entry::not_built`], which names the feature, and which `mod.rs` completes
//! with [`Entry::with_driver`]. Its `mod` line in `lib.rs` loads that file alone where the
//! feature is off (`#[cfg_attr(not(feature = "<name>"), path = "<name>/entry.rs")]`), so
//! every build lists every transport, and asking for a left-out one names the feature
//! that builds it. Cargo cannot derive a feature's forwarding, so the feature is declared
//! in `transport/Cargo.toml` and forwarded, under the same name, by every crate above it:
//! `runtime/Cargo.toml` (to `symmem-transport/<name>`), the root `Cargo.toml` and
//! `capi/Cargo.toml` (to `symmem-runtime/<name>`), and `benches/Cargo.toml`,
//! `tests/pe/Cargo.toml` and `tests/device/Cargo.toml` (to `symmem/<name>`). Beyond that:
//! C code of its own is compiled in `transport/build.rs`; a transport whose NIC registers
//! GPU heaps and says so with `agree::staging_hint` adds its feature to that function's
//! `cfg`; its `SYMMEM_*` variables are declared in [`crate::config`] and the runtime's
//! variable table (`runtime/src/config/variables.rs`, whose `SYMMEM_REMOTE_TRANSPORT`
//! text also describes what `auto` prefers).

use std::sync::Arc;

use crate::config::TransportConfig;
use crate::counted::Counted;
use crate::error::{Error, Result};
use crate::interface::{Setup, Transport};

/// What a probe finds: what the transport would use here (a device, a provider), or why
/// it cannot run here.
pub(crate) type Probe = fn(&TransportConfig) -> std::result::Result<String, String>;

/// Whether a transport's NIC can register this PE's GPU heap, or why not.
pub(crate) type GpuRegistration = fn(&Setup<'_>) -> std::result::Result<(), String>;

/// One remote transport, as the choice sees it, whether or not this build has it.
pub(crate) struct Entry {
    /// Its name: the value of `SYMMEM_REMOTE_TRANSPORT` that asks for it, and how logs,
    /// errors and counters call it.
    pub name: &'static str,
    /// Its byte in the job's agreement ([`crate::agree`]): its own, in every build.
    pub code: u8,
    /// What it is, for reports and errors ("the ibverbs transport").
    pub what: &'static str,
    /// The cargo feature that builds it; `None` for a transport every build has.
    pub feature: Option<&'static str>,
    /// How it runs; `None` where this build leaves it out.
    pub driver: Option<Driver>,
}

/// How a transport this build has runs: its probes and its connect.
pub(crate) struct Driver {
    /// Whether it can run here when asked for by name.
    pub probe: Probe,
    /// How `SYMMEM_REMOTE_TRANSPORT=auto` treats it: it takes it when this probe
    /// succeeds, unless an earlier entry's did; `None`: when no earlier entry's probe
    /// succeeds (the last resort).
    pub auto: Option<Probe>,
    /// For a transport whose NIC reads and writes the heap itself: whether it can
    /// register this PE's GPU heap, or why not (host staging is decided on it).
    pub gpu_registration: Option<GpuRegistration>,
    /// Connects it to every PE this PE cannot map. Collective.
    pub connect: fn(&Setup<'_>) -> Result<Arc<dyn Transport>>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("code", &self.code)
            .field("feature", &self.feature)
            .field("built", &self.built())
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// The entry of the transport `name` (agreement byte `code`, described as `what`)
    /// that every build has, still without its driver ([`Self::with_driver`]).
    pub(crate) const fn always(name: &'static str, code: u8, what: &'static str) -> Entry {
        Entry {
            name,
            code,
            what,
            feature: None,
            driver: None,
        }
    }

    /// The entry of the transport `name` (agreement byte `code`, described as `what`)
    /// that the cargo feature `feature` builds, as a build without that feature has it:
    /// its probes say which feature builds it. The transport's `mod.rs` adds its driver.
    pub(crate) const fn not_built(
        name: &'static str,
        code: u8,
        what: &'static str,
        feature: &'static str,
    ) -> Entry {
        Entry {
            feature: Some(feature),
            ..Entry::always(name, code, what)
        }
    }

    /// This entry, run by `driver`: the transport as a build that has it sees it.
    pub(crate) const fn with_driver(self, driver: Driver) -> Entry {
        Entry {
            driver: Some(driver),
            ..self
        }
    }

    /// Whether this build has it.
    pub(crate) fn built(&self) -> bool {
        self.driver.is_some()
    }

    /// Whether it can run here when asked for by name: what it would use, or why not.
    pub(crate) fn probe(&self, config: &TransportConfig) -> std::result::Result<String, String> {
        match &self.driver {
            Some(driver) => (driver.probe)(config),
            None => Err(self.not_built_reason()),
        }
    }

    /// What `auto` finds of it: `None` where `auto` takes it whenever it gets this far
    /// (its last resort), else its `auto` probe's finding (for a transport this build
    /// leaves out, why).
    pub(crate) fn auto_probe(
        &self,
        config: &TransportConfig,
    ) -> Option<std::result::Result<String, String>> {
        match &self.driver {
            Some(driver) => driver.auto.map(|probe| probe(config)),
            None => Some(Err(self.not_built_reason())),
        }
    }

    /// Whether `auto` takes it when no earlier entry can run (its `auto` is `None`).
    pub(crate) fn is_last_resort(&self) -> bool {
        self.driver.as_ref().is_some_and(|d| d.auto.is_none())
    }

    /// Its check that its NIC can register this PE's GPU heap, if it registers heaps.
    pub(crate) fn gpu_registration(&self) -> Option<GpuRegistration> {
        self.driver.as_ref().and_then(|d| d.gpu_registration)
    }

    /// Connects it (collective). A transport this build leaves out is an error, never
    /// reached in a job, since its probes always fail.
    pub(crate) fn connect(&self, setup: &Setup<'_>) -> Result<Arc<dyn Transport>> {
        match &self.driver {
            Some(driver) => (driver.connect)(setup),
            None => Err(Error::TransportConfig {
                variable: crate::config::var::REMOTE_TRANSPORT,
                value: setup.config.remote_transport.to_string(),
                reason: format!(
                    "PE {}: the job agreed on {}, which this build does not have ({})",
                    setup.me,
                    self.name,
                    self.not_built_reason()
                ),
            }),
        }
    }

    /// Why a build without it cannot run it: the feature that builds it.
    fn not_built_reason(&self) -> String {
        match self.feature {
            Some(feature) => format!(
                "this build leaves out {} (build symmem with --features {feature}; the C library: scripts/install-c.sh --features {feature})",
                self.what
            ),
            None => format!("this build leaves out {}", self.what),
        }
    }
}

/// Whether every entry of `entries` has its own agreement byte, none of them
/// [`agree::STAGED`](crate::agree::STAGED): checked when the crate is built.
pub(crate) const fn codes_are_distinct(entries: &[Entry]) -> bool {
    let mut i = 0;
    while i < entries.len() {
        if entries[i].code == crate::agree::STAGED {
            return false;
        }
        let mut j = 0;
        while j < i {
            if entries[j].code == entries[i].code {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
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
