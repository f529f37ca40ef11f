//! Log setup: `tracing` to stderr, filtered by `SYMMEM_DEBUG` and `SYMMEM_DEBUG_SUBSYS`.

use crate::config::Config;

/// The `tracing` targets that make up each subsystem of `SYMMEM_DEBUG_SUBSYS`: module
/// paths, and the subsystem's own name for events that name it (`target: "init"`, as the
/// remote transports' per-peer choice is logged).
fn targets(subsys: &str) -> &'static [&'static str] {
    match subsys {
        "init" => &[
            "symmem_runtime::runtime",
            "symmem_runtime::topology",
            "init",
        ],
        "heap" => &["symmem_runtime::heap", "symmem_runtime::alloc", "heap"],
        "bootstrap" => &["symmem_bootstrap", "bootstrap"],
        "rma" => &["symmem_runtime::rma", "symmem_runtime::barrier", "rma"],
        _ => &[],
    }
}

/// Installs the global log subscriber, once per process. If the application installed
/// its own subscriber first, that one stays and symmem's events go to it.
pub fn init(config: &Config) {
    let level = &config.debug;
    let mut directives = vec!["warn".to_string()];
    if config.debug_subsys.is_empty() {
        directives.push(format!("symmem_runtime={level}"));
        directives.push(format!("symmem_bootstrap={level}"));
        directives.push(format!("symmem={level}"));
        // Events logged under a subsystem's name rather than their module path.
        directives.extend(
            crate::config::SUBSYSTEMS
                .iter()
                .map(|s| format!("{s}={level}")),
        );
    } else {
        for s in &config.debug_subsys {
            directives.extend(targets(s).iter().map(|t| format!("{t}={level}")));
        }
    }
    let filter = tracing_subscriber::EnvFilter::new(directives.join(","));
    // Fails only when a subscriber is already installed (a re-init, or the application's).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::targets;
    use crate::config::SUBSYSTEMS;

    /// Events with `target: "<subsystem>"` (the transports' per-peer choice) pass the
    /// filter of their subsystem: without the bare name they were dropped below warn.
    #[test]
    fn every_subsystem_includes_its_own_name_as_a_target() {
        for s in SUBSYSTEMS {
            assert!(targets(s).contains(s), "{s}: {:?}", targets(s));
        }
    }
}
