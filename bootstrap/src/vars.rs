//! Reading environment variables: the lookup that variable parsers take (so tests can
//! pass a table), the one that reads this process's environment, and the parse of a
//! number-valued variable that names the variable on error.

use crate::error::BootstrapError;

/// Reads one variable: `None` when unset or blank (the process environment,
/// [`process_env`], or a test's table).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Reads a variable of this process's environment; blank counts as unset.
pub fn process_env(var: &str) -> Option<String> {
    std::env::var(var)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// How PEs find each other (parsed by [`crate::BootstrapChoice`]'s `FromStr`).
pub const BOOTSTRAP: &str = "SYMMEM_BOOTSTRAP";

/// The network interface for sockets and the unique-id rendezvous.
pub const SOCKET_IFNAME: &str = "SYMMEM_SOCKET_IFNAME";
/// Parses a non-negative integer variable, naming it on error.
pub(crate) fn number(var: &str, value: &str) -> Result<usize, BootstrapError> {
    value.trim().parse::<usize>().map_err(|_| {
        BootstrapError::Config(format!("{var}={value:?} is not a non-negative integer"))
    })
}
