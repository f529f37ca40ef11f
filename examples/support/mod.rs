//! What the workload examples share: starting the job (self-launched PEs by default),
//! reading `--name value` options, and combining a few numbers over all PEs.
//!
//! Not an example itself: Cargo only builds `examples/*.rs` and `examples/*/main.rs`.

use std::ffi::OsString;
use std::process::ExitCode;
use std::str::FromStr;

use symmem::bootstrap::affinity::Binding;
use symmem::bootstrap::launcher::{self, LaunchOptions};
use symmem::bootstrap::vars::process_env;
use symmem::bootstrap::{decide, Plan};
use symmem::collectives::ReduceOp;
use symmem::{Config, Runtime, SelfLaunch, SymBuf};

/// How the program goes on after [`start`].
pub enum Start {
    /// This process is a PE: initialise the runtime.
    Pe,
    /// The job this process launched (or `--help`) finished with this exit code.
    Done(ExitCode),
}

/// Starts the job. `--pes N` self-launches N PEs; with neither `--pes` nor a launcher
/// (symrun, torchrun, mpirun, srun…) around the process, `default_pes` PEs are
/// self-launched, so `cargo run --example NAME` runs a whole job. Under a launcher the
/// process is one of its PEs.
pub fn start(default_pes: usize) -> symmem::Result<Start> {
    if let SelfLaunch::Finished(code) = symmem::self_launch()? {
        return Ok(Start::Done(exit_code(code)));
    }
    let config = Config::from_env()?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let alone = matches!(decide(config.bootstrap, &process_env)?.plan, Plan::Single);
    if !alone || args.iter().any(|a| a == "--pes") {
        return Ok(Start::Pe);
    }
    let program = std::env::current_exe().map_err(|e| symmem::Error::InvalidArgument {
        op: "self-launch",
        reason: format!("cannot find this program's executable: {e}"),
    })?;
    let opts = LaunchOptions {
        n_pes: default_pes,
        program: program.into_os_string(),
        args,
        tag_output: false,
        timeout: config.bootstrap_timeout,
        kill_grace: symmem::DEFAULT_KILL_GRACE,
        binding: Binding::default(),
    };
    Ok(Start::Done(exit_code(launcher::run(&opts)?)))
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// The program's `--name value` options (`--pes N` is the launcher's and skipped).
pub struct Options {
    pairs: Vec<(String, String)>,
}

impl Options {
    /// Parses the process arguments; every option must be one of `known` (names without
    /// the dashes) and take a value. `--help` gives `Err(None)`; a bad argument gives
    /// `Err(Some(why))`.
    pub fn parse(known: &[&str]) -> Result<Options, Option<String>> {
        let mut args = std::env::args().skip(1);
        let mut pairs = Vec::new();
        while let Some(arg) = args.next() {
            if arg == "--help" || arg == "-h" {
                return Err(None);
            }
            let Some(name) = arg.strip_prefix("--") else {
                return Err(Some(format!("unexpected argument {arg:?}")));
            };
            let value = args
                .next()
                .ok_or_else(|| Some(format!("--{name} needs a value")))?;
            if name != "pes" {
                if !known.contains(&name) {
                    return Err(Some(format!("unknown option --{name}")));
                }
                pairs.push((name.to_string(), value));
            }
        }
        Ok(Options { pairs })
    }

    /// The last value of `--name`, parsed, or `default`.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.pairs.iter().rev().find(|(n, _)| n == name) {
            None => Ok(default),
            Some((_, v)) => v
                .parse()
                .map_err(|_| format!("--{name} {v:?}: not a valid value")),
        }
    }

    /// The comma-separated list of `--name`, each parsed and positive, or `default`.
    pub fn list(&self, name: &str, default: &[usize]) -> Result<Vec<usize>, String> {
        let Some((_, v)) = self.pairs.iter().rev().find(|(n, _)| n == name) else {
            return Ok(default.to_vec());
        };
        v.split(',')
            .map(|s| match s.trim().parse::<usize>() {
                Ok(x) if x > 0 => Ok(x),
                _ => Err(format!(
                    "--{name} {v:?}: expected positive integers separated by commas"
                )),
            })
            .collect()
    }
}

/// Combines `values` element by element over all PEs with `op`, through `scratch` (a
/// symmetric buffer of at least `values.len()` elements). Collective.
pub fn all_reduce<O: ReduceOp<u64>>(
    rt: &Runtime,
    scratch: &SymBuf<u64>,
    values: &[u64],
    op: O,
) -> symmem::Result<Vec<u64>> {
    rt.put(scratch.at(0), values, rt.my_pe())?;
    rt.team_world().reduce(scratch, scratch, values.len(), op)?;
    let mut out = vec![0; values.len()];
    rt.get(scratch.at(0), &mut out, rt.my_pe())?;
    Ok(out)
}
