//! Element types of symmetric arrays: numpy's names and sizes (their DLPack codes are in
//! `dlpack.rs`).

/// An element type a symmetric array can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    /// `bool`, one byte.
    Bool,
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
    /// `float16`.
    F16,
    /// `bfloat16`.
    Bf16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
    /// `float8_e4m3fn` (OCP FP8 E4M3, no infinities): moved as bytes, never computed on.
    F8E4M3Fn,
    /// `float8_e5m2` (OCP FP8 E5M2): moved as bytes.
    F8E5M2,
    /// `float8_e4m3fnuz` (E4M3, no infinities or negative zero): moved as bytes.
    F8E4M3Fnuz,
    /// `float8_e5m2fnuz` (E5M2, no infinities or negative zero): moved as bytes.
    F8E5M2Fnuz,
}

impl DType {
    /// Every type, in the order of [`DType::NAMES`].
    pub const ALL: [DType; 17] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::Bf16,
        DType::F32,
        DType::F64,
        DType::F8E4M3Fn,
        DType::F8E5M2,
        DType::F8E4M3Fnuz,
        DType::F8E5M2Fnuz,
    ];

    /// numpy's (and torch's, after `torch.`) name of each type in [`DType::ALL`].
    pub const NAMES: [&'static str; 17] = [
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
    ];

    /// The type named `name` (numpy's names; `torch.float32` and numpy dtypes are
    /// normalized to these by the Python layer).
    pub fn parse(name: &str) -> Option<DType> {
        Self::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Self::ALL[i])
    }

    /// numpy's name.
    pub fn name(self) -> &'static str {
        Self::NAMES[Self::ALL.iter().position(|d| *d == self).expect("in ALL")]
    }

    /// Whether this is one of the fp8 types, which move as bytes but take no arithmetic
    /// (reductions, atomics).
    pub fn is_fp8(self) -> bool {
        matches!(
            self,
            DType::F8E4M3Fn | DType::F8E5M2 | DType::F8E4M3Fnuz | DType::F8E5M2Fnuz
        )
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::F8E4M3Fn | DType::F8E5M2 | DType::F8E4M3Fnuz | DType::F8E5M2Fnuz => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::Bf16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }
}
