//! Starting an example's job: the command line's `--pes N` (or `--pes=N`) self-launches N
//! PEs, bound as symrun binds them (`--bind-to`, `--map-by`); an example with a default
//! job size self-launches that many PEs when neither `--pes` nor a launcher (symrun,
//! torchrun, mpirun, srun…) is around the process. Under a launcher, or as one of the
//! PEs a self-launch started (which get the arguments without `--pes N`), the process is
//! a PE.

use std::process::ExitCode;

pub use symmem::cli::launch::SelfLaunchArgs;

use symmem::bootstrap::launcher::{self, LaunchOptions};
use symmem::bootstrap::vars::process_env;
use symmem::bootstrap::{decide, Plan};
use symmem::{Config, SelfLaunch};

/// How the program goes on after [`start`].
pub enum Start {
    /// This process is a PE: initialise the runtime.
    Pe,
    /// The job this process launched finished with this exit code (2: bad binding
    /// options, already reported).
    Done(ExitCode),
}

/// Starts the job that `launch` asks for; `default_pes` PEs without `--pes` and outside
/// any launcher (`None`: this process alone is the job).
pub fn start(launch: &SelfLaunchArgs, default_pes: Option<usize>) -> symmem::Result<Start> {
    let binding = match launch.binding.binding() {
        Ok(b) => b,
        Err(why) => {
            eprintln!("error: {why}\n\nFor more information, try '--help'.");
            return Ok(Start::Done(ExitCode::from(2)));
        }
    };
    if let SelfLaunch::Finished(code) = symmem::self_launch()? {
        return Ok(Start::Done(exit_code(code)));
    }
    let Some(n_pes) = default_pes.filter(|_| launch.pes.is_none()) else {
        return Ok(Start::Pe);
    };
    let config = Config::from_env()?;
    if !matches!(decide(config.bootstrap, &process_env)?.plan, Plan::Single) {
        return Ok(Start::Pe);
    }
    let program = std::env::current_exe().map_err(|e| symmem::Error::InvalidArgument {
        op: "self-launch",
        reason: format!("cannot find this program's executable: {e}"),
    })?;
    let opts = LaunchOptions {
        n_pes,
        program: program.into_os_string(),
        args: std::env::args_os().skip(1).collect(),
        tag_output: false,
        timeout: config.bootstrap_timeout,
        kill_grace: symmem::DEFAULT_KILL_GRACE,
        binding,
    };
    Ok(Start::Done(exit_code(launcher::run(&opts)?)))
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(code.clamp(0, 255) as u8)
}
