//! `stream=` of the Python operations: whether a call runs at once on the calling thread
//! or is queued on a CUDA stream of this PE's GPU, and which stream.
//!
//! The rules (docs/src/python.md, "Streams"):
//! - CPU PEs: `stream=None` (the default) runs the call at once; a CUDA stream is refused.
//! - GPU PEs: `stream=None` means torch's current stream on the PE's GPU when torch is
//!   already imported (in `sys.modules`; symmem never imports it); an int handle or a
//!   `torch.cuda.Stream` names one. The call is queued there and returns at once.
//! - `stream="host"` asks for the host-blocking form on any PE.
//! - Transfers with a host array as their local operand take the host-blocking form on
//!   every PE; on a GPU PE with a default stream, after that stream's earlier work (which
//!   may write the symmetric operand). A CUDA tensor as the local operand is queued: on
//!   the stream given, else torch's current one, else the legacy default stream.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};
use symmem::{Runtime, Stream};

use crate::blocking::blocking;
use crate::dlpack::DEVICE_CUDA;
use crate::operands::Operand;

/// How a call runs.
pub enum Order {
    /// At once, on the calling thread: the host form.
    Now,
    /// Queued on this CUDA stream of the PE's GPU.
    Queued(Stream),
}

/// The `stream=` argument as the caller gave it.
enum Given {
    /// None: the default.
    Default,
    /// `"host"`: the host-blocking form.
    Host,
    /// A CUDA stream handle (`CUstream` as an int).
    Handle(usize),
}

/// Reads `stream=` of `op`: None, `"host"`, an int handle, or an object with a
/// `cuda_stream` handle (`torch.cuda.Stream`).
fn given(op: &str, stream: Option<&Bound<'_, PyAny>>) -> PyResult<Given> {
    let Some(s) = stream.filter(|s| !s.is_none()) else {
        return Ok(Given::Default);
    };
    let bad = || {
        PyTypeError::new_err(format!(
            "{op}: stream must be None, \"host\", a CUDA stream handle (an int such as torch.cuda.current_stream().cuda_stream) or a torch.cuda.Stream, not {s}"
        ))
    };
    if s.is_instance_of::<PyString>() {
        return match s.extract::<String>()?.as_str() {
            "host" => Ok(Given::Host),
            _ => Err(bad()),
        };
    }
    if s.is_instance_of::<PyBool>() {
        return Err(bad());
    }
    let handle = if s.hasattr("cuda_stream")? {
        s.getattr("cuda_stream")?
    } else {
        s.clone()
    };
    let handle: i128 = handle.extract().map_err(|_| bad())?;
    usize::try_from(handle).map(Given::Handle).map_err(|_| {
        PyValueError::new_err(format!(
            "{op}: stream handle {handle} is not a CUDA stream handle (an address, 0 for the legacy default stream)"
        ))
    })
}

/// The handle of torch's current stream on this PE's GPU, when torch is already imported
/// (it is never imported here).
fn torch_current(py: Python<'_>, ordinal: usize) -> PyResult<Option<usize>> {
    let modules = py.import("sys")?.getattr("modules")?;
    let Ok(torch) = modules.get_item("torch") else {
        return Ok(None);
    };
    let current = torch
        .getattr("cuda")?
        .call_method1("current_stream", (ordinal,))?;
    Ok(Some(current.getattr("cuda_stream")?.extract()?))
}

/// The error of a CUDA stream given to a CPU PE's `op`.
fn cpu_pe(rt: &Runtime, op: &str) -> PyErr {
    PyValueError::new_err(format!(
        "{op}: stream= is for GPU PEs (it names a CUDA stream); PE {} is a CPU PE, whose operations run at once (pass stream=None)",
        rt.my_pe()
    ))
}

/// `handle` as a stream of this PE's GPU.
fn borrowed(rt: &Runtime, handle: usize) -> PyResult<Stream> {
    // SAFETY: a handle the caller (or torch, for its current stream) holds alive for the
    // call; the runtime checks that it belongs to this PE's context. Work queued on it
    // keeps running after the call, as with any CUDA stream.
    unsafe { rt.stream_from_raw(handle) }.map_err(crate::errors::to_py)
}

/// Waits, on a GPU PE with torch imported, for the work on torch's current stream: what a
/// host collective over a team (a split, `destroy`) does first, so that a team collective
/// queued there by default has run before the host one advances or clears the team's
/// barrier state. Nothing to do elsewhere.
pub fn settle(py: Python<'_>, rt: &Runtime) -> PyResult<()> {
    let Some(g) = rt.gpu_ordinal() else {
        return Ok(());
    };
    match torch_current(py, g)? {
        Some(h) => {
            let s = borrowed(rt, h)?;
            blocking(py, || s.synchronize())
        }
        None => Ok(()),
    }
}

/// How `op`, which has no local operand (a wait, quiet, a barrier, a collective), runs
/// for `stream=`.
pub fn order(
    py: Python<'_>,
    rt: &Runtime,
    op: &str,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<Order> {
    match (given(op, stream)?, rt.gpu_ordinal()) {
        (Given::Host, _) | (Given::Default, None) => Ok(Order::Now),
        (Given::Handle(_), None) => Err(cpu_pe(rt, op)),
        (Given::Handle(h), Some(_)) => Ok(Order::Queued(borrowed(rt, h)?)),
        (Given::Default, Some(g)) => match torch_current(py, g)? {
            Some(h) => Ok(Order::Queued(borrowed(rt, h)?)),
            None => Ok(Order::Now),
        },
    }
}

/// How transfer `op` runs for `stream=`, given its local operand `local` (named `what`):
/// a CUDA tensor is queued, a host array moves at once (see the module docs).
pub fn transfer_order(
    py: Python<'_>,
    rt: &Runtime,
    op: &str,
    stream: Option<&Bound<'_, PyAny>>,
    local: &Operand,
    what: &str,
) -> PyResult<Order> {
    let given = given(op, stream)?;
    let on_cuda = local.device.device_type == DEVICE_CUDA;
    match (given, rt.gpu_ordinal()) {
        (Given::Handle(_), None) => Err(cpu_pe(rt, op)),
        (Given::Host, _) if on_cuda => Err(PyValueError::new_err(format!(
            "{op}: stream=\"host\" moves host arrays, but {what} is a CUDA tensor (on {}); leave stream unset or name a CUDA stream",
            local.device.describe()
        ))),
        (Given::Host, _) | (Given::Default, None) => Ok(Order::Now),
        (Given::Handle(_), Some(_)) if !on_cuda => Err(PyValueError::new_err(format!(
            "{op}: stream= queues the transfer on a CUDA stream, which moves CUDA tensors, but {what} is in host memory (on {}); leave stream unset for the blocking host form",
            local.device.describe()
        ))),
        (Given::Handle(h), Some(_)) => Ok(Order::Queued(borrowed(rt, h)?)),
        (Given::Default, Some(g)) => match (torch_current(py, g)?, on_cuda) {
            (Some(h), true) => Ok(Order::Queued(borrowed(rt, h)?)),
            // No torch: the legacy default stream, which cupy and numba use by default.
            (None, true) => Ok(Order::Queued(borrowed(rt, 0)?)),
            (Some(h), false) => {
                // The host form, after the stream's earlier work on the symmetric operand.
                let s = borrowed(rt, h)?;
                blocking(py, || s.synchronize())?;
                Ok(Order::Now)
            }
            (None, false) => Ok(Order::Now),
        },
    }
}
