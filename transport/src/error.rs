//! The transports' error type. The runtime's error holds it as it is (its `Transport`
//! variant), words and source unchanged.

use symmem_bootstrap::BootstrapError;

/// Result alias of the transports.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error a [`DeviceHeap`](crate::DeviceHeap) returns: the runtime's own (CUDA) error,
/// passed through unchanged.
pub type GpuHeapError = Box<dyn std::error::Error + Send + Sync>;

/// An error of a transport. Every variant names what was wrong: the peer, the
/// operation, the variable.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bootstrap call failed (exchanging addresses or keys).
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// PEs disagree on something that must be the same everywhere.
    #[error("PEs disagree on {what}: {detail}")]
    Inconsistent {
        /// What they disagree on.
        what: &'static str,
        /// Which PE has which value.
        detail: String,
    },
    /// A request that no transport can carry (a bad opcode or kind).
    #[error("{op}: {reason}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The transport could not carry an operation to a peer (connection lost, malformed
    /// frame, timeout, NIC error).
    #[error("{op} from PE {me} to PE {pe} over {transport}: {detail}")]
    Transport {
        /// The transport (`socket`, `ib`, `weak`).
        transport: &'static str,
        /// The operation.
        op: &'static str,
        /// This PE.
        me: usize,
        /// The peer.
        pe: usize,
        /// What went wrong.
        detail: String,
    },
    /// The transport configuration cannot be satisfied (e.g. `ib` asked for where no
    /// RDMA device is usable).
    #[error("{variable}={value}: {reason}")]
    TransportConfig {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What was found instead.
        reason: String,
    },
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
