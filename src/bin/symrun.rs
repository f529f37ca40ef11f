//! `symrun`: start N local symmem PEs.
//!
//! ```text
//! symrun -n N [--bind-to core|numa|none] [--map-by core|numa] [--tag-output]
//!        [--kill-grace SECONDS] [--] PROGRAM [ARGS...]
//! symrun --report [PID]
//! ```
//! Exits with 0 when every PE succeeds, else with the first failing PE's exit code
//! (128 + signal number for a PE killed by a signal); 2 for bad usage. `--report` asks a
//! running symrun for a hang report and prints it ([`symmem::cli::report`]). The command
//! line is [`symmem::cli::symrun::Args`] (`symrun --help`, `man symrun`).

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;
use symmem::bootstrap::launcher::{self, LaunchOptions};
use symmem::bootstrap::BootstrapError;
use symmem::cli::symrun::Args;

/// Parses `argv` (the program name first): clap's error (help and version included) or
/// the arguments with a checked binding.
fn parse(argv: Vec<OsString>) -> Result<(Args, symmem::bootstrap::affinity::Binding), Error> {
    let args = Args::try_parse_from(Args::normalize(argv)).map_err(Error::Clap)?;
    let binding = args.binding.binding().map_err(Error::Usage)?;
    Ok((args, binding))
}

/// Why the command line cannot run.
#[derive(Debug)]
enum Error {
    /// clap's own report (and `--help`, `--version`).
    Clap(clap::Error),
    /// A value clap took that symrun rejects.
    Usage(String),
}

fn main() -> ExitCode {
    let (args, binding) = match parse(std::env::args_os().collect()) {
        Ok(v) => v,
        Err(Error::Clap(e)) => e.exit(),
        Err(Error::Usage(msg)) => {
            eprintln!("symrun: {msg}\n\nFor more information, try '--help'.");
            return ExitCode::from(2);
        }
    };
    if let Some(pid) = args.report {
        return report(pid);
    }
    let config = match symmem::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("symrun: {e}");
            return ExitCode::from(2);
        }
    };
    let mut command = args.command.into_iter();
    let opts = LaunchOptions {
        n_pes: args.n_pes.expect("clap requires --np without --report"),
        program: command.next().expect("clap requires PROGRAM"),
        args: command.collect(),
        tag_output: args.tag_output,
        timeout: config.bootstrap_timeout,
        kill_grace: args.kill_grace.unwrap_or(symmem::DEFAULT_KILL_GRACE),
        binding,
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

/// `symrun --report [PID]`: asks symrun `pid` (default: this user's only one) for a hang
/// report and prints it, or says why none came (exit code 1).
fn report(pid: Option<u32>) -> ExitCode {
    use symmem::cli::report;
    let printed = pid.map_or_else(report::only_symrun, Ok).and_then(|pid| {
        let file = report::file_of(pid)?;
        let line = report::ask(pid, &file, report::WAIT)?;
        Ok((report::render(&line)?, file))
    });
    match printed {
        Ok((text, file)) => {
            print!("{text}");
            println!(
                "(the JSON report is the last line with \"trigger\":\"asked\" in {})",
                file.display()
            );
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("symrun --report: {why}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use symmem::bootstrap::affinity::Binding;

    fn parsed(args: &[&str]) -> Result<(Args, Binding), String> {
        let argv = std::iter::once("symrun").chain(args.iter().copied());
        parse(argv.map(OsString::from).collect()).map_err(|e| match e {
            Error::Clap(e) => e.to_string(),
            Error::Usage(msg) => msg,
        })
    }

    fn grace(v: &str) -> Result<Duration, String> {
        parsed(&["-n", "2", "--kill-grace", v, "prog"]).map(|(a, _)| a.kill_grace.unwrap())
    }

    fn binding(args: &[&str]) -> Result<Binding, String> {
        parsed(args).map(|(_, b)| b)
    }

    #[test]
    fn binding_options_are_parsed_and_bad_values_named() {
        use symmem::bootstrap::affinity::{BindTo, MapBy};
        let b = binding(&["-n", "2", "--bind-to", "numa", "--map-by=numa", "p"]).unwrap();
        assert_eq!((b.bind_to, b.map_by), (Some(BindTo::Numa), MapBy::Numa));
        assert_eq!(binding(&["-n", "2", "p"]).unwrap(), Binding::default());
        let err = binding(&["-n", "2", "--bind-to", "socket", "p"]).unwrap_err();
        assert_eq!(err, "--bind-to socket: expected core, numa, none");
        let err = binding(&["-n", "2", "--map-by"]).unwrap_err();
        assert!(err.contains("--map-by"), "{err}");
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

    #[test]
    fn the_program_keeps_its_own_arguments() {
        let (a, _) = parsed(&["-np", "2", "prog", "--pes", "3", "-x", "-np", "4"]).unwrap();
        assert_eq!(a.n_pes, Some(2));
        let expected: Vec<OsString> = ["prog", "--pes", "3", "-x", "-np", "4"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(a.command, expected);
        let (a, _) = parsed(&["--np=3", "--tag-output", "--", "-prog", "-n", "1"]).unwrap();
        assert_eq!((a.n_pes, a.tag_output, a.command.len()), (Some(3), true, 3));
        assert_eq!(a.command[0], "-prog");
    }

    #[test]
    fn report_takes_an_optional_pid_and_nothing_else() {
        assert_eq!(parsed(&["--report"]).unwrap().0.report, Some(None));
        assert_eq!(
            parsed(&["--report", "42"]).unwrap().0.report,
            Some(Some(42))
        );
        assert_eq!(parsed(&["--report=42"]).unwrap().0.report, Some(Some(42)));
        let err = parsed(&["--report", "-n", "2", "prog"]).unwrap_err();
        assert!(err.contains("cannot be used with"), "{err}");
        assert!(parsed(&["--report", "x"]).unwrap_err().contains("x"));
    }

    #[test]
    fn bad_usage_is_named() {
        let err = parsed(&["-n", "0", "prog"]).unwrap_err();
        assert!(err.contains("positive number of PEs"), "{err}");
        assert!(parsed(&["prog"]).unwrap_err().contains("--np"));
        assert!(parsed(&["-n", "2"]).unwrap_err().contains("PROGRAM"));
        let err = parsed(&["-n", "2", "--tag-ouput", "prog"]).unwrap_err();
        assert!(err.contains("--tag-output"), "no suggestion: {err}");
    }
}
