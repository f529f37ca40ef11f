//! Self-launching: `program --pes N` starts N PEs of itself through the built-in launcher.

use std::time::Duration;

pub use symmem_bootstrap::launcher::SelfLaunch;

use crate::config::Config;
use crate::error::Result;

/// How long the other PEs get to exit on their own after the first PE fails.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);

/// If the program was given `--pes N` and is not yet part of a job, runs N copies of it
/// as a job and returns [`SelfLaunch::Finished`] with the job's exit code; the caller
/// should exit with it. Otherwise returns [`SelfLaunch::InJob`] and the caller goes on to
/// [`crate::init`].
pub fn self_launch() -> Result<SelfLaunch> {
    let config = Config::from_env()?;
    Ok(symmem_bootstrap::launcher::self_launch(
        config.bootstrap_timeout,
        DEFAULT_KILL_GRACE,
    )?)
}
