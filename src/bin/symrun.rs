//! `symrun`: start N local symmem PEs.
//!
//! ```text
//! symrun -n N [--bind-to core|numa|none] [--map-by core|numa] [--tag-output]
//!        [--kill-grace SECONDS] [--] PROGRAM [ARGS...]
//! ```
//! Exits with 0 when every PE succeeds, else with the first failing PE's exit code
//! (128 + signal number for a PE killed by a signal).

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use symmem::bootstrap::affinity::Binding;
use symmem::bootstrap::launcher::{self, LaunchOptions};
use symmem::bootstrap::BootstrapError;

const USAGE: &str =
    "usage: symrun -n N [--bind-to core|numa|none] [--map-by core|numa] [--tag-output]
              [--kill-grace SECONDS] [--] PROGRAM [ARGS...]

  -n, --np N            number of PEs to start on this machine
  --bind-to WHAT        bind each PE to a core (one CPU), to the CPUs of a NUMA node, or
                        none; always within the CPUs symrun itself may use (default: core
                        when N >= 2 and there are at least N of them, else none)
  --map-by WHAT         spread PEs CPU after CPU (core, the default) or over the NUMA
                        nodes in turn (numa)
  --tag-output          prefix each output line with [PE i]
  --kill-grace SECONDS  after the first PE fails, how long the others may take to exit
                        on their own before they are killed (default 5; 1 year or
                        more, e.g. inf, = never killed)

Environment: SYMMEM_BOOTSTRAP_TIMEOUT bounds every bootstrap call (default 60 s).";

/// symrun's command line.
struct Args {
    n_pes: usize,
    tag_output: bool,
    kill_grace: Duration,
    binding: Binding,
    program: OsString,
    args: Vec<OsString>,
}

fn parse(args: Vec<OsString>) -> Result<Args, String> {
    let mut n = None;
    let mut tag = false;
    let mut grace = symmem::DEFAULT_KILL_GRACE;
    let mut binding = Binding::default();
    let mut it = args.into_iter();
    let text = |a: &OsString| a.to_string_lossy().into_owned();
    let program = loop {
        let Some(arg) = it.next() else {
            return Err("no program given".into());
        };
        match arg.to_str() {
            Some("-n" | "--np" | "-np") => {
                let v = it.next().ok_or("-n needs a number")?;
                let v = text(&v);
                n = Some(
                    v.parse::<usize>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| format!("-n {v}: expected a positive number of PEs"))?,
                );
            }
            Some("--tag-output") => tag = true,
            Some("--kill-grace") => {
                let v = text(&it.next().ok_or("--kill-grace needs seconds")?);
                grace = symmem::bootstrap::duration::parse_seconds(&v)
                    .map_err(|why| format!("--kill-grace {v}: {why}"))?;
            }
            Some(option @ ("--bind-to" | "--map-by")) => {
                let v = text(&it.next().ok_or_else(|| format!("{option} needs a value"))?);
                binding.set(option, &v)?;
            }
            Some("-h" | "--help") => return Err(String::new()),
            Some("--") => break it.next().ok_or("no program given after --")?,
            Some(s) if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => break arg,
        }
    };
    Ok(Args {
        n_pes: n.ok_or("-n N is required")?,
        tag_output: tag,
        kill_grace: grace,
        binding,
        program,
        args: it.collect(),
    })
}

fn main() -> ExitCode {
    let args = match parse(std::env::args_os().skip(1).collect()) {
        Ok(v) => v,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("symrun: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let config = match symmem::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("symrun: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = LaunchOptions {
        n_pes: args.n_pes,
        program: args.program,
        args: args.args,
        tag_output: args.tag_output,
        timeout: config.bootstrap_timeout,
        kill_grace: args.kill_grace,
        binding: args.binding,
    };
    match launcher::run(&opts) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        // A binding this machine cannot honour is a usage error, like a bad value.
        Err(BootstrapError::Config(why)) => {
            eprintln!("symrun: {why}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("symrun: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grace(v: &str) -> Result<Duration, String> {
        let args = ["-n", "2", "--kill-grace", v, "prog"];
        parse(args.iter().map(OsString::from).collect()).map(|a| a.kill_grace)
    }

    fn binding(args: &[&str]) -> Result<Binding, String> {
        parse(args.iter().map(OsString::from).collect()).map(|a| a.binding)
    }

    #[test]
    fn binding_options_are_parsed_and_bad_values_named() {
        use symmem::bootstrap::affinity::{BindTo, MapBy};
        let b = binding(&["-n", "2", "--bind-to", "numa", "--map-by", "numa", "p"]).unwrap();
        assert_eq!((b.bind_to, b.map_by), (Some(BindTo::Numa), MapBy::Numa));
        assert_eq!(binding(&["-n", "2", "p"]).unwrap(), Binding::default());
        let err = binding(&["-n", "2", "--bind-to", "socket", "p"]).unwrap_err();
        assert_eq!(err, "--bind-to socket: expected core, numa, none");
        let err = binding(&["-n", "2", "--map-by"]).unwrap_err();
        assert_eq!(err, "--map-by needs a value");
    }

    #[test]
    fn kill_grace_follows_the_duration_rule() {
        assert_eq!(grace("0.5"), Ok(Duration::from_millis(500)));
        for v in ["1e20", "1e19", "inf"] {
            let g = grace(v).unwrap_or_else(|e| panic!("{v}: {e}"));
            assert!(symmem::bootstrap::duration::is_unlimited(g), "{v}: {g:?}");
        }
        for v in ["nan", "-1", "abc"] {
            let err = grace(v).unwrap_err();
            assert!(
                err.contains("--kill-grace") && err.contains(v),
                "{v}: {err}"
            );
        }
    }
}
