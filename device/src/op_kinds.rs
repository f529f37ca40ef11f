//! The kinds of operation that kernels, host operations and requests share: wait
//! comparisons ([`Cmp`]), signal updates ([`SignalOp`]) and atomics ([`AmoKind`]), each with
//! its `u32` code.

/// Comparison for waits (`NVSHMEM_CMP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Cmp {
    /// `ivar == value`
    Eq,
    /// `ivar != value`
    Ne,
    /// `ivar > value`
    Gt,
    /// `ivar >= value`
    Ge,
    /// `ivar < value`
    Lt,
    /// `ivar <= value`
    Le,
}

impl Cmp {
    /// Every comparison, for tests and tables.
    pub const ALL: [Cmp; 6] = [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le];

    /// Whether `ivar <cmp> value` holds.
    #[inline(always)]
    pub fn holds<T: PartialOrd>(self, ivar: T, value: T) -> bool {
        match self {
            Cmp::Eq => ivar == value,
            Cmp::Ne => ivar != value,
            Cmp::Gt => ivar > value,
            Cmp::Ge => ivar >= value,
            Cmp::Lt => ivar < value,
            Cmp::Le => ivar <= value,
        }
    }
}

/// How a signal word is updated (`NVSHMEM_SIGNAL_SET` / `_ADD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum SignalOp {
    /// Store the value.
    Set,
    /// Add the value.
    Add,
}

/// An atomic memory operation, as host operations encode it for the runtime's GPU helper
/// kernels (and, later, for the proxy ring and the wire): the one op vocabulary beside
/// [`SignalOp`] and [`Cmp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum AmoKind {
    /// Acquire load; returns the value.
    Fetch = 0,
    /// Release store of the first operand; returns 0.
    Set = 1,
    /// Swap in the first operand; returns the old value.
    Swap = 2,
    /// If the word equals the first operand, store the second; returns the old value.
    CompareSwap = 3,
    /// Add the first operand; returns the old value.
    FetchAdd = 4,
    /// And with the first operand; returns the old value.
    FetchAnd = 5,
    /// Or with the first operand; returns the old value.
    FetchOr = 6,
    /// Xor with the first operand; returns the old value.
    FetchXor = 7,
}

impl AmoKind {
    /// Every kind, in encoding order.
    pub const ALL: [AmoKind; 8] = [
        AmoKind::Fetch,
        AmoKind::Set,
        AmoKind::Swap,
        AmoKind::CompareSwap,
        AmoKind::FetchAdd,
        AmoKind::FetchAnd,
        AmoKind::FetchOr,
        AmoKind::FetchXor,
    ];

    /// The kind encoded as `code`, if any.
    pub const fn from_u32(code: u32) -> Option<Self> {
        if code < Self::ALL.len() as u32 {
            Some(Self::ALL[code as usize])
        } else {
            None
        }
    }
}

impl SignalOp {
    /// The operation encoded as `code` (`SignalOp as u32`), if any.
    pub const fn from_u32(code: u32) -> Option<Self> {
        match code {
            0 => Some(SignalOp::Set),
            1 => Some(SignalOp::Add),
            _ => None,
        }
    }
}

impl Cmp {
    /// The comparison encoded as `code` (`Cmp as u32`), if any.
    pub const fn from_u32(code: u32) -> Option<Self> {
        if code < Self::ALL.len() as u32 {
            Some(Self::ALL[code as usize])
        } else {
            None
        }
    }
}
