//! Errors of the bootstrap layer. Each names the ranks and the operation involved.

use std::time::Duration;

/// An error from a bootstrap operation.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BootstrapError {
    /// A collective did not complete before the deadline.
    #[error("bootstrap {op} timed out after {after:?}: rank(s) {} never arrived (SYMMEM_BOOTSTRAP_TIMEOUT)", crate::text::fmt_ranks(.missing))]
    Timeout {
        /// The operation, e.g. `allgather #3` or `connect`.
        op: String,
        /// Ranks that did not take part.
        missing: Vec<usize>,
        /// The deadline that passed.
        after: Duration,
    },
    /// A peer rank died, disconnected or aborted.
    #[error("PE {rank} failed: {reason}")]
    PeerFailed {
        /// The rank that failed.
        rank: usize,
        /// What is known about how it failed.
        reason: String,
    },
    /// The rendezvous server could not be reached or stopped answering.
    #[error("bootstrap server at {addr} unreachable: {reason}")]
    ServerLost {
        /// Address of the server.
        addr: String,
        /// What happened.
        reason: String,
    },
    /// Ranks called different collectives at the same point.
    #[error("bootstrap collective mismatch at call #{seq}: {detail}")]
    Mismatch {
        /// Sequence number of the collective.
        seq: u64,
        /// Which ranks called what.
        detail: String,
    },
    /// A malformed or unexpected frame.
    #[error("bootstrap protocol error from {peer}: {detail}")]
    Protocol {
        /// Who sent it.
        peer: String,
        /// What was wrong.
        detail: String,
    },
    /// The other end of a connection did not prove the job's key: another job's or a
    /// stranger's process, or a secret that differs between the job's processes.
    #[error("{peer} refused: {detail}")]
    Unauthenticated {
        /// Who it was.
        peer: String,
        /// What failed.
        detail: String,
    },
    /// A bad configuration value or argument.
    #[error("bootstrap configuration: {0}")]
    Config(String),
    /// An I/O error with context.
    #[error("bootstrap I/O error while {context}: {message}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error text.
        message: String,
    },
    /// A PMIx call returned an error status.
    #[error("PMIx bootstrap: {call} failed with {name} (PMIx status {status}){context}")]
    Pmix {
        /// The call, e.g. `PMIx_Fence`.
        call: String,
        /// The `pmix_status_t` it returned.
        status: i32,
        /// `PMIx_Error_string(status)`.
        name: String,
        /// The launcher's variables and a hint, as `; ...`, or empty.
        context: String,
    },
    /// The MPI layer reported an error.
    #[error("MPI bootstrap: {0}")]
    Mpi(String),
}

impl BootstrapError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, err: &std::io::Error) -> Self {
        BootstrapError::Io {
            context: context.into(),
            message: err.to_string(),
        }
    }
}
