//! Rust kernels from Python: `symmem.load_module(path)` loads a kernel library (a shared
//! library that exports a kernel crate's kernels with `symmem_device::export_kernels!`)
//! and `module.launch(kernel, grid, block, *args, stream=None)` runs one of its kernels,
//! on the GPU on GPU PEs (on torch's current stream by default, see `streams.rs`) and on
//! the CPU executor on CPU PEs.
//!
//! Arguments are converted by the kernel's parameter layout: arrays (symmetric arrays,
//! numpy arrays, torch tensors) by the address of their first element, Python ints as
//! integers of the parameter's size (range-checked), floats as `f32` or `f64`. Their count
//! and sizes are checked against the kernel's parameters first, and each against the
//! parameter's Rust type from the library's signature table (a float32 array for a
//! `*mut u64` is refused). The table is the host library's, the same on GPU PEs: the PTX
//! declares only each parameter's size (`.param .u64`), so it says less.

use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyTuple};
use symmem::{Dim3, KernelLibrary, Runtime};

use crate::blocking::blocking;
use crate::dtype::DType;
use crate::errors::to_py;
use crate::handle;
use crate::operands::{self, Operand};
use crate::streams::{self, Order};

/// A loaded kernel library: its kernels, ready to launch on this PE.
#[pyclass(module = "symmem._native", name = "KernelModule", frozen)]
pub struct PyKernelModule {
    library: KernelLibrary,
}

/// Loads the kernel library at `path` on this PE (not collective): a shared library
/// built from a kernel crate with `symmem_device::export_kernels!` and the same symmem
/// and compiler as this package (checked; an error names both builds).
#[pyfunction]
pub fn load_module(py: Python<'_>, path: PathBuf) -> PyResult<PyKernelModule> {
    let rt = handle::runtime()?;
    let library = py
        .allow_threads(|| rt.load_kernel_library(&path))
        .map_err(to_py)?;
    Ok(PyKernelModule { library })
}

/// One converted argument: its bytes, and the array it points into (held for the call).
struct Argument {
    bytes: Vec<u8>,
    _array: Option<Operand>,
}

#[pymethods]
impl PyKernelModule {
    /// The kernel crate's name.
    #[getter]
    fn name(&self) -> &str {
        self.library.name()
    }

    /// Where the library was loaded from.
    #[getter]
    fn path(&self) -> PathBuf {
        self.library.path().to_path_buf()
    }

    /// Whether its kernels run on a GPU (a GPU PE) or on the CPU executor.
    #[getter]
    fn on_gpu(&self) -> bool {
        self.library.on_gpu()
    }

    /// Every kernel, by name: its parameters' Rust types (`"*mut u64"`, `"usize"`).
    #[getter]
    fn kernels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for k in self.library.kernels() {
            d.set_item(k.name, PyTuple::new(py, k.param_types)?)?;
        }
        Ok(d)
    }

    /// Runs `kernel` on a `grid` of `block`s (ints or tuples of up to three) with `args`.
    /// On a GPU PE it is queued on `stream` (a CUDA stream handle such as
    /// `torch.cuda.current_stream().cuda_stream`, or a `torch.cuda.Stream`; by default
    /// torch's current stream when torch is imported, so a launch inside
    /// `torch.cuda.stream(s)` runs on `s`) behind the work already there, and the call
    /// returns at once; without torch, or with `stream="host"`, it returns when the kernel
    /// has finished. On a CPU PE it finishes before it returns, and `stream` must be None.
    #[pyo3(signature = (kernel, grid, block, *args, stream=None))]
    fn launch(
        &self,
        py: Python<'_>,
        kernel: &str,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let op = "launch";
        let rt = handle::runtime()?;
        let how = streams::order(py, &rt, op, stream)?;
        let (grid, block) = (dim3(op, grid, "grid")?, dim3(op, block, "block")?);
        let info = self.library.kernel(kernel).map_err(to_py)?;
        if args.len() != info.params.len() {
            return Err(PyTypeError::new_err(format!(
                "{op}: kernel {kernel} takes {} arguments ({}); {} given",
                info.params.len(),
                info.param_list(),
                args.len()
            )));
        }
        let types = info.param_types;
        let converted = args
            .iter()
            .zip(info.params)
            .enumerate()
            .map(|(i, (a, p))| argument(&rt, kernel, i, &a, p.size, types.get(i).copied()))
            .collect::<PyResult<Vec<Argument>>>()?;
        let bytes: Vec<&[u8]> = converted.iter().map(|a| a.bytes.as_slice()).collect();
        let library = &self.library;
        match how {
            Order::Now => blocking(py, || {
                // SAFETY: the arguments match the kernel's parameter layout (checked by
                // size; values as Python gave them); arrays are held for the call and lie
                // on the device the kernel runs on.
                unsafe { rt.launch_by_name(library, kernel, grid, block, &bytes) }
            }),
            // SAFETY: as for the blocking launch; torch keeps the arrays' memory until the
            // stream's work that uses them has run (its caching allocator's rule).
            Order::Queued(s) => blocking(py, || unsafe {
                rt.launch_by_name_on_stream(library, kernel, grid, block, &bytes, &s)
            }),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<symmem KernelModule {} from {} ({} kernels, on {})>",
            self.library.name(),
            self.library.path().display(),
            self.library.kernels().len(),
            if self.library.on_gpu() {
                "the GPU"
            } else {
                "the CPU executor"
            }
        )
    }
}

/// `obj` (an int or a tuple of up to three) as a grid or block shape.
fn dim3(op: &str, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Dim3> {
    let bad = || {
        PyTypeError::new_err(format!(
            "{op}: {what} must be a positive int or a tuple of one to three, not {obj}"
        ))
    };
    let dims: Vec<u32> = if let Ok(n) = obj.extract::<u32>() {
        vec![n]
    } else {
        obj.extract::<Vec<u32>>().map_err(|_| bad())?
    };
    if dims.is_empty() || dims.len() > 3 || dims.contains(&0) {
        return Err(bad());
    }
    let at = |i: usize| dims.get(i).copied().unwrap_or(1);
    Ok(Dim3::new(at(0), at(1), at(2)))
}

/// What a parameter takes from Python, by its Rust type.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ParamKind {
    /// A raw pointer: an array (its first element's address), an int address, or None.
    Pointer,
    /// An integer type.
    Int { signed: bool },
    /// `bool`.
    Bool,
    /// `f32` or `f64`.
    Float,
    /// A type Python cannot build (a struct such as `DeviceTeam`).
    Other,
    /// Not known (a library without types): judged by size alone.
    Unknown,
}

impl ParamKind {
    /// The kind of a parameter of Rust type `ty` (as `stringify!` writes it).
    fn of(ty: Option<&str>) -> Self {
        let Some(ty) = ty else {
            return ParamKind::Unknown;
        };
        let ty = ty.trim();
        if ty.starts_with('*') {
            return ParamKind::Pointer;
        }
        match ty.rsplit("::").next().unwrap_or(ty).trim() {
            "u8" | "u16" | "u32" | "u64" | "usize" => ParamKind::Int { signed: false },
            "i8" | "i16" | "i32" | "i64" | "isize" => ParamKind::Int { signed: true },
            "bool" => ParamKind::Bool,
            "f32" | "f64" => ParamKind::Float,
            _ => ParamKind::Other,
        }
    }
}

/// Whether an array of `dtype` may be passed to a parameter of pointer type `ty` (as
/// `stringify!` writes it, `*mut u64`): integers of the pointee's size (either sign, as
/// torch has few unsigned types), the pointee's own float type, one-byte arrays for fp8
/// and bool, any array for a byte pointer (`u8`, `i8`), and any for a pointee Python does
/// not know (a struct, a generic parameter, `c_void`).
fn pointee_accepts(ty: &str, dtype: DType) -> bool {
    let pointee = ty.trim().trim_start_matches('*').trim_start();
    let pointee = pointee
        .strip_prefix("mut ")
        .or_else(|| pointee.strip_prefix("const "))
        .unwrap_or(pointee)
        .trim();
    let ints_of = |size: usize| {
        matches!(
            dtype,
            DType::I8
                | DType::I16
                | DType::I32
                | DType::I64
                | DType::U8
                | DType::U16
                | DType::U32
                | DType::U64
        ) && dtype.size() == size
    };
    match pointee.rsplit("::").next().unwrap_or(pointee) {
        "u8" | "i8" => true,
        "u16" | "i16" => ints_of(2),
        "u32" | "i32" => ints_of(4),
        "u64" | "i64" | "usize" | "isize" => ints_of(8),
        "f16" => dtype == DType::F16,
        "bf16" => dtype == DType::Bf16,
        "f32" => dtype == DType::F32,
        "f64" => dtype == DType::F64,
        "bool" | "Fp8E4M3" | "Fp8E5M2" => matches!(dtype, DType::Bool | DType::U8 | DType::I8),
        _ => true,
    }
}

/// The int `obj` as `size` little-endian bytes, if it fits a signed (`signed`) or
/// unsigned integer of that size; `None` for either where the type is not known.
fn int_bytes(obj: &Bound<'_, PyAny>, size: usize, signed: Option<bool>) -> Option<Vec<u8>> {
    let v: i128 = obj.extract().ok()?;
    let bits = 8 * size as u32;
    if size == 0 || size > 8 {
        return None;
    }
    let (lo, hi) = match signed {
        Some(true) => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
        Some(false) => (0, (1i128 << bits) - 1),
        None => (-(1i128 << (bits - 1)), (1i128 << bits) - 1),
    };
    (lo..=hi)
        .contains(&v)
        .then(|| v.to_le_bytes()[..size].to_vec())
}

/// Argument `i` of `kernel`, for a parameter of `size` bytes and Rust type `ty`.
fn argument(
    rt: &Runtime,
    kernel: &str,
    i: usize,
    obj: &Bound<'_, PyAny>,
    size: usize,
    ty: Option<&str>,
) -> PyResult<Argument> {
    let what = format!("argument {i} of kernel {kernel}");
    let ty_text = ty.map_or_else(|| format!("{size} bytes"), |t| t.to_string());
    let kind = ParamKind::of(ty);
    let bytes = |bytes: Vec<u8>| Argument {
        bytes,
        _array: None,
    };
    let is_int = obj.is_instance_of::<PyInt>();
    match kind {
        ParamKind::Other => {
            return Err(PyTypeError::new_err(format!(
                "launch: parameter {i} of kernel {kernel} has type {ty_text}, which a launch from Python cannot build"
            )))
        }
        ParamKind::Pointer | ParamKind::Unknown if obj.hasattr("__dlpack__")? => {
            if size != std::mem::size_of::<usize>() {
                return Err(PyTypeError::new_err(format!(
                    "launch: {what} is an array, passed by address, but its parameter is {ty_text}"
                )));
            }
            let array = operands::kernel_array(rt, "launch", obj, &what)?;
            if let Some(ty) = ty.filter(|t| !pointee_accepts(t, array.dtype)) {
                return Err(PyTypeError::new_err(format!(
                    "launch: {what} is an array of {}, but its parameter is {ty}",
                    array.dtype.name()
                )));
            }
            return Ok(Argument {
                bytes: array.addr.to_le_bytes().to_vec(),
                _array: Some(array),
            });
        }
        ParamKind::Pointer if obj.is_none() => return Ok(bytes(vec![0; size])),
        ParamKind::Pointer | ParamKind::Int { .. } | ParamKind::Bool | ParamKind::Unknown
            if is_int =>
        {
            let signed = match kind {
                ParamKind::Int { signed } => Some(signed),
                ParamKind::Unknown => None,
                _ => Some(false),
            };
            let converted = int_bytes(obj, size, signed)
                .filter(|_| kind != ParamKind::Bool || matches!(obj.extract::<u8>(), Ok(0 | 1)));
            return converted.map(bytes).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "launch: {what} is {obj}, which does not fit its parameter of type {ty_text}"
                ))
            });
        }
        ParamKind::Float | ParamKind::Unknown
            if obj.is_instance_of::<PyFloat>() || (kind == ParamKind::Float && is_int) =>
        {
            let v: f64 = obj.extract()?;
            return match size {
                4 => Ok(bytes((v as f32).to_le_bytes().to_vec())),
                8 => Ok(bytes(v.to_le_bytes().to_vec())),
                _ => Err(PyTypeError::new_err(format!(
                    "launch: {what} is a float, but its parameter is {ty_text} (a float is passed as f32 or f64)"
                ))),
            };
        }
        _ => {}
    }
    let wanted = match kind {
        ParamKind::Pointer => {
            "an array (a symmetric array, numpy array or torch tensor), an int address or None"
        }
        ParamKind::Int { .. } => "an int",
        ParamKind::Bool => "a bool",
        ParamKind::Float => "a float",
        ParamKind::Other | ParamKind::Unknown => "an array, an int or a float",
    };
    Err(PyTypeError::new_err(format!(
        "launch: {what} is a {}, but its parameter is {ty_text}: it takes {wanted}",
        obj.get_type().name()?
    )))
}
