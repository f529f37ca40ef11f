//! Reading environment variables: the lookup that variable parsers take (so tests can
//! pass a table), and the one that reads this process's environment.

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
