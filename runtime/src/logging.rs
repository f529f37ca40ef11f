//! Log setup: `tracing` to stderr, filtered by `SYMMEM_DEBUG` and `SYMMEM_DEBUG_SUBSYS`.

use crate::config::Config;

/// The `tracing` targets that make up each subsystem of `SYMMEM_DEBUG_SUBSYS`.
fn targets(subsys: &str) -> &'static [&'static str] {
    match subsys {
        "init" => &["symmem_runtime::runtime", "symmem_runtime::topology"],
        "heap" => &["symmem_runtime::heap", "symmem_runtime::alloc"],
        "bootstrap" => &["symmem_bootstrap"],
        "rma" => &["symmem_runtime::rma", "symmem_runtime::barrier"],
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
