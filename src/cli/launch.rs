//! The options a self-launching program shares with symrun: how many PEs to start and
//! how to bind them to CPUs.

use symmem_runtime::bootstrap::affinity::Binding;

/// `--bind-to WHAT` and `--map-by WHAT`, as symrun and Open MPI's mpirun take them.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct BindingArgs {
    /// Bind each PE to a core (one CPU), to the CPUs of a NUMA node, or none (core, numa,
    /// none); always within the CPUs this process may use (default: core when N >= 2 and
    /// there are at least N of them, else none)
    #[arg(long, value_name = "WHAT")]
    pub bind_to: Option<String>,
    /// Spread PEs CPU after CPU (core, the default) or over the NUMA nodes in turn (numa)
    #[arg(long, value_name = "WHAT")]
    pub map_by: Option<String>,
}

impl BindingArgs {
    /// Whether either option was given.
    pub fn given(&self) -> bool {
        self.bind_to.is_some() || self.map_by.is_some()
    }

    /// The binding the options ask for; a bad value is an error naming the option, the
    /// value and the accepted ones (`--bind-to socket: expected core, numa, none`).
    pub fn binding(&self) -> Result<Binding, String> {
        let mut binding = Binding::default();
        for (option, value) in Binding::OPTIONS
            .into_iter()
            .zip([&self.bind_to, &self.map_by])
        {
            if let Some(value) = value {
                binding.set(option, value)?;
            }
        }
        Ok(binding)
    }
}

/// `--pes N` and the binding options of a program that starts its own PEs (self-launch).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct SelfLaunchArgs {
    /// Start N PEs of this program on this machine (self-launch), bound as symrun binds
    /// them
    #[arg(long, value_name = "N", value_parser = super::positive)]
    pub pes: Option<usize>,
    /// How the PEs of --pes are bound to CPUs.
    #[command(flatten)]
    pub binding: BindingArgs,
}

impl SelfLaunchArgs {
    /// Checks the binding options: their values, and that they come with `--pes`.
    pub fn check(&self) -> Result<(), String> {
        self.binding.binding()?;
        if self.pes.is_none() && self.binding.given() {
            return Err("--bind-to and --map-by need --pes N".into());
        }
        Ok(())
    }
}
