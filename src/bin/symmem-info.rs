//! `symmem-info`: prints symmem's version, every configuration variable with its
//! effective value and meaning, and what this build supports.

use std::process::ExitCode;

use symmem::config::VARIABLES;

fn main() -> ExitCode {
    println!("symmem {}", env!("CARGO_PKG_VERSION"));
    println!(
        "features: mpi bootstrap {}",
        if cfg!(feature = "mpi") {
            "built in"
        } else {
            "not built (rebuild with --features mpi)"
        }
    );
    println!(
        "device API: CPU executor built in; PTX via symmem-ptx-build; device state layout v{}",
        symmem::device::DEVICE_STATE_VERSION
    );
    let config = match symmem::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("symmem-info: {e}");
            return ExitCode::from(2);
        }
    };
    println!("\nconfiguration (environment):");
    let values = config.describe();
    for var in VARIABLES {
        let value = values
            .iter()
            .find(|(name, _)| *name == var.name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("?");
        let origin = if std::env::var_os(var.name).is_some() {
            "from the environment"
        } else {
            "default"
        };
        println!(
            "  {:<26} = {value}  ({origin})\n      {} [default {}]",
            var.name, var.doc, var.default
        );
    }
    for unknown in symmem::Config::unknown_variables() {
        println!("  warning: {unknown} is not a symmem variable (typo?)");
    }
    ExitCode::SUCCESS
}
