//! `symrun`'s command line.

use std::ffi::OsString;
use std::time::Duration;

use super::launch::BindingArgs;

/// Start N local symmem PEs of PROGRAM, or ask a running job for a hang report.
///
/// Exits with 0 when every PE succeeds, else with the first failing PE's exit code (128 +
/// signal number for a PE killed by a signal); 2 for bad usage. With --report: 0 once the
/// report is printed, 1 when none came.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "symrun",
    version,
    allow_negative_numbers = true,
    after_help = "Hang reports: SIGUSR1 to symrun is forwarded to PE 0, which logs a report of \
                  every PE's state (the PEs start with SIGUSR1 ignored until their runtime \
                  handles it). Unless SYMMEM_HANG_REPORT_FILE is set, symrun gives its PEs \
                  the per-job file $XDG_RUNTIME_DIR/symmem-<uid>/symrun-<pid>-hang-reports.jsonl \
                  ($TMPDIR or /tmp without XDG_RUNTIME_DIR), where `symrun --report` reads \
                  the JSON report it asked for; symrun names the file at exit when it holds \
                  reports.\n\n\
                  Environment: SYMMEM_BOOTSTRAP_TIMEOUT bounds every bootstrap call (default 60 s); \
                  `symmem-info` lists every variable."
)]
pub struct Args {
    /// Ask the running symrun PID (default: this user's only one) for a hang report: send
    /// it SIGUSR1, wait up to 10 s for the report in its per-job file and print it
    #[arg(
        long,
        value_name = "PID",
        num_args = 0..=1,
        conflicts_with_all = ["n_pes", "command", "tag_output", "kill_grace"]
    )]
    pub report: Option<Option<u32>>,
    /// Number of PEs to start on this machine (-np N is taken too)
    #[arg(
        short = 'n',
        long = "np",
        value_name = "N",
        value_parser = pes,
        required_unless_present = "report"
    )]
    pub n_pes: Option<usize>,
    /// Prefix each output line with [PE i] (output is forwarded in whole lines either way)
    #[arg(long)]
    pub tag_output: bool,
    /// After the first PE fails, how long the others may take to exit on their own
    /// before they are killed (default 5; 1 year or more, e.g. inf, = never killed)
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub kill_grace: Option<Duration>,
    /// Where the PEs run.
    #[command(flatten)]
    pub binding: BindingArgs,
    /// The program every PE runs, and its arguments (passed on untouched)
    #[arg(
        value_name = "PROGRAM",
        required_unless_present = "report",
        num_args = 1..,
        trailing_var_arg = true
    )]
    pub command: Vec<OsString>,
}

impl Args {
    /// `argv` (the program name first) with Open MPI's `-np N` spelled `--np N`, as clap
    /// takes it: only among symrun's options, never in the program's own arguments.
    pub fn normalize(argv: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
        let mut argv = argv.into_iter();
        let mut out: Vec<OsString> = argv.next().into_iter().collect();
        let mut value_next = false;
        for arg in argv.by_ref() {
            let text = arg.to_str().unwrap_or("");
            if value_next {
                value_next = false;
                out.push(arg);
                continue;
            }
            if text == "-np" {
                out.push("--np".into());
                value_next = true;
                continue;
            }
            let program = text == "--" || !text.starts_with('-');
            value_next = matches!(
                text,
                "-n" | "--np" | "--kill-grace" | "--bind-to" | "--map-by"
            );
            out.push(arg);
            if program {
                break;
            }
        }
        out.extend(argv);
        out
    }
}

/// A positive number of PEs.
fn pes(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| "expected a positive number of PEs".to_string())
}

/// Seconds, as every symmem duration is read.
fn seconds(text: &str) -> Result<Duration, String> {
    symmem_runtime::bootstrap::duration::parse_seconds(text)
}
