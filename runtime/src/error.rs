//! The runtime's error type. Every variant names what was wrong: the PE, the size, the
//! variable, the allocation.

use std::time::Duration;

use symmem_bootstrap::BootstrapError;

/// A transport's error, which [`Error::Transport`] holds.
pub use symmem_transport::Error as TransportError;

/// Result alias for symmem operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error from the symmem runtime.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A bootstrap call failed (a peer died or never arrived, a timeout, a launch mismatch).
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// An environment variable has a bad value.
    #[error("{var}={value:?} is invalid: {reason}")]
    Config {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// PEs disagree on something that must be the same everywhere (e.g. the heap size).
    #[error("PEs disagree on {what}: {detail}")]
    Inconsistent {
        /// What they disagree on.
        what: &'static str,
        /// Which PE has which value.
        detail: String,
    },
    /// A PE number outside `0..n_pes`.
    #[error("{op}: PE {pe} does not exist (n_pes = {n_pes}){access}")]
    InvalidPe {
        /// The operation.
        op: &'static str,
        /// The PE asked for.
        pe: usize,
        /// The number of PEs.
        n_pes: usize,
        /// What was being accessed (allocation, range), or empty.
        access: String,
    },
    /// An access outside a symmetric allocation.
    #[error("{op} on PE {pe}: elements {start}..{end} are out of bounds for allocation #{alloc} of {len} elements ({elem_size} bytes each) at heap offset {offset:#x}")]
    OutOfBounds {
        /// The operation.
        op: &'static str,
        /// The target PE.
        pe: usize,
        /// First element accessed.
        start: usize,
        /// One past the last element accessed.
        end: usize,
        /// The allocation's length in elements.
        len: usize,
        /// Size of one element.
        elem_size: usize,
        /// The allocation's id.
        alloc: u64,
        /// The allocation's heap offset.
        offset: usize,
    },
    /// The symmetric heap cannot satisfy an allocation.
    #[error("symmetric heap exhausted: requested {requested} bytes (alignment {align}); {free} bytes free in total, largest free block {largest_free} bytes, heap size {heap_size} bytes. Raise SYMMEM_SYMMETRIC_SIZE")]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Alignment asked for.
        align: usize,
        /// Total free bytes.
        free: usize,
        /// The largest free block.
        largest_free: usize,
        /// `SYMMEM_SYMMETRIC_SIZE` minus the runtime's reserved part.
        heap_size: usize,
    },
    /// PEs made different collective allocation calls.
    #[error("symmetric allocation call #{call} differs between PEs: {detail}")]
    AllocMismatch {
        /// Index of the collective allocation call.
        call: u64,
        /// Which PEs asked for what.
        detail: String,
    },
    /// PEs of a parent team made different team calls (split or destroy, arguments).
    #[error("{op}: the PEs of the team disagree: {detail}")]
    TeamMismatch {
        /// The operation of the PE that reports it.
        op: &'static str,
        /// Which PEs called what, and the differing argument.
        detail: String,
    },
    /// A new team needs a slot, and some of its PEs have none free.
    #[error("{op}: no more teams available (SYMMEM_MAX_TEAMS = {max}, TEAM_WORLD and TEAM_NODE included, and every slot is taken on some PE of the new team); destroy teams no longer needed, or raise SYMMEM_MAX_TEAMS")]
    TeamLimit {
        /// The operation.
        op: &'static str,
        /// `SYMMEM_MAX_TEAMS`.
        max: usize,
    },
    /// A bad argument to an allocation.
    #[error("{op}: {reason}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A symmetric buffer used with a runtime that did not allocate it (or after finalize).
    #[error("{op}: allocation #{alloc} belongs to runtime instance {owner}, not this one ({this}); it was allocated before a finalize or by another runtime")]
    ForeignAllocation {
        /// The operation.
        op: &'static str,
        /// The allocation.
        alloc: u64,
        /// The runtime that allocated it.
        owner: u64,
        /// The runtime it was used with.
        this: u64,
    },
    /// A PE that has no direct path (another node, or P2P disabled) and no transport yet.
    #[error("{op}: PE {pe} (node {node:?}) is not reachable from PE {me} (node {my_node:?}): no P2P mapping and no remote transport is available")]
    Unreachable {
        /// The operation.
        op: &'static str,
        /// The target PE.
        pe: usize,
        /// Its node.
        node: String,
        /// This PE.
        me: usize,
        /// This PE's node.
        my_node: String,
    },
    /// A peer died while this PE was waiting for it.
    #[error("PE {pe} failed while PE {me} was in {op}: {reason}")]
    PeerFailed {
        /// The peer.
        pe: usize,
        /// This PE.
        me: usize,
        /// The operation that was waiting.
        op: &'static str,
        /// What is known.
        reason: String,
    },
    /// A wait exceeded `SYMMEM_TIMEOUT`.
    #[error(
        "{op} on PE {me} timed out after {after:?} (SYMMEM_TIMEOUT) waiting for {waiting_for}"
    )]
    Timeout {
        /// The operation.
        op: &'static str,
        /// This PE.
        me: usize,
        /// The limit.
        after: Duration,
        /// Who or what it waited for.
        waiting_for: String,
    },
    /// A wait stopped because the caller's interrupt check asked it to
    /// ([`with_interrupt_check`](crate::with_interrupt_check): Ctrl-C in Python).
    #[error("{op} on PE {me} was interrupted while waiting")]
    Interrupted {
        /// The operation.
        op: &'static str,
        /// This PE.
        me: usize,
    },
    /// A kernel thread panicked (or was stopped) on the CPU executor.
    #[error("kernel failed on PE {pe} in block {block:?} thread {thread:?}: {message}")]
    KernelFailed {
        /// This PE.
        pe: usize,
        /// `blockIdx` of the first failing thread, as (x, y, z).
        block: (u32, u32, u32),
        /// `threadIdx` of the first failing thread, as (x, y, z).
        thread: (u32, u32, u32),
        /// The panic message.
        message: String,
    },
    /// A CUDA driver call failed.
    #[error("{call} failed on PE {pe}: {name} ({code}){detail}")]
    Cuda {
        /// The driver call, with what it was for.
        call: String,
        /// This PE.
        pe: usize,
        /// The driver's name for the error, e.g. `CUDA_ERROR_INVALID_PTX`.
        name: String,
        /// The numeric `CUresult`.
        code: u32,
        /// More to say (a JIT log, a hint), starting with a separator; often empty.
        detail: String,
    },
    /// `SYMMEM_DEVICE=cuda` was asked for, or a GPU-only call was made, and no GPU can be
    /// used.
    #[error("{op}: no GPU can be used on PE {pe}: {reason}")]
    NoGpu {
        /// The operation (or `init` for `SYMMEM_DEVICE=cuda`).
        op: &'static str,
        /// This PE.
        pe: usize,
        /// What was missing.
        reason: String,
    },
    /// The operation cannot be performed on this kind of memory yet.
    #[error("{op} on PE {pe}: {reason}")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The PE whose memory the operation targets.
        pe: usize,
        /// Why, and what to use instead.
        reason: String,
    },
    /// A kernel module or kernel does not match what the launch asked for.
    #[error("{op} on PE {pe}: {reason}")]
    Module {
        /// The operation (`load_module`, `launch`).
        op: &'static str,
        /// This PE.
        pe: usize,
        /// What does not match.
        reason: String,
    },
    /// A transport failed: it could not carry an operation to a peer (connection lost,
    /// malformed frame, timeout, NIC error), its configuration cannot be satisfied (e.g.
    /// `ib` asked for where no RDMA device is usable), PEs disagree on it, or an OS call
    /// of its failed. Its words and its source are the transport error's own.
    #[error(transparent)]
    Transport(symmem_transport::Error),
    /// A job whose PEs span several nodes would run with a key derived from its public
    /// identity (launcher variables, no `SYMMEM_JOB_SECRET`), and
    /// `SYMMEM_ALLOW_PUBLIC_JOB_KEY` does not accept that.
    #[error("init on PE {pe}: the job's PEs are on {nodes} nodes and {launcher} hands out no secret, so without SYMMEM_JOB_SECRET the job's key would be derived from its public identity ({derived_from}): anyone who can reach rank 0's port and guess that identity could join the job and read and write every PE's heap. Export SYMMEM_JOB_SECRET=<random> (e.g. from `openssl rand -hex 32`), the same value to every PE; or, on a network nobody else can reach, set SYMMEM_ALLOW_PUBLIC_JOB_KEY=1 on every PE to accept that risk")]
    PublicJobKey {
        /// This PE.
        pe: usize,
        /// How many nodes the job's PEs are on.
        nodes: usize,
        /// The launcher, e.g. `torchrun`.
        launcher: String,
        /// The variables the key would be derived from.
        derived_from: String,
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

    /// The runtime's own error that went through a transport's GPU heap interface, back
    /// in its own type (anything else as an I/O error of its words).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // GPU heaps need the cuda feature
    pub(crate) fn from_gpu_heap(e: symmem_transport::GpuHeapError) -> Self {
        match e.downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error::io("the GPU heap", std::io::Error::other(other)),
        }
    }

    /// The last OS error, with context.
    pub(crate) fn last_os(context: impl Into<String>) -> Self {
        Error::io(context, std::io::Error::last_os_error())
    }
}

impl From<symmem_transport::Error> for Error {
    /// The transport's error, held as it is; a bootstrap failure it passes on (a peer that
    /// died during an exchange) is the runtime's bootstrap error again, so that callers
    /// find a peer's failure in one place whoever met it.
    fn from(e: symmem_transport::Error) -> Self {
        match e {
            symmem_transport::Error::Bootstrap(e) => Error::Bootstrap(e),
            e => Error::Transport(e),
        }
    }
}
