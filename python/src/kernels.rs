//! Rust kernels from Python: `symmem.load_module(path)` loads a kernel library (a shared
//! library that exports a kernel crate's kernels with `symmem_device::export_kernels!`)
//! and `module.launch(kernel, grid, block, *args, stream=None)` runs one of its kernels,
//! on the GPU on GPU PEs and on the CPU executor on CPU PEs.
//!
//! Arguments are converted by the kernel's parameter layout: arrays (symmetric arrays,
//! numpy arrays, torch tensors) by the address of their first element, Python ints as
//! integers of the parameter's size (range-checked), floats as `f32` or `f64`. Their count
//! and sizes are checked against the kernel's parameters first.

use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyTuple};
use symmem::{Dim3, KernelLibrary, Runtime};

use crate::errors::to_py;
use crate::handle;
use crate::operands::{self, Operand};
use crate::ops::blocking;

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

    /// Every kernel, by name: the sizes of its parameters in bytes.
    #[getter]
    fn kernels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for k in self.library.kernels() {
            let sizes: Vec<usize> = k.params.iter().map(|p| p.size).collect();
            d.set_item(k.name, PyTuple::new(py, sizes)?)?;
        }
        Ok(d)
    }

    /// Runs `kernel` on a `grid` of `block`s (ints or tuples of up to three) with `args`,
    /// and returns when it has finished. With `stream` (a CUDA stream handle, such as
    /// `torch.cuda.current_stream().cuda_stream`) on a GPU PE, the kernel is queued on
    /// that stream behind torch's own work and the call returns at once; on a CPU PE
    /// `stream` must be None.
    #[pyo3(signature = (kernel, grid, block, *args, stream=None))]
    fn launch(
        &self,
        py: Python<'_>,
        kernel: &str,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        stream: Option<usize>,
    ) -> PyResult<()> {
        let op = "launch";
        let rt = handle::runtime()?;
        let (grid, block) = (dim3(op, grid, "grid")?, dim3(op, block, "block")?);
        let Some(info) = self
            .library
            .kernels()
            .into_iter()
            .find(|k| k.name == kernel)
        else {
            let names: Vec<_> = self.library.kernels().iter().map(|k| k.name).collect();
            return Err(PyValueError::new_err(format!(
                "{op}: kernel library {} has no kernel {kernel:?}; it has {}",
                self.library.name(),
                names.join(", ")
            )));
        };
        if args.len() != info.params.len() {
            let sizes: Vec<String> = info
                .params
                .iter()
                .map(|p| format!("{} B", p.size))
                .collect();
            return Err(PyTypeError::new_err(format!(
                "{op}: kernel {kernel} takes {} arguments ({}); {} given",
                info.params.len(),
                sizes.join(", "),
                args.len()
            )));
        }
        let converted = args
            .iter()
            .zip(info.params)
            .enumerate()
            .map(|(i, (a, p))| argument(&rt, kernel, i, &a, p.size))
            .collect::<PyResult<Vec<Argument>>>()?;
        let bytes: Vec<&[u8]> = converted.iter().map(|a| a.bytes.as_slice()).collect();
        let library = &self.library;
        match stream {
            None => blocking(py, || {
                // SAFETY: the arguments match the kernel's parameter layout (checked by
                // size; values as Python gave them); arrays are held for the call and lie
                // on the device the kernel runs on.
                unsafe { rt.launch_by_name(library, kernel, grid, block, &bytes) }
            }),
            Some(handle) => {
                launch_on_stream(py, &rt, library, kernel, (grid, block), &bytes, handle)
            }
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

/// Queues the launch on the CUDA stream `handle` (GPU PEs only).
fn launch_on_stream(
    py: Python<'_>,
    rt: &Runtime,
    library: &KernelLibrary,
    kernel: &str,
    (grid, block): (Dim3, Dim3),
    bytes: &[&[u8]],
    handle: usize,
) -> PyResult<()> {
    if !library.on_gpu() {
        return Err(PyValueError::new_err(format!(
            "launch: stream= is for GPU PEs; PE {} runs kernels on the CPU executor, where a launch finishes before it returns (pass stream=None)",
            rt.my_pe()
        )));
    }
    blocking(py, || {
        // SAFETY: the caller's stream handle, of this PE's context (checked).
        let stream = unsafe { rt.stream_from_raw(handle) }?;
        // SAFETY: as for the blocking launch; torch keeps the arrays' memory until the
        // stream's work that uses them has run (its caching allocator's rule).
        unsafe { rt.launch_by_name_on_stream(library, kernel, grid, block, bytes, &stream) }
    })
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

/// Argument `i` of `kernel` as the `size` bytes of its parameter.
fn argument(
    rt: &Runtime,
    kernel: &str,
    i: usize,
    obj: &Bound<'_, PyAny>,
    size: usize,
) -> PyResult<Argument> {
    let what = format!("argument {i} of kernel {kernel}");
    if obj.is_instance_of::<PyInt>() {
        let v: i128 = obj.extract().map_err(|_| {
            PyValueError::new_err(format!("launch: {what} ({obj}) does not fit in 128 bits"))
        })?;
        let bits = 8 * size as u32;
        let fits = size <= 8 && v >= -(1i128 << (bits - 1)) && v < (1i128 << bits);
        if !fits {
            return Err(PyValueError::new_err(format!(
                "launch: {what} is {v}, which does not fit its {size}-byte parameter"
            )));
        }
        return Ok(Argument {
            bytes: v.to_le_bytes()[..size].to_vec(),
            _array: None,
        });
    }
    if obj.is_instance_of::<PyFloat>() {
        let v: f64 = obj.extract()?;
        let bytes = match size {
            4 => (v as f32).to_le_bytes().to_vec(),
            8 => v.to_le_bytes().to_vec(),
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "launch: {what} is a float, but its parameter has {size} bytes (a float is passed as f32 or f64)"
                )))
            }
        };
        return Ok(Argument {
            bytes,
            _array: None,
        });
    }
    if obj.hasattr("__dlpack__")? {
        if size != std::mem::size_of::<usize>() {
            return Err(PyTypeError::new_err(format!(
                "launch: {what} is an array, passed by address, but its parameter has {size} bytes"
            )));
        }
        let array = operands::kernel_array(rt, "launch", obj, &what)?;
        return Ok(Argument {
            bytes: array.addr.to_le_bytes().to_vec(),
            _array: Some(array),
        });
    }
    Err(PyTypeError::new_err(format!(
        "launch: {what} is a {}; kernels take arrays (symmetric arrays, numpy arrays, torch tensors), ints and floats",
        obj.get_type().name()?
    )))
}
