//! What init logs once a PE is up: its configuration, and how it reaches each same-node
//! peer and why.

use crate::config::{Config, MemoryOrdering};
use crate::route::Route;
use crate::runtime::Runtime;

impl Runtime {
    /// Logs that this PE is up, with the configuration PE 0 resolved and the variables
    /// no one knows (typos), then [`Self::log_setup`].
    pub(super) fn log_started(&self) {
        let rank = self.my_pe();
        tracing::info!(
            pe = rank,
            n_pes = self.n_pes(),
            node = %self.path.topo().node(rank),
            host = %self.config.hostname,
            local_pes = ?self.path.topo().local_pes(),
            bootstrap = %self.bootstrap.kind(),
            heap_bytes = self.path.heap().len(),
            "symmem initialized"
        );
        tracing::info!("PE {rank} {}", self.cpu_binding());
        if rank == 0 {
            for (name, value) in self.config.describe() {
                tracing::info!("{name}={value}");
            }
            for unknown in Config::unknown_variables() {
                tracing::warn!("unknown environment variable {unknown} (typo?) is ignored");
            }
        }
        self.log_setup();
    }

    /// Logs this PE's configuration (the `SYMMEM_*` variables set, and the effective
    /// values that decide how it runs) at info whatever `SYMMEM_DEBUG_SUBSYS` selects, and
    /// for each same-node peer how it is reached and why: over P2P at info, over a
    /// transport in its place at warn (the remote transport logs its other peers).
    fn log_setup(&self) {
        let me = self.my_pe();
        let c = &self.config;
        let set: Vec<String> = crate::config::VARIABLES
            .iter()
            .filter_map(|v| {
                std::env::var(v.name)
                    .ok()
                    .map(|val| format!("{}={val}", v.name))
            })
            .collect();
        let remote = match self.path.transport() {
            Some(t) => t.name(),
            None => "none (every PE is mapped)",
        };
        let subsys = if c.debug_subsys.is_empty() {
            "all".to_string()
        } else {
            c.debug_subsys.join(",")
        };
        tracing::info!(
            target: crate::logging::SUMMARY,
            "PE {me} configuration: set: {}; effective: {} PEs, node {}, device {}, heap {} bytes, bootstrap {}, P2P {}, remote transport {remote} (SYMMEM_REMOTE_TRANSPORT={}), ordering {}, timeout {}, proxy slots {}, log {} ({subsys})",
            if set.is_empty() { "none".to_string() } else { set.join(" ") },
            self.n_pes(),
            self.path.topo().node(me),
            self.device_description(),
            self.path.heap().len(),
            self.bootstrap.kind(),
            if c.disable_p2p { "off (SYMMEM_DISABLE_P2P=1)" } else { "on" },
            c.remote_transport.to_string(),
            format!("{:?}", c.ordering).to_lowercase(),
            c.timeout.map_or("none".to_string(), |t| format!("{}s", t.as_secs_f64())),
            c.proxy_slots,
            c.debug,
        );
        for &pe in self.path.topo().local_pes().iter().filter(|&&p| p != me) {
            match self.path.route(pe) {
                Route::Direct(_) => tracing::info!(
                    target: "init::transport",
                    "PE {me} reaches PE {pe} over p2p (same node: its heap is mapped here, host loads and stores)"
                ),
                #[cfg(feature = "cuda")]
                Route::Copy(_) => tracing::info!(
                    target: "init::transport",
                    "PE {me} reaches PE {pe} over p2p (same node: its GPU heap is mapped into this GPU's context, host copies and kernel loads and stores)"
                ),
                Route::Remote if c.ordering == MemoryOrdering::Weak => tracing::info!(
                    target: "init::transport",
                    "PE {me} reaches PE {pe} over {remote} (SYMMEM_ORDERING=weak: reordered, then delivered through the mapping)"
                ),
                Route::Remote => tracing::warn!(
                    target: "init::transport",
                    "PE {me} reaches same-node PE {pe} over {remote}, not P2P: {}",
                    if c.disable_p2p {
                        format!("{}=1", crate::config::DISABLE_P2P.name())
                    } else {
                        "its heap is not mapped here (its GPU is not peer-accessible from this one)".into()
                    }
                ),
                Route::Unreachable => tracing::warn!(
                    target: "init::transport",
                    "PE {me} cannot reach same-node PE {pe}: its heap is not mapped here and no remote transport was started"
                ),
            }
        }
    }
}
