//! Log setup: `tracing` to stderr, filtered by `SYMMEM_DEBUG` and `SYMMEM_DEBUG_SUBSYS`,
//! coloured only on a terminal and never under `NO_COLOR`.

use std::io::IsTerminal;

use crate::config::Config;

/// The target of the lines printed at `info` whatever `SYMMEM_DEBUG_SUBSYS` selects: the
/// configuration at init and each PE's counters at finalize.
pub(crate) const SUMMARY: &str = "summary";

/// The `tracing` targets that make up each subsystem of `SYMMEM_DEBUG_SUBSYS`: module
/// paths (a target passes when it starts with one), and the subsystem's own name for
/// events that name it (`target: "init"`). Every module of the runtime belongs to one
/// (checked by a test); `symmem_runtime::cuda::proxy_buffers` is in both `init` (as part of
/// `cuda`) and `proxy`.
fn targets(subsys: &str) -> &'static [&'static str] {
    match subsys {
        // Setup: configuration, topology, devices, modules and the CPU executor. Events
        // of init that concern one transport (`init::transport`, the per-peer choice)
        // pass `transport` too.
        "init" => &[
            "symmem_runtime::runtime",
            "symmem_runtime::init",
            "symmem_runtime::topology",
            "symmem_runtime::config",
            "symmem_runtime::logging",
            "symmem_runtime::liveness",
            "symmem_runtime::health",
            "symmem_runtime::pe_device",
            "symmem_runtime::binding",
            "symmem_runtime::self_launch",
            "symmem_runtime::cuda",
            "symmem_runtime::module",
            "symmem_runtime::kernel_library",
            "symmem_runtime::ops::kernels",
            "symmem_runtime::executor",
            "symmem_runtime::error",
            "init",
        ],
        "heap" => &[
            "symmem_runtime::heap",
            "symmem_runtime::ops::alloc",
            "symmem_runtime::allocator",
            "symmem_runtime::sym",
            "symmem_runtime::ops::local",
            "heap",
        ],
        "bootstrap" => &["symmem_bootstrap", "bootstrap"],
        "rma" => &[
            "symmem_runtime::ops::rma",
            "symmem_runtime::ops::raw",
            "symmem_runtime::route",
            "symmem_runtime::data_path",
            "symmem_runtime::ops::access",
            "symmem_runtime::host_copy",
            "symmem_runtime::ops::amo",
            "symmem_runtime::ops::signal",
            "symmem_runtime::ops::ordering",
            "symmem_runtime::ops::wait",
            "symmem_runtime::wait_report",
            "symmem_runtime::ops::barrier",
            "symmem_runtime::int",
            "symmem_runtime::ops::gpu",
            "symmem_runtime::ops::stream",
            "symmem_runtime::counters",
            // The hang report: its module, and its events (target `hang`; the report
            // itself is an error, which shows whatever the subsystems).
            "symmem_runtime::hang",
            "symmem_runtime::device_waits",
            "hang",
            "rma",
        ],
        "transport" => &["symmem_transport", "transport", "init::transport"],
        "proxy" => &[
            "symmem_runtime::proxy",
            "symmem_runtime::cuda::proxy_buffers",
            "proxy",
        ],
        "coll" => &["symmem_runtime::team", "symmem_runtime::alike", "coll"],
        _ => &[],
    }
}

/// Whether `SYMMEM_DEBUG` is `info` or more verbose: the configuration and counter lines
/// show, and the direct path is counted.
pub(crate) fn info_or_more(config: &Config) -> bool {
    matches!(config.debug.as_str(), "info" | "debug" | "trace")
}

/// Installs the global log subscriber, once per process. If the application installed
/// its own subscriber first, that one stays and symmem's events go to it.
pub fn init(config: &Config) {
    let level = &config.debug;
    let mut directives = vec!["warn".to_string(), format!("{SUMMARY}={level}")];
    if config.debug_subsys.is_empty() {
        directives.push(format!("symmem_runtime={level}"));
        directives.push(format!("symmem_bootstrap={level}"));
        directives.push(format!("symmem_transport={level}"));
        directives.push(format!("symmem={level}"));
        directives.push(format!("hang={level}"));
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
    let ansi = use_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    // Fails only when a subscriber is already installed (a re-init, or the application's).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

/// Whether log lines carry ANSI colour: only when stderr is a terminal (a pipe or a file
/// would get raw escape codes), and never when `NO_COLOR` is set to a non-empty value
/// (<https://no-color.org>).
fn use_colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::{targets, use_colour};
    use crate::config::SUBSYSTEMS;
    use std::path::Path;

    /// The subsystems whose filter lets an event with `target` through (EnvFilter
    /// matches a directive's target as a prefix).
    fn subsystems_of(target: &str) -> Vec<&'static str> {
        SUBSYSTEMS
            .iter()
            .copied()
            .filter(|s| targets(s).iter().any(|t| target.starts_with(t)))
            .collect()
    }

    /// Every `.rs` file under `dir`, recursively.
    fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Events with `target: "<subsystem>"` (the transports' per-peer choice) pass the
    /// filter of their subsystem: without the bare name they were dropped below warn.
    #[test]
    fn every_subsystem_includes_its_own_name_as_a_target() {
        for s in SUBSYSTEMS {
            assert!(targets(s).contains(s), "{s}: {:?}", targets(s));
        }
    }

    /// The new subsystems parse; an unknown one is still an error naming it and the
    /// known ones.
    #[test]
    fn subsystems_parse_and_unknown_names_are_errors() {
        let parse = |v: &str| {
            crate::config::Config::from_lookup(|k| {
                (k == "SYMMEM_DEBUG_SUBSYS").then(|| v.to_string())
            })
        };
        let c = parse("transport, proxy,coll").unwrap();
        assert_eq!(c.debug_subsys, ["transport", "proxy", "coll"]);
        let err = parse("transport,collectives").unwrap_err().to_string();
        assert!(
            err.contains("SYMMEM_DEBUG_SUBSYS")
                && err.contains("\"collectives\"")
                && err.contains("transport, proxy, coll"),
            "{err}"
        );
    }

    /// Colour on a terminal only, and `NO_COLOR` (when not empty) turns it off.
    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        fn set(v: &str) -> Option<&std::ffi::OsStr> {
            Some(std::ffi::OsStr::new(v))
        }
        assert!(use_colour(true, None));
        assert!(use_colour(true, set("")));
        assert!(!use_colour(true, set("1")));
        assert!(!use_colour(true, set("0")));
        assert!(!use_colour(false, None));
        assert!(!use_colour(false, set("1")));
    }

    /// Every module of the runtime belongs to a subsystem, so that none of its events is
    /// unreachable through `SYMMEM_DEBUG_SUBSYS` (a new module must be added to
    /// `targets`), and every explicit `target: "..."` in the source passes some subsystem.
    #[test]
    fn every_module_and_named_target_belongs_to_a_subsystem() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        assert!(files.len() > 40, "found only {files:?}");
        let mut missing = Vec::new();
        for file in &files {
            let rel = file.strip_prefix(&src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts == ["lib"] || parts == ["ops"] || parts == ["fuzzing"] {
                // The crate root and ops/mod.rs only declare modules; fuzzing.rs only
                // re-exports decoders for the fuzz targets.
                continue;
            }
            let module = format!("symmem_runtime::{}", parts.join("::"));
            if subsystems_of(&module).is_empty() {
                missing.push(module);
            }
            let text = std::fs::read_to_string(file).unwrap();
            let code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
            for line in code {
                let Some((_, rest)) = line.split_once("target: \"") else {
                    continue;
                };
                let target = &rest[..rest.find('"').unwrap()];
                if subsystems_of(target).is_empty() {
                    missing.push(format!("target {target:?} in {}", file.display()));
                }
            }
        }
        assert!(missing.is_empty(), "in no subsystem: {missing:?}");
        // The modules the subsystems are named after, and the per-peer transport lines,
        // which init and transport both show.
        for (target, want) in [
            ("symmem_transport::socket", "transport"),
            ("symmem_transport::ib::qp", "transport"),
            ("symmem_runtime::proxy::payload", "proxy"),
            ("symmem_runtime::cuda::proxy_buffers", "proxy"),
            ("symmem_runtime::team::collectives", "coll"),
            ("symmem_runtime::team", "coll"),
            ("symmem_bootstrap::tcp", "bootstrap"),
            ("init::transport", "init"),
            ("init::transport", "transport"),
        ] {
            assert!(
                subsystems_of(target).contains(&want),
                "{target}: {:?}",
                subsystems_of(target)
            );
        }
    }
}
